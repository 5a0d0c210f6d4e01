/* Lockstep core: lk_gemm (docs/numerics.md section 4; the tensor-core tier,
 * selected by a flag, in its own section). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "core/validate.h"

LK_API lk_status lk_gemm(lk_queue *q, lk_transpose ta, lk_transpose tb, const lk_tensor *a,
                         const lk_tensor *b, const lk_tensor *bias, const lk_tensor *c,
                         int64_t batch, unsigned flags)
{
    lk_validator v;
    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_begin(&v, "lk_gemm", q));
    if (ta != LK_NO_TRANS && ta != LK_TRANS)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_gemm: ta: %d is not an lk_transpose",
                        (int)ta);
    if (tb != LK_NO_TRANS && tb != LK_TRANS)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_gemm: tb: %d is not an lk_transpose",
                        (int)tb);
    const unsigned known = LK_GEMM_ACCUMULATE | LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90;
    if (flags & ~known)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_gemm: flags: unknown bits 0x%x",
                        flags & ~known);
    unsigned tier = flags & (LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90);
    if (tier == (LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90))
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_gemm: flags: LK_GEMM_TC_SM80 and LK_GEMM_TC_SM90 together (one "
                        "tensor-core tier at a time)");
    if (batch < 1)
        return lk_error(LK_ERR_BAD_SHAPE, "lk_gemm: batch (%lld) < 1", (long long)batch);
    LK_V_TRY(lk_v_tensor(&v, "a", a, &g.a, LK_DT_FLOAT, LK_V_IN | LK_V_BATCHED, batch));
    LK_V_TRY(lk_v_tensor(&v, "b", b, &g.b, LK_DT_FLOAT, LK_V_IN | LK_V_BATCHED, batch));
    LK_V_TRY(lk_v_tensor(&v, "bias", bias, &g.bias, LK_DT_FLOAT,
                         LK_V_IN | LK_V_BATCHED | LK_V_OPTIONAL, batch));
    LK_V_TRY(lk_v_tensor(&v, "c", c, &g.c, LK_DT_FLOAT, LK_V_OUT | LK_V_BATCHED, batch));
    int64_t m = ta == LK_TRANS ? g.a.cols : g.a.rows;
    int64_t k = ta == LK_TRANS ? g.a.rows : g.a.cols;
    int64_t n;
    if (tb == LK_TRANS) {
        LK_V_TRY(lk_v_dims(&v, "b", &g.b, -1, NULL, k, "K"));
        n = g.b.rows;
    } else {
        LK_V_TRY(lk_v_dims(&v, "b", &g.b, k, "K", -1, NULL));
        n = g.b.cols;
    }
    if (bias)
        LK_V_TRY(lk_v_dims(&v, "bias", &g.bias, 1, NULL, n, "N"));
    LK_V_TRY(lk_v_dims(&v, "c", &g.c, m, "M", n, "N"));
    /* The MMA instructions multiply two operands of one 16-bit type. */
    if (tier && (g.a.dtype != g.b.dtype || g.a.dtype == LK_F32))
        return lk_error(LK_ERR_BAD_DTYPE,
                        "lk_gemm: the tensor-core tier (%s) takes A and B both bf16 or both "
                        "f16 (a is %s, b is %s); f32 inputs use the default tier",
                        tier == LK_GEMM_TC_SM80 ? "LK_GEMM_TC_SM80" : "LK_GEMM_TC_SM90",
                        lk_dtype_name(g.a.dtype), lk_dtype_name(g.b.dtype));
    LK_V_TRY(lk_v_finish(&v));
    g.ta = ta;
    g.tb = tb;
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = batch;
    g.flags = flags;
    if (tier)
        LK_V_RUN(&v, LK_OP_GEMM, gemm_tc, g, m == 0 || n == 0);
    LK_V_RUN(&v, LK_OP_GEMM, gemm, g, m == 0 || n == 0);
}
