/* Lockstep CUDA: causal attention with grouped KV heads, over a contiguous
 * KV cache (lk_attention) or a paged one (lk_attention_paged), in
 * docs/numerics.md section 12.3's chunked order.  Two kernels, shared by
 * both ops (docs/internals/attention.md):
 *
 * att_chunk_kernel  one block per (chunk of 64 keys, query row, KV head):
 *   the chunk's key and value rows are read once for the G = n_head / n_kv
 *   query heads that share them (in batches of up to ATT_HB heads):
 *   - s_j = dot(q, k_j) * scale: one thread per (key, head), each dot the
 *     GEMM contract's KB-blocked fma chain over head_dim, the key row read
 *     ahead of its chain (float4 for aligned f32 caches);
 *   - per head one warp: m_c = maximum (order keys, one redux), e_j =
 *     exp(s_j - m_c), l_c = the 64-lane butterfly (lane l holds e_l and
 *     e_{l+32}: section 5's chunk, its first step inside the thread);
 *   - o_c[d] = the fma chain of e_j v_j,d over the chunk's keys: one
 *     thread per column, all heads of the batch at once (one load of v
 *     feeds G chains);
 *   - m_c, l_c and o_c go to the queue's workspace.
 * att_combine_kernel  one block per (query row, query head): m = maximum
 *   of the m_c; per column, in chunk order, l += l_c w_c and o += o_c w_c
 *   with w_c = exp(m_c - m) (a tile of weights at a time in shared memory,
 *   32 loads of o_c in flight a thread); then o * (1 / l) at the store.
 *
 * att_tile_kernel (below) does the first kernel's work for a tile of query
 * rows at once, the chunk's K and V staged in shared memory; it is used
 * unless LOCKSTEP_CUDA_ATTENTION_V1=1 or head_dim > 256.
 *
 * A decode step at 4096 keys and 5 KV heads is 320 blocks of the first
 * kernel, at 32768 keys 2560: the whole GPU streams the cache, where one
 * block per head could not.  The workspace holds (head_dim + 2) floats per
 * (chunk, query head) for as many (row, KV head) items as fit; more items
 * run as several launch pairs. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/math.cuh"
#include "backends/cuda/model.cuh"
#include "backends/cuda/tc_ptx.cuh"

#define ATT_C 64          /* LK_ATTENTION_CHUNK */
#define ATT_THREADS 128   /* per block of either kernel */
#define ATT_HB 8          /* query heads per pass over a chunk */
#define ATT_HD_MAX 4096   /* q of ATT_HB heads in shared memory: hb * hd <= 8192 */

static_assert(ATT_C == LK_ATTENTION_CHUNK, "the contract's chunk");
static_assert(ATT_C == 64, "a chunk is one warp's two values a lane");

namespace {

/* Everything both kernels need, for either op: query row r is (batch entry
 * r / tokens, token r % tokens) of a contiguous cache (tab == NULL), or
 * sequence seq[r] of a paged one. */
struct att_geom {
    const void *q, *k, *v;
    void *y;
    lk_dtype qdt, ydt;
    int64_t qld, qbs, kld, kbs, vld, vbs, yld, ybs;
    const int32_t *pos, *seq, *tab;
    int64_t pld, pbs, sld, tld, ps;
    int64_t tokens, L; /* contiguous: tokens per batch entry, cache_len */
    int n_head, n_kv, hd, G, hb, nc;
    float scale;
    int64_t item0;     /* first (row, KV head) item of this launch */
    int64_t row0, row_end; /* the tile kernel: rows [row0, row_end) this launch */
    int R, pp, lds;    /* the tile kernel: rows a tile, (row, head) pairs a pass,
                          floats a key row in shared memory */
    float *ws;         /* per item: G * nc * (hd + 2) floats: o, then m, then l */
};

struct att_rowinfo {
    int64_t qi, yi, kb, vb;
    int n;
    const int32_t *trow;
};

__device__ __forceinline__ att_rowinfo att_row(const att_geom &g, int64_t r)
{
    att_rowinfo w;
    if (g.tab == nullptr) {
        const int64_t b = r / g.tokens, t = r % g.tokens;
        const int64_t p = g.pos[b * g.pbs + t * g.pld];
        w.qi = b * g.qbs + t * g.qld;
        w.yi = b * g.ybs + t * g.yld;
        w.kb = b * g.kbs;
        w.vb = b * g.vbs;
        w.n = (int)(p < 0 ? 0 : (p + 1 < g.L ? p + 1 : g.L));
        w.trow = nullptr;
    } else {
        const int64_t p = g.pos[r * g.pld];
        w.qi = r * g.qld;
        w.yi = r * g.yld;
        w.kb = w.vb = 0;
        w.n = (int)(p < 0 ? 0 : p + 1);
        w.trow = g.tab + (int64_t)g.seq[r * g.sld] * g.tld;
    }
    return w;
}

/* The cache row of key j. */
__device__ __forceinline__ int64_t att_key(const att_geom &g, const att_rowinfo &w, int64_t j)
{
    return w.trow ? (int64_t)w.trow[j / g.ps] * g.ps + j % g.ps : j;
}

/* The dot of q (shared memory) with key row kr over [d0, d1), one fma
 * chain in ascending d.  VEC: f32 rows and q aligned to 16 bytes, float4
 * loads, eight in flight before their 32 fmas. */
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

/* Dynamic shared memory of the chunk kernel: q of hb heads (hb * hd,
 * rounded to 4 floats), then e (hb * 64). */
__host__ __device__ __forceinline__ int att_q_floats(int hb, int hd)
{
    return (hb * hd + 3) & ~3;
}

template <lk_dtype DK, lk_dtype DV, bool VEC>
__global__ void __launch_bounds__(ATT_THREADS) att_chunk_kernel(const att_geom g)
{
    typedef typename lk_elem<DK>::T TK;
    typedef typename lk_elem<DV>::T TV;
    extern __shared__ float4 sm4[];
    float *qs = reinterpret_cast<float *>(sm4);
    float *es = qs + att_q_floats(g.hb, g.hd);
    __shared__ int64_t krow[ATT_C], vrow[ATT_C];
    lk_pdl_wait(); /* q, the caches, pos and the table are written by earlier ops */
    lk_pdl_trigger();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t item = g.item0 + blockIdx.y;
    const int64_t r = item / g.n_kv;
    const int kvh = (int)(item % g.n_kv), c = blockIdx.x, hd = g.hd;
    const att_rowinfo w = att_row(g, r);
    const int j0 = c * ATT_C;
    if (j0 >= w.n)
        return; /* the row has fewer chunks (uniform in the block) */
    const int len = w.n - j0 < ATT_C ? w.n - j0 : ATT_C;
    for (int jj = tid; jj < len; jj += ATT_THREADS) {
        const int64_t row = att_key(g, w, j0 + jj);
        krow[jj] = w.kb + row * g.kld + (int64_t)kvh * hd;
        vrow[jj] = w.vb + row * g.vld + (int64_t)kvh * hd;
    }
    const TK *kbase = (const TK *)g.k;
    const TV *vbase = (const TV *)g.v;
    __syncthreads(); /* krow, vrow */
    /* every 128-byte line of the chunk's keys and values asked of L2 at
     * once: the loads below then wait on L2, not on one HBM round trip
     * per batch (a block's 64 KB in flight from its start) */
    {
        const int kl = (int)((hd * sizeof(TK) + 127) / 128), vl = (int)((hd * sizeof(TV) + 127) / 128);
        for (int i = tid; i < len * (kl + vl); i += ATT_THREADS) {
            const int jj = i / (kl + vl), ln = i % (kl + vl);
            const char *p = ln < kl ? (const char *)(kbase + krow[jj]) + ln * 128
                                    : (const char *)(vbase + vrow[jj]) + (ln - kl) * 128;
            asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
        }
    }
    float *wsi = g.ws + (item - g.item0) * (int64_t)g.G * g.nc * (hd + 2);
    float *ws_m = wsi + (int64_t)g.G * g.nc * hd, *ws_l = ws_m + (int64_t)g.G * g.nc;

    for (int hs = 0; hs < g.G; hs += g.hb) {
        const int nh = g.G - hs < g.hb ? g.G - hs : g.hb;
        const int h0 = kvh * g.G + hs; /* first query head of the pass */
        __syncthreads(); /* krow/vrow written; the previous pass's reads of qs, es done */
        for (int i = tid; i < nh * hd; i += ATT_THREADS)
            qs[i] = lk_md_load(g.q, g.qdt, w.qi + (int64_t)h0 * hd + i);
        __syncthreads();
        /* s_j = dot(q_h, k_j) * scale, one thread per (key, head) */
        for (int it = tid; it < nh * len; it += ATT_THREADS) {
            const int h = it / len, jj = it % len;
            const TK *kr = kbase + krow[jj];
            const float *qv = qs + h * hd;
            float total = 0.0f;
            for (int d0 = 0; d0 < hd; d0 += LK_KB) {
                const int d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                const float acc = dot_block<DK, VEC>(qv, kr, d0, d1);
                total = d0 == 0 ? acc : __fadd_rn(total, acc);
            }
            es[h * ATT_C + jj] = __fmul_rn(total, g.scale);
        }
        __syncthreads();
        /* per head, one warp: m_c, e_j = exp(s_j - m_c), l_c */
        for (int h = warp; h < nh; h += ATT_THREADS / 32) {
            float *e = es + h * ATT_C;
            const bool v0 = lane < len, v1 = lane + 32 < len;
            const float s0 = v0 ? e[lane] : 0.0f, s1 = v1 ? e[lane + 32] : 0.0f;
            unsigned mk = lk_order_key(-INFINITY); /* the identity */
            if (v0)
                mk = max(mk, lk_order_key(s0));
            if (v1)
                mk = max(mk, lk_order_key(s1));
            mk = __reduce_max_sync(LK_FULL_MASK, mk);
            const float mc = lk_order_key_value(mk);
            const float e0 = v0 ? lk_cu_exp(__fsub_rn(s0, mc)) : -0.0f;
            const float e1 = v1 ? lk_cu_exp(__fsub_rn(s1, mc)) : -0.0f;
            if (v0)
                e[lane] = e0;
            if (v1)
                e[lane + 32] = e1;
            /* section 5 on one chunk: lane l = e_l, lanes past len -0;
             * the butterfly's first step (l + 32) in the thread */
            float x = __fadd_rn(e0, e1);
#pragma unroll
            for (int s = 16; s >= 1; s >>= 1)
                x = __fadd_rn(x, __shfl_down_sync(LK_FULL_MASK, x, s));
            if (lane == 0) {
                const int64_t si = (int64_t)(hs + h) * g.nc + c;
                ws_m[si] = mc;
                ws_l[si] = x;
            }
        }
        __syncthreads();
        /* o_c[d] = fma chain of e_j v_j,d over the chunk, every head of the
         * pass from one load of v */
        for (int d = tid; d < hd; d += ATT_THREADS) {
            float acc[ATT_HB];
#pragma unroll
            for (int h = 0; h < ATT_HB; h++)
                acc[h] = 0.0f;
            int jj = 0;
            for (; jj + 16 <= len; jj += 16) {
                float vv[16];
#pragma unroll
                for (int u = 0; u < 16; u++)
                    vv[u] = lk_elem<DV>::load(vbase + vrow[jj + u], d);
#pragma unroll
                for (int u = 0; u < 16; u++)
#pragma unroll
                    for (int h = 0; h < ATT_HB; h++)
                        if (h < nh)
                            acc[h] = __fmaf_rn(es[h * ATT_C + jj + u], vv[u], acc[h]);
            }
            for (; jj < len; jj++) {
                const float vv = lk_elem<DV>::load(vbase + vrow[jj], d);
#pragma unroll
                for (int h = 0; h < ATT_HB; h++)
                    if (h < nh)
                        acc[h] = __fmaf_rn(es[h * ATT_C + jj], vv, acc[h]);
            }
#pragma unroll
            for (int h = 0; h < ATT_HB; h++)
                if (h < nh)
                    wsi[((int64_t)(hs + h) * g.nc + c) * hd + d] = acc[h];
        }
    }
}

/* ------------------------------------------------------------ tile kernel
 *
 * att_tile_kernel  one block per (chunk, tile of up to R query rows, KV
 *   head).  The tile's rows are cut into groups of consecutive rows that
 *   read the same keys (one batch entry of a contiguous cache, one
 *   sequence of a paged one); per group the chunk's key and value rows are
 *   loaded once into shared memory (16-byte cp.async for aligned f32
 *   caches, K and V as two groups so the scores start while V lands) and
 *   serve every (row, query head) pair of the group, in passes of up to pp
 *   pairs.  Per pair the arithmetic is att_chunk_kernel's, step for step:
 *   - s_j: one thread per (key, pair), NP pairs a thread sharing each
 *     float4 of the key row; the KB-blocked fma chain in ascending d;
 *   - one warp per pair: m_c, e_j, the 64-lane butterfly (lane l: e_l and
 *     e_{l+32}), over the row's own keys (len = min(64, n - 64c));
 *   - o_c[d]: one thread per (column, NP pairs), the chain over the row's
 *     keys in ascending j, one shared-memory load of v feeding NP chains.
 *   A decode row is a tile of one row: its 64 KB of K and V (128 dims, f32)
 *   all in flight from the block's start, every query head of the KV head
 *   computed from them.  Needs head_dim <= ATT2_HD_MAX. */
#define ATT2_THREADS 256
#define ATT2_PP 32      /* (row, head) pairs a pass */
#define ATT2_RMAX 32    /* rows a tile */
#define ATT2_NP 4       /* pairs a thread shares a load across */
#define ATT2_HD_MAX 256

/* floats of a key row in shared memory: a multiple of 4 (16-byte rows)
 * whose quarter is odd, so 8 threads reading float4 of 8 rows hit 8
 * distinct bank groups */
__host__ __device__ __forceinline__ int att2_lds(int hd)
{
    const int hd4 = (hd + 3) & ~3;
    return ((hd4 >> 2) & 1) ? hd4 : hd4 + 4;
}

__host__ __device__ __forceinline__ size_t att2_smem(int hd, int pp)
{
    const int hd4 = (hd + 3) & ~3;
    return (size_t)(2 * ATT_C * att2_lds(hd) + pp * hd4 + pp * ATT_C) * sizeof(float);
}

__device__ __forceinline__ void att2_cp16(float *dst, const float *src)
{
    const unsigned sa = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(src) : "memory");
}

template <lk_dtype DK, lk_dtype DV, bool VEC>
__global__ void __launch_bounds__(ATT2_THREADS, 3) att_tile_kernel(const att_geom g)
{
    typedef typename lk_elem<DK>::T TK;
    typedef typename lk_elem<DV>::T TV;
    extern __shared__ float4 sm4[];
    const int hd = g.hd, hd4 = (hd + 3) & ~3, lds = g.lds, G = g.G;
    float *Ks = reinterpret_cast<float *>(sm4);
    float *Vs = Ks + ATT_C * lds;
    float *qs = Vs + ATT_C * lds;
    float *es = qs + g.pp * hd4;
    __shared__ int64_t krow[ATT_C], vrow[ATT_C], rqi[ATT2_RMAX], rkey[ATT2_RMAX];
    __shared__ int rn[ATT2_RMAX];
    lk_pdl_wait(); /* q, the caches, pos and the table are written by earlier ops */
    lk_pdl_trigger();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int c = blockIdx.x, kvh = blockIdx.z, j0 = c * ATT_C;
    const int64_t rt0 = g.row0 + (int64_t)blockIdx.y * g.R;
    const int nrows = (int)(g.row_end - rt0 < g.R ? g.row_end - rt0 : g.R);
    if (tid < nrows) {
        const int64_t r = rt0 + tid;
        const att_rowinfo w = att_row(g, r);
        rn[tid] = w.n;
        rqi[tid] = w.qi;
        rkey[tid] = g.tab ? (int64_t)g.seq[r * g.sld] : r / g.tokens;
    }
    const TK *kbase = (const TK *)g.k;
    const TV *vbase = (const TV *)g.v;
    const int64_t per_item = (int64_t)G * g.nc * (hd + 2);
    __syncthreads(); /* rn, rqi, rkey */

    for (int s = 0; s < nrows;) {
        int e = s + 1;
        while (e < nrows && rkey[e] == rkey[s])
            e++;
        int lenmax = 0;
        for (int i = s; i < e; i++) {
            const int l = rn[i] - j0 < ATT_C ? rn[i] - j0 : ATT_C;
            lenmax = l > lenmax ? l : lenmax;
        }
        if (lenmax <= 0) { /* no row of the group reaches the chunk */
            s = e;
            continue;
        }
        const att_rowinfo w = att_row(g, rt0 + s);
        __syncthreads(); /* the previous group's reads of krow, Ks, Vs, qs, es */
        for (int jj = tid; jj < lenmax; jj += ATT2_THREADS) {
            const int64_t row = att_key(g, w, j0 + jj);
            krow[jj] = w.kb + row * g.kld + (int64_t)kvh * hd;
            vrow[jj] = w.vb + row * g.vld + (int64_t)kvh * hd;
        }
        __syncthreads(); /* krow, vrow */
        if (VEC) {
            const int n4 = hd >> 2;
            for (int i = tid; i < lenmax * n4; i += ATT2_THREADS) {
                const int jj = i / n4, x = (i - jj * n4) * 4;
                att2_cp16(Ks + jj * lds + x, (const float *)kbase + krow[jj] + x);
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
            for (int i = tid; i < lenmax * n4; i += ATT2_THREADS) {
                const int jj = i / n4, x = (i - jj * n4) * 4;
                att2_cp16(Vs + jj * lds + x, (const float *)vbase + vrow[jj] + x);
            }
            asm volatile("cp.async.commit_group;" ::: "memory");
        } else {
            for (int i = tid; i < lenmax * hd; i += ATT2_THREADS) {
                const int jj = i / hd, d = i - jj * hd;
                Ks[jj * lds + d] = lk_elem<DK>::load(kbase + krow[jj], d);
                Vs[jj * lds + d] = lk_elem<DV>::load(vbase + vrow[jj], d);
            }
        }
        const int npt = (e - s) * G; /* pairs of the group: pair p = row s + p / G, head p % G */
        for (int p0 = 0; p0 < npt; p0 += g.pp) {
            const int np = npt - p0 < g.pp ? npt - p0 : g.pp;
            if (p0 > 0)
                __syncthreads(); /* the previous pass's reads of qs, es */
            for (int i = tid; i < np * hd; i += ATT2_THREADS) {
                const int p = i / hd, d = i - p * hd, pr = p0 + p;
                const int64_t qoff = rqi[s + pr / G] + (int64_t)(kvh * G + pr % G) * hd;
                qs[p * hd4 + d] = lk_md_load(g.q, g.qdt, qoff + d);
            }
            if (VEC)
                asm volatile("cp.async.wait_group 1;" ::: "memory"); /* K */
            __syncthreads(); /* qs, Ks */
            /* s_j, one thread per (key, pair): key tid % 64, pairs from tid / 64 */
            {
                const int j = tid & (ATT_C - 1), ps = tid / ATT_C;
                const int pstep = ATT2_THREADS / ATT_C;
                if (j < lenmax)
                    for (int pb = ps; pb < np; pb += pstep * ATT2_NP) {
                        float tot[ATT2_NP];
#pragma unroll
                        for (int k = 0; k < ATT2_NP; k++)
                            tot[k] = 0.0f;
                        for (int d0 = 0; d0 < hd; d0 += LK_KB) {
                            const int d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                            float acc[ATT2_NP];
#pragma unroll
                            for (int k = 0; k < ATT2_NP; k++)
                                acc[k] = 0.0f;
                            if (VEC) {
                                for (int d = d0; d < d1; d += 4) {
                                    const float4 kk = *reinterpret_cast<const float4 *>(Ks + j * lds + d);
#pragma unroll
                                    for (int k = 0; k < ATT2_NP; k++) {
                                        const int p = pb + k * pstep;
                                        if (p < np) {
                                            const float4 qq = *reinterpret_cast<const float4 *>(qs + p * hd4 + d);
                                            acc[k] = __fmaf_rn(qq.x, kk.x, acc[k]);
                                            acc[k] = __fmaf_rn(qq.y, kk.y, acc[k]);
                                            acc[k] = __fmaf_rn(qq.z, kk.z, acc[k]);
                                            acc[k] = __fmaf_rn(qq.w, kk.w, acc[k]);
                                        }
                                    }
                                }
                            } else {
                                for (int d = d0; d < d1; d++) {
                                    const float kk = Ks[j * lds + d];
#pragma unroll
                                    for (int k = 0; k < ATT2_NP; k++) {
                                        const int p = pb + k * pstep;
                                        if (p < np)
                                            acc[k] = __fmaf_rn(qs[p * hd4 + d], kk, acc[k]);
                                    }
                                }
                            }
#pragma unroll
                            for (int k = 0; k < ATT2_NP; k++)
                                tot[k] = d0 == 0 ? acc[k] : __fadd_rn(tot[k], acc[k]);
                        }
#pragma unroll
                        for (int k = 0; k < ATT2_NP; k++) {
                            const int p = pb + k * pstep;
                            if (p < np)
                                es[p * ATT_C + j] = __fmul_rn(tot[k], g.scale);
                        }
                    }
            }
            __syncthreads(); /* es */
            /* per pair, one warp: m_c, e_j = exp(s_j - m_c), l_c */
            for (int p = warp; p < np; p += ATT2_THREADS / 32) {
                const int pr = p0 + p, ri = s + pr / G;
                const int len = rn[ri] - j0 < ATT_C ? rn[ri] - j0 : ATT_C;
                if (len <= 0)
                    continue; /* the row ends before the chunk (uniform in the warp) */
                float *ep = es + p * ATT_C;
                const bool v0 = lane < len, v1 = lane + 32 < len;
                const float s0 = v0 ? ep[lane] : 0.0f, s1 = v1 ? ep[lane + 32] : 0.0f;
                unsigned mk = lk_order_key(-INFINITY);
                if (v0)
                    mk = max(mk, lk_order_key(s0));
                if (v1)
                    mk = max(mk, lk_order_key(s1));
                mk = __reduce_max_sync(LK_FULL_MASK, mk);
                const float mc = lk_order_key_value(mk);
                const float e0 = v0 ? lk_cu_exp(__fsub_rn(s0, mc)) : -0.0f;
                const float e1 = v1 ? lk_cu_exp(__fsub_rn(s1, mc)) : -0.0f;
                if (v0)
                    ep[lane] = e0;
                if (v1)
                    ep[lane + 32] = e1;
                float x = __fadd_rn(e0, e1);
#pragma unroll
                for (int sh = 16; sh >= 1; sh >>= 1)
                    x = __fadd_rn(x, __shfl_down_sync(LK_FULL_MASK, x, sh));
                if (lane == 0) {
                    const int64_t item = (rt0 + ri) * g.n_kv + kvh - g.item0;
                    float *ws_m = g.ws + item * per_item + (int64_t)G * g.nc * hd;
                    const int64_t si = (int64_t)(pr % G) * g.nc + c;
                    ws_m[si] = mc;
                    ws_m[(int64_t)G * g.nc + si] = x;
                }
            }
            if (VEC)
                asm volatile("cp.async.wait_group 0;" ::: "memory"); /* V */
            __syncthreads(); /* es holds e_j; Vs */
            /* o_c[d]: one thread per (column, ATT2_NP consecutive pairs) */
            {
                const int npb = (np + ATT2_NP - 1) / ATT2_NP;
                for (int it = tid; it < hd * npb; it += ATT2_THREADS) {
                    const int pb = it / hd, d = it - pb * hd;
                    int len[ATT2_NP], lmx = 0;
                    float acc[ATT2_NP];
#pragma unroll
                    for (int k = 0; k < ATT2_NP; k++) {
                        const int p = pb * ATT2_NP + k, ri = s + (p0 + p) / G;
                        len[k] = 0;
                        if (p < np)
                            len[k] = rn[ri] - j0 < ATT_C ? rn[ri] - j0 : ATT_C;
                        lmx = len[k] > lmx ? len[k] : lmx;
                        acc[k] = 0.0f;
                    }
                    for (int jj = 0; jj < lmx; jj++) {
                        const float vv = Vs[jj * lds + d];
#pragma unroll
                        for (int k = 0; k < ATT2_NP; k++)
                            if (jj < len[k])
                                acc[k] = __fmaf_rn(es[(pb * ATT2_NP + k) * ATT_C + jj], vv, acc[k]);
                    }
#pragma unroll
                    for (int k = 0; k < ATT2_NP; k++)
                        if (len[k] > 0) {
                            const int pr = p0 + pb * ATT2_NP + k, ri = s + pr / G;
                            const int64_t item = (rt0 + ri) * g.n_kv + kvh - g.item0;
                            g.ws[item * per_item + ((int64_t)(pr % G) * g.nc + c) * hd + d] = acc[k];
                        }
                }
            }
        }
        s = e;
    }
}

/* One block per (item, query head of its group): the chunks in order.
 * The chain of additions is the contract's and serial; what is not is
 * made parallel: the block computes a tile of weights w_c (-1 marks a
 * skipped chunk: a weight is never negative) into shared memory, and each
 * thread loads 32 chunks' o_c ahead of its 32 additions. */
#define ATT_CT 1024 /* chunks a tile */
#define ATT_CB 32   /* o_c loads in flight a thread */

__global__ void __launch_bounds__(ATT_THREADS) att_combine_kernel(const att_geom g)
{
    __shared__ unsigned redk[ATT_THREADS / 32];
    __shared__ float wsm[ATT_CT], lsm[ATT_CT];
    lk_pdl_wait(); /* the chunk kernel's states */
    lk_pdl_trigger();
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, hd = g.hd;
    const int64_t item = g.item0 + blockIdx.x;
    const int64_t r = item / g.n_kv;
    const int kvh = (int)(item % g.n_kv), hg = blockIdx.y, h = kvh * g.G + hg;
    const att_rowinfo w = att_row(g, r);
    const int64_t yi = w.yi + (int64_t)h * hd;
    if (w.n == 0) {
        for (int d = tid; d < hd; d += ATT_THREADS)
            lk_md_store(g.y, g.ydt, yi + d, 0.0f);
        return;
    }
    const int nc = (w.n + ATT_C - 1) / ATT_C;
    const float *wsi = g.ws + (item - g.item0) * (int64_t)g.G * g.nc * (hd + 2);
    const float *o_c = wsi + (int64_t)hg * g.nc * hd;
    const float *m_c = wsi + (int64_t)g.G * g.nc * hd + (int64_t)hg * g.nc;
    const float *l_c = m_c + (int64_t)g.G * g.nc;
    /* m = maximum of the m_c (exact in any order) */
    unsigned mk = lk_order_key(-INFINITY);
    for (int c = tid; c < nc; c += ATT_THREADS)
        mk = max(mk, lk_order_key(m_c[c]));
    mk = __reduce_max_sync(LK_FULL_MASK, mk);
    if (lane == 0)
        redk[warp] = mk;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < ATT_THREADS / 32; i++)
        mk = max(mk, redk[i]);
    const float m = lk_order_key_value(mk);
    for (int d0 = 0; d0 < hd; d0 += ATT_THREADS) {
        const int d = d0 + tid;
        float l = -0.0f, o = -0.0f;
        for (int c0 = 0; c0 < nc; c0 += ATT_CT) {
            const int cn = nc - c0 < ATT_CT ? nc - c0 : ATT_CT;
            __syncthreads(); /* the previous tile's reads */
            for (int i = tid; i < cn; i += ATT_THREADS) {
                const float mc = m_c[c0 + i];
                wsm[i] = mc == -INFINITY && m != -INFINITY ? -1.0f
                                                           : lk_cu_exp(__fsub_rn(mc, m));
                lsm[i] = l_c[c0 + i];
            }
            __syncthreads();
            for (int i0 = 0; i0 < cn; i0 += ATT_CB) {
                float ov[ATT_CB];
#pragma unroll
                for (int u = 0; u < ATT_CB; u++)
                    ov[u] = d < hd && i0 + u < cn ? o_c[(int64_t)(c0 + i0 + u) * hd + d] : 0.0f;
#pragma unroll
                for (int u = 0; u < ATT_CB; u++) {
                    if (i0 + u >= cn)
                        break;
                    const float wc = wsm[i0 + u];
                    if (wc < 0.0f)
                        continue; /* every score of the chunk -Inf */
                    l = __fadd_rn(l, __fmul_rn(lsm[i0 + u], wc));
                    o = __fadd_rn(o, __fmul_rn(ov[u], wc));
                }
            }
        }
        if (d < hd)
            lk_md_store(g.y, g.ydt, yi + d, __fmul_rn(o, __fdiv_rn(1.0f, l)));
    }
}

template <lk_dtype DK, lk_dtype DV>
void launch_chunks(dim3 grid, size_t smem, cudaStream_t st, const att_geom &g, bool vec)
{
    if (vec)
        lk_launch(att_chunk_kernel<DK, DV, DK == LK_F32>, grid, ATT_THREADS, smem, st, g);
    else
        lk_launch(att_chunk_kernel<DK, DV, false>, grid, ATT_THREADS, smem, st, g);
}

template <lk_dtype DK, lk_dtype DV>
cudaError_t launch_tiles(dim3 grid, size_t smem, cudaStream_t st, const att_geom &g, bool vec,
                         int ordinal)
{
    const size_t most = att2_smem(ATT2_HD_MAX, ATT2_PP);
    cudaError_t e;
    if (vec && DK == LK_F32 && DV == LK_F32) {
        e = lk_smem_optin<att_tile_kernel<DK, DV, DK == LK_F32 && DV == LK_F32> >(ordinal, most);
        if (e == cudaSuccess)
            lk_launch(att_tile_kernel<DK, DV, DK == LK_F32 && DV == LK_F32>, grid, ATT2_THREADS,
                      smem, st, g);
    } else {
        e = lk_smem_optin<att_tile_kernel<DK, DV, false> >(ordinal, most);
        if (e == cudaSuccess)
            lk_launch(att_tile_kernel<DK, DV, false>, grid, ATT2_THREADS, smem, st, g);
    }
    return e;
}

/* LOCKSTEP_CUDA_ATTENTION_V1=1 (read at every call): the one-row chunk
 * kernel only, as a fallback and for comparison (tests/test_attention
 * runs both). */
bool att_v1()
{
    const char *e = getenv("LOCKSTEP_CUDA_ATTENTION_V1");
    return e && *e && strcmp(e, "0") != 0;
}

/* Both ops: rows x n_kv items, in launch pairs of as many items as the
 * workspace holds.  keys: the most keys a row sees.  R: rows a tile of
 * the tile kernel (1 for rows that never share keys). */
lk_status att_run(lk_op_scope &op, const lk_cuda_queue *q, att_geom g, int64_t rows,
                  int64_t keys, lk_dtype kdt, lk_dtype vdt, bool vec, const char *fn, int R,
                  bool vec2)
{
    if (keys < 1 || rows < 1)
        keys = 1;
    const int64_t nc = (keys + ATT_C - 1) / ATT_C;
    if (g.hd > ATT_HD_MAX || nc > INT32_MAX / 2 || g.n_kv > 65535 || g.G > 65535)
        return op.fail(LK_ERR_UNSUPPORTED, "%s: head_dim %d, %lld keys or %d KV heads are too "
                       "many on CUDA", fn, g.hd, (long long)keys, g.n_kv);
    g.nc = (int)nc;
    g.hb = g.G < ATT_HB ? g.G : ATT_HB;
    while (g.hb > 1 && g.hb * g.hd > 2 * ATT_HD_MAX)
        g.hb--;
    const int64_t per = (int64_t)g.G * nc * (g.hd + 2) * (int64_t)sizeof(float);
    const int64_t cap = per > 0 ? (int64_t)(q->ws_bytes / (size_t)per) : 0;
    if (cap < 1 || ((uintptr_t)q->ws & 15) != 0)
        return op.fail(LK_ERR_UNSUPPORTED,
                       "%s: %lld keys with %d heads a KV head need %lld bytes of CUDA workspace "
                       "(LOCKSTEP_CUDA_WORKSPACE), the queue has %zu",
                       fn, (long long)keys, g.G, (long long)per, q->ws_bytes);
    g.ws = (float *)q->ws;
    if (g.hd <= ATT2_HD_MAX && cap >= g.n_kv && !att_v1()) {
        /* the tile kernel: launches of whole rows (all their KV heads) */
        R = R < 1 ? 1 : R > ATT2_RMAX ? ATT2_RMAX : R;
        g.R = R;
        g.pp = R * g.G < ATT2_PP ? R * g.G : ATT2_PP;
        g.lds = att2_lds(g.hd);
        int64_t rpl = cap / g.n_kv;
        if (rpl > (int64_t)65535 * R)
            rpl = (int64_t)65535 * R;
        if (rpl >= R)
            rpl -= rpl % R; /* rows a launch: whole tiles */
        const size_t smem2 = att2_smem(g.hd, g.pp);
        for (int64_t r0 = 0; r0 < rows; r0 += rpl) {
            const int64_t nr = rows - r0 < rpl ? rows - r0 : rpl;
            g.row0 = r0;
            g.row_end = r0 + nr;
            g.item0 = r0 * g.n_kv;
            cudaError_t e = cudaSuccess;
            LK_FLOAT_SWITCH(kdt, DK, LK_FLOAT_SWITCH(vdt, DV, {
                e = launch_tiles<DK, DV>(dim3((unsigned)nc, (unsigned)((nr + R - 1) / R),
                                              (unsigned)g.n_kv),
                                         smem2, op.stream(), g, vec2, q->dev->ordinal);
            }));
            if (e != cudaSuccess)
                return op.fail(LK_ERR_DRIVER, "%s: shared memory of the attention kernel: %s",
                               fn, cudaGetErrorString(e));
            lk_launch(att_combine_kernel, dim3((unsigned)(nr * g.n_kv), (unsigned)g.G),
                      ATT_THREADS, 0, op.stream(), g);
        }
        return op.launched();
    }
    const int64_t items = rows * g.n_kv;
    const int64_t step = cap < 65535 ? cap : 65535;
    const size_t smem = (size_t)(att_q_floats(g.hb, g.hd) + g.hb * ATT_C) * sizeof(float);
    for (int64_t i0 = 0; i0 < items; i0 += step) {
        const int64_t ni = items - i0 < step ? items - i0 : step;
        g.item0 = i0;
        LK_FLOAT_SWITCH(kdt, DK, LK_FLOAT_SWITCH(vdt, DV, {
            launch_chunks<DK, DV>(dim3((unsigned)nc, (unsigned)ni), smem, op.stream(), g, vec);
        }));
        lk_launch(att_combine_kernel, dim3((unsigned)ni, (unsigned)g.G), ATT_THREADS, 0,
                  op.stream(), g);
    }
    return op.launched();
}

bool vec_ok(const void *k, int64_t kld, int64_t kbs, int hd, lk_dtype kdt)
{
    return kdt == LK_F32 && ((uintptr_t)k & 15) == 0 && kld % 4 == 0 && kbs % 4 == 0 &&
           hd % 4 == 0;
}

/* The paged write: one block per row, its key and value rows copied. */
template <typename T>
__global__ void __launch_bounds__(ATT_THREADS) kv_write_kernel(lk_kv_write_paged_args a)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const int64_t r = blockIdx.x;
    /* the last row naming the same slot wins: an earlier one skips */
    const int32_t *pos = (const int32_t *)a.pos.data, *seq = (const int32_t *)a.seq.data;
    const int64_t j = pos[r * a.pos.ld], s = seq[r * a.seq.ld];
    for (int64_t r2 = r + 1; r2 < a.rows; r2++)
        if (pos[r2 * a.pos.ld] == j && seq[r2 * a.seq.ld] == s)
            return;
    const int32_t *tab = (const int32_t *)a.table.data;
    const int64_t row = (int64_t)tab[s * a.table.ld + j / a.page_size] * a.page_size +
                        j % a.page_size;
    const T *kn = (const T *)a.k_new.data + r * a.k_new.ld;
    const T *vn = (const T *)a.v_new.data + r * a.v_new.ld;
    T *kd = (T *)a.k.data + row * a.k.ld, *vd = (T *)a.v.data + row * a.v.ld;
    for (int64_t c = threadIdx.x; c < a.k_new.cols; c += ATT_THREADS) {
        kd[c] = kn[c];
        vd[c] = vn[c];
    }
}

} // namespace

extern "C" lk_status lk_cuda_attention(void *queue, const lk_attention_args *a)
{
    lk_op_scope op(queue, "lk_attention");
    if (!op.ok())
        return op.status();
    const lk_cuda_queue *q = (const lk_cuda_queue *)queue;
    if (a->head_dim > ATT_HD_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_attention: head_dim %lld is too large on CUDA",
                       (long long)a->head_dim);
    att_geom g;
    memset(&g, 0, sizeof g);
    g.q = a->q.data, g.k = a->k.data, g.v = a->v.data, g.y = a->y.data;
    g.qdt = a->q.dtype, g.ydt = a->y.dtype;
    g.qld = a->q.ld, g.qbs = a->q.batch_stride;
    g.kld = a->k.ld, g.kbs = a->k.batch_stride;
    g.vld = a->v.ld, g.vbs = a->v.batch_stride;
    g.yld = a->y.ld, g.ybs = a->y.batch_stride;
    g.pos = (const int32_t *)a->pos.data, g.pld = a->pos.ld, g.pbs = a->pos.batch_stride;
    g.seq = nullptr, g.tab = nullptr, g.sld = g.tld = 0, g.ps = 1;
    g.tokens = a->tokens, g.L = a->cache_len;
    g.n_head = (int)a->n_head, g.n_kv = (int)a->n_kv, g.hd = (int)a->head_dim;
    g.G = (int)(a->n_head / a->n_kv);
    g.scale = a->scale;
    const bool vec = vec_ok(a->k.data, a->k.ld, a->k.batch_stride, g.hd, a->k.dtype);
    const bool vec2 = vec && vec_ok(a->v.data, a->v.ld, a->v.batch_stride, g.hd, a->v.dtype);
    /* tiles of the tokens of one batch entry (they read the same keys) */
    const int R = a->tokens > 1 ? (g.G < ATT2_PP ? ATT2_PP / g.G : 1) : 1;
    return att_run(op, q, g, a->batch * a->tokens, a->cache_len, a->k.dtype, a->v.dtype, vec,
                   "lk_attention", R, vec2);
}

extern "C" lk_status lk_cuda_attention_paged(void *queue, const lk_attention_paged_args *a)
{
    lk_op_scope op(queue, "lk_attention_paged");
    if (!op.ok())
        return op.status();
    const lk_cuda_queue *q = (const lk_cuda_queue *)queue;
    if (a->head_dim > ATT_HD_MAX)
        return op.fail(LK_ERR_UNSUPPORTED,
                       "lk_attention_paged: head_dim %lld is too large on CUDA",
                       (long long)a->head_dim);
    att_geom g;
    memset(&g, 0, sizeof g);
    g.q = a->q.data, g.k = a->k.data, g.v = a->v.data, g.y = a->y.data;
    g.qdt = a->q.dtype, g.ydt = a->y.dtype;
    g.qld = a->q.ld, g.kld = a->k.ld, g.vld = a->v.ld, g.yld = a->y.ld;
    g.pos = (const int32_t *)a->pos.data, g.pld = a->pos.ld;
    g.seq = (const int32_t *)a->seq.data, g.sld = a->seq.ld;
    g.tab = (const int32_t *)a->table.data, g.tld = a->table.ld, g.ps = a->page_size;
    g.tokens = 1, g.L = 0;
    g.n_head = (int)a->n_head, g.n_kv = (int)a->n_kv, g.hd = (int)a->head_dim;
    g.G = (int)(a->n_head / a->n_kv);
    g.scale = a->scale;
    const bool vec = vec_ok(a->k.data, a->k.ld, 0, g.hd, a->k.dtype);
    const bool vec2 = vec && vec_ok(a->v.data, a->v.ld, 0, g.hd, a->v.dtype);
    /* more rows than sequences: some rows share a sequence (prefill
     * chunks), tiles pay; otherwise one row a tile (a decode batch) */
    const int R = a->rows > a->table.rows ? (g.G < ATT2_PP ? ATT2_PP / g.G : 1) : 1;
    return att_run(op, q, g, a->rows, a->max_keys, a->k.dtype, a->v.dtype, vec,
                   "lk_attention_paged", R, vec2);
}

extern "C" lk_status lk_cuda_kv_write_paged(void *queue, const lk_kv_write_paged_args *a)
{
    lk_op_scope op(queue, "lk_kv_write_paged");
    if (!op.ok())
        return op.status();
    if (a->rows > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_kv_write_paged: too many rows on CUDA");
    const dim3 grid((unsigned)a->rows);
    if (lk_dtype_bytes(a->k.dtype) == 4)
        lk_launch(kv_write_kernel<uint32_t>, grid, ATT_THREADS, 0, op.stream(), *a);
    else
        lk_launch(kv_write_kernel<uint16_t>, grid, ATT_THREADS, 0, op.stream(), *a);
    return op.launched();
}
