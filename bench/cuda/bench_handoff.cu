/* lockstep-cuda-bench's handoff probe: the floor of one phase of
 * lk_bitnet_decode's fused kernel (bitnet.cu).
 *
 * At batch 1 a decode layer is five phases, and each hands a row to the
 * next across every SM: each block stores its share of the row, the
 * blocks meet at a grid barrier, and every block then reads the whole row
 * from L2.  What that costs with nothing else running is the least any
 * phase can take, whatever its arithmetic.  One cooperative launch, one
 * block of 512 threads an SM (as the fused kernel), times `iters`
 * handoffs; the modes:
 *
 *   0  the grid barrier alone (thread 0: a release-add to a count that
 *      only grows, a poll with acquire loads until it reaches the blocks
 *      times the barriers so far: bitnet.cu's bn_arrive and bn_wait);
 *   1  each block stores its share of an n-float row first, and every
 *      block reads the whole row after (16-byte cp.async.cg, as bn_norm);
 *   2  the row as handoff words instead (NCCL's LL protocol: each 8-byte
 *      word holds a value and the handoff's number; blocks store their
 *      share and poll the whole row until every word carries the
 *      number: no fence, no count);
 *   3  the row read alone, every block the same lines (no barrier).
 *
 * Not part of the driver module. */
#include <stdint.h>

#include <cuda_runtime.h>

namespace {

#define HO_THREADS 512
#define HO_MAX_N 8192 /* floats of the row (the shared buffer: 32 KB) */
#define HO_PAIRS (HO_MAX_N / 2 / HO_THREADS) /* a thread's pairs of words in flight */

__device__ __forceinline__ unsigned ho_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void ho_cp16(void *dst, const void *src)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ void ho_ll_put(uint64_t *p, uint64_t v)
{
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void ho_ll_get2(const uint64_t *p, uint64_t &a, uint64_t &b)
{
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];"
                 : "=l"(a), "=l"(b)
                 : "l"(p)
                 : "memory");
}

/* the whole row into shared memory (modes 1 and 3) */
__device__ __forceinline__ void ho_read_row(float *buf, const float *row, int n)
{
    for (int i = 4 * (int)threadIdx.x; i < n; i += 4 * HO_THREADS)
        ho_cp16(buf + i, row + i);
    asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
}

/* mode 2's poll: every pair of the thread's words in flight at once, the
 * late ones asked again together, until each carries handoff `it` or a
 * later one (a fast block may already have stored the next) */
__device__ __forceinline__ void ho_ll_row(float *buf, const uint64_t *ll, int n, unsigned it)
{
    uint64_t a[HO_PAIRS], b[HO_PAIRS];
    unsigned pending = 0;
#pragma unroll
    for (int u = 0; u < HO_PAIRS; u++) {
        const int i = 2 * ((int)threadIdx.x + u * HO_THREADS);
        if (i < n) {
            ho_ll_get2(ll + i, a[u], b[u]);
            pending |= 1u << u;
        }
    }
    while (pending) {
#pragma unroll
        for (int u = 0; u < HO_PAIRS; u++) {
            const int i = 2 * ((int)threadIdx.x + u * HO_THREADS);
            if ((pending >> u & 1) && (unsigned)(a[u] >> 32) >= it &&
                (unsigned)(b[u] >> 32) >= it) {
                buf[i] = __uint_as_float((unsigned)a[u]);
                buf[i + 1] = __uint_as_float((unsigned)b[u]);
                pending &= ~(1u << u);
            }
        }
#pragma unroll
        for (int u = 0; u < HO_PAIRS; u++)
            if (pending >> u & 1)
                ho_ll_get2(ll + 2 * ((int)threadIdx.x + u * HO_THREADS), a[u], b[u]);
    }
    __syncthreads();
}

__global__ void __launch_bounds__(HO_THREADS, 1) ho_kernel(int mode, int n, int iters,
                                                           unsigned *count, float *row,
                                                           uint64_t *ll)
{
    __shared__ __align__(16) float buf[HO_MAX_N];
    const int tid = threadIdx.x, nb = gridDim.x, bid = blockIdx.x;
    const int r0 = (int)((int64_t)n * bid / nb), r1 = (int)((int64_t)n * (bid + 1) / nb);
    unsigned target = 0;
    for (int it = 1; it <= iters; it++) {
        if (mode == 3) {
            ho_read_row(buf, row, n);
            continue;
        }
        if (mode == 2) {
            for (int i = r0 + tid; i < r1; i += HO_THREADS)
                ho_ll_put(ll + i, (uint64_t)it << 32 | __float_as_uint((float)i));
            ho_ll_row(buf, ll, n, (unsigned)it);
            continue;
        }
        if (mode == 1)
            for (int i = r0 + tid; i < r1; i += HO_THREADS)
                row[i] = (float)(i + it);
        __syncthreads();
        if (tid == 0) {
            target += nb;
            asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
            while (ho_ld_acquire(count) < target) {
            }
        }
        __syncthreads();
        if (mode == 1)
            ho_read_row(buf, row, n);
    }
    if (mode != 0 && buf[tid] == 1.0e30f) /* keeps the reads; never true for these rows */
        row[0] = buf[tid];
}

} // namespace

/* Times `iters` handoffs of mode (0-3, above) with an n-float row (n a
 * multiple of 4, at most 8192), one block an SM, the best of `reps`
 * launches: the us of one handoff in *us.  0 or a cudaError_t (one that
 * cannot launch cooperatively, a bad n or mode: cudaErrorInvalidValue). */
extern "C" int lk_bench_handoff(int mode, int n, int iters, int reps, double *us)
{
    if (mode < 0 || mode > 3 || n < 4 || n > HO_MAX_N || n % 4 || iters < 1 || reps < 1)
        return (int)cudaErrorInvalidValue;
    int dev = 0, sms = 0, coop = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
    if (e != cudaSuccess)
        return (int)e;
    if (!coop)
        return (int)cudaErrorInvalidValue;
    unsigned *count = NULL;
    float *row = NULL;
    uint64_t *ll = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double best = -1.0;
    if ((e = cudaMalloc((void **)&count, 4)) == cudaSuccess &&
        (e = cudaMalloc((void **)&row, HO_MAX_N * 4)) == cudaSuccess &&
        (e = cudaMalloc((void **)&ll, HO_MAX_N * 8)) == cudaSuccess &&
        (e = cudaMemset(row, 0, HO_MAX_N * 4)) == cudaSuccess &&
        (e = cudaEventCreate(&e0)) == cudaSuccess && (e = cudaEventCreate(&e1)) == cudaSuccess) {
        for (int r = 0; r < reps && e == cudaSuccess; r++) {
            void *args[] = {&mode, &n, &iters, &count, &row, &ll};
            float ms = 0.0f;
            if ((e = cudaMemset(count, 0, 4)) != cudaSuccess ||
                (e = cudaMemset(ll, 0, HO_MAX_N * 8)) != cudaSuccess ||
                (e = cudaEventRecord(e0)) != cudaSuccess ||
                (e = cudaLaunchCooperativeKernel((const void *)ho_kernel, dim3((unsigned)sms),
                                                 dim3(HO_THREADS), args, 0, 0)) != cudaSuccess ||
                (e = cudaEventRecord(e1)) != cudaSuccess ||
                (e = cudaEventSynchronize(e1)) != cudaSuccess ||
                (e = cudaEventElapsedTime(&ms, e0, e1)) != cudaSuccess)
                break;
            if (best < 0.0 || ms < best)
                best = ms;
        }
    }
    if (e0)
        (void)cudaEventDestroy(e0);
    if (e1)
        (void)cudaEventDestroy(e1);
    (void)cudaFree(count);
    (void)cudaFree(row);
    (void)cudaFree(ll);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return (int)e;
    }
    *us = best * 1e3 / iters;
    return 0;
}
