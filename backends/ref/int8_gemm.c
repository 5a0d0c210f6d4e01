/* Lockstep reference: int8 x int8 GEMM (docs/numerics.md section 9).
 * acc = sum_k a[m, k] * b[n, k], exact: every term is at most 2^14 in
 * magnitude and the core refuses K > LK_INT8_MAX_K, so int32 holds every
 * partial sum and the order does not matter. */
#include "backends/ref/qgemm_epilogue.h"
#include "backends/ref/ref.h"

lk_status lk_ref_int8_gemm(const lk_qgemm_args *q)
{
    const int8_t *x = (const int8_t *)q->x.data;
    const int8_t *w = (const int8_t *)q->w.data;
    for (int64_t m = 0; m < q->m; m++)
        for (int64_t n = 0; n < q->n; n++) {
            int32_t acc = 0;
            /* K = 0: no row pointer from a w (or x) that may be NULL, as a
             * prepared copy of an empty w is (lk_ref_ternary_gemm) */
            if (q->k > 0) {
                const int8_t *xr = x + m * q->x.ld, *wr = w + n * q->w.ld;
                for (int64_t k = 0; k < q->k; k++)
                    acc += (int32_t)xr[k] * (int32_t)wr[k];
            }
            lk_ref_qgemm_store(q, m, n, acc);
        }
    return LK_OK;
}
