/* Lockstep reference: the store of the integer GEMMs (docs/numerics.md
 * section 9), shared by lk_ref_int8_gemm and lk_ref_ternary_gemm. */
#ifndef LK_REF_QGEMM_EPILOGUE_H
#define LK_REF_QGEMM_EPILOGUE_H

#include <lockstep/driver.h>

#include "backends/ref/load_store.h"

/* y[m, n] = acc as int32 without scales, else
 * ((float)acc / x_scale[m]) * w_scale[n, or 0 when w_scale is 1 x 1],
 * added to y's old value with LK_GEMM_ACCUMULATE.
 * acc fits in int32 (the core enforces the K limits); (float) of it rounds
 * to nearest even. */
static inline void lk_ref_qgemm_store(const lk_qgemm_args *q, int64_t m, int64_t n,
                                      int32_t acc)
{
    int64_t yi = m * q->y.ld + n;
    if (q->x_scale.data == NULL) {
        ((int32_t *)q->y.data)[yi] = acc;
        return;
    }
    float xs = lk_ref_load(q->x_scale.data, q->x_scale.dtype, m * q->x_scale.ld);
    float ws = lk_ref_load(q->w_scale.data, q->w_scale.dtype,
                           q->w_scale.cols == 1 ? 0 : n);
    float v = ((float)acc / xs) * ws;
    /* y is f32 here (the core's rule): the old value first, one rounding,
     * the bits of lk_binary ADD of y and the plain store */
    if (q->flags & LK_GEMM_ACCUMULATE)
        v = lk_ref_load(q->y.data, q->y.dtype, yi) + v;
    lk_ref_store(q->y.data, q->y.dtype, yi, v);
}

#endif
