/* Lockstep CUDA: RMSNorm and LayerNorm (docs/numerics.md section 6), one
 * pass over global memory per row when the row fits in shared memory.
 *
 * RMSNorm:   ss = lane sum of fma(x_i, x_i, lane); ms = ss / (float)n;
 *            r = 1 / sqrt(ms + eps); y_i = x_i * r (* w_i)
 * LayerNorm: m = lane sum of x_i / (float)n; d_i = x_i - m;
 *            ss = lane sum of fma(d_i, d_i, lane); v = ss / (float)n;
 *            r = 1 / sqrt(v + eps); y_i = d_i * r (* w_i) (+ b_i) */
#include "backends/cuda/rows.cuh"
#include "backends/cuda/rows_reg.cuh"

namespace {

template <lk_dtype DX, lk_dtype DY, bool VEC, bool LAYER>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    norm_kernel(lk_norm_args a, lk_rows_cfg c)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);
    const float eps = a.eps;
    const void *w = a.weight.data, *b = a.bias.data;
    const lk_dtype wdt = a.weight.dtype, bdt = a.bias.dtype;

    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        TY *yr = (TY *)a.y.data + r * a.y.ld;
        if (g.cache) {
            lk_row_to_cache<DX, VEC>(g, xr, n);
            g.sync();
        }
        if (!LAYER) {
            float ss = lk_row_sum<true, DX, VEC>(g, xr, n, lk_identity(), lk_identity());
            float ms = __fdiv_rn(ss, nf);
            float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(ms, eps)));
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t i, float x) {
                float v = __fmul_rn(x, rs);
                if (w)
                    v = __fmul_rn(v, lk_load_any(w, wdt, i));
                return v;
            });
        } else {
            float sum = lk_row_sum<false, DX, VEC>(g, xr, n, lk_identity(), lk_identity());
            const float m = __fdiv_rn(sum, nf);
            auto dev = [=](float x) { return __fsub_rn(x, m); };
            if (g.cache) {
                lk_cache_apply(g, n, dev); /* the cache now holds d_i */
                g.sync();
            }
            float ss = lk_row_sum<true, DX, VEC>(g, xr, n, lk_identity(), dev);
            float v = __fdiv_rn(ss, nf);
            float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(v, eps)));
            const bool cached = g.cache != nullptr;
            lk_row_map<DX, DY, VEC>(g, xr, yr, n, [=](int64_t i, float x) {
                float t = __fmul_rn(cached ? x : __fsub_rn(x, m), rs);
                if (w)
                    t = __fmul_rn(t, lk_load_any(w, wdt, i));
                if (b)
                    t = __fadd_rn(t, lk_load_any(b, bdt, i));
                return t;
            });
        }
        g.sync(); /* the next row refills the cache */
    }
}

/* Rows of up to LK_RR_MAX elements: the row in registers (rows_reg.cuh).
 * LayerNorm first centres the row (d_i = x_i - m); from there both norms
 * are the same steps: ss, r, y_i = (d_i * r) * w_i, then LayerNorm's bias.
 * PRE (a few rows, as in decode): the weight and bias are loaded with the
 * row, before the reductions, so that their global round trip is not one
 * more step after them; many rows hide it anyway and keep the registers. */
template <lk_dtype DX, lk_dtype DY, bool LAYER, int J, int H, bool PRE = false>
__global__ void __launch_bounds__(H == 1 ? 64 * LK_RR_MAX_CHUNKS : 64 * H,
                                  H == 1 ? 1 : PRE ? 2 : 1024 / (64 * H))
    norm_reg_kernel(lk_norm_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    __shared__ float sh[LK_RR_SMEM];
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);
    float wv[J], bv[J]; /* PRE only; unused (and dropped) otherwise */
    if (PRE && a.weight.data)
        lk_rr_load_any<J, H>(wv, a.weight.data, a.weight.dtype, n);
    if (PRE && LAYER && a.bias.data)
        lk_rr_load_any<J, H>(bv, a.bias.data, a.bias.dtype, n);
    for (int64_t r = blockIdx.x; r < a.x.rows; r += gridDim.x) {
        float v[J];
        lk_rr_load<DX, J, H>(v, (const TX *)a.x.data + r * a.x.ld, n);
        if (LAYER) {
            const float m = __fdiv_rn(lk_rr_sum<false, J, H>(v, n, sh, lk_identity()), nf);
#pragma unroll
            for (int j = 0; j < J; j++)
                v[j] = __fsub_rn(v[j], m);
        }
        const float ss = lk_rr_sum<true, J, H>(v, n, sh, lk_identity());
        const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, nf), a.eps)));
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = __fmul_rn(v[j], rs);
        if (PRE) {
            if (a.weight.data)
#pragma unroll
                for (int j = 0; j < J; j++)
                    v[j] = __fmul_rn(v[j], wv[j]);
            if (LAYER && a.bias.data)
#pragma unroll
                for (int j = 0; j < J; j++)
                    v[j] = __fadd_rn(v[j], bv[j]);
        } else {
            if (a.weight.data)
                lk_rr_apply<J, H>(v, a.weight.data, a.weight.dtype, n, lk_rr_mul());
            if (LAYER && a.bias.data)
                lk_rr_apply<J, H>(v, a.bias.data, a.bias.dtype, n, lk_rr_add());
        }
        lk_rr_store<DY, J, H>(v, (TY *)a.y.data + r * a.y.ld, n, [](int64_t, float t) { return t; });
    }
}

/* at most this many rows: PRE (one row per block, every block one row) */
#define NORM_PRE_ROWS 256

/* LayerNorm of more rows, of one chunk past 1024: 256 threads a row, four
 * a lane (J = 16), rather than RMSNorm's 128 (J = 32, which spills under
 * the register bound of eight blocks an SM with LayerNorm's centring):
 * 0.91 of the device-to-device copy at 4096 x 4096 against 0.86 (H200,
 * one run; 16384 x 8192 0.95 either way; docs/internals/reductions.md). */
#define NORM_LAYER_H 4

template <bool LAYER> struct norm_op {
    template <lk_dtype DX, lk_dtype DY, int J, int H>
    static void reg(dim3 grid, dim3 block, cudaStream_t st, const lk_norm_args &a)
    {
        /* decode's rows of one chunk past 1024: the weight loaded early */
        if (H == 2 && a.x.rows <= NORM_PRE_ROWS)
            lk_launch(norm_reg_kernel<DX, DY, LAYER, J, H, H == 2>, grid, block, 0, st, a);
        else if (H == 2 && LAYER) /* many rows: four threads a lane, see NORM_LAYER_H */
            lk_launch(norm_reg_kernel<DX, DY, LAYER, 64 / NORM_LAYER_H, NORM_LAYER_H>, grid,
                      dim3(64 * NORM_LAYER_H), 0, st, a);
        else
            lk_launch(norm_reg_kernel<DX, DY, LAYER, J, H>, grid, block, 0, st, a);
    }
    template <lk_dtype DX, lk_dtype DY, bool VEC>
    static void cached(const lk_rows_cfg &c, cudaStream_t st, const lk_norm_args &a)
    {
        LK_ROWS_PDL_LAUNCH((norm_kernel<DX, DY, VEC, LAYER>), c, st, a, c);
    }
};

} // namespace

extern "C" lk_status lk_cuda_rmsnorm(void *queue, const lk_norm_args *a)
{
    return lk_rr_row_op<norm_op<false> >(queue, a, "lk_rmsnorm");
}

extern "C" lk_status lk_cuda_layernorm(void *queue, const lk_norm_args *a)
{
    return lk_rr_row_op<norm_op<true> >(queue, a, "lk_layernorm");
}
