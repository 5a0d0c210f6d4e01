/* Lockstep CUDA driver (internal): the library's transcendental functions
 * (docs/numerics.md section 7) in device code.  These are the very
 * sequences of backends/transcendental.h, compiled for the GPU through
 * LK_SCALAR: with -fmad=false every + - * / there is one IEEE operation
 * and fmaf one fused multiply-add, exactly as on the CPU. */
#ifndef LK_CUDA_MATH_CUH
#define LK_CUDA_MATH_CUH

#include "backends/transcendental.h"

static __device__ __forceinline__ float lk_cu_exp(float x) { return lk_expf(x); }
static __device__ __forceinline__ float lk_cu_log(float x) { return lk_logf(x); }
static __device__ __forceinline__ float lk_cu_tanh(float x) { return lk_tanhf(x); }
static __device__ __forceinline__ float lk_cu_erf(float x) { return lk_erff(x); }
static __device__ __forceinline__ float lk_cu_sigmoid(float x) { return lk_sigmoidf(x); }
static __device__ __forceinline__ float lk_cu_silu(float x) { return lk_siluf(x); }
static __device__ __forceinline__ float lk_cu_gelu_tanh(float x) { return lk_gelu_tanhf(x); }
static __device__ __forceinline__ float lk_cu_gelu_erf(float x) { return lk_gelu_erff(x); }

/* relu as the reference's: a NaN passes through, -0 becomes +0 */
static __device__ __forceinline__ float lk_cu_relu(float x)
{
    if (lk_isnan(x))
        return x;
    return x > 0.0f ? x : 0.0f;
}

/* relu(x)^2, LK_UNARY_RELU2's sequence */
static __device__ __forceinline__ float lk_cu_relu2(float x)
{
    const float r = lk_cu_relu(x);
    return __fmul_rn(r, r);
}

#endif
