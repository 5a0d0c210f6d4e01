/* Lockstep CUDA: causal attention with grouped KV heads over a KV cache
 * (docs/numerics.md section 12.3), one block per (head, token, sequence).
 * A decode step has one query row per sequence, so the block is the whole
 * parallelism of its head and the kernel is built for latency:
 *
 * - s_j = dot(q, k_j) * scale: one thread per key j, each dot a KB-blocked
 *   fma chain over head_dim (the GEMM contract's order); the key row is
 *   loaded ahead of its chain (float4 for f32 caches) so the chain waits on
 *   one round trip, not one per element;
 * - mx = maximum of s_j (order-free: shuffles), e_j = exp(s_j - mx);
 * - s = the lane sum of e_j (lk_warp_chunk: one warp per 4096-term chunk,
 *   the chunk partials summed the same way by warp 0); r = 1 / s and
 *   p_j = e_j * r (section 6);
 * - out_d = dot over j of p_j * v_j,d: the KB blocks of the context are
 *   independent fma chains, so one thread per (d, block) runs one chain and
 *   the block results are added left to right per d afterwards.
 *
 * The scores and the block results live in shared memory when the cache
 * fits, else in the queue's workspace (one slice per resident block: the
 * grid is capped to fit).
 *
 * One-token calls (decode) go to attention_decode_kernel below, which does
 * the same arithmetic with one global round trip and three barriers per row
 * where its shared memory holds all L scores plus a tile of >= 8 keys;
 * LOCKSTEP_CUDA_ATTENTION=block / =decode forces one kernel for every call
 * (decode: every call that fits), so the tests can check either on every
 * shape. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/math.cuh"
#include "backends/cuda/model.cuh"

#define LK_ATT_THREADS 256
#define LK_ATT_WARPS (LK_ATT_THREADS / 32)
#define LK_ATT_SMEM_MAX (48 * 1024)

namespace {

/* Floats of the per-block big area: L scores, then ceil(L / KB) x hd block
 * results (even offsets: lk_warp_chunk reads pairs), rounded up to 4 floats. */
__host__ __device__ __forceinline__ int64_t att_big_floats(int64_t L, int64_t hd)
{
    const int64_t e = (L + 1) & ~(int64_t)1;
    return (e + (L + LK_KB - 1) / LK_KB * hd + 3) & ~(int64_t)3;
}

/* The dot of q (shared memory) with key row kr over [d0, d1), one fma
 * chain in ascending d.  F32 rows aligned to 16 bytes (VEC) read float4s,
 * eight in flight before their 32 fmas. */
template <lk_dtype DK, bool VEC>
__device__ __forceinline__ float dot_block(const float *qv, const typename lk_elem<DK>::T *kr,
                                           int d0, int d1)
{
    float acc = 0.0f;
    int d = d0;
    if (VEC) {
        const float4 *k4 = reinterpret_cast<const float4 *>(kr);
        const float4 *q4 = reinterpret_cast<const float4 *>(qv);
        for (; d + 32 <= d1; d += 32) {
            float4 kv[8];
#pragma unroll
            for (int u = 0; u < 8; u++)
                kv[u] = __ldg(k4 + d / 4 + u);
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const float4 qq = q4[d / 4 + u];
                acc = __fmaf_rn(qq.x, kv[u].x, acc);
                acc = __fmaf_rn(qq.y, kv[u].y, acc);
                acc = __fmaf_rn(qq.z, kv[u].z, acc);
                acc = __fmaf_rn(qq.w, kv[u].w, acc);
            }
        }
    } else {
        for (; d + 16 <= d1; d += 16) {
            float kv[16];
#pragma unroll
            for (int u = 0; u < 16; u++)
                kv[u] = lk_elem<DK>::load(kr, d + u);
#pragma unroll
            for (int u = 0; u < 16; u++)
                acc = __fmaf_rn(qv[d + u], kv[u], acc);
        }
    }
    for (; d < d1; d++)
        acc = __fmaf_rn(qv[d], lk_elem<DK>::load(kr, d), acc);
    return acc;
}

/* One KB block of P.V for column d: sum over j in [j0, j1) of p_j v_j,d as
 * one fma chain in ascending j (vp points at v_{j0},d; rows ld apart). */
template <lk_dtype DV>
__device__ __forceinline__ float pv_block(const float *p, const typename lk_elem<DV>::T *vp,
                                          int64_t ld, int j0, int j1)
{
    float acc = 0.0f;
    int j = j0;
    for (; j + 16 <= j1; j += 16) {
        float vv[16];
#pragma unroll
        for (int u = 0; u < 16; u++)
            vv[u] = lk_elem<DV>::load(vp, (int64_t)(j - j0 + u) * ld);
#pragma unroll
        for (int u = 0; u < 16; u++)
            acc = __fmaf_rn(p[j + u], vv[u], acc);
    }
    for (; j < j1; j++)
        acc = __fmaf_rn(p[j], lk_elem<DV>::load(vp, (int64_t)(j - j0) * ld), acc);
    return acc;
}

template <lk_dtype DK, lk_dtype DV, bool VEC>
__global__ void __launch_bounds__(LK_ATT_THREADS)
    attention_kernel(lk_attention_args a, float *ws)
{
    typedef typename lk_elem<DK>::T TK;
    typedef typename lk_elem<DV>::T TV;
    lk_pdl_wait(); /* q, the caches and pos are written by earlier ops */
    lk_pdl_trigger();
    extern __shared__ float4 sm4[];
    float *sm = reinterpret_cast<float *>(sm4);
    const int hd = (int)a.head_dim;
    const int64_t L = a.cache_len;
    float *qv = sm;                              /* hd, rounded up to 4 */
    float *red = qv + ((hd + 3) & ~3);           /* LK_ATT_WARPS + 2, rounded to 4 */
    float *parts = red + ((LK_ATT_WARPS + 2 + 3) & ~3); /* chunk partials, rounded to 4 */
    const int64_t nparts = (L + LK_CHUNK - 1) / LK_CHUNK;
    const int64_t slot =
        ((int64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    float *e = ws ? ws + slot * att_big_floats(L, hd) : parts + ((nparts + 3) & ~(int64_t)3);
    float *blk = e + ((L + 1) & ~(int64_t)1); /* [block][hd] */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    const int64_t h = blockIdx.x, kc = (h / (a.n_head / a.n_kv)) * hd, qc = h * hd;

    for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
        for (int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
            __syncthreads(); /* the previous token's reads of shared memory */
            const int64_t p = ((const int32_t *)a.pos.data)[lk_md_at(a.pos, b, t, 0)];
            const int n = (int)(p < 0 ? 0 : (p + 1 < L ? p + 1 : L));
            const int64_t yi = lk_md_at(a.y, b, t, qc);
            if (n == 0) {
                for (int d = tid; d < hd; d += LK_ATT_THREADS)
                    lk_md_store(a.y.data, a.y.dtype, yi + d, 0.0f);
                continue;
            }
            for (int d = tid; d < hd; d += LK_ATT_THREADS)
                qv[d] = lk_md_load(a.q.data, a.q.dtype, lk_md_at(a.q, b, t, qc + d));
            __syncthreads();

            /* scores */
            const TK *kb = (const TK *)a.k.data + b * a.k.batch_stride + kc;
            float mx = __uint_as_float(0xff800000u); /* -Inf: maximum's identity */
            for (int j = tid; j < n; j += LK_ATT_THREADS) {
                const TK *kr = kb + (int64_t)j * a.k.ld;
                float total = 0.0f;
                for (int d0 = 0; d0 < hd; d0 += LK_KB) {
                    const int d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                    const float acc = dot_block<DK, VEC>(qv, kr, d0, d1);
                    total = d0 == 0 ? acc : __fadd_rn(total, acc);
                }
                const float s = __fmul_rn(total, a.scale);
                e[j] = s;
                mx = lk_maximum(mx, s);
            }
            mx = lk_warp_maximum(mx);
            if (lane == 0)
                red[warp] = mx;
            __syncthreads();
            mx = red[0];
#pragma unroll
            for (int w = 1; w < LK_ATT_WARPS; w++)
                mx = lk_maximum(mx, red[w]);
            for (int j = tid; j < n; j += LK_ATT_THREADS)
                e[j] = lk_cu_exp(__fsub_rn(e[j], mx));
            __syncthreads();

            /* s = lane sum of e_j: a warp per chunk, then the partials */
            const int nch = (n + LK_CHUNK - 1) / LK_CHUNK;
            for (int c = warp; c < nch; c += LK_ATT_WARPS) {
                const int len = n - c * LK_CHUNK < LK_CHUNK ? n - c * LK_CHUNK : LK_CHUNK;
                const float v = lk_warp_chunk<false>(lk_f32_src{e}, (int64_t)c * LK_CHUNK, len);
                if (lane == 0)
                    parts[c] = v;
            }
            __syncthreads();
            if (warp == 0) {
                float s = parts[0];
                if (nch > 1)
                    s = lk_warp_chunk<false>(lk_f32_src{parts}, 0, nch);
                if (lane == 0)
                    red[LK_ATT_WARPS] = __fdiv_rn(1.0f, s);
            }
            __syncthreads();
            const float rs = red[LK_ATT_WARPS];
            for (int j = tid; j < n; j += LK_ATT_THREADS)
                e[j] = __fmul_rn(e[j], rs); /* p_j */
            __syncthreads();

            /* P.V: one chain per (d, KB block of the context) */
            const TV *vb = (const TV *)a.v.data + b * a.v.batch_stride + kc;
            const int nb = (n + LK_KB - 1) / LK_KB;
            for (int it = tid; it < nb * hd; it += LK_ATT_THREADS) {
                const int d = it % hd, jb = it / hd;
                const int j0 = jb * LK_KB, j1 = n - j0 < LK_KB ? n : j0 + LK_KB;
                blk[it] = pv_block<DV>(e, vb + (int64_t)j0 * a.v.ld + d, a.v.ld, j0, j1);
            }
            if (nb > 1)
                __syncthreads();
            for (int d = tid; d < hd; d += LK_ATT_THREADS) {
                float total = blk[d];
                for (int jb = 1; jb < nb; jb++)
                    total = __fadd_rn(total, blk[jb * hd + d]);
                lk_md_store(a.y.data, a.y.dtype, yi + d, total);
            }
        }
    }
}

/* ---------------------------------------------------------------- decode
 * One query row per (head, token, sequence) block, built for the latency of
 * a decode step (a few dozen keys):
 *
 * - the position, q, the first tile of keys and the first LK_DEC_PF value
 *   rows are all requested at once, before anything is computed: rows below
 *   cache_len exist, and rows j >= n that are read are never used, so one
 *   global round trip replaces the chain pos -> q -> keys -> values;
 * - the key tile is staged in shared memory as f32 by coalesced vector
 *   loads (row stride kst: odd in float4s, so the float4 reads of 32
 *   threads on 32 rows hit distinct banks), then one thread per key runs
 *   its dot product from there;
 * - the softmax sum is computed by every warp that owns output columns
 *   (lanes read e_j from shared memory), so no barrier follows it, and
 *   p_j = e_j * r is formed inside the P.V chain (the same rounding as
 *   storing it);
 * - one thread per output column runs the whole P.V sum (KB blocks one
 *   after the other, each its own chain from 0, added left to right), its
 *   first LK_DEC_PF value rows already in registers.
 *
 * Barriers per row: after the staging, after the maximum, after e_j. */
#define LK_DEC_PF 64 /* value rows prefetched per column thread */
#define LK_DEC_U 8   /* vector loads in flight per thread while staging */

struct att_dec_cfg {
    int kt;  /* keys per staged tile */
    int kst; /* floats between staged key rows (multiple of 4) */
};

/* Floats of the decode kernel's shared memory besides the key tile: q, the
 * warp maxima, the scores / e_j (L, even) and each warp's chunk partials. */
__host__ __device__ __forceinline__ int64_t att_dec_fixed(int64_t L, int64_t hd)
{
    const int64_t np = (L + LK_CHUNK - 1) / LK_CHUNK;
    return ((hd + 3) & ~(int64_t)3) + ((LK_ATT_WARPS + 3) & ~3) + ((L + 3) & ~(int64_t)3) +
           LK_ATT_WARPS * ((np + 3) & ~(int64_t)3);
}

__device__ __forceinline__ uint32_t word_of(const uint4 &r, int k)
{
    return k == 0 ? r.x : k == 1 ? r.y : k == 2 ? r.z : r.w;
}

/* Element w of 16 bytes r of a row of dtype D, widened exactly. */
template <lk_dtype D> struct elem16 {
    static __device__ __forceinline__ float get(const uint4 &r, int w)
    {
        return lk_elem<D>::load_bits(word_of(r, w / 2) >> (16 * (w & 1)) & 0xffffu);
    }
};
template <> struct elem16<LK_F32> {
    static __device__ __forceinline__ float get(const uint4 &r, int w)
    {
        return __uint_as_float(word_of(r, w));
    }
};

/* Requests rows [r0, r0 + rows) x [0, hd) of the key cache (row r at
 * kb + r * ld) and stores them widened to f32 at ks + (r - r0) * kst.  W
 * elements per load (16 bytes when the rows allow it, else 1). */
template <lk_dtype DK, int W>
__device__ __forceinline__ void stage_keys(float *ks, int kst, const typename lk_elem<DK>::T *kb,
                                           int64_t ld, int r0, int rows, int hd)
{
    typedef typename lk_elem<DK>::T TK;
    const int per = hd / W, total = rows * per;
    /* term i = i0 + u * LK_ATT_THREADS is row i / per, column i % per:
     * one division per pass, the next term's row and column by adding
     * (dr, dc) with one carry, not a division per term (an unrolled
     * integer division is some 15 instructions, and a decode call walks
     * each of them once) */
    const int dr = LK_ATT_THREADS / per, dc = LK_ATT_THREADS - dr * per;
    for (int i0 = threadIdx.x; i0 < total; i0 += LK_DEC_U * LK_ATT_THREADS) {
        uint4 raw[LK_DEC_U];
        float one[LK_DEC_U];
        int rr[LK_DEC_U], cc[LK_DEC_U];
        rr[0] = i0 / per;
        cc[0] = i0 - rr[0] * per;
#pragma unroll
        for (int u = 1; u < LK_DEC_U; u++) {
            const int c = cc[u - 1] + dc;
            rr[u] = rr[u - 1] + dr + (c >= per);
            cc[u] = c >= per ? c - per : c;
        }
#pragma unroll
        for (int u = 0; u < LK_DEC_U; u++) {
            const int i = i0 + u * LK_ATT_THREADS;
            if (i < total) {
                const int r = rr[u], c = cc[u] * W;
                const TK *src = kb + (int64_t)(r0 + r) * ld + c;
                if (W > 1)
                    raw[u] = __ldg(reinterpret_cast<const uint4 *>(src));
                else
                    one[u] = lk_elem<DK>::load(src, 0);
            }
        }
#pragma unroll
        for (int u = 0; u < LK_DEC_U; u++) {
            const int i = i0 + u * LK_ATT_THREADS;
            if (i < total) {
                const int r = rr[u], c = cc[u] * W;
                if (W > 1) {
#pragma unroll
                    for (int w = 0; w < W; w++)
                        ks[r * kst + c + w] = elem16<DK>::get(raw[u], w);
                } else {
                    ks[r * kst + c] = one[u];
                }
            }
        }
    }
}

template <lk_dtype DK, lk_dtype DV, int W>
__global__ void __launch_bounds__(LK_ATT_THREADS)
    attention_decode_kernel(lk_attention_args a, att_dec_cfg cfg)
{
    typedef typename lk_elem<DK>::T TK;
    typedef typename lk_elem<DV>::T TV;
    /* the head's columns (two 64-bit divisions) from the arguments alone:
     * before the wait, so that they overlap the previous kernel's tail */
    const int64_t h = blockIdx.x, kc = (h / (a.n_head / a.n_kv)) * a.head_dim,
                  qc = h * a.head_dim;
    lk_pdl_wait(); /* q, the caches and pos are written by earlier ops */
    lk_pdl_trigger();
    extern __shared__ float4 sm4[];
    float *sm = reinterpret_cast<float *>(sm4);
    const int hd = (int)a.head_dim, L = (int)a.cache_len, kt = cfg.kt, kst = cfg.kst;
    const int np = (L + LK_CHUNK - 1) / LK_CHUNK;
    float *qv = sm;                                /* hd, rounded up to 4 */
    float *red = qv + ((hd + 3) & ~3);             /* LK_ATT_WARPS, rounded to 4 */
    float *sc = red + ((LK_ATT_WARPS + 3) & ~3);   /* L scores, then e_j */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid / 32;
    float *pw = sc + ((L + 3) & ~3) + warp * ((np + 3) & ~3); /* this warp's partials */
    float *ks = sc + ((L + 3) & ~3) + LK_ATT_WARPS * ((np + 3) & ~3); /* kt x kst */
    const bool cols = warp * 32 < hd; /* this warp owns output columns */
    bool first = true;

    for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
        for (int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
            if (!first)
                __syncthreads(); /* the previous row's reads of shared memory */
            first = false;
            const int64_t p = ((const int32_t *)a.pos.data)[lk_md_at(a.pos, b, t, 0)];
            const TK *kb = (const TK *)a.k.data + b * a.k.batch_stride + kc;
            const TV *vb = (const TV *)a.v.data + b * a.v.batch_stride + kc;
            const float qr = tid < hd ? lk_md_load(a.q.data, a.q.dtype, lk_md_at(a.q, b, t, qc + tid))
                                      : 0.0f;
            float vpf[LK_DEC_PF];
            if (tid < hd) {
#pragma unroll
                for (int u = 0; u < LK_DEC_PF; u++)
                    vpf[u] = u < L ? lk_elem<DV>::load(vb + (int64_t)u * a.v.ld, tid) : 0.0f;
            }
            stage_keys<DK, W>(ks, kst, kb, a.k.ld, 0, kt < L ? kt : L, hd);
            if (tid < hd)
                qv[tid] = qr;
            for (int d = tid + LK_ATT_THREADS; d < hd; d += LK_ATT_THREADS)
                qv[d] = lk_md_load(a.q.data, a.q.dtype, lk_md_at(a.q, b, t, qc + d));
            const int n = (int)(p < 0 ? 0 : (p + 1 < L ? p + 1 : L));
            const int64_t yi = lk_md_at(a.y, b, t, qc);
            if (n == 0) {
                for (int d = tid; d < hd; d += LK_ATT_THREADS)
                    lk_md_store(a.y.data, a.y.dtype, yi + d, 0.0f);
                continue;
            }

            /* scores, a tile of keys at a time */
            float mx = __uint_as_float(0xff800000u); /* -Inf: maximum's identity */
            for (int j0 = 0; j0 < n; j0 += kt) {
                if (j0 > 0) {
                    __syncthreads(); /* the previous tile's reads */
                    stage_keys<DK, W>(ks, kst, kb, a.k.ld, j0, n - j0 < kt ? n - j0 : kt, hd);
                }
                __syncthreads();
                const int nt = n - j0 < kt ? n - j0 : kt;
                for (int jj = tid; jj < nt; jj += LK_ATT_THREADS) {
                    const float *kr = ks + jj * kst;
                    float total = 0.0f;
                    for (int d0 = 0; d0 < hd; d0 += LK_KB) {
                        const int d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                        float acc = 0.0f;
                        int d = d0;
                        for (; d + 4 <= d1; d += 4) {
                            const float4 kk = *reinterpret_cast<const float4 *>(kr + d);
                            const float4 qq = *reinterpret_cast<const float4 *>(qv + d);
                            acc = __fmaf_rn(qq.x, kk.x, acc);
                            acc = __fmaf_rn(qq.y, kk.y, acc);
                            acc = __fmaf_rn(qq.z, kk.z, acc);
                            acc = __fmaf_rn(qq.w, kk.w, acc);
                        }
                        for (; d < d1; d++)
                            acc = __fmaf_rn(qv[d], kr[d], acc);
                        total = d0 == 0 ? acc : __fadd_rn(total, acc);
                    }
                    const float s = __fmul_rn(total, a.scale);
                    sc[j0 + jj] = s;
                    mx = lk_maximum(mx, s);
                }
            }
            mx = lk_warp_maximum(mx);
            if (lane == 0)
                red[warp] = mx;
            __syncthreads();
            mx = red[0];
#pragma unroll
            for (int w = 1; w < LK_ATT_WARPS; w++)
                mx = lk_maximum(mx, red[w]);
            for (int j = tid; j < n; j += LK_ATT_THREADS)
                sc[j] = lk_cu_exp(__fsub_rn(sc[j], mx));
            __syncthreads();
            if (!cols)
                continue;

            /* s = lane sum of e_j, by each column warp on its own */
            const int nch = (n + LK_CHUNK - 1) / LK_CHUNK;
            float s;
            if (nch == 1) {
                s = lk_warp_chunk<false>(lk_f32_src{sc}, 0, n);
            } else {
                for (int c = 0; c < nch; c++) {
                    const int len = n - c * LK_CHUNK < LK_CHUNK ? n - c * LK_CHUNK : LK_CHUNK;
                    const float v = lk_warp_chunk<false>(lk_f32_src{sc}, (int64_t)c * LK_CHUNK, len);
                    if (lane == 0)
                        pw[c] = v;
                }
                __syncwarp();
                s = lk_warp_chunk<false>(lk_f32_src{pw}, 0, nch);
            }
            const float rs = __fdiv_rn(1.0f, __shfl_sync(LK_FULL_MASK, s, 0));

            /* P.V, p_j = e_j * r */
            for (int d = tid; d < hd; d += LK_ATT_THREADS) {
                const TV *vp = vb + d;
                float total = 0.0f;
                for (int j0 = 0; j0 < n; j0 += LK_KB) {
                    const int j1 = n - j0 < LK_KB ? n : j0 + LK_KB;
                    float acc = 0.0f;
                    int j = j0;
                    if (j0 == 0 && d == tid) {
#pragma unroll
                        for (int u = 0; u < LK_DEC_PF; u++)
                            if (u < j1)
                                acc = __fmaf_rn(__fmul_rn(sc[u], rs), vpf[u], acc);
                        j = j1 < LK_DEC_PF ? j1 : LK_DEC_PF;
                    }
                    for (; j < j1; j += 16) { /* 16 loads in flight, the tail too */
                        float vv[16];
#pragma unroll
                        for (int u = 0; u < 16; u++)
                            if (j + u < j1)
                                vv[u] = lk_elem<DV>::load(vp, (int64_t)(j + u) * a.v.ld);
#pragma unroll
                        for (int u = 0; u < 16; u++)
                            if (j + u < j1)
                                acc = __fmaf_rn(__fmul_rn(sc[j + u], rs), vv[u], acc);
                    }
                    total = j0 == 0 ? acc : __fadd_rn(total, acc);
                }
                lk_md_store(a.y.data, a.y.dtype, yi + d, total);
            }
        }
    }
}

template <lk_dtype DK, lk_dtype DV>
void launch(dim3 grid, size_t smem, cudaStream_t st, const lk_attention_args &a, float *ws,
            bool vec)
{
    if (vec)
        lk_launch(attention_kernel<DK, DV, DK == LK_F32>, grid, LK_ATT_THREADS, smem, st, a, ws);
    else
        lk_launch(attention_kernel<DK, DV, false>, grid, LK_ATT_THREADS, smem, st, a, ws);
}

template <lk_dtype DK, lk_dtype DV>
void launch_decode(dim3 grid, size_t smem, cudaStream_t st, const lk_attention_args &a,
                   att_dec_cfg cfg, bool vec)
{
    constexpr int W = 16 / (int)sizeof(typename lk_elem<DK>::T);
    if (vec)
        lk_launch(attention_decode_kernel<DK, DV, W>, grid, LK_ATT_THREADS, smem, st, a, cfg);
    else
        lk_launch(attention_decode_kernel<DK, DV, 1>, grid, LK_ATT_THREADS, smem, st, a, cfg);
}

/* LOCKSTEP_CUDA_ATTENTION: "block" runs every call on the block kernel,
 * "decode" every call that fits on the decode kernel (to test it on every
 * shape); otherwise the decode kernel takes one-token calls. */
int variant()
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("LOCKSTEP_CUDA_ATTENTION");
        v = e && strcmp(e, "block") == 0 ? 1 : e && strcmp(e, "decode") == 0 ? 2 : 0;
    }
    return v;
}

bool aligned16(const lk_tensor &t)
{
    return ((uintptr_t)t.data & 15) == 0 && t.ld % 4 == 0 && t.batch_stride % 4 == 0;
}

} // namespace

extern "C" lk_status lk_cuda_attention(void *queue, const lk_attention_args *a)
{
    lk_op_scope op(queue, "lk_attention");
    if (!op.ok())
        return op.status();
    const lk_cuda_queue *q = (const lk_cuda_queue *)queue;
    const int64_t L = a->cache_len, nparts = (L + LK_CHUNK - 1) / LK_CHUNK;
    if (a->n_head > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_attention: more than 2^31 - 1 heads on CUDA");
    const int64_t hd = a->head_dim;
    if (L > INT32_MAX / 2 || hd > 65536 || att_big_floats(L, hd) > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED,
                       "lk_attention: cache_len %lld with head_dim %lld is too large on CUDA",
                       (long long)L, (long long)hd);
    const int64_t fixed =
        (((hd + 3) & ~(int64_t)3) + ((LK_ATT_WARPS + 2 + 3) & ~3) + ((nparts + 3) & ~(int64_t)3)) * 4;
    const int64_t big = att_big_floats(L, hd) * 4;
    unsigned gy = (unsigned)(a->tokens < 65535 ? a->tokens : 65535);
    unsigned gz = (unsigned)(a->batch < 65535 ? a->batch : 65535);
    const int var = variant();
    if (var != 1 && (a->tokens == 1 || var == 2)) {
        /* the decode kernel, when its shared memory holds a tile of at
         * least 8 keys next to all L scores */
        const int64_t hd4 = (hd + 3) & ~(int64_t)3;
        att_dec_cfg cfg;
        cfg.kst = (int)((hd4 / 4) % 2 == 0 ? hd4 + 4 : hd4);
        const int64_t room = LK_ATT_SMEM_MAX / 4 - att_dec_fixed(L, hd);
        const int64_t kt = room / cfg.kst;
        if (kt >= 8) {
            cfg.kt = (int)(kt < LK_ATT_THREADS ? kt : LK_ATT_THREADS);
            const size_t smem = (size_t)(att_dec_fixed(L, hd) + (int64_t)cfg.kt * cfg.kst) * 4;
            const size_t es = lk_dtype_bytes(a->k.dtype);
            const int64_t w = 16 / (int64_t)es;
            const bool vec = ((uintptr_t)a->k.data & 15) == 0 && a->k.ld % w == 0 &&
                             a->k.batch_stride % w == 0 && hd % w == 0;
            dim3 grid((unsigned)a->n_head, gy, gz);
            LK_FLOAT_SWITCH(a->k.dtype, DK, LK_FLOAT_SWITCH(a->v.dtype, DV, {
                launch_decode<DK, DV>(grid, smem, op.stream(), *a, cfg, vec);
            }));
            return op.launched();
        }
    }
    float *ws = nullptr;
    int64_t smem = fixed + big;
    if (smem > LK_ATT_SMEM_MAX) {
        /* scores in the workspace: as many resident (token, sequence)
         * slices as it holds */
        smem = fixed;
        const int64_t per = a->n_head * big;
        int64_t slices = per > 0 ? (int64_t)(q->ws_bytes / (size_t)per) : 0;
        if (smem > LK_ATT_SMEM_MAX || slices < 1 || ((uintptr_t)q->ws & 15) != 0)
            return op.fail(LK_ERR_UNSUPPORTED,
                           "lk_attention: cache_len %lld with %lld heads needs %lld bytes of "
                           "CUDA workspace (LOCKSTEP_CUDA_WORKSPACE), the queue has %zu",
                           (long long)L, (long long)a->n_head, (long long)per, q->ws_bytes);
        if ((int64_t)gz > slices)
            gz = (unsigned)slices;
        if ((int64_t)gy * gz > slices)
            gy = (unsigned)(slices / gz);
        ws = (float *)q->ws;
    }
    const bool vec = aligned16(a->k) && hd % 4 == 0;
    dim3 grid((unsigned)a->n_head, gy, gz);
    LK_FLOAT_SWITCH(a->k.dtype, DK, LK_FLOAT_SWITCH(a->v.dtype, DV, {
        launch<DK, DV>(grid, (size_t)smem, op.stream(), *a, ws, vec);
    }));
    return op.launched();
}
