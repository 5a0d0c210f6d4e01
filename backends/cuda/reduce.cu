/* Lockstep CUDA: row reductions (docs/numerics.md section 5).
 *
 * Two paths with the same bits:
 * - fused: one group of warps per row (backends/cuda/rows.cuh);
 * - split, for a few long rows: one warp per 4096-term chunk writes the
 *   chunk's partial to the queue's workspace, then one group per row sums
 *   the row of partials by the same rules (that row is exactly the
 *   contract's next level, so the tree is unchanged).  Maximum, minimum
 *   and argmax are order-free and split the same way.  No float atomics.
 * The split path runs only when the workspace holds the partials. */
#include "backends/cuda/rows.cuh"

namespace {

enum mode {
    M_SUM,   /* lane sum (SUM, MEAN, the mean of VAR) */
    M_SQDEV, /* lane sum of fma(d, d) with d = x - mean[r] */
    M_MAX,
    M_MIN,
    M_ARGMAX
};

/* (key, index) of the better of two candidates: the larger key
 * (lk_order_key: every NaN equal, so the first one wins), and on a tie the
 * smaller index. */
__device__ __forceinline__ void argmax_merge(uint32_t &key, int64_t &idx, uint32_t k2, int64_t i2)
{
    if (k2 > key || (k2 == key && i2 < idx)) {
        key = k2;
        idx = i2;
    }
}

__device__ __forceinline__ void warp_argmax(uint32_t &key, int64_t &idx)
{
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1) {
        uint32_t k2 = __shfl_xor_sync(LK_FULL_MASK, key, d);
        int64_t i2 = __shfl_xor_sync(LK_FULL_MASK, (long long)idx, d);
        argmax_merge(key, idx, k2, i2);
    }
}

/* argmax over the group; misc[16..31] holds one (key, index) per warp. */
__device__ __forceinline__ int64_t group_argmax(const lk_group &g, uint32_t key, int64_t idx)
{
    warp_argmax(key, idx);
    if (g.nw == 1)
        return idx;
    uint32_t *keys = reinterpret_cast<uint32_t *>(g.misc + 8);
    int64_t *idxs = reinterpret_cast<int64_t *>(g.misc + 16);
    if (g.lane == 0) {
        keys[g.warp] = key;
        idxs[g.warp] = idx;
    }
    g.sync();
    key = keys[0];
    idx = idxs[0];
    for (int w = 1; w < g.nw; w++)
        argmax_merge(key, idx, keys[w], idxs[w]);
    g.sync();
    return idx;
}

/* ---------------------------------------------------------- fused path */

template <lk_dtype DX, bool VEC>
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    reduce_kernel(lk_reduce_args a, lk_rows_cfg c)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);

    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        if (g.cache) {
            lk_row_to_cache<DX, VEC>(g, xr, n);
            g.sync();
        }
        float v = 0.0f;
        int64_t best = 0;
        switch (a.op) {
        case LK_REDUCE_SUM:
        case LK_REDUCE_MEAN:
            v = lk_row_sum<false, DX, VEC>(g, xr, n, lk_identity(), lk_identity());
            if (a.op == LK_REDUCE_MEAN)
                v = __fdiv_rn(v, nf);
            break;
        case LK_REDUCE_MAX:
            v = lk_row_fold<DX>(g, xr, n, __uint_as_float(0xff800000u), lk_identity(),
                                lk_op_maximum());
            break;
        case LK_REDUCE_MIN:
            v = lk_row_fold<DX>(g, xr, n, __uint_as_float(0x7f800000u), lk_identity(),
                                lk_op_minimum());
            break;
        case LK_REDUCE_ARGMAX: {
            uint32_t key = 0;
            int64_t idx = INT64_MAX;
            for (int64_t i = g.tid; i < n; i += g.nthreads)
                argmax_merge(key, idx,
                             lk_order_key(g.cache ? g.cache[i] : lk_elem<DX>::load(xr, i)), i);
            best = group_argmax(g, key, idx);
        } break;
        default: { /* VAR, VAR_UNBIASED */
            float sum = lk_row_sum<false, DX, VEC>(g, xr, n, lk_identity(), lk_identity());
            const float m = __fdiv_rn(sum, nf);
            auto dev = [=](float x) { return __fsub_rn(x, m); };
            float ss = lk_row_sum<true, DX, VEC>(g, xr, n, dev, dev);
            v = __fdiv_rn(ss, a.op == LK_REDUCE_VAR ? nf : __ll2float_rn(n - 1));
        } break;
        }
        if (g.tid == 0) {
            if (a.op == LK_REDUCE_ARGMAX)
                ((int64_t *)a.y.data)[r * a.y.ld] = best;
            else
                lk_store_any(a.y.data, a.y.dtype, r * a.y.ld, v);
        }
        g.sync(); /* the next row refills the cache */
    }
}

/* ---------------------------------------------------------- split path */

/* One warp per (row, chunk): the chunk's partial into part[r * CP + c]
 * (argmax: the key's bits there and the index in ipart).  CP, the stride
 * of the rows of partials, is C rounded up to 4 so that every row of
 * partials is aligned for the pair loads of the lane sum. */
template <lk_dtype DX, bool VEC>
__global__ void __launch_bounds__(256)
    partials_kernel(lk_reduce_args a, int mode, int64_t C, int64_t CP, float *part,
                    int64_t *ipart, const float *mean)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    const int64_t n = a.x.cols;
    const int64_t total = a.x.rows * C;
    const int lane = threadIdx.x & (LK_WARP - 1);
    const int wpb = blockDim.x / LK_WARP;
    for (int64_t w = (int64_t)blockIdx.x * wpb + threadIdx.x / LK_WARP; w < total;
         w += (int64_t)gridDim.x * wpb) {
        const int64_t r = w / C, c = w % C;
        const int64_t base = c * LK_CHUNK;
        const int len = n - base < LK_CHUNK ? (int)(n - base) : LK_CHUNK;
        const TX *xr = (const TX *)a.x.data + r * a.x.ld;
        float v = 0.0f;
        if (mode == M_SUM) {
            v = lk_warp_chunk<false>(lk_stream_src<DX, VEC, lk_identity>{xr, lk_identity()},
                                     base, len);
        } else if (mode == M_SQDEV) {
            const float m = mean[r];
            auto dev = [=](float x) { return __fsub_rn(x, m); };
            v = lk_warp_chunk<true>(lk_row_src<DX, VEC, decltype(dev)>{xr, dev}, base, len);
        } else if (mode == M_MAX || mode == M_MIN) {
            const bool mx = mode == M_MAX;
            v = __uint_as_float(mx ? 0xff800000u : 0x7f800000u);
            for (int i = lane; i < len; i += LK_WARP) {
                float x = lk_elem<DX>::load(xr, base + i);
                v = mx ? lk_maximum(v, x) : lk_minimum(v, x);
            }
            v = mx ? lk_warp_maximum(v) : lk_warp_minimum(v);
        } else {
            uint32_t key = 0;
            int64_t idx = INT64_MAX;
            for (int i = lane; i < len; i += LK_WARP)
                argmax_merge(key, idx, lk_order_key(lk_elem<DX>::load(xr, base + i)), base + i);
            warp_argmax(key, idx);
            if (lane == 0) {
                reinterpret_cast<uint32_t *>(part)[r * CP + c] = key;
                ipart[r * CP + c] = idx;
            }
            continue;
        }
        if (lane == 0)
            part[r * CP + c] = v;
    }
}

/* The order-free modes (max, min, argmax): one block per (row, chunk), so
 * that a long row of few rows spreads over the GPU and every thread has
 * FP_PER terms, all of their loads issued before the folds. */
#define FP_THREADS 256
#define FP_PER (LK_CHUNK / FP_THREADS)

template <lk_dtype DX>
__global__ void __launch_bounds__(FP_THREADS)
    fold_partials_kernel(lk_reduce_args a, int mode, int64_t C, int64_t CP, float *part,
                         int64_t *ipart)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DX>::T TX;
    __shared__ uint32_t wkey[FP_THREADS / LK_WARP];
    __shared__ int64_t widx[FP_THREADS / LK_WARP];
    __shared__ float wv[FP_THREADS / LK_WARP];
    const int64_t n = a.x.cols;
    const int64_t total = a.x.rows * C;
    const int lane = threadIdx.x & (LK_WARP - 1), warp = threadIdx.x / LK_WARP;
    for (int64_t w = blockIdx.x; w < total; w += gridDim.x) {
        const int64_t r = w / C, c = w % C;
        const int64_t base = c * LK_CHUNK;
        const int len = n - base < LK_CHUNK ? (int)(n - base) : LK_CHUNK;
        const TX *xr = (const TX *)a.x.data + r * a.x.ld + base;
        float x[FP_PER];
#pragma unroll
        for (int k = 0; k < FP_PER; k++) {
            const int i = (int)threadIdx.x + FP_THREADS * k;
            x[k] = i < len ? lk_elem<DX>::load(xr, i) : 0.0f;
        }
        if (mode == M_ARGMAX) {
            uint32_t key = 0; /* below every value's key: loses to any term */
            int64_t idx = INT64_MAX;
#pragma unroll
            for (int k = 0; k < FP_PER; k++) {
                const int i = (int)threadIdx.x + FP_THREADS * k;
                if (i < len)
                    argmax_merge(key, idx, lk_order_key(x[k]), base + i);
            }
            warp_argmax(key, idx);
            if (lane == 0) {
                wkey[warp] = key;
                widx[warp] = idx;
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int i = 1; i < FP_THREADS / LK_WARP; i++)
                    argmax_merge(key, idx, wkey[i], widx[i]);
                reinterpret_cast<uint32_t *>(part)[r * CP + c] = key;
                ipart[r * CP + c] = idx;
            }
        } else {
            const bool mx = mode == M_MAX;
            float v = __uint_as_float(mx ? 0xff800000u : 0x7f800000u);
#pragma unroll
            for (int k = 0; k < FP_PER; k++)
                if ((int)threadIdx.x + FP_THREADS * k < len)
                    v = mx ? lk_maximum(v, x[k]) : lk_minimum(v, x[k]);
            v = mx ? lk_warp_maximum(v) : lk_warp_minimum(v);
            if (lane == 0)
                wv[warp] = v;
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int i = 1; i < FP_THREADS / LK_WARP; i++)
                    v = mx ? lk_maximum(v, wv[i]) : lk_minimum(v, wv[i]);
                part[r * CP + c] = v;
            }
        }
        __syncthreads(); /* wkey, widx, wv are reused by the next chunk */
    }
}

/* One group per row of C partials: the next levels of the sum, or the
 * order-free combination; then the op's last step.  mean_out: VAR's first
 * pass writes the mean there instead of a result. */
__global__ void __launch_bounds__(LK_ROWS_THREADS_MAX)
    combine_kernel(lk_reduce_args a, lk_rows_cfg c, int mode, int64_t C, int64_t CP,
                   const float *part, const int64_t *ipart, float *mean_out)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    LK_ROWS_SMEM(smem);
    const lk_group g = lk_group_make(c, smem);
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);
    for (LK_ROWS_FOR(c, g, r, a.x.rows)) {
        const float *pr = part + r * CP;
        float v = 0.0f;
        int64_t best = 0;
        if (mode == M_SUM || mode == M_SQDEV) {
            /* the chunk partials are a row summed with plain additions */
            v = C == 1 ? pr[0] : lk_group_row_sum<false>(g, lk_f32_src{pr}, C);
        } else if (mode == M_MAX || mode == M_MIN) {
            v = mode == M_MAX ? lk_row_fold<LK_F32>(g, pr, C, __uint_as_float(0xff800000u),
                                                    lk_identity(), lk_op_maximum())
                              : lk_row_fold<LK_F32>(g, pr, C, __uint_as_float(0x7f800000u),
                                                    lk_identity(), lk_op_minimum());
        } else {
            uint32_t key = 0;
            int64_t idx = INT64_MAX;
            for (int64_t i = g.tid; i < C; i += g.nthreads)
                argmax_merge(key, idx, reinterpret_cast<const uint32_t *>(pr)[i],
                             ipart[r * CP + i]);
            best = group_argmax(g, key, idx);
        }
        if (g.tid == 0) {
            if (mode == M_ARGMAX)
                ((int64_t *)a.y.data)[r * a.y.ld] = best;
            else if (mode == M_SUM && mean_out)
                mean_out[r] = __fdiv_rn(v, nf);
            else if (mode == M_SUM && a.op == LK_REDUCE_MEAN)
                lk_store_any(a.y.data, a.y.dtype, r * a.y.ld, __fdiv_rn(v, nf));
            else if (mode == M_SQDEV)
                lk_store_any(a.y.data, a.y.dtype, r * a.y.ld,
                             __fdiv_rn(v, a.op == LK_REDUCE_VAR ? nf : __ll2float_rn(n - 1)));
            else
                lk_store_any(a.y.data, a.y.dtype, r * a.y.ld, v);
        }
        g.sync();
    }
}

template <lk_dtype DX, bool VEC>
void launch_split(const lk_reduce_args *a, cudaStream_t st, int64_t C, int64_t CP,
                  float *part, int64_t *ipart, float *mean)
{
    const int64_t rows = a->x.rows;
    const unsigned blocks = lk_grid_cap((rows * C + 7) / 8, (int64_t)1 << 20);
    const lk_rows_cfg c = lk_rows_plan(rows, C, false);
    int first;
    switch (a->op) {
    case LK_REDUCE_MAX:
        first = M_MAX;
        break;
    case LK_REDUCE_MIN:
        first = M_MIN;
        break;
    case LK_REDUCE_ARGMAX:
        first = M_ARGMAX;
        break;
    default:
        first = M_SUM;
        break;
    }
    const bool var = a->op == LK_REDUCE_VAR || a->op == LK_REDUCE_VAR_UNBIASED;
    if (first == M_SUM)
        lk_launch(partials_kernel<DX, VEC>, blocks, 256, 0, st, *a, first, C, CP, part, ipart,
                  mean);
    else
        lk_launch(fold_partials_kernel<DX>, lk_grid_cap(rows * C, (int64_t)1 << 20), FP_THREADS, 0,
                  st, *a, first, C, CP, part, ipart);
    LK_ROWS_PDL_LAUNCH(combine_kernel, c, st, *a, c, first, C, CP, part, ipart,
                       var ? mean : nullptr);
    if (var) {
        lk_launch(partials_kernel<DX, VEC>, blocks, 256, 0, st, *a, M_SQDEV, C, CP, part, ipart,
                  mean);
        LK_ROWS_PDL_LAUNCH(combine_kernel, c, st, *a, c, (int)M_SQDEV, C, CP, part, ipart,
                           nullptr);
    }
}

} // namespace

extern "C" lk_status lk_cuda_reduce(void *queue, const lk_reduce_args *a)
{
    lk_op_scope op(queue, "lk_reduce");
    if (!op.ok())
        return op.status();
    const int64_t rows = a->x.rows, n = a->x.cols;
    const int64_t C = (n + LK_CHUNK - 1) / LK_CHUNK;
    if (n > LK_ROW_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_reduce: rows of more than 2^36 elements");
    const bool var = a->op == LK_REDUCE_VAR || a->op == LK_REDUCE_VAR_UNBIASED;
    const bool vec = lk_rows_aligned(a->x, 4 * lk_dtype_bytes(a->x.dtype));

    /* split when one group per row would leave most of the GPU idle */
    const int64_t sms = op.q->dev->sm_count;
    const int64_t group_warps = C < 8 ? C : 8;
    const int64_t CP = lk_round4(C);
    const size_t part_bytes = (size_t)(rows * CP) * sizeof(float); /* a multiple of 16 */
    size_t need = part_bytes;
    if (a->op == LK_REDUCE_ARGMAX)
        need += (size_t)(rows * CP) * sizeof(int64_t);
    const size_t mean_at = need;
    if (var)
        need = mean_at + (size_t)rows * sizeof(float);
    const bool split = C >= 4 && rows * group_warps < 16 * sms && need <= op.q->ws_bytes;

    if (split) {
        float *part = (float *)op.q->ws;
        int64_t *ipart = (int64_t *)((char *)op.q->ws + part_bytes);
        float *mean = (float *)((char *)op.q->ws + mean_at);
        LK_FLOAT_SWITCH(a->x.dtype, DX, {
            if (vec)
                launch_split<DX, true>(a, op.stream(), C, CP, part, ipart, mean);
            else
                launch_split<DX, false>(a, op.stream(), C, CP, part, ipart, mean);
        });
    } else {
        lk_rows_cfg c = lk_rows_plan(rows, n, var);
        LK_FLOAT_SWITCH(a->x.dtype, DX, {
            if (vec)
                LK_ROWS_PDL_LAUNCH((reduce_kernel<DX, true>), c, op.stream(), *a, c);
            else
                LK_ROWS_PDL_LAUNCH((reduce_kernel<DX, false>), c, op.stream(), *a, c);
        });
    }
    return op.launched();
}
