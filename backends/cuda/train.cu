/* Lockstep CUDA: the training ops (docs/numerics.md section 13).
 *
 * The element formulas are backends/train.h's, compiled for the device
 * (with -fmad=false every + - * / there is one IEEE operation, as on the
 * host).  Row ops take one warp per row and sum with the contract's lane
 * sum (device.cuh's lk_warp_chunk, then the chunk partials into lanes in
 * chunk order: rows of up to 4096^2 terms).  The embedding gradient gives
 * each column to one thread, which adds the rows in ascending order: no
 * atomics, the same order as the reference. */
#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/math.cuh"
#include "backends/train.h"

namespace {

#define TR_WARPS 4 /* warps (rows) per block of the row kernels */

/* terms f(i) of a row, for lk_warp_chunk */
template <class F> struct fn_src {
    F f;
    __device__ __forceinline__ float operator()(int64_t i) const { return f(i); }
    __device__ __forceinline__ float2 pair(int64_t i) const { return make_float2(f(i), f(i + 1)); }
};

/* The lane sum (SQ: of squares) of f(0 .. n) by one warp, in every thread;
 * n <= LK_CHUNK^2. */
template <bool SQ, class F> static __device__ __forceinline__ float warp_sum(F f, int64_t n)
{
    const fn_src<F> src = {f};
    if (n <= LK_CHUNK)
        return __shfl_sync(LK_FULL_MASK, lk_warp_chunk<SQ>(src, 0, (int)n), 0);
    const int t = threadIdx.x & (LK_WARP - 1);
    float a = -0.0f, b = -0.0f; /* level-2 lanes 2t and 2t + 1 */
    const int64_t chunks = (n + LK_CHUNK - 1) / LK_CHUNK;
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t left = n - c * LK_CHUNK;
        const int len = (int)(left < LK_CHUNK ? left : LK_CHUNK);
        const float p = __shfl_sync(LK_FULL_MASK, lk_warp_chunk<SQ>(src, c * LK_CHUNK, len), 0);
        const int lane = (int)(c % LK_LANES);
        if (lane / 2 == t) {
            if (lane & 1)
                b = __fadd_rn(b, p);
            else
                a = __fadd_rn(a, p);
        }
    }
    return __shfl_sync(LK_FULL_MASK, lk_butterfly(a, b), 0);
}

/* ---- element-wise: unary backward ---- */

__global__ void __launch_bounds__(256) unary_backward_kernel(lk_ew_shape s, lk_unary_backward_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const int64_t ldx = s.flat ? s.cols : a.x.ld, ldd = s.flat ? s.cols : a.dy.ld;
    const int64_t ldo = s.flat ? s.cols : a.dx.ld;
    LK_EW_FOR(s, false, r, i) {
        const float x = lk_load_any(a.x.data, a.x.dtype, r * ldx + i);
        const float dy = lk_load_any(a.dy.data, a.dy.dtype, r * ldd + i);
        lk_store_any(a.dx.data, a.dx.dtype, r * ldo + i, lk_unary_grad(a.op, x, dy));
    }
}

/* ---- element-wise: optimizer steps ---- */

__global__ void __launch_bounds__(256) optim_kernel(lk_ew_shape s, lk_optim_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    float *p = (float *)a.param.data, *s1 = (float *)a.s1.data, *s2 = (float *)a.s2.data;
    LK_EW_FOR(s, false, r, i) {
        const int64_t ip = s.flat ? i : r * a.param.ld + i;
        const int64_t ig = s.flat ? i : r * a.grad.ld + i;
        const int64_t i1 = s.flat ? i : r * a.s1.ld + i, i2 = s.flat ? i : r * a.s2.ld + i;
        const float g = lk_load_any(a.grad.data, a.grad.dtype, ig);
        float pv = p[ip], v1 = 0.0f, v2 = 0.0f;
        if (s1 != nullptr)
            v1 = s1[i1];
        if (s2 != nullptr)
            v2 = s2[i2];
        if (a.kind == LK_OPTIM_ADAMW)
            lk_adamw_elem(&a, g, &pv, &v1, &v2);
        else
            lk_sgd_elem(&a, g, &pv, &v1);
        lk_elem<LK_F32>::store(p, ip, pv);
        if (s1 != nullptr)
            lk_elem<LK_F32>::store(s1, i1, v1);
        if (s2 != nullptr)
            lk_elem<LK_F32>::store(s2, i2, v2);
    }
}

/* ---- rows: softmax backward ---- */

__global__ void __launch_bounds__(TR_WARPS * LK_WARP) softmax_backward_kernel(lk_softmax_backward_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const int lane = threadIdx.x & (LK_WARP - 1);
    const int64_t n = a.y.cols;
    for (int64_t r = (int64_t)blockIdx.x * TR_WARPS + threadIdx.x / LK_WARP; r < a.y.rows;
         r += (int64_t)gridDim.x * TR_WARPS) {
        const void *y = a.y.data, *dy = a.dy.data;
        const int64_t oy = r * a.y.ld, od = r * a.dy.ld, ox = r * a.dx.ld;
        const lk_dtype ty = a.y.dtype, td = a.dy.dtype;
        const int log = a.log;
        const float d = warp_sum<false>(
            [=](int64_t i) {
                const float g = lk_load_any(dy, td, od + i);
                return log ? g : __fmul_rn(g, lk_load_any(y, ty, oy + i));
            },
            n);
        for (int64_t i = lane; i < n; i += LK_WARP)
            lk_store_any(a.dx.data, a.dx.dtype, ox + i,
                         lk_softmax_grad(log, lk_load_any(y, ty, oy + i),
                                         lk_load_any(dy, td, od + i), d));
    }
}

/* ---- rows: RMSNorm and LayerNorm backward ---- */

__global__ void __launch_bounds__(TR_WARPS * LK_WARP) norm_backward_kernel(lk_norm_backward_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const int lane = threadIdx.x & (LK_WARP - 1);
    const int64_t n = a.x.cols;
    const void *w = a.weight.data;
    const lk_dtype tw = a.weight.dtype, tx = a.x.dtype, td = a.dy.dtype;
    for (int64_t r = (int64_t)blockIdx.x * TR_WARPS + threadIdx.x / LK_WARP; r < a.x.rows;
         r += (int64_t)gridDim.x * TR_WARPS) {
        const void *x = a.x.data, *dy = a.dy.data;
        const int64_t ox = r * a.x.ld, od = r * a.dy.ld, oo = r * a.dx.ld, ow = r * a.dwt.ld;
        const bool dwt = a.dwt.data != nullptr;
        auto X = [=](int64_t i) { return lk_load_any(x, tx, ox + i); };
        auto G = [=](int64_t i) {
            const float g = lk_load_any(dy, td, od + i);
            return w != nullptr ? __fmul_rn(g, lk_load_any(w, tw, i)) : g;
        };
        const float fn = (float)n;
        if (!a.layer) {
            const float ms = __fdiv_rn(warp_sum<true>(X, n), fn);
            const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, a.eps)));
            const float dot = warp_sum<false>(
                [=](int64_t i) { return __fmul_rn(G(i), X(i)); }, n);
            const float k = lk_rms_grad_k(dot, n, rs);
            for (int64_t i = lane; i < n; i += LK_WARP) {
                const float xi = X(i);
                lk_store_any(a.dx.data, a.dx.dtype, oo + i, lk_rms_grad_dx(G(i), xi, rs, k));
                if (dwt)
                    lk_store_any(a.dwt.data, a.dwt.dtype, ow + i,
                                 __fmul_rn(lk_load_any(dy, td, od + i), __fmul_rn(xi, rs)));
            }
        } else {
            const float m = __fdiv_rn(warp_sum<false>(X, n), fn);
            auto D = [=](int64_t i) { return __fsub_rn(X(i), m); };
            const float v = __fdiv_rn(warp_sum<true>(D, n), fn);
            const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(v, a.eps)));
            auto XH = [=](int64_t i) { return __fmul_rn(D(i), rs); };
            const float sa = __fdiv_rn(warp_sum<false>(G, n), fn);
            const float sb = __fdiv_rn(
                warp_sum<false>([=](int64_t i) { return __fmul_rn(G(i), XH(i)); }, n),
                fn);
            for (int64_t i = lane; i < n; i += LK_WARP) {
                const float xh = XH(i);
                lk_store_any(a.dx.data, a.dx.dtype, oo + i, lk_ln_grad_dx(G(i), xh, sa, sb, rs));
                if (dwt)
                    lk_store_any(a.dwt.data, a.dwt.dtype, ow + i,
                                 __fmul_rn(lk_load_any(dy, td, od + i), xh));
            }
        }
    }
}

/* ---- the embedding gradient: a thread per column, rows in order ---- */

__global__ void __launch_bounds__(256) embedding_backward_kernel(lk_embedding_backward_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    float *dt = (float *)a.dtable.data;
    const int32_t *ids = (const int32_t *)a.ids.data;
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < a.dy.cols;
         c += (int64_t)gridDim.x * blockDim.x)
        for (int64_t r = 0; r < a.dy.rows; r++) {
            const int64_t at = (int64_t)ids[r * a.ids.ld] * a.dtable.ld + c;
            lk_elem<LK_F32>::store(
                dt, at, __fadd_rn(dt[at], lk_load_any(a.dy.data, a.dy.dtype, r * a.dy.ld + c)));
        }
}

static unsigned row_grid(int64_t rows)
{
    return lk_grid_cap((rows + TR_WARPS - 1) / TR_WARPS, (int64_t)1 << 20);
}

} // namespace

extern "C" lk_status lk_cuda_unary_backward(void *queue, const lk_unary_backward_args *a)
{
    lk_op_scope op(queue, "lk_unary_backward");
    if (!op.ok())
        return op.status();
    const lk_tensor *ts[3] = {&a->x, &a->dy, &a->dx};
    lk_ew_shape s = lk_ew_plan(ts, 3, a->x.rows, a->x.cols);
    lk_launch(unary_backward_kernel, s.grid, 256, 0, op.stream(), s, *a);
    return op.launched();
}

extern "C" lk_status lk_cuda_optim_step(void *queue, const lk_optim_args *a)
{
    lk_op_scope op(queue, "lk_optim_step");
    if (!op.ok())
        return op.status();
    const lk_tensor *ts[4] = {&a->param, &a->grad, &a->s1, &a->s2};
    int nt = a->s2.data != nullptr ? 4 : a->s1.data != nullptr ? 3 : 2;
    lk_ew_shape s = lk_ew_plan(ts, nt, a->param.rows, a->param.cols);
    lk_launch(optim_kernel, s.grid, 256, 0, op.stream(), s, *a);
    return op.launched();
}

static bool rows_fit(lk_op_scope &op, int64_t n, lk_status *st)
{
    if (n <= (int64_t)LK_CHUNK * LK_CHUNK)
        return true;
    *st = op.fail(LK_ERR_UNSUPPORTED, "%s: rows of %lld elements (at most %lld on CUDA)", op.what,
                  (long long)n, (long long)LK_CHUNK * LK_CHUNK);
    return false;
}

extern "C" lk_status lk_cuda_softmax_backward(void *queue, const lk_softmax_backward_args *a)
{
    lk_op_scope op(queue, "lk_softmax_backward");
    lk_status st;
    if (!op.ok())
        return op.status();
    if (!rows_fit(op, a->y.cols, &st))
        return st;
    lk_launch(softmax_backward_kernel, row_grid(a->y.rows), TR_WARPS * LK_WARP, 0, op.stream(),
              *a);
    return op.launched();
}

extern "C" lk_status lk_cuda_norm_backward(void *queue, const lk_norm_backward_args *a)
{
    lk_op_scope op(queue, "lk_norm_backward");
    lk_status st;
    if (!op.ok())
        return op.status();
    if (!rows_fit(op, a->x.cols, &st))
        return st;
    lk_launch(norm_backward_kernel, row_grid(a->x.rows), TR_WARPS * LK_WARP, 0, op.stream(), *a);
    return op.launched();
}

extern "C" lk_status lk_cuda_embedding_backward(void *queue, const lk_embedding_backward_args *a)
{
    lk_op_scope op(queue, "lk_embedding_backward");
    if (!op.ok())
        return op.status();
    lk_launch(embedding_backward_kernel, lk_grid_cap((a->dy.cols + 255) / 256, 65535), 256, 0,
              op.stream(), *a);
    return op.launched();
}
