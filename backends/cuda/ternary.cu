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
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/linear.cuh"
#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc/ternary.cuh"
#include "backends/cuda/tc/wgmma.cuh"

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

/* The first `avail` (< 16) bytes at p as a 16-byte piece, zero above:
 * the edges of rows that are not whole 16-byte pieces.  Out of line: a
 * decode call runs each kernel once, so the instructions it walks through
 * are fetched every time, and this edge code inlined at each load site
 * made the M = 1 kernel 77 KiB of machine code instead of 34 (and a call
 * on the H200 0.6-1.5 us slower). */
__device__ __noinline__ uint4 t2_load_tail(const uint8_t *p, int64_t avail)
{
    uint32_t v[4] = {0, 0, 0, 0};
    for (int j = 0; j < 16; j++)
        if (j < avail)
            v[j / 4] |= (uint32_t)p[j] << (8 * (j % 4));
    return make_uint4(v[0], v[1], v[2], v[3]);
}

/* early: the weights are a prepared lk_weights handle's (decided on the
 * host), so they are requested before lk_pdl_wait(); x, the scales and y
 * are touched only after it.  sum x, which every row subtracts, is taken
 * once per block while x is staged (each warp's part to shared memory
 * before the one barrier), not by a dp4a against ones beside every dp4a
 * of the dot products: a quarter fewer instructions in the inner loop.
 *
 * The codes of planes 1 and 3 are not shifted down: their masked bytes
 * are 4 code, summed in an accumulator of their own and shifted back at
 * the end; planes 2 and 3 come from the word shifted by 4 once.  Nine
 * instructions a word instead of twelve, two dependent chains instead of
 * one.  Exact: an accumulator takes 32 terms a segment, each at most
 * 12 x 128, and a thread at most K / 512 segments (8 threads a row, 16
 * past 64 segments), so it stays inside int32 for every K up to
 * LK_TERNARY_MAX_K.  One accumulator a plane (no shifts at all) needed
 * more than the 72 registers that seven blocks an SM allow, and spilled. */
static_assert((int64_t)LK_TERNARY_MAX_K / 512 * 32 * 12 * 128 < ((int64_t)1 << 31),
              "the ternary GEMV's masked accumulators could leave int32");
template <int MT, int TG_PER_ROW>
__global__ void __launch_bounds__(TG_THREADS, MT == 1 ? 7 : 1)
    t2_gemv_kernel(lk_qgemm_args q, int xw, int nseg, int wvec, int early)
{
    extern __shared__ uint4 t2_smem4[];
    uint32_t *xp = reinterpret_cast<uint32_t *>(t2_smem4); /* [MT][xw] */
    const int tid = threadIdx.x;
    const int64_t K = q.k;

    constexpr int TG_ROWS = TG_THREADS / TG_PER_ROW;
    const int64_t n = (int64_t)blockIdx.x * TG_ROWS + tid / TG_PER_ROW;
    const int t = tid % TG_PER_ROW;
    const int64_t bpr = (K + 3) / 4;
    const int64_t ldb = q.w.ld / 4;
    const uint8_t *wr = (const uint8_t *)q.w.data + (n < q.n ? n : 0) * ldb;
    /* 16 bytes of row n (64 codes), zero past the row's bytes */
    auto load_seg = [&](int seg) -> uint4 {
        if (wvec && (int64_t)seg * 16 + 16 <= bpr)
            return *reinterpret_cast<const uint4 *>(wr + (int64_t)seg * 16);
        return t2_load_tail(wr + (int64_t)seg * 16, bpr - (int64_t)seg * 16);
    };
    if (!early)
        lk_pdl_wait();
    else if (nseg > TG_PER_ROW * TG_PREFETCH && wvec) {
        const int64_t n0 = (int64_t)blockIdx.x * TG_ROWS;
        const int64_t rows = q.n - n0 < TG_ROWS ? q.n - n0 : TG_ROWS;
        lk_prefetch_l2((const uint8_t *)q.w.data + n0 * ldb, (rows - 1) * ldb + nseg * 16);
    }
    /* the first segments are requested before x is prepared, so that the
     * weights stream while the block builds its copy of x */
    uint4 pre[TG_PREFETCH];
#pragma unroll
    for (int i = 0; i < TG_PREFETCH; i++) {
        const int seg = t + TG_PER_ROW * i;
        pre[i] = n < q.n && seg < nseg ? load_seg(seg) : make_uint4(0, 0, 0, 0);
    }
    if (early)
        lk_pdl_wait();
    lk_pdl_trigger();
    /* the epilogue's loads (scales, y under accumulate) now, in flight
     * with x's, not one more round trip after the dot products */
    const bool storer = t == 0 && n < q.n;
    lk_qepi pre_e[MT];
    if (storer) {
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < q.m)
                pre_e[m] = lk_qgemm_pre(q, m, n);
    }

    /* x, one group of 16 k per thread and step: XU groups' 16-byte loads
     * in flight at once where they can, then the four plane words of each
     * by byte permutes.  The sum of x (which the dot products subtract,
     * see below) is taken here, per warp: every group enters it once. */
    constexpr int XU = MT == 1 ? 4 : MT == 2 ? 2 : 1;
    const int64_t groups = (int64_t)(xw / 20) * 4;
    const int xvec = (uintptr_t)q.x.data % 16 == 0 && q.x.ld % 16 == 0;
    uint32_t sxl[MT];
#pragma unroll
    for (int m = 0; m < MT; m++)
        sxl[m] = 0;
    for (int64_t gb = tid; gb < groups; gb += XU * TG_THREADS) {
        uint4 v[XU][MT];
#pragma unroll
        for (int u = 0; u < XU; u++) {
            const int64_t g = gb + (int64_t)u * TG_THREADS;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                v[u][m] = make_uint4(0, 0, 0, 0);
                if (m < q.m && g < groups) {
                    const int8_t *x = (const int8_t *)q.x.data + m * q.x.ld + 16 * g;
                    if (xvec && 16 * g + 16 <= K) {
                        v[u][m] = *reinterpret_cast<const uint4 *>(x);
                    } else {
                        v[u][m] = t2_load_tail((const uint8_t *)x, K - 16 * g);
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < XU; u++) {
            const int64_t g = gb + (int64_t)u * TG_THREADS;
            if (g >= groups)
                break;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                const uint4 w = v[u][m];
                uint32_t *dst = xp + m * xw + xp_offset(g);
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const uint32_t sel = (uint32_t)e | (uint32_t)(4 + e) << 4;
                    dst[e] = __byte_perm(__byte_perm(w.x, w.y, sel), __byte_perm(w.z, w.w, sel),
                                         0x5410);
                }
                sxl[m] = (uint32_t)__dp4a(0x01010101, (int)w.x, (int)sxl[m]);
                sxl[m] = (uint32_t)__dp4a(0x01010101, (int)w.y, (int)sxl[m]);
                sxl[m] = (uint32_t)__dp4a(0x01010101, (int)w.z, (int)sxl[m]);
                sxl[m] = (uint32_t)__dp4a(0x01010101, (int)w.w, (int)sxl[m]);
            }
        }
    }
    uint32_t *sxw = xp + MT * xw; /* [warp][MT]: each warp's sum of x */
#pragma unroll
    for (int m = 0; m < MT; m++) {
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1)
            sxl[m] += __shfl_xor_sync(LK_FULL_MASK, sxl[m], d);
    }
    if ((tid & 31) == 0) {
#pragma unroll
        for (int m = 0; m < MT; m++)
            sxw[(tid >> 5) * MT + m] = sxl[m];
    }
    __syncthreads();

    /* acc = sum x * code over this thread's segments, the row's parts
     * added by the butterfly, minus sum x (the same for every row: the
     * warps' sums) = sum x * (code - 1); all exact modulo 2^32 */
    uint32_t acc[MT];
    int ap[MT][2]; /* planes 0 and 2, planes 1 and 3 (4 code) */
#pragma unroll
    for (int m = 0; m < MT; m++)
        ap[m][0] = ap[m][1] = 0;
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
                    const uint32_t wq = e < 2 ? words[qq] : words[qq] >> 4;
                    ap[m][e & 1] = lk_dp4a_us(wq & (0x03030303u << (2 * (e & 1))), (int)xs[e],
                                              ap[m][e & 1]);
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
        acc[m] = (uint32_t)ap[m][0] + (uint32_t)(ap[m][1] >> 2); /* exact: a multiple of 4 */
#pragma unroll
        for (int d = TG_PER_ROW / 2; d >= 1; d >>= 1)
            acc[m] += __shfl_xor_sync(LK_FULL_MASK, acc[m], d);
    }
    if (storer) {
#pragma unroll
        for (int m = 0; m < MT; m++)
            if (m < q.m) {
                uint32_t sx = 0;
#pragma unroll
                for (int w = 0; w < TG_THREADS / 32; w++)
                    sx += sxw[w * MT + m];
                lk_qgemm_store_pre(q, m, n, (int32_t)(acc[m] - sx), pre_e[m]);
            }
    }
}

/* early: see t2_gemv_kernel */
template <int MT> bool t2_gemv(const lk_qgemm_args &q, cudaStream_t st, int early)
{
    const int64_t groups = ((q.k + 63) / 64) * 4; /* K padded to whole 16-byte pieces */
    const int64_t xw = groups / 4 * 20;
    const size_t smem = (size_t)(MT * xw + (TG_THREADS / 32) * MT) * 4; /* x, the warps' sums */
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
        (void)lk_launch(t2_gemv_kernel<MT, 16>, dim3((unsigned)blocks), dim3(TG_THREADS), smem, st,
                        q, (int)xw, nseg, wvec, early);
    else
        (void)lk_launch(t2_gemv_kernel<MT, 8>, dim3((unsigned)blocks), dim3(TG_THREADS), smem, st,
                        q, (int)xw, nseg, wvec, early);
    return true;
}

/* lk_ternary_gemm's kernels; early: the weights are prepared; pre: their
 * copy in the tensor-core layout, or NULL */
void t2_run(lk_op_scope &op, const lk_qgemm_args *q, int early, const void *pre)
{
    bool done = false;
    if (q->m == 1)
        done = t2_gemv<1>(*q, op.stream(), early);
    else if (q->m == 2)
        done = t2_gemv<2>(*q, op.stream(), early);
    else if (q->m <= 4)
        done = t2_gemv<4>(*q, op.stream(), early);
    else if (q->m <= 8)
        done = t2_gemv<8>(*q, op.stream(), early);
    if (!done)
        done = lk_cuda_tc_qgemm(op.q, q, true, pre); /* M > 8 on sm_80+: tc/ternary.cu */
    if (!done)
        lk_qgemm_tiled<true>(*q, op.stream());
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
    t2_run(op, q, 0, nullptr); /* user tensors: an earlier op may write the weights */
    return op.launched();
}

/* Prepared ternary weights: the canonical LK_T2 rows copied with a row
 * pitch of whole 16-byte pieces (every segment one vector load), and the
 * scales after them in the same allocation.  The kernels are
 * lk_ternary_gemm's, told that no op writes these bytes, so the GEMV
 * requests them before its lk_pdl_wait().  On sm_90 a second copy of the
 * codes in the layout of tc/wgmma_int8.cu's weights-as-A kernel (h->tc, its
 * own allocation: as many bytes again), which M > 8 reads (the same
 * bits, decoded in fewer operations); LOCKSTEP_CUDA_T2_TC_LAYOUT=0 leaves
 * it out. */
lk_status lk_cuda_t2_prepare(lk_op_scope &op, const lk_weights_args *a, void **out)
{
    const lk_tensor &w = a->w, &s = a->w_scale;
    const int64_t bpr = (w.cols + 3) / 4, ldb = (bpr + 15) / 16 * 16;
    const size_t wbytes = (size_t)(w.rows * ldb), sbytes = (size_t)s.cols * sizeof(float);
    lk_cuda_weights *h = (lk_cuda_weights *)calloc(1, sizeof *h);
    if (!h)
        return op.fail(LK_ERR_OUT_OF_MEMORY, "lk_weights_prepare: out of host memory");
    h->dt = LK_T2;
    h->n = w.rows;
    h->k = w.cols;
    h->ldw = ldb * 4;
    h->scale_n = s.cols;
    h->bytes = wbytes + sbytes;
    (void)cudaGetLastError();
    cudaError_t e = cudaMalloc(&h->w, h->bytes);
    if (e != cudaSuccess) {
        free(h);
        return lk_cuda_fail(op.q->dev->host, e, "lk_weights_prepare: cudaMalloc");
    }
    h->scale = (char *)h->w + wbytes;
    const size_t tcbytes = lk_cuda_tc_t2_pre_bytes(op.q->dev, w.rows, w.cols);
    if (tcbytes) {
        e = cudaMalloc(&h->tc, tcbytes);
        if (e != cudaSuccess) {
            (void)cudaFree(h->w);
            free(h);
            return lk_cuda_fail(op.q->dev->host, e, "lk_weights_prepare: cudaMalloc");
        }
    }
    e = cudaMemsetAsync(h->w, 0, wbytes, op.stream());
    if (e == cudaSuccess)
        e = cudaMemcpy2DAsync(h->w, (size_t)ldb, w.data, (size_t)(w.ld / 4), (size_t)bpr,
                              (size_t)w.rows, cudaMemcpyDeviceToDevice, op.stream());
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(h->scale, s.data, sbytes, cudaMemcpyDeviceToDevice, op.stream());
    if (e == cudaSuccess && h->tc) {
        /* from the aligned copy (the user's rows may have any pitch) */
        lk_tensor c = lk_mat(h->w, LK_T2, w.rows, w.cols);
        c.ld = h->ldw;
        if (!lk_cuda_tc_t2_pre_make(op.stream(), &c, h->tc)) {
            e = cudaGetLastError();
            if (e == cudaSuccess)
                e = cudaErrorLaunchFailure;
        }
        (void)lk_pdl_fence(op.stream()); /* as every write of a handle (launch.cuh) */
    }
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(op.stream());
    if (e != cudaSuccess) {
        (void)cudaFree(h->tc);
        (void)cudaFree(h->w);
        free(h);
        return lk_cuda_fail(op.q->dev->host, e, "lk_weights_prepare");
    }
    *out = h;
    return LK_OK;
}

extern "C" lk_status lk_cuda_ternary_linear(void *queue, const lk_linear_args *la)
{
    lk_op_scope op(queue, "lk_ternary_linear");
    if (!op.ok())
        return op.status();
    const lk_cuda_weights *h = (const lk_cuda_weights *)la->prepared;
    lk_qgemm_args q;
    memset(&q, 0, sizeof q);
    q.m = la->m;
    q.n = h->n;
    q.k = h->k;
    q.x = la->x;
    q.x_scale = la->x_scale;
    q.y = la->y;
    q.flags = la->flags;
    q.w = lk_mat(h->w, LK_T2, h->n, h->k);
    q.w.ld = h->ldw;
    q.w_scale = lk_mat(h->scale, LK_F32, 1, h->scale_n);
    t2_run(op, &q, 1, h->tc);
    return op.launched();
}
