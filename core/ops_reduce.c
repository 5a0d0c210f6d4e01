/* Lockstep core: lk_reduce (docs/numerics.md section 5). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

LK_API lk_status lk_reduce(lk_queue *q, lk_reduce_op op, const lk_tensor *x,
                           const lk_tensor *y)
{
    lk_validator v;
    lk_reduce_args r;
    memset(&r, 0, sizeof r);
    LK_V_TRY(lk_v_begin(&v, "lk_reduce", q));
    if (op < LK_REDUCE_SUM || op > LK_REDUCE_ARGMAX)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_reduce: op: %d is not an lk_reduce_op",
                        (int)op);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &r.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &r.y,
                         op == LK_REDUCE_ARGMAX ? LK_DT(LK_I64) : LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_nonempty_rows(&v, "x", &r.x));
    LK_V_TRY(lk_v_dims(&v, "y", &r.y, r.x.rows, "x rows", 1, NULL));
    LK_V_TRY(lk_v_finish(&v));
    r.op = op;
    LK_V_RUN(&v, LK_OP_REDUCE, reduce, r, r.x.rows == 0);
}
