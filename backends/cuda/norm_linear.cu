/* Lockstep CUDA driver: lk_rmsnorm_ternary_linear.
 *
 * The op is defined as lk_rmsnorm_quantize then lk_ternary_linear
 * (docs/numerics.md).  Decode shapes run ternary.cu's fused GEMV, whose
 * blocks each compute the RMSNorm and quantisation of x themselves (one
 * kernel instead of two); every other case runs the two kernels in
 * sequence, which is the definition itself. */
#include "backends/cuda/linear.cuh"

extern "C" lk_status lk_cuda_rmsnorm_ternary_linear(void *queue, const lk_norm_linear_args *a)
{
    lk_status st = LK_OK;
    if (lk_cuda_norm_t2_gemv(queue, a, &st))
        return st;
    st = lk_cuda_rmsnorm_quantize(queue, &a->norm);
    if (st != LK_OK)
        return st;
    return lk_cuda_ternary_linear(queue, &a->lin);
}
