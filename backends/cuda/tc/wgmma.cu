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

#include <cuda.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/mbarrier.cuh"
#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc_ptx.cuh"
#include "backends/cuda/tc/wgmma.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define LK_WG_BODY 1
#else
#define LK_WG_BODY 0
#endif

namespace {

#define WG_BM 128
#define WG_BK 64 /* one 128-byte swizzle row of bf16 / f16 */
#define WG_CONSUMERS 2
#define WG_THREADS (128 * (WG_CONSUMERS + 1))

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

/* Tile number -> its first row and column: groups of 8 tile rows, column
 * by column inside a group, so that the blocks running together share A
 * and B panels in L2. */
__host__ __device__ __forceinline__ void wg_tile(int64_t tile, int64_t tiles_m, int64_t tiles_n,
                                                 int bn, int64_t &m0, int64_t &n0, int bm = WG_BM)
{
    const int64_t per = 8 * tiles_n, first = tile / per * 8;
    const int64_t rows = tiles_m - first < 8 ? tiles_m - first : 8;
    m0 = (first + tile % per % rows) * bm;
    n0 = tile % per / rows * bn;
}

#if LK_WG_BODY
/* One TMA box {64 k, rows, 1 batch} at (k, row, batch) into dst. */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, int k, int row,
                                         int bat, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(map), "r"(k), "r"(row), "r"(bat), "r"(bar)
                 : "memory");
}

/* The same box into dst of both blocks of a cluster of two, completing on
 * the mbarrier at bar's offset in each (their shared-memory layouts are
 * the same). */
__device__ __forceinline__ void tma_load_pair(uint32_t dst, const CUtensorMap *map, int k, int row,
                                              int bat, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
                 "l"(map), "r"(k), "r"(row), "r"(bat), "r"(bar), "h"((unsigned short)3)
                 : "memory");
}

/* An arrival on the mbarrier at bar's offset in block `rank` of the
 * cluster, with the default (.release.cta) semantics, as CUTLASS's
 * ClusterBarrier: what it orders is a consumer's completed wgmma reads
 * before the producer's next TMA writes. */
__device__ __forceinline__ void mbar_arrive_at(uint32_t bar, unsigned rank)
{
    asm volatile("{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [r];\n}\n" ::"r"(bar),
                 "r"(rank)
                 : "memory");
}

__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* Every thread of both blocks of a cluster (after divergent code: not .aligned). */
__device__ __forceinline__ void wg_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;\n" ::: "memory");
}

/* Shared-memory matrix descriptor of a k-contiguous tile with 128-byte
 * rows in the 128-byte swizzle: start address, leading byte offset
 * (unused by this layout; 1 as CUTLASS sets it), stride byte offset 1024
 * (from one 8-row group to the next), swizzle mode 1 = 128 bytes. */
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr)
{
    return (uint64_t)((saddr & 0x3ffffu) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 |
           (uint64_t)1 << 62;
}

__device__ __forceinline__ void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

/* keeps the compiler from moving accumulator accesses across the async MMAs */
template <int R> __device__ __forceinline__ void wg_fence_regs(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

template <int N, lk_dtype D> struct wg_mma;

/* One wgmma step, the accumulators in registers d; TY is the PTX type of
 * A and B (bf16 or f16), the only difference between a tile's two forms. */
#define LK_WG_MMA_N32(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15" \
                     "}, %16, %17, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N64(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
                     "}, %32, %33, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N128(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
                     "}, %64, %65, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N256(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n256k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
                     "}, %128, %129, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
                       "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
                       "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
                       "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
                       "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N192(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n192k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
                     "}, %96, %97, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
                       "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
                       "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N24(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %14, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n24k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11" \
                     "}, %12, %13, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N80(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %42, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n80k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39" \
                     "}, %40, %41, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WG_MMA_N160(TY) \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n160k16.f32." TY "." TY " " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
                     "}, %80, %81, p, 1, 1, 0, 0;\n}\n" \
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
                       "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
                       "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
                       "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
                       "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
                       "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
                       "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
                       "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
                       "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
                       "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]) \
                     : "l"(da), "l"(db), "r"(1));

template <> struct wg_mma<24, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[12], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N24("bf16");
    }
};

template <> struct wg_mma<24, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[12], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N24("f16");
    }
};

template <> struct wg_mma<80, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[40], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N80("bf16");
    }
};

template <> struct wg_mma<80, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[40], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N80("f16");
    }
};

template <> struct wg_mma<160, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[80], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N160("bf16");
    }
};

template <> struct wg_mma<160, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[80], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N160("f16");
    }
};

template <> struct wg_mma<32, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[16], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N32("bf16");
    }
};

template <> struct wg_mma<32, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[16], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N32("f16");
    }
};

template <> struct wg_mma<64, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[32], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N64("bf16");
    }
};

template <> struct wg_mma<64, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[32], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N64("f16");
    }
};

template <> struct wg_mma<128, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N128("bf16");
    }
};

template <> struct wg_mma<128, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[64], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N128("f16");
    }
};

template <> struct wg_mma<256, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[128], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N256("bf16");
    }
};

template <> struct wg_mma<256, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[128], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N256("f16");
    }
};

template <> struct wg_mma<192, LK_BF16> {
    static __device__ __forceinline__ void run(float (&d)[96], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N192("bf16");
    }
};

template <> struct wg_mma<192, LK_F16> {
    static __device__ __forceinline__ void run(float (&d)[96], uint64_t da, uint64_t db)
    {
        LK_WG_MMA_N192("f16");
    }
};

/* One slice's NS wgmma steps (k 16 j, j ascending) as one commit group,
 * then the wait for the previous slice's group. */
template <int BN, lk_dtype D, int NS>
__device__ __forceinline__ void wg_slice(float (&acc)[BN / 2], uint32_t a_src, uint32_t b_src)
{
    wg_fence_regs(acc);
    wg_fence();
#pragma unroll
    for (int j = 0; j < NS; j++)
        wg_mma<BN, D>::run(acc, wg_desc(a_src + 32 * j), wg_desc(b_src + 32 * j));
    wg_commit();
    wg_wait<1>(); /* the previous slice's group has completed */
    wg_fence_regs(acc);
}

/* The int8 kernel's pieces: integer wgmma (k = 32 bytes per step, the same
 * 32 bytes of a 128-byte swizzled row as a bf16 k = 16 step, so wg_desc
 * serves both), 2-D TMA, and the proxy fence that makes the decoders'
 * shared-memory stores visible to wgmma's reads. */
#define LK_WQ_MMA_N64 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31" \
                     "}, %32, %33, p;\n}\n" \
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), \
                       "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), \
                       "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), \
                       "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WQ_MMA_N128 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
                     "}, %64, %65, p;\n}\n" \
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), \
                       "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), \
                       "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), \
                       "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), \
                       "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), \
                       "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), \
                       "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), \
                       "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]) \
                     : "l"(da), "l"(db), "r"(1));

#define LK_WQ_MMA_N256 \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n" \
                     "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 " \
                     "{" \
                     "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
                     "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
                     "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
                     "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
                     "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
                     "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
                     "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
                     "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" \
                     "}, %128, %129, p;\n}\n" \
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), \
                       "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), \
                       "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), \
                       "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), \
                       "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), \
                       "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), \
                       "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), \
                       "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), \
                       "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), \
                       "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), \
                       "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), \
                       "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), \
                       "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), \
                       "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), \
                       "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), \
                       "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127]) \
                     : "l"(da), "l"(db), "r"(1));

template <int N> struct wq_mma;

template <> struct wq_mma<64> {
    static __device__ __forceinline__ void run(int (&d)[32], uint64_t da, uint64_t db)
    {
        LK_WQ_MMA_N64;
    }
};

template <> struct wq_mma<128> {
    static __device__ __forceinline__ void run(int (&d)[64], uint64_t da, uint64_t db)
    {
        LK_WQ_MMA_N128;
    }
};

template <> struct wq_mma<256> {
    static __device__ __forceinline__ void run(int (&d)[128], uint64_t da, uint64_t db)
    {
        LK_WQ_MMA_N256;
    }
};

/* The same int8 step with A (the weights) from registers: per warp 16
 * rows, thread (g = lane / 4, t = lane % 4) holds rows g and g + 8, k 4t ..
 * 4t + 3 and 16 + 4t .. 16 + 4t + 3, as {a0 row g, a1 row g + 8, a2 row g
 * k + 16, a3 row g + 8 k + 16} (mma.m16n8k32's A fragment). */
template <int N> struct wr_mma;

template <> struct wr_mma<96> {
    template <int J>
    static __device__ __forceinline__ void run(int (&d)[48], const uint32_t (&f)[16], uint64_t db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %53, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n96k32.s32.s8.s8 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}, {%48, %49, %50, %51}, %52, p;\n}\n"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47])
                     : "r"(f[4 * J]), "r"(f[4 * J + 1]), "r"(f[4 * J + 2]), "r"(f[4 * J + 3]), "l"(db), "r"(1));
    }
};

template <> struct wr_mma<128> {
    template <int J>
    static __device__ __forceinline__ void run(int (&d)[64], const uint32_t (&f)[16], uint64_t db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p;\n}\n"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
                     : "r"(f[4 * J]), "r"(f[4 * J + 1]), "r"(f[4 * J + 2]), "r"(f[4 * J + 3]), "l"(db), "r"(1));
    }
};

template <> struct wr_mma<256> {
    template <int J>
    static __device__ __forceinline__ void run(int (&d)[128], const uint32_t (&f)[16], uint64_t db)
    {
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p;\n}\n"
                     : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
                     : "r"(f[4 * J]), "r"(f[4 * J + 1]), "r"(f[4 * J + 2]), "r"(f[4 * J + 3]), "l"(db), "r"(1));
    }
};

template <int R> __device__ __forceinline__ void wg_fence_regs(int (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+r"(d[i])::"memory");
}

/* One TMA box {cols, rows} at (col, row) into dst. */
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap *map, int col, int row,
                                            uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
                 "l"(map), "r"(col), "r"(row), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

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


/* The integer kernels' epilogue (lk_qgemm_store's arithmetic, the same
 * steps as every other int kernel).  Unrolled per accumulator with its
 * branches on y's dtype, the scales and LK_GEMM_ACCUMULATE, and with each
 * element's scale loaded after the previous element's store (a load may
 * not move above a store that may alias it), it was 80-190 KiB of machine
 * code per kernel and took as long as the K loop (512x2560x2560: 12.6 of
 * 26.3 us).  Now the common case (scales, f32 y, no accumulate) takes the
 * tile's per-column scales from shared memory (staged before the K loop)
 * and stores straight from the accumulators; everything else goes eight
 * elements at a time to code that is there once, its loads first. */

/* Eight elements: j at (r + 8 ((j / 2) % 2), s + 8 (j / 4) + j % 2) as
 * (m, n), or as (n, m) when tr (the weights-as-A kernel's y^T tile). */
__device__ __noinline__ void wq_store8(const lk_qgemm_args &q, bool tr, int64_t r, int64_t s,
                                       int a0, int a1, int a2, int a3, int a4, int a5, int a6,
                                       int a7)
{
    const int a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    lk_qepi p[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t rj = r + ((j >> 1) & 1) * 8, sj = s + (j >> 2) * 8 + (j & 1);
        const int64_t m = tr ? sj : rj, n = tr ? rj : sj;
        if (m < q.m && n < q.n)
            p[j] = lk_qgemm_pre(q, m, n);
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const int64_t rj = r + ((j >> 1) & 1) * 8, sj = s + (j >> 2) * 8 + (j & 1);
        const int64_t m = tr ? sj : rj, n = tr ? rj : sj;
        if (m < q.m && n < q.n)
            lk_qgemm_store_pre(q, m, n, a[j], p[j]);
    }
}

/* Whether a tile takes the fast epilogue: scales, f32 y, nothing to add
 * (the scales' values are checked by wq_stage_scales and wq_fast_rows). */
__device__ __forceinline__ bool wq_fast(const lk_qgemm_args &q)
{
    return q.x_scale.data != nullptr && q.y.dtype == LK_F32 && !(q.flags & LK_GEMM_ACCUMULATE);
}

/* The fast epilogue's conditions on a thread's two row scales: w scales
 * (tr) finite, x scales lk_qdiv_ok.  With finite scales no result is NaN
 * (the fast stores do not canonicalise: numerics.md section 3's NaN is
 * wq_store8's). */
__device__ __forceinline__ bool wq_fast_rows(bool tr, const float (&rsc)[2])
{
    return tr ? isfinite(rsc[0]) && isfinite(rsc[1]) : lk_qdiv_ok(rsc[0]) && lk_qdiv_ok(rsc[1]);
}

/* The two consumer warpgroups' named barrier (0 is __syncthreads). */
__device__ __forceinline__ void wq_consumer_sync()
{
    asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

/* The AND of p over the 256 consumer threads, which it synchronizes as
 * wq_consumer_sync. */
__device__ __forceinline__ bool wq_consumer_and(bool p)
{
    uint32_t r;
    asm volatile("{\n .reg .pred a, b;\n setp.ne.u32 a, %1, 0;\n"
                 " bar.red.and.pred b, 1, 256, a;\n selp.u32 %0, 1, 0, b;\n}\n"
                 : "=r"(r)
                 : "r"((uint32_t)p)
                 : "memory");
    return r != 0;
}

/* Stage the scales of a tile's columns s0 .. s0 + W - 1 (x scales of y^T's
 * columns when tr, with their reciprocals in sy for lk_qgemm_value_r; else
 * w scales of y's) from consumer thread u (0 .. 255), after every
 * consumer's reads of the previous tile's; 1 past the edge.  One copy for
 * both warpgroups: the 4-stage 256-column kernel has 1 KiB of shared
 * memory left (it stages no reciprocals).  Returns, to every consumer,
 * whether the tile may take the fast epilogue: wq_fast and every column's
 * scale lk_qdiv_ok (x scales, tr) or finite (w scales); wq_fast_rows
 * checks the thread's row scales. */
template <int W>
__device__ __forceinline__ bool wq_stage_scales(const lk_qgemm_args &q, bool tr, int64_t s0,
                                                int u, float *sc, float *sy)
{
    if (!wq_fast(q))
        return false;
    wq_consumer_sync();
    const float *const xsp = (const float *)q.x_scale.data;
    const float *const wsp = (const float *)q.w_scale.data;
    bool ok = true;
#pragma unroll
    for (int j = u; j < W; j += 256) {
        const int64_t col = s0 + j;
        float v = 1.0f;
        if (tr ? col < q.m : col < q.n)
            v = tr ? xsp[col * q.x_scale.ld] : wsp[q.w_scale.cols == 1 ? 0 : col];
        sc[j] = v;
        if (tr)
            sy[j] = __frcp_rn(v);
        ok = ok && (tr ? lk_qdiv_ok(v) : isfinite(v));
    }
    return wq_consumer_and(ok); /* and the staged scales are written */
}

/* A thread's ACC accumulators, i at (r + 8 ((i / 2) % 2), s + 8 (i / 4) +
 * i % 2) as (m, n), or (n, m) when tr; rsc[2]: the scales of its two rows
 * r and r + 8, sc (and sy when tr): the staged column scales, s0 the
 * tile's first column, fast: what wq_stage_scales returned.  The fast
 * epilogue divides with lk_qgemm_value_r (the row scales' reciprocals
 * here, the columns' staged), four elements (two rows x two columns) at a
 * time, their scale loads before their stores. */
template <int ACC>
__device__ __forceinline__ void wq_store(const lk_qgemm_args &q, bool tr, int64_t r, int64_t s,
                                         int64_t s0, const float (&rsc)[2], const float *sc,
                                         const float *sy, bool fast, const int (&acc)[ACC])
{
    if (fast && wq_fast_rows(tr, rsc)) {
        const int64_t rows = tr ? q.n : q.m, cols = tr ? q.m : q.n;
        /* element (r', s') of the tile at y + r' * rstr + s' * sstr */
        const int64_t rstr = tr ? 1 : q.y.ld, sstr = tr ? q.y.ld : 1;
        float *const y = (float *)q.y.data + r * rstr + s * sstr;
        const float *const scs = sc + (s - s0), *const sys = tr ? sy + (s - s0) : sy;
        const bool in0 = r < rows, in1 = r + 8 < rows;
        const float rr0 = tr ? 0.0f : __frcp_rn(rsc[0]), rr1 = tr ? 0.0f : __frcp_rn(rsc[1]);
        /* y's elements i, i + 1 are neighbours in a row unless tr: one
         * 8-byte store where y's rows allow (whole 32-byte sectors) */
        const bool pairs = !tr && ((uintptr_t)y & 7) == 0 && (q.y.ld & 1) == 0;
#pragma unroll
        for (int i = 0; i < ACC; i += 4) {
            const int off = (i >> 2) * 8;
            float cs[2], cr[2] = {0.0f, 0.0f};
#pragma unroll
            for (int b = 0; b < 2; b++) {
                cs[b] = scs[off + b];
                if (tr)
                    cr[b] = sys[off + b];
            }
#pragma unroll
            for (int rr = 0; rr < 2; rr++) {
                if (!(rr ? in1 : in0))
                    continue;
                float v[2];
#pragma unroll
                for (int b = 0; b < 2; b++) {
                    const int a = acc[i + 2 * rr + b];
                    v[b] = tr ? lk_qgemm_value_r(a, cs[b], cr[b], rsc[rr])
                              : lk_qgemm_value_r(a, rsc[rr], rr ? rr1 : rr0, cs[b]);
                }
                float *const p = y + rr * 8 * rstr + off * sstr;
                if (pairs && s + off + 1 < cols) {
                    *reinterpret_cast<float2 *>(p) = make_float2(v[0], v[1]);
                } else {
                    if (s + off < cols)
                        p[0] = v[0];
                    if (s + off + 1 < cols)
                        p[sstr] = v[1];
                }
            }
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < ACC; i += 8)
        wq_store8(q, tr, r, s + (i >> 2) * 8, acc[i], acc[i + 1], acc[i + 2], acc[i + 3],
                  acc[i + 4], acc[i + 5], acc[i + 6], acc[i + 7]);
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

/* The integer GEMMs (lk_ternary_gemm, lk_int8_gemm) on int8 wgmma: acc =
 * sum_k x[m, k] w[n, k] exactly in int32 (integer MMA; any order, any
 * tile), then lk_qgemm_store, the epilogue of every other int kernel.
 *
 * A persistent grid (one block per SM at most) walks 128 x BN output
 * tiles in tc_wgmma's grouped raster order, 128-k slices.  Warpgroup 0:
 * thread 0 streams x (TMA, 128-byte swizzle, zero past M and K) and the
 * weights into a STAGES-deep ring: int8 weights straight into the swizzled
 * B tile, LK_T2 codes packed (32 bytes per row and slice, no swizzle) into
 * a staging area, from which warps 1..3 decode them to int8 code - 1 into
 * the B tile in the swizzled layout wgmma's descriptor reads (16-byte chunk
 * j of row n at chunk j ^ (n % 8)).  Codes past K decode to whatever they
 * are; x is zero there.  Warpgroups 1 and 2 each multiply 64 rows, and
 * store their tile while warpgroup 0 already loads the next one's slices.
 * Barriers per stage: loaded (the TMA bytes), decoded (LK_T2: the 96
 * decoder threads), empty (the 8 consumer warps). */
#define WQ_BK 128       /* bytes of k per slice: one swizzle row */
#define WQ_DECODERS 96  /* warps 1..3 of warpgroup 0 */

template <bool T2, int BN> struct wq_cfg {
    static constexpr int A_BYTES = WG_BM * WQ_BK;
    static constexpr int B_BYTES = BN * WQ_BK;
    static constexpr int P_BYTES = T2 ? BN * (WQ_BK / 4) : 0;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES + P_BYTES; /* a multiple of 1024 */
    /* as many stages as fit in 224 KiB, at most 8 */
    static constexpr int STAGES = 224 * 1024 / STAGE_BYTES > 8 ? 8 : 224 * 1024 / STAGE_BYTES;
    static constexpr size_t SMEM = (size_t)STAGES * STAGE_BYTES + 1024;
};

struct wq_kargs {
    lk_qgemm_args q;
    int64_t tiles_m, tiles_n, ktiles;
    int split; /* weights-as-A kernel: 1, or blocks per tile (a cluster), each a part of K */
};

template <bool T2, int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wq_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
              const __grid_constant__ wq_kargs g)
{
    lk_pdl_wait();
    lk_pdl_trigger();
#if LK_WG_BODY
    typedef wq_cfg<T2, BN> C;
    constexpr int ACC = BN / 2; /* int32 accumulators per thread: 64 x BN over 128 threads */
    __shared__ __align__(8) uint64_t bars[3 * C::STAGES]; /* loaded[s], decoded[s], empty[s] */
    __shared__ float col_scale[BN];                      /* wq_stage_scales */
    extern __shared__ __align__(128) unsigned char wq_smem_raw[];
    const uint32_t base = lk_smem_addr(wq_smem_raw);
    const uint32_t ring = (base + 1023u) & ~1023u;
    unsigned char *const gring = wq_smem_raw + (ring - base);
    const uint32_t loaded0 = lk_smem_addr(&bars[0]);
    const uint32_t decoded0 = lk_smem_addr(&bars[C::STAGES]);
    const uint32_t empty0 = lk_smem_addr(&bars[2 * C::STAGES]);

    const int tid = threadIdx.x, wg = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            lk_mbar_init(loaded0 + 8 * s, 1);
            lk_mbar_init(decoded0 + 8 * s, WQ_DECODERS);
            lk_mbar_init(empty0 + 8 * s, WG_CONSUMERS * 4); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    const int64_t tiles = g.tiles_m * g.tiles_n, ktiles = g.ktiles;

    if (wg == 0) {
        /* the decoders need a few more registers than a TMA thread */
        if (T2)
            asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n");
        else
            asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            /* stage s and the parity ph of its current round, over all of
             * this block's tiles; "used" once the ring has gone round */
            uint32_t s = 0, ph = 0;
            bool used = false;
            for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
                int64_t m0, n0;
                wg_tile(tile, g.tiles_m, g.tiles_n, BN, m0, n0);
                for (int64_t kt = 0; kt < ktiles; kt++) {
                    if (used)
                        lk_mbar_wait(empty0 + 8 * s, ph ^ 1u);
                    const uint32_t a_dst = ring + s * C::STAGE_BYTES;
                    const uint32_t b_dst = a_dst + C::A_BYTES, p_dst = b_dst + C::B_BYTES;
                    lk_mbar_expect_tx(loaded0 + 8 * s, C::A_BYTES + (T2 ? C::P_BYTES : C::B_BYTES));
                    tma_load_2d(a_dst, &xmap, (int)(kt * WQ_BK), (int)m0, loaded0 + 8 * s);
                    if (T2)
                        tma_load_2d(p_dst, &wmap, (int)(kt * (WQ_BK / 4)), (int)n0,
                                    loaded0 + 8 * s);
                    else
                        tma_load_2d(b_dst, &wmap, (int)(kt * WQ_BK), (int)n0, loaded0 + 8 * s);
                    if (++s == C::STAGES) {
                        s = 0;
                        ph ^= 1u;
                        used = true;
                    }
                }
            }
        } else if (T2 && tid >= 32) {
            const int d = tid - 32;
            uint32_t s = 0, ph = 0;
            for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x)
                for (int64_t kt = 0; kt < ktiles; kt++) {
                    lk_mbar_wait(loaded0 + 8 * s, ph);
                    unsigned char *const bt = gring + s * C::STAGE_BYTES + C::A_BYTES;
                    const unsigned char *const pk = bt + C::B_BYTES;
                    /* item i: half h of row n's 32 code bytes, 16 bytes =
                     * four 16-k chunks; a quarter warp's 128-bit stores
                     * hit 8 distinct chunk columns (no bank conflicts) */
                    for (int i = d; i < 2 * BN; i += WQ_DECODERS) {
                        const int n = i >> 1, h = i & 1;
                        const uint4 v = *reinterpret_cast<const uint4 *>(pk + n * 32 + 16 * h);
                        const uint32_t wv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                        for (int e = 0; e < 4; e++) {
                            uint32_t o[4];
                            lk_t2_expand(wv[e], o);
                            const int chunk = (4 * h + e) ^ (n & 7);
                            *reinterpret_cast<uint4 *>(bt + n * WQ_BK + chunk * 16) =
                                make_uint4(o[0], o[1], o[2], o[3]);
                        }
                    }
                    fence_proxy_async();
                    lk_mbar_arrive(decoded0 + 8 * s);
                    if (++s == C::STAGES) {
                        s = 0;
                        ph ^= 1u;
                    }
                }
        }
        return;
    }

    /* consumers: warpgroup c owns rows m0 + 64 c .. m0 + 64 c + 63 */
    if (T2)
        asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1, lane = tid & 31, warp = (tid / 32) & 3;
    uint32_t s = 0, ph = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int64_t m0, n0;
        wg_tile(tile, g.tiles_m, g.tiles_n, BN, m0, n0);
        const bool fast = wq_stage_scales<BN>(g.q, false, n0, tid - 128, col_scale, nullptr);
        int acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; i++)
            acc[i] = 0;
        uint32_t prev = ~0u; /* the stage whose wgmma group may still be in flight */
        for (int64_t kt = 0; kt < ktiles; kt++) {
            lk_mbar_wait(loaded0 + 8 * s, ph);
            if (T2)
                lk_mbar_wait(decoded0 + 8 * s, ph);
            const uint32_t a_src = ring + s * C::STAGE_BYTES + c * 64 * WQ_BK;
            const uint32_t b_src = ring + s * C::STAGE_BYTES + C::A_BYTES;
            wg_fence_regs(acc);
            wg_fence();
            /* integer sums are exact: the last slice's steps past K add
             * zeros (x is zero there) and need no trimming */
#pragma unroll
            for (int j = 0; j < WQ_BK / 32; j++)
                wq_mma<BN>::run(acc, wg_desc(a_src + 32 * j), wg_desc(b_src + 32 * j));
            wg_commit();
            wg_wait<1>(); /* the previous slice's group has completed */
            wg_fence_regs(acc);
            if (prev != ~0u && lane == 0)
                lk_mbar_arrive(empty0 + 8 * prev);
            prev = s;
            if (++s == C::STAGES) {
                s = 0;
                ph ^= 1u;
            }
        }
        wg_wait<0>();
        wg_fence_regs(acc);
        if (prev != ~0u && lane == 0)
            lk_mbar_arrive(empty0 + 8 * prev);

        /* accumulator i: n8 block i / 4, row g (+ 8 for i % 4 >= 2),
         * column 2 t + i % 2; the thread's two x scales loaded once */
        const int64_t mrow = m0 + c * 64 + warp * 16 + (lane >> 2);
        const float *const xsp = (const float *)g.q.x_scale.data;
        float xs[2] = {1.0f, 1.0f};
        if (xsp)
#pragma unroll
            for (int r = 0; r < 2; r++)
                if (mrow + 8 * r < g.q.m)
                    xs[r] = xsp[(mrow + 8 * r) * g.q.x_scale.ld];
        wq_store(g.q, false, mrow, n0 + (lane & 3) * 2, n0, xs, col_scale, nullptr, fast, acc);
    }
#endif
}

/* lk_ternary_gemm on int8 wgmma with the weights as A, decoded in
 * registers ("wgmma-ra"): the product is computed transposed, y^T = W x^T,
 * so that the LK_T2 codes, 32 bytes per row and 128-k slice, go straight
 * from shared memory into the consumers' A fragments (no decoded copy in
 * shared memory, no decoder warps; exact int32 sums in any order, so
 * section 9's bits).  A tile: 128 weight rows (two consumer warpgroups of
 * 64) x BX rows of x (the wgmma N side, BX = 96, 128 or 256).  Warpgroup 0's
 * thread 0 streams per slice the x tile (TMA, 128-byte swizzle, zero past
 * M and K: codes past K meet x = 0) and the plain code tile into a
 * STAGES-deep ring (barriers: loaded, empty).  A consumer thread of warp w
 * needs rows 16 w + g and + 8 (g = lane / 4) and of each 16-k word of a
 * row the byte t = lane % 4 (k 4t .. 4t + 3 and 16 + 4t ..): two 16-byte
 * loads per row (a quad loads the same row: a broadcast), byte t of four
 * words gathered with three byte permutes, four codes expanded to four
 * int8 (lk_t2_expand), 16 A registers per slice.  With prepared weights
 * (PRE) the code tile comes from wr_pre_kernel's layout instead, the
 * thread's 16 registers in 16 contiguous bytes (wr_decode_pre).  A
 * warpgroup waits for its slice's MMAs before decoding the next (ptxas
 * serializes wgmmas whose input registers are written while any is in
 * flight); the two consumer warpgroups overlap each other's decode and
 * MMAs. */
template <int BX> struct wr_cfg {
    static constexpr int STAGES = BX == 256 ? 6 : 8;
    static constexpr int X_BYTES = BX * WQ_BK;
    static constexpr int P_BYTES = WG_BM * (WQ_BK / 4);
    static constexpr int STAGE_BYTES = X_BYTES + P_BYTES; /* a multiple of 1024 */
    static constexpr size_t SMEM = (size_t)STAGES * STAGE_BYTES + 1024;
};

/* The prepared layout's 4 KiB chunks (wr_pre_kernel): one per 128-row tile
 * of W and 128-k slice, for N x K codes. */
static inline int64_t wr_pre_chunks(int64_t n, int64_t k)
{
    return (n + WG_BM - 1) / WG_BM * ((k + WQ_BK - 1) / WQ_BK);
}

#if LK_WG_BODY
/* A fragments of one 128-k slice for rows at p (row g) and p + 8 * 32 (row
 * g + 8): f[4 j + r] is step j's register r. */
__device__ __forceinline__ void wr_decode(const unsigned char *p, int t, uint32_t (&f)[16])
{
    const uint32_t sel = (uint32_t)t | (uint32_t)(t + 4) << 4;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const uint4 lo = *reinterpret_cast<const uint4 *>(p + r * 8 * 32);
        const uint4 hi = *reinterpret_cast<const uint4 *>(p + r * 8 * 32 + 16);
        /* byte j of gathered word h: byte t of word 4 h + j (k 16 (4 h + j) + 4 t) */
        const uint32_t g0 = __byte_perm(__byte_perm(lo.x, lo.y, sel), __byte_perm(lo.z, lo.w, sel),
                                        0x5410);
        const uint32_t g1 = __byte_perm(__byte_perm(hi.x, hi.y, sel), __byte_perm(hi.z, hi.w, sel),
                                        0x5410);
        uint32_t o0[4], o1[4];
        lk_t2_expand(g0, o0);
        lk_t2_expand(g1, o1);
        /* step j (k 32 j ..): k 32 j + 4t is word 2 j, k 32 j + 16 + 4t word 2 j + 1 */
        f[0 + r] = o0[0];
        f[2 + r] = o0[1];
        f[4 + r] = o0[2];
        f[6 + r] = o0[3];
        f[8 + r] = o1[0];
        f[10 + r] = o1[1];
        f[12 + r] = o1[2];
        f[14 + r] = o1[3];
    }
}

/* The same 16 A registers from the thread's 16 bytes of a prepared slice
 * (wr_pre_kernel's layout): word q holds registers 4 q .. 4 q + 3, the
 * code of register e's byte b at bit 4 b + 16 (e / 2) + 2 (e % 2), so
 * that each register is one byte permute of a constant table (byte c =
 * code c - 1; the reserved 3 gives 2, as lk_t2_expand) with four codes as
 * its selectors.  A selector's bit 3 would replicate a sign and bit 2
 * picks the second operand (the same table): masks clear bit 3.  About
 * 2.3 operations a register against 5.8 from the canonical rows. */
__device__ __forceinline__ uint32_t wr_lut(uint32_t sel)
{
    uint32_t r;
    asm("prmt.b32 %0, %1, %1, %2;\n" : "=r"(r) : "r"(0x020100FFu), "r"(sel));
    return r;
}

__device__ __forceinline__ void wr_decode_pre(const unsigned char *p, uint32_t (&f)[16])
{
    const uint4 v = *reinterpret_cast<const uint4 *>(p);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint32_t lo = w[q] & 0x77777777u, hi = (w[q] >> 2) & 0x33333333u;
        f[4 * q + 0] = wr_lut(lo);
        f[4 * q + 1] = wr_lut(hi);
        f[4 * q + 2] = wr_lut(lo >> 16);
        f[4 * q + 3] = wr_lut(hi >> 16);
    }
}

template <int R> __device__ __forceinline__ void wr_fence_regs(uint32_t (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+r"(d[i])::"memory");
}
#endif

#if LK_WG_BODY
/* A split tile's sum (wr_kernel with g.split = S > 1, one tile per
 * cluster of S blocks, each with the same thread -> accumulator mapping
 * and a part of K).  Groups of 8 accumulators, q of G = ACC / 8, belong
 * to rank q S / G.  Every block puts its groups into its own ring (free
 * once both warpgroups are done with it: one tile per block, the caller
 * syncs the consumers): another rank's into the
 * slot for that rank, its own into its sum area; then each owner adds the
 * slots meant for it from every other block's ring (distributed shared
 * memory, 16-byte loads that can all be in flight) to its sums.  Integer
 * sums: any order gives the same bits.  Everything after the accumulators
 * leave the registers is a loop over the owned groups (the unrolled
 * register epilogue with a runtime range was 200 KiB of code and missed
 * the instruction cache).  Layout, 16 bytes per (4 accumulators, thread
 * u): [area][il / 4][u] with area = peer slot (0 .. S - 2) or S - 1 for the
 * sums, il owner-relative. */
__device__ __forceinline__ void cluster_sync_all()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

struct wr_split {
    int S, rank, gmax, glo, ghi; /* owned groups [glo, ghi) */
    uint32_t ring;
    int u;
    __device__ __forceinline__ uint32_t at(int area, int il) const
    {
        return ring + (uint32_t)(((area * gmax * 2 + il / 4) * 256 + u) * 16);
    }
};

template <int ACC>
__device__ __forceinline__ wr_split wr_split_sum(const int (&acc)[ACC], int S, int rank,
                                                 uint32_t ring, int u)
{
    constexpr int G = ACC / 8;
    wr_split sp;
    sp.S = S;
    sp.rank = rank;
    sp.gmax = (G + S - 1) / S; /* most groups a rank owns */
    sp.glo = (rank * G + S - 1) / S;
    sp.ghi = ((rank + 1) * G + S - 1) / S;
    sp.ring = ring;
    sp.u = u;
#pragma unroll
    for (int i = 0; i < ACC; i += 4) {
        const int o = (i / 8) * S / G, ofirst = (o * G + S - 1) / S;
        const int area = o == rank ? S - 1 : o < rank ? o : o - 1;
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(
                         sp.at(area, i - 8 * ofirst)),
                     "r"(acc[i]), "r"(acc[i + 1]), "r"(acc[i + 2]), "r"(acc[i + 3])
                     : "memory");
    }
    cluster_sync_all(); /* every block's parts are in its ring */
    for (int il = 0; il < 8 * (sp.ghi - sp.glo); il += 4) {
        uint4 t;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(t.x), "=r"(t.y), "=r"(t.z), "=r"(t.w)
                     : "r"(sp.at(S - 1, il)));
        for (int p = 0; p < S; p++) {
            if (p == rank)
                continue;
            uint32_t remote, v0, v1, v2, v3;
            /* my slot in peer p's numbering */
            asm("mapa.shared::cluster.u32 %0, %1, %2;\n"
                : "=r"(remote)
                : "r"(sp.at(rank - (rank > p ? 1 : 0), il)), "r"(p));
            asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                         : "r"(remote));
            t.x += v0; /* uint32: int32 wraps as the MMA's */
            t.y += v1;
            t.z += v2;
            t.w += v3;
        }
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(sp.at(S - 1, il)),
                     "r"(t.x), "r"(t.y), "r"(t.z), "r"(t.w)
                     : "memory");
    }
    cluster_sync_all(); /* no block leaves while a peer may still read its ring */
    return sp;
}

/* The owned groups' epilogue (wq_store's, y^T tile: element i of thread u
 * at (n, m) = (r + 8 ((i / 2) % 2), s + 8 (i / 4) + i % 2)), from the sums
 * wr_split_sum left in shared memory. */
__device__ __forceinline__ void wr_split_store(const lk_qgemm_args &q, const wr_split &sp,
                                               int64_t r, int64_t s, int64_t s0,
                                               const float (&rsc)[2], const float *sc,
                                               const float *sy, bool fast)
{
    for (int g = sp.glo; g < sp.ghi; g++) {
        int a[8];
#pragma unroll
        for (int h = 0; h < 2; h++)
            asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                         : "=r"(a[4 * h]), "=r"(a[4 * h + 1]), "=r"(a[4 * h + 2]),
                           "=r"(a[4 * h + 3])
                         : "r"(sp.at(sp.S - 1, 8 * (g - sp.glo) + 4 * h)));
        if (!fast || !wq_fast_rows(true, rsc)) {
            wq_store8(q, true, r, s + 16 * g, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
            continue;
        }
        const int64_t rows = q.n, cols = q.m;
        float *const y = (float *)q.y.data + r + s * q.y.ld;
        const float *const scs = sc + (s - s0), *const sys = sy + (s - s0);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int rr = (j >> 1) & 1, off = (2 * g + (j >> 2)) * 8 + (j & 1);
            if (r + 8 * rr >= rows || s + off >= cols)
                continue;
            y[rr * 8 + off * q.y.ld] = lk_qgemm_value_r(a[j], scs[off], sys[off], rsc[rr]);
        }
    }
}

#endif

template <int BX, bool PRE>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wr_kernel(const __grid_constant__ CUtensorMap xmap, const __grid_constant__ CUtensorMap wmap,
              const __grid_constant__ wq_kargs g)
{
    lk_pdl_wait();
    lk_pdl_trigger();
#if LK_WG_BODY
    typedef wr_cfg<BX> C;
    constexpr int ACC = BX / 2; /* int32 accumulators per thread: 64 x BX over 128 threads */
    __shared__ __align__(8) uint64_t bars[2 * C::STAGES]; /* loaded[s], empty[s] */
    __shared__ float col_scale[BX], col_recip[BX];      /* wq_stage_scales */
    extern __shared__ __align__(128) unsigned char wr_smem_raw[];
    const uint32_t base = lk_smem_addr(wr_smem_raw);
    const uint32_t ring = (base + 1023u) & ~1023u;
    const unsigned char *const gring = wr_smem_raw + (ring - base);
    const uint32_t loaded0 = lk_smem_addr(&bars[0]);
    const uint32_t empty0 = lk_smem_addr(&bars[C::STAGES]);

    const int tid = threadIdx.x, wg = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            lk_mbar_init(loaded0 + 8 * s, 1);
            lk_mbar_init(empty0 + 8 * s, WG_CONSUMERS * 4); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    /* tiles_m: 128-row tiles of W (q.n), tiles_n: BX-row tiles of x (q.m).
     * Split (g.split = S > 1): block b is rank b % S of a cluster of S that
     * takes tile b / S, and multiplies its part of the slices */
    const int64_t tiles = g.tiles_m * g.tiles_n;
    const int S = g.split, rank = S > 1 ? (int)(blockIdx.x % S) : 0;
    const int64_t tile0 = S > 1 ? blockIdx.x / S : blockIdx.x, tstep = S > 1 ? tiles : gridDim.x;
    const int64_t klo = g.ktiles * rank / S, khi = g.ktiles * (rank + 1) / S;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            uint32_t s = 0, ph = 0;
            bool used = false;
            for (int64_t tile = tile0; tile < tiles; tile += tstep) {
                int64_t w0, x0;
                wg_tile(tile, g.tiles_m, g.tiles_n, BX, w0, x0);
                for (int64_t kt = klo; kt < khi; kt++) {
                    if (used)
                        lk_mbar_wait(empty0 + 8 * s, ph ^ 1u);
                    const uint32_t x_dst = ring + s * C::STAGE_BYTES;
                    const uint32_t p_dst = x_dst + C::X_BYTES;
                    lk_mbar_expect_tx(loaded0 + 8 * s, C::STAGE_BYTES);
                    tma_load_2d(x_dst, &xmap, (int)(kt * WQ_BK), (int)x0, loaded0 + 8 * s);
                    if (PRE) /* wr_pre_kernel's slices, a tile's in K order: 16 rows of 256 */
                        tma_load_2d(p_dst, &wmap, 0, (int)(((w0 / WG_BM) * g.ktiles + kt) * 16),
                                    loaded0 + 8 * s);
                    else
                        tma_load_2d(p_dst, &wmap, (int)(kt * (WQ_BK / 4)), (int)w0,
                                    loaded0 + 8 * s);
                    if (++s == C::STAGES) {
                        s = 0;
                        ph ^= 1u;
                        used = true;
                    }
                }
            }
        }
        return;
    }

    /* consumers: warpgroup c owns weight rows w0 + 64 c .. w0 + 64 c + 63 */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1, lane = tid & 31, warp = (tid / 32) & 3, t = lane & 3;
    const int prow = c * 64 + warp * 16 + (lane >> 2); /* this thread's row g in the code tile */
    uint32_t s = 0, ph = 0;
    uint32_t fa[16], fb[16]; /* A fragments of two slices */
    for (int64_t tile = tile0; tile < tiles; tile += tstep) {
        int64_t w0, x0;
        wg_tile(tile, g.tiles_m, g.tiles_n, BX, w0, x0);
        const bool fast = wq_stage_scales<BX>(g.q, true, x0, tid - 128, col_scale, col_recip);
        int acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; i++)
            acc[i] = 0;
        /* two slices per wgmma group: both decoded (two independent
         * chains for the scheduler) before the group's first wgmma, since
         * ptxas serializes wgmmas whose A registers are written while any
         * wgmma is in flight (C7513), even another buffer's; the other
         * consumer warpgroup overlaps this one's decode */
        for (int64_t kt = klo; kt < khi; kt += 2) {
            const bool two = kt + 1 < khi;
            const uint32_t s0 = s, s1 = s + 1 == C::STAGES ? 0 : s + 1;
            const uint32_t ph1 = s + 1 == C::STAGES ? ph ^ 1u : ph;
            lk_mbar_wait(loaded0 + 8 * s0, ph);
            wr_fence_regs(fa);
            if (PRE)
                wr_decode_pre(gring + s0 * C::STAGE_BYTES + C::X_BYTES + (tid - 128) * 16, fa);
            else
                wr_decode(gring + s0 * C::STAGE_BYTES + C::X_BYTES + prow * 32, t, fa);
            wr_fence_regs(fb);
            if (two) {
                lk_mbar_wait(loaded0 + 8 * s1, ph1);
                if (PRE)
                    wr_decode_pre(gring + s1 * C::STAGE_BYTES + C::X_BYTES + (tid - 128) * 16,
                                  fb);
                else
                    wr_decode(gring + s1 * C::STAGE_BYTES + C::X_BYTES + prow * 32, t, fb);
            } else {
                /* an odd count's last group: zero weights add nothing to
                 * the exact int32 sums (no branch around the wgmmas) */
#pragma unroll
                for (int i = 0; i < 16; i++)
                    fb[i] = 0;
            }
            const uint32_t x0s = ring + s0 * C::STAGE_BYTES;
            const uint32_t x1s = two ? ring + s1 * C::STAGE_BYTES : x0s;
            wg_fence_regs(acc);
            wr_fence_regs(fa);
            wr_fence_regs(fb);
            wg_fence();
            wr_mma<BX>::template run<0>(acc, fa, wg_desc(x0s));
            wr_mma<BX>::template run<1>(acc, fa, wg_desc(x0s + 32));
            wr_mma<BX>::template run<2>(acc, fa, wg_desc(x0s + 64));
            wr_mma<BX>::template run<3>(acc, fa, wg_desc(x0s + 96));
            wr_mma<BX>::template run<0>(acc, fb, wg_desc(x1s));
            wr_mma<BX>::template run<1>(acc, fb, wg_desc(x1s + 32));
            wr_mma<BX>::template run<2>(acc, fb, wg_desc(x1s + 64));
            wr_mma<BX>::template run<3>(acc, fb, wg_desc(x1s + 96));
            wg_commit();
            wg_wait<0>();
            wg_fence_regs(acc);
            wr_fence_regs(fa);
            wr_fence_regs(fb);
            if (lane == 0) {
                lk_mbar_arrive(empty0 + 8 * s0);
                if (two)
                    lk_mbar_arrive(empty0 + 8 * s1);
            }
            s = two ? s1 : s0;
            ph = two ? ph1 : ph;
            if (++s == C::STAGES) {
                s = 0;
                ph ^= 1u;
            }
        }

        /* accumulator i: weight row (y column) prow (+ 8 for i % 4 >= 2),
         * x row (y row) x0 + 8 (i / 4) + 2t + i % 2; the thread's two w
         * scales loaded once */
        const float *const wsp = (const float *)g.q.w_scale.data;
        float ws[2] = {1.0f, 1.0f};
        if (g.q.x_scale.data)
#pragma unroll
            for (int r = 0; r < 2; r++) {
                const int64_t n = w0 + prow + 8 * r;
                if (n < g.q.n)
                    ws[r] = wsp[g.q.w_scale.cols == 1 ? 0 : n];
            }
        if (S > 1) {
            /* the other warpgroup may still decode from the ring that the
             * exchange writes (racecheck found it; the staged scales are
             * written too) */
            wq_consumer_sync();
            const wr_split sp = wr_split_sum<ACC>(acc, S, rank, ring, tid - 128);
            wr_split_store(g.q, sp, w0 + prow, x0 + 2 * t, x0, ws, col_scale, col_recip, fast);
        } else {
            wq_store(g.q, true, w0 + prow, x0 + 2 * t, x0, ws, col_scale, col_recip, fast, acc);
        }
    }
#endif
}

/* cuTensorMapEncodeTiled from the driver, found once. */
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                              const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                              const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

encode_fn get_encode()
{
    static encode_fn fn;
    static int tried;
    if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult qr;
#if CUDART_VERSION >= 12050
        const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
                                                               12000, cudaEnableDefault, &qr);
#else
        const cudaError_t e =
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &qr);
#endif
        if (e != cudaSuccess || qr != cudaDriverEntryPointSuccess)
            p = NULL;
        (void)cudaGetLastError();
        __atomic_store_n(&fn, (encode_fn)p, __ATOMIC_RELEASE);
        __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
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

/* Clusters of n blocks of kernel (WG_THREADS threads, smem bytes of
 * dynamic shared memory) the device holds at once, asked once and kept in
 * *slot (0: not asked, -1: none, else the count); 0 where none. */
template <typename... P>
int wg_max_clusters(void (*kernel)(P...), size_t smem, unsigned n, int *slot)
{
    int v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (v == 0) {
        cudaLaunchAttribute attr[1] = {lk_cluster_attr(n)};
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(n);
        cfg.blockDim = dim3(WG_THREADS);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int c = 0;
        if (cudaOccupancyMaxActiveClusters(&c, kernel, &cfg) != cudaSuccess || c < 1)
            c = -1;
        (void)cudaGetLastError();
        __atomic_store_n(slot, c, __ATOMIC_RELEASE);
        v = c;
    }
    return v < 0 ? 0 : v;
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


/* A 2-D byte matrix: rows x cols bytes, ld bytes apart, boxes of
 * box_rows x box_cols; swizzled (128 bytes) or plain. */
bool make_map_u8(encode_fn enc, CUtensorMap *map, const void *base, int64_t rows, int64_t cols,
                 int64_t ld, int box_cols, int box_rows, bool swizzle)
{
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)ld};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t estr[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE,
               swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <bool T2, int BN>
bool wq_launch(const lk_cuda_device *dev, const lk_qgemm_args *q, cudaStream_t st)
{
    typedef wq_cfg<T2, BN> C;
    auto kern = wq_kernel<T2, BN>;
    /* as wg_launch: the image has the wgmma body and the device the room */
    static unsigned long long probed, usable;
    const unsigned long long bit =
        dev->ordinal >= 0 && dev->ordinal < 64 ? 1ull << dev->ordinal : 0;
    if (!bit || !(__atomic_load_n(&probed, __ATOMIC_ACQUIRE) & bit)) {
        cudaFuncAttributes fa;
        bool good = cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
                    fa.sharedSizeBytes >= 3 * C::STAGES * sizeof(uint64_t) &&
                    C::SMEM + fa.sharedSizeBytes <= dev->smem_optin &&
                    lk_smem_optin<wq_kernel<T2, BN> >(dev->ordinal, C::SMEM) == cudaSuccess;
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
    const int64_t wbytes = T2 ? (q->k + 3) / 4 : q->k, wld = T2 ? q->w.ld / 4 : q->w.ld;
    CUtensorMap xm, wm;
    if (!make_map_u8(enc, &xm, q->x.data, q->m, q->k, q->x.ld, WQ_BK, WG_BM, true) ||
        !make_map_u8(enc, &wm, q->w.data, q->n, wbytes, wld, T2 ? WQ_BK / 4 : WQ_BK, BN, !T2))
        return false;
    wq_kargs g;
    g.q = *q;
    g.split = 1;
    g.tiles_m = (q->m + WG_BM - 1) / WG_BM;
    g.tiles_n = (q->n + BN - 1) / BN;
    g.ktiles = (q->k + WQ_BK - 1) / WQ_BK;
    const int64_t tiles = g.tiles_m * g.tiles_n, sms = dev->sm_count > 0 ? dev->sm_count : 1;
    const unsigned grid = (unsigned)(tiles < sms ? tiles : sms);
    lk_launch(wq_kernel<T2, BN>, grid, WG_THREADS, C::SMEM, st, xm, wm, g);
    return true;
}


/* Whether wr_kernel<BX, PRE> can run on the device (as wg_launch: the
 * image has the wgmma body and the device the room), its shared memory
 * opted in once. */
template <int BX, bool PRE> bool wr_ready(const lk_cuda_device *dev)
{
    typedef wr_cfg<BX> C;
    auto kern = wr_kernel<BX, PRE>;
    static unsigned long long probed, usable;
    const unsigned long long bit =
        dev->ordinal >= 0 && dev->ordinal < 64 ? 1ull << dev->ordinal : 0;
    if (!bit || !(__atomic_load_n(&probed, __ATOMIC_ACQUIRE) & bit)) {
        cudaFuncAttributes fa;
        bool good = cudaFuncGetAttributes(&fa, kern) == cudaSuccess &&
                    fa.sharedSizeBytes >= 2 * C::STAGES * sizeof(uint64_t) &&
                    C::SMEM + fa.sharedSizeBytes <= dev->smem_optin &&
                    lk_smem_optin<wr_kernel<BX, PRE> >(dev->ordinal, C::SMEM) == cudaSuccess;
        (void)cudaGetLastError();
        if (bit) {
            if (good)
                __atomic_fetch_or(&usable, bit, __ATOMIC_RELEASE);
            __atomic_fetch_or(&probed, bit, __ATOMIC_RELEASE);
        } else if (!good) {
            return false;
        }
    }
    return !bit || (__atomic_load_n(&usable, __ATOMIC_ACQUIRE) & bit);
}

/* Clusters of split (2..8) wr_kernel<BX, PRE> blocks the device holds at
 * once (one block an SM, a cluster within one GPC: 132 SMs held 16
 * clusters of 6 but 33 of 4 on an H200), cached per device; 0 where
 * unknown. */
template <int BX, bool PRE> int wr_clusters(const lk_cuda_device *dev, int split)
{
    static int cache[64][9];
    if (dev->ordinal < 0 || dev->ordinal >= 64 || split < 2 || split > 8 ||
        !wr_ready<BX, PRE>(dev))
        return 0;
    return wg_max_clusters(wr_kernel<BX, PRE>, wr_cfg<BX>::SMEM, (unsigned)split,
                           &cache[dev->ordinal][split]);
}

/* pre: the codes in wr_pre_kernel's layout (q->w then only gives N and K),
 * or NULL */
template <int BX, bool PRE>
bool wr_launch(const lk_cuda_device *dev, const lk_qgemm_args *q, const void *pre, int split,
               cudaStream_t st)
{
    typedef wr_cfg<BX> C;
    auto kern = wr_kernel<BX, PRE>;
    if (!wr_ready<BX, PRE>(dev))
        return false;
    encode_fn enc = get_encode();
    if (!enc)
        return false;
    CUtensorMap xm, wm;
    if (!make_map_u8(enc, &xm, q->x.data, q->m, q->k, q->x.ld, WQ_BK, BX, true))
        return false;
    /* prepared codes: rows of 256 bytes, a slice's 4 KiB 16 of them (a
     * tensor copy as the canonical rows', whose ring reuse compute-sanitizer
     * follows: with a plain bulk copy racecheck reported the reuse as a race) */
    const int64_t chunks = wr_pre_chunks(q->n, q->k);
    if (PRE && chunks > 2147483647 / 16) /* TMA coordinates are int32 */
        return false;
    if (PRE ? !make_map_u8(enc, &wm, pre, chunks * 16, 256, 256, 256, 16, false)
            : !make_map_u8(enc, &wm, q->w.data, q->n, (q->k + 3) / 4, q->w.ld / 4, WQ_BK / 4,
                           WG_BM, false))
        return false;
    wq_kargs g;
    g.q = *q;
    g.tiles_m = (q->n + WG_BM - 1) / WG_BM; /* weight rows */
    g.tiles_n = (q->m + BX - 1) / BX;       /* x rows */
    g.ktiles = (q->k + WQ_BK - 1) / WQ_BK;
    g.split = split;
    const int64_t tiles = g.tiles_m * g.tiles_n, sms = dev->sm_count > 0 ? dev->sm_count : 1;
    /* split: one cluster of split blocks per tile (the caller keeps tiles x
     * split within a grid) */
    if (split > 1) {
        if (lk_launch_cluster(kern, (unsigned)(tiles * split), WG_THREADS, C::SMEM, st,
                              (unsigned)split, xm, wm, g) == cudaSuccess)
            return true;
        (void)cudaGetLastError(); /* a cluster the device could not place: unsplit */
        g.split = 1;
    }
    /* persistent blocks over the tiles */
    lk_launch(kern, (unsigned)(tiles < sms ? tiles : sms), WG_THREADS, C::SMEM, st, xm, wm, g);
    return true;
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
 * 8192³ and 2048x3072x768 (docs/bench.md, thirteenth round): within 18 %,
 * and on 17 of those 19 shapes the fastest tile or within 3 % of it.
 * 64 x 128's slice then cost 0.296 us, 0.3 % short of 128 x 64's tie at
 * 128 x 6912 x 2560, where an H100 took 18.5 us with 64 x 128 and 16.1
 * with 128 x 64 (sixteenth round): 0.300 gives 128 x 64 there and at
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
        r2.b.data = (char *)a->b.data + n1 * a->b.ld * (int64_t)lk_dtype_size(a->b.dtype);
        r2.c.data = (char *)a->c.data + n1 * (int64_t)lk_dtype_size(a->c.dtype);
        if (a->bias.data)
            r2.bias.data = (char *)a->bias.data + n1 * (int64_t)lk_dtype_size(a->bias.dtype);
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

bool lk_cuda_tc_wgmma_qgemm(lk_cuda_queue *queue, const lk_qgemm_args *a, bool t2, int bn)
{
    const lk_cuda_device *dev = queue->dev;
    if (dev->cc_major != 9 || dev->cc_minor != 0 || a->m < 1 || a->n < 1 || a->k < 1)
        return false;
    /* TMA: 16-byte aligned bases and row strides; coordinates in int32 */
    const int64_t wld = t2 ? a->w.ld / 4 : a->w.ld;
    if (((uintptr_t)a->x.data & 15) || ((uintptr_t)a->w.data & 15) || a->x.ld % 16 ||
        wld % 16 || (t2 && a->w.ld % 4))
        return false;
    if (a->m > 2147483647 - WG_BM || a->n > 2147483647 - 256 || a->k > 2147483647 - WQ_BK)
        return false;
    if (bn == 0) {
        /* the tile with the least work on the busiest SM (waves x tile
         * area); a tie goes to the wide tile (less shared-memory traffic
         * per MMA) */
        const int64_t sms = dev->sm_count > 0 ? dev->sm_count : 1, tm = (a->m + WG_BM - 1) / WG_BM;
        const int64_t w128 = (tm * ((a->n + 127) / 128) + sms - 1) / sms;
        const int64_t w256 = (tm * ((a->n + 255) / 256) + sms - 1) / sms;
        bn = w256 * 256 <= w128 * 128 ? 256 : 128;
    }
    const cudaStream_t st = queue->stream;
    if (t2)
        return bn == 256   ? wq_launch<true, 256>(dev, a, st)
               : bn == 128 ? wq_launch<true, 128>(dev, a, st)
                           : wq_launch<true, 64>(dev, a, st);
    return bn == 256   ? wq_launch<false, 256>(dev, a, st)
           : bn == 128 ? wq_launch<false, 128>(dev, a, st)
                       : wq_launch<false, 64>(dev, a, st);
}

namespace {

template <bool PRE> int wr_cap(const lk_cuda_device *dev, int w, int sp)
{
    return w == 256   ? wr_clusters<256, PRE>(dev, sp)
           : w == 128 ? wr_clusters<128, PRE>(dev, sp)
                      : wr_clusters<96, PRE>(dev, sp);
}

template <bool PRE>
bool wr_go(const lk_cuda_device *dev, const lk_qgemm_args *a, const void *pre, int bx, int split,
           cudaStream_t st)
{
    return bx == 256   ? wr_launch<256, PRE>(dev, a, pre, split, st)
           : bx == 128 ? wr_launch<128, PRE>(dev, a, pre, split, st)
                       : wr_launch<96, PRE>(dev, a, pre, split, st);
}

/* The prepared layout of wr_kernel<BX, true>: per 128-row tile of W (N
 * padded), per 128-k slice in K order, 4096 bytes, 16 for each consumer
 * thread u = 128 c + 32 warp + lane: its 16 A registers of the slice
 * (rows 64 c + 16 warp + lane / 4 and + 8, k 16 i + 4 (lane % 4) + b),
 * in wr_decode_pre's order.  Codes past N or K are 1 (value 0; x is zero
 * there anyway).  One thread per 32-bit word. */
__global__ void __launch_bounds__(256) wr_pre_kernel(lk_tensor w, int64_t ktiles, int64_t words,
                                                     uint32_t *dst)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const unsigned char *src = (const unsigned char *)w.data;
    const int64_t ldb = w.ld / 4;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int q = (int)(i & 3), u = (int)((i >> 2) & 255);
        const int64_t chunk = i >> 10, tm = chunk / ktiles, kt = chunk % ktiles;
        const int lane = u & 31, t = lane & 3;
        const int64_t row = tm * WG_BM + (u >> 7) * 64 + ((u >> 5) & 3) * 16 + (lane >> 2);
        uint32_t word = 0;
        for (int e = 0; e < 4; e++) {
            const int64_t n = row + 8 * (e & 1);
            const int64_t kb = kt * WQ_BK + 16 * (2 * q + (e >> 1)) + 4 * t;
            for (int b = 0; b < 4; b++) {
                const int64_t k = kb + b;
                const uint32_t code =
                    n < w.rows && k < w.cols ? (src[n * ldb + k / 4] >> (2 * (k % 4))) & 3u : 1u;
                word |= code << (4 * b + 16 * (e >> 1) + 2 * (e & 1));
            }
        }
        dst[i] = word;
    }
}

} // namespace

size_t lk_cuda_tc_t2_pre_bytes(const lk_cuda_device *dev, int64_t n, int64_t k)
{
    const char *env = getenv("LOCKSTEP_CUDA_T2_TC_LAYOUT");
    if (env && strcmp(env, "0") == 0)
        return 0;
    if (dev->cc_major != 9 || dev->cc_minor != 0 || n < 1 || k < 1 ||
        n > 2147483647 - WG_BM || k > 2147483647 - WQ_BK || !wr_ready<128, true>(dev))
        return 0;
    return (size_t)wr_pre_chunks(n, k) * wr_cfg<128>::P_BYTES;
}

bool lk_cuda_tc_t2_pre_make(cudaStream_t st, const lk_tensor *w, void *dst)
{
    const int64_t ktiles = (w->cols + WQ_BK - 1) / WQ_BK;
    const int64_t words = wr_pre_chunks(w->rows, w->cols) * (wr_cfg<128>::P_BYTES / 4);
    return lk_launch(wr_pre_kernel, lk_grid_cap((words + 255) / 256, (int64_t)1 << 20), 256, 0,
                     st, *w, ktiles, words, (uint32_t *)dst) == cudaSuccess;
}

bool lk_cuda_tc_wgmma_ternary_ra(lk_cuda_queue *queue, const lk_qgemm_args *a, const void *pre,
                                 int bx, int split)
{
    const lk_cuda_device *dev = queue->dev;
    if (dev->cc_major != 9 || dev->cc_minor != 0 || a->m < 1 || a->n < 1 || a->k < 1)
        return false;
    /* TMA: 16-byte aligned bases and row strides; coordinates in int32 */
    if (((uintptr_t)a->x.data & 15) || a->x.ld % 16 ||
        (!pre && (((uintptr_t)a->w.data & 15) || a->w.ld % 64)))
        return false;
    if (a->m > 2147483647 - 256 || a->n > 2147483647 - WG_BM || a->k > 2147483647 - WQ_BK)
        return false;
    const int64_t sms = dev->sm_count > 0 ? dev->sm_count : 1, tw = (a->n + WG_BM - 1) / WG_BM;
    const int64_t ktiles = (a->k + WQ_BK - 1) / WQ_BK;
    /* The width and split with the least time: a block's time per slice
     * and per tile (prologue, pipeline fill, epilogue; less for a
     * persistent block's later tiles, whose loads overlap the previous
     * epilogue), in 5 ns units, fitted on the H200 (2026-11-22, prepared
     * codes, tc-bench's BitNet shapes at M = 512 and 2048, within 5 %);
     * canonical codes decode slower (16 a slice at 96 and 128, 512 x 2560
     * x 2560 and x 6912; 30 at 256 estimated), and 96 wide never paid for
     * them (forced only).  A split tile (one cluster of S blocks, launched
     * in waves of the clusters the device holds) adds the exchange and
     * its barriers.  Ties go to the narrower tile and the smaller split. */
    struct wr_time {
        int width, slice, tile, next, split;
    };
    static const wr_time times[3] = {
        {96, 74, 1140, 480, 500}, {128, 78, 1320, 800, 510}, {256, 113, 1960, 1580, 900}};
    int64_t best = -1;
    int bbx = bx, bsp = split;
    for (const wr_time &T : times) {
        const int w = T.width;
        if (bx ? w != bx : (w == 96 && !pre))
            continue;
        const int64_t tiles = tw * ((a->m + w - 1) / w);
        const int64_t per = T.slice + (pre ? 0 : w == 256 ? 30 : 16);
        for (int sp = 1; sp <= 8; sp++) {
            if (split ? sp != split : sp > 1 && sp > ktiles / 2)
                continue;
            int64_t cost;
            if (sp == 1) {
                const int64_t rounds = (tiles + sms - 1) / sms;
                cost = rounds * ktiles * per + T.tile + (rounds - 1) * T.next;
            } else {
                if (tiles * sp > 2147483647)
                    continue;
                const int cap = pre ? wr_cap<true>(dev, w, sp) : wr_cap<false>(dev, w, sp);
                if (cap < 1)
                    continue;
                cost = (tiles + cap - 1) / cap * ((ktiles + sp - 1) / sp * per + T.tile + T.split);
            }
            if (best < 0 || cost < best) {
                best = cost;
                bbx = w;
                bsp = sp;
            }
        }
    }
    if (best < 0) /* a forced split no cluster can hold */
        bsp = 1;
    bx = bbx ? bbx : 128;
    split = bsp > 0 ? bsp : 1;
    return pre ? wr_go<true>(dev, a, pre, bx, split, queue->stream)
               : wr_go<false>(dev, a, nullptr, bx, split, queue->stream);
}
