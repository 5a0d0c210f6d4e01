/* Lockstep CUDA driver (internal): prepared weights (weights.cu) and the
 * GEMV kernels that read them (linear.cu).
 *
 * Float weights (f32/bf16/f16): rows in groups of 8, each group cut into
 * the contract's 128-k blocks; a (group, block) unit holds, for piece j of
 * 16 bytes (8 bf16/f16 or 4 f32 of k), the pieces of the group's 8 rows
 * side by side:
 *     unit(g, kb) = [piece j < PPC][row r < 8][16 bytes]
 * so eight threads that each own one row's chain of block kb read 128
 * contiguous bytes per load, and the units of consecutive groups are one
 * contiguous run.  Past K the weights are -0 and x is +0: fma(+0, -0, acc)
 * adds -0, which leaves every acc (+0 included) unchanged, so a padded
 * chain has the bits of the contract's shorter one.  Rows past N are 0
 * and never stored.
 *
 * Ternary weights (dt LK_T2) keep the canonical LK_T2 rows, copied with
 * a row pitch of whole 16-byte pieces (ldw codes) and the scales after
 * them in the same allocation: lk_ternary_linear runs lk_ternary_gemm's
 * kernels on them, told that no op writes them (ternary.cu). */
#ifndef LK_CUDA_LINEAR_CUH
#define LK_CUDA_LINEAR_CUH

#include "backends/cuda/device.cuh"

#define LK_LIN_G 8                      /* rows per group */
#define LK_LIN_XPAD 132                 /* floats per 128-k block of x in shared memory */
#define LK_LIN_SMEM_CAP (160 * 1024)    /* dynamic shared memory the kernels opt in to */
#define LK_LIN_MT_MAX 8                 /* rows of x per launch (more: grid.y) */

typedef struct lk_cuda_weights {
    lk_dtype dt;          /* LK_F32, LK_BF16 or LK_F16 */
    int64_t n, k;
    int64_t groups;       /* ceil(n / 8) */
    int64_t nkb;          /* ceil(k / 128) */
    void *w;              /* the layout above */
    size_t bytes;
    int64_t ldw;          /* LK_T2: codes per row of w */
    void *scale;          /* LK_T2: scale_n f32 (1 or n), inside w's allocation */
    int64_t scale_n;
    void *tc;             /* LK_T2 on sm_90: the codes in tc/wgmma_int8.cu's layout, or NULL */
} lk_cuda_weights;

/* bytes of prepared weights (no op writes them) into L2, issued by the
 * block before lk_pdl_wait() so that they stream while the previous kernel
 * finishes: one bulk request per 64 KiB on sm_90 (p and bytes multiples of
 * 16), one line request per 128 bytes below. */
static __device__ __forceinline__ void lk_prefetch_l2(const void *p, int64_t bytes)
{
    const char *c = (const char *)p;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    for (int64_t o = (int64_t)threadIdx.x * 65536; o < bytes; o += (int64_t)blockDim.x * 65536) {
        const uint32_t sz = (uint32_t)(bytes - o < 65536 ? bytes - o : 65536);
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(c + o), "r"(sz) : "memory");
    }
#else
    for (int64_t o = (int64_t)threadIdx.x * 128; o < bytes; o += (int64_t)blockDim.x * 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(c + o));
#endif
}

/* weights_prepare of LK_T2 weights (ternary.cu) */
lk_status lk_cuda_t2_prepare(lk_op_scope &op, const lk_weights_args *a, void **out);

/* Largest K (in 128-blocks) the float kernel takes with one row of x in
 * shared memory and one group per block, for a given shared memory limit. */
static inline int64_t lk_lin_max_nkb(size_t smem)
{
    return (int64_t)(smem / (sizeof(float) * (LK_LIN_XPAD + LK_LIN_G)));
}

static inline size_t lk_lin_smem_limit(const lk_cuda_device *dev)
{
    return dev->smem_optin < LK_LIN_SMEM_CAP ? dev->smem_optin : LK_LIN_SMEM_CAP;
}


#endif
