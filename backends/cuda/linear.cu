/* Lockstep CUDA: lk_linear and lk_ternary_linear on prepared weights
 * (layouts in linear.cuh), the decode GEMV.
 *
 * Float (docs/numerics.md section 4): a block owns gpc groups of 8 rows
 * and every 128-k block of them: units (group, kb) of 8 chains, one
 * contiguous run of memory.  The eight threads of a quarter-warp take one
 * unit, thread r the chain of row r: its 16-byte pieces are issued before
 * the first fma (the first unit's while the block widens x into shared
 * memory), then acc = fma(x_k, w_k, acc) from +0 for k ascending, for every
 * row of x at once (the weights are read once per MT rows of x).  The
 * chain results go to shared memory; after the one barrier, thread lr adds
 * row lr's block results left to right (the first stored) and runs the
 * epilogue of lk_gemm_store, as gemv.cu does.  More rows of x than MT:
 * grid.y takes chunks of MT rows, each reading the weights again (from L2
 * when they fit): the bits of a row never depend on the others.
 *
 * Ternary (section 9): the int32 sum is exact, so any order and split of K
 * is allowed.  A warp takes one group of 8 rows; lane r of quarter q
 * streams row r's pieces q, q + S, ... (S = 4 per warp, more when several
 * warps share a group) with 16-byte loads (a quarter-warp reads 128
 * contiguous bytes), and dp4a's the raw codes against x as it lies in
 * memory (the layout puts the codes where x's bytes are), acc = sum x *
 * code - sum x = sum x * (code - 1), exact modulo 2^32 and inside int32 by
 * the core's K limit.  sum x is split over the eight lanes (two words of
 * each piece each).  Shuffles reduce a warp; several warps per group meet
 * in shared memory after one barrier.  No x pass, no atomics.
 *
 * The HBM floors (bytes of weights / 4.36 TB/s, H200): bf16 6912x2560
 * 35.4 MB -> 8.1 us; 2560x6912 -> 8.1 us; 2560x2560 13.1 MB -> 3.0 us;
 * 128256x2560 656.7 MB -> 150.6 us.  Ternary (K / 4 bytes a row): 6912x2560
 * 4.4 MB -> 1.0 us; 2560x6912 -> 1.0 us; 2560x2560 1.6 MB -> 0.38 us;
 * 128256x2560 82.1 MB -> 18.8 us.  Small shapes are bound by launch and
 * latency, not bandwidth. */
#include <string.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/linear.cuh"
#include "backends/cuda/qgemm.cuh"

namespace {

#define LIN_THREADS 256
#define LIN_Q (LIN_THREADS / LK_LIN_G) /* quarter-warps of a block */

/* Weights are read once per call: no L1 allocation. */
__device__ __forceinline__ uint4 ld_once(const uint4 *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

/* ---------------------------------------------------------------- float */

struct lin_args {
    const uint4 *w;
    const void *x;
    lk_dtype xdt;
    int64_t ldx;
    int64_t M, N, K, nkb, groups, m_base;
    int gpc;  /* groups per block */
    int xvec; /* x rows 16-byte aligned and K a multiple of 16 bytes of x */
    lk_gemm_epi e;
};

template <lk_dtype DW> struct lin_shape {
    static constexpr int EPP = 16 / (int)sizeof(typename lk_elem<DW>::T); /* elements per piece */
    static constexpr int PPC = LK_KB / EPP;                                /* pieces per chain */
    static constexpr int NH = PPC / 16;                                    /* loads of 16 pieces */
};

/* Rows m0 .. m0 + MT - 1 of x widened into xs[s * XS + kb * XPAD + i]:
 * +0 past K and for rows past M. */
template <int MT>
__device__ __forceinline__ void lin_fill_x(const lin_args &a, int64_t m0, float *xs, int XS)
{
    const int kk = (int)a.nkb * LK_KB;
    const int es = a.xdt == LK_F32 ? 4 : 2, per = 16 / es;
#pragma unroll
    for (int s = 0; s < MT; s++) {
        const int64_t m = m0 + s;
        float *xr = xs + s * XS;
        if (m >= a.M) {
            for (int k = threadIdx.x; k < kk; k += blockDim.x)
                xr[(k >> 7) * LK_LIN_XPAD + (k & 127)] = 0.0f;
            continue;
        }
        int kv = 0; /* k below kv are done by the vector loads */
        if (a.xvec) {
            const uint4 *xp = reinterpret_cast<const uint4 *>((const char *)a.x + m * a.ldx * es);
            const int pieces = (int)(a.K / per);
            kv = pieces * per;
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
                    float *dst = xr + (k >> 7) * LK_LIN_XPAD + (k & 127);
                    const uint32_t wd[4] = {u[h].x, u[h].y, u[h].z, u[h].w};
                    if (a.xdt == LK_F32) {
                        *reinterpret_cast<float4 *>(dst) =
                            make_float4(__uint_as_float(wd[0]), __uint_as_float(wd[1]),
                                        __uint_as_float(wd[2]), __uint_as_float(wd[3]));
                    } else {
                        float v[8];
#pragma unroll
                        for (int j = 0; j < 8; j++) {
                            const uint32_t b = (j & 1) ? wd[j / 2] >> 16 : wd[j / 2] & 0xffffu;
                            v[j] = a.xdt == LK_BF16 ? lk_elem<LK_BF16>::load_bits(b)
                                                    : lk_elem<LK_F16>::load_bits(b);
                        }
                        reinterpret_cast<float4 *>(dst)[0] = make_float4(v[0], v[1], v[2], v[3]);
                        reinterpret_cast<float4 *>(dst)[1] = make_float4(v[4], v[5], v[6], v[7]);
                    }
                }
            }
        }
        for (int k = kv + threadIdx.x; k < kk; k += blockDim.x)
            xr[(k >> 7) * LK_LIN_XPAD + (k & 127)] =
                k < a.K ? lk_load_any(a.x, a.xdt, m * a.ldx + k) : 0.0f;
    }
}

template <lk_dtype DW, int MT>
__global__ void __launch_bounds__(LIN_THREADS) lin_kernel(lin_args a)
{
    typedef lin_shape<DW> SH;
    extern __shared__ float4 lin_smem4[];
    float *xs = reinterpret_cast<float *>(lin_smem4);
    const int nkb = (int)a.nkb, XS = nkb * LK_LIN_XPAD;
    float *part = xs + MT * XS; /* [row][kb][MT] */
    const int qi = threadIdx.x / LK_LIN_G, r = threadIdx.x % LK_LIN_G;
    const int64_t g0 = (int64_t)blockIdx.x * a.gpc;
    const int ng = a.groups - g0 < a.gpc ? (int)(a.groups - g0) : a.gpc;
    const int units = ng * nkb;
    const int64_t m0 = a.m_base + (int64_t)blockIdx.y * MT;
    const uint4 *wb = a.w + g0 * a.nkb * (SH::PPC * LK_LIN_G) + r;

    uint4 wv[16];
    int lu = qi;
    if (lu < units) {
#pragma unroll
        for (int q = 0; q < 16; q++)
            wv[q] = ld_once(wb + ((int64_t)lu * SH::PPC + q) * LK_LIN_G);
    }
    lin_fill_x<MT>(a, m0, xs, XS);
    __syncthreads();
    for (; lu < units; lu += LIN_Q) {
        const int kb = lu % nkb;
        const float *xk = xs + kb * LK_LIN_XPAD;
        float acc[MT];
#pragma unroll
        for (int s = 0; s < MT; s++)
            acc[s] = 0.0f;
#pragma unroll
        for (int h = 0; h < SH::NH; h++) {
            if (h > 0 || lu != qi) {
#pragma unroll
                for (int q = 0; q < 16; q++)
                    wv[q] = ld_once(wb + ((int64_t)lu * SH::PPC + 16 * h + q) * LK_LIN_G);
            }
#pragma unroll
            for (int q = 0; q < 16; q++) {
                const int i = (16 * h + q) * SH::EPP; /* k of the piece within the block */
                if constexpr (DW == LK_F32) {
                    const float w0 = __uint_as_float(wv[q].x), w1 = __uint_as_float(wv[q].y);
                    const float w2 = __uint_as_float(wv[q].z), w3 = __uint_as_float(wv[q].w);
#pragma unroll
                    for (int s = 0; s < MT; s++) {
                        const float4 x4 = *reinterpret_cast<const float4 *>(xk + s * XS + i);
                        acc[s] = __fmaf_rn(x4.x, w0, acc[s]);
                        acc[s] = __fmaf_rn(x4.y, w1, acc[s]);
                        acc[s] = __fmaf_rn(x4.z, w2, acc[s]);
                        acc[s] = __fmaf_rn(x4.w, w3, acc[s]);
                    }
                } else {
                    const uint32_t wd[4] = {wv[q].x, wv[q].y, wv[q].z, wv[q].w};
                    float wf[8];
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        wf[j] = lk_elem<DW>::load_bits((j & 1) ? wd[j / 2] >> 16 : wd[j / 2] & 0xffffu);
#pragma unroll
                    for (int s = 0; s < MT; s++) {
                        const float4 lo = *reinterpret_cast<const float4 *>(xk + s * XS + i);
                        const float4 hi = *reinterpret_cast<const float4 *>(xk + s * XS + i + 4);
                        acc[s] = __fmaf_rn(lo.x, wf[0], acc[s]);
                        acc[s] = __fmaf_rn(lo.y, wf[1], acc[s]);
                        acc[s] = __fmaf_rn(lo.z, wf[2], acc[s]);
                        acc[s] = __fmaf_rn(lo.w, wf[3], acc[s]);
                        acc[s] = __fmaf_rn(hi.x, wf[4], acc[s]);
                        acc[s] = __fmaf_rn(hi.y, wf[5], acc[s]);
                        acc[s] = __fmaf_rn(hi.z, wf[6], acc[s]);
                        acc[s] = __fmaf_rn(hi.w, wf[7], acc[s]);
                    }
                }
            }
        }
        const int lr = (lu / nkb) * LK_LIN_G + r;
#pragma unroll
        for (int s = 0; s < MT; s++)
            part[((int64_t)lr * nkb + kb) * MT + s] = acc[s];
    }
    __syncthreads();
    const int64_t n0 = g0 * LK_LIN_G;
    const int rows = a.N - n0 < (int64_t)ng * LK_LIN_G ? (int)(a.N - n0) : ng * LK_LIN_G;
    for (int lr = threadIdx.x; lr < rows; lr += blockDim.x) {
#pragma unroll
        for (int s = 0; s < MT; s++) {
            if (m0 + s >= a.M)
                continue;
            const float *pr = part + (int64_t)lr * nkb * MT + s;
            float tot = pr[0]; /* the first block is stored, later ones added in order */
            for (int kb = 1; kb < nkb; kb++)
                tot = __fadd_rn(tot, pr[kb * MT]);
            lk_gemm_store(a.e, 0, m0 + s, n0 + lr, tot);
        }
    }
}

size_t lin_smem(int64_t nkb, int mt, int gpc)
{
    return (size_t)mt * nkb * LK_LIN_XPAD * sizeof(float) +
           (size_t)gpc * LK_LIN_G * nkb * mt * sizeof(float);
}

template <lk_dtype DW, int MT>
void lin_launch(lin_args a, size_t smem, cudaStream_t st)
{
    const unsigned gx = lk_grid_cap((a.groups + a.gpc - 1) / a.gpc, ((int64_t)1 << 31) - 1);
    const int64_t chunks = (a.M + MT - 1) / MT;
    for (int64_t c0 = 0; c0 < chunks; c0 += 65535) {
        a.m_base = c0 * MT;
        const unsigned gy = (unsigned)(chunks - c0 < 65535 ? chunks - c0 : 65535);
        lin_kernel<DW, MT><<<dim3(gx, gy), LIN_THREADS, smem, st>>>(a);
    }
}

template <lk_dtype DW, int MT> cudaError_t lin_setup(int smem)
{
    return cudaFuncSetAttribute(lin_kernel<DW, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                smem);
}

/* -------------------------------------------------------------- ternary */

struct tlin_args {
    const uint4 *w;
    int64_t pieces, groups, m_base;
    int gpc; /* groups per block: 1, 2, 4 or 8 (8 / gpc warps a group) */
    int xvec;
    lk_qgemm_args q; /* x, x_scale, w_scale (the prepared copy), y, m, n, k */
};

/* 16 bytes of x row m from k0: zero past K and for rows past M. */
__device__ __forceinline__ uint4 tlin_x16(const tlin_args &a, int64_t m, int64_t k0)
{
    if (m >= a.q.m)
        return make_uint4(0, 0, 0, 0);
    const int8_t *x = (const int8_t *)a.q.x.data + m * a.q.x.ld + k0;
    if (a.xvec && k0 + 16 <= a.q.k)
        return __ldg(reinterpret_cast<const uint4 *>(x));
    uint32_t v[4] = {0, 0, 0, 0};
    for (int j = 0; j < 16; j++)
        if (k0 + j < a.q.k)
            v[j / 4] |= (uint32_t)(uint8_t)x[j] << (8 * (j % 4));
    return make_uint4(v[0], v[1], v[2], v[3]);
}

template <int MT>
__global__ void __launch_bounds__(LIN_THREADS) tlin_kernel(tlin_args a)
{
    __shared__ uint32_t red[LIN_THREADS / LK_WARP][LK_LIN_G][MT];
    constexpr int U = 8; /* pieces in flight per thread */
    const int warp = threadIdx.x / LK_WARP, lane = threadIdx.x % LK_WARP;
    const int wpg = 8 / a.gpc;
    const int64_t g = (int64_t)blockIdx.x * a.gpc + warp / wpg;
    const int r = lane % LK_LIN_G;
    const int S = wpg * 4, s = (warp % wpg) * 4 + lane / LK_LIN_G;
    const int64_t m0 = a.m_base + (int64_t)blockIdx.y * MT;
    const bool live = g < a.groups;
    const uint4 *wg = a.w + (live ? g : 0) * a.pieces * LK_LIN_G + r;
    /* lane r adds x words 2 (r % 2), 2 (r % 2) + 1 of piece word r / 2 to sum x */
    const int swd = r >> 1;
    uint32_t dot[MT], sx[MT];
#pragma unroll
    for (int m = 0; m < MT; m++)
        dot[m] = 0, sx[m] = 0;
    if (live) {
        for (int64_t p0 = s; p0 < a.pieces; p0 += (int64_t)U * S) {
            uint4 wv[U];
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t p = p0 + (int64_t)u * S;
                wv[u] = p < a.pieces ? ld_once(wg + p * LK_LIN_G) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < U; u++) {
                const int64_t p = p0 + (int64_t)u * S;
                if (p >= a.pieces)
                    break;
                const uint32_t words[4] = {wv[u].x, wv[u].y, wv[u].z, wv[u].w};
#pragma unroll
                for (int wd = 0; wd < 4; wd++) {
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        const uint4 xv = tlin_x16(a, m0 + m, 64 * p + 16 * wd);
                        const uint32_t xw[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            const uint32_t plane = (words[wd] >> (2 * e)) & 0x03030303u;
                            dot[m] = (uint32_t)__dp4a((int)plane, (int)xw[e], (int)dot[m]);
                        }
                        if (wd == swd) {
                            const uint32_t xa = (r & 1) ? xv.z : xv.x, xb = (r & 1) ? xv.w : xv.y;
                            sx[m] = (uint32_t)__dp4a((int)xa, 0x01010101, (int)sx[m]);
                            sx[m] = (uint32_t)__dp4a((int)xb, 0x01010101, (int)sx[m]);
                        }
                    }
                }
            }
        }
    }
    uint32_t v[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        uint32_t d = dot[m], t = sx[m];
        d += __shfl_xor_sync(LK_FULL_MASK, d, 8);
        d += __shfl_xor_sync(LK_FULL_MASK, d, 16);
#pragma unroll
        for (int o = 1; o < LK_WARP; o <<= 1)
            t += __shfl_xor_sync(LK_FULL_MASK, t, o);
        v[m] = d - t;
    }
    if (wpg > 1) { /* uniform over the block */
        if (lane < LK_LIN_G) {
#pragma unroll
            for (int m = 0; m < MT; m++)
                red[warp][lane][m] = v[m];
        }
        __syncthreads();
        if (warp % wpg != 0)
            return;
        if (lane < LK_LIN_G) {
#pragma unroll
            for (int m = 0; m < MT; m++) {
                uint32_t t = 0;
                for (int w2 = warp; w2 < warp + wpg; w2++)
                    t += red[w2][lane][m];
                v[m] = t;
            }
        }
    }
    const int64_t n = g * LK_LIN_G + lane;
    if (live && lane < LK_LIN_G && n < a.q.n) {
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m0 + m < a.q.m)
                lk_qgemm_store(a.q, m0 + m, n, (int32_t)v[m]);
    }
}

template <int MT> void tlin_launch(tlin_args a, cudaStream_t st)
{
    const unsigned gx = lk_grid_cap((a.groups + a.gpc - 1) / a.gpc, ((int64_t)1 << 31) - 1);
    const int64_t chunks = (a.q.m + MT - 1) / MT;
    for (int64_t c0 = 0; c0 < chunks; c0 += 65535) {
        a.m_base = c0 * MT;
        const unsigned gy = (unsigned)(chunks - c0 < 65535 ? chunks - c0 : 65535);
        tlin_kernel<MT><<<dim3(gx, gy), LIN_THREADS, 0, st>>>(a);
    }
}

int mt_for(int64_t m) { return m == 1 ? 1 : m == 2 ? 2 : m <= 4 ? 4 : 8; }

} // namespace

extern "C" lk_status lk_cuda_linear(void *queue, const lk_linear_args *la)
{
    lk_op_scope op(queue, "lk_linear");
    if (!op.ok())
        return op.status();
    const lk_cuda_weights *h = (const lk_cuda_weights *)la->prepared;
    const lk_cuda_device *dev = op.q->dev;
    const size_t limit = lk_lin_smem_limit(dev);
    const int sms = dev->sm_count > 0 ? dev->sm_count : 1;
    lin_args a;
    a.w = (const uint4 *)h->w;
    a.x = la->x.data;
    a.xdt = la->x.dtype;
    a.ldx = la->x.ld;
    a.M = la->m;
    a.N = h->n;
    a.K = h->k;
    a.nkb = h->nkb;
    a.groups = h->groups;
    a.m_base = 0;
    const size_t xes = lk_dtype_bytes(la->x.dtype);
    a.xvec = (uintptr_t)la->x.data % 16 == 0 && ((size_t)la->x.ld * xes) % 16 == 0;
    a.e.c = la->y.data;
    a.e.cdt = la->y.dtype;
    a.e.ldc = la->y.ld;
    a.e.c_bs = 0;
    a.e.bias = la->bias.data;
    a.e.bdt = la->bias.dtype;
    a.e.bias_bs = 0;
    a.e.accumulate = (la->flags & LK_GEMM_ACCUMULATE) != 0;

    int mt = mt_for(la->m);
    while (mt > 1 && lin_smem(a.nkb, mt, 1) > limit)
        mt /= 2;
    if (lin_smem(a.nkb, mt, 1) > limit) /* weights_prepare refuses such K */
        return op.fail(LK_ERR_DRIVER, "lk_linear: K = %lld does not fit the kernel",
                       (long long)a.K);
    /* at least a unit per quarter-warp, unless that leaves fewer than two
     * blocks per SM; big N: more groups a block (up to 8 rounds of units)
     * while there are still four blocks per SM */
    int64_t gpc = (LIN_Q + a.nkb - 1) / a.nkb;
    if (a.groups < gpc * 2 * sms)
        gpc = a.groups / (2 * sms) < 1 ? 1 : a.groups / (2 * sms) < gpc ? a.groups / (2 * sms) : gpc;
    while (gpc * 2 * a.nkb <= 8 * LIN_Q && a.groups / (gpc * 2) >= 4 * sms &&
           lin_smem(a.nkb, mt, (int)gpc * 2) <= limit)
        gpc *= 2;
    while (gpc > 1 && lin_smem(a.nkb, mt, (int)gpc) > limit)
        gpc--;
    a.gpc = (int)gpc;
    const size_t smem = lin_smem(a.nkb, mt, a.gpc);
    LK_FLOAT_SWITCH(h->dt, DW, {
        if (mt == 1)
            lin_launch<DW, 1>(a, smem, op.stream());
        else if (mt == 2)
            lin_launch<DW, 2>(a, smem, op.stream());
        else if (mt == 4)
            lin_launch<DW, 4>(a, smem, op.stream());
        else
            lin_launch<DW, 8>(a, smem, op.stream());
    });
    return op.launched();
}

extern "C" lk_status lk_cuda_ternary_linear(void *queue, const lk_linear_args *la)
{
    lk_op_scope op(queue, "lk_ternary_linear");
    if (!op.ok())
        return op.status();
    const lk_cuda_weights *h = (const lk_cuda_weights *)la->prepared;
    const int sms = op.q->dev->sm_count > 0 ? op.q->dev->sm_count : 1;
    tlin_args a;
    a.w = (const uint4 *)h->w;
    a.pieces = h->nkb;
    a.groups = h->groups;
    a.m_base = 0;
    a.xvec = (uintptr_t)la->x.data % 16 == 0 && la->x.ld % 16 == 0;
    memset(&a.q, 0, sizeof a.q);
    a.q.m = la->m;
    a.q.n = h->n;
    a.q.k = h->k;
    a.q.x = la->x;
    a.q.x_scale = la->x_scale;
    a.q.y = la->y;
    a.q.w_scale.data = h->scale;
    a.q.w_scale.dtype = LK_F32;
    a.q.w_scale.rows = 1;
    a.q.w_scale.cols = h->scale_cols;
    a.q.w_scale.ld = h->scale_cols;
    /* big N: more groups a block (fewer warps a group) while four blocks
     * per SM remain; short rows: fewer warps a group when half of them
     * would still have a piece each */
    int gpc = 1;
    while (gpc < 8 && a.groups / (2 * gpc) >= 4 * sms)
        gpc *= 2;
    while (gpc < 8 && 32 / gpc / 2 >= a.pieces)
        gpc *= 2;
    a.gpc = gpc;
    switch (mt_for(la->m)) {
    case 1:
        tlin_launch<1>(a, op.stream());
        break;
    case 2:
        tlin_launch<2>(a, op.stream());
        break;
    case 4:
        tlin_launch<4>(a, op.stream());
        break;
    default:
        tlin_launch<8>(a, op.stream());
        break;
    }
    return op.launched();
}

extern "C" lk_status lk_cuda_linear_setup(lk_cuda_device *dev)
{
    const int smem = (int)lk_lin_smem_limit(dev);
    const cudaError_t es[] = {
        lin_setup<LK_F32, 1>(smem),  lin_setup<LK_F32, 2>(smem),  lin_setup<LK_F32, 4>(smem),
        lin_setup<LK_F32, 8>(smem),  lin_setup<LK_BF16, 1>(smem), lin_setup<LK_BF16, 2>(smem),
        lin_setup<LK_BF16, 4>(smem), lin_setup<LK_BF16, 8>(smem), lin_setup<LK_F16, 1>(smem),
        lin_setup<LK_F16, 2>(smem),  lin_setup<LK_F16, 4>(smem),  lin_setup<LK_F16, 8>(smem),
    };
    for (cudaError_t e : es)
        if (e != cudaSuccess) {
            dev->host->set_error("cuda: cannot raise the linear kernels' shared memory limit: %s",
                                 cudaGetErrorString(e));
            (void)cudaGetLastError();
            return LK_ERR_DRIVER;
        }
    return LK_OK;
}
