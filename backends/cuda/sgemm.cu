/* Lockstep CUDA: the f32 x f32 GEMM of the SIMT tier with a three-stage
 * shared-memory pipeline (docs/numerics.md section 4; gemm.cu has the
 * kernel for every other dtype mix and for unaligned rows).
 *
 * The arithmetic is gemm.cu's, element for element: a block computes a
 * 128 x 128 tile with 256 threads, 8 x 8 outputs each (rows ty * 4 + i
 * and 64 + ty * 4 + i, columns likewise), acc = fma(a_k, b_k, acc) from
 * +0 for the 128 k of a contract block, k ascending, then total = acc for
 * the first block and total + acc for the next ones, then the epilogue.
 * Only the staging differs, so the bits are the same whichever kernel
 * runs (tests/test_cuda runs both against the reference).
 *
 * Staging: slices of 8 k in three shared-memory stages, one barrier per
 * slice.  B rows (K x N, the common layout) go straight from global to
 * shared memory by 16-byte cp.async, zero-filled outside the matrix; A
 * (and B stored N x K) is read one slice ahead into registers and
 * transposed into its k-major stage.  The next k's operands are read
 * from shared memory while the current k's 64 fmas issue.  The previous
 * kernel's slices were double-buffered through registers only, and the
 * compiler, at its 128-register cap, moved their global loads next to
 * the stores, so every slice waited for memory: 0.70 of cuBLAS SGEMM at
 * 4096^3 against 0.90 for this staging in a standalone probe on the
 * H200 (docs/internals/cuda-kernels.md).
 *
 * Padding: k >= K reads a = -0 and b = +0, whose product -0 leaves every
 * acc as it is (gemm.cu pads with +0 and -0, the same product); rows and
 * columns past M and N compute values nobody stores. */
#include "backends/cuda/gemm.cuh"

namespace {

#define SG_BM 128
#define SG_BN 128
#define SG_BK 8
#define SG_ST 3                 /* stages */
#define SG_PA (SG_BM + 4)       /* A stage row pitch: the transposed stores spread over banks */
#define SG_AS (SG_BK * SG_PA)   /* floats of an A stage */
#define SG_STF (SG_AS + SG_BK * SG_BN) /* floats of a stage, A then B */
#define SG_THREADS 256
#define SG_GROUP_M 8
#define SG_SMEM ((size_t)(SG_ST * SG_STF + 64 * SG_THREADS) * sizeof(float)) /* stages, totals */

struct sg_args {
    const float *a, *b;
    int64_t lda, a_bs, ldb, b_bs;
    int64_t M, N, K, batch, tiles_m, tiles_n;
    lk_gemm_epi e;
    int vec_c; /* C f32, no bias, no accumulate, rows 16-byte aligned: float4 stores */
};

__device__ __forceinline__ unsigned sg_smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* 16 bytes to shared memory, of which the first `bytes` (0, 4, 8, 12 or
 * 16) come from src and the rest are zero. */
__device__ __forceinline__ void sg_cp16(unsigned dst, const float *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void sg_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void sg_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* A slice's element group of op(A) or op(B): four elements along the
 * stored rows from p, the group's first k being k.  KC (k-contiguous): p
 * is one row, k .. k + 3 along it; otherwise four rows' elements of row k
 * of the stored matrix.  rl: how many of the group's rows (KC: of its one
 * row) are inside, 0 to 4.  Whole groups inside are one 16-byte load; the
 * edges go element by element, pad past K, 0 past the rows. */
template <bool KC>
__device__ __forceinline__ float4 sg_ld4(const float *p, int rl, int k, int K, float pad)
{
    if (KC ? rl > 0 && k + 3 < K : k < K && rl == 4)
        return __ldg(reinterpret_cast<const float4 *>(p));
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        v[j] = (KC ? k + j >= K : k >= K) ? pad : (KC ? rl > 0 : j < rl) ? __ldg(p + j) : 0.0f;
    return make_float4(v[0], v[1], v[2], v[3]);
}

/* TA: A stored K x M (op(A) = A^T); TB: B stored N x K. */
template <bool TA, bool TB>
__global__ void __launch_bounds__(SG_THREADS, 2) sgemm_kernel(sg_args g)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    extern __shared__ __align__(16) float sg_sm[];
    float *tot_s = sg_sm + SG_ST * SG_STF;
    const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;

    int64_t tm, tn;
    lk_gemm_tile(blockIdx.x, g.tiles_m, g.tiles_n, SG_GROUP_M, &tm, &tn);
    const int64_t m0 = tm * SG_BM, n0 = tn * SG_BN;
    const int nsl = (int)((g.K + SG_BK - 1) / SG_BK), nkb = (int)((g.K + LK_KB - 1) / LK_KB);
    constexpr int SPB = LK_KB / SG_BK;

    /* This thread's element group of a slice.  k-contiguous operands
     * (A, or B stored N x K): row tid / 2 of the tile, k (tid & 1) * 4;
     * the others: k tid / 32, row (tid & 31) * 4. */
    const int a_r = TA ? (tid & 31) * 4 : tid >> 1, a_k = TA ? tid >> 5 : (tid & 1) * 4;
    const int b_r = TB ? tid >> 1 : (tid & 31) * 4, b_k = TB ? (tid & 1) * 4 : tid >> 5;
    const unsigned sbase = sg_smem_addr(sg_sm);

    const int K = (int)g.K; /* lk_cuda_sgemm: below 2^31 - SG_BK */

    for (int64_t bi = blockIdx.y; bi < g.batch; bi += gridDim.y) {
        const float *A = g.a + bi * g.a_bs, *B = g.b + bi * g.b_bs;
        /* Every slice is read once, in order: running pointers and k */
        const int64_t ar = m0 + a_r, br = n0 + b_r;
        const float *pa = TA ? A + (int64_t)a_k * g.lda + ar : A + ar * g.lda + a_k;
        const float *pb = TB ? B + br * g.ldb + b_k : B + (int64_t)b_k * g.ldb + br;
        const int64_t sa = TA ? SG_BK * g.lda : SG_BK, sb = TB ? SG_BK : SG_BK * g.ldb;
        int ka = a_k, kb_ = b_k;
        /* rows of the groups inside the matrices, 0 to 4 */
        const int arl = g.M - ar >= 4 ? 4 : g.M - ar > 0 ? (int)(g.M - ar) : 0;
        const int brl = g.N - br >= 4 ? 4 : g.N - br > 0 ? (int)(g.N - br) : 0;
        const unsigned sdst = sbase + (unsigned)((SG_AS + b_k * SG_BN + b_r) * 4);
        float4 ra, rb;
        auto ld_a = [&]() { /* the next slice of A into ra */
            ra = sg_ld4<!TA>(pa, arl, ka, K, -0.0f);
            pa += sa;
            ka += SG_BK;
        };
        auto ld_b = [&]() { /* TB: the next slice of B into rb */
            rb = sg_ld4<TB>(pb, brl, kb_, K, 0.0f);
            pb += sb;
            kb_ += SG_BK;
        };
        auto st_a = [&](int stage) { /* ra into A's stage, k-major */
            float *as = sg_sm + stage * SG_STF;
            if (TA) {
                *reinterpret_cast<float4 *>(as + a_k * SG_PA + a_r) = ra;
            } else {
                float *p = as + a_k * SG_PA + a_r;
                p[0] = ra.x, p[SG_PA] = ra.y, p[2 * SG_PA] = ra.z, p[3 * SG_PA] = ra.w;
            }
        };
        auto st_b = [&](int stage) { /* the next slice of B into its stage */
            if (TB) {
                float *p = sg_sm + stage * SG_STF + SG_AS + b_k * SG_BN + b_r;
                p[0] = rb.x, p[SG_BN] = rb.y, p[2 * SG_BN] = rb.z, p[3 * SG_BN] = rb.w;
            } else {
                /* cp.async: the group's bytes inside the row, the rest zero */
                const int bytes = kb_ < K ? brl * 4 : 0;
                sg_cp16(sdst + (unsigned)(stage * SG_STF * 4), bytes ? pb : g.b, bytes);
                pb += sb;
                kb_ += SG_BK;
            }
        };

        /* prologue: slices 0 .. SG_ST - 1 in their stages, slice SG_ST in
         * registers */
#pragma unroll
        for (int s = 0; s < SG_ST; s++) {
            if (s < nsl) {
                ld_a();
                st_a(s);
                if (TB)
                    ld_b();
                st_b(s);
            }
            sg_commit();
        }
        if (SG_ST < nsl) {
            ld_a();
            if (TB)
                ld_b();
        }
        sg_wait<SG_ST - 1>();
        __syncthreads();

        float fa[2][8], fb[2][8], acc[8][8];
        int rs = 0;          /* the stage the next slice refills */
        int nxt = SG_ST; /* the slice in registers */
        const float *cur = sg_sm;
        auto frag = [&](float (&a)[8], float (&b)[8], const float *st, int kk) {
            const float4 a0 = *reinterpret_cast<const float4 *>(st + kk * SG_PA + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4 *>(st + kk * SG_PA + 64 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4 *>(st + SG_AS + kk * SG_BN + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4 *>(st + SG_AS + kk * SG_BN + 64 + tx * 4);
            a[0] = a0.x, a[1] = a0.y, a[2] = a0.z, a[3] = a0.w;
            a[4] = a1.x, a[5] = a1.y, a[6] = a1.z, a[7] = a1.w;
            b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w;
            b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
        };
        frag(fa[0], fb[0], cur, 0);
        /* one slice; at its last k the next slice's stage is waited for,
         * the freed stage refilled (slice nxt) and slice nxt + 1 read */
        auto slice = [&]() {
#pragma unroll
            for (int kk = 0; kk < SG_BK; kk++) {
                if (kk < SG_BK - 1) {
                    frag(fa[(kk + 1) & 1], fb[(kk + 1) & 1], cur, kk + 1);
                } else {
                    sg_wait<SG_ST - 2>();
                    __syncthreads();
                    if (nxt < nsl) {
                        st_a(rs);
                        st_b(rs);
                    }
                    sg_commit();
                    if (nxt + 1 < nsl) {
                        ld_a();
                        if (TB)
                            ld_b();
                    }
                    nxt++;
                    rs = rs + 1 == SG_ST ? 0 : rs + 1;
                    cur = sg_sm + rs * SG_STF;
                    frag(fa[(kk + 1) & 1], fb[(kk + 1) & 1], cur, 0);
                }
                const float(&av)[8] = fa[kk & 1];
                const float(&bv)[8] = fb[kk & 1];
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
            }
        };
        /* the final totals: the epilogue, float4 stores where it is a plain
         * f32 store of whole groups */
        auto out = [&](int i, int jg, float4 t) {
            const int64_t m = m0 + (i < 4 ? 0 : 64) + ty * 4 + (i & 3);
            const int64_t n = n0 + jg * 64 + tx * 4;
            if (m >= g.M)
                return;
            if (g.vec_c && n + 3 < g.N) { /* lk_elem<LK_F32>::store's NaN, four at once */
                typedef lk_elem<LK_F32> E;
                *reinterpret_cast<float4 *>((float *)g.e.c + bi * g.e.c_bs + m * g.e.ldc + n) =
                    make_float4(E::cvt(t.x), E::cvt(t.y), E::cvt(t.z), E::cvt(t.w));
                return;
            }
            const float tv[4] = {t.x, t.y, t.z, t.w};
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (n + j < g.N)
                    lk_gemm_store(g.e, bi, m, n + j, tv[j]);
        };

        float4 *ts = reinterpret_cast<float4 *>(tot_s) + tid; /* [16][256] float4 */
        for (int kb = 0; kb < nkb; kb++) {
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 8; j++)
                    acc[i][j] = 0.0f;
            const int ns = nsl - kb * SPB < SPB ? nsl - kb * SPB : SPB;
#pragma unroll 1
            for (int s = 0; s < ns; s++)
                slice();
            const bool first = kb == 0;
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int jg = 0; jg < 2; jg++) {
                    float4 t = make_float4(acc[i][4 * jg], acc[i][4 * jg + 1], acc[i][4 * jg + 2],
                                           acc[i][4 * jg + 3]);
                    float4 &slot = ts[(i * 2 + jg) * SG_THREADS];
                    if (!first) {
                        const float4 o = slot;
                        t.x = __fadd_rn(o.x, t.x);
                        t.y = __fadd_rn(o.y, t.y);
                        t.z = __fadd_rn(o.z, t.z);
                        t.w = __fadd_rn(o.w, t.w);
                    }
                    slot = t;
                }
        }
        /* the epilogue outside the loop, which keeps its registers for the
         * accumulators */
#pragma unroll
        for (int i = 0; i < 8; i++)
#pragma unroll
            for (int jg = 0; jg < 2; jg++)
                out(i, jg, ts[(i * 2 + jg) * SG_THREADS]);
        sg_wait<0>();
        __syncthreads(); /* the next batch entry refills the stages */
    }
}

template <bool TA, bool TB> cudaError_t sg_setup()
{
    return cudaFuncSetAttribute(sgemm_kernel<TA, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)SG_SMEM);
}

} // namespace

bool lk_cuda_sgemm(const lk_gemm_args *a, cudaStream_t stream)
{
    if (a->a.dtype != LK_F32 || a->b.dtype != LK_F32 || a->k < 1 ||
        a->k > INT32_MAX - 2 * SG_BK)
        return false;
    if (!lk_gemm_vec_ok(a->a, a->batch) || !lk_gemm_vec_ok(a->b, a->batch))
        return false;
    sg_args g;
    g.a = (const float *)a->a.data;
    g.b = (const float *)a->b.data;
    g.lda = a->a.ld;
    g.a_bs = a->a.batch_stride;
    g.ldb = a->b.ld;
    g.b_bs = a->b.batch_stride;
    g.M = a->m;
    g.N = a->n;
    g.K = a->k;
    g.batch = a->batch;
    g.tiles_m = (a->m + SG_BM - 1) / SG_BM;
    g.tiles_n = (a->n + SG_BN - 1) / SG_BN;
    g.e = lk_gemm_epi_make(a);
    g.vec_c = a->c.dtype == LK_F32 && !g.e.bias && !g.e.accumulate && lk_gemm_vec_ok(a->c, a->batch);
    const int64_t tiles = g.tiles_m * g.tiles_n;
    if (tiles > ((int64_t)1 << 31) - 1)
        return false;
    const dim3 grid((unsigned)tiles, lk_grid_cap(a->batch, 65535));
    const bool ta = a->ta == LK_TRANS, tb = a->tb == LK_TRANS;
    if (ta && tb)
        lk_launch(sgemm_kernel<true, true>, grid, SG_THREADS, SG_SMEM, stream, g);
    else if (ta)
        lk_launch(sgemm_kernel<true, false>, grid, SG_THREADS, SG_SMEM, stream, g);
    else if (tb)
        lk_launch(sgemm_kernel<false, true>, grid, SG_THREADS, SG_SMEM, stream, g);
    else
        lk_launch(sgemm_kernel<false, false>, grid, SG_THREADS, SG_SMEM, stream, g);
    return true;
}

cudaError_t lk_cuda_sgemm_setup()
{
    const cudaError_t es[] = {sg_setup<false, false>(), sg_setup<false, true>(),
                              sg_setup<true, false>(), sg_setup<true, true>()};
    for (cudaError_t e : es)
        if (e != cudaSuccess)
            return e;
    return cudaSuccess;
}
