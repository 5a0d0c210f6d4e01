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
 * grid is capped to fit). */
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

template <lk_dtype DK, lk_dtype DV>
void launch(dim3 grid, size_t smem, cudaStream_t st, const lk_attention_args &a, float *ws,
            bool vec)
{
    if (vec)
        attention_kernel<DK, DV, DK == LK_F32><<<grid, LK_ATT_THREADS, smem, st>>>(a, ws);
    else
        attention_kernel<DK, DV, false><<<grid, LK_ATT_THREADS, smem, st>>>(a, ws);
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
