/* Lockstep core: element-wise binary ops (docs/numerics.md section 7). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

LK_API lk_status lk_binary(lk_queue *q, lk_binary_op op, const lk_tensor *a, const lk_tensor *b,
                           const lk_tensor *y)
{
    lk_validator v;
    lk_binary_args r;
    memset(&r, 0, sizeof r);
    LK_V_TRY(lk_v_begin(&v, "lk_binary", q));
    if (op != LK_BINARY_ADD && op != LK_BINARY_MUL)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_binary: op: %d is not an lk_binary_op",
                        (int)op);
    LK_V_TRY(lk_v_tensor(&v, "a", a, &r.a, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "b", b, &r.b, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &r.y, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    if (r.b.rows != 1)
        LK_V_TRY(lk_v_dims(&v, "b", &r.b, r.a.rows, "a rows (or 1)", -1, NULL));
    LK_V_TRY(lk_v_dims(&v, "b", &r.b, -1, NULL, r.a.cols, "a cols"));
    LK_V_TRY(lk_v_dims(&v, "y", &r.y, r.a.rows, "a rows", r.a.cols, "a cols"));
    LK_V_TRY(lk_v_finish(&v));
    r.op = op;
    LK_V_RUN(&v, LK_OP_BINARY, binary, r, r.a.rows == 0 || r.a.cols == 0);
}
