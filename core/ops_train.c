/* Lockstep core: the training ops -- backward ops and optimizer steps
 * (docs/numerics.md section 13).  The optimizers' per-step scalars (bias
 * corrections, step size) are computed here, once, on the host, so every
 * device's kernel receives the same f32 values. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <string.h>

#include "core/validate.h"

LK_API lk_status lk_unary_backward(lk_queue *q, lk_unary_op op, const lk_tensor *x,
                                   const lk_tensor *dy, const lk_tensor *dx)
{
    lk_validator v;
    lk_unary_backward_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_unary_backward", q));
    if (op < LK_UNARY_COPY || op > LK_UNARY_ERF)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: op: %d is not an lk_unary_op", v.fn,
                        (int)op);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "dy", dy, &a.dy, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "dx", dx, &a.dx, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    LK_V_TRY(lk_v_dims(&v, "dy", &a.dy, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "dx", &a.dx, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_finish(&v));
    a.op = op;
    LK_V_RUN(&v, LK_OP_UNARY_BACKWARD, unary_backward, a, a.x.rows == 0 || a.x.cols == 0);
}

LK_API lk_status lk_softmax_backward(lk_queue *q, const lk_tensor *y, const lk_tensor *dy,
                                     int log, const lk_tensor *dx)
{
    lk_validator v;
    lk_softmax_backward_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_softmax_backward", q));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.y, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "dy", dy, &a.dy, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "dx", dx, &a.dx, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    LK_V_TRY(lk_v_dims(&v, "dy", &a.dy, a.y.rows, "y rows", a.y.cols, "y cols"));
    LK_V_TRY(lk_v_dims(&v, "dx", &a.dx, a.y.rows, "y rows", a.y.cols, "y cols"));
    LK_V_TRY(lk_v_finish(&v));
    a.log = log != 0;
    LK_V_RUN(&v, LK_OP_SOFTMAX_BACKWARD, softmax_backward, a, a.y.rows == 0 || a.y.cols == 0);
}

LK_API lk_status lk_norm_backward(lk_queue *q, int layer, const lk_tensor *x,
                                  const lk_tensor *weight, const lk_tensor *dy, float eps,
                                  const lk_tensor *dx, const lk_tensor *dwt)
{
    lk_validator v;
    lk_norm_backward_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_norm_backward", q));
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "weight", weight, &a.weight, LK_DT_FLOAT,
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "dy", dy, &a.dy, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "dx", dx, &a.dx, LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "dwt", dwt, &a.dwt, LK_DT_FLOAT, LK_V_OUT | LK_V_OPTIONAL, 1));
    if (weight)
        LK_V_TRY(lk_v_dims(&v, "weight", &a.weight, 1, NULL, a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "dy", &a.dy, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "dx", &a.dx, a.x.rows, "x rows", a.x.cols, "x cols"));
    if (dwt)
        LK_V_TRY(lk_v_dims(&v, "dwt", &a.dwt, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_finish(&v));
    a.layer = layer != 0;
    a.eps = eps;
    LK_V_RUN(&v, LK_OP_NORM_BACKWARD, norm_backward, a, a.x.rows == 0 || a.x.cols == 0);
}

LK_API lk_status lk_embedding_backward(lk_queue *q, const lk_tensor *dy, const lk_tensor *ids,
                                       const lk_tensor *dtable)
{
    lk_validator v;
    lk_embedding_backward_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_embedding_backward", q));
    LK_V_TRY(lk_v_tensor(&v, "dy", dy, &a.dy, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "ids", ids, &a.ids, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(&v, "ids", &a.ids, a.dy.rows, "dy rows", 1, NULL));
    LK_V_TRY(lk_v_tensor(&v, "dtable", dtable, &a.dtable, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "dtable", &a.dtable, -1, NULL, a.dy.cols, "dy cols"));
    LK_V_TRY(lk_v_finish(&v));
    if (a.dy.rows > 0 && a.dy.cols > 0) {
        if (q->cap != NULL || lk_capture_on_device(q))
            return lk_error(LK_ERR_UNSUPPORTED, "%s: not inside a captured graph (the ids are "
                            "checked on the host first)", v.fn);
        LK_V_TRY(lk_index_check(v.fn, "ids", q, &a.ids, a.dtable.rows));
    }
    LK_V_RUN(&v, LK_OP_EMBEDDING_BACKWARD, embedding_backward, a,
             a.dy.rows == 0 || a.dy.cols == 0);
}

/* param f32 in and out; grad float; the states f32; all of param's shape. */
static lk_status lk_optim_check(lk_validator *v, lk_optim_args *a, const lk_tensor *param,
                                const lk_tensor *grad, const char *n1, const lk_tensor *s1,
                                const char *n2, const lk_tensor *s2, unsigned opt1)
{
    LK_V_TRY(lk_v_tensor(v, "param", param, &a->param, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(v, "grad", grad, &a->grad, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(v, "grad", &a->grad, a->param.rows, "param rows", a->param.cols,
                       "param cols"));
    LK_V_TRY(lk_v_tensor(v, n1, s1, &a->s1, LK_DT(LK_F32), LK_V_OUT | opt1, 1));
    if (s1)
        LK_V_TRY(lk_v_dims(v, n1, &a->s1, a->param.rows, "param rows", a->param.cols,
                           "param cols"));
    if (n2 != NULL) {
        LK_V_TRY(lk_v_tensor(v, n2, s2, &a->s2, LK_DT(LK_F32), LK_V_OUT, 1));
        LK_V_TRY(lk_v_dims(v, n2, &a->s2, a->param.rows, "param rows", a->param.cols,
                           "param cols"));
    }
    return lk_v_finish(v);
}

LK_API lk_status lk_sgd_step(lk_queue *q, const lk_tensor *param, const lk_tensor *grad,
                             const lk_tensor *buf, float lr, float momentum, float dampening,
                             float weight_decay, unsigned flags)
{
    lk_validator v;
    lk_optim_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_sgd_step", q));
    if (flags & ~(unsigned)(LK_SGD_NESTEROV | LK_SGD_FIRST))
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: flags: 0x%x has unknown bits", v.fn,
                        flags);
    if (momentum != 0.0f && buf == NULL)
        return lk_error(LK_ERR_NULL_POINTER, "%s: buf: NULL with momentum %g (the momentum "
                        "buffer is needed)", v.fn, (double)momentum);
    LK_V_TRY(lk_optim_check(&v, &a, param, grad, "buf", buf, NULL, NULL, LK_V_OPTIONAL));
    a.kind = LK_OPTIM_SGD;
    a.flags = flags;
    a.c[0] = lr;
    a.c[1] = momentum;
    a.c[2] = 1.0f - dampening;
    a.c[3] = weight_decay;
    LK_V_RUN(&v, LK_OP_OPTIM_STEP, optim_step, a, a.param.rows == 0 || a.param.cols == 0);
}

/* beta^step in binary64 by repeated squaring (IEEE operations only, the
 * same on every host), for the bias corrections of section 13.5. */
static double lk_pow_step(float beta, int64_t step)
{
    double r = 1.0, b = (double)beta;
    for (uint64_t e = (uint64_t)step; e != 0; e >>= 1) {
        if (e & 1u)
            r *= b;
        b *= b;
    }
    return r;
}

LK_API lk_status lk_adamw_step(lk_queue *q, const lk_tensor *param, const lk_tensor *grad,
                               const lk_tensor *m, const lk_tensor *v2, float lr, float beta1,
                               float beta2, float eps, float weight_decay, int64_t step)
{
    lk_validator v;
    lk_optim_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_adamw_step", q));
    if (step < 1)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: step: %lld (steps count from 1)", v.fn,
                        (long long)step);
    if (!(beta1 >= 0.0f && beta1 < 1.0f) || !(beta2 >= 0.0f && beta2 < 1.0f))
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: betas (%g, %g) are not in [0, 1)", v.fn,
                        (double)beta1, (double)beta2);
    LK_V_TRY(lk_optim_check(&v, &a, param, grad, "m", m, "v", v2, 0));
    const float bc1 = (float)(1.0 - lk_pow_step(beta1, step));
    const float bc2 = (float)(1.0 - lk_pow_step(beta2, step));
    a.kind = LK_OPTIM_ADAMW;
    a.c[0] = lr / bc1;
    a.c[1] = 1.0f - beta1;
    a.c[2] = beta2;
    a.c[3] = 1.0f - beta2;
    a.c[4] = eps;
    a.c[5] = 1.0f - lr * weight_decay;
    a.c[6] = sqrtf(bc2);
    LK_V_RUN(&v, LK_OP_OPTIM_STEP, optim_step, a, a.param.rows == 0 || a.param.cols == 0);
}
