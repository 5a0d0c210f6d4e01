/* Lockstep core: integer GEMMs (docs/numerics.md section 9).  The K limits
 * keep the exact int32 accumulation from overflowing; beyond them the
 * contract defines nothing, hence LK_ERR_RANGE. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

/* x: M x K, w: N x K, y: M x N; with scales, x_scale M x 1 and w_scale
 * 1 x 1 or 1 x N. */
static lk_status lk_qgemm_shapes(lk_validator *v, lk_qgemm_args *g, const char *xn,
                                 const char *wn, const char *xsn, const char *wsn,
                                 const char *yn, int scaled, int64_t max_k)
{
    int64_t m = g->x.rows, k = g->x.cols, n = g->w.rows;
    LK_V_TRY(lk_v_dims(v, wn, &g->w, -1, NULL, k, "K"));
    if (k > max_k)
        return lk_error(LK_ERR_RANGE,
                        "%s: %s: K (%lld) > %lld: the exact int32 accumulation could "
                        "overflow",
                        v->fn, xn, (long long)k, (long long)max_k);
    if (scaled) {
        LK_V_TRY(lk_v_dims(v, xsn, &g->x_scale, m, "M", 1, NULL));
        LK_V_TRY(lk_v_dims(v, wsn, &g->w_scale, 1, NULL, -1, NULL));
        if (g->w_scale.cols != 1 && g->w_scale.cols != n)
            return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: cols (%lld) != 1 or N (%lld)", v->fn,
                            wsn, (long long)g->w_scale.cols, (long long)n);
    }
    LK_V_TRY(lk_v_dims(v, yn, &g->y, m, "M", n, "N"));
    g->m = m;
    g->n = n;
    g->k = k;
    return lk_v_finish(v);
}

LK_API lk_status lk_ternary_gemm(lk_queue *q, const lk_tensor *xq, const lk_tensor *x_scale,
                                 const lk_tensor *w, const lk_tensor *w_scale,
                                 const lk_tensor *y)
{
    lk_validator v;
    lk_qgemm_args g;
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_begin(&v, "lk_ternary_gemm", q));
    LK_V_TRY(lk_v_tensor(&v, "xq", xq, &g.x, LK_DT(LK_I8), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "x_scale", x_scale, &g.x_scale, LK_DT(LK_F32), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "w", w, &g.w, LK_DT(LK_T2), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "w_scale", w_scale, &g.w_scale, LK_DT(LK_F32), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &g.y, LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_qgemm_shapes(&v, &g, "xq", "w", "x_scale", "w_scale", "y", 1,
                             LK_TERNARY_MAX_K));
    LK_V_RUN(&v, LK_OP_TERNARY_GEMM, ternary_gemm, g, g.m == 0 || g.n == 0);
}

LK_API lk_status lk_int8_gemm(lk_queue *q, const lk_tensor *a, const lk_tensor *b,
                              const lk_tensor *a_scale, const lk_tensor *b_scale,
                              const lk_tensor *c)
{
    lk_validator v;
    lk_qgemm_args g;
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_begin(&v, "lk_int8_gemm", q));
    if (!a_scale != !b_scale)
        return lk_error(LK_ERR_NULL_POINTER,
                        "lk_int8_gemm: %s is NULL but %s is not: give both scales or neither",
                        a_scale ? "b_scale" : "a_scale", a_scale ? "a_scale" : "b_scale");
    int scaled = a_scale != NULL;
    LK_V_TRY(lk_v_tensor(&v, "a", a, &g.x, LK_DT(LK_I8), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "b", b, &g.w, LK_DT(LK_I8), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "a_scale", a_scale, &g.x_scale, LK_DT(LK_F32),
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "b_scale", b_scale, &g.w_scale, LK_DT(LK_F32),
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "c", c, &g.y, scaled ? LK_DT_FLOAT : LK_DT(LK_I32), LK_V_OUT, 1));
    LK_V_TRY(lk_qgemm_shapes(&v, &g, "a", "b", "a_scale", "b_scale", "c", scaled,
                             LK_INT8_MAX_K));
    LK_V_RUN(&v, LK_OP_INT8_GEMM, int8_gemm, g, g.m == 0 || g.n == 0);
}
