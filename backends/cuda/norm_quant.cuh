/* Lockstep CUDA driver (internal): one row of lk_rmsnorm_quantize in
 * registers (docs/numerics.md, "RMSNorm then activation quantisation"),
 * written once for the kernels that need its bits: norm_quant.cu's
 * register kernel and lk_rmsnorm_ternary_linear's fused GEMV (ternary.cu),
 * whose blocks each quantise x themselves.
 *
 * The steps are norm.cu's register kernel up to y_i = (x_i * r) * w_i,
 * each an f32 rounding, so v_j ends as exactly the f32 y that lk_rmsnorm
 * would store; then quant.cu's activation steps on it: amax = maximum of
 * |y_i| from +0 (order-free, on bit patterns: lk_qa_bits), s = 127 /
 * maximum(amax, 1e-5), and q_i = lk_nq_code(v_j, s).  The lane/chunk
 * structure is the contract's (rows_reg.cuh); how many threads share a
 * lane (H) does not change a bit. */
#ifndef LK_CUDA_NORM_QUANT_CUH
#define LK_CUDA_NORM_QUANT_CUH

#include "backends/cuda/rows_reg.cuh"

/* q_i of a normed term v and the row's scale s */
static __device__ __forceinline__ int lk_nq_code(float v, float s)
{
    return lk_qa_q8(__fmul_rn(v, s));
}

/* Normalises the row xr of n elements into v (the thread's terms, as
 * lk_rr_index<J, H>) and returns its scale s, to every thread of the
 * block.  PRE: the weight is already in wv (lk_rr_load_any), else it is
 * loaded here.  sh: LK_RR_SMEM floats; red: one unsigned per warp of the
 * block (at most 32), written again only after the next call's lk_rr_sum
 * barriers, so consecutive rows need no barrier of their own. */
template <lk_dtype DX, int J, int H, bool PRE>
static __device__ __forceinline__ float lk_nq_row(float (&v)[J], const lk_norm_quant_args &a,
                                                  const typename lk_elem<DX>::T *xr,
                                                  const float (&wv)[J], float *sh, unsigned *red)
{
    const int64_t n = a.x.cols;
    const float nf = __ll2float_rn(n);
    const int nw = (int)(blockDim.x >> 5);
    lk_rr_load<DX, J, H>(v, xr, n);
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
    /* amax: independent chains of integer maxima, a REDUX per warp, one
     * barrier; then every warp folds the warps' maxima itself */
    unsigned m[4] = {0u, 0u, 0u, 0u};
#pragma unroll
    for (int j = 0; j < J; j++)
        if (lk_rr_index<J, H>(j) < n)
            m[j & 3] = max(m[j & 3], lk_qa_bits(v[j]));
    unsigned mw = lk_qa_warp_max(max(max(m[0], m[1]), max(m[2], m[3])));
    if ((threadIdx.x & 31) == 0)
        red[threadIdx.x >> 5] = mw;
    __syncthreads();
    mw = lk_qa_warp_max((int)(threadIdx.x & 31) < nw ? red[threadIdx.x & 31] : 0u);
    return __fdiv_rn(127.0f, lk_maximum(lk_qa_amax(mw), LK_QUANT_EPS));
}

#endif
