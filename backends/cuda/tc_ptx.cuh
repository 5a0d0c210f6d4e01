/* Lockstep CUDA driver (internal): the PTX wrappers the tensor-core kernels
 * share (tc_gemm.cu, tc_ternary.cu, tc_wgmma.cu): shared-memory addresses,
 * cp.async, ldmatrix, and dynamic shared memory opt-in done once per
 * device and kernel. */
#ifndef LK_CUDA_TC_PTX_CUH
#define LK_CUDA_TC_PTX_CUH

#include <stdint.h>

#include <cuda_runtime.h>

static __device__ __forceinline__ uint32_t lk_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* 16 bytes global -> shared; bytes < 16 zero-fills the rest (0: all zero,
 * src then only needs to be a valid address) */
static __device__ __forceinline__ void lk_cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

static __device__ __forceinline__ void lk_cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> static __device__ __forceinline__ void lk_cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

static __device__ __forceinline__ void lk_ldmatrix_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* More than 48 KiB of dynamic shared memory needs an opt-in per kernel and
 * device; done on the first launch of KERNEL on each device (ordinals
 * 0..63; a repeated call, from a race or a higher ordinal, only costs
 * time). */
template <auto KERNEL> static inline cudaError_t lk_smem_optin(int ordinal, size_t bytes)
{
    static unsigned long long done; /* one bit per device ordinal */
    const unsigned long long bit = ordinal >= 0 && ordinal < 64 ? 1ull << ordinal : 0;
    if (bytes <= 48 * 1024 || (bit && (__atomic_load_n(&done, __ATOMIC_ACQUIRE) & bit)))
        return cudaSuccess;
    cudaError_t e = cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)bytes);
    if (e == cudaSuccess && bit)
        __atomic_fetch_or(&done, bit, __ATOMIC_RELEASE);
    return e;
}

#endif
