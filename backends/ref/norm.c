/* Lockstep reference: RMSNorm and LayerNorm (docs/numerics.md section 6),
 * with the sums of section 5 and every rounding in the contract's order. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"

/* The widened x row, and the weight and bias rows when present (they are
 * 1 x n, loaded once for all rows). */
typedef struct norm_rows {
    float *x, *w, *b;
} norm_rows;

static lk_status rows_alloc(norm_rows *nr, const lk_norm_args *a, int use_bias,
                            const char *op)
{
    int64_t n = a->x.cols;
    size_t count = 1 + (a->weight.data != NULL) + (use_bias && a->bias.data != NULL);
    nr->x = (uint64_t)n <= SIZE_MAX / (count * sizeof(float))
                ? malloc((size_t)n * count * sizeof(float))
                : NULL;
    if (nr->x == NULL)
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "%s: no memory for a row of %lld elements",
                               op, (long long)n);
    float *next = nr->x + n;
    nr->w = nr->b = NULL;
    if (a->weight.data != NULL) {
        nr->w = next;
        next += n;
        lk_ref_load_row(&a->weight, 0, nr->w);
    }
    if (use_bias && a->bias.data != NULL) {
        nr->b = next;
        lk_ref_load_row(&a->bias, 0, nr->b);
    }
    return LK_OK;
}

lk_status lk_ref_rmsnorm(const lk_norm_args *a)
{
    const lk_tensor *x = &a->x, *y = &a->y;
    const int64_t n = x->cols;
    if (x->rows == 0 || n == 0) /* the core makes both no-ops */
        return LK_OK;
    norm_rows nr;
    lk_status st = rows_alloc(&nr, a, 0, "lk_rmsnorm");
    if (st != LK_OK)
        return st;

    for (int64_t r = 0; r < x->rows; r++) {
        lk_ref_load_row(x, r, nr.x);
        float ss = lk_ref_lane_sumsq(nr.x, n);
        float ms = ss / (float)n;
        float rs = 1.0f / sqrtf(ms + a->eps);
        for (int64_t i = 0; i < n; i++) {
            float v = nr.x[i] * rs;
            if (nr.w != NULL)
                v = v * nr.w[i];
            lk_ref_store(y->data, y->dtype, r * y->ld + i, v);
        }
    }
    free(nr.x);
    return LK_OK;
}

lk_status lk_ref_layernorm(const lk_norm_args *a)
{
    const lk_tensor *x = &a->x, *y = &a->y;
    const int64_t n = x->cols;
    if (x->rows == 0 || n == 0) /* the core makes both no-ops */
        return LK_OK;
    norm_rows nr;
    lk_status st = rows_alloc(&nr, a, 1, "lk_layernorm");
    if (st != LK_OK)
        return st;

    for (int64_t r = 0; r < x->rows; r++) {
        float *d = nr.x;
        lk_ref_load_row(x, r, d);
        float m = lk_ref_lane_sum(d, n) / (float)n;
        for (int64_t i = 0; i < n; i++)
            d[i] = d[i] - m; /* d_i = x_i - m, which is also y's (x_i - m) */
        float ss = lk_ref_lane_sumsq(d, n);
        float v = ss / (float)n;
        float rs = 1.0f / sqrtf(v + a->eps);
        for (int64_t i = 0; i < n; i++) {
            float t = d[i] * rs;
            if (nr.w != NULL)
                t = t * nr.w[i];
            if (nr.b != NULL)
                t = t + nr.b[i];
            lk_ref_store(y->data, y->dtype, r * y->ld + i, t);
        }
    }
    free(nr.x);
    return LK_OK;
}

/* Row r of t, a one-row view (f32, bf16, f16 or i8). */
static lk_tensor row_view(lk_tensor t, int64_t r)
{
    /* x is a float dtype, xq LK_I8, scale f32 (no core here: test_ref_* link
     * the reference alone) */
    const int64_t es = t.dtype == LK_F32 ? 4 : t.dtype == LK_I8 ? 1 : 2;
    t.data = (char *)t.data + r * t.ld * es;
    t.rows = 1;
    return t;
}

/* Literally lk_rmsnorm into an f32 row, then lk_quantize_act of that row. */
lk_status lk_ref_rmsnorm_quantize(const lk_norm_quant_args *a)
{
    const int64_t n = a->x.cols;
    if (a->x.rows == 0 || n == 0)
        return LK_OK;
    float *y = (uint64_t)n <= SIZE_MAX / sizeof(float) ? malloc((size_t)n * sizeof(float)) : NULL;
    if (y == NULL)
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY,
                               "lk_rmsnorm_quantize: no memory for a row of %lld elements",
                               (long long)n);
    lk_status st = LK_OK;
    for (int64_t r = 0; r < a->x.rows && st == LK_OK; r++) {
        lk_norm_args na = {0};
        na.x = row_view(a->x, r);
        na.weight = a->weight;
        na.y = lk_mat(y, LK_F32, 1, n);
        na.eps = a->eps;
        st = lk_ref_rmsnorm(&na);
        if (st != LK_OK)
            break;
        lk_quant_args qa = {0};
        qa.x = na.y;
        qa.q = row_view(a->q, r);
        qa.scale = row_view(a->scale, r);
        st = lk_ref_quantize_act(&qa);
    }
    free(y);
    return st;
}
