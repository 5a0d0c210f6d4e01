/* Lockstep reference: BitNet b1.58 quantisation (docs/numerics.md
 * section 8): int8 activations per row by absmax, ternary weights per
 * tensor by absmean. */
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/ref/t2.h"
#include "numerics/scalar.h"

/* rne(clamp(v, lo, hi)) with NaN mapped to 0 first, as an int8. */
static int8_t quantize(float v, float lo, float hi)
{
    if (lk_isnan(v))
        return 0;
    return (int8_t)lk_rne(lk_minimum(lk_maximum(v, lo), hi));
}

lk_status lk_ref_quantize_act(const lk_quant_args *a)
{
    const lk_tensor *x = &a->x;
    for (int64_t r = 0; r < x->rows; r++) {
        int64_t xb = r * x->ld;
        float amax = 0.0f; /* |x| >= +0, so +0 is the identity of maximum here */
        for (int64_t c = 0; c < x->cols; c++)
            amax = lk_maximum(amax, lk_fabs(lk_ref_load(x->data, x->dtype, xb + c)));
        float d = lk_maximum(amax, LK_QUANT_EPS);
        float s = 127.0f / d;
        int8_t *q = (int8_t *)a->q.data + r * a->q.ld;
        for (int64_t c = 0; c < x->cols; c++)
            q[c] = quantize(lk_ref_load(x->data, x->dtype, xb + c) * s, -128.0f, 127.0f);
        lk_ref_store(a->scale.data, a->scale.dtype, r * a->scale.ld, s);
    }
    return LK_OK;
}

lk_status lk_ref_quantize_ternary(const lk_quant_args *a)
{
    const lk_tensor *w = &a->x;
    int64_t n = w->rows, k = w->cols;
    if (n <= 0 || k <= 0)
        return LK_OK; /* no elements: a no-op, like every op on an empty tensor */

    float *absrow = malloc((size_t)k * sizeof *absrow);
    float *rs = malloc((size_t)n * sizeof *rs);
    int8_t *t = malloc((size_t)k);
    if (absrow == NULL || rs == NULL || t == NULL) {
        free(absrow);
        free(rs);
        free(t);
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY,
                               "lk_quantize_ternary: no memory for a %lld x %lld tensor",
                               (long long)n, (long long)k);
    }

    for (int64_t r = 0; r < n; r++) {
        lk_ref_load_row(w, r, absrow);
        for (int64_t c = 0; c < k; c++)
            absrow[c] = lk_fabs(absrow[c]);
        rs[r] = lk_ref_lane_sum(absrow, k);
    }
    float total = lk_ref_lane_sum(rs, n);
    float mean = total / (float)(n * k);
    float m = lk_maximum(mean, LK_QUANT_EPS);

    for (int64_t r = 0; r < n; r++) {
        lk_ref_load_row(w, r, absrow);
        for (int64_t c = 0; c < k; c++)
            t[c] = quantize(absrow[c] / m, -1.0f, 1.0f);
        lk_t2_pack_row(t, k, lk_t2_row(&a->q, r));
    }
    lk_ref_store(a->scale.data, a->scale.dtype, 0, m);

    free(absrow);
    free(rs);
    free(t);
    return LK_OK;
}
