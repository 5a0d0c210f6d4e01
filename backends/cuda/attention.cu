/* Lockstep CUDA: causal attention with grouped KV heads over a KV cache
 * (docs/numerics.md section 12.3), one block per (head, token, sequence):
 *
 * - s_j = dot(q, k_j) * scale, each dot by one thread in the GEMM
 *   contract's order (KB blocks of fma chains, blocks added left to right);
 * - mx = maximum of s_j (order-free), e_j = exp(s_j - mx);
 * - s = the lane sum of e_j: threads 0..63 are the 64 lanes of each 4096-term
 *   chunk, then the fixed butterfly; the chunk partials are summed the same
 *   way; p_j = e_j / s;
 * - out_d = dot over j of p_j * v_j,d, one thread per d, in the GEMM order.
 *
 * The scores live in shared memory when the cache fits, else in the queue's
 * workspace (one slice per resident block: the grid is capped to fit). */
#include "backends/cuda/math.cuh"
#include "backends/cuda/model.cuh"

#define LK_ATT_THREADS 128
#define LK_ATT_SMEM_MAX (48 * 1024)

namespace {

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o >= 1; o /= 2)
        v = lk_maximum(v, __shfl_xor_sync(LK_FULL_MASK, v, o));
    return v;
}

/* Lane sum (section 5) of t[0..n), n <= 4096, by the block; lanes is 64
 * floats of shared memory.  The result is returned to every thread. */
__device__ float chunk_sum(const float *t, int64_t n, float *lanes)
{
    const int tid = threadIdx.x;
    if (tid < LK_LANES) {
        float lane = -0.0f;
        for (int64_t i = tid; i < n; i += LK_LANES)
            lane = __fadd_rn(lane, t[i]);
        lanes[tid] = lane;
    }
    __syncthreads();
    for (int s = LK_LANES / 2; s >= 1; s /= 2) {
        if (tid < s)
            lanes[tid] = __fadd_rn(lanes[tid], lanes[tid + s]);
        __syncthreads();
    }
    float r = lanes[0];
    __syncthreads();
    return r;
}

__global__ void __launch_bounds__(LK_ATT_THREADS)
    attention_kernel(lk_attention_args a, float *ws)
{
    extern __shared__ float sm[];
    const int64_t hd = a.head_dim, L = a.cache_len;
    const int64_t nparts = (L + LK_CHUNK - 1) / LK_CHUNK;
    float *qv = sm;
    float *lanes = qv + hd;
    float *parts = lanes + LK_LANES;
    float *red = parts + nparts; /* LK_ATT_THREADS / 32 + 1 */
    const int64_t slot =
        ((int64_t)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    float *e = ws ? ws + slot * L : red + LK_ATT_THREADS / 32 + 1;
    const int tid = threadIdx.x;
    const int64_t h = blockIdx.x, kc = (h / (a.n_head / a.n_kv)) * hd, qc = h * hd;

    for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
        for (int64_t t = blockIdx.y; t < a.tokens; t += gridDim.y) {
            __syncthreads(); /* the previous token's reads of shared memory */
            const int64_t p = ((const int32_t *)a.pos.data)[lk_md_at(a.pos, b, t, 0)];
            const int64_t n = p < 0 ? 0 : (p + 1 < L ? p + 1 : L);
            const int64_t yi = lk_md_at(a.y, b, t, qc);
            if (n == 0) {
                for (int64_t d = tid; d < hd; d += blockDim.x)
                    lk_md_store(a.y.data, a.y.dtype, yi + d, 0.0f);
                continue;
            }
            for (int64_t d = tid; d < hd; d += blockDim.x)
                qv[d] = lk_md_load(a.q.data, a.q.dtype, lk_md_at(a.q, b, t, qc + d));
            __syncthreads();

            float mx = __uint_as_float(0xff800000u); /* -Inf: maximum's identity */
            for (int64_t j = tid; j < n; j += blockDim.x) {
                const int64_t kr = lk_md_at(a.k, b, j, kc);
                float total = 0.0f;
                for (int64_t d0 = 0; d0 < hd; d0 += LK_KB) {
                    const int64_t d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                    float acc = 0.0f;
                    for (int64_t d = d0; d < d1; d++)
                        acc = __fmaf_rn(qv[d], lk_md_load(a.k.data, a.k.dtype, kr + d), acc);
                    total = d0 == 0 ? acc : __fadd_rn(total, acc);
                }
                const float s = __fmul_rn(total, a.scale);
                e[j] = s;
                mx = lk_maximum(mx, s);
            }
            mx = warp_max(mx);
            if ((tid & 31) == 0)
                red[tid / 32] = mx;
            __syncthreads();
            if (tid == 0) {
                float m = red[0];
                for (int w = 1; w < (int)(blockDim.x / 32); w++)
                    m = lk_maximum(m, red[w]);
                red[LK_ATT_THREADS / 32] = m;
            }
            __syncthreads();
            mx = red[LK_ATT_THREADS / 32];
            for (int64_t j = tid; j < n; j += blockDim.x)
                e[j] = lk_cu_exp(__fsub_rn(e[j], mx));
            __syncthreads();

            const int64_t nch = (n + LK_CHUNK - 1) / LK_CHUNK;
            for (int64_t c = 0; c < nch; c++) {
                const int64_t c0 = c * LK_CHUNK;
                const float part = chunk_sum(e + c0, n - c0 < LK_CHUNK ? n - c0 : LK_CHUNK, lanes);
                if (tid == 0)
                    parts[c] = part;
            }
            __syncthreads();
            const float s = nch == 1 ? parts[0] : chunk_sum(parts, nch, lanes);
            for (int64_t j = tid; j < n; j += blockDim.x)
                e[j] = __fdiv_rn(e[j], s);
            __syncthreads();

            for (int64_t d = tid; d < hd; d += blockDim.x) {
                float total = 0.0f;
                for (int64_t j0 = 0; j0 < n; j0 += LK_KB) {
                    const int64_t j1 = n - j0 < LK_KB ? n : j0 + LK_KB;
                    float acc = 0.0f;
                    for (int64_t j = j0; j < j1; j++)
                        acc = __fmaf_rn(e[j],
                                        lk_md_load(a.v.data, a.v.dtype, lk_md_at(a.v, b, j, kc + d)),
                                        acc);
                    total = j0 == 0 ? acc : __fadd_rn(total, acc);
                }
                lk_md_store(a.y.data, a.y.dtype, yi + d, total);
            }
        }
    }
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
    const int64_t fixed = (a->head_dim + LK_LANES + nparts + LK_ATT_THREADS / 32 + 1) * 4;
    unsigned gy = (unsigned)(a->tokens < 65535 ? a->tokens : 65535);
    unsigned gz = (unsigned)(a->batch < 65535 ? a->batch : 65535);
    float *ws = nullptr;
    int64_t smem = fixed + L * 4;
    if (smem > LK_ATT_SMEM_MAX) {
        /* scores in the workspace: as many resident (token, sequence)
         * slices as it holds */
        smem = fixed;
        const int64_t per = a->n_head * L * 4;
        int64_t slices = per > 0 ? (int64_t)(q->ws_bytes / (size_t)per) : 0;
        if (smem > LK_ATT_SMEM_MAX || slices < 1)
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
    dim3 grid((unsigned)a->n_head, gy, gz);
    attention_kernel<<<grid, LK_ATT_THREADS, (size_t)smem, op.stream()>>>(*a, ws);
    return op.launched();
}
