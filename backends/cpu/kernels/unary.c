/* Lockstep CPU kernels: element-wise unary ops and conversions
 * (docs/numerics.md sections 3 and 7): each element widened exactly, mapped
 * by the vector form of the library's sequence (transcendental.h), rounded
 * once at the store.  y may be x itself (same element size and ld): each
 * vector is read before it is written.  Threads take whole rows. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"

/* relu(x): NaN -> NaN, else x > 0 ? x : +0 */
LK_INLINE vf v_relu(vf x)
{
    return vf_select(vf_isnan(x), x, vf_select(vf_gt(x, vf_zero()), x, vf_zero()));
}

LK_INLINE vf unary_v(const lk_unary_op op, vf x)
{
    switch (op) {
    case LK_UNARY_RELU:
        return v_relu(x);
    case LK_UNARY_RELU2: {
        vf r = v_relu(x);
        return vf_mul(r, r);
    }
    case LK_UNARY_SIGMOID:
        return v_sigmoidf(x);
    case LK_UNARY_SILU:
        return v_siluf(x);
    case LK_UNARY_GELU_TANH:
        return v_gelu_tanhf(x);
    case LK_UNARY_GELU_ERF:
        return v_gelu_erff(x);
    case LK_UNARY_EXP:
        return v_expf(x);
    case LK_UNARY_LOG:
        return v_logf(x);
    case LK_UNARY_TANH:
        return v_tanhf(x);
    case LK_UNARY_ERF:
        return v_erff(x);
    default: /* LK_UNARY_COPY: the store converts */
        return x;
    }
}

/* Rows r0 .. r1 - 1 with op fixed at compile time. */
LK_INLINE void unary_rows_op(const lk_unary_op op, const lk_unary_args *p, int64_t r0,
                             int64_t r1)
{
    const lk_dtype xd = p->x.dtype, yd = p->y.dtype;
    const int64_t n = p->x.cols;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t xi = r * p->x.ld, yi = r * p->y.ld;
        int64_t c = 0;
        if (xd == LK_F32 && yd == LK_F32) {
            const float *x = (const float *)p->x.data + xi;
            float *y = (float *)p->y.data + yi;
            for (; c + VW <= n; c += VW)
                vf_store(y + c, vf_canon(unary_v(op, vf_load(x + c))));
        } else {
            for (; c + VW <= n; c += VW)
                st_dt(p->y.data, yd, yi + c, unary_v(op, ld_dt(p->x.data, xd, xi + c)));
        }
        if (c < n) {
            const int left = (int)(n - c);
            st_dt_part(p->y.data, yd, yi + c, left,
                       unary_v(op, ld_dt_part(p->x.data, xd, xi + c, left, vf_zero())));
        }
    }
}

/* fn(op, p, r0, r1) with op a constant in each case, so that unary_v is
 * specialised per op (SIMDe's generic builds: one call with op as is). */
#define UN_CASE(fn, op)                      \
    case op:                                 \
        fn(op, p, r0, r1);                   \
        break;
#define UN_DISPATCH(fn, opv)                                                              \
    do {                                                                                  \
        if (LK_SIMDE_GENERIC) {                                                           \
            fn(opv, p, r0, r1);                                                           \
            break;                                                                        \
        }                                                                                 \
        switch (opv) {                                                                    \
            UN_CASE(fn, LK_UNARY_RELU) UN_CASE(fn, LK_UNARY_RELU2)                        \
            UN_CASE(fn, LK_UNARY_SIGMOID) UN_CASE(fn, LK_UNARY_SILU)                      \
            UN_CASE(fn, LK_UNARY_GELU_TANH) UN_CASE(fn, LK_UNARY_GELU_ERF)                \
            UN_CASE(fn, LK_UNARY_EXP) UN_CASE(fn, LK_UNARY_LOG) UN_CASE(fn, LK_UNARY_TANH) \
            UN_CASE(fn, LK_UNARY_ERF)                                                     \
        default:                                                                          \
            fn(LK_UNARY_COPY, p, r0, r1);                                                 \
            break;                                                                        \
        }                                                                                 \
    } while (0)

static void unary_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const lk_unary_args *p = (const lk_unary_args *)v;
    (void)tid;
    UN_DISPATCH(unary_rows_op, p->op);
}

LK_CPU_DEFINE(unary, lk_unary_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const int64_t rows = args->x.rows;
    /* a transcendental costs some 30 operations per element, a copy none */
    const double per = args->op == LK_UNARY_COPY || args->op <= LK_UNARY_RELU2 ? 8.0 : 64.0;
    lk_cpu_for(lk_cpu_threads_for(q, per * (double)rows * (double)args->x.cols, rows), rows,
               unary_rows, (void *)args);
    return LK_OK;
}

/* ---- lk_glu (numerics.md section 7.10): y = unary(op, gate) * up ----
 * The unary result stays in f32 and meets up in one vf_mul: the bits of
 * lk_unary into an f32 temporary then lk_binary MUL.  y may be gate or up
 * itself: both vectors are read before the store. */
LK_INLINE void glu_rows_op(const lk_unary_op op, const lk_glu_args *p, int64_t r0, int64_t r1)
{
    const lk_dtype gd = p->gate.dtype, ud = p->up.dtype, yd = p->y.dtype;
    const int f32 = gd == LK_F32 && ud == LK_F32 && yd == LK_F32;
    const int64_t n = p->gate.cols;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t gi = r * p->gate.ld, ui = r * p->up.ld, yi = r * p->y.ld;
        int64_t c = 0;
        if (f32) {
            const float *g = (const float *)p->gate.data + gi;
            const float *u = (const float *)p->up.data + ui;
            float *y = (float *)p->y.data + yi;
            for (; c + VW <= n; c += VW)
                vf_store(y + c, vf_canon(vf_mul(unary_v(op, vf_load(g + c)), vf_load(u + c))));
        } else {
            for (; c + VW <= n; c += VW)
                st_dt(p->y.data, yd, yi + c,
                      vf_mul(unary_v(op, ld_dt(p->gate.data, gd, gi + c)),
                             ld_dt(p->up.data, ud, ui + c)));
        }
        if (c < n) {
            const int left = (int)(n - c);
            vf g = unary_v(op, ld_dt_part(p->gate.data, gd, gi + c, left, vf_zero()));
            st_dt_part(p->y.data, yd, yi + c, left,
                       vf_mul(g, ld_dt_part(p->up.data, ud, ui + c, left, vf_zero())));
        }
    }
}

static void glu_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const lk_glu_args *p = (const lk_glu_args *)v;
    (void)tid;
    UN_DISPATCH(glu_rows_op, p->op);
}

LK_CPU_DEFINE(glu, lk_glu_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const int64_t rows = args->gate.rows;
    const double per = args->op == LK_UNARY_COPY || args->op <= LK_UNARY_RELU2 ? 12.0 : 68.0;
    lk_cpu_for(lk_cpu_threads_for(q, per * (double)rows * (double)args->gate.cols, rows), rows,
               glu_rows, (void *)args);
    return LK_OK;
}
