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
 * Ternary weights are not prepared (weights.cu says why). */
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
} lk_cuda_weights;

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
