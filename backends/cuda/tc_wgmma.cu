/* Lockstep CUDA: the LK_GEMM_TC_SM90 tier on Hopper's wgmma (sm_90a).
 *
 * Same contract as tc_gemm.cu's mma.sync kernels (docs/numerics.md,
 * "Tensor-core tier"): per output element one accumulator chain from +0,
 * one wgmma k = 16 step per 16 k, ascending, exactly ceil(K / 16) steps
 * (a slice's steps wholly past K are not issued; the last step's k >= K
 * are zeros), then section 4's epilogue.  wgmma m64nNk16 is one fused
 * k = 16 step per output element (the LK_GEMM_TC_SM90 model), so the bits
 * equal the mma.sync kernels' and backends/ref/mma_model.c's.
 *
 * The block: a 128 x BN tile (BN = 256 or 128), three warpgroups.
 * Warpgroup 0 is the producer: one thread streams 64-k slices of A (128
 * rows) and B (BN rows) with TMA (cp.async.bulk.tensor, 128-byte swizzle,
 * zero fill past M, N and K) into a STAGES-deep ring of shared-memory
 * buffers, each guarded by a "full" and an "empty" mbarrier.  Warpgroups 1
 * and 2 are the consumers, 64 rows each: per slice, four wgmma steps with
 * both operands read from shared memory through matrix descriptors, one
 * commit group per slice, and a buffer is handed back once the group that
 * read it has completed (wgmma.wait_group 1).  Every wait is bounded: a
 * pipeline that stalls for 4 s traps (a launch failure, not a hang).
 *
 * Only A as M x K and B as N x K (both k-contiguous, rows 16-byte
 * aligned), batch strides > 0 or batch 1: other layouts, and builds
 * without sm_90a code, take tc_gemm.cu's mma.sync kernels.  Whether the
 * loaded image has the wgmma body is read from the kernel's static shared
 * memory (only the sm_90a body declares any), so a module built without
 * compute_90a never runs an empty kernel. */
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "backends/cuda/gemm.cuh"
#include "backends/cuda/tc_ptx.cuh"
#include "backends/cuda/tc_wgmma.cuh"

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
#define WG_STALL_NS 4000000000ull /* a pipeline wait this long (4 s) traps */

template <int BN> struct wg_cfg {
    static constexpr int STAGES = BN == 256 ? 4 : 6;
    static constexpr int A_BYTES = WG_BM * WG_BK * 2;
    static constexpr int B_BYTES = BN * WG_BK * 2;
    static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
    /* + 1024 to align the ring to the swizzle atom */
    static constexpr size_t SMEM = (size_t)STAGES * STAGE_BYTES + 1024;
};

struct wg_kargs {
    int64_t M, N, K, batch;
    lk_gemm_epi e;
};

#if LK_WG_BODY
__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ uint64_t global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* Wait for the completion of the phase of the given parity; a wait of
 * more than WG_STALL_NS traps. */
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity)
{
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        unsigned done;
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
        if (done)
            return;
        if (i % 256 == 0) {
            const uint64_t t = global_ns();
            if (t0 == 0)
                t0 = t;
            else if (t - t0 > WG_STALL_NS)
                __trap();
        }
    }
}

/* One TMA box {64 k, rows, 1 batch} at (k, row, batch) into dst. */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, int k, int row,
                                         int bat, uint32_t bar)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
                 "l"(map), "r"(k), "r"(row), "r"(bat), "r"(bar)
                 : "memory");
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

#endif /* LK_WG_BODY */

template <lk_dtype D, int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wg_gemm_kernel(const __grid_constant__ CUtensorMap amap,
                   const __grid_constant__ CUtensorMap bmap, wg_kargs g)
{
#if LK_WG_BODY
    typedef wg_cfg<BN> C;
    constexpr int ACC = BN / 2; /* f32 accumulators per thread: 64 x BN over 128 threads */
    __shared__ __align__(8) uint64_t bars[2 * C::STAGES]; /* full[s], empty[s] */
    extern __shared__ __align__(128) unsigned char wg_smem_raw[];
    const uint32_t ring = (lk_smem_addr(wg_smem_raw) + 1023u) & ~1023u;
    const uint32_t full0 = lk_smem_addr(&bars[0]), empty0 = lk_smem_addr(&bars[C::STAGES]);

    const int tid = threadIdx.x, wg = tid / 128;
    if (tid == 0) {
        for (int s = 0; s < C::STAGES; s++) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, WG_CONSUMERS * 4); /* one arrival per consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    /* tiles in groups of 8 tile rows, column by column, so that the
     * blocks running together share A and B panels in L2 */
    int64_t m0, n0;
    {
        const int64_t gx = gridDim.x, gy = gridDim.y;
        const int64_t lin = (int64_t)blockIdx.y * gx + blockIdx.x, per = 8 * gx;
        const int64_t first = lin / per * 8, rows = gy - first < 8 ? gy - first : 8;
        m0 = (first + lin % per % rows) * WG_BM;
        n0 = lin % per / rows * BN;
    }
    const int64_t ktiles = (g.K + WG_BK - 1) / WG_BK;

    if (wg == 0) {
        /* producer: one thread; the warpgroup gives registers to the consumers */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
        if (tid == 0) {
            uint64_t it = 0; /* slices so far, over the batch loop too */
            for (int64_t bat = blockIdx.z; bat < g.batch; bat += gridDim.z)
                for (int64_t kt = 0; kt < ktiles; kt++, it++) {
                    const uint32_t s = (uint32_t)(it % C::STAGES);
                    const uint64_t round = it / C::STAGES;
                    if (round > 0)
                        mbar_wait(empty0 + 8 * s, (unsigned)((round - 1) & 1));
                    const uint32_t a_dst = ring + s * C::STAGE_BYTES;
                    const uint32_t b_dst = a_dst + C::A_BYTES;
                    mbar_expect_tx(full0 + 8 * s, C::STAGE_BYTES);
                    tma_load(a_dst, &amap, (int)(kt * WG_BK), (int)m0, (int)bat, full0 + 8 * s);
                    tma_load(b_dst, &bmap, (int)(kt * WG_BK), (int)n0, (int)bat, full0 + 8 * s);
                }
        }
        return;
    }

    /* consumers: warpgroup c owns rows m0 + 64 c .. m0 + 64 c + 63 */
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int c = wg - 1, lane = tid & 31, warp = (tid / 32) & 3;
    uint64_t it = 0; /* slices so far, over the batch loop too */
    for (int64_t bat = blockIdx.z; bat < g.batch; bat += gridDim.z) {
        float acc[ACC];
#pragma unroll
        for (int i = 0; i < ACC; i++)
            acc[i] = 0.0f;
        uint32_t prev = ~0u; /* the stage whose wgmma group may still be in flight */
        for (int64_t kt = 0; kt < ktiles; kt++, it++) {
            const uint32_t s = (uint32_t)(it % C::STAGES);
            const uint64_t round = it / C::STAGES;
            mbar_wait(full0 + 8 * s, (unsigned)(round & 1));
            const uint32_t a_src = ring + s * C::STAGE_BYTES + c * 64 * 128;
            const uint32_t b_src = ring + s * C::STAGE_BYTES + C::A_BYTES;
            wg_fence_regs(acc);
            wg_fence();
            if (kt * WG_BK + WG_BK <= g.K) {
#pragma unroll
                for (int j = 0; j < WG_BK / 16; j++)
                    wg_mma<BN, D>::run(acc, wg_desc(a_src + 32 * j), wg_desc(b_src + 32 * j));
            } else {
                /* the last slice: exactly ceil(K / 16) steps in all
                 * (uniform over the block) */
#pragma unroll
                for (int j = 0; j < WG_BK / 16; j++)
                    if (kt * WG_BK + 16 * j < g.K)
                        wg_mma<BN, D>::run(acc, wg_desc(a_src + 32 * j),
                                           wg_desc(b_src + 32 * j));
            }
            wg_commit();
            wg_wait<1>(); /* the previous slice's group has completed */
            wg_fence_regs(acc);
            if (prev != ~0u && lane == 0)
                mbar_arrive(empty0 + 8 * prev);
            prev = s;
        }
        wg_wait<0>();
        wg_fence_regs(acc);
        if (prev != ~0u && lane == 0)
            mbar_arrive(empty0 + 8 * prev);

        /* accumulator i: n8 block i / 4, row g (+ 8 for i % 4 >= 2), column 2 t + i % 2 */
        const int64_t mrow = m0 + c * 64 + warp * 16 + (lane >> 2);
#pragma unroll
        for (int i = 0; i < ACC; i++) {
            const int64_t m = mrow + ((i >> 1) & 1) * 8;
            const int64_t n = n0 + (i >> 2) * 8 + (lane & 3) * 2 + (i & 1);
            if (m < g.M && n < g.N)
                lk_gemm_store(g.e, bat, m, n, acc[i]);
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

template <lk_dtype D, int BN>
bool wg_launch(const lk_cuda_device *dev, const lk_gemm_args *a, cudaStream_t st)
{
    typedef wg_cfg<BN> C;
    auto kern = wg_gemm_kernel<D, BN>;
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
                    lk_smem_optin<wg_gemm_kernel<D, BN> >(dev->ordinal, C::SMEM) == cudaSuccess;
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
    const int64_t gx = (a->n + BN - 1) / BN, gy = (a->m + WG_BM - 1) / WG_BM;
    if (gx > 2147483647 || gy > 65535 || a->k > 2147483647 || a->m > 2147483647 ||
        a->n > 2147483647 || a->batch > 2147483647)
        return false;
    CUtensorMap am, bm;
    if (!make_map(enc, &am, a->a.data, a->m, a->k, a->a.ld, a->a.batch_stride, a->batch, WG_BM) ||
        !make_map(enc, &bm, a->b.data, a->n, a->k, a->b.ld, a->b.batch_stride, a->batch, BN))
        return false;
    wg_kargs g;
    g.M = a->m;
    g.N = a->n;
    g.K = a->k;
    g.batch = a->batch;
    g.e = lk_gemm_epi_make(a);
    const dim3 grid((unsigned)gx, (unsigned)gy, lk_grid_cap(a->batch, 65535));
    wg_gemm_kernel<D, BN><<<grid, WG_THREADS, C::SMEM, st>>>(am, bm, g);
    return true;
}

} // namespace

bool lk_cuda_tc_wgmma(lk_cuda_queue *q, const lk_gemm_args *a, int bn)
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
    if (bn == 0) { /* the wide tile when it still gives every SM a block */
        const int64_t wide = ((a->m + WG_BM - 1) / WG_BM) * ((a->n + 255) / 256) * a->batch;
        bn = wide >= dev->sm_count ? 256 : 128;
    }
    if (a->a.dtype == LK_BF16)
        return bn == 256 ? wg_launch<LK_BF16, 256>(dev, a, q->stream)
                         : wg_launch<LK_BF16, 128>(dev, a, q->stream);
    return bn == 256 ? wg_launch<LK_F16, 256>(dev, a, q->stream)
                     : wg_launch<LK_F16, 128>(dev, a, q->stream);
}
