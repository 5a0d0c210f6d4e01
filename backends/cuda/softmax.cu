/* Lockstep CUDA: softmax and log-softmax (docs/numerics.md section 6), one
 * pass over global memory per row when the row fits in shared memory.
 *
 * mx = maximum over the row (order-free); t_i = x_i - mx; e_i = exp(t_i)
 * (the library's exp); s = lane sum of e_i;
 * softmax: r = 1 / s, y_i = e_i * r;   log-softmax: y_i = t_i - log(s).
 *
 * With a finite mx every t_i is <= 0 and not NaN, and the exp is
 * sm_exp: the contract's sequence with the exponent scaling done by an
 * integer add where that gives the same bits (the proof is in
 * backends/cpu/kernels/softmax.c, which does the same on vectors); an
 * element with k < -125 takes the full sequence. */
#include "backends/cuda/math.cuh"
#include "backends/cuda/rows.cuh"
#include "backends/cuda/rows_reg.cuh"

namespace {

/* exp(t) of numerics.md 7.1 for t <= 0, not NaN. */
static __device__ __forceinline__ float sm_exp(float t)
{
    const float tt = __fmaf_rn(t, LK_LOG2E, LK_EXP_SHIFT);
    const float kf = __fsub_rn(tt, LK_EXP_SHIFT); /* k */
    if (kf < -125.0f) /* p * 2^k may be subnormal */
        return lk_cu_exp(t);
    const float rh = __fmaf_rn(kf, -LK_LN2_HI, t);
    const float d = __fmul_rn(kf, -LK_LN2_LO);
    const float r = __fadd_rn(rh, d);
    float q = __fmaf_rn(LK_EXP_Q4, r, LK_EXP_Q3);
    q = __fmaf_rn(q, r, LK_EXP_Q2);
    q = __fmaf_rn(q, r, LK_EXP_Q1);
    q = __fmaf_rn(q, r, LK_EXP_Q0);
    const float u = __fmaf_rn(__fmul_rn(r, r), q, d);
    const float a = __fadd_rn(1.0f, rh);
    const float ae = __fadd_rn(__fsub_rn(1.0f, a), rh);
    const float p = __fadd_rn(a, __fadd_rn(ae, u));
    /* p * 2^k, exact and normal: k << 23 = bits(tt) << 23 modulo 2^32 */
    return __uint_as_float(__float_as_uint(p) + (__float_as_uint(tt) << 23));
}

struct exp_fn {
    __device__ __forceinline__ float operator()(float t) const { return lk_cu_exp(t); }
};
struct sm_exp_fn {
    __device__ __forceinline__ float operator()(float t) const { return sm_exp(t); }
};

/* max with NaN propagated, one instruction on sm_80 and later; which of
 * +0 and -0 it returns is not relied on (a zero maximum is folded again
 * with the contract's maximum). */
struct sm_max_nan {
    __device__ __forceinline__ float operator()(float a, float b) const
    {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
        float r;
        asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
        return r;
#else
        return lk_maximum(a, b);
#endif
    }
};

template <lk_dtype DX, lk_dtype DY, bool VEC, bool LOG>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    softmax_kernel(lk_softmax_args a, lk_rows_cfg c)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    const int64_t n = a.x.cols;
    const bool cached = g.cache != nullptr;

    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        TY *yr = (TY *)a.y.data + r * a.y.ld;
        if (cached) {
            lk_row_to_cache<DX, VEC>(g, xr, n);
            g.sync();
        }
        const float mx = lk_row_fold<DX>(g, xr, n, __uint_as_float(0xff800000u), lk_identity(),
                                         lk_op_maximum());
        const bool fast = __fsub_rn(mx, mx) == 0.0f; /* mx finite */
        auto shift = [=](float x) { return __fsub_rn(x, mx); };
        auto shift_exp = [=](float x) {
            return fast ? sm_exp(__fsub_rn(x, mx)) : lk_cu_exp(__fsub_rn(x, mx));
        };
        auto t_exp = [=](float t) { return fast ? sm_exp(t) : lk_cu_exp(t); };
        if (!LOG) {
            if (cached) {
                lk_cache_apply(g, n, shift_exp); /* the cache now holds e_i */
                g.sync();
            }
            const float s = lk_row_sum<false, DX, VEC>(g, xr, n, lk_identity(), shift_exp);
            const float rs = __fdiv_rn(1.0f, s);
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t, float x) {
                return __fmul_rn(cached ? x : shift_exp(x), rs);
            });
        } else {
            if (cached) {
                lk_cache_apply(g, n, shift); /* the cache now holds t_i */
                g.sync();
            }
            const float s = lk_row_sum<false, DX, VEC>(g, xr, n, t_exp, shift_exp);
            const float ls = lk_cu_log(s);
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t, float x) {
                return __fsub_rn(cached ? x : shift(x), ls);
            });
        }
        g.sync(); /* the next row refills the cache */
    }
}

/* Rows of up to LK_RR_MAX elements: the row in registers (rows_reg.cuh).
 * H > 1: blocks of up to 64 H C threads (rows of up to C chunks), as many
 * registers per thread as a row of one chunk on 64 H threads gets. */
template <lk_dtype DX, lk_dtype DY, bool LOG, int J, int H, int C = 1>
__global__ void __launch_bounds__(H == 1 ? 64 * LK_RR_MAX_CHUNKS : 64 * H * C,
                                  H == 1 ? 1 : (LOG ? 6 : 8) / C > 0 ? (LOG ? 6 : 8) / C : 1)
    softmax_reg_kernel(lk_softmax_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    __shared__ float sh[LK_RR_SMEM];
    const int64_t n = a.x.cols;
    for (int64_t r = blockIdx.x; r < a.x.rows; r += gridDim.x) {
        float v[J];
        lk_rr_load<DX, J, H>(v, (const TX *)a.x.data + r * a.x.ld, n);
        TY *yr = (TY *)a.y.data + r * a.y.ld;
        const float ninf = __uint_as_float(0xff800000u);
        float mx = lk_rr_fold<J, H>(v, n, sh, ninf, sm_max_nan());
        if (mx == 0.0f) /* +0 or -0: the contract's maximum decides (block-uniform) */
            mx = lk_rr_fold<J, H>(v, n, sh, ninf, lk_op_maximum());
        const bool fast = __fsub_rn(mx, mx) == 0.0f; /* mx finite: every t_i <= 0 */
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = __fsub_rn(v[j], mx); /* t_i */
        if (!LOG) {
            if (fast) {
#pragma unroll
                for (int j = 0; j < J; j++)
                    v[j] = sm_exp(v[j]); /* e_i */
            } else {
#pragma unroll
                for (int j = 0; j < J; j++)
                    v[j] = lk_cu_exp(v[j]);
            }
            const float rs = __fdiv_rn(1.0f, lk_rr_sum<false, J, H>(v, n, sh, lk_identity()));
            lk_rr_store<DY, J, H>(v, yr, n, [=](int64_t, float e) { return __fmul_rn(e, rs); });
        } else {
            const float s = fast ? lk_rr_sum<false, J, H>(v, n, sh, sm_exp_fn())
                                 : lk_rr_sum<false, J, H>(v, n, sh, exp_fn());
            const float ls = lk_cu_log(s);
            lk_rr_store<DY, J, H>(v, yr, n, [=](int64_t, float t) { return __fsub_rn(t, ls); });
        }
    }
}

template <bool LOG> struct softmax_op {
    template <lk_dtype DX, lk_dtype DY, int J, int H, int C = 1>
    static void reg(dim3 grid, dim3 block, cudaStream_t st, const lk_softmax_args &a)
    {
        lk_launch(softmax_reg_kernel<DX, DY, LOG, J, H, C>, grid, block, 0, st, a);
    }
    template <lk_dtype DX, lk_dtype DY, bool VEC>
    static void cached(const lk_rows_cfg &c, cudaStream_t st, const lk_softmax_args &a)
    {
        LK_ROWS_PDL_LAUNCH((softmax_kernel<DX, DY, VEC, LOG>), c, st, a, c);
    }
};

/* rows of 2 .. SM_SPLIT_CHUNKS chunks: two threads per lane (rows_reg.cuh) */
#define SM_SPLIT_CHUNKS 4

} // namespace

extern "C" lk_status lk_cuda_softmax(void *queue, const lk_softmax_args *a)
{
    return lk_rr_row_op<softmax_op<false>, SM_SPLIT_CHUNKS>(queue, a, "lk_softmax");
}

extern "C" lk_status lk_cuda_log_softmax(void *queue, const lk_softmax_args *a)
{
    return lk_rr_row_op<softmax_op<true>, SM_SPLIT_CHUNKS>(queue, a, "lk_log_softmax");
}
