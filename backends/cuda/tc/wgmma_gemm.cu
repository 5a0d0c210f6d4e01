/* Lockstep CUDA: the LK_GEMM_TC_SM90 tier on Hopper's wgmma (sm_90a).
 *
 * Same contract as tc/gemm.cu's mma.sync kernels (docs/numerics.md,
 * "Tensor-core tier"): per output element one accumulator chain from +0,
 * one wgmma k = 16 step per 16 k, ascending, exactly ceil(K / 16) steps
 * (a slice's steps wholly past K are not issued; the last step's k >= K
 * are zeros), then section 4's epilogue.  wgmma m64nNk16 is one fused
 * k = 16 step per output element (the LK_GEMM_TC_SM90 model), so the bits
 * equal the mma.sync kernels' and backends/ref/mma_model.c's.
 *
 * A persistent grid (one block per SM at most) walks the BM x BN tiles
 * (wg_tiles: 128 x 256 .. 64, 64 x 256 .. 48, chosen from the waves they
 * make and measured per-slice and store times) of every batch entry in a
 * grouped raster order.  A block: three warpgroups.
 * Warpgroup 0 is the producer: one thread streams 64-k slices of A (BM
 * rows) and B (BN rows) with TMA (cp.async.bulk.tensor, 128-byte swizzle,
 * zero fill past M, N and K), KS slices a stage, into a STAGES-deep ring
 * of shared-memory buffers, each guarded by a "full" and an "empty"
 * mbarrier.  Warpgroups 1 and 2 are the consumers, 64 rows each: per
 * slice, four wgmma steps with both operands read from shared memory
 * through matrix descriptors, one commit group per slice, and a stage is
 * handed back once the group that read its last slice has completed
 * (wgmma.wait_group 1).  64 x BN tiles give skinny M twice the tiles:
 * both consumers take the 64 rows, each half of the columns.  Launched in
 * clusters of two, neighbouring tiles share the loads of their common
 * operand (TMA multicast, wg_unit).  The producer runs on into the
 * block's next tile while the consumers store the last one.  Every
 * wait is bounded: a pipeline that stalls for 4 s traps (a launch
 * failure, not a hang).
 *
 * Only A as M x K and B as N x K (both k-contiguous, rows 16-byte
 * aligned), batch strides > 0 or batch 1: other layouts, and builds
 * without sm_90a code, take tc/gemm.cu's mma.sync kernels.  Whether the
 * loaded image has the wgmma body is read from the kernel's static shared
 * memory (only the sm_90a body declares any), so a module built without
 * compute_90a never runs an empty kernel. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/tc/wgmma.cuh"
#include "backends/cuda/tc/wgmma_host.cuh"
#include "backends/cuda/tc/wgmma_mma.cuh"
#include "backends/cuda/tc/wgmma_ptx.cuh"

namespace {

/* BM 128: consumer c takes rows 64 c.., all BN columns; BM 64 (skinny M):
 * consumer c takes all 64 rows and columns c BN / 2..  A stage holds KS
 * 64-k slices (A then B of each): a block's ring delivers about one stage
 * per L2 round trip however deep it is (an H200 probe: 370 ns a stage for
 * 4 to 32 KiB, 2 to 12 stages), so narrow tiles stream faster with more
 * bytes a stage. */
/* as many stages as fit in 224 KiB (the opt-in limit is 227), at most 12 */
constexpr int wg_stages(int bm, int bn, int ks)
{
    return 224 * 1024 / (ks * (bm + bn) * WG_BK * 2) > 12 ? 12
                                                           : 224 * 1024 / (ks * (bm + bn) * WG_BK * 2);
}

/* A cluster of two shares B's loads when B is the wider operand, else A's. */
__host__ __device__ constexpr bool wg_shares_b(int bm, int bn)
{
    return bn >= bm;
}

template <int BM, int BN, int KS> struct wg_cfg {
    static constexpr int WN = BM == 128 ? BN : BN / 2; /* a consumer's wgmma N */
    static constexpr int A_BYTES = BM * WG_BK * 2;
    static constexpr int B_BYTES = BN * WG_BK * 2;
    static constexpr int SLICE_BYTES = A_BYTES + B_BYTES;
    static constexpr int STAGE_BYTES = KS * SLICE_BYTES;
    static constexpr int STAGES = wg_stages(BM, BN, KS);
    /* + 1024 to align the ring to the swizzle atom */
    static constexpr size_t SMEM = (size_t)STAGES * STAGE_BYTES + 1024;
};

struct wg_kargs {
    int64_t M, N, K, batch;
    /* the units a block (cl 1) or a cluster of two (cl 2) takes in turn,
     * per batch entry: BM x BN tiles, or pairs of them (wg_unit) */
    int64_t units_m, units_n;
    int cl;
    /* 1: the second launch of a split GEMM (lk_cuda_tc_wgmma): it reads
     * only what the first launch's predecessors wrote, so it waits for the
     * previous grid (the first launch) at its end instead of its start,
     * and so completes after it */
    int tail;
    lk_gemm_epi e;
};


#if LK_WG_BODY
/* The bf16 / f16 kernel's epilogue.  Per element it used to switch on C's
 * dtype and do 64-bit index arithmetic, unrolled over 128 accumulators
 * (580 KiB of machine code for the 128 x 256 kernel, 44 now), and stored
 * 4-byte values 8 bytes apart.  Now the common case (f32 C, no bias, no
 * accumulate) stores pairs from two row pointers at constant offsets; the
 * rest goes eight elements at a time to code that is there once, with the
 * bias and C loads of the eight before their stores (the compiler cannot
 * move a load above a store that may alias it). */

/* Eight elements of a bf16 / f16 tile: v[j] at row m + 8 ((j / 2) % 2),
 * column n + 8 (j / 4) + j % 2; numerics.md section 4's epilogue, the
 * steps of lk_gemm_store with the bias and C loads of all eight first
 * (written out here: lk_gemm_store split into a load half and a store half
 * gave gemm.cu's kernel register spills). */
__device__ __noinline__ void wg_store8(const lk_gemm_epi &e, int64_t bat, int64_t m, int64_t n,
                                       int64_t M, int64_t N, float v0, float v1, float v2,
                                       float v3, float v4, float v5, float v6, float v7)
{
    float t[8] = {v0, v1, v2, v3, v4, v5, v6, v7}, old[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t mj = m + ((j >> 1) & 1) * 8, nj = n + (j >> 2) * 8 + (j & 1);
        old[j] = 0.0f;
        if (mj < M && nj < N) {
            if (e.bias)
                t[j] = __fadd_rn(t[j], lk_load_any(e.bias, e.bdt, bat * e.bias_bs + nj));
            if (e.accumulate)
                old[j] = lk_load_any(e.c, e.cdt, bat * e.c_bs + mj * e.ldc + nj);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t mj = m + ((j >> 1) & 1) * 8, nj = n + (j >> 2) * 8 + (j & 1);
        if (mj < M && nj < N)
            lk_store_any(e.c, e.cdt, bat * e.c_bs + mj * e.ldc + nj,
                         e.accumulate ? __fadd_rn(t[j], old[j]) : t[j]);
    }
}

/* A thread's accumulators of a bf16 / f16 tile: i at row mrow (+ 8 when
 * i % 4 >= 2), column nc + 8 (i / 4) + i % 2.  f32 out with nothing to add
 * (the common case): accumulators i, i + 1 are neighbours in a row and go
 * as one 8-byte store where C's rows allow, so that a warp's store fills
 * whole 32-byte sectors (4-byte stores 8 bytes apart left each sector half
 * written by two instructions: 4096^3 took 244 us instead of 196). */
template <int ACC>
__device__ __forceinline__ void wg_store(const lk_gemm_epi &e, int64_t bat, int64_t mrow,
                                         int64_t nc, int64_t M, int64_t N, const float (&acc)[ACC])
{
    if (e.cdt == LK_F32 && !e.bias && !e.accumulate) {
        float *const r0 = (float *)e.c + bat * e.c_bs + mrow * e.ldc + nc;
        float *const r1 = r0 + 8 * e.ldc;
        const bool pairs = ((uintptr_t)r0 & 7) == 0 && (e.ldc & 1) == 0;
        const bool in0 = mrow < M, in1 = mrow + 8 < M;
#pragma unroll
        for (int i = 0; i < ACC; i += 2) {
            const int r = (i >> 1) & 1, off = (i >> 2) * 8;
            if (!(r ? in1 : in0))
                continue;
            float *const p = (r ? r1 : r0) + off;
            const float a = lk_elem<LK_F32>::cvt(acc[i]), b = lk_elem<LK_F32>::cvt(acc[i + 1]);
            if (pairs && nc + off + 1 < N) {
                *reinterpret_cast<float2 *>(p) = make_float2(a, b);
            } else {
                if (nc + off < N)
                    p[0] = a;
                if (nc + off + 1 < N)
                    p[1] = b;
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i + 8 <= ACC; i += 8)
        wg_store8(e, bat, mrow, nc + (i >> 2) * 8, M, N, acc[i], acc[i + 1], acc[i + 2],
                  acc[i + 3], acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7]);
    if (ACC % 8) { /* a last n8 block alone (WN = 24): the next 8 columns are not ours */
        const int i = ACC - 4;
        const int64_t n = nc + (i >> 2) * 8, ne = N < n + 8 ? N : n + 8;
        wg_store8(e, bat, mrow, n, M, ne, acc[i], acc[i + 1], acc[i + 2], acc[i + 3], 0.0f,
                  0.0f, 0.0f, 0.0f);
    }
}
#endif /* LK_WG_BODY */

#if LK_WG_BODY
/* Unit u of a batch entry -> the first row and column of this block's
 * tile.  Clusters of two (g.cl 2) take pairs of neighbouring tiles that
 * share the wider operand (wg_shares_b): B (rows m0 and m0 + BM, one n0)
 * or A (columns n0 and n0 + BN); each block loads half of the shared one
 * for both.  A tile of a pair past M or N is loaded as zeros, computed and
 * not stored (wg_store's bounds), so both blocks run the same slices. */
template <int BM, int BN>
__device__ __forceinline__ void wg_unit(int64_t u, const wg_kargs &g, unsigned rank, int64_t &m0,
                                        int64_t &n0)
{
    constexpr bool SHARE_B = wg_shares_b(BM, BN);
    const int um = SHARE_B ? g.cl * BM : BM, un = SHARE_B ? BN : g.cl * BN;
    wg_tile(u, g.units_m, g.units_n, un, m0, n0, um);
    if (SHARE_B)
        m0 += rank * BM;
    else
        n0 += rank * BN;
}

/* A consumer warp is done with a stage: one arrival on its empty barrier
 * in each block whose producer refills it (with cl 2 both, since either
 * producer writes into both blocks). */
__device__ __forceinline__ void wg_release(uint32_t empty, int cl, int lane)
{
    if (cl == 1) {
        if (lane == 0)
            lk_mbar_arrive(empty);
    } else if (lane < 2) {
        mbar_arrive_at(empty, (unsigned)lane);
    }
}
#endif /* LK_WG_BODY */

template <lk_dtype D, int BM, int BN, int KS>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wg_gemm_kernel(const __grid_constant__ CUtensorMap amap,
                   const __grid_constant__ CUtensorMap bmap, const __grid_constant__ wg_kargs g)
{
    if (!g.tail)
        lk_pdl_wait();
    lk_pdl_trigger();
#if LK_WG_BODY
    typedef wg_cfg<BM, BN, KS> C;
    static_assert(C::STAGES >= 2, "a consumer holds one stage while it waits for the next");
    constexpr int WN = C::WN;
    constexpr int ACC = WN / 2; /* f32 accumulators per thread: 64 x WN over 128 threads */
    __shared__ __align__(8) uint64_t bars[2 * C::STAGES]; /* full[s], empty[s] */
    extern __shared__ __align__(128) unsigned char wg_smem_raw[];
    const uint32_t ring = (lk_smem_addr(wg_smem_raw) + 1023u) & ~1023u;
    const uint32_t full0 = lk_smem_addr(&bars[0]), empty0 = lk_smem_addr(&bars[C::STAGES]);

    const int tid = threadIdx.x, wg = tid / 128;
    const int cl = g.cl;
    const unsigned rank = cl > 1 ? cluster_rank() : 0;
    if (tid == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            lk_mbar_init(full0 + 8 * s, 1);
            /* one arrival per consumer warp of each block of the cluster */
            lk_mbar_init(empty0 + 8 * s, WG_CONSUMERS * 4 * cl);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (cl > 1)
        wg_cluster_sync(); /* the peer's barriers are set before its loads reach ours */

    /* persistent: block (or cluster) u takes units u, u + units running,
     * ... over all batch entries; the producer runs on into the next unit
     * while the consumers store the last one */
    const int64_t per_batch = g.units_m * g.units_n, total = per_batch * g.batch;
    const int64_t first = blockIdx.x / cl, step = gridDim.x / cl;
    const int64_t ktiles = (g.K + WG_BK - 1) / WG_BK, kstages = (ktiles + KS - 1) / KS;

    if (wg == 0) {
        /* producer: one thread; the warpgroup gives registers to the consumers */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(&amap) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"(&bmap) : "memory");
            uint64_t it = 0; /* stages so far, over all of this block's tiles */
            for (int64_t t = first; t < total; t += step) {
                const int64_t bat = t / per_batch;
                int64_t m0, n0;
                wg_unit<BM, BN>(t % per_batch, g, rank, m0, n0);
                for (int64_t ks = 0; ks < kstages; ks++, it++) {
                    const uint32_t s = (uint32_t)(it % C::STAGES);
                    const uint64_t round = it / C::STAGES;
                    if (round > 0)
                        lk_mbar_wait(empty0 + 8 * s, (unsigned)((round - 1) & 1));
                    const uint32_t bar = full0 + 8 * s;
                    lk_mbar_expect_tx(bar, C::STAGE_BYTES);
                    /* a slice wholly past K (the tile's last stage) is
                     * zeros, its bytes counted all the same */
#pragma unroll
                    for (int j = 0; j < KS; j++) {
                        const uint32_t a_dst = ring + s * C::STAGE_BYTES + j * C::SLICE_BYTES;
                        const uint32_t b_dst = a_dst + C::A_BYTES;
                        const int k = (int)((ks * KS + j) * WG_BK);
                        if (cl == 1) {
                            tma_load(a_dst, &amap, k, (int)m0, (int)bat, bar);
                            tma_load(b_dst, &bmap, k, (int)n0, (int)bat, bar);
                        } else if (wg_shares_b(BM, BN)) { /* this block's half of B for both */
                            tma_load(a_dst, &amap, k, (int)m0, (int)bat, bar);
                            tma_load_pair(b_dst + rank * (BN / 2) * 128, &bmap, k,
                                          (int)(n0 + rank * (BN / 2)), (int)bat, bar);
                        } else { /* A shared */
                            tma_load_pair(a_dst + rank * (BM / 2) * 128, &amap, k,
                                          (int)(m0 + rank * (BM / 2)), (int)bat, bar);
                            tma_load(b_dst, &bmap, k, (int)n0, (int)bat, bar);
                        }
                    }
                }
            }
        }
    } else {
        /* consumers: warpgroup c owns rows m0 + cm .. m0 + cm + 63 and
         * columns n0 + cn .. n0 + cn + WN - 1 */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
        const int c = wg - 1, lane = tid & 31, warp = (tid / 32) & 3;
        const int cm = BM == 128 ? 64 * c : 0, cn = BM == 128 ? 0 : WN * c;
        uint64_t it = 0; /* stages so far, over all of this block's tiles */
        for (int64_t t = first; t < total; t += step) {
            const int64_t bat = t / per_batch;
            int64_t m0, n0;
            wg_unit<BM, BN>(t % per_batch, g, rank, m0, n0);
            float acc[ACC];
#pragma unroll
            for (int i = 0; i < ACC; i++)
                acc[i] = 0.0f;
            uint32_t prev = ~0u; /* the stage whose wgmma group may still be in flight */
            for (int64_t ks = 0; ks < kstages; ks++, it++) {
                const uint32_t s = (uint32_t)(it % C::STAGES);
                const uint64_t round = it / C::STAGES;
                lk_mbar_wait(full0 + 8 * s, (unsigned)(round & 1));
                for (int j = 0; j < KS; j++) {
                    const int64_t kt = ks * KS + j;
                    if (kt >= ktiles)
                        break;
                    /* 128-byte rows, 8-row swizzle atoms of 1024 bytes */
                    const uint32_t base = ring + s * C::STAGE_BYTES + j * C::SLICE_BYTES;
                    const uint32_t a_src = base + cm * 128, b_src = base + C::A_BYTES + cn * 128;
                    /* exactly ceil(K / 16) steps in all: the last slice has
                     * ceil((K - 64 kt) / 16) (uniform over the block); each
                     * count is its own straight fence..wait block, since
                     * ptxas injects warpgroup arrives around wgmmas reached
                     * through a branch */
                    const int64_t left = g.K - kt * WG_BK;
                    if (left > 48)
                        wg_slice<WN, D, 4>(acc, a_src, b_src);
                    else if (left > 32)
                        wg_slice<WN, D, 3>(acc, a_src, b_src);
                    else if (left > 16)
                        wg_slice<WN, D, 2>(acc, a_src, b_src);
                    else
                        wg_slice<WN, D, 1>(acc, a_src, b_src);
                    /* the group before this slice's has completed: with
                     * it the previous stage's last */
                    if (j == 0 && prev != ~0u)
                        wg_release(empty0 + 8 * prev, cl, lane);
                }
                prev = s;
            }
            wg_wait<0>();
            wg_fence_regs(acc);
            if (prev != ~0u)
                wg_release(empty0 + 8 * prev, cl, lane);

            /* accumulator i: n8 block i / 4, row g (+ 8 for i % 4 >= 2), column 2 t + i % 2 */
            wg_store(g.e, bat, m0 + cm + warp * 16 + (lane >> 2), n0 + cn + (lane & 3) * 2, g.M,
                     g.N, acc);
        }
    }
    if (cl > 1)
        wg_cluster_sync(); /* no block leaves while its peer may still signal it */
#endif
    if (g.tail)
        lk_pdl_wait();
}

/* A k-contiguous operand: rows x K elements, ld, batch stride (elements). */
bool make_map(encode_fn enc, CUtensorMap *map, const void *base, int64_t rows, int64_t K,
              int64_t ld, int64_t bstride, int64_t batch, int box_rows)
{
    const cuuint64_t dims[3] = {(cuuint64_t)K, (cuuint64_t)rows, (cuuint64_t)batch};
    const cuuint64_t strides[2] = {(cuuint64_t)ld * 2,
                                   (cuuint64_t)(batch > 1 ? bstride : rows * ld) * 2};
    const cuuint32_t box[3] = {WG_BK, (cuuint32_t)box_rows, 1};
    const cuuint32_t estr[3] = {1, 1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, (void *)base, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/* Clusters of two wg_gemm_kernel<D, BM, BN, KS> blocks the device holds at
 * once (one block an SM; a cluster within one GPC), per device (ordinals
 * 0..63); 0 where unknown or none. */
template <lk_dtype D, int BM, int BN, int KS> int wg_pairs(const lk_cuda_device *dev)
{
    static int cache[64];
    if (dev->ordinal < 0 || dev->ordinal >= 64)
        return 0;
    return wg_max_clusters(wg_gemm_kernel<D, BM, BN, KS>, wg_cfg<BM, BN, KS>::SMEM, 2,
                           &cache[dev->ordinal]);
}

/* cl 2: clusters of two blocks sharing one operand's loads (wg_unit), or
 * 1 where the device holds no such cluster. */
template <lk_dtype D, int BM, int BN, int KS>
bool wg_launch(const lk_cuda_device *dev, const lk_gemm_args *a, cudaStream_t st, int cl,
               int tail)
{
    /* a consumer holds a stage until it has issued the next one's first
     * slice: the ring needs two stages (else fewer slices a stage) */
    if constexpr (wg_stages(BM, BN, KS) < 2) {
        return wg_launch<D, BM, BN, KS / 2>(dev, a, st, cl, tail);
    } else {
    typedef wg_cfg<BM, BN, KS> C;
    auto kern = wg_gemm_kernel<D, BM, BN, KS>;
    /* the image loaded for this device has the wgmma body (only it has
     * static shared memory: the mbarriers), and room for the ring; found
     * once per device (ordinals 0..63; others ask every time) */
    static unsigned long long probed, usable;
    const unsigned long long bit =
        dev->ordinal >= 0 && dev->ordinal < 64 ? 1ull << dev->ordinal : 0;
    if (!bit || !(__atomic_load_n(&probed, __ATOMIC_ACQUIRE) & bit)) {
        cudaFuncAttributes fa;
        bool good = cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
                    fa.sharedSizeBytes >= 2 * C::STAGES * sizeof(uint64_t) &&
                    C::SMEM + fa.sharedSizeBytes <= dev->smem_optin &&
                    lk_smem_optin<wg_gemm_kernel<D, BM, BN, KS> >(dev->ordinal, C::SMEM) == cudaSuccess;
        (void)cudaGetLastError();
        if (bit) {
            if (good)
                __atomic_fetch_or(&usable, bit, __ATOMIC_RELEASE);
            __atomic_fetch_or(&probed, bit, __ATOMIC_RELEASE);
        } else if (!good) {
            return false;
        }
    }
    if (bit && !(__atomic_load_n(&usable, __ATOMIC_ACQUIRE) & bit))
        return false;
    encode_fn enc = get_encode();
    if (!enc)
        return false;
    /* tile coordinates (a pair's second tile too) stay within int */
    if (a->k > 2147483647 - WG_BK || a->m > 2147483647 - 2 * 256 || a->n > 2147483647 - 2 * 256 ||
        a->batch > 2147483647)
        return false;
    const int pairs = cl > 1 ? wg_pairs<D, BM, BN, KS>(dev) : 0;
    if (pairs == 0)
        cl = 1;
    /* with cl 2 each block loads half of the shared operand's rows */
    constexpr bool SHARE_B = wg_shares_b(BM, BN);
    CUtensorMap am, bm;
    if (!make_map(enc, &am, a->a.data, a->m, a->k, a->a.ld, a->a.batch_stride, a->batch,
                  cl > 1 && !SHARE_B ? BM / 2 : BM) ||
        !make_map(enc, &bm, a->b.data, a->n, a->k, a->b.ld, a->b.batch_stride, a->batch,
                  cl > 1 && SHARE_B ? BN / 2 : BN))
        return false;
    wg_kargs g;
    g.M = a->m;
    g.N = a->n;
    g.K = a->k;
    g.batch = a->batch;
    g.cl = cl;
    g.tail = tail > 0;
    g.units_m = (a->m + BM - 1) / BM;
    g.units_n = (a->n + BN - 1) / BN;
    if (cl > 1 && SHARE_B)
        g.units_m = (g.units_m + 1) / 2;
    else if (cl > 1)
        g.units_n = (g.units_n + 1) / 2;
    g.e = lk_gemm_epi_make(a);
    /* one block per SM (a block fills one), each block or cluster taking
     * units in turn */
    const int64_t total = g.units_m * g.units_n * a->batch;
    const int64_t slots = cl > 1 ? pairs : dev->sm_count > 0 ? dev->sm_count : 1;
    const unsigned grid = (unsigned)((total < slots ? total : slots) * cl);
    if (tail < 0) /* a dry run: it would launch */
        return true;
    if (lk_launch_cluster(kern, grid, WG_THREADS, C::SMEM, st, (unsigned)cl, am, bm, g) !=
            cudaSuccess &&
        cl > 1) {
        (void)cudaGetLastError(); /* a cluster the device could not place: single blocks */
        return wg_launch<D, BM, BN, KS>(dev, a, st, 1, tail);
    }
    return true;
    }
}

} // namespace

namespace {

/* The tiles wg_dispatch launches, with what the chooser costs them: waves
 * x (64-k slices x a block's time per slice + its time to store the
 * tile), and the slices a pipeline stage the chooser gives each.  A block
 * is bound by how fast its ring fills (one stage about every L2 round
 * trip, so the narrow tiles take 2 or 4 slices a stage) more than by its
 * MMAs, so the narrower tiles win where they give more blocks; ties go to
 * the earlier.  Fitted (relative error, store >= 0) to lockstep-tc-bench's
 * forced tiles on an H200, the BitNet shapes at M = 128 .. 2048, 4096³,
 * 8192³ and 2048x3072x768 (docs/internals/tensor-cores.md): within 18 %,
 * and on 17 of those 19 shapes the fastest tile or within 3 % of it.
 * 64 x 128's slice then cost 0.296 us, 0.3 % short of 128 x 64's tie at
 * 128 x 6912 x 2560, where an H100 took 18.5 us with 64 x 128 and 16.1
 * with 128 x 64: 0.300 gives 128 x 64 there and at
 * 1024 x 640 x 2560, and changes no other choice on those shapes. */
struct wg_tile_cost {
    int bm, bn, ks;
    double slice_us, store_us;
};
const wg_tile_cost wg_tiles[] = {{128, 256, 1, 0.682, 3.2}, {128, 192, 1, 0.539, 3.3},
                                 {128, 160, 1, 0.480, 2.8}, {128, 128, 2, 0.411, 2.6},
                                 {64, 256, 1, 0.434, 3.6},  {128, 80, 2, 0.314, 1.9},
                                 {128, 64, 2, 0.292, 1.5},  {64, 128, 2, 0.300, 1.3},
                                 {64, 64, 4, 0.222, 1.8},   {64, 48, 4, 0.210, 1.7}};

template <lk_dtype D, int KS>
bool wg_dispatch(const lk_cuda_device *dev, const lk_gemm_args *a, cudaStream_t st, int bm, int bn,
                 int cl, int tail)
{
    if (bm == 64)
        return bn == 256   ? wg_launch<D, 64, 256, KS>(dev, a, st, cl, tail)
               : bn == 128 ? wg_launch<D, 64, 128, KS>(dev, a, st, cl, tail)
               : bn == 48  ? wg_launch<D, 64, 48, KS>(dev, a, st, cl, tail)
                           : wg_launch<D, 64, 64, KS>(dev, a, st, cl, tail);
    return bn == 256   ? wg_launch<D, 128, 256, KS>(dev, a, st, cl, tail)
           : bn == 192 ? wg_launch<D, 128, 192, KS>(dev, a, st, cl, tail)
           : bn == 160 ? wg_launch<D, 128, 160, KS>(dev, a, st, cl, tail)
           : bn == 128 ? wg_launch<D, 128, 128, KS>(dev, a, st, cl, tail)
           : bn == 80  ? wg_launch<D, 128, 80, KS>(dev, a, st, cl, tail)
                       : wg_launch<D, 128, 64, KS>(dev, a, st, cl, tail);
}

template <lk_dtype D>
bool wg_dispatch(const lk_cuda_device *dev, const lk_gemm_args *a, cudaStream_t st, int bm, int bn,
                 int cl, int ks, int tail)
{
    return ks == 4   ? wg_dispatch<D, 4>(dev, a, st, bm, bn, cl, tail)
           : ks == 2 ? wg_dispatch<D, 2>(dev, a, st, bm, bn, cl, tail)
                     : wg_dispatch<D, 1>(dev, a, st, bm, bn, cl, tail);
}

/* The tile the cost model picks for an M x N x K GEMM of `batch` entries,
 * its waves, one tile's time and the whole cost (us, model units). */
struct wg_pick {
    int bm, bn, ks;
    int64_t waves;
    double tile_us, cost;
};

wg_pick wg_choose(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t sms)
{
    const double slices = (double)((k + WG_BK - 1) / WG_BK);
    wg_pick p = {0, 0, 1, 0, 0.0, 0.0};
    for (const wg_tile_cost &t : wg_tiles) {
        const int64_t tiles = (m + t.bm - 1) / t.bm * ((n + t.bn - 1) / t.bn) * batch;
        const int64_t waves = (tiles + sms - 1) / sms;
        const double tile_us = slices * t.slice_us + t.store_us;
        if (p.bn == 0 || (double)waves * tile_us < p.cost)
            p = {t.bm, t.bn, t.ks, waves, tile_us, (double)waves * tile_us};
    }
    return p;
}

/* Many waves of the largest tile: pairs that share B's loads, which
 * relieve L2 (8192³: 5 % faster; 4096³, 4 waves: within 2 % either way,
 * so not there). */
int wg_clusters(int bm, int bn, int64_t waves)
{
    return bm == 128 && bn == 256 && waves >= 8 ? 2 : 1;
}

/* tail: 0, 1 (wg_kargs.tail) or -1: check that it would launch, launch nothing */
bool wg_go(const lk_cuda_device *dev, const lk_gemm_args *a, cudaStream_t st, int bm, int bn,
           int cl, int ks, int tail)
{
    return a->a.dtype == LK_BF16 ? wg_dispatch<LK_BF16>(dev, a, st, bm, bn, cl, ks, tail)
                                 : wg_dispatch<LK_F16>(dev, a, st, bm, bn, cl, ks, tail);
}

} // namespace

bool lk_cuda_tc_wgmma(lk_cuda_queue *q, const lk_gemm_args *a, int bm, int bn, int cl, int ks,
                      int split)
{
    const lk_cuda_device *dev = q->dev;
    if (dev->cc_major != 9 || dev->cc_minor != 0)
        return false;
    /* TMA: k-contiguous rows (A M x K, B N x K), 16-byte aligned bases and
     * row strides; batches at a positive stride */
    if (a->ta != LK_NO_TRANS || a->tb != LK_TRANS)
        return false;
    if (a->a.ld % 8 || a->b.ld % 8 || ((uintptr_t)a->a.data & 15) || ((uintptr_t)a->b.data & 15))
        return false;
    if (a->batch > 1 && (a->a.batch_stride % 8 || a->b.batch_stride % 8 ||
                         a->a.batch_stride <= 0 || a->b.batch_stride <= 0))
        return false;
    bool known = false; /* a forced tile not in wg_tiles: chosen as for bn 0 */
    for (const wg_tile_cost &t : wg_tiles)
        known = known || (t.bm == bm && t.bn == bn);
    if (known)
        return wg_go(dev, a, q->stream, bm, bn, cl, ks, 0);
    const int64_t sms = dev->sm_count > 0 ? dev->sm_count : 1;
    const wg_pick p = wg_choose(a->m, a->n, a->k, a->batch, sms);
    /* The last wave of tiles may leave most SMs idle (2048 x 6912: 432
     * tiles of 128 x 256 are 3.3 waves of 132).  Split the columns: the
     * first launch takes whole waves (or a little less) of this tile, the
     * second the other columns with the tile chosen for them, its blocks
     * taking the SMs the first one's leave (wg_kargs.tail).  Taken where
     * the cost model gives it 5 % (split 2: whenever there is a last
     * wave; 0: never).  Every element still has its one MMA chain. */
    const int64_t tm = (a->m + p.bm - 1) / p.bm * a->batch;
    const int64_t tn = (a->n + p.bn - 1) / p.bn;
    const int64_t c1 = p.waves > 1 ? (p.waves - 1) * sms / tm : 0; /* columns of tiles, first launch */
    if (split != 0 && c1 >= 1 && c1 < tn) {
        lk_gemm_args r1 = *a, r2 = *a;
        const int64_t n1 = c1 * p.bn;
        r1.n = n1;
        r2.n = a->n - n1;
        r2.b.data = (char *)a->b.data + n1 * a->b.ld * (int64_t)lk_driver_dtype_size(a->b.dtype);
        r2.c.data = (char *)a->c.data + n1 * (int64_t)lk_driver_dtype_size(a->c.dtype);
        if (a->bias.data)
            r2.bias.data = (char *)a->bias.data + n1 * (int64_t)lk_driver_dtype_size(a->bias.dtype);
        const wg_pick p2 = wg_choose(r2.m, r2.n, r2.k, r2.batch, sms);
        const int64_t w1 = (tm * c1 + sms - 1) / sms; /* the first launch's waves */
        /* the second launch is tried dry first: once the first is
         * enqueued, a refusal would leave half a GEMM done */
        if ((split == 2 || (double)w1 * p.tile_us + p2.cost < 0.95 * p.cost) &&
            wg_go(dev, &r2, q->stream, p2.bm, p2.bn, 1, p2.ks, -1)) {
            if (!wg_go(dev, &r1, q->stream, p.bm, p.bn, wg_clusters(p.bm, p.bn, w1), p.ks, 0))
                return false;
            return wg_go(dev, &r2, q->stream, p2.bm, p2.bn, 1, p2.ks, 1);
        }
    }
    return wg_go(dev, a, q->stream, p.bm, p.bn, wg_clusters(p.bm, p.bn, p.waves), p.ks, 0);
}

/* The one bf16 kernel probed stands for all of them: the module's wgmma
 * kernels are compiled for the same targets. */
extern "C" int lk_cuda_tc_wgmma_loaded(const lk_cuda_device *dev)
{
    if (dev->cc_major != 9 || dev->cc_minor != 0)
        return 0;
    cudaFuncAttributes fa;
    const bool body = cudaFuncGetAttributes(&fa, wg_gemm_kernel<LK_BF16, 128, 128, 2>) ==
                          cudaSuccess &&
                      fa.sharedSizeBytes > 0;
    (void)cudaGetLastError();
    return body;
}
