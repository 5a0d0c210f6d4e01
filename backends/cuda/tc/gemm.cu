/* Lockstep CUDA: GEMM in the tensor-core tier (docs/numerics.md,
 * "Tensor-core tier"), bf16 x bf16 or f16 x f16 with f32 accumulation.
 *
 * mma.sync.aligned.m16n8k16 with ldmatrix operands and a two-stage
 * shared-memory pipeline (cp.async when A is M x K and B is N x K with
 * 16-byte aligned rows, plain loads otherwise).  Whatever the tile shape
 * or loader, every output element gets the contract's sequence: one MMA
 * step per 16 k, ascending, from an accumulator of +0, exactly
 * ceil(K / 16) steps (a stage's second step is skipped past K, the last
 * step's k >= K are zeros), then the epilogue of section 4.  So the bits
 * are those of the GPU's MMA arithmetic and never depend on M, N, the
 * tile or the loader -- backends/ref/mma_model.c reproduces them.
 *
 * The tier is tied to the arithmetic: LK_GEMM_TC_SM80 runs on sm_80/86/89
 * (m16n8k16 as two k = 8 halves, 24 fractional bits), LK_GEMM_TC_SM90 on
 * sm_90 (one fused k = 16 step, 25 bits; Hopper's mma.sync is taken to
 * follow the wgmma arithmetic, as MMA-Sim found: tests/test_tc.c prints
 * which model the GPU matches).  Another GPU refuses the call.
 *
 * On sm_90 the tier runs on wgmma (tc/wgmma_gemm.cu) where it applies: A as
 * M x K and B as N x K with 16-byte aligned rows, and a module with sm_90a
 * code; these mma.sync kernels take everything else.
 *
 * LOCKSTEP_CUDA_TC_KERNEL=128x128, 64x64, 128x128-generic or
 * 64x64-generic forces an mma.sync variant, wgmma or wgmma-<bm>x<bn> (bm
 * 128: bn 256, 192, 160, 128, 80 or 64; bm 64: bn 256, 128, 64 or 48; a
 * suffix c2 runs it in clusters of two blocks that share one operand's
 * loads, k2 or k4 with 2 or 4 64-k slices a pipeline stage), wgmma-split
 * or wgmma-nosplit (the chosen tile, split into two launches by columns
 * whenever its last wave is partial, or never) a wgmma one (where it applies; mma.sync otherwise); tests use it
 * to cover each one. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/tc/wgmma.cuh"

#ifndef LK_TC_WGMMA_AUTO
#define LK_TC_WGMMA_AUTO 1 /* sm_90 takes wgmma unless a variant is forced */
#endif

namespace {

#define TC_BK 32
#define TC_PAD 8 /* halves of padding per smem row: rows 80 bytes apart, no bank conflicts for ldmatrix */
#define TC_LDS (TC_BK + TC_PAD)

struct tc_kargs {
    const uint16_t *a; /* op(A)[m, k]: ta ? a[k * lda + m] : a[m * lda + k] */
    int64_t lda, a_bs;
    const uint16_t *b; /* op(B)[k, n]: tb ? b[n * ldb + k] : b[k * ldb + n] */
    int64_t ldb, b_bs;
    int ta, tb;
    int64_t M, N, K, batch;
    lk_gemm_epi e;
};

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t (&r)[4])
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

template <lk_dtype D> struct tc_mma;

template <> struct tc_mma<LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4],
                                               uint32_t b0, uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

template <> struct tc_mma<LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[4], const uint32_t (&a)[4],
                                               uint32_t b0, uint32_t b1)
    {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

/* Block tile BM x BN, warps WARPS_M x WARPS_N, each a (BM / WARPS_M) x
 * (BN / WARPS_N) warp tile of m16n8 MMAs.  FAST: cp.async loader. */
template <lk_dtype D, int BM, int BN, int WARPS_M, int WARPS_N, bool FAST>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32)
    tc_gemm_kernel(tc_kargs g)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    constexpr int NT = WARPS_M * WARPS_N * 32;
    constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
    constexpr int MI = WM / 16, NI = WN / 8;
    static_assert(NI % 2 == 0, "B fragments are loaded two n8 blocks at a time");
    __shared__ __align__(16) uint16_t As[2][BM][TC_LDS];
    __shared__ __align__(16) uint16_t Bs[2][BN][TC_LDS];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int64_t m0 = (int64_t)blockIdx.y * BM, n0 = (int64_t)blockIdx.x * BN;
    const int64_t ktiles = (g.K + TC_BK - 1) / TC_BK;

    for (int64_t bat = blockIdx.z; bat < g.batch; bat += gridDim.z) {
        const uint16_t *A = g.a + bat * g.a_bs;
        const uint16_t *B = g.b + bat * g.b_bs;

        /* stage kt into buffer s: A rows m0.., B rows (n) n0.., k contiguous */
        auto load = [&](int64_t kt, int s) {
            const int64_t k0 = kt * TC_BK;
            if (FAST) {
                constexpr int CH = TC_BK / 8; /* 16-byte chunks per row */
                for (int i = tid; i < BM * CH; i += NT) {
                    const int r = i / CH, c = (i % CH) * 8;
                    const int64_t m = m0 + r, k = k0 + c;
                    int bytes = 0;
                    const uint16_t *src = A;
                    if (m < g.M && k < g.K) {
                        const int64_t left = g.K - k;
                        bytes = left >= 8 ? 16 : (int)left * 2;
                        src = A + m * g.lda + k;
                    }
                    cp_async16(smem_addr(&As[s][r][c]), src, bytes);
                }
                for (int i = tid; i < BN * CH; i += NT) {
                    const int r = i / CH, c = (i % CH) * 8;
                    const int64_t n = n0 + r, k = k0 + c;
                    int bytes = 0;
                    const uint16_t *src = B;
                    if (n < g.N && k < g.K) {
                        const int64_t left = g.K - k;
                        bytes = left >= 8 ? 16 : (int)left * 2;
                        src = B + n * g.ldb + k;
                    }
                    cp_async16(smem_addr(&Bs[s][r][c]), src, bytes);
                }
            } else {
                for (int i = tid; i < BM * TC_BK; i += NT) {
                    /* let consecutive threads read consecutive addresses */
                    const int r = g.ta ? i % BM : i / TC_BK, c = g.ta ? i / BM : i % TC_BK;
                    const int64_t m = m0 + r, k = k0 + c;
                    uint16_t v = 0;
                    if (m < g.M && k < g.K)
                        v = g.ta ? A[k * g.lda + m] : A[m * g.lda + k];
                    As[s][r][c] = v;
                }
                for (int i = tid; i < BN * TC_BK; i += NT) {
                    const int r = g.tb ? i / TC_BK : i % BN, c = g.tb ? i % TC_BK : i / BN;
                    const int64_t n = n0 + r, k = k0 + c;
                    uint16_t v = 0;
                    if (n < g.N && k < g.K)
                        v = g.tb ? B[n * g.ldb + k] : B[k * g.ldb + n];
                    Bs[s][r][c] = v;
                }
            }
        };

        float acc[MI][NI][4];
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++)
#pragma unroll
                for (int r = 0; r < 4; r++)
                    acc[i][j][r] = 0.0f;

        load(0, 0);
        cp_async_commit();
        for (int64_t kt = 0; kt < ktiles; kt++) {
            const int s = (int)(kt & 1);
            if (kt + 1 < ktiles)
                load(kt + 1, s ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
#pragma unroll
            for (int ks = 0; ks < TC_BK; ks += 16) {
                /* exactly ceil(K / 16) steps: a step wholly past K would
                 * turn an accumulator of -0 into +0 */
                if (kt * TC_BK + ks >= g.K)
                    break;
                uint32_t af[MI][4], bfr[NI][2];
#pragma unroll
                for (int i = 0; i < MI; i++) {
                    const int r = wm * WM + i * 16 + (lane & 15);
                    const int c = ks + (lane >> 4) * 8;
                    ldmatrix_x4(smem_addr(&As[s][r][c]), af[i]);
                }
#pragma unroll
                for (int j = 0; j < NI; j += 2) {
                    const int r = wn * WN + j * 8 + (lane & 7) + ((lane >> 4) << 3);
                    const int c = ks + ((lane >> 3) & 1) * 8;
                    uint32_t t[4];
                    ldmatrix_x4(smem_addr(&Bs[s][r][c]), t);
                    bfr[j][0] = t[0];
                    bfr[j][1] = t[1];
                    bfr[j + 1][0] = t[2];
                    bfr[j + 1][1] = t[3];
                }
#pragma unroll
                for (int i = 0; i < MI; i++)
#pragma unroll
                    for (int j = 0; j < NI; j++)
                        tc_mma<D>::run(acc[i][j], af[i], bfr[j][0], bfr[j][1]);
            }
            __syncthreads();
        }
        cp_async_wait<0>();

#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
            for (int j = 0; j < NI; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    const int64_t m = m0 + wm * WM + i * 16 + (lane >> 2) + (r >> 1) * 8;
                    const int64_t n = n0 + wn * WN + j * 8 + (lane & 3) * 2 + (r & 1);
                    if (m < g.M && n < g.N)
                        lk_gemm_store(g.e, bat, m, n, acc[i][j][r]);
                }
        __syncthreads(); /* the next batch entry reuses the buffers */
    }
}

/* 16-byte rows for cp.async: k-contiguous layouts, aligned starts. */
bool tc_fast_ok(const lk_gemm_args *a)
{
    if (a->ta != LK_NO_TRANS || a->tb != LK_TRANS)
        return false;
    if (a->a.ld % 8 || a->b.ld % 8 || ((uintptr_t)a->a.data & 15) || ((uintptr_t)a->b.data & 15))
        return false;
    if (a->batch > 1 && (a->a.batch_stride % 8 || a->b.batch_stride % 8))
        return false;
    return true;
}

template <lk_dtype D, int BM, int BN, int WARPS_M, int WARPS_N>
void tc_launch(const tc_kargs &g, bool fast, cudaStream_t stream)
{
    const dim3 grid((unsigned)((g.N + BN - 1) / BN), (unsigned)((g.M + BM - 1) / BM),
                    lk_grid_cap(g.batch, 65535));
    if (fast)
        lk_launch(tc_gemm_kernel<D, BM, BN, WARPS_M, WARPS_N, true>, grid, WARPS_M * WARPS_N * 32, 0,
                  stream, g);
    else
        lk_launch(tc_gemm_kernel<D, BM, BN, WARPS_M, WARPS_N, false>, grid, WARPS_M * WARPS_N * 32, 0,
                  stream, g);
}

} // namespace

extern "C" lk_status lk_cuda_gemm_tc(void *queue, const lk_gemm_args *a)
{
    lk_op_scope op(queue, "lk_gemm");
    if (!op.ok())
        return op.status();
    const lk_cuda_device *dev = op.q->dev;
    const unsigned tier = a->flags & (LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90);
    const bool sm80 = dev->cc_major == 8, sm90 = dev->cc_major == 9 && dev->cc_minor == 0;
    if ((tier == LK_GEMM_TC_SM80 && !sm80) || (tier == LK_GEMM_TC_SM90 && !sm90))
        return op.fail(LK_ERR_UNSUPPORTED,
                       "lk_gemm: %s needs an %s GPU; %s is sm_%d%d, whose tensor cores %s",
                       tier == LK_GEMM_TC_SM80 ? "LK_GEMM_TC_SM80" : "LK_GEMM_TC_SM90",
                       tier == LK_GEMM_TC_SM80 ? "sm_80, sm_86 or sm_89" : "sm_90",
                       dev->props.name, dev->cc_major, dev->cc_minor,
                       sm80   ? "follow LK_GEMM_TC_SM80 (any CPU device computes the other)"
                       : sm90 ? "follow LK_GEMM_TC_SM90 (any CPU device computes the other)"
                              : "have no model here (a CPU device computes either tier)");
    if ((a->n + 63) / 64 > 2147483647 || (a->m + 63) / 64 > 65535)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_gemm: M = %lld is more than 65535 64-row tiles",
                       (long long)a->m);

    tc_kargs g;
    g.a = (const uint16_t *)a->a.data;
    g.lda = a->a.ld;
    g.a_bs = a->a.batch_stride;
    g.b = (const uint16_t *)a->b.data;
    g.ldb = a->b.ld;
    g.b_bs = a->b.batch_stride;
    g.ta = a->ta == LK_TRANS;
    g.tb = a->tb == LK_TRANS;
    g.M = a->m;
    g.N = a->n;
    g.K = a->k;
    g.batch = a->batch;
    g.e = lk_gemm_epi_make(a);

    const char *force = getenv("LOCKSTEP_CUDA_TC_KERNEL");
    /* sm_90: wgmma (tc/wgmma_gemm.cu) where its layout and build allow; by
     * default only with LK_TC_WGMMA_AUTO (the switch, should a GPU run
     * find it wrong: LOCKSTEP_CUDA_TC_KERNEL=wgmma still reaches it) */
    const bool want_wgmma = force && *force ? strncmp(force, "wgmma", 5) == 0 : LK_TC_WGMMA_AUTO;
    if (sm90 && want_wgmma) {
        /* "wgmma-<bm>x<bn>" forces a tile (one lk_cuda_tc_wgmma has);
         * suffixes c2 (clusters of two) and k2 or k4 (64-k slices a
         * stage) */
        const char *x = force ? strchr(force, 'x') : NULL;
        const int bm = x && strncmp(force, "wgmma-64x", 9) == 0 ? 64 : 128;
        const int bn = !x ? 0 : atoi(x + 1);
        const int cl = x && strstr(x, "c2") ? 2 : 1;
        const int ks = x && strstr(x, "k4") ? 4 : x && strstr(x, "k2") ? 2 : 1;
        /* "wgmma-split" / "wgmma-nosplit": the chosen tile, its columns
         * split into two launches whenever the last wave is partial / never */
        const int split = force && strcmp(force, "wgmma-split") == 0     ? 2
                          : force && strcmp(force, "wgmma-nosplit") == 0 ? 0
                                                                         : 1;
        if (lk_cuda_tc_wgmma(op.q, a, bm, bn, cl, ks, split))
            return op.launched();
    }
    bool fast = tc_fast_ok(a);
    /* the large tile when it still gives the GPU a few waves of blocks */
    bool large = ((a->m + 127) / 128) * ((a->n + 127) / 128) * a->batch >= 2 * (int64_t)dev->sm_count &&
                 (a->m + 127) / 128 <= 65535;
    if (force && *force && strncmp(force, "wgmma", 5) != 0) {
        large = strncmp(force, "128x128", 7) == 0;
        if (strstr(force, "generic"))
            fast = false;
    }
    if (a->a.dtype == LK_BF16) {
        if (large)
            tc_launch<LK_BF16, 128, 128, 2, 4>(g, fast, op.stream());
        else
            tc_launch<LK_BF16, 64, 64, 2, 2>(g, fast, op.stream());
    } else {
        if (large)
            tc_launch<LK_F16, 128, 128, 2, 4>(g, fast, op.stream());
        else
            tc_launch<LK_F16, 64, 64, 2, 2>(g, fast, op.stream());
    }
    return op.launched();
}
