/* Lockstep CUDA: the LK_T2 packed ternary format (docs/formats.md) and the
 * ternary GEMM (docs/numerics.md section 9).
 *
 * Pack checks every value first (one kernel, the smallest bad index by an
 * integer atomicMin, read back to the host) and writes nothing when one is
 * not -1, 0 or 1; it is the one op that synchronises, so it refuses to run
 * under CUDA graph capture.  Unpack decodes code - 1 (code 3 gives 2).
 *
 * Ternary GEMV (M <= 8), the decode path: a row of N x K weights is K / 4
 * bytes; eight threads stream a row in 16-byte pieces (64 codes) and take
 * dot products of the raw codes with x in dp4a, four codes of a plane
 * (bit pair e of four bytes) against x permuted to match, so no code is
 * decoded one by one; then acc = sum x * code - sum x = sum x * (code - 1).
 * The two sums may wrap in int32, but the difference is exact modulo 2^32
 * and the core's K limit keeps the true acc inside int32, so it is exact.
 * x is zero past K, so padding codes and the code of any k >= K add 0.
 * Larger M, or x too large for shared memory: the dp4a tile kernel with
 * the codes decoded to int8 (backends/cuda/qgemm.cuh). */
#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc_ternary.cuh"

namespace {

/* ---------------------------------------------------------------- pack */

__global__ void __launch_bounds__(256) pack_check_kernel(lk_pack_args p, unsigned long long *bad)
{
    const int64_t rows = p.src.rows, cols = p.src.cols, total = rows * cols;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / cols, c = i % cols;
        const int v = ((const int8_t *)p.src.data)[r * p.src.ld + c];
        if (v < -1 || v > 1)
            atomicMin(bad, (unsigned long long)i);
    }
}

/* One thread per byte of the output: codes v + 1, padding code 1. */
__global__ void __launch_bounds__(256) pack_kernel(lk_pack_args p)
{
    const int64_t cols = p.src.cols, bpr = (cols + 3) / 4, total = p.src.rows * bpr;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / bpr, j = i % bpr;
        const int8_t *src = (const int8_t *)p.src.data + r * p.src.ld;
        unsigned byte = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t c = 4 * j + e;
            const unsigned code = c < cols ? (unsigned)(src[c] + 1) : 1u;
            byte |= code << (2 * e);
        }
        ((uint8_t *)p.dst.data)[r * (p.dst.ld / 4) + j] = (uint8_t)byte;
    }
}

__global__ void __launch_bounds__(256) unpack_kernel(lk_pack_args p)
{
    const int64_t cols = p.src.cols, bpr = (cols + 3) / 4, total = p.src.rows * bpr;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / bpr, j = i % bpr;
        const unsigned byte = ((const uint8_t *)p.src.data)[r * (p.src.ld / 4) + j];
        int8_t *dst = (int8_t *)p.dst.data + r * p.dst.ld;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t c = 4 * j + e;
            if (c < cols)
                dst[c] = (int8_t)((int)((byte >> (2 * e)) & 3u) - 1);
        }
    }
}

/* ---------------------------------------------------------------- GEMV */

/* 128 threads a block; PR threads a row (8, or 16 for rows of more than
 * 64 segments, so that a thread's segments are all requested up front:
 * TG_PREFETCH each). */
#define TG_THREADS 128
#define TG_PREFETCH 8 /* segments per thread loaded before x is ready */

/* x permuted for the planes: for each group g of 16 k, word e holds the
 * bytes x[16g + e], x[16g + 4 + e], x[16g + 8 + e], x[16g + 12 + e] (the
 * elements of bit pair e of the group's four code bytes).  Every four
 * groups take 20 words: 4 of padding keep the uint4 reads of the eight
 * threads of a row on distinct banks. */
__device__ __forceinline__ int xp_offset(int64_t g) { return (int)(g * 4 + (g >> 2) * 4); }

template <int MT, int TG_PER_ROW>
__global__ void __launch_bounds__(TG_THREADS)
    t2_gemv_kernel(lk_qgemm_args q, int xw, int nseg, int wvec)
{
    extern __shared__ uint4 t2_smem4[];
    uint32_t *xp = reinterpret_cast<uint32_t *>(t2_smem4); /* [MT][xw] */
    int *sumx = reinterpret_cast<int *>(xp + MT * xw);     /* [MT] */
    const int tid = threadIdx.x;
    const int64_t K = q.k;

    constexpr int TG_ROWS = TG_THREADS / TG_PER_ROW;
    const int64_t n = (int64_t)blockIdx.x * TG_ROWS + tid / TG_PER_ROW;
    const int t = tid % TG_PER_ROW;
    const int64_t bpr = (K + 3) / 4;
    const uint8_t *wr = (const uint8_t *)q.w.data + (n < q.n ? n : 0) * (q.w.ld / 4);
    /* 16 bytes of row n (64 codes), zero past the row's bytes */
    auto load_seg = [&](int seg) -> uint4 {
        if (wvec && (int64_t)seg * 16 + 16 <= bpr)
            return *reinterpret_cast<const uint4 *>(wr + (int64_t)seg * 16);
        uint32_t v[4] = {0, 0, 0, 0};
        for (int j = 0; j < 16; j++)
            if ((int64_t)seg * 16 + j < bpr)
                v[j / 4] |= (uint32_t)wr[(int64_t)seg * 16 + j] << (8 * (j % 4));
        return make_uint4(v[0], v[1], v[2], v[3]);
    };
    /* the first segments are requested before x is prepared, so that the
     * weights stream while the block builds its copy of x */
    uint4 pre[TG_PREFETCH];
#pragma unroll
    for (int i = 0; i < TG_PREFETCH; i++) {
        const int seg = t + TG_PER_ROW * i;
        pre[i] = n < q.n && seg < nseg ? load_seg(seg) : make_uint4(0, 0, 0, 0);
    }

    /* x, one group of 16 k per thread and step: one 16-byte load where it
     * can, the four plane words by byte permutes, and its sum by dp4a
     * against ones (exact: |sum| <= 128 K fits int32). */
    if (tid < MT)
        sumx[tid] = 0;
    __syncthreads();
    const int64_t groups = (int64_t)(xw / 20) * 4;
    const int xvec = (uintptr_t)q.x.data % 16 == 0 && q.x.ld % 16 == 0;
    int xsum[MT];
#pragma unroll
    for (int m = 0; m < MT; m++)
        xsum[m] = 0;
#pragma unroll 2
    for (int64_t g = tid; g < groups; g += TG_THREADS) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
            uint4 v = make_uint4(0, 0, 0, 0);
            if (m < q.m) {
                const int8_t *x = (const int8_t *)q.x.data + m * q.x.ld + 16 * g;
                if (xvec && 16 * g + 16 <= K) {
                    v = *reinterpret_cast<const uint4 *>(x);
                } else {
                    uint32_t w4[4] = {0, 0, 0, 0};
                    for (int j = 0; j < 16; j++)
                        if (16 * g + j < K)
                            w4[j / 4] |= (uint32_t)(uint8_t)x[j] << (8 * (j % 4));
                    v = make_uint4(w4[0], w4[1], w4[2], w4[3]);
                }
            }
            xsum[m] = __dp4a((int)v.x, 0x01010101, xsum[m]);
            xsum[m] = __dp4a((int)v.y, 0x01010101, xsum[m]);
            xsum[m] = __dp4a((int)v.z, 0x01010101, xsum[m]);
            xsum[m] = __dp4a((int)v.w, 0x01010101, xsum[m]);
            uint32_t *dst = xp + m * xw + xp_offset(g);
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t sel = (uint32_t)e | (uint32_t)(4 + e) << 4;
                dst[e] = __byte_perm(__byte_perm(v.x, v.y, sel), __byte_perm(v.z, v.w, sel), 0x5410);
            }
        }
    }
#pragma unroll
    for (int m = 0; m < MT; m++) {
        int s = xsum[m];
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1)
            s += __shfl_xor_sync(LK_FULL_MASK, s, d);
        if ((tid & (LK_WARP - 1)) == 0 && s != 0)
            atomicAdd(&sumx[m], s);
    }
    __syncthreads();

    uint32_t acc[MT];
#pragma unroll
    for (int m = 0; m < MT; m++)
        acc[m] = 0;
    /* acc += sum over the segment's 64 k of x * code, plane by plane */
    auto dot_seg = [&](const uint4 &w, int seg) {
        const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int qq = 0; qq < 4; qq++) {
            const int off = xp_offset((int64_t)seg * 4 + qq);
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const uint4 xv = *reinterpret_cast<const uint4 *>(xp + m * xw + off);
                const uint32_t xs[4] = {xv.x, xv.y, xv.z, xv.w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const uint32_t plane = (words[qq] >> (2 * e)) & 0x03030303u;
                    acc[m] = (uint32_t)__dp4a((int)plane, (int)xs[e], (int)acc[m]);
                }
            }
        }
    };
    if (n < q.n) {
#pragma unroll
        for (int i = 0; i < TG_PREFETCH; i++) {
            const int seg = t + TG_PER_ROW * i;
            if (seg < nseg)
                dot_seg(pre[i], seg);
        }
#pragma unroll 4
        for (int seg = t + TG_PER_ROW * TG_PREFETCH; seg < nseg; seg += TG_PER_ROW)
            dot_seg(load_seg(seg), seg);
    }
#pragma unroll
    for (int m = 0; m < MT; m++) {
#pragma unroll
        for (int d = TG_PER_ROW / 2; d >= 1; d >>= 1)
            acc[m] += __shfl_xor_sync(LK_FULL_MASK, acc[m], d);
    }
    if (t == 0 && n < q.n) {
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < q.m)
                lk_qgemm_store(q, m, n, (int32_t)(acc[m] - (uint32_t)sumx[m]));
    }
}

template <int MT> bool t2_gemv(const lk_qgemm_args &q, cudaStream_t st)
{
    const int64_t groups = ((q.k + 63) / 64) * 4; /* K padded to whole 16-byte pieces */
    const int64_t xw = groups / 4 * 20;
    const size_t smem = (size_t)(MT * xw) * 4 + MT * sizeof(int);
    if (smem > 48 * 1024)
        return false;
    const int64_t bpr = (q.k + 3) / 4;
    const int nseg = (int)((bpr + 15) / 16);
    const int wvec = (uintptr_t)q.w.data % 16 == 0 && (q.w.ld / 4) % 16 == 0;
    const int pr = nseg > 8 * TG_PREFETCH ? 16 : 8;
    const int64_t blocks = (q.n + TG_THREADS / pr - 1) / (TG_THREADS / pr);
    if (blocks > ((int64_t)1 << 31) - 1)
        return false;
    if (pr == 16)
        t2_gemv_kernel<MT, 16><<<(unsigned)blocks, TG_THREADS, smem, st>>>(q, (int)xw, nseg, wvec);
    else
        t2_gemv_kernel<MT, 8><<<(unsigned)blocks, TG_THREADS, smem, st>>>(q, (int)xw, nseg, wvec);
    return true;
}

} // namespace

extern "C" lk_status lk_cuda_ternary_pack(void *queue, const lk_pack_args *p)
{
    lk_op_scope op(queue, "lk_ternary_pack");
    if (!op.ok())
        return op.status();
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(op.stream(), &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone)
        return op.fail(LK_ERR_UNSUPPORTED,
                       "lk_ternary_pack: cannot run under CUDA graph capture (it reads the "
                       "values back to refuse a bad one before writing)");
    (void)cudaGetLastError();
    unsigned long long *bad = (unsigned long long *)op.q->ws;
    unsigned long long *host = (unsigned long long *)op.q->host_ws;
    const int64_t total = p->src.rows * p->src.cols;
    cudaError_t e = cudaMemsetAsync(bad, 0xff, sizeof *bad, op.stream());
    if (e == cudaSuccess) {
        pack_check_kernel<<<lk_grid_cap((total + 255) / 256, (int64_t)1 << 20), 256, 0,
                            op.stream()>>>(*p, bad);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(host, bad, sizeof *bad, cudaMemcpyDeviceToHost, op.stream());
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(op.stream());
    if (e != cudaSuccess)
        return lk_cuda_fail(op.q->dev->host, e, "lk_ternary_pack");
    if (*host != ~0ull) {
        const int64_t i = (int64_t)*host, r = i / p->src.cols, c = i % p->src.cols;
        int8_t v = 0;
        e = cudaMemcpy(&v, (const int8_t *)p->src.data + r * p->src.ld + c, 1,
                       cudaMemcpyDeviceToHost);
        if (e != cudaSuccess)
            return lk_cuda_fail(op.q->dev->host, e, "lk_ternary_pack");
        return op.fail(LK_ERR_INVALID_VALUE, "lk_ternary_pack: w[%lld, %lld] = %d is not -1, 0 or 1",
                       (long long)r, (long long)c, (int)v);
    }
    const int64_t bytes = p->src.rows * ((p->src.cols + 3) / 4);
    pack_kernel<<<lk_grid_cap((bytes + 255) / 256, (int64_t)1 << 20), 256, 0, op.stream()>>>(*p);
    return op.launched();
}

extern "C" lk_status lk_cuda_ternary_unpack(void *queue, const lk_pack_args *p)
{
    lk_op_scope op(queue, "lk_ternary_unpack");
    if (!op.ok())
        return op.status();
    const int64_t bytes = p->src.rows * ((p->src.cols + 3) / 4);
    unpack_kernel<<<lk_grid_cap((bytes + 255) / 256, (int64_t)1 << 20), 256, 0, op.stream()>>>(*p);
    return op.launched();
}

extern "C" lk_status lk_cuda_ternary_gemm(void *queue, const lk_qgemm_args *q)
{
    lk_op_scope op(queue, "lk_ternary_gemm");
    if (!op.ok())
        return op.status();
    bool done = false;
    if (q->m == 1)
        done = t2_gemv<1>(*q, op.stream());
    else if (q->m == 2)
        done = t2_gemv<2>(*q, op.stream());
    else if (q->m <= 4)
        done = t2_gemv<4>(*q, op.stream());
    else if (q->m <= 8)
        done = t2_gemv<8>(*q, op.stream());
    if (!done)
        done = lk_cuda_tc_qgemm(op.q, q, true); /* M > 8 on sm_80+: tc_ternary.cu */
    if (!done)
        lk_qgemm_tiled<true>(*q, op.stream());
    return op.launched();
}
