/* Lockstep CUDA: the integer GEMMs (lk_int8_gemm, lk_ternary_gemm) on
 * int8 wgmma (sm_90a): wq_kernel, the weights as B in shared memory
 * (ternary codes decoded there), and wr_kernel, ternary weights as the
 * register operand A with K split over a cluster, and the prepared
 * weights' layout wr_kernel reads (wr_pre_kernel).  Both families are one
 * translation unit on purpose: ptxas fits a subroutine's registers to all
 * its callers in the unit (wq_store8 serves both), so compiling them
 * apart changes both kernels' machine code. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/tc/wgmma.cuh"
#include "backends/cuda/tc/wgmma_host.cuh"
#include "backends/cuda/tc/wgmma_int.cuh"
#include "backends/cuda/tc/wgmma_mma.cuh"

/* The integer GEMMs (lk_ternary_gemm, lk_int8_gemm) on int8
 * wgmma (sm_90a), the weights as B: acc = sum_k x[m, k] w[n, k] exactly in
 * int32 (integer MMA; any order, any tile), then lk_qgemm_store, the
 * epilogue of every other int kernel.
 *
 * A persistent grid (one block per SM at most) walks 128 x BN output
 * tiles in wg_tile's grouped raster order, 128-k slices.  Warpgroup 0:
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
namespace {

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

} // namespace

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

/* lk_ternary_gemm on int8 wgmma (sm_90a) with the weights
 * as A, decoded in registers ("wgmma-ra"): the product is computed
 * transposed, y^T = W x^T, so that the LK_T2 codes, 32 bytes per row and
 * 128-k slice, go straight from shared memory into the consumers' A
 * fragments (no decoded copy in shared memory, no decoder warps; exact
 * int32 sums in any order, so section 9's bits).  A tile: 128 weight rows
 * (two consumer warpgroups of 64) x BX rows of x (the wgmma N side, BX =
 * 96, 128 or 256).  Warpgroup 0's thread 0 streams per slice the x tile
 * (TMA, 128-byte swizzle, zero past M and K: codes past K meet x = 0) and
 * the plain code tile into a STAGES-deep ring (barriers: loaded, empty).
 * A consumer thread of warp w needs rows 16 w + g and + 8 (g = lane / 4)
 * and of each 16-k word of a row the byte t = lane % 4 (k 4t .. 4t + 3
 * and 16 + 4t ..): two 16-byte loads per row (a quad loads the same row: a
 * broadcast), byte t of four words gathered with three byte permutes, four
 * codes expanded to four int8 (lk_t2_expand), 16 A registers per slice.
 * With prepared weights (PRE) the code tile comes from wr_pre_kernel's
 * layout instead, the thread's 16 registers in 16 contiguous bytes
 * (wr_decode_pre).  A warpgroup waits for its slice's MMAs before decoding
 * the next (ptxas serializes wgmmas whose input registers are written
 * while any is in flight); the two consumer warpgroups overlap each
 * other's decode and MMAs. */
namespace {

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
     * epilogue), in 5 ns units, fitted on the H200 (prepared codes,
     * tc-bench's BitNet shapes at M = 512 and 2048, within 5 %);
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
