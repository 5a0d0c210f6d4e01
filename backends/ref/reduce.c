/* Lockstep reference: row reductions (docs/numerics.md section 5).
 * y[r] = op(x[r, 0..n)) for SUM, MEAN, MAX, MIN, VAR, VAR_UNBIASED and
 * ARGMAX; every sum is the lane sum of backends/ref/lanes.c. */
#include <stdint.h>
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "numerics/scalar.h"

/* Position of x in the total order NaN > +Inf > ... > +0 > -0 > ... > -Inf:
 * the usual sign-magnitude to two's-complement flip, with every NaN above
 * +Inf (all NaNs rank equal, so the first one wins). */
static int64_t order_key(float x)
{
    uint32_t u = lk_f32_bits(x);
    if (lk_isnan(x))
        return INT64_MAX;
    if (u & 0x80000000u)
        return -1 - (int64_t)(u & 0x7fffffffu); /* -0 -> -1, below +0 */
    return (int64_t)u;
}

static int64_t argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    int64_t key = order_key(x[0]);
    for (int64_t i = 1; i < n && key != INT64_MAX; i++) {
        int64_t k = order_key(x[i]);
        if (k > key) { /* strictly larger: ties keep the smallest index */
            key = k;
            best = i;
        }
    }
    return best;
}

/* m = sum / n; d_i = x_i - m (in place); ss = sum of d_i^2 by fma. */
static float sum_sq_dev(float *x, int64_t n)
{
    float m = lk_ref_lane_sum(x, n) / (float)n;
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] - m;
    return lk_ref_lane_sumsq(x, n);
}

static float reduce_row(lk_reduce_op op, float *x, int64_t n)
{
    float v;
    switch (op) {
    case LK_REDUCE_SUM:
        return lk_ref_lane_sum(x, n);
    case LK_REDUCE_MEAN:
        return lk_ref_lane_sum(x, n) / (float)n;
    case LK_REDUCE_MAX:
        v = x[0];
        for (int64_t i = 1; i < n; i++)
            v = lk_maximum(v, x[i]);
        return v;
    case LK_REDUCE_MIN:
        v = x[0];
        for (int64_t i = 1; i < n; i++)
            v = lk_minimum(v, x[i]);
        return v;
    case LK_REDUCE_VAR:
        return sum_sq_dev(x, n) / (float)n;
    default: /* LK_REDUCE_VAR_UNBIASED; n == 1 gives 0 / 0 = NaN */
        return sum_sq_dev(x, n) / (float)(n - 1);
    }
}

lk_status lk_ref_reduce(const lk_reduce_args *a)
{
    const lk_tensor *x = &a->x, *y = &a->y;
    const int64_t n = x->cols;
    switch (a->op) {
    case LK_REDUCE_SUM: case LK_REDUCE_MEAN: case LK_REDUCE_MAX: case LK_REDUCE_MIN:
    case LK_REDUCE_VAR: case LK_REDUCE_VAR_UNBIASED: case LK_REDUCE_ARGMAX:
        break;
    default:
        return lk_kernel_error(LK_ERR_INVALID_ARGUMENT, "lk_reduce: unknown op %d", (int)a->op);
    }
    if (x->rows == 0)
        return LK_OK;

    /* One widened row, allocated before the first result is written. */
    float *row = (uint64_t)n <= SIZE_MAX / sizeof *row ? malloc((size_t)n * sizeof *row)
                                                       : NULL;
    if (row == NULL)
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY,
                               "lk_reduce: no memory for a row of %lld elements", (long long)n);

    for (int64_t r = 0; r < x->rows; r++) {
        lk_ref_load_row(x, r, row);
        if (a->op == LK_REDUCE_ARGMAX)
            ((int64_t *)y->data)[r * y->ld] = argmax(row, n);
        else
            lk_ref_store(y->data, y->dtype, r * y->ld, reduce_row(a->op, row, n));
    }
    free(row);
    return LK_OK;
}
