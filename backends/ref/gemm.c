/* Lockstep reference: dot products and GEMM (docs/numerics.md section 4).
 *
 * One output element at a time, in the contract's order: K in blocks of
 * LK_KB, fma chain from +0 inside a block, the first block stored and later
 * blocks added left to right, then bias, then C's old value, then one
 * rounding at the store.  Elements are widened as they are read, so mixed
 * dtypes need no buffers and the kernel cannot fail. */
#include <math.h>

#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "numerics/contract.h"

/* op(A)[m, k] of matrix b: a is M x K, or K x M when transposed. */
static float load_a(const lk_gemm_args *g, int64_t b, int64_t m, int64_t k)
{
    int64_t base = b * g->a.batch_stride;
    int64_t i = g->ta == LK_TRANS ? k * g->a.ld + m : m * g->a.ld + k;
    return lk_ref_load(g->a.data, g->a.dtype, base + i);
}

/* op(B)[k, n] of matrix b: b is K x N, or N x K when transposed. */
static float load_b(const lk_gemm_args *g, int64_t b, int64_t k, int64_t n)
{
    int64_t base = b * g->b.batch_stride;
    int64_t i = g->tb == LK_TRANS ? n * g->b.ld + k : k * g->b.ld + n;
    return lk_ref_load(g->b.data, g->b.dtype, base + i);
}

static float dot(const lk_gemm_args *g, int64_t b, int64_t m, int64_t n)
{
    float total = 0.0f; /* K == 0 gives +0 */
    for (int64_t k0 = 0; k0 < g->k; k0 += LK_KB) {
        int64_t k1 = g->k - k0 < LK_KB ? g->k : k0 + LK_KB;
        float acc = 0.0f;
        for (int64_t k = k0; k < k1; k++)
            acc = fmaf(load_a(g, b, m, k), load_b(g, b, k, n), acc);
        /* storing the first block keeps a -0 block sum (-0 + +0 is +0) */
        total = k0 == 0 ? acc : total + acc;
    }
    return total;
}

lk_status lk_ref_gemm(const lk_gemm_args *g)
{
    for (int64_t b = 0; b < g->batch; b++) {
        int64_t cbase = b * g->c.batch_stride;
        for (int64_t m = 0; m < g->m; m++) {
            for (int64_t n = 0; n < g->n; n++) {
                int64_t ci = cbase + m * g->c.ld + n;
                float t = dot(g, b, m, n);
                if (g->bias.data != NULL)
                    t = t + lk_ref_load(g->bias.data, g->bias.dtype,
                                        b * g->bias.batch_stride + n);
                if (g->flags & LK_GEMM_ACCUMULATE)
                    t = t + lk_ref_load(g->c.data, g->c.dtype, ci);
                lk_ref_store(g->c.data, g->c.dtype, ci, t);
            }
        }
    }
    return LK_OK;
}
