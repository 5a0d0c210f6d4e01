/* Lockstep CUDA: lk_rmsnorm_quantize (docs/numerics.md, "RMSNorm then
 * activation quantisation"), the bits of lk_rmsnorm into an f32 row and
 * lk_quantize_act of that row.
 *
 * Rows of up to one chunk (4096 elements, the model's hidden size of
 * 2560 among them): one block per row, the row in registers (rows_reg.cuh).  The steps are norm.cu's register kernel up to
 * y_i = (x_i * r) * w_i, each an f32 rounding, so v_j holds exactly the f32
 * y that lk_rmsnorm would store; then quant.cu's activation steps on it:
 * amax = maximum of |y_i| from +0 (order-free), s = 127 / maximum(amax,
 * 1e-5), q_i = rne(clamp(y_i * s)) with NaN -> 0.  y never reaches memory.
 * A NaN y_i the store would canonicalise only reaches memory through
 * amax and s, which lk_maximum and the scale's store canonicalise too.
 *
 * Rows of 2 .. NQ_LONG_CHUNKS chunks (the FFN's 6912 among them): the same
 * kernel with four threads per lane (H = 4, J = 16, 256 threads a chunk),
 * so a decode row is spread over enough threads that its loads are all in
 * flight at once and no thread holds more than 16 terms (the one-thread-
 * per-lane version, 64 terms a thread, took 26 us for 6912 on the H200,
 * slower than the two ops' 9 + 4 us).  lk_rr_sum_split passes each lane's
 * chain from thread to thread, so the sum is still the contract's.
 *
 * Longer rows: lk_rmsnorm into the queue's workspace, then
 * lk_quantize_act from it, in bands of rows that fit. */
#include <string.h>

#include "backends/cuda/rows.cuh"
#include "backends/cuda/rows_reg.cuh"

namespace {

#define NQ_LONG_CHUNKS 4 /* rows of up to 16384 in one kernel */
#define NQ_LONG_H 4

/* PRE: the weight loaded with the row (a few rows, H > 1), as in norm.cu.
 * C: chunks a block may hold (H > 1: 64 H C threads at most). */
template <lk_dtype DX, int J, int H, int C, bool PRE>
__global__ void __launch_bounds__(H == 1 ? 64 * LK_RR_MAX_CHUNKS : 64 * H * C,
                                  H == 1 ? 1
                                  : C > 1 ? 1024 / (64 * H * C)
                                  : PRE   ? 2
                                          : 1024 / (64 * H))
    norm_quant_reg_kernel(lk_norm_quant_args a)
{
    typedef typename lk_elem<DX>::T TX;
    /* 2 H warps a chunk */
    enum { NW = H == 1 ? 2 * LK_RR_MAX_CHUNKS : 2 * H * C };
    static_assert(NW <= 32, "one warp combines the warps' maxima");
    __shared__ float sh[LK_RR_SMEM];
    __shared__ unsigned red[NW];
    lk_pdl_wait(); /* x and the weight are user tensors */
    lk_pdl_trigger();
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);
    const int nw = (int)(blockDim.x >> 5);
    float wv[J]; /* PRE only */
    if (PRE && a.weight.data)
        lk_rr_load_any<J, H>(wv, a.weight.data, a.weight.dtype, n);
    for (int64_t r = blockIdx.x; r < a.x.rows; r += gridDim.x) {
        float v[J];
        lk_rr_load<DX, J, H>(v, (const TX *)a.x.data + r * a.x.ld, n);
        const float ss = lk_rr_sum<true, J, H>(v, n, sh, lk_identity());
        const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, nf), a.eps)));
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = __fmul_rn(v[j], rs);
        if (a.weight.data) {
            if (PRE) {
#pragma unroll
                for (int j = 0; j < J; j++)
                    v[j] = __fmul_rn(v[j], wv[j]);
            } else {
                lk_rr_apply<J, H>(v, a.weight.data, a.weight.dtype, n, lk_rr_mul());
            }
        }
        /* v_j is now lk_rmsnorm's f32 y.  amax: independent chains of
         * integer maxima (lk_qa_bits), a REDUX per warp, one barrier; red is
         * written again only after the next row's lk_rr_sum barriers. */
        unsigned m[4] = {0u, 0u, 0u, 0u};
#pragma unroll
        for (int j = 0; j < J; j++)
            if (lk_rr_index<J, H>(j) < n)
                m[j & 3] = max(m[j & 3], lk_qa_bits(v[j]));
        unsigned mw = lk_qa_warp_max(max(max(m[0], m[1]), max(m[2], m[3])));
        if ((threadIdx.x & 31) == 0)
            red[threadIdx.x >> 5] = mw;
        __syncthreads();
        /* every warp folds the warps' maxima itself: one load, one REDUX */
        mw = lk_qa_warp_max((int)(threadIdx.x & 31) < nw ? red[threadIdx.x & 31] : 0u);
        const float s = __fdiv_rn(127.0f, lk_maximum(lk_qa_amax(mw), LK_QUANT_EPS));
        int8_t *qr = (int8_t *)a.q.data + r * a.q.ld;
        if (lk_rr_full<J, H>(n)) {
#pragma unroll
            for (int j = 0; j < J; j++)
                qr[lk_rr_index<J, H>(j)] = (int8_t)lk_qa_q8(__fmul_rn(v[j], s));
        } else {
#pragma unroll
            for (int j = 0; j < J; j++) {
                const int64_t i = lk_rr_index<J, H>(j);
                if (i < n)
                    qr[i] = (int8_t)lk_qa_q8(__fmul_rn(v[j], s));
            }
        }
        if (threadIdx.x == 0)
            lk_store_any(a.scale.data, a.scale.dtype, r * a.scale.ld, s);
    }
}

#define NQ_PRE_ROWS 256

template <lk_dtype DX, int J, int H, int C>
static void nq_launch(const lk_norm_quant_args &a, unsigned threads, cudaStream_t st)
{
    const dim3 grid(lk_rr_grid(a.x.rows));
    if (H > 1 && a.x.rows <= NQ_PRE_ROWS)
        (void)lk_launch(norm_quant_reg_kernel<DX, J, H, C, (H > 1)>, grid, dim3(threads), 0, st, a);
    else
        (void)lk_launch(norm_quant_reg_kernel<DX, J, H, C, false>, grid, dim3(threads), 0, st, a);
}

/* Rows past one chunk: the two ops through the workspace, band by band. */
lk_status nq_two_pass(void *queue, lk_op_scope &op, const lk_norm_quant_args *a)
{
    const int64_t n = a->x.cols;
    const int64_t band = (int64_t)(op.q->ws_bytes / sizeof(float)) / n;
    if (band < 1)
        return op.fail(LK_ERR_OUT_OF_MEMORY,
                       "lk_rmsnorm_quantize: rows of %lld elements need a queue workspace of "
                       "%llu bytes; it has %zu (set LOCKSTEP_CUDA_WORKSPACE before creating "
                       "the queue)",
                       (long long)n, (unsigned long long)n * 4, op.q->ws_bytes);
    for (int64_t r0 = 0; r0 < a->x.rows; r0 += band) {
        const int64_t nr = a->x.rows - r0 < band ? a->x.rows - r0 : band;
        lk_norm_args na;
        memset(&na, 0, sizeof na);
        na.x = a->x;
        na.x.data = (char *)a->x.data + r0 * a->x.ld * (int64_t)lk_dtype_bytes(a->x.dtype);
        na.x.rows = nr;
        na.weight = a->weight;
        na.y = lk_mat(op.q->ws, LK_F32, nr, n);
        na.eps = a->eps;
        lk_status st = lk_cuda_rmsnorm(queue, &na);
        if (st != LK_OK)
            return st;
        lk_quant_args qa;
        memset(&qa, 0, sizeof qa);
        qa.x = na.y;
        qa.q = a->q;
        qa.q.data = (int8_t *)a->q.data + r0 * a->q.ld;
        qa.q.rows = nr;
        qa.scale = a->scale;
        qa.scale.data = (float *)a->scale.data + r0 * a->scale.ld;
        qa.scale.rows = nr;
        st = lk_cuda_quantize_act(queue, &qa);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}

} // namespace

extern "C" lk_status lk_cuda_rmsnorm_quantize(void *queue, const lk_norm_quant_args *a)
{
    lk_op_scope op(queue, "lk_rmsnorm_quantize");
    if (!op.ok())
        return op.status();
    const int64_t n = a->x.cols;
    if (a->x.rows <= 0 || n <= 0)
        return LK_OK;
    if (n > (int64_t)NQ_LONG_CHUNKS * LK_CHUNK)
        return nq_two_pass(queue, op, a);
    if (n > LK_CHUNK) {
        const unsigned threads = NQ_LONG_H * lk_rr_threads(n);
        LK_FLOAT_SWITCH(a->x.dtype, DX,
                        (nq_launch<DX, 64 / NQ_LONG_H, NQ_LONG_H, NQ_LONG_CHUNKS>(*a, threads,
                                                                                op.stream())));
        return op.launched();
    }
    /* rows of one chunk past 1024: two threads per lane, as norm.cu */
    const bool split = n > 16 * LK_LANES;
    const unsigned threads = split ? 2 * 64 : lk_rr_threads(n);
    LK_FLOAT_SWITCH(a->x.dtype, DX, {
        if (split)
            nq_launch<DX, 32, 2, 1>(*a, threads, op.stream());
        else
            nq_launch<DX, 16, 1, 1>(*a, threads, op.stream());
    });
    return op.launched();
}
