/* Lockstep core: RMSNorm, LayerNorm and RMSNorm fused with quantisation
 * (docs/numerics.md sections 6 and 8). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

/* x and y of one shape, weight and bias NULL or 1 x cols. */
static lk_status lk_norm_check(lk_validator *v, lk_norm_args *n, const lk_tensor *x,
                               const lk_tensor *weight, const lk_tensor *bias,
                               const lk_tensor *y)
{
    LK_V_TRY(lk_v_tensor(v, "x", x, &n->x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(v, "weight", weight, &n->weight, LK_DT_FLOAT,
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(v, "bias", bias, &n->bias, LK_DT_FLOAT, LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(v, "y", y, &n->y, LK_DT_FLOAT, LK_V_OUT, 1));
    if (weight)
        LK_V_TRY(lk_v_dims(v, "weight", &n->weight, 1, NULL, n->x.cols, "x cols"));
    if (bias)
        LK_V_TRY(lk_v_dims(v, "bias", &n->bias, 1, NULL, n->x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(v, "y", &n->y, n->x.rows, "x rows", n->x.cols, "x cols"));
    return lk_v_finish(v);
}

LK_API lk_status lk_rmsnorm(lk_queue *q, const lk_tensor *x, const lk_tensor *weight, float eps,
                            const lk_tensor *y)
{
    lk_validator v;
    lk_norm_args n;
    memset(&n, 0, sizeof n);
    LK_V_TRY(lk_v_begin(&v, "lk_rmsnorm", q));
    LK_V_TRY(lk_norm_check(&v, &n, x, weight, NULL, y));
    n.eps = eps;
    LK_V_RUN(&v, LK_OP_RMSNORM, rmsnorm, n, n.x.rows == 0 || n.x.cols == 0);
}

LK_API lk_status lk_layernorm(lk_queue *q, const lk_tensor *x, const lk_tensor *weight,
                              const lk_tensor *bias, float eps, const lk_tensor *y)
{
    lk_validator v;
    lk_norm_args n;
    memset(&n, 0, sizeof n);
    LK_V_TRY(lk_v_begin(&v, "lk_layernorm", q));
    LK_V_TRY(lk_norm_check(&v, &n, x, weight, bias, y));
    n.eps = eps;
    LK_V_RUN(&v, LK_OP_LAYERNORM, layernorm, n, n.x.rows == 0 || n.x.cols == 0);
}

/* lk_rmsnorm's rules for x and weight, lk_quantize_act's for xq and scale. */
LK_API lk_status lk_rmsnorm_quantize(lk_queue *q, const lk_tensor *x, const lk_tensor *weight,
                                     float eps, const lk_tensor *xq, const lk_tensor *scale)
{
    lk_validator v;
    lk_norm_quant_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_rmsnorm_quantize", q));
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "weight", weight, &a.weight, LK_DT_FLOAT,
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "xq", xq, &a.q, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "scale", scale, &a.scale, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_nonempty_rows(&v, "x", &a.x));
    if (weight)
        LK_V_TRY(lk_v_dims(&v, "weight", &a.weight, 1, NULL, a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "xq", &a.q, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "scale", &a.scale, a.x.rows, "x rows", 1, NULL));
    LK_V_TRY(lk_v_finish(&v));
    a.eps = eps;
    LK_V_RUN(&v, LK_OP_RMSNORM_QUANTIZE, rmsnorm_quantize, a, a.x.rows == 0);
}
