/* Lockstep CUDA driver (internal): what the int8 wgmma kernels share
 * (wq_kernel, wr_kernel: wgmma_int8.cu): the k slice, the kernel arguments,
 * and the epilogue, lk_qgemm_store's arithmetic from the accumulators. */
#ifndef LK_CUDA_TC_WGMMA_INT_CUH
#define LK_CUDA_TC_WGMMA_INT_CUH

#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc/wgmma_ptx.cuh"

#define WQ_BK 128       /* bytes of k per slice: one swizzle row */

namespace {

struct wq_kargs {
    lk_qgemm_args q;
    int64_t tiles_m, tiles_n, ktiles;
    int split; /* weights-as-A kernel: 1, or blocks per tile (a cluster), each a part of K */
};

#if LK_WG_BODY
/* The integer kernels' epilogue (lk_qgemm_store's arithmetic, the same
 * steps as every other int kernel).  Unrolled per accumulator with its
 * branches on y's dtype, the scales and LK_GEMM_ACCUMULATE, and with each
 * element's scale loaded after the previous element's store (a load may
 * not move above a store that may alias it), it was 80-190 KiB of machine
 * code per kernel and took as long as the K loop (512x2560x2560: 12.6 of
 * 26.3 us).  Now the common case (scales, f32 y, no accumulate) takes the
 * tile's per-column scales from shared memory (staged before the K loop)
 * and stores straight from the accumulators; everything else goes eight
 * elements at a time to code that is there once, its loads first. */

/* Eight elements: j at (r + 8 ((j / 2) % 2), s + 8 (j / 4) + j % 2) as
 * (m, n), or as (n, m) when tr (the weights-as-A kernel's y^T tile). */
__device__ __noinline__ void wq_store8(const lk_qgemm_args &q, bool tr, int64_t r, int64_t s,
                                       int a0, int a1, int a2, int a3, int a4, int a5, int a6,
                                       int a7)
{
    const int a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    lk_qepi p[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t rj = r + ((j >> 1) & 1) * 8, sj = s + (j >> 2) * 8 + (j & 1);
        const int64_t m = tr ? sj : rj, n = tr ? rj : sj;
        if (m < q.m && n < q.n)
            p[j] = lk_qgemm_pre(q, m, n);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t rj = r + ((j >> 1) & 1) * 8, sj = s + (j >> 2) * 8 + (j & 1);
        const int64_t m = tr ? sj : rj, n = tr ? rj : sj;
        if (m < q.m && n < q.n)
            lk_qgemm_store_pre(q, m, n, a[j], p[j]);
    }
}

/* Whether a tile takes the fast epilogue: scales, f32 y, nothing to add
 * (the scales' values are checked by wq_stage_scales and wq_fast_rows). */
__device__ __forceinline__ bool wq_fast(const lk_qgemm_args &q)
{
    return q.x_scale.data != nullptr && q.y.dtype == LK_F32 && !(q.flags & LK_GEMM_ACCUMULATE);
}

/* The fast epilogue's conditions on a thread's two row scales: w scales
 * (tr) finite, x scales lk_qdiv_ok.  With finite scales no result is NaN
 * (the fast stores do not canonicalise: numerics.md section 3's NaN is
 * wq_store8's). */
__device__ __forceinline__ bool wq_fast_rows(bool tr, const float (&rsc)[2])
{
    return tr ? isfinite(rsc[0]) && isfinite(rsc[1]) : lk_qdiv_ok(rsc[0]) && lk_qdiv_ok(rsc[1]);
}

/* The two consumer warpgroups' named barrier (0 is __syncthreads). */
__device__ __forceinline__ void wq_consumer_sync()
{
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

/* The AND of p over the 256 consumer threads, which it synchronizes as
 * wq_consumer_sync. */
__device__ __forceinline__ bool wq_consumer_and(bool p)
{
    uint32_t r;
    asm volatile("{\n .reg .pred a, b;\n setp.ne.u32 a, %1, 0;\n"
                 " bar.red.and.pred b, 1, 256, a;\n selp.u32 %0, 1, 0, b;\n}\n"
                 : "=r"(r)
                 : "r"((uint32_t)p)
                 : "memory");
    return r != 0;
}

/* Stage the scales of a tile's columns s0 .. s0 + W - 1 (x scales of y^T's
 * columns when tr, with their reciprocals in sy for lk_qgemm_value_r; else
 * w scales of y's) from consumer thread u (0 .. 255), after every
 * consumer's reads of the previous tile's; 1 past the edge.  One copy for
 * both warpgroups: the 4-stage 256-column kernel has 1 KiB of shared
 * memory left (it stages no reciprocals).  Returns, to every consumer,
 * whether the tile may take the fast epilogue: wq_fast and every column's
 * scale lk_qdiv_ok (x scales, tr) or finite (w scales); wq_fast_rows
 * checks the thread's row scales. */
template <int W>
__device__ __forceinline__ bool wq_stage_scales(const lk_qgemm_args &q, bool tr, int64_t s0,
                                                int u, float *sc, float *sy)
{
    if (!wq_fast(q))
        return false;
    wq_consumer_sync();
    const float *const xsp = (const float *)q.x_scale.data;
    const float *const wsp = (const float *)q.w_scale.data;
    bool ok = true;
#pragma unroll
    for (int j = u; j < W; j += 256) {
        const int64_t col = s0 + j;
        float v = 1.0f;
        if (tr ? col < q.m : col < q.n)
            v = tr ? xsp[col * q.x_scale.ld] : wsp[q.w_scale.cols == 1 ? 0 : col];
        sc[j] = v;
        if (tr)
            sy[j] = __frcp_rn(v);
        ok = ok && (tr ? lk_qdiv_ok(v) : isfinite(v));
    }
    return wq_consumer_and(ok); /* and the staged scales are written */
}

/* A thread's ACC accumulators, i at (r + 8 ((i / 2) % 2), s + 8 (i / 4) +
 * i % 2) as (m, n), or (n, m) when tr; rsc[2]: the scales of its two rows
 * r and r + 8, sc (and sy when tr): the staged column scales, s0 the
 * tile's first column, fast: what wq_stage_scales returned.  The fast
 * epilogue divides with lk_qgemm_value_r (the row scales' reciprocals
 * here, the columns' staged), four elements (two rows x two columns) at a
 * time, their scale loads before their stores. */
template <int ACC>
__device__ __forceinline__ void wq_store(const lk_qgemm_args &q, bool tr, int64_t r, int64_t s,
                                         int64_t s0, const float (&rsc)[2], const float *sc,
                                         const float *sy, bool fast, const int (&acc)[ACC])
{
    if (fast && wq_fast_rows(tr, rsc)) {
        const int64_t rows = tr ? q.n : q.m, cols = tr ? q.m : q.n;
        /* element (r', s') of the tile at y + r' * rstr + s' * sstr */
        const int64_t rstr = tr ? 1 : q.y.ld, sstr = tr ? q.y.ld : 1;
        float *const y = (float *)q.y.data + r * rstr + s * sstr;
        const float *const scs = sc + (s - s0), *const sys = tr ? sy + (s - s0) : sy;
        const bool in0 = r < rows, in1 = r + 8 < rows;
        const float rr0 = tr ? 0.0f : __frcp_rn(rsc[0]), rr1 = tr ? 0.0f : __frcp_rn(rsc[1]);
        /* y's elements i, i + 1 are neighbours in a row unless tr: one
         * 8-byte store where y's rows allow (whole 32-byte sectors) */
        const bool pairs = !tr && ((uintptr_t)y & 7) == 0 && (q.y.ld & 1) == 0;
#pragma unroll
        for (int i = 0; i < ACC; i += 4) {
            const int off = (i >> 2) * 8;
            float cs[2], cr[2] = {0.0f, 0.0f};
#pragma unroll
            for (int b = 0; b < 2; b++) {
                cs[b] = scs[off + b];
                if (tr)
                    cr[b] = sys[off + b];
            }
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                if (!(rr ? in1 : in0))
                    continue;
                float v[2];
#pragma unroll
                for (int b = 0; b < 2; b++) {
                    const int a = acc[i + 2 * rr + b];
                    v[b] = tr ? lk_qgemm_value_r(a, cs[b], cr[b], rsc[rr])
                              : lk_qgemm_value_r(a, rsc[rr], rr ? rr1 : rr0, cs[b]);
                }
                float *const p = y + rr * 8 * rstr + off * sstr;
                if (pairs && s + off + 1 < cols) {
                    *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
                } else {
                    if (s + off < cols)
                        p[0] = v[0];
                    if (s + off + 1 < cols)
                        p[sstr] = v[1];
                }
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < ACC; i += 8)
        wq_store8(q, tr, r, s + (i >> 2) * 8, acc[i], acc[i + 1], acc[i + 2], acc[i + 3],
                  acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7]);
}
#endif /* LK_WG_BODY */

} // namespace

#endif
