/* Lockstep CUDA: softmax and log-softmax (docs/numerics.md section 6), one
 * pass over global memory per row when the row fits in shared memory.
 *
 * mx = maximum over the row (order-free); t_i = x_i - mx; e_i = exp(t_i)
 * (the library's exp); s = lane sum of e_i;
 * softmax: y_i = e_i / s;   log-softmax: y_i = t_i - log(s). */
#include "backends/cuda/math.cuh"
#include "backends/cuda/rows.cuh"
#include "backends/cuda/rows_reg.cuh"

namespace {

struct exp_fn {
    __device__ __forceinline__ float operator()(float t) const { return lk_cu_exp(t); }
};

template <lk_dtype DX, lk_dtype DY, bool VEC, bool LOG>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    softmax_kernel(lk_softmax_args a, lk_rows_cfg c)
{
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
        auto shift = [=](float x) { return __fsub_rn(x, mx); };
        auto shift_exp = [=](float x) { return lk_cu_exp(__fsub_rn(x, mx)); };
        if (!LOG) {
            if (cached) {
                lk_cache_apply(g, n, shift_exp); /* the cache now holds e_i */
                g.sync();
            }
            const float s = lk_row_sum<false, DX, VEC>(g, xr, n, lk_identity(), shift_exp);
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t, float x) {
                return __fdiv_rn(cached ? x : shift_exp(x), s);
            });
        } else {
            if (cached) {
                lk_cache_apply(g, n, shift); /* the cache now holds t_i */
                g.sync();
            }
            const float s = lk_row_sum<false, DX, VEC>(g, xr, n, exp_fn(), shift_exp);
            const float ls = lk_cu_log(s);
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t, float x) {
                return __fsub_rn(cached ? x : shift(x), ls);
            });
        }
        g.sync(); /* the next row refills the cache */
    }
}

/* Rows of up to LK_RR_MAX elements: the row in registers (rows_reg.cuh). */
template <lk_dtype DX, lk_dtype DY, bool LOG, int J>
__global__ void __launch_bounds__(64 * LK_RR_MAX_CHUNKS) softmax_reg_kernel(lk_softmax_args a)
{
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    __shared__ float sh[LK_RR_SMEM];
    const int64_t n = a.x.cols;
    for (int64_t r = blockIdx.x; r < a.x.rows; r += gridDim.x) {
        float v[J];
        lk_rr_load<DX, J>(v, (const TX *)a.x.data + r * a.x.ld, n);
        TY *yr = (TY *)a.y.data + r * a.y.ld;
        const float mx = lk_rr_fold<J>(v, n, sh, __uint_as_float(0xff800000u), lk_op_maximum());
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = __fsub_rn(v[j], mx); /* t_i */
        if (!LOG) {
#pragma unroll
            for (int j = 0; j < J; j++)
                v[j] = lk_cu_exp(v[j]); /* e_i */
            const float s = lk_rr_sum<false, J>(v, n, sh, lk_identity());
            lk_rr_store<DY, J>(v, yr, n, [=](int64_t, float e) { return __fdiv_rn(e, s); });
        } else {
            const float s = lk_rr_sum<false, J>(v, n, sh, exp_fn());
            const float ls = lk_cu_log(s);
            lk_rr_store<DY, J>(v, yr, n, [=](int64_t, float t) { return __fsub_rn(t, ls); });
        }
    }
}

template <bool LOG> struct softmax_op {
    template <lk_dtype DX, lk_dtype DY, int J>
    static void reg(dim3 grid, dim3 block, cudaStream_t st, const lk_softmax_args &a)
    {
        softmax_reg_kernel<DX, DY, LOG, J><<<grid, block, 0, st>>>(a);
    }
    template <lk_dtype DX, lk_dtype DY, bool VEC>
    static void cached(const lk_rows_cfg &c, cudaStream_t st, const lk_softmax_args &a)
    {
        LK_ROWS_LAUNCH((softmax_kernel<DX, DY, VEC, LOG>), c, st, a, c);
    }
};

} // namespace

extern "C" lk_status lk_cuda_softmax(void *queue, const lk_softmax_args *a)
{
    return lk_rr_row_op<softmax_op<false> >(queue, a, "lk_softmax");
}

extern "C" lk_status lk_cuda_log_softmax(void *queue, const lk_softmax_args *a)
{
    return lk_rr_row_op<softmax_op<true> >(queue, a, "lk_log_softmax");
}
