/* Lockstep CUDA: element-wise functions and conversions (docs/numerics.md
 * sections 3 and 7).  Each element is widened exactly, goes through the
 * same f32 sequence as the reference (backends/transcendental.h compiled
 * for the device) and is rounded once at the store, NaN canonical.  y may
 * be x itself: every element is read before it is written, by the same
 * thread. */
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/math.cuh"

namespace {

__device__ __forceinline__ float relu(float x)
{
    if (lk_isnan(x))
        return x;
    return x > 0.0f ? x : 0.0f;
}

struct unary_fn {
    lk_unary_op op;
    __device__ __forceinline__ float operator()(float x) const
    {
        switch (op) {
        case LK_UNARY_RELU:
            return relu(x);
        case LK_UNARY_RELU2: {
            float r = relu(x);
            return __fmul_rn(r, r);
        }
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
