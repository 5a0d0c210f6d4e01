/* Lockstep reference: packing to and from LK_T2 (docs/formats.md) and the
 * ternary GEMM (docs/numerics.md section 9). */
#include "backends/host.h"
#include "backends/ref/qgemm_epilogue.h"
#include "backends/ref/ref.h"
#include "backends/ref/t2.h"

lk_status lk_ref_ternary_pack(const lk_pack_args *p)
{
    const lk_tensor *w = &p->src;
    /* every value is checked before the first byte is written */
    for (int64_t r = 0; r < w->rows; r++) {
        const int8_t *src = (const int8_t *)w->data + r * w->ld;
        for (int64_t c = 0; c < w->cols; c++)
            if (src[c] < -1 || src[c] > 1)
                return lk_kernel_error(LK_ERR_INVALID_VALUE,
                                       "lk_ternary_pack: w[%lld, %lld] = %d is not -1, 0 or 1",
                                       (long long)r, (long long)c, (int)src[c]);
    }
    for (int64_t r = 0; r < w->rows; r++)
        lk_t2_pack_row((const int8_t *)w->data + r * w->ld, w->cols, lk_t2_row(&p->dst, r));
    return LK_OK;
}

lk_status lk_ref_ternary_unpack(const lk_pack_args *p)
{
    for (int64_t r = 0; r < p->src.rows; r++) {
        const uint8_t *row = lk_t2_row(&p->src, r);
        int8_t *out = (int8_t *)p->dst.data + r * p->dst.ld;
        for (int64_t c = 0; c < p->src.cols; c++)
            out[c] = (int8_t)lk_t2_get(row, c);
    }
    return LK_OK;
}

/* acc = sum_k x[m, k] * w[n, k], exact: every term is at most 128 * 2 in
 * magnitude and the core refuses K > LK_TERNARY_MAX_K, so int32 holds every
 * partial sum and the order does not matter. */
lk_status lk_ref_ternary_gemm(const lk_qgemm_args *q)
{
    for (int64_t m = 0; m < q->m; m++)
        for (int64_t n = 0; n < q->n; n++) {
            int32_t acc = 0;
            /* K = 0 reads no element, and forms no row pointer: the
             * prepared copy of a w of 0 columns has no memory (data NULL),
             * and even a zero offset from NULL is undefined */
            if (q->k > 0) {
                const int8_t *xr = (const int8_t *)q->x.data + m * q->x.ld;
                const uint8_t *wr = lk_t2_row(&q->w, n);
                for (int64_t k = 0; k < q->k; k++)
                    acc += (int32_t)xr[k] * lk_t2_get(wr, k);
            }
            lk_ref_qgemm_store(q, m, n, acc);
        }
    return LK_OK;
}
