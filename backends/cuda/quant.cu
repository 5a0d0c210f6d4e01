/* Lockstep CUDA: BitNet b1.58 quantisation (docs/numerics.md section 8).
 *
 * Activations, one group per row: amax = maximum of |x_i| from +0 (any
 * order), d = maximum(amax, 1e-5), s = 127 / d, q_i = isnan(v) ? 0 :
 * rne(minimum(maximum(v, -128), 127)) with v = x_i * s; scale = s.
 *
 * Weights, three kernels on the queue's workspace: rs_r = lane sum of
 * |w[r, k]| per row (one group per row) into ws[0 .. N); total = lane sum
 * of the rs_r (one group), m = maximum(total / (float)(N * K), 1e-5) into
 * ws[N] and the scale; then one thread per packed byte computes
 * t = rne(clamp(w / m, -1, 1)) (NaN -> 0) for its four weights. */
#include "backends/cuda/rows.cuh"
#include "backends/cuda/rows_reg.cuh"

namespace {

__device__ __forceinline__ int quantize(float v, float lo, float hi)
{
    if (lk_isnan(v))
        return 0;
    return (int)lk_rne(lk_minimum(lk_maximum(v, lo), hi));
}

struct abs_fn {
    __device__ __forceinline__ float operator()(float x) const { return lk_fabs(x); }
};

template <lk_dtype DX, bool VEC>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    quantize_act_kernel(lk_quant_args a, lk_rows_cfg c)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    const int64_t n = a.x.cols;
    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        int8_t *qr = (int8_t *)a.q.data + r * a.q.ld;
        if (g.cache) {
            lk_row_to_cache<DX, VEC>(g, xr, n);
            g.sync();
        }
        /* |x| >= +0, so +0 is the identity of this maximum */
        const float amax = lk_row_fold<DX>(g, xr, n, 0.0f, abs_fn(), lk_op_maximum());
        const float d = lk_maximum(amax, LK_QUANT_EPS);
        const float s = __fdiv_rn(127.0f, d);
        for (int64_t i = g.tid; i < n; i += g.nthreads) {
            float x = g.cache ? g.cache[i] : lk_elem<DX>::load(xr, i);
            qr[i] = (int8_t)quantize(__fmul_rn(x, s), -128.0f, 127.0f);
        }
        if (g.tid == 0)
            lk_store_any(a.scale.data, a.scale.dtype, r * a.scale.ld, s);
        g.sync(); /* the next row refills the cache */
    }
}

/* Rows of up to LK_QA_REG_MAX elements (every activation row of a decoder):
 * one block of LK_QA_THREADS per row, each thread holding its elements in
 * registers, so the row is read once with all loads in flight, the
 * absmax is an integer tree, one REDUX per warp and one barrier, and the quantised
 * values go out four per store.  VEC: x rows 16-byte aligned (float4 or 4
 * halves) and q rows 4-byte aligned; element 4v + e belongs to thread
 * v mod LK_QA_THREADS.  The maximum is order-free, the rest per element,
 * so the bits are those of the general kernel. */
#define LK_QA_THREADS 256
#define LK_QA_PER 8 /* groups of 4 per thread */
#define LK_QA_REG_MAX ((int64_t)LK_QA_THREADS * LK_QA_PER * 4)

template <lk_dtype DX, bool VEC>
__global__ void __launch_bounds__(LK_QA_THREADS) quantize_act_reg_kernel(lk_quant_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    __shared__ unsigned red[2][LK_QA_THREADS / 32];
    const int n = (int)a.x.cols, tid = threadIdx.x;
    int par = 0;
    for (int64_t r = blockIdx.x; r < a.x.rows; r += gridDim.x) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        int8_t *qr = (int8_t *)a.q.data + r * a.q.ld;
        float v[LK_QA_PER][4];
#pragma unroll
        for (int u = 0; u < LK_QA_PER; u++) {
            const int i = 4 * (tid + u * LK_QA_THREADS);
            if (VEC && i + 4 <= n) {
                const float4 f = lk_elem<DX>::load4(xr, i);
                v[u][0] = f.x, v[u][1] = f.y, v[u][2] = f.z, v[u][3] = f.w;
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    v[u][e] = i + e < n ? lk_elem<DX>::load(xr, i + e) : 0.0f;
            }
        }
        /* |x| >= +0, so +0 is the identity of this maximum (padding is +0);
         * on bit patterns (lk_qa_bits), as a tree */
        unsigned m[LK_QA_PER];
#pragma unroll
        for (int u = 0; u < LK_QA_PER; u++)
            m[u] = max(max(lk_qa_bits(v[u][0]), lk_qa_bits(v[u][1])),
                       max(lk_qa_bits(v[u][2]), lk_qa_bits(v[u][3])));
#pragma unroll
        for (int k = LK_QA_PER / 2; k >= 1; k >>= 1)
#pragma unroll
            for (int u = 0; u < k; u++)
                m[u] = max(m[u], m[u + k]);
        unsigned mw = lk_qa_warp_max(m[0]);
        /* red[par] is written again two rows on, after the next row's
         * barrier: one barrier per row */
        unsigned *rw = red[par];
        par ^= 1;
        if ((tid & 31) == 0)
            rw[tid / 32] = mw;
        __syncthreads();
        mw = rw[0];
#pragma unroll
        for (int w = 1; w < LK_QA_THREADS / 32; w++)
            mw = max(mw, rw[w]);
        const float d = lk_maximum(lk_qa_amax(mw), LK_QUANT_EPS);
        const float s = __fdiv_rn(127.0f, d);
#pragma unroll
        for (int u = 0; u < LK_QA_PER; u++) {
            const int i = 4 * (tid + u * LK_QA_THREADS);
            int qv[4];
#pragma unroll
            for (int e = 0; e < 4; e++)
                qv[e] = lk_qa_q8(__fmul_rn(v[u][e], s));
            if (VEC && i + 4 <= n) {
                *reinterpret_cast<uint32_t *>(qr + i) = lk_qa_pack4(qv[0], qv[1], qv[2], qv[3]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (i + e < n)
                        qr[i + e] = (int8_t)qv[e];
            }
        }
        if (tid == 0)
            lk_store_any(a.scale.data, a.scale.dtype, r * a.scale.ld, s);
    }
}

/* rs[r] = lane sum of |w[r, k]|. */
template <lk_dtype DX, bool VEC>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    abs_row_sums_kernel(lk_quant_args a, lk_rows_cfg c, float *rs)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        float v = lk_group_row_sum<false>(g, lk_row_src<DX, VEC, abs_fn>{xr, abs_fn()}, a.x.cols);
        if (g.tid == 0)
            rs[r] = v;
    }
}

/* One group: m = maximum(lane sum of rs / (float)(N * K), 1e-5) into
 * ws[N] and the scale. */
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    ternary_scale_kernel(lk_quant_args a, lk_rows_cfg c, float *rs)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    if (g.index != 0)
        return; /* one row: the first group does it */
    const int64_t N = a.x.rows;
    float total = lk_group_row_sum<false>(g, lk_f32_src{rs}, N);
    float mean = __fdiv_rn(total, __ll2float_rn(N * a.x.cols));
    float m = lk_maximum(mean, LK_QUANT_EPS);
    if (g.tid == 0) {
        rs[N] = m;
        lk_store_any(a.scale.data, a.scale.dtype, 0, m);
    }
}

/* One thread per byte of the packed output: codes t + 1, padding code 1. */
template <lk_dtype DX>
__global__ void __launch_bounds__(256) ternary_pack_kernel(lk_quant_args a, const float *mp)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    const int64_t K = a.x.cols;
    const int64_t bpr = (K + 3) / 4; /* bytes per row */
    const int64_t total = a.x.rows * bpr;
    const float m = *mp;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / bpr, j = i % bpr;
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        unsigned byte = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t k = 4 * j + e;
            unsigned code = 1u;
            if (k < K)
                code = (unsigned)(quantize(__fdiv_rn(lk_elem<DX>::load(xr, k), m), -1.0f, 1.0f) + 1);
            byte |= code << (2 * e);
        }
        ((uint8_t *)a.q.data)[r * (a.q.ld / 4) + j] = (uint8_t)byte;
    }
}

} // namespace

extern "C" lk_status lk_cuda_quantize_act(void *queue, const lk_quant_args *a)
{
    lk_op_scope op(queue, "lk_quantize_act");
    if (!op.ok())
        return op.status();
    if (a->x.rows <= 0)
        return LK_OK;
    const bool vec = lk_rows_aligned(a->x, 4 * lk_dtype_bytes(a->x.dtype));
    if (a->x.cols <= LK_QA_REG_MAX) {
        const bool qvec = vec && lk_rows_aligned(a->q, 4);
        const unsigned grid = lk_grid_cap(a->x.rows, 65535);
        LK_FLOAT_SWITCH(a->x.dtype, DX, {
            if (qvec)
                (void)lk_launch(quantize_act_reg_kernel<DX, true>, dim3(grid), dim3(LK_QA_THREADS), 0,
                                op.stream(), *a);
            else
                (void)lk_launch(quantize_act_reg_kernel<DX, false>, dim3(grid), dim3(LK_QA_THREADS), 0,
                                op.stream(), *a);
        });
        return op.launched();
    }
    lk_rows_cfg c = lk_rows_plan(a->x.rows, a->x.cols, true);
    LK_FLOAT_SWITCH(a->x.dtype, DX, {
        if (vec)
            (void)LK_ROWS_PDL_LAUNCH((quantize_act_kernel<DX, true>), c, op.stream(), *a, c);
        else
            (void)LK_ROWS_PDL_LAUNCH((quantize_act_kernel<DX, false>), c, op.stream(), *a, c);
    });
    return op.launched();
}

extern "C" lk_status lk_cuda_quantize_ternary(void *queue, const lk_quant_args *a)
{
    lk_op_scope op(queue, "lk_quantize_ternary");
    if (!op.ok())
        return op.status();
    const int64_t N = a->x.rows, K = a->x.cols;
    if (N <= 0 || K <= 0)
        return LK_OK; /* nothing to quantise: nothing written, the scale included */
    if (K > LK_ROW_MAX || N > LK_ROW_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_quantize_ternary: more than 2^36 rows or columns");
    if ((uint64_t)(N + 1) > op.q->ws_bytes / sizeof(float))
        return op.fail(LK_ERR_OUT_OF_MEMORY,
                       "lk_quantize_ternary: %lld rows need a queue workspace of %llu bytes; "
                       "it has %zu (set LOCKSTEP_CUDA_WORKSPACE before creating the queue)",
                       (long long)N, (unsigned long long)(N + 1) * 4, op.q->ws_bytes);
    float *rs = (float *)op.q->ws;
    const bool vec = lk_rows_aligned(a->x, 4 * lk_dtype_bytes(a->x.dtype));
    lk_rows_cfg c = lk_rows_plan(N, K, false);
    const lk_rows_cfg one = lk_rows_plan(1, N, false);
    const int64_t bytes = N * ((K + 3) / 4);
    const unsigned pack_blocks = lk_grid_cap((bytes + 255) / 256, (int64_t)1 << 20);
    LK_FLOAT_SWITCH(a->x.dtype, DX, {
        if (vec)
            (void)LK_ROWS_PDL_LAUNCH((abs_row_sums_kernel<DX, true>), c, op.stream(), *a, c, rs);
        else
            (void)LK_ROWS_PDL_LAUNCH((abs_row_sums_kernel<DX, false>), c, op.stream(), *a, c, rs);
        (void)LK_ROWS_PDL_LAUNCH(ternary_scale_kernel, one, op.stream(), *a, one, rs);
        (void)lk_launch(ternary_pack_kernel<DX>, dim3(pack_blocks), dim3(256), 0, op.stream(), *a, rs + N);
    });
    return op.launched();
}
