/* Lockstep CUDA driver (internal): the PTX wrappers the tensor-core kernels
 * share (the tc/ kernels, bitnet.cu): shared-memory addresses,
 * cp.async, ldmatrix, the LK_T2 decode to int8, and dynamic shared memory
 * opt-in done once per device and kernel. */
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

/* Byte i of g holds four LK_T2 codes (k = 4i .. 4i + 3); o[i] gets their
 * values code - 1 as four int8, k ascending in the bytes. */
static __device__ __forceinline__ void lk_t2_expand(uint32_t g, uint32_t (&o)[4])
{
    uint32_t c0 = g & 0x03030303u, c1 = (g >> 2) & 0x03030303u;
    uint32_t c2 = (g >> 4) & 0x03030303u, c3 = (g >> 6) & 0x03030303u;
    /* code - 1 in each byte with no carry between bytes: code + 127 lies
     * in 127 .. 130, and flipping bit 7 gives -1 .. 2 (one operation
     * fewer than (code | 128) - 1, whose two constants ptxas does not fold
     * into one LOP3) */
    c0 = (c0 + 0x7F7F7F7Fu) ^ 0x80808080u;
    c1 = (c1 + 0x7F7F7F7Fu) ^ 0x80808080u;
    c2 = (c2 + 0x7F7F7F7Fu) ^ 0x80808080u;
    c3 = (c3 + 0x7F7F7F7Fu) ^ 0x80808080u;
    /* c_e holds code e of every byte: transpose the 4 x 4 bytes */
    const uint32_t t0 = __byte_perm(c0, c1, 0x5140), t1 = __byte_perm(c2, c3, 0x5140);
    const uint32_t t2 = __byte_perm(c0, c1, 0x7362), t3 = __byte_perm(c2, c3, 0x7362);
    o[0] = __byte_perm(t0, t1, 0x5410);
    o[1] = __byte_perm(t0, t1, 0x7632);
    o[2] = __byte_perm(t2, t3, 0x5410);
    o[3] = __byte_perm(t2, t3, 0x7632);
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
