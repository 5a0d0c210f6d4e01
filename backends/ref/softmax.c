/* Lockstep reference: softmax and log-softmax (docs/numerics.md section 6),
 * with the library's exp and log (section 7) and the lane sum (section 5). */
#include <stdint.h>
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#include "numerics/scalar.h"

/* Two rows of n floats in one block, allocated before any row is written. */
static float *rows_alloc(int64_t n, const char *op)
{
    float *p = (uint64_t)n <= SIZE_MAX / (2 * sizeof *p) ? malloc((size_t)n * 2 * sizeof *p)
                                                         : NULL;
    if (p == NULL)
        lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "%s: no memory for a row of %lld elements", op,
                        (long long)n);
    return p;
}

/* t_i = x_i - mx in place, e_i = exp(t_i), and returns s = sum of e_i. */
static float shifted_exp_sum(float *t, float *e, int64_t n)
{
    float mx = t[0];
    for (int64_t i = 1; i < n; i++)
        mx = lk_maximum(mx, t[i]);
    for (int64_t i = 0; i < n; i++) {
        t[i] = t[i] - mx;
        e[i] = lk_ref_expf(t[i]);
    }
    return lk_ref_lane_sum(e, n);
}

lk_status lk_ref_softmax(const lk_softmax_args *a)
{
    const lk_tensor *x = &a->x, *y = &a->y;
    const int64_t n = x->cols;
    if (x->rows == 0 || n == 0) /* the core makes both no-ops */
        return LK_OK;
    float *t = rows_alloc(n, "lk_softmax");
    if (t == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    float *e = t + n;

    for (int64_t r = 0; r < x->rows; r++) {
        lk_ref_load_row(x, r, t);
        float rs = 1.0f / shifted_exp_sum(t, e, n); /* once per row */
        for (int64_t i = 0; i < n; i++)
            lk_ref_store(y->data, y->dtype, r * y->ld + i, e[i] * rs);
    }
    free(t);
    return LK_OK;
}

lk_status lk_ref_log_softmax(const lk_softmax_args *a)
{
    const lk_tensor *x = &a->x, *y = &a->y;
    const int64_t n = x->cols;
    if (x->rows == 0 || n == 0) /* the core makes both no-ops */
        return LK_OK;
    float *t = rows_alloc(n, "lk_log_softmax");
    if (t == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    float *e = t + n;

    for (int64_t r = 0; r < x->rows; r++) {
        lk_ref_load_row(x, r, t);
        float ls = lk_ref_logf(shifted_exp_sum(t, e, n));
        for (int64_t i = 0; i < n; i++)
            lk_ref_store(y->data, y->dtype, r * y->ld + i, t[i] - ls);
    }
    free(t);
    return LK_OK;
}
