/* Lockstep core: element-wise unary ops, conversion and the gating lk_glu,
 * a unary op times up (docs/numerics.md section 7).  The output may be the
 * input itself (same data, shape, ld and element size). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

static lk_status lk_unary_run(const char *fn, lk_queue *q, lk_unary_op op, const lk_tensor *x,
                              const lk_tensor *y)
{
    lk_validator v;
    lk_unary_args u;
    memset(&u, 0, sizeof u);
    LK_V_TRY(lk_v_begin(&v, fn, q));
    if (op < LK_UNARY_COPY || op > LK_UNARY_ERF)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: op: %d is not an lk_unary_op", fn,
                        (int)op);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &u.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &u.y, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    LK_V_TRY(lk_v_dims(&v, "y", &u.y, u.x.rows, "x rows", u.x.cols, "x cols"));
    LK_V_TRY(lk_v_finish(&v));
    u.op = op;
    LK_V_RUN(&v, LK_OP_UNARY, unary, u, u.x.rows == 0 || u.x.cols == 0);
}

LK_API lk_status lk_unary(lk_queue *q, lk_unary_op op, const lk_tensor *x, const lk_tensor *y)
{
    return lk_unary_run("lk_unary", q, op, x, y);
}

LK_API lk_status lk_convert(lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    return lk_unary_run("lk_convert", q, LK_UNARY_COPY, x, y);
}

/* Gating of a gated FFN (numerics.md section 7.10): y = unary(op, gate) * up. */
LK_API lk_status lk_glu(lk_queue *q, lk_unary_op op, const lk_tensor *gate, const lk_tensor *up,
                        const lk_tensor *y)
{
    lk_validator v;
    lk_glu_args r;
    memset(&r, 0, sizeof r);
    LK_V_TRY(lk_v_begin(&v, "lk_glu", q));
    if (op < LK_UNARY_COPY || op > LK_UNARY_ERF)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_glu: op: %d is not an lk_unary_op",
                        (int)op);
    LK_V_TRY(lk_v_tensor(&v, "gate", gate, &r.gate, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "up", up, &r.up, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &r.y, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    LK_V_TRY(lk_v_dims(&v, "up", &r.up, r.gate.rows, "gate rows", r.gate.cols, "gate cols"));
    LK_V_TRY(lk_v_dims(&v, "y", &r.y, r.gate.rows, "gate rows", r.gate.cols, "gate cols"));
    LK_V_TRY(lk_v_finish(&v));
    r.op = op;
    LK_V_RUN(&v, LK_OP_GLU, glu, r, r.gate.rows == 0 || r.gate.cols == 0);
}
