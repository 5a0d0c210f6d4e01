/* Lockstep CUDA: element-wise functions and conversions (docs/numerics.md
 * sections 3 and 7).  Each element is widened exactly, goes through the
 * same f32 sequence as the reference (backends/transcendental.h compiled
 * for the device) and is rounded once at the store, NaN canonical.  y may
 * be x itself: every element is read before it is written, by the same
 * thread. */
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/math.cuh"

namespace {

struct unary_fn {
    lk_unary_op op;
    __device__ __forceinline__ float operator()(float x) const
    {
        switch (op) {
        case LK_UNARY_RELU:
            return lk_cu_relu(x);
        case LK_UNARY_RELU2:
            return lk_cu_relu2(x);
        case LK_UNARY_SIGMOID:
            return lk_cu_sigmoid(x);
        case LK_UNARY_SILU:
            return lk_cu_silu(x);
        case LK_UNARY_GELU_TANH:
            return lk_cu_gelu_tanh(x);
        case LK_UNARY_GELU_ERF:
            return lk_cu_gelu_erf(x);
        case LK_UNARY_EXP:
            return lk_cu_exp(x);
        case LK_UNARY_LOG:
            return lk_cu_log(x);
        case LK_UNARY_TANH:
            return lk_cu_tanh(x);
        case LK_UNARY_ERF:
            return lk_cu_erf(x);
        default: /* LK_UNARY_COPY */
            return x;
        }
    }
};

template <lk_dtype DX, lk_dtype DY, bool VEC>
__global__ void __launch_bounds__(256) unary_kernel(lk_ew_shape s, const void *x, int64_t ldx,
                                                    void *y, int64_t ldy, unary_fn f)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    LK_EW_FOR(s, VEC, r, i) {
        const TX *xr = (const TX *)x + r * ldx;
        TY *yr = (TY *)y + r * ldy;
        if (VEC && i + 4 <= s.cols) {
            float4 v = lk_elem<DX>::load4(xr, i);
            lk_elem<DY>::store4(yr, i, make_float4(f(v.x), f(v.y), f(v.z), f(v.w)));
        } else {
            for (int64_t e = i; e < s.cols && e < i + (VEC ? 4 : 1); e++)
                lk_elem<DY>::store(yr, e, f(lk_elem<DX>::load(xr, e)));
        }
    }
}

} // namespace

extern "C" lk_status lk_cuda_unary(void *queue, const lk_unary_args *a)
{
    lk_op_scope op(queue, "lk_unary");
    if (!op.ok())
        return op.status();
    const lk_tensor *ts[2] = {&a->x, &a->y};
    lk_ew_shape s = lk_ew_plan(ts, 2, a->x.rows, a->x.cols);
    int64_t ldx = s.flat ? s.cols : a->x.ld, ldy = s.flat ? s.cols : a->y.ld;
    const unary_fn f = {a->op};
    LK_FLOAT_SWITCH(a->x.dtype, DX, LK_FLOAT_SWITCH(a->y.dtype, DY, {
        if (s.vec)
            lk_launch(unary_kernel<DX, DY, true>, s.grid, 256, 0, op.stream(), s, a->x.data, ldx,
                      a->y.data, ldy, f);
        else
            lk_launch(unary_kernel<DX, DY, false>, s.grid, 256, 0, op.stream(), s, a->x.data, ldx,
                      a->y.data, ldy, f);
    }));
    return op.launched();
}

/* ---- lk_glu (numerics.md section 7.10): y = unary(op, gate) * up ----
 * The unary result stays in f32 and meets up in one __fmul_rn (no fma):
 * the bits of lk_unary into an f32 temporary then lk_binary MUL, in one
 * kernel.  y may be gate or up itself (same thread, read first). */
namespace {

template <lk_dtype DG, lk_dtype DU, lk_dtype DY, bool VEC>
__global__ void __launch_bounds__(256)
    glu_kernel(lk_ew_shape s, const void *g, int64_t ldg, const void *u, int64_t ldu, void *y,
               int64_t ldy, unary_fn f)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DG>::T TG;
    typedef typename lk_elem<DU>::T TU;
    typedef typename lk_elem<DY>::T TY;
    LK_EW_FOR(s, VEC, r, i) {
        const TG *gr = (const TG *)g + r * ldg;
        const TU *ur = (const TU *)u + r * ldu;
        TY *yr = (TY *)y + r * ldy;
        if (VEC && i + 4 <= s.cols) {
            float4 a = lk_elem<DG>::load4(gr, i), b = lk_elem<DU>::load4(ur, i);
            lk_elem<DY>::store4(yr, i, make_float4(__fmul_rn(f(a.x), b.x), __fmul_rn(f(a.y), b.y),
                                                   __fmul_rn(f(a.z), b.z),
                                                   __fmul_rn(f(a.w), b.w)));
        } else {
            for (int64_t e = i; e < s.cols && e < i + (VEC ? 4 : 1); e++)
                lk_elem<DY>::store(yr, e, __fmul_rn(f(lk_elem<DG>::load(gr, e)),
                                                    lk_elem<DU>::load(ur, e)));
        }
    }
}

template <lk_dtype DG, lk_dtype DU>
void glu_launch(const lk_glu_args *a, const lk_ew_shape &s, int64_t ldg, int64_t ldu,
                int64_t ldy, unary_fn f, cudaStream_t st)
{
    LK_FLOAT_SWITCH(a->y.dtype, DY, {
        if (s.vec)
            lk_launch(glu_kernel<DG, DU, DY, true>, s.grid, 256, 0, st, s, a->gate.data, ldg,
                      a->up.data, ldu, a->y.data, ldy, f);
        else
            lk_launch(glu_kernel<DG, DU, DY, false>, s.grid, 256, 0, st, s, a->gate.data, ldg,
                      a->up.data, ldu, a->y.data, ldy, f);
    });
}

} // namespace

extern "C" lk_status lk_cuda_glu(void *queue, const lk_glu_args *a)
{
    lk_op_scope op(queue, "lk_glu");
    if (!op.ok())
        return op.status();
    const lk_tensor *ts[3] = {&a->gate, &a->up, &a->y};
    lk_ew_shape s = lk_ew_plan(ts, 3, a->gate.rows, a->gate.cols);
    const int64_t ldg = s.flat ? s.cols : a->gate.ld, ldu = s.flat ? s.cols : a->up.ld;
    const int64_t ldy = s.flat ? s.cols : a->y.ld;
    const unary_fn f = {a->op};
    LK_FLOAT_SWITCH(a->gate.dtype, DG, LK_FLOAT_SWITCH(a->up.dtype, DU, {
        glu_launch<DG, DU>(a, s, ldg, ldu, ldy, f, op.stream());
    }));
    return op.launched();
}
