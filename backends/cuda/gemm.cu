/* Lockstep CUDA: GEMM and batched GEMM, the SIMT tier (docs/numerics.md
 * section 4), f32/bf16/f16 inputs in any mix.
 *
 * A block computes a 128 x 128 tile of C with 256 threads, 8 x 8 outputs
 * each, stepping through K in 8-k slices staged in shared memory (double
 * buffered, widened to f32 at the load).  For every output the contract's
 * order holds as is: acc = fma(a_k, b_k, acc) from +0 for the 128 k of a
 * block (sixteen slices), then total = acc for the first block and
 * total + acc for the next ones, then the epilogue.  Slices past K are
 * padded with a = +0 and b = -0: fma(+0, -0, acc) = acc + (-0) = acc for
 * every acc (a +0 pair would turn an acc of -0 into +0).
 *
 * The block totals live in shared memory (tot below), not in registers:
 * with only the 64 accumulators in registers a thread needs at most 128
 * of them, so two blocks share an SM and hide each other's latency.  A
 * total is touched once per 128 k, so its shared-memory traffic is
 * negligible.
 *
 * Calls with min(M, N) <= 8 go to the GEMV kernels (gemv.cu), f32 x f32
 * with aligned rows to sgemm.cu's pipelined kernel (the same arithmetic). */
#include "backends/cuda/gemm.cuh"

namespace {

#define BM 128
#define BN 128
#define BK 8
#define SLICES_PER_BLOCK (LK_KB / BK)
#define GROUP_M 8
#define GEMM_TOT_SMEM (64 * 256 * sizeof(float)) /* dynamic: the totals */

struct gemm_kargs {
    const void *a; /* op(A)[m, k]: ta ? a[k * lda + m] : a[m * lda + k] */
    int64_t lda, a_bs;
    const void *b; /* op(B)[k, n]: tb ? b[n * ldb + k] : b[k * ldb + n] */
    int64_t ldb, b_bs;
    int ta, tb;
    int avec, bvec; /* 4-element groups of a row may be read as one access */
    int64_t M, N, K, batch;
    int64_t tiles_m, tiles_n;
    lk_gemm_epi e;
};

/* Four consecutive elements p[i .. i + 3] widened, as one access when vec. */
template <lk_dtype D>
__device__ __forceinline__ void load4(const typename lk_elem<D>::T *p, int64_t i, bool vec,
                                      float (&v)[4])
{
    if (vec) {
        float4 f = lk_elem<D>::load4(p, i);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
#pragma unroll
        for (int j = 0; j < 4; j++)
            v[j] = lk_elem<D>::load(p, i + j);
    }
}

/* This thread's part of slice kt: four elements of the A tile and four of
 * the B tile, padded outside the matrices (A with +0, B with -0). */
template <lk_dtype DA, lk_dtype DB>
__device__ __forceinline__ void load_slice(const gemm_kargs &g, const typename lk_elem<DA>::T *A,
                                           const typename lk_elem<DB>::T *B, int64_t m0,
                                           int64_t n0, int64_t k0, float (&ra)[4],
                                           float (&rb)[4])
{
    const int t = threadIdx.x;
    if (!g.ta) { /* row m of A, four k */
        const int64_t m = m0 + (t >> 1), k = k0 + (t & 1) * 4;
        if (m < g.M && k + 3 < g.K) {
            load4<DA>(A, m * g.lda + k, g.avec, ra);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                ra[j] = m < g.M && k + j < g.K ? lk_elem<DA>::load(A, m * g.lda + k + j) : 0.0f;
        }
    } else { /* row k of A^T, four m */
        const int64_t k = k0 + (t >> 5), m = m0 + (t & 31) * 4;
        if (k < g.K && m + 3 < g.M) {
            load4<DA>(A, k * g.lda + m, g.avec, ra);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                ra[j] = k < g.K && m + j < g.M ? lk_elem<DA>::load(A, k * g.lda + m + j) : 0.0f;
        }
    }
    if (!g.tb) { /* row k of B, four n */
        const int64_t k = k0 + (t >> 5), n = n0 + (t & 31) * 4;
        if (k < g.K && n + 3 < g.N) {
            load4<DB>(B, k * g.ldb + n, g.bvec, rb);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                rb[j] = k < g.K && n + j < g.N ? lk_elem<DB>::load(B, k * g.ldb + n + j) : -0.0f;
        }
    } else { /* row n of B^T, four k */
        const int64_t n = n0 + (t >> 1), k = k0 + (t & 1) * 4;
        if (n < g.N && k + 3 < g.K) {
            load4<DB>(B, n * g.ldb + k, g.bvec, rb);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                rb[j] = n < g.N && k + j < g.K ? lk_elem<DB>::load(B, n * g.ldb + k + j) : -0.0f;
        }
    }
}

/* Shared memory holds slices k-major: As[k][m], Bs[k][n]. */
__device__ __forceinline__ void store_slice(const gemm_kargs &g, float (*As)[BM],
                                            float (*Bs)[BN], const float (&ra)[4],
                                            const float (&rb)[4])
{
    const int t = threadIdx.x;
    if (!g.ta) {
        const int m = t >> 1, k = (t & 1) * 4;
#pragma unroll
        for (int j = 0; j < 4; j++)
            As[k + j][m] = ra[j];
    } else {
        *reinterpret_cast<float4 *>(&As[t >> 5][(t & 31) * 4]) =
            make_float4(ra[0], ra[1], ra[2], ra[3]);
    }
    if (!g.tb) {
        *reinterpret_cast<float4 *>(&Bs[t >> 5][(t & 31) * 4]) =
            make_float4(rb[0], rb[1], rb[2], rb[3]);
    } else {
        const int n = t >> 1, k = (t & 1) * 4;
#pragma unroll
        for (int j = 0; j < 4; j++)
            Bs[k + j][n] = rb[j];
    }
}

/* Row (or column) of the tile owned by index i of a thread's 8: the
 * thread's two groups of four sit 64 apart, so that its float4 reads of a
 * slice never conflict. */
__device__ __forceinline__ int own(int q, int i) { return (i < 4 ? 0 : 64) + q * 4 + (i & 3); }

template <lk_dtype DA, lk_dtype DB>
__global__ void __launch_bounds__(256, 2) gemm_kernel(gemm_kargs g)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DA>::T TA;
    typedef typename lk_elem<DB>::T TB;
    __shared__ __align__(16) float As[2][BK][BM];
    __shared__ __align__(16) float Bs[2][BK][BN];
    /* tot(i, j) of thread t at tot_s[(8 i + j) * 256 + t]: conflict-free */
    extern __shared__ float tot_s[];
    const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;

    int64_t tm, tn;
    lk_gemm_tile(blockIdx.x, g.tiles_m, g.tiles_n, GROUP_M, &tm, &tn);
    const int64_t m0 = tm * BM, n0 = tn * BN;
    const int64_t nkt = (g.K + BK - 1) / BK;

    for (int64_t b = blockIdx.y; b < g.batch; b += gridDim.y) {
        const TA *A = (const TA *)g.a + b * g.a_bs;
        const TB *B = (const TB *)g.b + b * g.b_bs;
        float acc[8][8];
#pragma unroll
        for (int i = 0; i < 64; i++)
            tot_s[i * 256 + tid] = 0.0f; /* K == 0 gives +0 */

        /* Interior tiles with aligned rows read whole slices through
         * pointers that step by one slice: no index arithmetic or bounds
         * checks per slice (they cost about a tenth of the FMA issue rate). */
        const bool fast = g.avec && g.bvec && m0 + BM <= g.M && n0 + BN <= g.N;
        const TA *pa = g.ta ? A + (int64_t)(tid >> 5) * g.lda + m0 + (tid & 31) * 4
                            : A + (m0 + (tid >> 1)) * g.lda + (tid & 1) * 4;
        const TB *pb = g.tb ? B + (n0 + (tid >> 1)) * g.ldb + (tid & 1) * 4
                            : B + (int64_t)(tid >> 5) * g.ldb + n0 + (tid & 31) * 4;
        float ra[4], rb[4];
        auto next_slice = [&](int64_t kt) { /* slice kt into ra, rb; kt ascends by 1 */
            if (fast && (kt + 1) * BK <= g.K) {
                load4<DA>(pa, 0, true, ra);
                load4<DB>(pb, 0, true, rb);
            } else {
                load_slice<DA, DB>(g, A, B, m0, n0, kt * BK, ra, rb);
            }
            pa += g.ta ? BK * g.lda : BK;
            pb += g.tb ? BK : BK * g.ldb;
        };
        if (nkt > 0) {
            next_slice(0);
            store_slice(g, As[0], Bs[0], ra, rb);
        }
        __syncthreads();
        for (int64_t kt = 0; kt < nkt; kt++) {
            const int cur = (int)(kt & 1);
            if (kt + 1 < nkt)
                next_slice(kt + 1);
            if (kt % SLICES_PER_BLOCK == 0) {
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = 0.0f;
            }
#pragma unroll
            for (int kk = 0; kk < BK; kk++) {
                float av[8], bv[8];
                float4 a0 = *reinterpret_cast<const float4 *>(&As[cur][kk][ty * 4]);
                float4 a1 = *reinterpret_cast<const float4 *>(&As[cur][kk][64 + ty * 4]);
                float4 b0 = *reinterpret_cast<const float4 *>(&Bs[cur][kk][tx * 4]);
                float4 b1 = *reinterpret_cast<const float4 *>(&Bs[cur][kk][64 + tx * 4]);
                av[0] = a0.x, av[1] = a0.y, av[2] = a0.z, av[3] = a0.w;
                av[4] = a1.x, av[5] = a1.y, av[6] = a1.z, av[7] = a1.w;
                bv[0] = b0.x, bv[1] = b0.y, bv[2] = b0.z, bv[3] = b0.w;
                bv[4] = b1.x, bv[5] = b1.y, bv[6] = b1.z, bv[7] = b1.w;
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++)
                        acc[i][j] = __fmaf_rn(av[i], bv[j], acc[i][j]);
            }
            if ((kt + 1) % SLICES_PER_BLOCK == 0 || kt + 1 == nkt) {
                const bool first = kt < SLICES_PER_BLOCK;
#pragma unroll
                for (int i = 0; i < 8; i++)
#pragma unroll
                    for (int j = 0; j < 8; j++) {
                        float &t = tot_s[(8 * i + j) * 256 + tid];
                        t = first ? acc[i][j] : __fadd_rn(t, acc[i][j]);
                    }
            }
            if (kt + 1 < nkt)
                store_slice(g, As[cur ^ 1], Bs[cur ^ 1], ra, rb);
            __syncthreads();
        }

#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int64_t m = m0 + own(ty, i);
            if (m >= g.M)
                continue;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const int64_t n = n0 + own(tx, j);
                if (n < g.N)
                    lk_gemm_store(g.e, b, m, n, tot_s[(8 * i + j) * 256 + tid]);
            }
        }
        __syncthreads(); /* before the next batch entry reuses the tiles */
    }
}

} // namespace

extern "C" lk_status lk_cuda_gemm(void *queue, const lk_gemm_args *a)
{
    lk_op_scope op(queue, "lk_gemm");
    if (!op.ok())
        return op.status();
    if (lk_cuda_gemv(a, op.stream(), op.q))
        return op.launched();
    if (lk_cuda_sgemm(a, op.stream()))
        return op.launched();

    gemm_kargs g;
    g.a = a->a.data;
    g.lda = a->a.ld;
    g.a_bs = a->a.batch_stride;
    g.b = a->b.data;
    g.ldb = a->b.ld;
    g.b_bs = a->b.batch_stride;
    g.ta = a->ta == LK_TRANS;
    g.tb = a->tb == LK_TRANS;
    g.avec = lk_gemm_vec_ok(a->a, a->batch);
    g.bvec = lk_gemm_vec_ok(a->b, a->batch);
    g.M = a->m;
    g.N = a->n;
    g.K = a->k;
    g.batch = a->batch;
    g.tiles_m = (a->m + BM - 1) / BM;
    g.tiles_n = (a->n + BN - 1) / BN;
    g.e = lk_gemm_epi_make(a);
    const int64_t tiles = g.tiles_m * g.tiles_n;
    if (tiles > ((int64_t)1 << 31) - 1)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_gemm: %lld x %lld is more than 2^31 tiles",
                       (long long)a->m, (long long)a->n);
    const dim3 grid((unsigned)tiles, lk_grid_cap(a->batch, 65535));
    LK_FLOAT_SWITCH(a->a.dtype, DA, LK_FLOAT_SWITCH(a->b.dtype, DB, {
        lk_launch(gemm_kernel<DA, DB>, grid, 256, GEMM_TOT_SMEM, op.stream(), g);
    }));
    return op.launched();
}

/* Kernels above the default 48 KiB of dynamic shared memory opt in here,
 * at device open: the attribute cannot be set under graph capture. */
template <lk_dtype DA, lk_dtype DB> static cudaError_t gemm_setup()
{
    return cudaFuncSetAttribute(gemm_kernel<DA, DB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)GEMM_TOT_SMEM);
}

extern "C" lk_status lk_cuda_setup_kernels(lk_cuda_device *dev)
{
    const cudaError_t es[] = {
        gemm_setup<LK_F32, LK_F32>(),   gemm_setup<LK_F32, LK_BF16>(),
        gemm_setup<LK_F32, LK_F16>(),   gemm_setup<LK_BF16, LK_F32>(),
        gemm_setup<LK_BF16, LK_BF16>(), gemm_setup<LK_BF16, LK_F16>(),
        gemm_setup<LK_F16, LK_F32>(),   gemm_setup<LK_F16, LK_BF16>(),
        gemm_setup<LK_F16, LK_F16>(),   lk_cuda_gemv_setup(),           lk_cuda_sgemm_setup(),
    };
    cudaError_t e = cudaSuccess;
    for (cudaError_t x : es)
        if (e == cudaSuccess)
            e = x;
    if (e != cudaSuccess) {
        dev->host->set_error("cuda: cannot raise the kernels' shared memory limit: %s",
                             cudaGetErrorString(e));
        (void)cudaGetLastError();
        return LK_ERR_DRIVER;
    }
    return LK_OK;
}
