/* Lockstep CUDA: ternary and int8 GEMM on the int8 tensor cores
 * (docs/numerics.md section 9 and "Tensor-core tier", integer MMA).
 *
 * acc[m, n] = sum_k x[m, k] * w[n, k] with mma.sync m16n8k32 s8 x s8 into
 * s32.  Integer MMA is exact and the core's K limits keep |acc| and every
 * partial sum inside int32 (ternary: |x w| <= 256, K <= 2^23; int8:
 * |a b| <= 2^14, K < 2^17), so the order of the k steps is free and the
 * result is section 9's acc bit for bit; the epilogue is the SIMT
 * kernels' (lk_qgemm_store).
 *
 * A block computes a BM x BN tile in slices of 128 k through a cp.async
 * pipeline of STAGES slices (plain loads when a row is not 16-byte
 * aligned).  x (and int8 w) go to shared memory as they are and reach the
 * MMA through ldmatrix.  LK_T2 weights go to shared memory packed, 32
 * bytes per row and slice, and each warp decodes its B fragments from
 * there: a thread's fragment bytes are byte tig of consecutive words,
 * gathered with byte permutes and expanded four codes to four int8 values
 * code - 1 in a few SIMD-in-a-word operations.  Past K, x is zero (zero
 * fill), so whatever codes lie there add nothing.
 *
 * On sm_90 (an sm_90a build, rows 16-byte aligned) the int8 wgmma kernel
 * of tc/wgmma_int8.cu runs instead.
 *
 * LOCKSTEP_CUDA_TC_INT_KERNEL=128x128, 64x128, 64x64 (each also with
 * -generic: the plain loader) forces an mma.sync variant, =mma.sync the
 * automatic mma.sync choice, =wgmma, wgmma-n64, wgmma-n128, wgmma-n256 the wgmma
 * kernel (where it does not apply: the automatic mma.sync choice),
 * =wgmma-ra, wgmma-ra-x96, wgmma-ra-x128, wgmma-ra-x256 (LK_T2 only;
 * int8: the wgmma kernel) the kernel with the weights decoded in
 * registers, each with -sN to split K over clusters of N (1..8) blocks
 * per tile (-s1: no split); =simt
 * leaves the call to the dp4a kernels (tests compare them). */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc_ptx.cuh"
#include "backends/cuda/tc/ternary.cuh"
#include "backends/cuda/tc/wgmma.cuh"

#ifndef LK_TC_WGMMA_RA_AUTO
/* 1: sm_90 ternary takes tc/wgmma_int8.cu's weights-as-A kernel ("wgmma-ra")
 * unless a variant is forced.  On the H200 it was as fast as
 * or faster than the kernel that decodes the codes into shared memory on
 * every BitNet shape at M = 512 and 2048 (up to 1.25x at 2048x2560x6912). */
#define LK_TC_WGMMA_RA_AUTO 1
#endif

#ifndef LK_TC_WGMMA_INT_AUTO
#define LK_TC_WGMMA_INT_AUTO 1 /* sm_90 takes int8 wgmma unless a variant is forced */
#endif

namespace {

#define TQ_BK 128            /* k per slice: bytes of an x row */
#define TQ_XS (TQ_BK + 16)   /* smem row stride of x and int8 w: ldmatrix without bank conflicts */
#define TQ_TS (TQ_BK / 4 + 16) /* smem row stride of packed codes: 48 bytes, conflict-free */
#define TQ_MIN_M 9           /* M <= 8 is the GEMV kernels' */

template <bool T2, int BM, int BN, int STAGES> constexpr size_t tq_smem()
{
    return (size_t)STAGES * ((size_t)BM * TQ_XS + (size_t)BN * (T2 ? TQ_TS : TQ_XS));
}

__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* WARPS_M x WARPS_N warps, each a (BM / WARPS_M) x (BN / WARPS_N) tile of
 * m16n8 accumulators.  FAST: cp.async (x and w rows 16-byte aligned). */
template <bool T2, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool FAST>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32) tq_kernel(lk_qgemm_args q)
{
    lk_pdl_wait();
    lk_pdl_trigger();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    constexpr int NT = WARPS_M * WARPS_N * 32;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    constexpr int MI = WM / 16, NI = WN / 8;
    constexpr int WS = T2 ? TQ_TS : TQ_XS;
    static_assert(NI % 2 == 0, "int8 B fragments are loaded two n8 blocks at a time");
    static_assert(STAGES >= 2, "a pipeline");
    extern __shared__ __align__(16) unsigned char tq_smem_buf[];
    unsigned char *const xs0 = tq_smem_buf;
    unsigned char *const ws0 = tq_smem_buf + (size_t)STAGES * BM * TQ_XS;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int tig = lane & 3, grp = lane >> 2;
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
    const int64_t M = q.m, N = q.n, K = q.k;
    const int64_t ktiles = (K + TQ_BK - 1) / TQ_BK;
    const int8_t *const X = (const int8_t *)q.x.data;
    const int64_t ldx = q.x.ld;
    const uint8_t *const W = (const uint8_t *)q.w.data;
    const int64_t ldw = T2 ? q.w.ld / 4 : q.w.ld; /* bytes per weight row */
    const int64_t wbytes = T2 ? (K + 3) / 4 : K;  /* bytes of a weight row that exist */

    auto load = [&](int64_t kt, int s) {
        const int64_t k0 = kt * TQ_BK;
        unsigned char *xs = xs0 + (size_t)s * BM * TQ_XS;
        unsigned char *ws = ws0 + (size_t)s * BN * WS;
        constexpr int WB = T2 ? TQ_BK / 4 : TQ_BK; /* weight bytes per row and slice */
        const int64_t wk0 = T2 ? k0 / 4 : k0;
        if (FAST) {
            for (int i = tid; i < BM * (TQ_BK / 16); i += NT) {
                const int r = i / (TQ_BK / 16), c = (i % (TQ_BK / 16)) * 16;
                const int64_t m = m0 + r, k = k0 + c;
                int bytes = 0;
                const void *src = X;
                if (m < M && k < K) {
                    bytes = K - k >= 16 ? 16 : (int)(K - k);
                    src = X + m * ldx + k;
                }
                lk_cp_async16(lk_smem_addr(xs + r * TQ_XS + c), src, bytes);
            }
            for (int i = tid; i < BN * (WB / 16); i += NT) {
                const int r = i / (WB / 16), c = (i % (WB / 16)) * 16;
                const int64_t n = n0 + r, b = wk0 + c;
                int bytes = 0;
                const void *src = W;
                if (n < N && b < wbytes) {
                    bytes = wbytes - b >= 16 ? 16 : (int)(wbytes - b);
                    src = W + n * ldw + b;
                }
                lk_cp_async16(lk_smem_addr(ws + r * WS + c), src, bytes);
            }
        } else {
            for (int i = tid; i < BM * (TQ_BK / 4); i += NT) {
                const int r = i / (TQ_BK / 4), c = (i % (TQ_BK / 4)) * 4;
                const int64_t m = m0 + r, k = k0 + c;
                uint32_t word = 0;
                if (m < M)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (k + e < K)
                            word |= (uint32_t)(uint8_t)X[m * ldx + k + e] << (8 * e);
                *reinterpret_cast<uint32_t *>(xs + r * TQ_XS + c) = word;
            }
            for (int i = tid; i < BN * (WB / 4); i += NT) {
                const int r = i / (WB / 4), c = (i % (WB / 4)) * 4;
                const int64_t n = n0 + r, b = wk0 + c;
                uint32_t word = 0;
                if (n < N)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        if (b + e < wbytes)
                            word |= (uint32_t)W[n * ldw + b + e] << (8 * e);
                *reinterpret_cast<uint32_t *>(ws + r * WS + c) = word;
            }
        }
    };

    int acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                acc[i][j][r] = 0;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < ktiles)
            load(s, s);
        lk_cp_async_commit();
    }
    /* bytes tig and tig + 4 of a word pair: a thread's B fragment bytes */
    const uint32_t gsel = (uint32_t)tig | (uint32_t)(tig + 4) << 4;
    for (int64_t kt = 0; kt < ktiles; kt++) {
        lk_cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            /* the slot being refilled was read in step kt - 1, which every
             * thread finished before the barrier */
            const int64_t nk = kt + STAGES - 1;
            if (nk < ktiles)
                load(nk, (int)(nk % STAGES));
            lk_cp_async_commit();
        }
        const int s = (int)(kt % STAGES);
        const unsigned char *xs = xs0 + (size_t)s * BM * TQ_XS;
        const unsigned char *ws = ws0 + (size_t)s * BN * WS;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            /* B fragments of k32 steps 2h and 2h + 1: bfr[j][2 (step - 2h) + reg] */
            uint32_t bfr[NI][4];
            if (T2) {
#pragma unroll
                for (int j = 0; j < NI; j++) {
                    const int r = wn * WN + j * 8 + grp;
                    const uint4 v = *reinterpret_cast<const uint4 *>(ws + r * TQ_TS + 16 * h);
                    const uint32_t g = __byte_perm(__byte_perm(v.x, v.y, gsel),
                                                   __byte_perm(v.z, v.w, gsel), 0x5410);
                    lk_t2_expand(g, bfr[j]);
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < 2; kk++)
#pragma unroll
                    for (int j = 0; j < NI; j += 2) {
                        const int r = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3);
                        const int c = (2 * h + kk) * 32 + ((lane >> 3) & 1) * 16;
                        uint32_t t[4];
                        lk_ldmatrix_x4(lk_smem_addr(ws + r * TQ_XS + c), t);
                        bfr[j][2 * kk] = t[0];
                        bfr[j][2 * kk + 1] = t[1];
                        bfr[j + 1][2 * kk] = t[2];
                        bfr[j + 1][2 * kk + 1] = t[3];
                    }
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++) {
                uint32_t af[MI][4];
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const int r = wm * WM + i * 16 + (lane & 15);
                    const int c = (2 * h + kk) * 32 + (lane >> 4) * 16;
                    lk_ldmatrix_x4(lk_smem_addr(xs + r * TQ_XS + c), af[i]);
                }
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int j = 0; j < NI; j++)
                        mma_s8(acc[i][j], af[i], bfr[j][2 * kk], bfr[j][2 * kk + 1]);
            }
        }
    }
    lk_cp_async_wait<0>();

#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < NI; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int64_t m = m0 + wm * WM + i * 16 + grp + (r >> 1) * 8;
                const int64_t n = n0 + wn * WN + j * 8 + tig * 2 + (r & 1);
                if (m < M && n < N)
                    lk_qgemm_store(q, m, n, acc[i][j][r]);
            }
#endif
}

template <bool T2, int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool FAST>
bool tq_launch(const lk_cuda_device *dev, const lk_qgemm_args &q, cudaStream_t st)
{
    constexpr size_t smem = tq_smem<T2, BM, BN, STAGES>();
    if (smem > dev->smem_optin && smem > 48 * 1024)
        return false;
    if (lk_smem_optin<tq_kernel<T2, BM, BN, WARPS_M, WARPS_N, STAGES, FAST> >(dev->ordinal,
                                                                           smem) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    const int64_t gx = (q.n + BN - 1) / BN;
    if (gx > 2147483647)
        return false;
    const int64_t rows_per_launch = (int64_t)65535 * BM;
    for (int64_t m0 = 0; m0 < q.m; m0 += rows_per_launch) {
        lk_qgemm_args s = q;
        s.m = q.m - m0 < rows_per_launch ? q.m - m0 : rows_per_launch;
        s.x.data = (int8_t *)q.x.data + m0 * q.x.ld;
        s.y.data = (char *)q.y.data + m0 * q.y.ld * (int64_t)lk_dtype_bytes(q.y.dtype);
        if (q.x_scale.data)
            s.x_scale.data = (float *)q.x_scale.data + m0 * q.x_scale.ld;
        const int64_t gy = (s.m + BM - 1) / BM;
        lk_launch(tq_kernel<T2, BM, BN, WARPS_M, WARPS_N, STAGES, FAST>,
                  dim3((unsigned)gx, (unsigned)gy), WARPS_M * WARPS_N * 32, smem, st, s);
    }
    return true;
}

enum tq_variant { TQ_128x128, TQ_64x128, TQ_64x64 };

template <bool T2, bool FAST>
bool tq_run(tq_variant v, const lk_cuda_device *dev, const lk_qgemm_args &q, cudaStream_t st)
{
    switch (v) {
    case TQ_128x128:
        return tq_launch<T2, 128, 128, 2, 4, T2 ? 3 : 2, FAST>(dev, q, st);
    case TQ_64x128:
        return tq_launch<T2, 64, 128, 1, 4, 3, FAST>(dev, q, st);
    default:
        return tq_launch<T2, 64, 64, 2, 2, 3, FAST>(dev, q, st);
    }
}

} // namespace

bool lk_cuda_tc_qgemm(lk_cuda_queue *queue, const lk_qgemm_args *a, bool t2, const void *pre)
{
    const lk_cuda_device *dev = queue->dev;
    const char *force = getenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
    if (dev->cc_major < 8 || a->m < TQ_MIN_M || (force && strcmp(force, "simt") == 0))
        return false;
    /* sm_90: int8 wgmma (tc/wgmma_*.cu) where its alignment and build allow,
     * unless an mma.sync variant is forced */
    const bool want_wgmma = force && *force ? strncmp(force, "wgmma", 5) == 0
                                            : LK_TC_WGMMA_INT_AUTO;
    /* automatic: LK_T2 on the weights-as-A kernel (which splits K where
     * its tiles are few); int8 on the x-as-A kernel, with 128 x 64 tiles
     * where 128 x 128 ones would fill fewer than half the SMs */
    const int64_t sms = dev->sm_count > 0 ? dev->sm_count : 1;
    const bool few = ((a->n + 127) / 128) * ((a->m + 127) / 128) * 2 < sms;
    if (want_wgmma && t2 &&
        (force && *force ? strncmp(force, "wgmma-ra", 8) == 0 : LK_TC_WGMMA_RA_AUTO)) {
        const int bx = !force                 ? 0
                       : strstr(force, "x128") ? 128
                       : strstr(force, "x256") ? 256
                       : strstr(force, "x96")  ? 96
                                               : 0;
        const char *sp = force ? strstr(force, "-s") : NULL;
        const int split = sp ? atoi(sp + 2) : 0;
        if (lk_cuda_tc_wgmma_ternary_ra(queue, a, pre, bx, split < 0 ? 0 : split))
            return true;
    }
    if (want_wgmma) {
        const bool forced = force && *force;
        const int bn = !forced && few ? 64
                       : !forced      ? 0
                       : strstr(force, "n128") ? 128
                       : strstr(force, "n256") ? 256
                       : strstr(force, "n64")  ? 64
                                               : 0;
        if (lk_cuda_tc_wgmma_qgemm(queue, a, t2, bn))
            return true;
    }
    bool fast = (uintptr_t)a->x.data % 16 == 0 && a->x.ld % 16 == 0;
    if (t2)
        fast = fast && (uintptr_t)a->w.data % 16 == 0 && (a->w.ld / 4) % 16 == 0;
    else
        fast = fast && (uintptr_t)a->w.data % 16 == 0 && a->w.ld % 16 == 0;
    /* the tile with the least work on the busiest SM: blocks per SM
     * (rounded up) x tile area x a cost for the smaller tiles' extra
     * shared-memory traffic per MMA */
    auto cost = [&](int bm, int bn, double f) {
        const int64_t blocks = ((a->m + bm - 1) / bm) * ((a->n + bn - 1) / bn);
        return (double)((blocks + sms - 1) / sms) * bm * bn * f;
    };
    const double c128 = cost(128, 128, 1.0), c64x128 = cost(64, 128, 1.15),
                 c64 = cost(64, 64, 1.3);
    tq_variant v = c128 <= c64x128 && c128 <= c64 ? TQ_128x128
                   : c64x128 <= c64                ? TQ_64x128
                                                   : TQ_64x64;
    if (force && *force && strncmp(force, "wgmma", 5) != 0 && strcmp(force, "mma.sync") != 0) {
        v = strncmp(force, "128x128", 7) == 0  ? TQ_128x128
            : strncmp(force, "64x128", 6) == 0 ? TQ_64x128
                                               : TQ_64x64;
        if (strstr(force, "generic"))
            fast = false;
    }
    const cudaStream_t st = queue->stream;
    if (t2)
        return fast ? tq_run<true, true>(v, dev, *a, st) : tq_run<true, false>(v, dev, *a, st);
    return fast ? tq_run<false, true>(v, dev, *a, st) : tq_run<false, false>(v, dev, *a, st);
}
