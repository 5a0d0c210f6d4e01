/* Lockstep CUDA: lk_linear on prepared weights
 * (layouts in linear.cuh), the decode GEMV.
 *
 * Float (docs/numerics.md section 4): one wave of blocks (as many as are
 * resident at once), each owning an even share of the groups of 8 rows
 * and every 128-k block of them: units (group, kb) of 8 chains, one
 * contiguous run of memory.  Where every unit can have a quarter-warp of
 * its own (whole warps of 8 threads per 128-k block, at most 32 blocks,
 * and few enough groups: 2560 x 2560), a block takes one group instead.
 * The eight threads of a quarter-warp take every nq-th unit (nq
 * quarter-warps a block), thread r the chain of row r: the first unit's
 * 16-byte pieces are issued while the block widens x into shared memory
 * (once per block), and during each chain the pieces of the next stage (the unit's
 * next 16 pieces, or the next unit's first) are issued one by one as the
 * current ones are taken, so loads overlap the fma chains.  acc =
 * fma(x_k, w_k, acc) from +0 for k ascending, for every row of x at once
 * (the weights are read once per MT rows of x).  The chain results go to
 * shared memory; after the one barrier, thread lr adds row lr's block
 * results left to right (the first stored) and runs the epilogue of
 * lk_gemm_store, as gemv.cu does.  More rows of x than MT: grid.y takes
 * chunks of MT rows, each reading the weights again (from L2 when they
 * fit): the bits of a row never depend on the others.
 *
 * The HBM floors (bytes of weights / 4.36 TB/s, H200): bf16 6912x2560
 * 35.4 MB -> 8.1 us; 2560x6912 -> 8.1 us; 2560x2560 13.1 MB -> 3.0 us;
 * 128256x2560 656.7 MB -> 150.6 us.  Small shapes are bound by launch and
 * latency, not bandwidth. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/linear.cuh"
#include "backends/cuda/loads.cuh"

namespace {

#define LIN_THREADS 256 /* the most a block has (fewer: one group a block) */
/* weight bytes a block prefetches into L2 past its first stage: all of a
 * decode-sized share, a bounded start of the LM head's (2.5 MB a block,
 * which L2 could not hold for every block) */
#define LIN_L2_AHEAD ((int64_t)96 * 1024)

/* ---------------------------------------------------------------- float */

struct lin_args {
    const uint4 *w;
    const void *x;
    lk_dtype xdt;
    int64_t ldx;
    int64_t M, N, K, nkb, groups, m_base;
    unsigned blocks; /* grid.x: the groups split evenly over them */
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
__global__ void __launch_bounds__(LIN_THREADS, 2) lin_kernel(lin_args a)
{
    typedef lin_shape<DW> SH;
    extern __shared__ float4 lin_smem4[];
    float *xs = reinterpret_cast<float *>(lin_smem4);
    const int nkb = (int)a.nkb, XS = nkb * LK_LIN_XPAD;
    float *part = xs + MT * XS; /* [row][kb][MT] */
    const int qi = threadIdx.x / LK_LIN_G, r = threadIdx.x % LK_LIN_G;
    const int nq = blockDim.x / LK_LIN_G; /* quarter-warps of the block */
    /* groups [g0, g0 + ng): shares differ by at most one group, the
     * larger ones on the first blocks.  Blocks are resident in rounds of
     * one per SM, so an SM's blocks come from different rounds and at
     * most one of them has the larger share: with shares spread evenly
     * instead, blocks b and b + SMs repeat the same share (2560 x 6912:
     * 320 groups over 264 blocks put 4 groups on some SMs and 2 on
     * others, where 3 is the most any needs; 7.9 -> 7.0 us on the H200).
     * Groups of 4 rows (finer shares) were slower: 64-byte pieces per
     * load instead of 128 (the LM head 146 -> 183 us). */
    const int64_t gq = a.groups / gridDim.x, gr = a.groups % gridDim.x;
    const int64_t g0 = (int64_t)blockIdx.x * gq + ((int64_t)blockIdx.x < gr ? blockIdx.x : gr);
    const int ng = (int)(gq + ((int64_t)blockIdx.x < gr ? 1 : 0));
    const int units = ng * nkb;
    const int64_t m0 = a.m_base + (int64_t)blockIdx.y * MT;
    const uint4 *wb = a.w + g0 * a.nkb * (SH::PPC * LK_LIN_G) + r;

    /* wv holds the 16 pieces of the stage being computed; piece q of the
     * next stage (this unit's next half, or the next unit's first) is
     * issued into wv[q] as soon as piece q is taken, so a whole stage is
     * in flight during every fma chain */
    uint4 wv[16];
    int lu = qi;
    /* the weights are prepared (no op writes them): the first stage and
     * the start of the rest of the block's run (LIN_L2_AHEAD bytes) are
     * requested before lk_pdl_wait(), during the previous kernel's tail */
    {
        const int64_t first = (int64_t)nq * SH::PPC * LK_LIN_G * 16; /* bytes of the first stage */
        const int64_t run = (int64_t)units * SH::PPC * LK_LIN_G * 16;
        if (blockIdx.y == 0 && run > first)
            lk_prefetch_l2(a.w + g0 * a.nkb * (SH::PPC * LK_LIN_G) + first / 16,
                           run - first < LIN_L2_AHEAD ? run - first : LIN_L2_AHEAD);
    }
    if (lu < units) {
#pragma unroll
        for (int q = 0; q < 16; q++)
            wv[q] = lk_ld_stream(wb + ((int64_t)lu * SH::PPC + q) * LK_LIN_G);
    }
    lk_pdl_wait();
    lk_pdl_trigger();
    lin_fill_x<MT>(a, m0, xs, XS);
    __syncthreads();
    for (; lu < units; lu += nq) {
        const int kb = lu % nkb;
        const float *xk = xs + kb * LK_LIN_XPAD;
        float acc[MT];
#pragma unroll
        for (int s = 0; s < MT; s++)
            acc[s] = 0.0f;
#pragma unroll
        for (int h = 0; h < SH::NH; h++) {
            const int nlu = h + 1 < SH::NH ? lu : lu + nq;
            const int nh = h + 1 < SH::NH ? h + 1 : 0;
            const bool pre = nlu < units;
            const uint4 *np = wb + ((int64_t)nlu * SH::PPC + 16 * nh) * LK_LIN_G;
#pragma unroll
            for (int q = 0; q < 16; q++) {
                const uint4 cur = wv[q];
                if (pre)
                    wv[q] = lk_ld_stream(np + q * LK_LIN_G);
                const int i = (16 * h + q) * SH::EPP; /* k of the piece within the block */
                if constexpr (DW == LK_F32) {
                    const float w0 = __uint_as_float(cur.x), w1 = __uint_as_float(cur.y);
                    const float w2 = __uint_as_float(cur.z), w3 = __uint_as_float(cur.w);
#pragma unroll
                    for (int s = 0; s < MT; s++) {
                        const float4 x4 = *reinterpret_cast<const float4 *>(xk + s * XS + i);
                        acc[s] = __fmaf_rn(x4.x, w0, acc[s]);
                        acc[s] = __fmaf_rn(x4.y, w1, acc[s]);
                        acc[s] = __fmaf_rn(x4.z, w2, acc[s]);
                        acc[s] = __fmaf_rn(x4.w, w3, acc[s]);
                    }
                } else {
                    const uint32_t wd[4] = {cur.x, cur.y, cur.z, cur.w};
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

/* shared memory of one group's partials */
size_t lin_smem_group(int64_t nkb, int mt)
{
    return (size_t)LK_LIN_G * nkb * mt * sizeof(float);
}

/* x and the partials of ng groups */
size_t lin_smem(int64_t nkb, int mt, int ng)
{
    return (size_t)mt * nkb * LK_LIN_XPAD * sizeof(float) + (size_t)ng * lin_smem_group(nkb, mt);
}

template <lk_dtype DW, int MT>
void lin_launch(lin_args a, unsigned threads, size_t smem, cudaStream_t st)
{
    const unsigned gx = a.blocks;
    const int64_t chunks = (a.M + MT - 1) / MT;
    for (int64_t c0 = 0; c0 < chunks; c0 += 65535) {
        a.m_base = c0 * MT;
        const unsigned gy = (unsigned)(chunks - c0 < 65535 ? chunks - c0 : 65535);
        (void)lk_launch(lin_kernel<DW, MT>, dim3(gx, gy), dim3(threads), smem, st, a);
    }
}

template <lk_dtype DW, int MT> cudaError_t lin_setup(int smem)
{
    return cudaFuncSetAttribute(lin_kernel<DW, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                smem);
}

int mt_for(int64_t m) { return m == 1 ? 1 : m == 2 ? 2 : m <= 4 ? 4 : 8; }

/* LOCKSTEP_CUDA_LINEAR_ONE_GROUP=0 turns the one-group blocks off (set
 * once, in lk_cuda_linear_setup) */
int lin_one_group_on = 1;

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
    /* one wave: as many blocks as are resident at once (two per SM by the
     * kernel's register bound, one when two would not fit in shared
     * memory), each taking an even share of the groups, so that no block
     * waits for a second round; more blocks only when a share's partials
     * would not fit */
    unsigned threads = LIN_THREADS;
    int64_t per_sm = 2, nb = 0, share = 0;
    for (;;) {
        nb = a.groups < per_sm * sms ? a.groups : per_sm * sms;
        share = (a.groups + nb - 1) / nb;
        if (per_sm == 1 || 2 * (lin_smem(a.nkb, mt, (int)share) + 1024) <= dev->smem_optin + 1024)
            break;
        per_sm = 1;
    }
    if (lin_smem(a.nkb, mt, (int)share) > limit) {
        share = (int64_t)((limit - lin_smem(a.nkb, mt, 0)) / lin_smem_group(a.nkb, mt));
        nb = (a.groups + share - 1) / share;
    }
    /* Few units (group, 128-k block): one group a block and one unit a
     * quarter-warp, where all of them are resident at once (at most 128
     * registers a thread; whole warps).  Every chain then starts with the
     * first stage and no quarter-warp runs two in a row: 2560 x 2560 has
     * 6400 units, which 264 blocks of 256 threads gave up to 40 (two
     * chains on some quarter-warps), 320 blocks of 160 threads one each. */
    const int64_t gthreads = (int64_t)LK_LIN_G * a.nkb;
    if (lin_one_group_on && la->m <= mt && gthreads % 32 == 0 && gthreads <= LIN_THREADS &&
        share > 1) {
        const int64_t by_regs = 65536 / (gthreads * 128);
        const int64_t by_smem =
            (int64_t)(dev->smem_optin + 1024) / (int64_t)(lin_smem(a.nkb, mt, 1) + 1024);
        if (a.groups <= (by_regs < by_smem ? by_regs : by_smem) * sms) {
            threads = (unsigned)gthreads;
            nb = a.groups;
            share = 1;
        }
    }
    a.blocks = lk_grid_cap(nb, ((int64_t)1 << 31) - 1);
    const size_t smem = lin_smem(a.nkb, mt, (int)((a.groups + a.blocks - 1) / a.blocks));
    LK_FLOAT_SWITCH(h->dt, DW, {
        if (mt == 1)
            lin_launch<DW, 1>(a, threads, smem, op.stream());
        else if (mt == 2)
            lin_launch<DW, 2>(a, threads, smem, op.stream());
        else if (mt == 4)
            lin_launch<DW, 4>(a, threads, smem, op.stream());
        else
            lin_launch<DW, 8>(a, threads, smem, op.stream());
    });
    return op.launched();
}

extern "C" lk_status lk_cuda_linear_setup(lk_cuda_device *dev)
{
    const char *og = getenv("LOCKSTEP_CUDA_LINEAR_ONE_GROUP");
    lin_one_group_on = !(og && strcmp(og, "0") == 0);
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
