/* Lockstep CUDA driver (internal): one row per group of warps, for the ops
 * that work row by row (reductions, norms, softmax, quantisation).
 *
 * A block holds `groups` groups of `nw` warps; each group takes one row at
 * a time.  Short rows (n <= 1024) get one warp each, four to a block; longer
 * rows get a block of 4 to 8 warps.  A row that fits is cached in shared
 * memory as f32, so it is read from global memory once however many passes
 * its op makes (one pass per row, as the contract allows).  Sums follow
 * numerics.md section 5 through lk_group_row_sum; maximum, minimum and
 * argmax are order-free and reduce in any order. */
#ifndef LK_CUDA_ROWS_CUH
#define LK_CUDA_ROWS_CUH

#include "backends/cuda/device.cuh"

/* dynamic shared memory per block stays under the default limit, so no
 * kernel needs an opt-in attribute (which could not be set under graph
 * capture) */
#define LK_ROWS_SMEM_MAX (48 * 1024)
#define LK_ROWS_MISC 32 /* floats of scratch per group */
#define LK_ROWS_THREADS_MAX 256
/* rows up to 2^36 terms: three levels of partials */
#define LK_ROW_MAX ((int64_t)1 << 36)

static inline int64_t lk_round4(int64_t v) { return (v + 3) & ~(int64_t)3; }

/* How a kernel lays out its rows; passed to the kernel by value. */
struct lk_rows_cfg {
    int nw;               /* warps per group */
    int groups;           /* groups per block */
    int cache;            /* 1: the row is cached as f32 */
    int64_t cache_n;      /* floats of cache per group */
    int64_t p1_n, p2_n;   /* floats of chunk partials per group */
    int64_t group_floats; /* all of a group's floats, a multiple of 4 */
    size_t smem;          /* bytes per block */
    unsigned grid;
    unsigned threads;
};

/* n >= 1 terms per row; want_cache: the op reads its row more than once. */
static inline lk_rows_cfg lk_rows_plan(int64_t rows, int64_t n, bool want_cache)
{
    lk_rows_cfg c;
    int64_t C = (n + LK_CHUNK - 1) / LK_CHUNK;
    int64_t S = (C + LK_CHUNK - 1) / LK_CHUNK;
    c.p1_n = lk_round4(C < LK_CHUNK ? C : LK_CHUNK);
    c.p2_n = lk_round4(S);
    if (n <= 1024) {
        c.nw = 1;
        c.groups = 4;
    } else {
        c.nw = C < 4 ? 4 : C > 8 ? 8 : (int)C;
        c.groups = 1;
    }
    int64_t fixed = c.p1_n + c.p2_n + LK_ROWS_MISC;
    int64_t cn = lk_round4(n);
    c.cache = want_cache && (cn + fixed) * 4 * c.groups <= LK_ROWS_SMEM_MAX;
    c.cache_n = c.cache ? cn : 0;
    c.group_floats = c.cache_n + fixed;
    c.smem = (size_t)(c.group_floats * 4 * c.groups);
    c.grid = lk_grid_cap((rows + c.groups - 1) / c.groups, (int64_t)1 << 20);
    c.threads = (unsigned)(c.nw * c.groups * LK_WARP);
    return c;
}

/* A thread's view of its group. */
struct lk_group {
    int nw, warp, lane, tid, nthreads, index;
    float *cache; /* NULL when the row is not cached */
    float *p1, *p2, *misc;
    __device__ __forceinline__ void sync() const
    {
        if (nw > 1)
            __syncthreads(); /* nw > 1 only with one group per block */
        else
            __syncwarp();
    }
};

static __device__ __forceinline__ lk_group lk_group_make(const lk_rows_cfg &c, float *smem)
{
    lk_group g;
    int w = threadIdx.x / LK_WARP;
    g.nw = c.nw;
    g.index = w / c.nw;
    g.warp = w % c.nw;
    g.lane = threadIdx.x & (LK_WARP - 1);
    g.tid = g.warp * LK_WARP + g.lane;
    g.nthreads = c.nw * LK_WARP;
    float *base = smem + (int64_t)g.index * c.group_floats;
    g.cache = c.cache ? base : nullptr;
    g.p1 = base + c.cache_n;
    g.p2 = g.p1 + c.p1_n;
    g.misc = g.p2 + c.p2_n;
    return g;
}

/* The shared memory of a row kernel (float4 for the cache's alignment). */
#define LK_ROWS_SMEM(name)                                                                   \
    extern __shared__ float4 lk_rows_smem4_[];                                              \
    float *name = reinterpret_cast<float *>(lk_rows_smem4_)

/* Row r of group g over the grid: for (LK_ROWS_FOR(c, g, r, rows)) { ... } */
#define LK_ROWS_FOR(c, g, r, rows)                                                           \
    int64_t r = (int64_t)blockIdx.x * (c).groups + (g).index; r < (rows);                  \
    r += (int64_t)gridDim.x * (c).groups

/* The lane sum of a row of n >= 1 terms (n <= LK_ROW_MAX) by group g,
 * returned to every thread of the group.  Chunk partials of a superchunk
 * (4096 chunks) go to p1, each superchunk's partial to p2: that is the
 * contract's tree (numerics.md section 5 step 4) — the chunk partials form
 * a row whose chunks are the superchunks, and their partials form the next
 * row.  A level of one term is that term (lanes of -0 add nothing). */
template <bool SQ, class Src>
static __device__ __forceinline__ float lk_group_row_sum(const lk_group &g, const Src &src, int64_t n)
{
    const int64_t C = (n + LK_CHUNK - 1) / LK_CHUNK;
    const int64_t S = (C + LK_CHUNK - 1) / LK_CHUNK;
    for (int64_t s = 0; s < S; s++) {
        const int64_t c0 = s * LK_CHUNK;
        const int64_t c1 = C < c0 + LK_CHUNK ? C : c0 + LK_CHUNK;
        for (int64_t c = c0 + g.warp; c < c1; c += g.nw) {
            const int64_t base = c * LK_CHUNK;
            const int len = n - base < LK_CHUNK ? (int)(n - base) : LK_CHUNK;
            float v = lk_warp_chunk<SQ>(src, base, len);
            if (g.lane == 0)
                g.p1[c - c0] = v;
        }
        g.sync();
        if (g.warp == 0) {
            const int cnt = (int)(c1 - c0);
            float v = cnt == 1 ? g.p1[0] : lk_warp_chunk<false>(lk_f32_src{g.p1}, 0, cnt);
            if (g.lane == 0)
                g.p2[s] = v;
        }
        g.sync();
    }
    float result;
    if (S == 1) {
        result = g.p2[0];
    } else {
        if (g.warp == 0) {
            float v = lk_warp_chunk<false>(lk_f32_src{g.p2}, 0, (int)S);
            if (g.lane == 0)
                g.misc[0] = v;
        }
        g.sync();
        result = g.misc[0];
    }
    /* the caller may refill p1/p2/misc right away */
    g.sync();
    return result;
}

/* An order-free reduction (maximum, minimum) of one value per thread,
 * returned to every thread of the group. */
template <class Op>
static __device__ __forceinline__ float lk_group_reduce(const lk_group &g, float v, Op op)
{
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
        v = op(v, __shfl_xor_sync(LK_FULL_MASK, v, d));
    if (g.nw == 1)
        return v;
    if (g.lane == 0)
        g.misc[1 + g.warp] = v;
    g.sync();
    float r = g.misc[1];
    for (int w = 1; w < g.nw; w++)
        r = op(r, g.misc[1 + w]);
    g.sync();
    return r;
}

struct lk_op_maximum {
    __device__ __forceinline__ float operator()(float a, float b) const { return lk_maximum(a, b); }
};
struct lk_op_minimum {
    __device__ __forceinline__ float operator()(float a, float b) const { return lk_minimum(a, b); }
};

/* Widen row xr (n elements of DX) into the group's cache. */
template <lk_dtype DX, bool VEC>
static __device__ __forceinline__ void lk_row_to_cache(const lk_group &g, const typename lk_elem<DX>::T *xr,
                                       int64_t n)
{
    int64_t i0 = 0;
    if (VEC) {
        const int64_t n4 = n >> 2;
        float4 *c4 = reinterpret_cast<float4 *>(g.cache);
        for (int64_t v = g.tid; v < n4; v += g.nthreads)
            c4[v] = lk_elem<DX>::load4s(xr, 4 * v); /* read once: evict first */
        i0 = n4 << 2;
    }
    for (int64_t i = i0 + g.tid; i < n; i += g.nthreads)
        g.cache[i] = lk_elem<DX>::load(xr, i);
}

/* Apply f(x) in place to every element of the cache. */
template <class F> static __device__ __forceinline__ void lk_cache_apply(const lk_group &g, int64_t n, F f)
{
    for (int64_t i = g.tid; i < n; i += g.nthreads)
        g.cache[i] = f(g.cache[i]);
}

/* y_i = f(i, x_i) for a whole row, x_i from the cache when there is one
 * (else from xr), stored as DY.  VEC: rows of x and y start 4-element
 * aligned, so four elements move as one access. */
template <lk_dtype DX, lk_dtype DY, bool VEC, class F>
static __device__ __forceinline__ void lk_row_map(const lk_group &g, const typename lk_elem<DX>::T *xr,
                                  typename lk_elem<DY>::T *yr, int64_t n, F f)
{
    int64_t i0 = 0;
    if (VEC) {
        const int64_t n4 = n >> 2;
        for (int64_t v = g.tid; v < n4; v += g.nthreads) {
            const int64_t i = 4 * v;
            float4 x = g.cache ? reinterpret_cast<const float4 *>(g.cache)[v]
                               : lk_elem<DX>::load4(xr, i);
            lk_elem<DY>::store4s(yr, i,
                                 make_float4(f(i, x.x), f(i + 1, x.y), f(i + 2, x.z),
                                             f(i + 3, x.w)));
        }
        i0 = n4 << 2;
    }
    for (int64_t i = i0 + g.tid; i < n; i += g.nthreads) {
        float x = g.cache ? g.cache[i] : lk_elem<DX>::load(xr, i);
        lk_elem<DY>::store(yr, i, f(i, x));
    }
}

/* Order-free reduction of f(x_i) over a row, from the cache or xr. */
template <lk_dtype DX, class F, class Op>
static __device__ __forceinline__ float lk_row_fold(const lk_group &g, const typename lk_elem<DX>::T *xr,
                                    int64_t n, float init, F f, Op op)
{
    float v = init;
    if (g.cache) {
        for (int64_t i = g.tid; i < n; i += g.nthreads)
            v = op(v, f(g.cache[i]));
    } else {
        for (int64_t i = g.tid; i < n; i += g.nthreads)
            v = op(v, f(lk_elem<DX>::load(xr, i)));
    }
    return lk_group_reduce(g, v, op);
}

/* Terms f(c_i) of a cached row. */
template <class F> struct lk_cache_src {
    const float *p;
    F f;
    __device__ __forceinline__ float operator()(int64_t i) const { return f(p[i]); }
    __device__ __forceinline__ float2 pair(int64_t i) const
    {
        float2 v = *reinterpret_cast<const float2 *>(p + i);
        return make_float2(f(v.x), f(v.y));
    }
};

/* Lane sum (SQ: sum of squares) of the row's terms: fc(cache_i) when the
 * row is cached, fg(x_i) from the global row otherwise.  The two differ
 * when a pass has already transformed the cache in place. */
template <bool SQ, lk_dtype DX, bool VEC, class FC, class FG>
static __device__ __forceinline__ float lk_row_sum(const lk_group &g, const typename lk_elem<DX>::T *xr,
                                   int64_t n, FC fc, FG fg)
{
    if (g.cache)
        return lk_group_row_sum<SQ>(g, lk_cache_src<FC>{g.cache, fc}, n);
    return lk_group_row_sum<SQ>(g, lk_row_src<DX, VEC, FG>{xr, fg}, n);
}

/* Launch helper: a row kernel with its configuration. */
#define LK_ROWS_LAUNCH(kernel, c, stream, ...)                                               \
    kernel<<<(c).grid, (c).threads, (c).smem, (stream)>>>(__VA_ARGS__)
/* The same through lk_launch (launch.cuh), for a kernel that calls
 * lk_pdl_wait() first. */
#define LK_ROWS_PDL_LAUNCH(kernel, c, stream, ...)                                           \
    lk_launch(kernel, (c).grid, (c).threads, (c).smem, (stream), __VA_ARGS__)

#endif
