/* Lockstep CUDA: lk_bitnet_decode (include/lockstep/bitnet.h), a decode
 * step's decoder layers as one persistent kernel on sm_90.
 *
 * Why one kernel: a BitNet layer at batch 1 is a dozen small ops, and as
 * separate kernels each one costs its launch, its ramp-up and its wait for
 * the previous one (about 1 us in a CUDA graph with PDL), more than the
 * 17 MB of ternary weights a layer streams (about 5 us at HBM speed) need
 * (docs/internals/decode-step.md).  Here one block per SM runs every
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
 * rows.  The weights do not depend on anything the kernel computes, so a
 * warp of each block of its own (the 17th) streams the block's share of
 * every projection, layer after layer, into a ring of shared memory with
 * bulk copies (cp.async.bulk on mbarriers), as far ahead as the ring
 * holds: the HBM traffic runs through the barriers and the small phases
 * instead of waiting for them, and issuing it is off the path of the 16
 * compute warps (which synchronise on named barrier 1 and hand the ring's
 * room back on named barriers 2-9; every barrier and what it orders:
 * docs/internals/bitnet-decode-sync.md).
 *
 * Where it stands (docs/internals/decode-step.md):
 * bit-exact; on an H100 a 30-layer step is one launch of about 31 us a
 * layer (821-833 tokens/s at batch 1, 14 % ahead of the ops in a CUDA
 * graph; its first version took 50 us a layer).  What is left is
 * latency, spread over the twenty-odd dependent steps of each phase:
 * the four norms' chains (row from L2, lane sums, 1 / rms, maximum,
 * codes: about 2.5 us each), five handoffs (stores, a release-add whose
 * fence alone takes about 0.4 us, a poll, the row from L2: at least 1.5
 * us each with nothing else running, lockstep-cuda-bench --only
 * handoff; the one after attention also waits for the 20 blocks that
 * hold a head, about 3.6 us of attention) and the dot products (about
 * 1.5 us a phase for 270-1300 cycles of issue).  Handoff words polled
 * by the readers instead of the barriers (NCCL's LL protocol) would save
 * at most 0.35 us a handoff; a first version was bit-exact and slower
 * (branch ll-handoff).
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

#define BN_THREADS 512              /* the compute threads of a block */
#define BN_WARPS (BN_THREADS / 32)
#define BN_BLOCK (BN_THREADS + 32) /* and one warp that streams the weights */
#define BN_MAX_B 4
#define BN_MAX_CTX 4096
#define BN_MAX_HD 256
#define BN_MAX_CHUNKS 4  /* norm rows of up to 16384 */
#define BN_MAX_LAYERS 32 /* per launch (arguments within 4 KB): BitNet-2B-4T's 30 in one */
#define BN_SLOTS 8       /* weight loads in flight */
#define BN_FREE_BAR 2    /* named barriers 2 .. 9: load i's room is free (bn_free_*) */
#define BN_LOADS 5       /* per layer: qkv, o, gate, up, down */
#define BN_MAX_ROWS 256  /* rows of one projection a block takes */
#define BN_COPY_MAX 32768

struct bn_proj {
    const uint8_t *w; /* codes, rows of `pitch` bytes (the prepared copy) */
    const float *s;   /* s[n] per row (bit of bn_layer.srow set), or s[0] */
};

/* 112 bytes a layer: 32 of them and the rest within the 4 KB of kernel
 * arguments every driver takes, so a 30-layer step is one launch (one
 * ramp-up, one cold weight ring; two launches of 24 and 6 layers were
 * about 2 % slower on an H100). */
struct bn_layer {
    bn_proj qkv, o, gu, dn;
    const float *an, *asn, *fn, *fsn; /* NULL: no weight */
    float *kv;
    int kvld; /* floats between cache rows (bn_plan_call checks it fits) */
    int srow; /* bit k: projection k (0 qkv, 1 o, 2 gate-up, 3 down) has a scale per row */
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
    int prof;       /* LOCKSTEP_CUDA_BITNET_PROFILE: where the time went, over the blocks */
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
 * rows, their first row in the matrix, pitch, K (the length of the row the
 * norm before it quantises) and words of 16 codes. */
struct bn_kind {
    int n, row0, pitch, k, nw;
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
    r.k = k == 1 ? a.qd : k == 4 ? a.ffn : a.dim;
    r.nw = (r.k + 15) / 16;
    return r;
}

/* The profile's buckets (LOCKSTEP_CUDA_BITNET_PROFILE=1): thread 0 of each
 * block adds the time since its last mark to one of them, right after the
 * bn_sync that ends a step, so a bucket holds the block's time.  Marks
 * read the SM's cycle counter (a few cycles, and as fine as the clock);
 * the report turns cycles into ns with the block's own cycles per ns of
 * the global timer over the launch, and prints that clock. */
enum {
    BN_P_OTHER,   /* the start, until the first slab is awaited */
    BN_P_WEIGHTS, /* waits for a slab of weights */
    BN_P_ROWS,    /* a norm's rows (and the scales) arriving from L2 */
    BN_P_LANES,   /* the norm's lane sums and 1 / rms */
    BN_P_QUANT,   /* y = x r w, the maximum, the codes */
    BN_P_DOTS,    /* the projection's rows, up to the slowest warp */
    BN_P_BARRIER, /* the grid barriers' waits, to leaving */
    BN_P_ATTN,    /* RoPE, the cache row and attention */
    BN_P_ARRIVE,  /* the barriers' release-adds and the next scales' requests */
    BN_PB
};

/* The profile's sums over a launch's blocks (defined in both compiler
 * passes: the host's registers them). */
__device__ unsigned long long bn_prof_sum[BN_PB], bn_prof_max[BN_PB];
__device__ unsigned bn_prof_done;
__device__ unsigned long long bn_prof_mhz;

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

/* The compute warps' barrier (named barrier 1: the weight warp runs on
 * its own and never takes part). */
__device__ __forceinline__ void bn_sync() { asm volatile("bar.sync 1, %0;" ::"n"(BN_THREADS) : "memory"); }

/* The ring's frees: load f's room goes back to the weight warp through
 * named barrier BN_FREE_BAR + f % BN_SLOTS, which every compute thread
 * arrives at (bar.arrive, no wait) after its last read of the load's
 * codes, and the whole weight warp syncs at before it copies over them:
 * 512 + 32 threads.  One thread's mbarrier arrival after bn_sync orders
 * the reads before the copies as well, but racecheck does not take an
 * mbarrier's arrival and wait as an order between a thread's reads and a
 * bulk copy's writes (it reported a plain bulk copy's reuse of a ring
 * slot in tc_wgmma.cu as a race); a named barrier is the kind of order
 * it checks, so the tool can check this one instead of the argument here.  A free's
 * barrier is not arrived at again before the weight warp has synced at
 * it: the compute side frees load f + BN_SLOTS only after reading it, and
 * the weight warp copies that load only after taking free f (bn_producer's
 * slot rule).  Cost: a bar.arrive per warp and load (five a layer), and
 * the weight warp waits in bar.sync instead of polling an mbarrier. */
__device__ __forceinline__ void bn_free_arrive(int f)
{
    asm volatile("bar.arrive %0, %1;" ::"r"(BN_FREE_BAR + f % BN_SLOTS), "n"(BN_BLOCK) : "memory");
}
__device__ __forceinline__ void bn_free_wait(int f)
{
    asm volatile("bar.sync %0, %1;" ::"r"(BN_FREE_BAR + f % BN_SLOTS), "n"(BN_BLOCK) : "memory");
}

/* The grid barrier (thread 0 of each block, between bn_syncs): one
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

struct bn_sm { /* the block's small shared state */
    float part[BN_MAX_B * BN_MAX_CHUNKS];
    float xs[BN_MAX_B];
    unsigned umax[BN_MAX_B * BN_WARPS];
    int isum[BN_MAX_B * BN_WARPS];
    float sc[2][BN_MAX_ROWS];         /* this phase's weight scales (up rows: [1]) */
    float xsh[BN_MAX_B][BN_MAX_ROWS]; /* this block's rows of x (it alone writes them) */
    unsigned redk[BN_WARPS];
    /* attention's chunks (numerics.md 12.3): maximum, lane sum, weight */
    float cm[BN_MAX_CTX / 64], cl[BN_MAX_CTX / 64], cw[BN_MAX_CTX / 64];
    int pos[BN_MAX_B];
    /* RoPE's sine and cosine of pair i at each sequence's position: the
     * same in every layer, so taken once a launch */
    float rsin[BN_MAX_B][BN_MAX_HD / 2], rcos[BN_MAX_B][BN_MAX_HD / 2];
    unsigned long long tp[BN_PB], tmark, ns0, cyc0; /* the profile (thread 0): SM cycles */
    int prof;
    /* bytes of the ring this block's share of projection kind k takes
     * (128-byte rounded) */
    uint32_t szk[BN_LOADS];
    /* the block's rows of projection kind k: [kr0, kr0 + kn) of its n
     * (bn_split, set once a launch: not an integer division each phase) */
    int kr0[BN_LOADS], kn[BN_LOADS];
};

/* The ring bytes of the load group starting at load i (bn_place): a
 * gate load takes its up load along. */
__device__ __forceinline__ uint32_t bn_need(const bn_sm &S, int i)
{
    const int k0 = i % BN_LOADS;
    return S.szk[k0] + (k0 == 2 ? S.szk[3] : 0u);
}

/* Where in the ring the load group starting at load i goes (a gate load
 * takes its up load along: one phase needs both, so they are placed
 * together; else the up rows could wait for room that only the gate phase
 * frees): its start, the next group's head, and its bytes.  A function of
 * the sizes alone, so the weight warp and the compute warps each compute
 * it (the compute side needs no offsets from the weight warp). */
__device__ __forceinline__ uint64_t bn_place(const bn_kargs &a, const bn_sm &S, int i,
                                             uint64_t &head, uint32_t &need)
{
    need = bn_need(S, i);
    uint64_t start = head;
    const uint32_t off = (uint32_t)(start % (uint32_t)a.ring);
    if (off + need > (uint32_t)a.ring)
        start += (uint32_t)a.ring - off;
    head = start + need;
    return start;
}

/* The compute side's bn_place: the offset in the ring alone, with 32-bit
 * arithmetic (a 64-bit remainder by a runtime divisor is a call of some
 * hundred cycles, on every phase's path).  hoff is head's offset, kept
 * in (0, ring]: a group that does not fit before the end starts at 0, as
 * bn_place's start rounds up to the next lap. */
__device__ __forceinline__ uint32_t bn_place_off(const bn_kargs &a, const bn_sm &S, int i,
                                                 uint32_t &hoff)
{
    const uint32_t need = bn_need(S, i);
    const uint32_t off = hoff + need > (uint32_t)a.ring ? 0u : hoff;
    hoff = off + need;
    return off;
}

__device__ __forceinline__ void bn_mark(bn_sm &S, int kind)
{
    if (threadIdx.x == 0 && S.prof) {
        const unsigned long long t = clock64();
        S.tp[kind] += t - S.tmark;
        S.tmark = t;
    }
}

/* The weight scales of layer L's projection of load kind `kind` (0 qkv, 1
 * o, 2 gate with up, 4 down) for this block's rows (and the up rows' with
 * the gate's) into S.sc: 4-byte asynchronous copies issued before the
 * barrier that precedes their phase, in by the norm's wait (an HBM round
 * trip the norm's rows from L2 no longer wait behind). */
__device__ __forceinline__ void bn_scales(const bn_kargs &a, const bn_layer &L, int kind, bn_sm &S)
{
    const bn_kind K = bn_kind_of(a, kind);
    const bn_proj &P = kind == 0 ? L.qkv : kind == 1 ? L.o : kind == 2 ? L.gu : L.dn;
    const bool per_row = L.srow >> (kind == 4 ? 3 : kind) & 1;
    const int r0 = S.kr0[kind];
    const int tid = threadIdx.x;
    if (tid < S.kn[kind]) {
        bn_cp4(&S.sc[0][tid], P.s + (per_row ? K.row0 + r0 + tid : 0));
        if (kind == 2)
            bn_cp4(&S.sc[1][tid], P.s + (per_row ? a.ffn + r0 + tid : 0));
    }
}

/* The weight warp (every lane: they all take part in the frees' named
 * barriers; lane 0 issues the copies): every load of the launch in order,
 * each as soon as the ring has room for it.  The ring is a lap of a.ring
 * bytes at shared address `base`; head and tail count bytes over the
 * launch (bn_place).  Load i lands on the mbarrier full[i % BN_SLOTS]; the
 * compute side frees it (bn_free_arrive) once it is done with it, and
 * loads are freed in order.  Off the compute warps' path: issuing a
 * phase's copies took its thread 0 about 2 us, which every other warp
 * waited for at the phase's end. */
__device__ __noinline__ void bn_producer(const bn_kargs &a, const bn_sm &S, uint32_t base,
                                         uint32_t full)
{
    const bool lead = (threadIdx.x & 31) == 0;
    const uint32_t size = (uint32_t)a.ring;
    uint64_t head = 0, tail = 0, vend[BN_SLOTS];
    int freed = 0;
    const int total = BN_LOADS * a.nl;
    for (int i = 0; i < total;) {
        const int k0 = i % BN_LOADS, nl = k0 == 2 ? 2 : 1;
        const bn_layer &L = a.L[i / BN_LOADS];
        uint32_t need;
        const uint64_t start = bn_place(a, S, i, head, need);
        for (;;) { /* room: slots and bytes, waiting for frees in order */
            if (i == freed)
                tail = start; /* nothing live: the skipped end of the lap is free too */
            if (i - freed + nl <= BN_SLOTS && start + need - tail <= size)
                break;
            bn_free_wait(freed);
            tail = vend[freed % BN_SLOTS];
            freed++;
        }
        uint64_t at = start;
        for (int j = 0; j < nl; j++) {
            const int k = k0 + j, slot = (i + j) % BN_SLOTS;
            const bn_kind K = bn_kind_of(a, k);
            const uint8_t *w = k == 0 ? L.qkv.w : k == 1 ? L.o.w : k == 4 ? L.dn.w : L.gu.w;
            const uint8_t *src = w + (size_t)(K.row0 + S.kr0[k]) * K.pitch;
            const uint32_t bytes = (uint32_t)S.kn[k] * K.pitch;
            const uint32_t dst = base + (uint32_t)(at % size), bar = full + 8 * slot;
            if (lead) {
                lk_mbar_expect_tx(bar, bytes);
                for (uint32_t o = 0; o < bytes; o += BN_COPY_MAX) {
                    const uint32_t n = bytes - o < BN_COPY_MAX ? bytes - o : BN_COPY_MAX;
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                                 " [%0], [%1], %2, [%3];\n" ::"r"(dst + o),
                                 "l"(src + o), "r"(n), "r"(bar)
                                 : "memory");
                }
            }
            at += S.szk[k];
            vend[slot] = at;
        }
        i += nl;
    }
    /* the frees not yet taken, so that no named barrier is left part-way
     * when the block exits */
    for (; freed < total; freed++)
        bn_free_wait(freed);
}

/* The end of a phase (every compute thread): `freed` loads are done with
 * (bn_free_arrive: the weight warp may reuse their room), the scales of the next
 * projection (layer nl's of load kind nk; nl NULL: none) are requested, and with
 * `barrier` the block arrives at the grid barrier that bn_phase_wait then
 * waits at, before the next phase reads what this one wrote.  `kind`: the
 * profile's bucket of the phase. */
__device__ __noinline__ void bn_phase_end(const bn_kargs &a, int &freed_loads, bn_sm &S,
                                          int freed, bool barrier, int kind, const bn_layer *nl,
                                          int nk, unsigned &target)
{
    bn_sync();
    bn_mark(S, kind);
    if (threadIdx.x == 0 && barrier) {
        target += gridDim.x;
        bn_arrive(a.sync);
    }
    for (int i = 0; i < freed; i++, freed_loads++)
        bn_free_arrive(freed_loads);
    if (nl)
        bn_scales(a, *nl, nk, S);
    if (barrier)
        bn_mark(S, BN_P_ARRIVE);
}

/* The wait of a barrier that bn_phase_end arrived at (every compute thread). */
__device__ __noinline__ void bn_phase_wait(const bn_kargs &a, bn_sm &S, unsigned target)
{
    if (threadIdx.x == 0)
        bn_wait(a.sync, target); /* an acquire, then the block's bn_sync */
    bn_sync();
    bn_mark(S, BN_P_BARRIER);
}

/* The slab of load i (every thread), once its bytes have landed.  Inline:
 * a pointer returned from a call is generic, and bn_rows then read the
 * codes with generic loads instead of ld.shared. */
__device__ __forceinline__ const uint8_t *bn_slab(bn_sm &S, uint32_t bars,
                                                  const unsigned char *ring, uint32_t off, int i)
{
    bn_mark(S, BN_P_OTHER);
    lk_mbar_wait(bars + 8 * (i % BN_SLOTS), (unsigned)((i / BN_SLOTS) & 1));
    bn_mark(S, BN_P_WEIGHTS);
    return ring + off;
}

/* The weight of the next norm (nw, n floats; NULL: none) into its buffer
 * after the norm's rows in U (every compute thread): requested at the end
 * of the phase before (U is free by then: the norm before it and
 * attention are done), so its L2 round trip runs through the barrier, and
 * it waits with the rows (bn_norm's cp.async.wait_all).  Not in the ring:
 * the four norm weights of a layer (57 KB at BitNet-2B-4T's shapes) would
 * take a third of every block's share of the layer's loads. */
__device__ __forceinline__ void bn_norm_weight_fetch(const bn_kargs &a, int nb, const float *nw,
                                                     int n, float *U)
{
    if (nw)
        bn_cp_row(U + nb * a.np, nw, n);
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


/* lk_rmsnorm_quantize of NB rows of n f32 (src, row stride ld) with the
 * weight w (NULL: none): the codes into the planes X (plane t of row b,
 * word j: bytes q[16 j + 4 e + t], e = 0..3, zero past n, nw words a
 * plane), the scales into S.xs and each warp's sum of a row's codes into
 * S.isum.
 * The rows arrive in one round trip (asynchronous copies), and so do the
 * phase's weight scales requested before the barrier (bn_scales). */
template <int NB>
__device__ __noinline__ void bn_norm(const bn_kargs &a, const float *src, int64_t ld, int n,
                                     const float *wsm, float *rowbuf, int32_t *X, bn_sm &S)
{
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, np = a.np;
    const int nw = (n + 15) / 16, nwp = bn_nwp(nw);
#pragma unroll
    for (int b = 0; b < NB; b++)
        bn_cp_row(rowbuf + b * np, src + b * ld, n);
    bn_cp_wait();
    bn_sync();
    bn_mark(S, BN_P_ROWS);
    const int nch = (n + LK_CHUNK - 1) / LK_CHUNK;
    for (int wc = warp; wc < NB * nch; wc += BN_WARPS) {
        const int b = wc / nch, c = wc % nch;
        const int len = n - c * LK_CHUNK < LK_CHUNK ? n - c * LK_CHUNK : LK_CHUNK;
        const float p = lk_warp_chunk<true>(lk_f32_src{rowbuf + b * np}, (int64_t)c * LK_CHUNK, len);
        if (lane == 0)
            S.part[b * BN_MAX_CHUNKS + c] = p;
    }
    bn_sync();
    bn_mark(S, BN_P_LANES);
    /* y_i = (x_i r) w_i, kept in rowbuf; amax on the bit patterns.  Every
     * thread folds the chunk partials and takes 1 / rms itself (the same
     * steps on the same values: one barrier less than one thread doing it).
     * The rows go side by side through each loop (independent chains). */
    float r[NB];
    unsigned m[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const float ss = bn_tree4(S.part + b * BN_MAX_CHUNKS, nch);
        r[b] = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, __int2float_rn(n)), a.eps)));
        m[b] = 0u;
    }
    /* four elements a thread at once (n is a multiple of 4, the rows and
     * the weight are 16-byte aligned): a quarter of the shared-memory
     * instructions of one a thread, the same steps on each element */
    const int n4 = n >> 2;
#pragma unroll 2
    for (int u = tid; u < n4; u += BN_THREADS) {
        const float4 wv = wsm ? reinterpret_cast<const float4 *>(wsm)[u] : make_float4(0, 0, 0, 0);
#pragma unroll
        for (int b = 0; b < NB; b++) {
            float4 *yr = reinterpret_cast<float4 *>(rowbuf + b * np);
            float4 y = yr[u];
            y.x = __fmul_rn(y.x, r[b]), y.y = __fmul_rn(y.y, r[b]);
            y.z = __fmul_rn(y.z, r[b]), y.w = __fmul_rn(y.w, r[b]);
            if (wsm) {
                y.x = __fmul_rn(y.x, wv.x), y.y = __fmul_rn(y.y, wv.y);
                y.z = __fmul_rn(y.z, wv.z), y.w = __fmul_rn(y.w, wv.w);
            }
            yr[u] = y;
            m[b] = max(m[b], max(max(lk_qa_bits(y.x), lk_qa_bits(y.y)),
                                 max(lk_qa_bits(y.z), lk_qa_bits(y.w))));
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        m[b] = lk_qa_warp_max(m[b]);
        if (lane == 0)
            S.umax[b * BN_WARPS + warp] = m[b];
    }
    bn_sync();
    /* code k into byte (k % 16) / 4 of word k / 16 of plane k % 4; every
     * warp folds the warp maxima itself */
    float sc[NB];
    int sq[NB];
#pragma unroll
    for (int b = 0; b < NB; b++) {
        const unsigned mx = lk_qa_warp_max(lane < BN_WARPS ? S.umax[b * BN_WARPS + lane] : 0u);
        sc[b] = __fdiv_rn(127.0f, lk_maximum(lk_qa_amax(mx), LK_QUANT_EPS));
        if (tid == 0)
            S.xs[b] = sc[b];
        sq[b] = 0;
    }
    /* Lane u (the thread that stored y's four elements 4u .. 4u + 3 above)
     * codes them: element 4u + t is byte u % 4 of word u / 4 of plane t.
     * The four lanes of a word gather each other's four codes and each
     * stores one plane's whole word: a word store instead of four byte
     * stores, four shuffles for the lot.  Whole warps run the loop (the
     * shuffles), lanes past the planes store nothing. */
    const int sel = (lane & 3) | ((lane & 3) + 4) << 4, base = lane & ~3;
#pragma unroll 2
    for (int u0 = warp * 32; u0 < 4 * nw; u0 += BN_THREADS) {
        const int u = u0 + lane;
#pragma unroll
        for (int b = 0; b < NB; b++) {
            int q0 = 0, q1 = 0, q2 = 0, q3 = 0;
            if (4 * u < n) {
                const float4 y = reinterpret_cast<const float4 *>(rowbuf + b * np)[u];
                q0 = lk_qa_q8(__fmul_rn(y.x, sc[b])), q1 = lk_qa_q8(__fmul_rn(y.y, sc[b]));
                q2 = lk_qa_q8(__fmul_rn(y.z, sc[b])), q3 = lk_qa_q8(__fmul_rn(y.w, sc[b]));
            }
            sq[b] += (q0 + q1) + (q2 + q3);
            const uint32_t p = lk_qa_pack4(q0, q1, q2, q3);
            const uint32_t p0 = __shfl_sync(LK_FULL_MASK, p, base);
            const uint32_t p1 = __shfl_sync(LK_FULL_MASK, p, base + 1);
            const uint32_t p2 = __shfl_sync(LK_FULL_MASK, p, base + 2);
            const uint32_t p3 = __shfl_sync(LK_FULL_MASK, p, base + 3);
            if (u < 4 * nw) /* byte e of word: the code of lane base + e */
                X[b * 4 * nwp + (lane & 3) * nwp + (u >> 2)] =
                    (int32_t)__byte_perm(__byte_perm(p0, p1, sel), __byte_perm(p2, p3, sel), 0x5410);
        }
    }
#pragma unroll
    for (int b = 0; b < NB; b++) {
        sq[b] = __reduce_add_sync(LK_FULL_MASK, sq[b]);
        if (lane == 0)
            S.isum[b * BN_WARPS + warp] = sq[b];
    }
    bn_sync();
    bn_mark(S, BN_P_QUANT);
}

/* ------------------------------------------------------------ the GEMV */

/* G rows of a warp's share at once, rows rb, rb + 16, ...: their loads
 * overlap.  The dot products are sum (code) x over the warp minus sum x
 * (sumx: exact; with K <= 16384 no partial sum leaves int32).  Lane
 * g NB + b stores row g for sequence b (see bn_rows).  With one
 * sequence, plane t's codes are not shifted down: the masked bytes are
 * 4^t code, summed in an accumulator of their own that is shifted back
 * at the end (exact: a sum of multiples of 4^t; per lane at most 32 words
 * of 4 bytes, 192 x 128 each, far inside int32) -- a third fewer
 * instructions in the issue-bound loop. */
template <int NB, int G, int KIND>
__device__ __forceinline__ void bn_group(const bn_kargs &a, const bn_kind &K, int nwp,
                                         const uint8_t *w, const uint8_t *w2, const int32_t *X,
                                         bn_sm &S, const int *sumx, int r0, int rb)
{
    const int lane = threadIdx.x & 31;
    constexpr bool gu = KIND == 2;
    constexpr bool masked = NB == 1;
    constexpr int P = masked ? 4 : 1; /* accumulators per row: one per plane when masked */
    int acc[G][NB], accu[G][NB], ap[G][NB][P], apu[G][NB][P];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int b = 0; b < NB; b++) {
            acc[g][b] = accu[g][b] = 0;
#pragma unroll
            for (int t = 0; t < P; t++)
                ap[g][b][t] = apu[g][b][t] = 0;
        }
    const uint32_t *wr[G], *ur[G];
#pragma unroll
    for (int g = 0; g < G; g++) {
        wr[g] = (const uint32_t *)(w + (size_t)(rb + g * BN_WARPS) * K.pitch);
        ur[g] = (const uint32_t *)((gu ? w2 : w) + (size_t)(rb + g * BN_WARPS) * K.pitch);
    }
    /* not unrolled: a lane has at most 5 words of a row (K.nw / 32), and
     * the smaller loop measured 2-3 % faster at batch 1 on an H100 than
     * unroll 4 */
#pragma unroll 1
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
                if (masked) {
                    const uint32_t mk = 0x03030303u << (2 * t);
#pragma unroll
                    for (int b = 0; b < NB; b++) {
                        ap[g][b][t % P] = lk_dp4a_us(c[g] & mk, xv[b], ap[g][b][t % P]);
                        if (gu)
                            apu[g][b][t % P] = lk_dp4a_us(cu[g] & mk, xv[b], apu[g][b][t % P]);
                    }
                } else {
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
    }
    if (masked)
#pragma unroll
        for (int g = 0; g < G; g++)
#pragma unroll
            for (int b = 0; b < NB; b++)
#pragma unroll
                for (int t = 0; t < P; t++) {
                    acc[g][b] += ap[g][b][t] >> (2 * t);
                    if (gu)
                        accu[g][b] += apu[g][b][t] >> (2 * t);
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
            const float v = lk_qgemm_value(acc[g][b] - sumx[b], S.xs[b], S.sc[0][r]);
            if (KIND == 0) {
                a.qkv[(size_t)b * (a.qd + 2 * a.kvd) + i] = lk_canon_f32(v);
            } else if (gu) {
                const float uv =
                    lk_canon_f32(lk_qgemm_value(accu[g][b] - sumx[b], S.xs[b], S.sc[1][r]));
                a.g[(size_t)b * a.ffn + i] = lk_canon_f32(__fmul_rn(lk_cu_relu2(lk_canon_f32(v)), uv));
            } else {
                const float x = lk_canon_f32(__fadd_rn(S.xsh[b][r], v));
                S.xsh[b][r] = x;
                a.x[b * a.ldx + i] = x;
            }
        }
}

/* This block's rows of projection KIND (0 qkv, 1 o, 2 gate with its up
 * rows at w2, 4 down) from its slab w, two rows a warp at once where it
 * has two.  Stores: 0 into QKV, 1 and 4 added to x (lk_ternary_linear's
 * LK_GEMM_ACCUMULATE, the old value from the block's shadow of its rows),
 * 2 the gated product into G (the gate and up values as
 * lk_ternary_linear stores them, then lk_glu's steps).  A template per
 * kind: no branches on it in the dot products' loop. */
template <int NB, int KIND>
__device__ __noinline__ void bn_rows(const bn_kargs &a, const uint8_t *w, const uint8_t *w2,
                                     const int32_t *X, bn_sm &S)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bn_kind K = bn_kind_of(a, KIND);
    const int nwp = bn_nwp(K.nw);
    const int r0 = S.kr0[KIND], rows = S.kn[KIND];
    int sumx[NB]; /* each row's sum of codes, from the norm's warp sums */
#pragma unroll
    for (int b = 0; b < NB; b++)
        sumx[b] = __reduce_add_sync(LK_FULL_MASK, lane < BN_WARPS ? S.isum[b * BN_WARPS + lane] : 0);
    for (int rb = warp; rb < rows; rb += 2 * BN_WARPS) {
        if (rb + BN_WARPS < rows)
            bn_group<NB, 2, KIND>(a, K, nwp, w, w2, X, S, sumx, r0, rb);
        else
            bn_group<NB, 1, KIND>(a, K, nwp, w, w2, X, S, sumx, r0, rb);
    }
}

/* ------------------------------------------------------------ attention */

/* Attention's buffers in U and the layout of its key and value tiles. */
struct bn_attn_buf {
    float *qs, *ks, *vs, *kt, *vt, *e;
    int ts, tk;
    __device__ bn_attn_buf(const bn_kargs &a, float *U)
    {
        const int hd = a.hd;
        ts = hd + 1, tk = a.attn_tk;
        qs = U, ks = U + hd, vs = U + 2 * hd;
        kt = U + 3 * hd;              /* tk x (hd + 1): conflict-free rows */
        vt = kt + bn_round(tk * ts, 4); /* tk x hd */
        e = vt + tk * hd;
    }
};

/* The cached keys and values of rows j0 .. j0 + nt of item (b, h), other
 * than this step's row p, into the tiles: thread t copies column t % hd of
 * every (512 / hd)-th row (asynchronous copies, in by the next wait). */
__device__ __forceinline__ void bn_attn_fetch(const bn_kargs &a, const bn_layer &L,
                                              const bn_attn_buf &T, int b, int h, int p, int j0,
                                              int nt)
{
    const int tid = threadIdx.x, hd = a.hd, gk = h / (a.nh / a.nkv);
    const int col = tid % hd, rstep = BN_THREADS / hd, row1 = tid / hd;
    if (row1 >= rstep)
        return;
    const float *kbase = L.kv + (size_t)b * a.ctx * (size_t)L.kvld + gk * hd;
    const float *vbase = kbase + a.kvd;
#pragma unroll 1
    for (int jj = row1; jj < nt; jj += rstep) {
        const int j = j0 + jj;
        if (j != p) {
            bn_cp4(T.kt + jj * T.ts + col, kbase + (size_t)j * L.kvld + col);
            bn_cp4(T.vt + jj * hd + col, vbase + (size_t)j * L.kvld + col);
        }
    }
}

/* The first tile of this block's first attention item, requested before
 * the barrier that ends the q/k/v phase: the cache's earlier rows do not
 * depend on it, and their HBM round trip then overlaps the barrier. */
__device__ __noinline__ void bn_attn_prefetch(const bn_kargs &a, const bn_layer &L, float *U,
                                              const bn_sm &S)
{
    const int it = blockIdx.x; /* < NB nh: the caller checks */
    const int b = it / a.nh, h = it % a.nh, p = S.pos[b], n = p + 1;
    const bn_attn_buf T(a, U);
    bn_attn_fetch(a, L, T, b, h, p, 0, n < T.tk ? n : T.tk);
}

/* Query head h of sequence b at position p (section 12.3 over cache rows
 * b ctx .. b ctx + p).  q, k and v of this step and the first tile of
 * cached keys and values arrive in one round trip (the tile's copies
 * already requested when `prefetched`); row p of the cache is this step's
 * key and value, taken from shared memory (the block that stores it may
 * not have yet). */
__device__ __noinline__ void bn_attention(const bn_kargs &a, const bn_layer &L, int b, int h,
                                          int p, bool prefetched, float *U, bn_sm &S)
{
    const int tid = threadIdx.x, hd = a.hd, grp = a.nh / a.nkv, gk = h / grp;
    const int stride = a.qd + 2 * a.kvd, n = p + 1;
    const bn_attn_buf T(a, U);
    const int ts = T.ts, tk = T.tk;
    float *qs = T.qs, *ks = T.ks, *vs = T.vs, *kt = T.kt, *vt = T.vt, *e = T.e;
    const float *qrow = a.qkv + (size_t)b * stride + h * hd;
    const float *krow = a.qkv + (size_t)b * stride + a.qd + gk * hd;
    const float *vrow = krow + a.kvd;

    bn_cp_row(qs, qrow, hd);
    bn_cp_row(ks, krow, hd);
    bn_cp_row(vs, vrow, hd);
    if (!prefetched)
        bn_attn_fetch(a, L, T, b, h, p, 0, n < tk ? n : tk);
    bn_cp_wait();
    bn_sync();
    /* RoPE of pair i (S's table), and the thread that rotates k's pair
     * stores it and v's pair: into the cache row (one block per kv head)
     * and into the tile's row p */
    const size_t crow = ((size_t)b * a.ctx + p) * (size_t)L.kvld;
    const bool store = h % grp == 0, intile = p < tk;
    for (int i = tid; i < hd / 2; i += BN_THREADS) {
        const int i0 = (int)lk_rope_i0(i, a.rope_il), i1 = (int)lk_rope_i1(i, hd, a.rope_il);
        const float s = S.rsin[b][i], c = S.rcos[b][i];
        float y0, y1;
        lk_rope_rotate(qs[i0], qs[i1], s, c, &y0, &y1);
        qs[i0] = lk_canon_f32(y0), qs[i1] = lk_canon_f32(y1);
        lk_rope_rotate(ks[i0], ks[i1], s, c, &y0, &y1);
        y0 = lk_canon_f32(y0), y1 = lk_canon_f32(y1);
        ks[i0] = y0, ks[i1] = y1;
        const float v0 = vs[i0], v1 = vs[i1];
        if (store) {
            L.kv[crow + gk * hd + i0] = y0, L.kv[crow + gk * hd + i1] = y1;
            L.kv[crow + a.kvd + gk * hd + i0] = v0, L.kv[crow + a.kvd + gk * hd + i1] = v1;
        }
        if (intile) {
            kt[p * ts + i0] = y0, kt[p * ts + i1] = y1;
            vt[p * hd + i0] = v0, vt[p * hd + i1] = v1;
        }
    }
    bn_sync();

    /* a later tile of a long context (the first one is in place) */
    auto tile = [&](int j0, int nt) {
        bn_sync();
        bn_attn_fetch(a, L, T, b, h, p, j0, nt);
        bn_cp_wait();
        if (p >= j0 && p < j0 + nt)
            for (int i = tid; i < hd; i += BN_THREADS) {
                kt[(p - j0) * ts + i] = ks[i];
                vt[(p - j0) * hd + i] = vs[i];
            }
        bn_sync();
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
    bn_sync();
    /* section 12.3's chunks of 64 keys.  m = the maximum of every score
     * (lk_maximum's, exact and the same in any order, so also the maximum
     * of the chunk maxima) as an unsigned maximum of keys (lk_order_key):
     * one redux a warp and one over the warps' keys */
    unsigned mk = lk_order_key(-INFINITY); /* the identity */
    for (int j = tid; j < n; j += BN_THREADS)
        mk = max(mk, lk_order_key(e[j]));
    mk = __reduce_max_sync(LK_FULL_MASK, mk);
    if ((tid & 31) == 0)
        S.redk[tid >> 5] = mk;
    /* m_c, one warp a chunk */
    const int lane = tid & 31, nc = (n + 63) / 64;
    for (int c = tid >> 5; c < nc; c += BN_WARPS) {
        const int j = c * 64 + lane;
        unsigned ck = lk_order_key(-INFINITY);
        if (j < n)
            ck = max(ck, lk_order_key(e[j]));
        if (j + 32 < n)
            ck = max(ck, lk_order_key(e[j + 32]));
        ck = __reduce_max_sync(LK_FULL_MASK, ck);
        if (lane == 0)
            S.cm[c] = lk_order_key_value(ck);
    }
    bn_sync();
    mk = __reduce_max_sync(LK_FULL_MASK, (tid & 31) < BN_WARPS ? S.redk[tid & 31] : 0u);
    const float m = lk_order_key_value(mk);
    /* e_j = exp(s_j - m_c) */
    for (int j = tid; j < n; j += BN_THREADS)
        e[j] = lk_cu_exp(__fsub_rn(e[j], S.cm[j >> 6]));
    bn_sync();
    /* l_c: the chunk's 64 lanes (lane l: e_l, then + e_{l+32}), the
     * butterfly; w_c = exp(m_c - m) */
    for (int c = tid >> 5; c < nc; c += BN_WARPS) {
        const int j = c * 64 + lane;
        float x = __fadd_rn(j < n ? e[j] : -0.0f, j + 32 < n ? e[j + 32] : -0.0f);
#pragma unroll
        for (int s = 16; s >= 1; s >>= 1)
            x = __fadd_rn(x, __shfl_down_sync(LK_FULL_MASK, x, s));
        if (lane == 0) {
            S.cl[c] = x;
            S.cw[c] = lk_cu_exp(__fsub_rn(S.cm[c], m));
        }
    }
    bn_sync();
    /* o_c,i = the fma chain of e_j v_j,i over chunk c, added to o as
     * o + o_c,i w_c in chunk order (a chunk of -Inf scores only is
     * skipped); l likewise; a long context's first tile again, then the
     * others (a short one's is in place).  Tiles of 32 or 64 keys: a chunk
     * starts at a tile's start. */
    auto skip = [&](int c) { return S.cm[c] == -INFINITY && m != -INFINITY; };
    float acc = 0.0f, o = -0.0f;
#pragma unroll 1
    for (int j0 = 0; j0 < n; j0 += tk) {
        const int nt = n - j0 < tk ? n - j0 : tk;
        if (n > tk)
            tile(j0, nt);
        if (j0 > 0 && j0 % 64 == 0) { /* the next chunk */
            const int c = j0 / 64 - 1;
            if (!skip(c))
                o = __fadd_rn(o, __fmul_rn(acc, S.cw[c]));
            acc = 0.0f;
        }
        if (tid < hd) /* no branch inside: the loads run ahead of the chain */
#pragma unroll 8
            for (int jj = 0; jj < nt; jj++)
                acc = __fmaf_rn(e[j0 + jj], vt[jj * hd + tid], acc);
    }
    if (tid < hd) {
        const int cl = nc - 1;
        if (!skip(cl))
            o = __fadd_rn(o, __fmul_rn(acc, S.cw[cl]));
        float l = -0.0f;
        for (int c = 0; c < nc; c++)
            if (!skip(c))
                l = __fadd_rn(l, __fmul_rn(S.cl[c], S.cw[c]));
        const float r = __fdiv_rn(1.0f, l);
        a.att[(size_t)b * a.qd + h * hd + tid] = lk_canon_f32(__fmul_rn(o, r));
    }
    bn_sync();
}

/* The profile over every block of the launch: each adds its buckets to
 * bn_prof_*, the last one to finish prints the mean and the largest a
 * layer, then resets the sums for the next launch. */
__device__ __noinline__ void bn_profile_report(const bn_sm &S, int nl, int nb)
{
    /* the SM's cycles per ns over the launch turn the buckets into ns */
    const double f = (double)(clock64() - S.cyc0) / (double)(lk_global_ns() - S.ns0);
    atomicAdd(&bn_prof_mhz, (unsigned long long)(f * 1e3));
    for (int k = 0; k < BN_PB; k++) {
        const unsigned long long ns = (unsigned long long)((double)S.tp[k] / f);
        atomicAdd(&bn_prof_sum[k], ns);
        atomicMax(&bn_prof_max[k], ns);
    }
    __threadfence();
    if (atomicAdd(&bn_prof_done, 1u) != gridDim.x - 1)
        return;
    __threadfence();
    double mean[BN_PB], mx[BN_PB]; /* BN_PB == 9 below */
    for (int k = 0; k < BN_PB; k++) {
        mean[k] = (double)atomicExch(&bn_prof_sum[k], 0ull) / gridDim.x / nl * 1e-3;
        mx[k] = (double)atomicExch(&bn_prof_max[k], 0ull) / nl * 1e-3;
    }
    atomicExch(&bn_prof_done, 0u);
    printf("lk_bitnet_decode profile: SM clock %.0f MHz (mean over blocks)\n",
           (double)atomicExch(&bn_prof_mhz, 0ull) / gridDim.x);
    printf("lk_bitnet_decode profile B=%d, %d layers, %d blocks, us a layer, mean (max over "
           "blocks): other %.2f (%.2f) weight-waits %.2f (%.2f) rows-in %.2f (%.2f) lane-sums "
           "%.2f (%.2f) quantise %.2f (%.2f) dots %.2f (%.2f) barriers %.2f (%.2f) attention "
           "%.2f (%.2f) arrive %.2f (%.2f)\n",
           nb, nl, (int)gridDim.x, mean[0], mx[0], mean[1], mx[1], mean[2], mx[2], mean[3], mx[3],
           mean[4], mx[4], mean[5], mx[5], mean[6], mx[6], mean[7], mx[7], mean[8], mx[8]);
}

#endif /* LK_BN_BODY */

/* Shared memory: [the weight ring | the quantised planes, NB x kp bytes |
 * the union: the norm's f32 rows and weight, or one attention item's
 * buffers].  Warps 0-15 compute, warp 16 streams the weights. */
template <int NB>
__global__ void __launch_bounds__(BN_BLOCK, 1) bn_kernel(const __grid_constant__ bn_kargs ka)
{
#if LK_BN_BODY
    __shared__ __align__(8) uint64_t bars[BN_SLOTS]; /* a load's bytes have landed */
    __shared__ bn_sm S;
    /* the arguments, read everywhere: through a reference a parameter is
     * read with generic loads, an L2 round trip on each of the phase
     * ends' critical paths; from shared memory a few cycles */
    __shared__ __align__(16) bn_kargs A;
    extern __shared__ __align__(1024) unsigned char bn_smem[];
    const int tid = threadIdx.x;
    for (int i = tid; i < (int)(sizeof(bn_kargs) / 4); i += BN_BLOCK)
        ((uint32_t *)&A)[i] = ((const uint32_t *)&ka)[i];
    const bn_kargs &a = A;
    unsigned char *ring = bn_smem;
    int32_t *X = (int32_t *)(bn_smem + ka.ring);
    float *U = (float *)(bn_smem + ka.ring + NB * (ka.kp + 512));
    const uint32_t full = lk_smem_addr(bars);

    if (tid == 0) {
        for (int s = 0; s < BN_SLOTS; s++)
            lk_mbar_init(full + 8 * s, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if (tid < NB)
        S.pos[tid] = ka.pos[tid * ka.ldp];
    if (tid < BN_LOADS) { /* the block's rows, the ring's sizes (bn_place) */
        const bn_kind K = bn_kind_of(ka, tid);
        int r0, r1;
        bn_split(K.n, blockIdx.x, gridDim.x, r0, r1);
        S.kr0[tid] = r0;
        S.kn[tid] = r1 - r0;
        S.szk[tid] = (uint32_t)bn_round((r1 - r0) * K.pitch, 128);
    }
    /* The profile's switch, before the __syncthreads below: bn_mark tests
     * it in thread 0 alone, but the compiler loads it in every thread (a
     * shared load is safe to speculate; bn_slab's first mark shares one
     * 8-byte load with S.szk[0]), so written after that barrier it raced
     * with the first phase's reads in the other compute threads, a race
     * racecheck reports (docs/internals/bitnet-decode-sync.md).  Nothing
     * writes it again. */
    if (tid == 0)
        S.prof = ka.prof;
    /* every block checks the positions (a bad one can only come inside a
     * captured graph; the core checks them otherwise): one outside
     * [0, ctx) stops every block before anything is written, and the
     * queue's record makes the next sync report it (set 3) */
    if (lk_index_first_bad(ka.pos, ka.ldp, NB, ka.ctx, 3, ka.rec) >= 0)
        return; /* (its __syncthreads also made A, S.prof and the mbarriers visible) */

    if (tid >= BN_THREADS) { /* the weight warp */
        bn_producer(a, S, lk_smem_addr(ring), full);
        return;
    }
    int freed_loads = 0; /* the weight loads the compute side is done with */
    if (tid == 0) {
        for (int k = 0; k < BN_PB; k++)
            S.tp[k] = 0;
        S.tmark = S.cyc0 = a.prof ? clock64() : 0;
        S.ns0 = a.prof ? lk_global_ns() : 0;
    }
    bn_scales(a, a.L[0], 0, S);
    bn_norm_weight_fetch(a, NB, a.L[0].an, a.dim, U);
    float *const wbuf = U + NB * a.np; /* the norm weights' buffer (bn_norm_weight_fetch) */
    {   /* the block's rows of x, which it alone updates (o and down: dim rows) */
        const int r0 = S.kr0[1], nr = S.kn[1];
        for (int i = tid; i < NB * nr; i += BN_THREADS)
            S.xsh[i / nr][i % nr] = a.x[(i / nr) * a.ldx + r0 + i % nr];
    }
    {   /* RoPE's table for this step's positions */
        const float lt = lk_logf(a.theta);
        const int hp = a.hd / 2;
        for (int i = tid; i < NB * hp; i += BN_THREADS)
            lk_rope_sincos(S.pos[i / hp], lk_rope_inv_freq(i % hp, a.hd, lt), &S.rsin[i / hp][i % hp],
                           &S.rcos[i / hp][i % hp]);
    }
    int ld = 0;          /* weight loads so far */
    uint32_t hoff = 0;   /* the ring's placement of the next load group (bn_place_off) */
    unsigned target = 0; /* the barrier thread's: the arrivals the next barrier waits for */

    for (int l = 0; l < a.nl; l++) {
        const bn_layer &L = a.L[l];
        const bool last = l + 1 == a.nl;

        /* 1: x -> QKV */
        {
            const uint32_t off = bn_place_off(a, S, ld, hoff);
            const uint8_t *w = bn_slab(S, full, ring, off, ld);
            bn_norm<NB>(a, a.x, a.ldx, a.dim, L.an ? wbuf : nullptr, U, X, S);
            bn_rows<NB, 0>(a, w, nullptr, X, S);
        }
        bn_phase_end(a, freed_loads, S, 1, true, BN_P_DOTS, &L, 1, target);
        if (blockIdx.x < NB * a.nh)
            bn_attn_prefetch(a, L, U, S);
        bn_phase_wait(a, S, target);
        ld++;

        /* 2: RoPE, the cache row, attention -> ATT */
        for (int it = blockIdx.x; it < NB * a.nh; it += gridDim.x)
            bn_attention(a, L, it / a.nh, it % a.nh, S.pos[it / a.nh], it == (int)blockIdx.x, U, S);
        bn_phase_end(a, freed_loads, S, 0, true, BN_P_ATTN, nullptr, 0, target);
        bn_norm_weight_fetch(a, NB, L.asn, a.qd, U);
        bn_phase_wait(a, S, target);

        /* 3: ATT -> x += o */
        {
            const uint32_t off = bn_place_off(a, S, ld, hoff);
            const uint8_t *w = bn_slab(S, full, ring, off, ld);
            bn_norm<NB>(a, a.att, a.qd, a.qd, L.asn ? wbuf : nullptr, U, X, S);
            bn_rows<NB, 1>(a, w, nullptr, X, S);
        }
        bn_phase_end(a, freed_loads, S, 1, true, BN_P_DOTS, &L, 2, target);
        bn_norm_weight_fetch(a, NB, L.fn, a.dim, U);
        bn_phase_wait(a, S, target);
        ld++;

        /* 4: x -> G = relu(gate)^2 * up */
        {
            const uint32_t off = bn_place_off(a, S, ld, hoff); /* the group does not wrap */
            const uint8_t *wg = bn_slab(S, full, ring, off, ld);
            const uint8_t *wu = bn_slab(S, full, ring, off + S.szk[2], ld + 1);
            bn_norm<NB>(a, a.x, a.ldx, a.dim, L.fn ? wbuf : nullptr, U, X, S);
            bn_rows<NB, 2>(a, wg, wu, X, S);
        }
        bn_phase_end(a, freed_loads, S, 2, true, BN_P_DOTS, &L, 4, target);
        bn_norm_weight_fetch(a, NB, L.fsn, a.ffn, U);
        bn_phase_wait(a, S, target);
        ld += 2;

        /* 5: G -> x += down */
        {
            const uint32_t off = bn_place_off(a, S, ld, hoff);
            const uint8_t *w = bn_slab(S, full, ring, off, ld);
            bn_norm<NB>(a, a.g, a.ffn, a.ffn, L.fsn ? wbuf : nullptr, U, X, S);
            bn_rows<NB, 4>(a, w, nullptr, X, S);
        }
        bn_phase_end(a, freed_loads, S, 1, !last, BN_P_DOTS,
                     last ? nullptr : &a.L[l + 1], 0, target);
        if (!last) {
            bn_norm_weight_fetch(a, NB, a.L[l + 1].an, a.dim, U);
            bn_phase_wait(a, S, target);
        }
        ld++;
    }
    if (tid == 0 && S.prof)
        bn_profile_report(S, a.nl, NB);
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
        if (L.kv.ld > INT_MAX)
            return snprintf(why, wl, "layer %lld's cache rows are %lld floats apart (at most %d)",
                            (long long)l, (long long)L.kv.ld, INT_MAX), false;
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
    slab[2] += slab[3]; /* the gate and up rows together */
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
    const int norm_floats = (nbatch + 1) * k.np; /* the rows and the norm's weight */
    const size_t fixed = (size_t)nbatch * (k.kp + 512) +
                         (size_t)bn_round(std::max(attn_floats, norm_floats), 4) * 4;
    const size_t dmax = bn_info[ord].dyn_max;
    if (fixed + (size_t)slab_max > dmax)
        return snprintf(why, wl, "a block's share of a projection (%d bytes) does not fit shared "
                        "memory", slab_max), false;
    k.ring = (int)((dmax - fixed) / 1024 * 1024);
    /* LOCKSTEP_CUDA_BITNET_RING=BYTES: a smaller ring, down to the largest
     * load group, so that small shapes reuse its bytes within a launch (a
     * test's way to put the frees' order before compute-sanitizer; the
     * full ring of a small model is never reused) */
    const char *re = getenv("LOCKSTEP_CUDA_BITNET_RING");
    if (re && *re) {
        const long v = bn_round((int)std::min(std::max(strtol(re, NULL, 10), 1L), (long)k.ring), 128);
        k.ring = std::min(k.ring, std::max((int)v, slab_max));
    }
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

/* Projection k of a layer (bit k of the layer's srow: a scale per row). */
bn_proj bn_proj_of(const lk_bitnet_weight_args &w, int k, int &srow)
{
    const lk_cuda_weights *h = (const lk_cuda_weights *)w.prepared;
    bn_proj p;
    p.w = (const uint8_t *)h->w;
    p.s = (const float *)h->scale;
    if (h->scale_n != 1)
        srow |= 1 << k;
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
             cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, bn_kernel_for(nb), BN_BLOCK,
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
                D.srow = 0;
                D.qkv = bn_proj_of(S.qkv, 0, D.srow), D.o = bn_proj_of(S.o, 1, D.srow);
                D.gu = bn_proj_of(S.gate_up, 2, D.srow), D.dn = bn_proj_of(S.down, 3, D.srow);
                D.an = (const float *)S.attn_norm.data, D.asn = (const float *)S.attn_sub_norm.data;
                D.fn = (const float *)S.ffn_norm.data, D.fsn = (const float *)S.ffn_sub_norm.data;
                D.kv = (float *)S.kv.data;
                D.kvld = (int)S.kv.ld;
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
            cfg.blockDim = dim3(BN_BLOCK);
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
