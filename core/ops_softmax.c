/* Lockstep core: softmax and log-softmax (docs/numerics.md section 6). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

static lk_status lk_softmax_check(lk_validator *v, lk_softmax_args *s, const lk_tensor *x,
                                  const lk_tensor *y)
{
    LK_V_TRY(lk_v_tensor(v, "x", x, &s->x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(v, "y", y, &s->y, LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(v, "y", &s->y, s->x.rows, "x rows", s->x.cols, "x cols"));
    return lk_v_finish(v);
}

LK_API lk_status lk_softmax(lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    lk_validator v;
    lk_softmax_args s;
    memset(&s, 0, sizeof s);
    LK_V_TRY(lk_v_begin(&v, "lk_softmax", q));
    LK_V_TRY(lk_softmax_check(&v, &s, x, y));
    LK_V_RUN(&v, LK_OP_SOFTMAX, softmax, s, s.x.rows == 0 || s.x.cols == 0);
}

LK_API lk_status lk_log_softmax(lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    lk_validator v;
    lk_softmax_args s;
    memset(&s, 0, sizeof s);
    LK_V_TRY(lk_v_begin(&v, "lk_log_softmax", q));
    LK_V_TRY(lk_softmax_check(&v, &s, x, y));
    LK_V_RUN(&v, LK_OP_LOG_SOFTMAX, log_softmax, s, s.x.rows == 0 || s.x.cols == 0);
}
