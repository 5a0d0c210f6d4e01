/* Lockstep reference: element-wise unary ops (docs/numerics.md section 7).
 * Each element is widened exactly to f32, mapped, and rounded once at the
 * store (canonical NaN).  y may be x itself (same data, element size and
 * ld): each element is read before it is written, so in-place runs give
 * the same bits, whatever the two dtypes. */
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#include "numerics/scalar.h"

/* relu(x): NaN -> NaN, else x > 0 ? x : +0 (so relu(-0) = +0). */
static float relu(float x)
{
    if (lk_isnan(x))
        return x;
    return x > 0.0f ? x : 0.0f;
}

static float apply(lk_unary_op op, float x)
{
    switch (op) {
    case LK_UNARY_RELU:
        return relu(x);
    case LK_UNARY_RELU2: {
        float r = relu(x);
        return r * r;
    }
    case LK_UNARY_SIGMOID:
        return lk_ref_sigmoidf(x);
    case LK_UNARY_SILU:
        return lk_ref_siluf(x);
    case LK_UNARY_GELU_TANH:
        return lk_ref_gelu_tanhf(x);
    case LK_UNARY_GELU_ERF:
        return lk_ref_gelu_erff(x);
    case LK_UNARY_EXP:
        return lk_ref_expf(x);
    case LK_UNARY_LOG:
        return lk_ref_logf(x);
    case LK_UNARY_TANH:
        return lk_ref_tanhf(x);
    case LK_UNARY_ERF:
        return lk_ref_erff(x);
    default: /* LK_UNARY_COPY: the store does the conversion */
        return x;
    }
}

lk_status lk_ref_unary(const lk_unary_args *p)
{
    for (int64_t r = 0; r < p->x.rows; r++) {
        int64_t xb = r * p->x.ld, yb = r * p->y.ld;
        for (int64_t c = 0; c < p->x.cols; c++) {
            float x = lk_ref_load(p->x.data, p->x.dtype, xb + c);
            lk_ref_store(p->y.data, p->y.dtype, yb + c, apply(p->op, x));
        }
    }
    return LK_OK;
}

/* lk_glu (numerics.md section 7.10): the unary result stays f32 (what an
 * f32 temporary would hold) and meets up in one f32 multiply, rounded once
 * at the store.  y may be gate or up itself: both are read first. */
lk_status lk_ref_glu(const lk_glu_args *p)
{
    for (int64_t r = 0; r < p->gate.rows; r++) {
        int64_t gb = r * p->gate.ld, ub = r * p->up.ld, yb = r * p->y.ld;
        for (int64_t c = 0; c < p->gate.cols; c++) {
            float u = apply(p->op, lk_ref_load(p->gate.data, p->gate.dtype, gb + c));
            float z = lk_ref_load(p->up.data, p->up.dtype, ub + c);
            lk_ref_store(p->y.data, p->y.dtype, yb + c, u * z);
        }
    }
    return LK_OK;
}
