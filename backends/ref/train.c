/* Lockstep reference: the training ops (docs/numerics.md section 13),
 * literally.  The element formulas are backends/train.h's, which the CUDA
 * kernels compile too; the sums are the lane sums of section 5. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/train.h"

lk_status lk_ref_unary_backward(const lk_unary_backward_args *a)
{
    for (int64_t r = 0; r < a->x.rows; r++)
        for (int64_t i = 0; i < a->x.cols; i++) {
            const float x = lk_ref_load(a->x.data, a->x.dtype, r * a->x.ld + i);
            const float dy = lk_ref_load(a->dy.data, a->dy.dtype, r * a->dy.ld + i);
            lk_ref_store(a->dx.data, a->dx.dtype, r * a->dx.ld + i,
                         lk_unary_grad(a->op, x, dy));
        }
    return LK_OK;
}

/* n floats per row, `count` rows of them, or an error message. */
static float *rows_alloc(int64_t n, size_t count, const char *op)
{
    float *p = (uint64_t)n <= SIZE_MAX / (count * sizeof(float))
                   ? malloc((size_t)n * count * sizeof(float))
                   : NULL;
    if (p == NULL)
        lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "%s: no memory for a row of %lld elements", op,
                        (long long)n);
    return p;
}

lk_status lk_ref_softmax_backward(const lk_softmax_backward_args *a)
{
    const int64_t n = a->y.cols;
    float *y = rows_alloc(n, 3, "lk_softmax_backward");
    if (y == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    float *dy = y + n, *t = dy + n;
    for (int64_t r = 0; r < a->y.rows; r++) {
        lk_ref_load_row(&a->y, r, y);
        lk_ref_load_row(&a->dy, r, dy);
        for (int64_t i = 0; i < n; i++)
            t[i] = a->log ? dy[i] : dy[i] * y[i];
        const float d = lk_ref_lane_sum(t, n);
        for (int64_t i = 0; i < n; i++)
            lk_ref_store(a->dx.data, a->dx.dtype, r * a->dx.ld + i,
                         lk_softmax_grad(a->log, y[i], dy[i], d));
    }
    free(y);
    return LK_OK;
}

lk_status lk_ref_norm_backward(const lk_norm_backward_args *a)
{
    const int64_t n = a->x.cols;
    float *x = rows_alloc(n, 5, "lk_norm_backward");
    if (x == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    float *dy = x + n, *g = dy + n, *t = g + n, *w = NULL;
    if (a->weight.data != NULL) {
        w = t + n;
        lk_ref_load_row(&a->weight, 0, w);
    }
    for (int64_t r = 0; r < a->x.rows; r++) {
        lk_ref_load_row(&a->x, r, x);
        lk_ref_load_row(&a->dy, r, dy);
        for (int64_t i = 0; i < n; i++)
            g[i] = lk_norm_grad_g(dy[i], w, i);
        if (!a->layer) {
            const float ms = lk_ref_lane_sumsq(x, n) / (float)n;
            const float rs = 1.0f / sqrtf(ms + a->eps);
            for (int64_t i = 0; i < n; i++)
                t[i] = g[i] * x[i];
            const float k = lk_rms_grad_k(lk_ref_lane_sum(t, n), n, rs);
            for (int64_t i = 0; i < n; i++) {
                lk_ref_store(a->dx.data, a->dx.dtype, r * a->dx.ld + i,
                             lk_rms_grad_dx(g[i], x[i], rs, k));
                if (a->dwt.data != NULL)
                    lk_ref_store(a->dwt.data, a->dwt.dtype, r * a->dwt.ld + i,
                                 dy[i] * (x[i] * rs));
            }
        } else {
            const float m = lk_ref_lane_sum(x, n) / (float)n;
            for (int64_t i = 0; i < n; i++)
                x[i] = x[i] - m; /* d_i */
            const float v = lk_ref_lane_sumsq(x, n) / (float)n;
            const float rs = 1.0f / sqrtf(v + a->eps);
            for (int64_t i = 0; i < n; i++)
                x[i] = x[i] * rs; /* xh_i */
            const float sa = lk_ref_lane_sum(g, n) / (float)n;
            for (int64_t i = 0; i < n; i++)
                t[i] = g[i] * x[i];
            const float sb = lk_ref_lane_sum(t, n) / (float)n;
            for (int64_t i = 0; i < n; i++) {
                lk_ref_store(a->dx.data, a->dx.dtype, r * a->dx.ld + i,
                             lk_ln_grad_dx(g[i], x[i], sa, sb, rs));
                if (a->dwt.data != NULL)
                    lk_ref_store(a->dwt.data, a->dwt.dtype, r * a->dwt.ld + i, dy[i] * x[i]);
            }
        }
    }
    free(x);
    return LK_OK;
}

/* The core has checked every id against dtable's rows. */
lk_status lk_ref_embedding_backward(const lk_embedding_backward_args *a)
{
    float *dt = a->dtable.data;
    for (int64_t r = 0; r < a->ids.rows; r++) {
        const int64_t id = ((const int32_t *)a->ids.data)[r * a->ids.ld];
        for (int64_t c = 0; c < a->dy.cols; c++) {
            const float d = lk_ref_load(a->dy.data, a->dy.dtype, r * a->dy.ld + c);
            lk_ref_store(dt, LK_F32, id * a->dtable.ld + c, dt[id * a->dtable.ld + c] + d);
        }
    }
    return LK_OK;
}

lk_status lk_ref_optim_step(const lk_optim_args *a)
{
    float *p = a->param.data, *s1 = a->s1.data, *s2 = a->s2.data;
    for (int64_t r = 0; r < a->param.rows; r++)
        for (int64_t c = 0; c < a->param.cols; c++) {
            const int64_t ip = r * a->param.ld + c;
            const float g = lk_ref_load(a->grad.data, a->grad.dtype, r * a->grad.ld + c);
            float pv = p[ip], v1 = 0.0f, v2 = 0.0f;
            const int64_t i1 = r * a->s1.ld + c, i2 = r * a->s2.ld + c;
            if (s1 != NULL)
                v1 = s1[i1];
            if (s2 != NULL)
                v2 = s2[i2];
            if (a->kind == LK_OPTIM_ADAMW)
                lk_adamw_elem(a, g, &pv, &v1, &v2);
            else
                lk_sgd_elem(a, g, &pv, &v1);
            lk_ref_store(p, LK_F32, ip, pv);
            if (s1 != NULL)
                lk_ref_store(s1, LK_F32, i1, v1);
            if (s2 != NULL)
                lk_ref_store(s2, LK_F32, i2, v2);
        }
    return LK_OK;
}
