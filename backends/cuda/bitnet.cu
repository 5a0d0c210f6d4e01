/* Lockstep CUDA: lk_bitnet_decode (include/lockstep/bitnet.h), a decode
 * step's decoder layers as one persistent kernel on sm_90.
 *
 * Why one kernel: a BitNet layer at batch 1 is a dozen small ops, and as
 * separate kernels each one costs its launch, its ramp-up and its wait for
 * the previous one (about 1 us in a CUDA graph with PDL), more than the
 * 17 MB of ternary weights a layer streams (about 5 us at HBM speed) need
 * (docs/bench.md, "Eighth round").  Here one block per SM runs every
 * layer, the phases separated by grid barriers:
 *
 *   1  rmsnorm+quantise x          ternary qkv rows          -> QKV
 *   2  RoPE of q and k, the new cache row, attention per (sequence, head)
 *                                                            -> ATT
 *   3  rmsnorm+quantise ATT        ternary o rows, + x       -> x
 *   4  rmsnorm+quantise x          ternary gate and up rows, relu^2 . up
 *                                                            -> G
 *   5  rmsnorm+quantise G          ternary down rows, + x    -> x
 *
 * Every block normalises and quantises the whole row itself (a few KB
 * from L2: cheaper than a barrier more), then computes its share of the
 * rows.  The weights do not depend on anything the kernel computes, so
 * each block streams its share of every projection, layer after layer,
 * into a ring of shared memory with bulk copies (cp.async.bulk on an
 * mbarrier), as far ahead as the ring holds: the HBM traffic runs through
 * the barriers and the small phases instead of waiting for them.
 *
 * Where it stands (docs/bench.md, fourteenth round): bit-exact, but on an
 * H100 a 30-layer step takes about 50 us a layer, slower than the ops in a
 * CUDA graph; the weights arrive in time (under 1 us of waits a layer),
 * and the phases are bound by their own latency -- barriers of about 3 us,
 * norms of about 3 us, warps waiting at __syncthreads for the few that
 * work -- which is what the next version has to cut.
 *
 * The bits are the composition's (docs/numerics.md 12.6): each phase runs
 * the sequences of the ops it replaces -- the norm's lane sums
 * (lk_warp_chunk over the row in shared memory, the chunk partials through
 * the same butterfly), lk_qa_* of norm_quant.cu, the exact int32 dot
 * products and lk_qgemm_value, backends/rope.h, section 12.3's attention
 * with its KB-blocked dots and softmax, relu^2 then the product -- and
 * every value that the composition stores in f32 is canonicalised where
 * it would be stored.  Integer sums are exact in any order, so the dot
 * product takes sum (code) x - sum x with the codes as unsigned bytes
 * (wrapping int32 arithmetic gives the exact result, which fits).
 *
 * Limits (else the composition runs): B <= 4, ctx <= 4096, head_dim <= 256
 * and a multiple of 4, dim and ffn multiples of 4, rows of at most 4
 * chunks, x and the norm weights 16-byte aligned, every projection
 * prepared by this driver, at most 256 rows of a projection per block, a
 * ring that holds each block's share of the largest projection. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>

#include "backends/bitnet.h"
#include "backends/cuda/linear.cuh"
#include "backends/cuda/math.cuh"
#include "backends/cuda/mbarrier.cuh"
#include "backends/cuda/model.cuh"
#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/rows_reg.cuh"
#include "backends/cuda/tc_ptx.cuh"
#include "backends/rope.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LK_BN_BODY 1
#else
#define LK_BN_BODY 0
#endif

namespace {

#define BN_THREADS 512
#define BN_WARPS (BN_THREADS / 32)
#define BN_MAX_B 4
#define BN_MAX_CTX 4096
#define BN_MAX_HD 256
#define BN_MAX_CHUNKS 4  /* norm rows of up to 16384 */
#define BN_MAX_LAYERS 24 /* per launch: the arguments stay under 4 KB */
#define BN_SLOTS 8       /* weight loads in flight */
#define BN_LOADS 5       /* per layer: qkv, o, gate, up, down */
#define BN_MAX_ROWS 256  /* rows of one projection a block takes */
#define BN_COPY_MAX 32768

struct bn_proj {
    const uint8_t *w; /* codes, rows of `pitch` bytes (the prepared copy) */
    const float *s;   /* s[n] per row, or s[0] */
    int per_row;
};

struct bn_layer {
    bn_proj qkv, o, gu, dn;
    const float *an, *asn, *fn, *fsn; /* NULL: no weight */
    float *kv;
    int64_t kvld;
};

struct bn_kargs {
    int dim, nh, nkv, hd, ffn, ctx, qd, kvd;
    int pitch_dim, pitch_qd, pitch_ffn; /* bytes per weight row of K = dim, qd, ffn */
    int kp;                             /* bytes per row of the quantised planes */
    int ring, attn_tk;                  /* ring bytes; keys per attention tile */
    int np;                             /* floats per norm row buffer */
    int rope_il;
    float eps, theta, scale;
    float *x;
    int64_t ldx;
    const int32_t *pos;
    int64_t ldp;
    unsigned *sync; /* the barrier's count of arrivals: zeroed before each launch */
    int prof;       /* LOCKSTEP_CUDA_BITNET_PROFILE: blocks 0 and 1 print where the time went */
    float *qkv, *att, *g;
    long long *rec; /* the queue's pinned record of a bad position */
    int nl;
    bn_layer L[BN_MAX_LAYERS];
};
static_assert(sizeof(bn_kargs) <= 4096, "kernel arguments stay within 4 KB");

/* rows [r0, r1) of n split evenly over the blocks, the larger shares first */
__host__ __device__ __forceinline__ void bn_split(int n, int blk, int nb, int &r0, int &r1)
{
    const int q = n / nb, r = n % nb;
    r0 = blk * q + (blk < r ? blk : r);
    r1 = r0 + q + (blk < r ? 1 : 0);
}

__host__ __device__ __forceinline__ int bn_round(int v, int to) { return (v + to - 1) / to * to; }

/* The projection of load kind k (0 qkv, 1 o, 2 gate, 3 up, 4 down): its
 * rows, their first row in the matrix, pitch and words of 16 codes. */
struct bn_kind {
    int n, row0, pitch, nw;
};

/* Words between the planes of the quantised rows: nw rounded up to 8 mod
 * 32, so that the four planes of a word start in four different banks. */
__host__ __device__ __forceinline__ int bn_nwp(int nw) { return nw + ((8 - nw % 32) + 32) % 32; }
__host__ __device__ __forceinline__ bn_kind bn_kind_of(const bn_kargs &a, int k)
{
    bn_kind r;
    r.n = k == 0 ? a.qd + 2 * a.kvd : k == 2 || k == 3 ? a.ffn : a.dim;
    r.row0 = k == 3 ? a.ffn : 0;
    r.pitch = k == 1 ? a.pitch_qd : k == 4 ? a.pitch_ffn : a.pitch_dim;
    r.nw = k == 1 ? (a.qd + 15) / 16 : k == 4 ? (a.ffn + 15) / 16 : (a.dim + 15) / 16;
    return r;
}

#if LK_BN_BODY

__device__ __forceinline__ unsigned bn_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Asynchronous copies into shared memory, all of a thread's in flight at
 * once (no register staging): 16 bytes through L2 only (.cg: what other SMs
 * wrote in this launch), or 4 bytes (rows of a padded tile). */
__device__ __forceinline__ void bn_cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(lk_smem_addr(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void bn_cp4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(lk_smem_addr(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void bn_cp_wait()
{
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

/* n floats (n a multiple of 4, both ends 16-byte aligned) */
__device__ __forceinline__ void bn_cp_row(float *dst, const float *src, int n)
{
    for (int i = 4 * threadIdx.x; i < n; i += 4 * BN_THREADS)
        bn_cp16(dst + i, src + i);
}

/* The grid barrier (thread 0 of each block, between __syncthreads): one
 * release-add to a count of arrivals that only grows during a launch
 * (zeroed before it), and a wait until it reaches the blocks times the
 * barriers so far: two L2 round trips, no last-arriver step.  Every block
 * is resident (a cooperative launch); a wait longer than LK_STALL_NS traps. */
__device__ __forceinline__ void bn_arrive(unsigned *count)
{
    /* release at gpu scope, after the block's __syncthreads: the block's
     * writes before it reach every thread that acquires the count */
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
}

__device__ __noinline__ void bn_wait(const unsigned *count, unsigned target)
{
    uint64_t t0 = 0;
    for (unsigned i = 1; bn_ld_acquire(count) < target; i++)
        if (i % 1024 == 0)
            lk_stall_check(t0);
}

/* ------------------------------------------------------------ the ring */

/* Thread 0's state: the weight ring (loads issued and freed in order;
 * head and tail count bytes over the whole launch, a load that would wrap
 * starts again at offset 0), the barrier's next target, and the profile. */
struct bn_ctl {
    uint32_t base, size;
    uint64_t head, tail;
    int issued, freed, total;
    uint64_t vend[BN_SLOTS];
    unsigned target;
    uint64_t tp[5], tmark;
    bool prof;
};

__device__ __forceinline__ void bn_mark(bn_ctl &C, int kind)
{
    if (C.prof) {
        const uint64_t t = lk_global_ns();
        if (C.tmark)
            C.tp[kind] += t - C.tmark;
        C.tmark = t;
    }
}

/* Issue every next load that fits (thread 0).  The kernel's big pieces are
 * __noinline__: a block walks its machine code once per phase of every
 * layer, and inlined at each call they made 170-310 KB of code. */
__device__ __noinline__ void bn_pump(const bn_kargs &a, bn_ctl &C, uint32_t bars,
                                     uint32_t *slot_off)
{
    while (C.issued < C.total) {
        /* a gate load takes its up load along: one phase needs both, so
         * they are placed together (else the up rows could wait for room
         * that only the gate phase frees) */
        const int k0 = C.issued % BN_LOADS, nl = k0 == 2 ? 2 : 1;
        if (C.issued - C.freed + nl > BN_SLOTS)
            return;
        const bn_layer &L = a.L[C.issued / BN_LOADS];
        uint32_t bytes[2], sz[2], nbytes = 0;
        const uint8_t *src[2];
        /* the weight of the norm before the projection, after its rows */
        const float *nw = k0 == 0 ? L.an : k0 == 1 ? L.asn : k0 == 2 ? L.fn : L.fsn;
        if (nw)
            nbytes = 4u * (uint32_t)(k0 == 1 ? a.qd : k0 == 4 ? a.ffn : a.dim);
        for (int i = 0; i < nl; i++) {
            const int k = k0 + i;
            const bn_kind K = bn_kind_of(a, k);
            const uint8_t *w = k == 0 ? L.qkv.w : k == 1 ? L.o.w : k == 4 ? L.dn.w : L.gu.w;
            int r0, r1;
            bn_split(K.n, blockIdx.x, gridDim.x, r0, r1);
            src[i] = w + (size_t)(K.row0 + r0) * K.pitch;
            bytes[i] = (uint32_t)(r1 - r0) * K.pitch;
            sz[i] = (uint32_t)bn_round((int)bytes[i], 128);
        }
        const uint32_t total = sz[0] + (nl > 1 ? sz[1] : 0) + (uint32_t)bn_round((int)nbytes, 128);
        uint64_t start = C.head;
        const uint32_t off = (uint32_t)(start % C.size);
        if (off + total > C.size)
            start += C.size - off;
        if (C.issued == C.freed)
            C.tail = start; /* nothing live: the skipped end of the lap is free too */
        if (start + total - C.tail > C.size)
            return; /* no room until an earlier load is freed */
        uint64_t at = start;
        for (int i = 0; i < nl; i++) {
            const int slot = (C.issued + i) % BN_SLOTS;
            const uint32_t dst = C.base + (uint32_t)(at % C.size);
            const uint32_t bar = bars + 8 * slot;
            slot_off[slot] = (uint32_t)(at % C.size);
            const uint32_t extra = i == nl - 1 ? nbytes : 0; /* the norm weight rides last */
            lk_mbar_expect_tx(bar, bytes[i] + extra);
            for (uint32_t o = 0; o < bytes[i]; o += BN_COPY_MAX) {
                const uint32_t n = bytes[i] - o < BN_COPY_MAX ? bytes[i] - o : BN_COPY_MAX;
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1], %2, [%3];\n" ::"r"(dst + o),
                             "l"(src[i] + o), "r"(n), "r"(bar)
                             : "memory");
            }
            at += sz[i];
            if (extra) {
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                             " [%0], [%1], %2, [%3];\n" ::"r"(C.base + (uint32_t)(at % C.size)),
                             "l"(nw), "r"(extra), "r"(bar)
                             : "memory");
                at += (uint32_t)bn_round((int)extra, 128);
            }
            C.vend[slot] = at;
        }
        C.head = at;
        C.issued += nl;
    }
}

/* The end of a phase (every thread): `freed` loads are done with, the next
 * ones go out, and with `barrier` the grid meets before the next phase
 * reads what this one wrote.  `kind`: the profile's bucket of the phase. */
__device__ __noinline__ void bn_phase_end(const bn_kargs &a, bn_ctl &C, uint32_t bars,
                                          uint32_t *slot_off, int freed, bool barrier, int kind)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        bn_mark(C, kind);
        for (int i = 0; i < freed; i++) {
            C.tail = C.vend[C.freed % BN_SLOTS];
            C.freed++;
        }
        if (barrier) {
            C.target += gridDim.x;
            bn_arrive(a.sync);
        }
        if (freed) /* the copies go out while the other blocks arrive */
            bn_pump(a, C, bars, slot_off);
        if (barrier)
            bn_wait(a.sync, C.target); /* an acquire, then the block's __syncthreads */
        bn_mark(C, 4);
    }
    __syncthreads();
}

/* The slab of load i (every thread), once its bytes have landed. */
__device__ __noinline__ const uint8_t *bn_slab(bn_ctl &C, uint32_t bars, const uint32_t *slot_off,
                                               const unsigned char *ring, int i)
{
    if (threadIdx.x == 0)
        bn_mark(C, 0);
    lk_mbar_wait(bars + 8 * (i % BN_SLOTS), (unsigned)((i / BN_SLOTS) & 1));
    if (threadIdx.x == 0)
        bn_mark(C, 1);
    return ring + slot_off[i % BN_SLOTS];
}

/* The norm weight that came with load kind k's rows (after them). */
__device__ __forceinline__ const float *bn_wsm(const bn_kargs &a, int k, const uint8_t *slab)
{
    const bn_kind K = bn_kind_of(a, k);
    int r0, r1;
    bn_split(K.n, blockIdx.x, gridDim.x, r0, r1);
    return (const float *)(slab + bn_round((r1 - r0) * K.pitch, 128));
}

/* ------------------------------------------------------------ the norm */

/* The butterfly of section 5 over up to 4 chunk partials (the lanes past
 * them are -0, whose additions change nothing). */
__device__ __forceinline__ float bn_tree4(const float *p, int n)
{
    if (n == 1)
        return p[0];
    const float l0 = __fadd_rn(p[0], n > 2 ? p[2] : -0.0f);
    const float l1 = __fadd_rn(p[1], n > 3 ? p[3] : -0.0f);
    return __fadd_rn(l0, l1);
}

struct bn_sm { /* the block's small shared state */
    float part[BN_MAX_B * BN_MAX_CHUNKS];
    float rs[BN_MAX_B], xs[BN_MAX_B];
    unsigned umax[BN_MAX_B * BN_WARPS];
    int isum[BN_MAX_B * BN_WARPS];
    int sumx[BN_MAX_B];
    float sc[2][BN_MAX_ROWS];         /* this phase's weight scales (up rows: [1]) */
    float xsh[BN_MAX_B][BN_MAX_ROWS]; /* this block's rows of x (it alone writes them) */
    float red[BN_WARPS];
    float sum;
    int pos[BN_MAX_B];
};

/* lk_rmsnorm_quantize of NB rows of n f32 (src, row stride ld) with the
 * weight w (NULL: none): the codes into the planes X (plane t of row b,
 * word j: bytes q[16 j + 4 e + t], e = 0..3, zero past n, nw words a
 * plane), the scales into S.xs and each row's sum of codes into S.sumx.
 * The rows and the weight arrive in one round trip (asynchronous copies);
 * the phase's weight scales are loaded with them (kind: bn_kind_of). */
template <int NB>
__device__ __noinline__ void bn_norm(const bn_kargs &a, const float *src, int64_t ld, int n,
                                     const float *wsm, const bn_proj *P, int kind, float *rowbuf,
                                     int32_t *X, bn_sm &S)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, np = a.np;
    const int nw = (n + 15) / 16, nwp = bn_nwp(nw);
#pragma unroll
    for (int b = 0; b < NB; b++)
        bn_cp_row(rowbuf + b * np, src + b * ld, n);
    {   /* the scales of the rows this block will compute (and of the up
         * rows of kind 2), stored once the copies are in */
        const bn_kind K = bn_kind_of(a, kind);
        int r0, r1;
        bn_split(K.n, blockIdx.x, gridDim.x, r0, r1);
        float s0 = 0.0f, s1 = 0.0f;
        if (tid < r1 - r0) {
            s0 = P->s[P->per_row ? K.row0 + r0 + tid : 0];
            if (kind == 2)
                s1 = P->s[P->per_row ? a.ffn + r0 + tid : 0];
        }
        bn_cp_wait();
        if (tid < r1 - r0)
            S.sc[0][tid] = s0, S.sc[1][tid] = s1;
    }
    __syncthreads();
    const int nch = (n + LK_CHUNK - 1) / LK_CHUNK;
    for (int wc = warp; wc < NB * nch; wc += BN_WARPS) {
        const int b = wc / nch, c = wc % nch;
        const int len = n - c * LK_CHUNK < LK_CHUNK ? n - c * LK_CHUNK : LK_CHUNK;
        const float p = lk_warp_chunk<true>(lk_f32_src{rowbuf + b * np}, (int64_t)c * LK_CHUNK, len);
        if (lane == 0)
            S.part[b * BN_MAX_CHUNKS + c] = p;
    }
    __syncthreads();
    if (tid < NB) {
        const float ss = bn_tree4(S.part + tid * BN_MAX_CHUNKS, nch);
        S.rs[tid] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, __int2float_rn(n)), a.eps)));
    }
    __syncthreads();
    /* y_i = (x_i r) w_i, kept in rowbuf; amax on the bit patterns */
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float *yr = rowbuf + b * np;
        const float r = S.rs[b];
        unsigned m = 0u;
        for (int i = tid; i < n; i += BN_THREADS) {
            float y = __fmul_rn(yr[i], r);
            if (wsm)
                y = __fmul_rn(y, wsm[i]);
            yr[i] = y;
            m = max(m, lk_qa_bits(y));
        }
        m = lk_qa_warp_max(m);
        if (lane == 0)
            S.umax[b * BN_WARPS + warp] = m;
    }
    __syncthreads();
    if (warp < NB) { /* warp b folds row b's warp maxima */
        const unsigned m = lk_qa_warp_max(lane < BN_WARPS ? S.umax[warp * BN_WARPS + lane] : 0u);
        if (lane == 0)
            S.xs[warp] = __fdiv_rn(127.0f, lk_maximum(lk_qa_amax(m), LK_QUANT_EPS));
    }
    __syncthreads();
    /* code k into byte (k % 16) / 4 of word k / 16 of plane k % 4: a
     * thread per element, so a warp reads 32 consecutive floats */
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const float *yr = rowbuf + b * np;
        const float s = S.xs[b];
        int8_t *xb = (int8_t *)(X + b * 4 * nwp);
        int sq = 0;
        for (int k = tid; k < 16 * nw; k += BN_THREADS) {
            const int q = k < n ? lk_qa_q8(__fmul_rn(yr[k], s)) : 0;
            sq += q;
            xb[4 * ((k & 3) * nwp + (k >> 4)) + ((k >> 2) & 3)] = (int8_t)q;
        }
        sq = __reduce_add_sync(LK_FULL_MASK, sq);
        if (lane == 0)
            S.isum[b * BN_WARPS + warp] = sq;
    }
    __syncthreads();
    if (warp < NB) {
        const int q = __reduce_add_sync(LK_FULL_MASK, lane < BN_WARPS ? S.isum[warp * BN_WARPS + lane] : 0);
        if (lane == 0)
            S.sumx[warp] = q;
    }
    __syncthreads();
}

/* ------------------------------------------------------------ the GEMV */

/* G rows of a warp's share at once, rows rb, rb + 16, ...: their loads
 * overlap.  The dot products are sum (code) x over the warp minus sum x
 * (S.sumx: exact; with K <= 16384 no partial sum leaves int32).  Lane
 * g NB + b stores row g for sequence b (see bn_rows). */
template <int NB, int G>
__device__ __forceinline__ void bn_group(const bn_kargs &a, int kind, const bn_kind &K, int nwp,
                                         const uint8_t *w, const uint8_t *w2, const int32_t *X,
                                         bn_sm &S, int r0, int rb)
{
    const int lane = threadIdx.x & 31;
    const bool gu = kind == 2;
    int acc[G][NB], accu[G][NB];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int b = 0; b < NB; b++)
            acc[g][b] = accu[g][b] = 0;
    const uint32_t *wr[G], *ur[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        wr[g] = (const uint32_t *)(w + (size_t)(rb + g * BN_WARPS) * K.pitch);
        ur[g] = (const uint32_t *)((gu ? w2 : w) + (size_t)(rb + g * BN_WARPS) * K.pitch);
    }
    for (int j = lane; j < K.nw; j += 32) {
        uint32_t c[G], cu[G];
#pragma unroll
        for (int g = 0; g < G; g++) {
            c[g] = wr[g][j];
            cu[g] = gu ? ur[g][j] : 0u;
        }
#pragma unroll
        for (int t = 0; t < 4; t++) {
            int xv[NB];
#pragma unroll
            for (int b = 0; b < NB; b++)
                xv[b] = X[(b * 4 + t) * nwp + j];
#pragma unroll
            for (int g = 0; g < G; g++) {
                const int m = (int)((c[g] >> (2 * t)) & 0x03030303u);
                const int mu = (int)((cu[g] >> (2 * t)) & 0x03030303u);
#pragma unroll
                for (int b = 0; b < NB; b++) {
                    acc[g][b] = __dp4a(m, xv[b], acc[g][b]);
                    if (gu)
                        accu[g][b] = __dp4a(mu, xv[b], accu[g][b]);
                }
            }
        }
    }
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            acc[g][b] = __reduce_add_sync(LK_FULL_MASK, acc[g][b]);
            if (gu)
                accu[g][b] = __reduce_add_sync(LK_FULL_MASK, accu[g][b]);
        }
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            if (lane != g * NB + b)
                continue;
            const int r = rb + g * BN_WARPS, i = r0 + r;
            const float v = lk_qgemm_value(acc[g][b] - S.sumx[b], S.xs[b], S.sc[0][r]);
            if (kind == 0) {
                a.qkv[(size_t)b * (a.qd + 2 * a.kvd) + i] = lk_canon_f32(v);
            } else if (gu) {
                const float uv =
                    lk_canon_f32(lk_qgemm_value(accu[g][b] - S.sumx[b], S.xs[b], S.sc[1][r]));
                a.g[(size_t)b * a.ffn + i] = lk_canon_f32(__fmul_rn(lk_cu_relu2(lk_canon_f32(v)), uv));
            } else {
                const float x = lk_canon_f32(__fadd_rn(S.xsh[b][r], v));
                S.xsh[b][r] = x;
                a.x[b * a.ldx + i] = x;
            }
        }
}

/* This block's rows of projection `kind` (0 qkv, 1 o, 2 gate with its up
 * rows at w2, 4 down) from its slab w, two rows a warp at once where it
 * has two.  Stores: 0 into QKV, 1 and 4 added to x (lk_ternary_linear's
 * LK_GEMM_ACCUMULATE, the old value from the block's shadow of its rows),
 * 2 the gated product into G (the gate and up values as
 * lk_ternary_linear stores them, then lk_glu's steps). */
template <int NB>
__device__ __noinline__ void bn_rows(const bn_kargs &a, int kind, const uint8_t *w,
                                     const uint8_t *w2, const int32_t *X, bn_sm &S)
{
    const int warp = threadIdx.x >> 5;
    const bn_kind K = bn_kind_of(a, kind);
    const int nwp = bn_nwp(K.nw);
    int r0, r1;
    bn_split(K.n, blockIdx.x, gridDim.x, r0, r1);
    const int rows = r1 - r0;
    for (int rb = warp; rb < rows; rb += 2 * BN_WARPS) {
        if (rb + BN_WARPS < rows)
            bn_group<NB, 2>(a, kind, K, nwp, w, w2, X, S, r0, rb);
        else
            bn_group<NB, 1>(a, kind, K, nwp, w, w2, X, S, r0, rb);
    }
}

/* ------------------------------------------------------------ attention */

/* Query head h of sequence b at position p (section 12.3 over cache rows
 * b ctx .. b ctx + p).  q, k and v of this step and the first tile of
 * cached keys and values arrive in one round trip; row p of the cache is
 * this step's key and value, taken from shared memory (the block that
 * stores it may not have yet). */
__device__ __noinline__ void bn_attention(const bn_kargs &a, const bn_layer &L, int b, int h,
                                          int p, float lt, float *U, bn_sm &S)
{
    const int tid = threadIdx.x, hd = a.hd, grp = a.nh / a.nkv, gk = h / grp;
    const int stride = a.qd + 2 * a.kvd, ts = hd + 1, tk = a.attn_tk, n = p + 1;
    const float *qrow = a.qkv + (size_t)b * stride + h * hd;
    const float *krow = a.qkv + (size_t)b * stride + a.qd + gk * hd;
    const float *vrow = krow + a.kvd;
    float *qs = U, *ks = U + hd, *vs = U + 2 * hd;
    float *kt = U + 3 * hd;                     /* tk x (hd + 1): conflict-free rows */
    float *vt = kt + bn_round(tk * ts, 4);      /* tk x hd */
    float *e = vt + tk * hd;
    const float *kbase = L.kv + (size_t)b * a.ctx * (size_t)L.kvld + gk * hd;
    const float *vbase = kbase + a.kvd;

    /* keys and values of tile j0 (rows other than p) into kt and vt: thread
     * t copies column t % hd of every (512 / hd)-th row; row p (this
     * step's) comes from ks and vs once the copies are in */
    const int col = tid % hd, rstep = BN_THREADS / hd, row1 = tid / hd;
    auto fetch = [&](int j0, int nt) {
        if (row1 >= rstep)
            return;
#pragma unroll 1
        for (int jj = row1; jj < nt; jj += rstep) {
            const int j = j0 + jj;
            if (j != p) {
                bn_cp4(kt + jj * ts + col, kbase + (size_t)j * L.kvld + col);
                bn_cp4(vt + jj * hd + col, vbase + (size_t)j * L.kvld + col);
            }
        }
    };
    bn_cp_row(qs, qrow, hd);
    bn_cp_row(ks, krow, hd);
    bn_cp_row(vs, vrow, hd);
    fetch(0, n < tk ? n : tk);
    bn_cp_wait();
    __syncthreads();
    for (int i = tid; i < hd / 2; i += BN_THREADS) {
        const int i0 = (int)lk_rope_i0(i, a.rope_il), i1 = (int)lk_rope_i1(i, hd, a.rope_il);
        float s, c, y0, y1;
        lk_rope_sincos(p, lk_rope_inv_freq(i, hd, lt), &s, &c);
        lk_rope_rotate(qs[i0], qs[i1], s, c, &y0, &y1);
        qs[i0] = lk_canon_f32(y0), qs[i1] = lk_canon_f32(y1);
        lk_rope_rotate(ks[i0], ks[i1], s, c, &y0, &y1);
        ks[i0] = lk_canon_f32(y0), ks[i1] = lk_canon_f32(y1);
    }
    __syncthreads();
    const size_t crow = ((size_t)b * a.ctx + p) * (size_t)L.kvld;
    for (int i = tid; i < hd; i += BN_THREADS) {
        if (h % grp == 0) { /* one block per kv head stores the cache row */
            L.kv[crow + gk * hd + i] = ks[i];
            L.kv[crow + a.kvd + gk * hd + i] = vs[i];
        }
        if (p < tk) {
            kt[p * ts + i] = ks[i];
            vt[p * hd + i] = vs[i];
        }
    }
    __syncthreads();

    /* a later tile of a long context (the first one is in place) */
    auto tile = [&](int j0, int nt) {
        __syncthreads();
        fetch(j0, nt);
        bn_cp_wait();
        if (p >= j0 && p < j0 + nt)
            for (int i = tid; i < hd; i += BN_THREADS) {
                kt[(p - j0) * ts + i] = ks[i];
                vt[(p - j0) * hd + i] = vs[i];
            }
        __syncthreads();
    };

    /* scores s_j = dot(q, k_j) * scale */
#pragma unroll 1
    for (int j0 = 0; j0 < n; j0 += tk) {
        const int nt = n - j0 < tk ? n - j0 : tk;
        if (j0 > 0)
            tile(j0, nt);
        for (int jj = tid; jj < nt; jj += BN_THREADS) {
            const float *kr = kt + jj * ts;
            float total = 0.0f;
            for (int d0 = 0; d0 < hd; d0 += LK_KB) {
                const int d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                float acc = 0.0f;
#pragma unroll 8
                for (int d = d0; d < d1; d++)
                    acc = __fmaf_rn(qs[d], kr[d], acc);
                total = d0 == 0 ? acc : __fadd_rn(total, acc);
            }
            e[j0 + jj] = __fmul_rn(total, a.scale);
        }
    }
    __syncthreads();
    /* softmax over the n scores */
    float m = -INFINITY; /* maximum's identity (a NaN still wins) */
    for (int j = tid; j < n; j += BN_THREADS)
        m = lk_maximum(m, e[j]);
    m = lk_warp_maximum(m);
    if ((tid & 31) == 0)
        S.red[tid >> 5] = m;
    __syncthreads();
    m = S.red[0];
    for (int i = 1; i < BN_WARPS; i++)
        m = lk_maximum(m, S.red[i]);
    for (int j = tid; j < n; j += BN_THREADS)
        e[j] = lk_cu_exp(__fsub_rn(e[j], m));
    __syncthreads();
    if (tid < 32) {
        const float s = lk_warp_chunk<false>(lk_f32_src{e}, 0, n);
        if (tid == 0)
            S.sum = s;
    }
    __syncthreads();
    const float r = __fdiv_rn(1.0f, S.sum);
    for (int j = tid; j < n; j += BN_THREADS)
        e[j] = __fmul_rn(e[j], r);
    __syncthreads();
    /* out_i = dot over j of p_j v_j,i in KB blocks: a long context's
     * first tile again, then the others (a short one's is in place) */
    float acc = 0.0f, total = 0.0f;
#pragma unroll 1
    for (int j0 = 0; j0 < n; j0 += tk) {
        const int nt = n - j0 < tk ? n - j0 : tk;
        if (n > tk)
            tile(j0, nt);
        if (tid < hd)
            for (int jj = 0; jj < nt; jj++) {
                const int j = j0 + jj;
                if (j > 0 && j % LK_KB == 0) {
                    total = j == LK_KB ? acc : __fadd_rn(total, acc);
                    acc = 0.0f;
                }
                acc = __fmaf_rn(e[j], vt[jj * hd + tid], acc);
            }
    }
    if (tid < hd) {
        total = n <= LK_KB ? acc : __fadd_rn(total, acc);
        a.att[(size_t)b * a.qd + h * hd + tid] = lk_canon_f32(total);
    }
    __syncthreads();
}

#endif /* LK_BN_BODY */

/* Shared memory: [the weight ring | the quantised planes, NB x kp bytes |
 * the union: the norm's f32 rows and weight, or one attention item's
 * buffers]. */
template <int NB>
__global__ void __launch_bounds__(BN_THREADS, 1) bn_kernel(const __grid_constant__ bn_kargs a)
{
#if LK_BN_BODY
    __shared__ __align__(8) uint64_t bars[BN_SLOTS];
    __shared__ uint32_t slot_off[BN_SLOTS];
    __shared__ bn_sm S;
    extern __shared__ __align__(1024) unsigned char bn_smem[];
    const int tid = threadIdx.x;
    unsigned char *ring = bn_smem;
    int32_t *X = (int32_t *)(bn_smem + a.ring);
    float *U = (float *)(bn_smem + a.ring + NB * (a.kp + 512));
    const uint32_t bars0 = lk_smem_addr(bars);

    if (tid == 0) {
        for (int s = 0; s < BN_SLOTS; s++)
            lk_mbar_init(bars0 + 8 * s, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (tid < NB)
        S.pos[tid] = a.pos[tid * a.ldp];
    /* every block checks the positions (a bad one can only come inside a
     * captured graph; the core checks them otherwise): one outside
     * [0, ctx) stops every block before anything is written, and the
     * queue's record makes the next sync report it (set 3) */
    if (lk_index_first_bad(a.pos, a.ldp, NB, a.ctx, 3, a.rec) >= 0)
        return;

    bn_ctl C;
    if (tid == 0) {
        memset(&C, 0, sizeof C);
        C.prof = a.prof && blockIdx.x < 2;
        C.base = lk_smem_addr(ring);
        C.size = (uint32_t)a.ring;
        C.total = BN_LOADS * a.nl;
        bn_mark(C, 0);
        bn_pump(a, C, bars0, slot_off);
    }
    {   /* the block's rows of x, which it alone updates (o and down) */
        int r0, r1;
        bn_split(a.dim, blockIdx.x, gridDim.x, r0, r1);
        for (int i = tid; i < NB * (r1 - r0); i += BN_THREADS)
            S.xsh[i / (r1 - r0)][i % (r1 - r0)] = a.x[(i / (r1 - r0)) * a.ldx + r0 + i % (r1 - r0)];
    }
    const float lt = lk_logf(a.theta);
    int ld = 0; /* weight loads so far */

    for (int l = 0; l < a.nl; l++) {
        const bn_layer &L = a.L[l];
        const bool last = l + 1 == a.nl;

        /* 1: x -> QKV */
        {
            const uint8_t *w = bn_slab(C, bars0, slot_off, ring, ld);
            bn_norm<NB>(a, a.x, a.ldx, a.dim, L.an ? bn_wsm(a, 0, w) : nullptr, &L.qkv, 0, U, X, S);
            bn_rows<NB>(a, 0, w, nullptr, X, S);
        }
        bn_phase_end(a, C, bars0, slot_off, 1, true, 2);
        ld++;

        /* 2: RoPE, the cache row, attention -> ATT */
        for (int it = blockIdx.x; it < NB * a.nh; it += gridDim.x)
            bn_attention(a, L, it / a.nh, it % a.nh, S.pos[it / a.nh], lt, U, S);
        bn_phase_end(a, C, bars0, slot_off, 0, true, 3);

        /* 3: ATT -> x += o */
        {
            const uint8_t *w = bn_slab(C, bars0, slot_off, ring, ld);
            bn_norm<NB>(a, a.att, a.qd, a.qd, L.asn ? bn_wsm(a, 1, w) : nullptr, &L.o, 1, U, X, S);
            bn_rows<NB>(a, 1, w, nullptr, X, S);
        }
        bn_phase_end(a, C, bars0, slot_off, 1, true, 2);
        ld++;

        /* 4: x -> G = relu(gate)^2 * up */
        {
            const uint8_t *wg = bn_slab(C, bars0, slot_off, ring, ld);
            const uint8_t *wu = bn_slab(C, bars0, slot_off, ring, ld + 1);
            bn_norm<NB>(a, a.x, a.ldx, a.dim, L.fn ? bn_wsm(a, 3, wu) : nullptr, &L.gu, 2, U, X, S);
            bn_rows<NB>(a, 2, wg, wu, X, S);
        }
        bn_phase_end(a, C, bars0, slot_off, 2, true, 2);
        ld += 2;

        /* 5: G -> x += down */
        {
            const uint8_t *w = bn_slab(C, bars0, slot_off, ring, ld);
            bn_norm<NB>(a, a.g, a.ffn, a.ffn, L.fsn ? bn_wsm(a, 4, w) : nullptr, &L.dn, 4, U, X, S);
            bn_rows<NB>(a, 4, w, nullptr, X, S);
        }
        bn_phase_end(a, C, bars0, slot_off, 1, !last, 2);
        ld++;
    }
    if (tid == 0 && C.prof)
        printf("lk_bitnet_decode block %d, %d layers: before the weights %.1f us, weight waits "
               "%.1f, norms and dots %.1f, attention %.1f, barriers %.1f (globaltimer)\n",
               (int)blockIdx.x, a.nl, C.tp[0] * 1e-3, C.tp[1] * 1e-3, C.tp[2] * 1e-3,
               C.tp[3] * 1e-3, C.tp[4] * 1e-3);
#endif
}

/* -------------------------------------------------------------- host */

typedef void (*bn_kernel_fn)(bn_kargs);

bn_kernel_fn bn_kernel_for(int nb)
{
    switch (nb) {
    case 1: return bn_kernel<1>;
    case 2: return bn_kernel<2>;
    case 3: return bn_kernel<3>;
    default: return bn_kernel<4>;
    }
}

/* Per device ordinal (0..63): the fused kernel's static shared memory
 * (0: no sm_90 body in this build) and whether one block of each NB fits an
 * SM with the whole opt-in. */
struct bn_dev_info {
    int ok;
    size_t static_smem, dyn_max;
};
bn_dev_info bn_info[64];

/* The kernel's dynamic shared memory and arguments for a call, or a reason
 * (why) it cannot take it. */
bool bn_plan_call(const lk_cuda_device *dev, const lk_bitnet_args *a, bn_kargs &k, size_t &dyn,
                  char *why, size_t wl)
{
    const int ord = dev->ordinal;
    if (ord < 0 || ord >= 64 || !bn_info[ord].ok)
        return snprintf(why, wl, "this GPU or build has no fused kernel (sm_90 needed)"), false;
    if (a->batch > BN_MAX_B)
        return snprintf(why, wl, "batch %lld > %d", (long long)a->batch, BN_MAX_B), false;
    if (a->ctx > BN_MAX_CTX)
        return snprintf(why, wl, "ctx %lld > %d", (long long)a->ctx, BN_MAX_CTX), false;
    if (a->head_dim > BN_MAX_HD || a->head_dim % 4 != 0)
        return snprintf(why, wl, "head_dim %lld (the kernel takes multiples of 4 up to %d)",
                        (long long)a->head_dim, BN_MAX_HD), false;
    const int64_t qd = a->n_head * a->head_dim, kvd = a->n_kv * a->head_dim;
    const int64_t rowmax = (int64_t)BN_MAX_CHUNKS * LK_CHUNK;
    if (a->dim > rowmax || qd > rowmax || a->ffn > rowmax || qd + 2 * kvd > ((int64_t)1 << 30))
        return snprintf(why, wl, "rows longer than %lld", (long long)rowmax), false;
    /* rows move as 16-byte copies */
    auto al16 = [](const void *p) { return (uintptr_t)p % 16 == 0; };
    if (a->dim % 4 || a->ffn % 4 || a->x.ld % 4 || !al16(a->x.data))
        return snprintf(why, wl, "dim, ffn and x's rows must be multiples of 16 bytes"), false;
    for (int64_t l = 0; l < a->n_layers; l++) {
        const lk_bitnet_layer_args &L = a->layers[l];
        if (!al16(L.attn_norm.data) || !al16(L.attn_sub_norm.data) || !al16(L.ffn_norm.data) ||
            !al16(L.ffn_sub_norm.data))
            return snprintf(why, wl, "layer %lld's norm weights are not 16-byte aligned",
                            (long long)l), false;
    }
    memset(&k, 0, sizeof k);
    k.dim = (int)a->dim, k.nh = (int)a->n_head, k.nkv = (int)a->n_kv, k.hd = (int)a->head_dim;
    k.ffn = (int)a->ffn, k.ctx = (int)a->ctx, k.qd = (int)qd, k.kvd = (int)kvd;
    k.pitch_dim = bn_round((k.dim + 3) / 4, 16);
    k.pitch_qd = bn_round((k.qd + 3) / 4, 16);
    k.pitch_ffn = bn_round((k.ffn + 3) / 4, 16);
    for (int64_t l = 0; l < a->n_layers; l++) {
        const lk_bitnet_layer_args &L = a->layers[l];
        const lk_bitnet_weight_args *ws[4] = {&L.qkv, &L.o, &L.gate_up, &L.down};
        const int pitch[4] = {k.pitch_dim, k.pitch_qd, k.pitch_dim, k.pitch_ffn};
        for (int i = 0; i < 4; i++) {
            const lk_cuda_weights *h = (const lk_cuda_weights *)ws[i]->prepared;
            if (!h || h->dt != LK_T2 || h->ldw / 4 != pitch[i])
                return snprintf(why, wl, "layer %lld has weights this driver did not prepare",
                                (long long)l), false;
        }
    }
    const int nb = dev->sm_count > 0 ? dev->sm_count : 1;
    const int nbatch = (int)a->batch;
    /* the largest share of one projection a block takes and streams */
    int slab_max = 0, rows_max = 0, slab[BN_LOADS];
    for (int kind = 0; kind < BN_LOADS; kind++) {
        const bn_kind K = bn_kind_of(k, kind);
        const int rows = (K.n + nb - 1) / nb;
        rows_max = std::max(rows_max, rows);
        slab[kind] = bn_round(rows * K.pitch, 128);
    }
    /* each norm weight travels with the rows of its projection, the gate
     * and up rows together */
    slab[0] += bn_round(4 * k.dim, 128);
    slab[1] += bn_round(4 * k.qd, 128);
    slab[2] += slab[3] + bn_round(4 * k.dim, 128);
    slab[4] += bn_round(4 * k.ffn, 128);
    for (int kind = 0; kind < BN_LOADS; kind++)
        slab_max = std::max(slab_max, slab[kind]);
    if (rows_max > BN_MAX_ROWS)
        return snprintf(why, wl, "%d rows of a projection per SM (at most %d)", rows_max,
                        BN_MAX_ROWS), false;
    const int nmax = std::max(std::max(k.dim, k.qd), k.ffn);
    k.kp = bn_round(nmax, 64);
    k.np = bn_round(nmax, 4);
    k.attn_tk = k.hd <= 128 ? 64 : 32;
    const int attn_floats =
        3 * k.hd + bn_round(k.attn_tk * (k.hd + 1), 4) + k.attn_tk * k.hd + k.ctx;
    const int norm_floats = nbatch * k.np; /* the rows */
    const size_t fixed = (size_t)nbatch * (k.kp + 512) +
                         (size_t)bn_round(std::max(attn_floats, norm_floats), 4) * 4;
    const size_t dmax = bn_info[ord].dyn_max;
    if (fixed + (size_t)slab_max > dmax)
        return snprintf(why, wl, "a block's share of a projection (%d bytes) does not fit shared "
                        "memory", slab_max), false;
    k.ring = (int)((dmax - fixed) / 1024 * 1024);
    dyn = (size_t)k.ring + fixed;
    k.rope_il = (a->rope_flags & LK_ROPE_INTERLEAVED) != 0;
    k.eps = a->eps, k.theta = a->theta, k.scale = a->attn_scale;
    k.x = (float *)a->x.data, k.ldx = a->x.ld;
    k.pos = (const int32_t *)a->pos.data, k.ldp = a->pos.ld;
    lk_bitnet_layout lay;
    (void)lk_bitnet_layout_of(a->batch, a->dim, a->n_head, a->n_kv, a->head_dim, a->ffn, &lay);
    char *sc = (char *)a->scratch;
    k.sync = (unsigned *)(sc + lay.sync);
    k.qkv = (float *)(sc + lay.qkv), k.att = (float *)(sc + lay.att), k.g = (float *)(sc + lay.g);
    return true;
}

bn_proj bn_proj_of(const lk_bitnet_weight_args &w)
{
    const lk_cuda_weights *h = (const lk_cuda_weights *)w.prepared;
    bn_proj p;
    p.w = (const uint8_t *)h->w;
    p.s = (const float *)h->scale;
    p.per_row = h->scale_n != 1;
    return p;
}

__global__ void bn_idx_kernel(const int32_t *pos, int64_t ldp, int64_t batch, int64_t ctx,
                              int32_t *idx)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    for (int64_t b = threadIdx.x; b < batch; b += blockDim.x)
        idx[b] = (int32_t)(b * ctx + pos[b * ldp]);
}

bool bn_fused_enabled()
{
    const char *e = getenv("LOCKSTEP_CUDA_BITNET_FUSED");
    return !(e && e[0] == '0' && e[1] == '\0');
}

} // namespace

/* The CUDA driver's kernel table (driver.c), for the composition. */
extern "C" const lk_kernels *lk_cuda_kernel_table(void);

extern "C" lk_status lk_cuda_bitnet_setup(lk_cuda_device *dev)
{
    const int ord = dev->ordinal;
    if (ord < 0 || ord >= 64)
        return LK_OK;
    bn_dev_info &I = bn_info[ord];
    I.ok = 0;
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, bn_kernel<1>) != cudaSuccess || fa.sharedSizeBytes == 0 ||
        dev->cc_major < 9) {
        (void)cudaGetLastError();
        return LK_OK; /* no sm_90 body: the composition runs */
    }
    I.static_smem = fa.sharedSizeBytes;
    I.dyn_max = dev->smem_optin > I.static_smem ? dev->smem_optin - I.static_smem : 0;
    int ok = I.dyn_max > 0;
    for (int nb = 1; ok && nb <= BN_MAX_B; nb++) {
        int per_sm = 0;
        ok = cudaFuncSetAttribute(bn_kernel_for(nb), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)I.dyn_max) == cudaSuccess &&
             cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bn_kernel_for(nb), BN_THREADS,
                                                           I.dyn_max) == cudaSuccess &&
             per_sm >= 1;
    }
    (void)cudaGetLastError();
    I.ok = ok;
    dev->host->debug("cuda:%d: lk_bitnet_decode %s (static %zu, dynamic up to %zu bytes)", ord,
                     ok ? "fused kernel" : "composition", I.static_smem, I.dyn_max);
    return LK_OK;
}

extern "C" lk_status lk_cuda_bitnet_decode(void *queue, const lk_bitnet_args *a)
{
    lk_op_scope op(queue, "lk_bitnet_decode");
    if (!op.ok())
        return op.status();
    if (a->n_layers <= 0 || a->batch <= 0)
        return LK_OK;
    lk_cuda_queue *q = op.q;
    const lk_cuda_device *dev = q->dev;
    static thread_local bn_kargs k; /* 4 KB: not on the stack */
    size_t dyn = 0;
    char why[160] = "LOCKSTEP_CUDA_BITNET_FUSED=0";
    if (bn_fused_enabled() && bn_plan_call(dev, a, k, dyn, why, sizeof why)) {
        k.rec = (long long *)((char *)q->host_ws + LK_CUDA_EMB_ERR_OFFSET);
        const char *pe = getenv("LOCKSTEP_CUDA_BITNET_PROFILE");
        k.prof = pe && pe[0] == '1';
        cudaError_t e = cudaSuccess;
        const bn_kernel_fn fn = bn_kernel_for((int)a->batch);
        const unsigned nb = (unsigned)(dev->sm_count > 0 ? dev->sm_count : 1);
        for (int64_t l0 = 0; e == cudaSuccess && l0 < a->n_layers; l0 += BN_MAX_LAYERS) {
            k.nl = (int)(a->n_layers - l0 < BN_MAX_LAYERS ? a->n_layers - l0 : BN_MAX_LAYERS);
            for (int i = 0; i < k.nl; i++) {
                const lk_bitnet_layer_args &S = a->layers[l0 + i];
                bn_layer &D = k.L[i];
                D.qkv = bn_proj_of(S.qkv), D.o = bn_proj_of(S.o);
                D.gu = bn_proj_of(S.gate_up), D.dn = bn_proj_of(S.down);
                D.an = (const float *)S.attn_norm.data, D.asn = (const float *)S.attn_sub_norm.data;
                D.fn = (const float *)S.ffn_norm.data, D.fsn = (const float *)S.ffn_sub_norm.data;
                D.kv = (float *)S.kv.data;
                D.kvld = S.kv.ld;
            }
            /* the barrier's count starts at zero in every launch */
            e = cudaMemsetAsync(k.sync, 0, 4, op.stream());
            if (e != cudaSuccess)
                break;
            cudaLaunchAttribute attr[1] = {};
            attr[0].id = cudaLaunchAttributeCooperative;
            attr[0].val.cooperative = 1;
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(nb);
            cfg.blockDim = dim3(BN_THREADS);
            cfg.dynamicSmemBytes = dyn;
            cfg.stream = op.stream();
            cfg.attrs = attr;
            cfg.numAttrs = 1;
            e = cudaLaunchKernelEx(&cfg, fn, k);
        }
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            return lk_cuda_fail(dev->host, e, "lk_bitnet_decode");
        }
        return op.launched();
    }
    dev->host->debug("lk_bitnet_decode on cuda:%d: the composition (%s)", dev->ordinal, why);
    if (lk_capturing(op))
        return op.fail(LK_ERR_UNSUPPORTED,
                       "lk_bitnet_decode: cannot be captured in a graph on this device (%s: it "
                       "runs as the composition of its ops, which could not keep a bad position "
                       "from writing); the capture goes on without it",
                       why);
    lk_bitnet_layout lay;
    (void)lk_bitnet_layout_of(a->batch, a->dim, a->n_head, a->n_kv, a->head_dim, a->ffn, &lay);
    lk_launch(bn_idx_kernel, 1, 32, 0, op.stream(), (const int32_t *)a->pos.data, a->pos.ld,
              a->batch, a->ctx, (int32_t *)((char *)a->scratch + lay.idx));
    const lk_status st = op.launched();
    if (st != LK_OK)
        return st;
    return lk_bitnet_compose(lk_cuda_kernel_table(), queue, a, 1);
}
