/* Lockstep CUDA: GEMV, the GEMM of a small side (docs/numerics.md
 * section 4), where the speed of decoding lives.
 *
 * With S = min(M, N) <= 8 the call is out(s, l) = sum_k X(s, k) W(l, k)
 * over the large side l: X is op(A) and W is op(B)^T when M is small, or
 * the other way round when N is.  Every (l, k-block) chain of the contract
 * -- acc = fma(x_k, w_k, acc) from +0 over the 128 k of block kb -- is one
 * thread's sequential work, for every s at once (the weights are read
 * once); threads of one output split its k-blocks, and one thread adds
 * the block results in ascending kb (the first stored), then the epilogue.
 *
 * Two layouts of W:
 * - KC, k contiguous (an N x K weight with tb = LK_TRANS, the usual
 *   decode case): a thread streams its chain's 128 contiguous weights
 *   with 16-byte loads, all of them issued before the first fma;
 * - LC, l contiguous (a K x N weight): the 32 lanes of a warp take 32
 *   adjacent l of one k-block, the eight warps of a block eight k-blocks.
 * X is widened once into shared memory (each 128-k block padded to 132
 * floats so that float4 reads of different blocks hit different banks),
 * or read from global memory when it does not fit. */
#include "backends/cuda/gemm.cuh"
#include "backends/cuda/loads.cuh"

namespace {

#define XPAD 132
#define GEMV_SMEM_MAX (48 * 1024)
#define GEMV_STREAM_SMEM (160 * 1024) /* opted in at device open */

struct gemv_args {
    const void *x; /* X(s, k) at x + b * x_bs + s * xs_s + k * xs_k */
    lk_dtype xdt;
    int64_t xs_s, xs_k, x_bs;
    const void *w; /* KC: W(l, k) at w + b * w_bs + l * ldw + k; LC: + k * ldw + l */
    int64_t ldw, w_bs;
    int64_t S, L, K, batch;
    int swap; /* 0: C[s][l]; 1: C[l][s] */
    int nkb;  /* ceil(K / 128) */
    int T;    /* KC: threads per output */
    int NB;   /* KC: outputs per block */
    int wvec; /* KC: every W row starts 16-byte aligned */
    int xvec; /* X contiguous in k, every row 16-byte aligned: vector widening */
    int sms;  /* the GPU's multiprocessors */
    lk_gemm_epi e;
};

/* X of batch entry b, widened: xs[s * XS + kb * XPAD + i] = X(s, kb * 128 + i);
 * rows s >= S and k >= K are zero (never stored). */
template <int ST>
__device__ __forceinline__ void load_x(const gemv_args &a, int64_t b, float *xs, int XS)
{
    const int64_t kk = (int64_t)a.nkb * LK_KB;
    for (int s = 0; s < ST; s++)
        for (int64_t k = threadIdx.x; k < kk; k += blockDim.x) {
            float v = 0.0f;
            if (s < a.S && k < a.K)
                v = lk_load_any(a.x, a.xdt, b * a.x_bs + s * a.xs_s + k * a.xs_k);
            xs[s * XS + (k >> 7) * XPAD + (k & 127)] = v;
        }
}

/* Element j (0..7) of eight 16-bit values in a uint4. */
template <lk_dtype DW> __device__ __forceinline__ float unpack8(const uint4 &u, int j)
{
    uint32_t word = j < 2 ? u.x : j < 4 ? u.y : j < 6 ? u.z : u.w;
    uint32_t h = (j & 1) ? word >> 16 : word & 0xffffu;
    return lk_elem<DW>::load_bits(h);
}

/* load_x for the STREAM kernel when xvec (K a multiple of 128): 16-byte
 * pieces, four loads in flight per thread before any store, so that the
 * block's copy of x costs one memory latency, not one per element. */
template <int ST>
__device__ __forceinline__ void load_x_vec(const gemv_args &a, int64_t b, float *xs, int XS)
{
    const int es = a.xdt == LK_F32 ? 4 : 2, per = 16 / es;
    const int pieces = (int)(a.K / per);
    for (int s = 0; s < ST; s++) {
        if (s >= a.S) { /* a padding row of the template's ST: never stored */
            for (int k = threadIdx.x; k < a.nkb * XPAD; k += blockDim.x)
                xs[s * XS + k] = 0.0f;
            continue;
        }
        const uint4 *xp = reinterpret_cast<const uint4 *>((const char *)a.x +
                                                          (b * a.x_bs + s * a.xs_s) * es);
        for (int p0 = threadIdx.x; p0 < pieces; p0 += 4 * blockDim.x) {
            uint4 u[4];
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int p = p0 + h * blockDim.x;
                u[h] = p < pieces ? __ldg(xp + p) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int p = p0 + h * blockDim.x;
                if (p >= pieces)
                    continue;
                const int k = p * per;
                float *dst = xs + s * XS + (k >> 7) * XPAD + (k & 127);
                if (a.xdt == LK_F32) {
                    *reinterpret_cast<float4 *>(dst) =
                        make_float4(__uint_as_float(u[h].x), __uint_as_float(u[h].y),
                                    __uint_as_float(u[h].z), __uint_as_float(u[h].w));
                } else {
                    float v[8];
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        v[j] = a.xdt == LK_BF16 ? unpack8<LK_BF16>(u[h], j) : unpack8<LK_F16>(u[h], j);
                    reinterpret_cast<float4 *>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
                    reinterpret_cast<float4 *>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
                }
            }
        }
    }
}

/* X(s, k0 + i) of block kb, from shared or global memory. */
template <bool XSM>
__device__ __forceinline__ float x_at(const gemv_args &a, int64_t b, const float *xs, int XS,
                                      int s, int kb, int i)
{
    if (XSM)
        return xs[s * XS + kb * XPAD + i];
    if (s >= a.S) /* a padding row of the template's ST */
        return 0.0f;
    return lk_load_any(a.x, a.xdt, b * a.x_bs + s * a.xs_s + ((int64_t)kb * LK_KB + i) * a.xs_k);
}

/* Ask L2 for [p, p + bytes) without waiting for it. */
__device__ __forceinline__ void prefetch_l2(const void *p, int64_t bytes)
{
    const size_t g = __cvta_generic_to_global(p);
    for (int64_t off = 0; off < bytes; off += 128)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(g + (size_t)off));
}

/* acc[s] = the chain of block kb of W row wrow (KC layout), for every s. */
template <lk_dtype DW, int ST, bool XSM>
__device__ __forceinline__ void chain_kc(const gemv_args &a, int64_t b,
                                         const typename lk_elem<DW>::T *wrow, int kb,
                                         const float *xs, int XS, float (&acc)[ST])
{
    const int64_t k0 = (int64_t)kb * LK_KB;
    const int len = a.K - k0 < LK_KB ? (int)(a.K - k0) : LK_KB;
    const typename lk_elem<DW>::T *wp = wrow + k0;
#pragma unroll
    for (int s = 0; s < ST; s++)
        acc[s] = 0.0f;
    if (len == LK_KB && a.wvec) {
        if constexpr (DW == LK_F32) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float4 w4[16];
                const float4 *src = reinterpret_cast<const float4 *>(wp) + 16 * h;
#pragma unroll
                for (int q = 0; q < 16; q++)
                    w4[q] = src[q];
#pragma unroll
                for (int q = 0; q < 16; q++) {
                    const int i = 64 * h + 4 * q;
#pragma unroll
                    for (int s = 0; s < ST; s++) {
                        float x0, x1, x2, x3;
                        if (XSM) {
                            float4 x4 = *reinterpret_cast<const float4 *>(xs + s * XS + kb * XPAD + i);
                            x0 = x4.x, x1 = x4.y, x2 = x4.z, x3 = x4.w;
                        } else {
                            x0 = x_at<false>(a, b, xs, XS, s, kb, i);
                            x1 = x_at<false>(a, b, xs, XS, s, kb, i + 1);
                            x2 = x_at<false>(a, b, xs, XS, s, kb, i + 2);
                            x3 = x_at<false>(a, b, xs, XS, s, kb, i + 3);
                        }
                        acc[s] = __fmaf_rn(x0, w4[q].x, acc[s]);
                        acc[s] = __fmaf_rn(x1, w4[q].y, acc[s]);
                        acc[s] = __fmaf_rn(x2, w4[q].z, acc[s]);
                        acc[s] = __fmaf_rn(x3, w4[q].w, acc[s]);
                    }
                }
            }
        } else {
            uint4 w8[16];
            const uint4 *src = reinterpret_cast<const uint4 *>(wp);
#pragma unroll
            for (int q = 0; q < 16; q++)
                w8[q] = src[q];
#pragma unroll
            for (int q = 0; q < 16; q++) {
#pragma unroll
                for (int s = 0; s < ST; s++) {
                    float xv[8];
                    if (XSM) {
                        const float4 *x4 =
                            reinterpret_cast<const float4 *>(xs + s * XS + kb * XPAD + 8 * q);
                        float4 lo = x4[0], hi = x4[1];
                        xv[0] = lo.x, xv[1] = lo.y, xv[2] = lo.z, xv[3] = lo.w;
                        xv[4] = hi.x, xv[5] = hi.y, xv[6] = hi.z, xv[7] = hi.w;
                    } else {
#pragma unroll
                        for (int j = 0; j < 8; j++)
                            xv[j] = x_at<false>(a, b, xs, XS, s, kb, 8 * q + j);
                    }
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[s] = __fmaf_rn(xv[j], unpack8<DW>(w8[q], j), acc[s]);
                }
            }
        }
    } else {
        for (int i = 0; i < len; i++) {
            const float w = lk_elem<DW>::load(wp, i);
#pragma unroll
            for (int s = 0; s < ST; s++)
                acc[s] = __fmaf_rn(x_at<XSM>(a, b, xs, XS, s, kb, i), w, acc[s]);
        }
    }
}

/* The epilogue of output l for every s < S. */
template <int ST>
__device__ __forceinline__ void gemv_store(const gemv_args &a, int64_t b, int64_t l,
                                           const float (&tot)[ST])
{
#pragma unroll
    for (int s = 0; s < ST; s++) {
        if (s < a.S) {
            const float total = a.nkb == 0 ? 0.0f : tot[s]; /* K == 0 gives +0 */
            if (a.swap)
                lk_gemm_store(a.e, b, l, s, total);
            else
                lk_gemm_store(a.e, b, s, l, total);
        }
    }
}

/* KC: NB outputs per block, T threads per output, each taking k-blocks
 * t, t + T, ... in rounds. */
template <lk_dtype DW, int ST, bool XSM>
__global__ void __launch_bounds__(256) gemv_kc_kernel(gemv_args a)
{
    lk_pdl_wait(); /* lk_gemm: every operand is a user tensor */
    lk_pdl_trigger();
    typedef typename lk_elem<DW>::T TW;
    extern __shared__ float4 gemv_smem4[];
    float *xs = reinterpret_cast<float *>(gemv_smem4);
    const int XS = a.nkb * XPAD;
    float *part = xs + (XSM ? ST * XS : 0);
    const int lo = threadIdx.x / a.T, t = threadIdx.x % a.T;
    const bool active = lo < a.NB;

    for (int64_t b = blockIdx.y; b < a.batch; b += gridDim.y) {
        const int64_t l = (int64_t)blockIdx.x * a.NB + lo;
        const bool live = active && l < a.L;
        const TW *wrow = (const TW *)a.w + b * a.w_bs + (live ? l : 0) * a.ldw;
        if (XSM) {
            /* the weights of the first round start towards L2 while the
             * block widens x */
            if (live && t < a.nkb)
                prefetch_l2(wrow + (int64_t)t * LK_KB,
                            (a.K - (int64_t)t * LK_KB < LK_KB ? a.K - (int64_t)t * LK_KB : LK_KB) *
                                (int64_t)sizeof(TW));
            if (a.xvec && a.K % 8 == 0)
                load_x_vec<ST>(a, b, xs, XS);
            else
                load_x<ST>(a, b, xs, XS);
            __syncthreads();
        }
        float tot[ST];
#pragma unroll
        for (int s = 0; s < ST; s++)
            tot[s] = 0.0f;
        for (int j0 = 0; j0 < a.nkb; j0 += a.T) {
            const int kb = j0 + t;
            float acc[ST];
            if (live && kb < a.nkb) {
                chain_kc<DW, ST, XSM>(a, b, wrow, kb, xs, XS, acc);
            } else {
#pragma unroll
                for (int s = 0; s < ST; s++)
                    acc[s] = 0.0f;
            }
            if (active) {
#pragma unroll
                for (int s = 0; s < ST; s++)
                    part[(lo * a.T + t) * ST + s] = acc[s];
            }
            __syncthreads();
            if (live && t == 0) {
                const int cnt = a.T < a.nkb - j0 ? a.T : a.nkb - j0;
                for (int q = 0; q < cnt; q++) {
#pragma unroll
                    for (int s = 0; s < ST; s++) {
                        const float p = part[(lo * a.T + q) * ST + s];
                        /* the first block is stored, later ones added in order */
                        tot[s] = j0 + q == 0 ? p : __fadd_rn(tot[s], p);
                    }
                }
            }
            __syncthreads();
        }
        if (live && t == 0)
            gemv_store<ST>(a, b, l, tot);
        __syncthreads(); /* xs is refilled for the next batch entry */
    }
}

/* LC: lane = output l (32 per block), warp = k-block within a round of 8. */
template <lk_dtype DW, int ST, bool XSM>
__global__ void __launch_bounds__(256) gemv_lc_kernel(gemv_args a)
{
    lk_pdl_wait(); /* lk_gemm: every operand is a user tensor */
    lk_pdl_trigger();
    typedef typename lk_elem<DW>::T TW;
    extern __shared__ float4 gemv_smem4[];
    float *xs = reinterpret_cast<float *>(gemv_smem4);
    const int XS = a.nkb * XPAD;
    float *part = xs + (XSM ? ST * XS : 0); /* [8][ST][32] */
    const int kq = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;

    for (int64_t b = blockIdx.y; b < a.batch; b += gridDim.y) {
        if (XSM) {
            load_x<ST>(a, b, xs, XS);
            __syncthreads();
        }
        const int64_t l = (int64_t)blockIdx.x * LK_WARP + lane;
        const bool live = l < a.L;
        const TW *wcol = (const TW *)a.w + b * a.w_bs + (live ? l : 0);
        float tot[ST];
#pragma unroll
        for (int s = 0; s < ST; s++)
            tot[s] = 0.0f;
        for (int j0 = 0; j0 < a.nkb; j0 += 8) {
            const int kb = j0 + kq;
            float acc[ST];
#pragma unroll
            for (int s = 0; s < ST; s++)
                acc[s] = 0.0f;
            if (live && kb < a.nkb) {
                const int64_t k0 = (int64_t)kb * LK_KB;
                const int len = a.K - k0 < LK_KB ? (int)(a.K - k0) : LK_KB;
                const TW *wp = wcol + k0 * a.ldw;
#pragma unroll 8
                for (int i = 0; i < len; i++) {
                    const float w = lk_elem<DW>::load(wp, (int64_t)i * a.ldw);
#pragma unroll
                    for (int s = 0; s < ST; s++)
                        acc[s] = __fmaf_rn(x_at<XSM>(a, b, xs, XS, s, kb, i), w, acc[s]);
                }
            }
#pragma unroll
            for (int s = 0; s < ST; s++)
                part[(kq * ST + s) * LK_WARP + lane] = acc[s];
            __syncthreads();
            if (live && kq == 0) {
                const int cnt = 8 < a.nkb - j0 ? 8 : a.nkb - j0;
                for (int q = 0; q < cnt; q++) {
#pragma unroll
                    for (int s = 0; s < ST; s++) {
                        const float p = part[(q * ST + s) * LK_WARP + lane];
                        tot[s] = j0 + q == 0 ? p : __fadd_rn(tot[s], p);
                    }
                }
            }
            __syncthreads();
        }
        if (live && kq == 0)
            gemv_store<ST>(a, b, l, tot);
        __syncthreads();
    }
}

/* STREAM: the KC layout with every row contiguous (ldw == K), K a
 * multiple of 128 and the weights 16-byte aligned -- the decode GEMV.
 * The rows [r0, r0 + R) of a block are one contiguous run of R * nkb
 * chains.  A warp loads 8 KiB of it with fully coalesced 16-byte loads
 * (lane i takes bytes 16 i, 16 i + 512, ...), parks them in shared memory
 * with one 16-byte pad per chain (so that the reads below hit distinct
 * banks), issues the loads of its next 8 KiB, and only then runs the
 * chains it parked: lane j takes chain j of the chunk, the contract's
 * sequential fma chain over its 128 k.  Loads of one chunk are thus in
 * flight while the previous one is computed.  The block then adds each
 * row's chain results in ascending kb, as every other path does. */
template <lk_dtype DW> struct stream_shape {
    static constexpr int PPC = LK_KB * (int)sizeof(typename lk_elem<DW>::T) / 16; /* pieces per chain */
    static constexpr int CPW = 32 * 16 / PPC;                                       /* chains per chunk */
    static constexpr int STAGE = CPW * (PPC + 1);                                   /* uint4 per warp */
};

template <lk_dtype DW, int ST>
__global__ void __launch_bounds__(256) gemv_stream_kernel(gemv_args a, int R)
{
    lk_pdl_wait(); /* lk_gemm: every operand is a user tensor */
    lk_pdl_trigger();
    typedef stream_shape<DW> SH;
    extern __shared__ float4 gemv_smem4[];
    const int nkb = a.nkb, XS = nkb * XPAD;
    const int warp = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;
    const int nw = blockDim.x / LK_WARP;
    float *xs = reinterpret_cast<float *>(gemv_smem4);
    uint4 *stage = reinterpret_cast<uint4 *>(xs + ST * XS) + warp * SH::STAGE;
    float *part = reinterpret_cast<float *>(reinterpret_cast<uint4 *>(xs + ST * XS) +
                                            nw * SH::STAGE);
    const size_t es = sizeof(typename lk_elem<DW>::T);

    for (int64_t b = blockIdx.y; b < a.batch; b += gridDim.y) {
        const int64_t r0 = (int64_t)blockIdx.x * R;
        const int rows = a.L - r0 < R ? (int)(a.L - r0) : R;
        const int nch = rows * nkb;
        const int64_t bytes = (int64_t)nch * SH::PPC * 16;
        const char *base = (const char *)a.w + (b * a.w_bs + r0 * a.ldw) * (int64_t)es;

        int c = warp;
        uint4 v[16];
#pragma unroll
        for (int q = 0; q < 16; q++) {
            const int64_t off = (int64_t)c * 8192 + q * 512 + lane * 16;
            v[q] = off < bytes ? lk_ld_stream(base + off) : make_uint4(0, 0, 0, 0);
        }
        if (a.xvec)
            load_x_vec<ST>(a, b, xs, XS);
        else
            load_x<ST>(a, b, xs, XS);
        __syncthreads();
        for (; (int64_t)c * SH::CPW < nch; c += nw) {
            /* piece p of the chunk is piece p % PPC of chain p / PPC */
#pragma unroll
            for (int q = 0; q < 16; q++) {
                const int p = q * 32 + lane;
                stage[(p / SH::PPC) * (SH::PPC + 1) + p % SH::PPC] = v[q];
            }
            __syncwarp();
            const int cn = c + nw;
#pragma unroll
            for (int q = 0; q < 16; q++) {
                const int64_t off = (int64_t)cn * 8192 + q * 512 + lane * 16;
                v[q] = off < bytes ? lk_ld_stream(base + off) : make_uint4(0, 0, 0, 0);
            }
            const int lc = c * SH::CPW + lane;
            if (lane < SH::CPW && lc < nch) {
                const int kb = lc % nkb;
                const uint4 *wp = stage + lane * (SH::PPC + 1);
                float acc[ST];
#pragma unroll
                for (int s = 0; s < ST; s++)
                    acc[s] = 0.0f;
#pragma unroll 4
                for (int q = 0; q < SH::PPC; q++) {
                    const uint4 w = wp[q];
                    if constexpr (DW == LK_F32) {
                        const float wv[4] = {__uint_as_float(w.x), __uint_as_float(w.y),
                                             __uint_as_float(w.z), __uint_as_float(w.w)};
#pragma unroll
                        for (int s = 0; s < ST; s++) {
                            const float4 x4 =
                                *reinterpret_cast<const float4 *>(xs + s * XS + kb * XPAD + 4 * q);
                            acc[s] = __fmaf_rn(x4.x, wv[0], acc[s]);
                            acc[s] = __fmaf_rn(x4.y, wv[1], acc[s]);
                            acc[s] = __fmaf_rn(x4.z, wv[2], acc[s]);
                            acc[s] = __fmaf_rn(x4.w, wv[3], acc[s]);
                        }
                    } else {
#pragma unroll
                        for (int s = 0; s < ST; s++) {
                            const float4 *x4 =
                                reinterpret_cast<const float4 *>(xs + s * XS + kb * XPAD + 8 * q);
                            const float4 lo = x4[0], hi = x4[1];
                            const float xv[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                            for (int j = 0; j < 8; j++)
                                acc[s] = __fmaf_rn(xv[j], unpack8<DW>(w, j), acc[s]);
                        }
                    }
                }
#pragma unroll
                for (int s = 0; s < ST; s++)
                    part[lc * ST + s] = acc[s];
            }
            __syncwarp(); /* the stage is refilled next round */
        }
        __syncthreads();
        for (int r = threadIdx.x; r < rows; r += blockDim.x) {
            float tot[ST];
#pragma unroll
            for (int s = 0; s < ST; s++) {
                tot[s] = part[(r * nkb) * ST + s]; /* the first block is stored */
                for (int kb = 1; kb < nkb; kb++)
                    tot[s] = __fadd_rn(tot[s], part[(r * nkb + kb) * ST + s]);
            }
            gemv_store<ST>(a, b, r0 + r, tot);
        }
        __syncthreads(); /* xs and part are refilled for the next batch entry */
    }
}

/* Launch the STREAM kernel if the call has its shape and its shared
 * memory fits; false leaves the call to the general kernels. */
template <lk_dtype DW, int ST>
bool launch_stream(const gemv_args &a, cudaStream_t st)
{
    typedef stream_shape<DW> SH;
    const size_t es = sizeof(typename lk_elem<DW>::T);
    if (a.nkb == 0 || a.K % LK_KB != 0 || a.ldw != a.K || !a.wvec)
        return false;
    /* at least a round of chunks for the block's eight warps; more rows
     * when that leaves more than two blocks per SM, so that each warp runs
     * several chunks and the loads of the next overlap the work on this
     * one (the partials, R * nkb * ST floats, stay within 32 KiB) */
    int R = a.nkb >= 8 * SH::CPW ? 1 : 8 * SH::CPW / a.nkb;
    const int64_t per_sm = (a.L + 2 * (int64_t)a.sms - 1) / (2 * (int64_t)a.sms);
    const int64_t r_cap = 8192 / ((int64_t)a.nkb * ST);
    if (per_sm > R)
        R = (int)(per_sm < r_cap ? per_sm : r_cap > R ? r_cap : R);
    const int64_t chains = (int64_t)R * a.nkb;
    const int nw = chains >= 8 * SH::CPW ? 8 : (int)((chains + SH::CPW - 1) / SH::CPW);
    const size_t smem = (size_t)ST * a.nkb * XPAD * sizeof(float) +
                        (size_t)nw * SH::STAGE * 16 + (size_t)chains * ST * sizeof(float);
    if (smem > GEMV_STREAM_SMEM)
        return false;
    (void)es;
    const dim3 grid(lk_grid_cap((a.L + R - 1) / R, ((int64_t)1 << 31) - 1),
                    lk_grid_cap(a.batch, 65535));
    (void)lk_launch(gemv_stream_kernel<DW, ST>, grid, dim3(nw * LK_WARP), smem, st, a, R);
    return true;
}

template <lk_dtype DW, int ST>
void launch(const gemv_args &a, bool kc, cudaStream_t st)
{
    const size_t xbytes = (size_t)ST * a.nkb * XPAD * sizeof(float);
    const size_t pbytes = kc ? (size_t)a.NB * a.T * ST * sizeof(float)
                             : (size_t)8 * ST * LK_WARP * sizeof(float);
    const bool xsm = xbytes + pbytes <= GEMV_SMEM_MAX;
    const size_t smem = (xsm ? xbytes : 0) + pbytes;
    const unsigned threads = kc ? (unsigned)((a.NB * a.T + LK_WARP - 1) / LK_WARP * LK_WARP) : 256;
    const int64_t per_block = kc ? a.NB : LK_WARP;
    const dim3 grid(lk_grid_cap((a.L + per_block - 1) / per_block, ((int64_t)1 << 31) - 1),
                    lk_grid_cap(a.batch, 65535));
    if (kc && launch_stream<DW, ST>(a, st))
        return;
    if (kc) {
        if (xsm)
            (void)lk_launch(gemv_kc_kernel<DW, ST, true>, grid, dim3(threads), smem, st, a);
        else
            (void)lk_launch(gemv_kc_kernel<DW, ST, false>, grid, dim3(threads), smem, st, a);
    } else {
        if (xsm)
            (void)lk_launch(gemv_lc_kernel<DW, ST, true>, grid, dim3(threads), smem, st, a);
        else
            (void)lk_launch(gemv_lc_kernel<DW, ST, false>, grid, dim3(threads), smem, st, a);
    }
}

} // namespace

bool lk_cuda_gemv(const lk_gemm_args *g, cudaStream_t stream, const lk_cuda_queue *q)
{
    const bool m_small = g->m <= LK_GEMV_MAX_S && (g->m <= g->n || g->n > LK_GEMV_MAX_S);
    const bool n_small = !m_small && g->n <= LK_GEMV_MAX_S;
    if (!m_small && !n_small)
        return false;
    gemv_args a;
    const lk_tensor *X, *W;
    bool kc;
    a.sms = q->dev->sm_count > 0 ? q->dev->sm_count : 1;
    a.swap = n_small;
    if (m_small) { /* X = op(A), W(l = n, k) = op(B)[k, n] */
        X = &g->a;
        W = &g->b;
        a.xs_s = g->ta == LK_TRANS ? 1 : g->a.ld;
        a.xs_k = g->ta == LK_TRANS ? g->a.ld : 1;
        kc = g->tb == LK_TRANS;
        a.S = g->m;
        a.L = g->n;
    } else { /* X(s = n, k) = op(B)[k, n], W(l = m, k) = op(A)[m, k] */
        X = &g->b;
        W = &g->a;
        a.xs_s = g->tb == LK_TRANS ? g->b.ld : 1;
        a.xs_k = g->tb == LK_TRANS ? 1 : g->b.ld;
        kc = g->ta == LK_NO_TRANS;
        a.S = g->n;
        a.L = g->m;
    }
    a.x = X->data;
    a.xdt = X->dtype;
    a.x_bs = X->batch_stride;
    a.w = W->data;
    a.ldw = W->ld;
    a.w_bs = W->batch_stride;
    a.K = g->k;
    a.batch = g->batch;
    a.nkb = (int)((g->k + LK_KB - 1) / LK_KB);
    a.T = a.nkb < 1 ? 1 : a.nkb < 64 ? a.nkb : 64;
    a.NB = 256 / a.T;
    const size_t es = lk_dtype_bytes(W->dtype);
    a.wvec = (uintptr_t)W->data % 16 == 0 && ((size_t)W->ld * es) % 16 == 0 &&
             ((size_t)W->batch_stride * es) % 16 == 0;
    const size_t xes = lk_dtype_bytes(X->dtype);
    a.xvec = a.xs_k == 1 && (uintptr_t)X->data % 16 == 0 && ((size_t)a.xs_s * xes) % 16 == 0 &&
             ((size_t)a.x_bs * xes) % 16 == 0;
    a.e = lk_gemm_epi_make(g);
    const int64_t S = a.S;
    LK_FLOAT_SWITCH(W->dtype, DW, {
        if (S == 1)
            launch<DW, 1>(a, kc, stream);
        else if (S == 2)
            launch<DW, 2>(a, kc, stream);
        else if (S <= 4)
            launch<DW, 4>(a, kc, stream);
        else
            launch<DW, 8>(a, kc, stream);
    });
    return true;
}

template <lk_dtype DW, int ST> static cudaError_t stream_setup()
{
    return cudaFuncSetAttribute(gemv_stream_kernel<DW, ST>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, GEMV_STREAM_SMEM);
}

cudaError_t lk_cuda_gemv_setup()
{
    const cudaError_t es[] = {
        stream_setup<LK_F32, 1>(),  stream_setup<LK_F32, 2>(),  stream_setup<LK_F32, 4>(),
        stream_setup<LK_F32, 8>(),  stream_setup<LK_BF16, 1>(), stream_setup<LK_BF16, 2>(),
        stream_setup<LK_BF16, 4>(), stream_setup<LK_BF16, 8>(), stream_setup<LK_F16, 1>(),
        stream_setup<LK_F16, 2>(),  stream_setup<LK_F16, 4>(),  stream_setup<LK_F16, 8>(),
    };
    for (cudaError_t e : es)
        if (e != cudaSuccess)
            return e;
    return cudaSuccess;
}
