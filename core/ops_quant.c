/* Lockstep core: BitNet b1.58 quantisation and the ternary packed format
 * (docs/numerics.md section 8, docs/formats.md). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

LK_API lk_status lk_quantize_act(lk_queue *q, const lk_tensor *x, const lk_tensor *xq,
                                 const lk_tensor *scale)
{
    lk_validator v;
    lk_quant_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_quantize_act", q));
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "xq", xq, &a.q, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "scale", scale, &a.scale, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_nonempty_rows(&v, "x", &a.x));
    LK_V_TRY(lk_v_dims(&v, "xq", &a.q, a.x.rows, "x rows", a.x.cols, "x cols"));
    LK_V_TRY(lk_v_dims(&v, "scale", &a.scale, a.x.rows, "x rows", 1, NULL));
    LK_V_TRY(lk_v_finish(&v));
    LK_V_RUN(&v, LK_OP_QUANTIZE_ACT, quantize_act, a, a.x.rows == 0);
}

LK_API lk_status lk_quantize_ternary(lk_queue *q, const lk_tensor *w, const lk_tensor *wq,
                                     const lk_tensor *scale)
{
    lk_validator v;
    lk_quant_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_quantize_ternary", q));
    LK_V_TRY(lk_v_tensor(&v, "w", w, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "wq", wq, &a.q, LK_DT(LK_T2), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "scale", scale, &a.scale, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_nonempty_rows(&v, "w", &a.x));
    LK_V_TRY(lk_v_dims(&v, "wq", &a.q, a.x.rows, "w rows", a.x.cols, "w cols"));
    LK_V_TRY(lk_v_dims(&v, "scale", &a.scale, 1, NULL, 1, NULL));
    LK_V_TRY(lk_v_finish(&v));
    LK_V_RUN(&v, LK_OP_QUANTIZE_TERNARY, quantize_ternary, a, a.x.rows == 0);
}

LK_API lk_status lk_ternary_pack(lk_queue *q, const lk_tensor *w, const lk_tensor *wq)
{
    lk_validator v;
    lk_pack_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_ternary_pack", q));
    LK_V_TRY(lk_v_tensor(&v, "w", w, &a.src, LK_DT(LK_I8), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "wq", wq, &a.dst, LK_DT(LK_T2), LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "wq", &a.dst, a.src.rows, "w rows", a.src.cols, "w cols"));
    LK_V_TRY(lk_v_finish(&v));
    LK_V_RUN(&v, LK_OP_TERNARY_PACK, ternary_pack, a, a.src.rows == 0 || a.src.cols == 0);
}

LK_API lk_status lk_ternary_unpack(lk_queue *q, const lk_tensor *wq, const lk_tensor *w)
{
    lk_validator v;
    lk_pack_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_ternary_unpack", q));
    LK_V_TRY(lk_v_tensor(&v, "wq", wq, &a.src, LK_DT(LK_T2), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "w", w, &a.dst, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "w", &a.dst, a.src.rows, "wq rows", a.src.cols, "wq cols"));
    LK_V_TRY(lk_v_finish(&v));
    LK_V_RUN(&v, LK_OP_TERNARY_UNPACK, ternary_unpack, a, a.src.rows == 0 || a.src.cols == 0);
}
