/* Lockstep CUDA driver (internal): what the wgmma kernels share
 * (wgmma_gemm.cu, wgmma_int8.cu): whether this
 * compilation holds their bodies (LK_WG_BODY: sm_90a code only; other
 * targets compile empty kernels the host side never launches), the block
 * of three warpgroups, the grouped raster order of tiles, and the PTX
 * wrappers for TMA, clusters and wgmma's fence, commit and wait. */
#ifndef LK_CUDA_TC_WGMMA_PTX_CUH
#define LK_CUDA_TC_WGMMA_PTX_CUH

#include <cuda.h>

#include "backends/cuda/device.cuh"
#include "backends/cuda/mbarrier.cuh"
#include "backends/cuda/tc_ptx.cuh"

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
#endif /* LK_WG_BODY */

} // namespace

#endif
