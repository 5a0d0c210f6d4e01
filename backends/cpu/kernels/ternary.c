/* Lockstep CPU kernels: the LK_T2 format (docs/formats.md) and the
 * ternary GEMM (docs/numerics.md section 9).
 *
 * The GEMM reads the canonical packed format as it is: one vector of
 * packed bytes holds 4 * TQ_VB codes, and (bytes >> 2j) & 3 gives the
 * codes of k = 4i + j, i < TQ_VB, as unsigned bytes.  x is rearranged once
 * per call to match (a group of TQ_G values becomes four vectors, value
 * 4i + j in vector j, byte i), zero past K, and summed: with codes 0..3,
 *     acc = sum x_k * (code_k - 1) = sum x_k * code_k - sum x_k.
 * The unsigned-by-signed byte products are what vpdpbusd (VNNI) and
 * vpmaddubsw (AVX2) multiply; the AVX2 bound that keeps vpmaddubsw from
 * saturating is in avx2/vec.h.  Every intermediate is an int32 that wraps
 * modulo 2^32 (vector adds never trap or saturate): the final value is
 * exact because the true acc lies in the int32 range (the core enforces
 * K <= LK_TERNARY_MAX_K), even where sum x_k * code_k alone would not. */
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/prepared.h"
#include "backends/cpu/kernels/qgemm.h"
#include "backends/cpu/kernels/t2.h"
#include "backends/host.h"

#define TQ_VB (4 * VW)   /* bytes per vector */
#define TQ_G (4 * TQ_VB) /* codes per vector of packed bytes */

/* ---- pack and unpack ---- */

typedef struct t2_job {
    const lk_pack_args *p;
    int bad; /* some value is not -1, 0 or 1 (written by any thread) */
} t2_job;

static void t2_check_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    t2_job *j = (t2_job *)v;
    const lk_tensor *w = &j->p->src;
    const vi one = vi_set1_8(1);
    (void)tid;
    for (int64_t r = r0; r < r1 && !j->bad; r++) {
        const int8_t *s = (const int8_t *)w->data + r * w->ld;
        int64_t c = 0;
        for (; c + TQ_VB <= w->cols; c += TQ_VB) /* v + 1 in 0..2 as unsigned bytes */
            if (!vi_bytes_le(vi_add8(vi_load(s + c), one), 2))
                break;
        for (; c < w->cols; c++)
            if (s[c] < -1 || s[c] > 1) {
                __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
                break;
            }
    }
}

static void t2_pack_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const lk_pack_args *p = ((const t2_job *)v)->p;
    (void)tid;
    for (int64_t r = r0; r < r1; r++)
        t2_pack_row((const int8_t *)p->src.data + r * p->src.ld, p->src.cols,
                    lk_t2_row(&p->dst, r));
}

LK_CPU_DEFINE(ternary_pack, lk_pack_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_tensor *w = &args->src;
    t2_job j = {args, 0};
    const int nt = lk_cpu_threads_for(q, (double)w->rows * (double)w->cols, w->rows);
    /* every value is checked before the first byte is written */
    lk_cpu_for(nt, w->rows, t2_check_rows, &j);
    if (j.bad)
        for (int64_t r = 0; r < w->rows; r++)
            for (int64_t c = 0; c < w->cols; c++) {
                int v = ((const int8_t *)w->data)[r * w->ld + c];
                if (v < -1 || v > 1)
                    return lk_kernel_error(LK_ERR_INVALID_VALUE,
                                           "lk_ternary_pack: w[%lld, %lld] = %d is not -1, 0 or 1",
                                           (long long)r, (long long)c, v);
            }
    lk_cpu_for(nt, w->rows, t2_pack_rows, &j);
    return LK_OK;
}

static void t2_unpack_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const lk_pack_args *p = (const lk_pack_args *)v;
    (void)tid;
    for (int64_t r = r0; r < r1; r++)
        t2_unpack_row(lk_t2_row(&p->src, r), p->src.cols,
                      (int8_t *)p->dst.data + r * p->dst.ld);
}

LK_CPU_DEFINE(ternary_unpack, lk_pack_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_tensor *w = &args->src;
    lk_cpu_for(lk_cpu_threads_for(q, (double)w->rows * (double)w->cols, w->rows), w->rows,
               t2_unpack_rows, (void *)args);
    return LK_OK;
}

/* ---- the GEMM ---- */

typedef struct tq_ctx {
    const int8_t *xp;    /* M x kp, x rearranged by groups, zero past K */
    const int32_t *xsum; /* sum_k x[m, k] */
    int64_t kp;          /* K rounded up to TQ_G */
    int64_t groups;      /* kp / TQ_G */
    int64_t full;        /* groups whose packed bytes lie inside every row */
    int64_t rowbytes;    /* ceil(K / 4) */
    int il;              /* prepared weights: rows interleaved by QG_NT (prepared.h) */
} tq_ctx;

#if LK_T2_IL != QG_NT
#error "prepared ternary blocks must be a GEMM tile's rows"
#endif

/* A GEMM tile reads QG_NT weight rows in short interleaved runs, too short
 * for the hardware prefetchers to catch on the first pass: ask for what
 * comes this far ahead. */
#define TQ_PREFETCH 2048

/* The GEMV streams rows in memory order; the hardware prefetcher follows,
 * and where it pays (lk_cpu_prefetch) a software prefetch this far ahead
 * keeps more lines in flight. */
#define TQ_ROW_PREFETCH 4096

/* The four code vectors of one vector of packed bytes. */
#define TQ_DECODE(b, c0, c1, c2, c3)                                           \
    const vi c0 = vi_and(b, three), c1 = vi_and(vi_srli16(b, 2), three);       \
    const vi c2 = vi_and(vi_srli16(b, 4), three), c3 = vi_and(vi_srli16(b, 6), three)

/* One group of a GEMM tile (mt x nt): the packed bytes of weight row n are
 * at w[n]; the rearranged x of tile row m at x + m * kp. */
LK_INLINE void tq_group(const int mt, const int nt, vi acc[QG_MT][QG_NT],
                        const uint8_t *const *w, const int8_t *x, int64_t kp, int prefetch)
{
    const vi three = vi_set1_8(3);
LK_UNROLL(4)
    for (int n = 0; n < nt; n++) {
        if (prefetch)
            __builtin_prefetch(w[n] + TQ_PREFETCH);
        const vi b = vi_load(w[n]);
        TQ_DECODE(b, c0, c1, c2, c3);
LK_UNROLL(4)
        for (int m = 0; m < mt; m++) {
            const int8_t *xm = x + m * kp;
            vi_dot4_codes(&acc[m][n], &acc[m][n], c0, vi_load(xm), c1, vi_load(xm + TQ_VB), c2,
                          vi_load(xm + 2 * TQ_VB), c3, vi_load(xm + 3 * TQ_VB));
        }
    }
}

/* One group of one row into two accumulators. */
LK_INLINE void tq_group1(vi *a0, vi *a1, const uint8_t *w, const int8_t *x)
{
    const vi three = vi_set1_8(3);
    const vi b = vi_load(w);
    TQ_DECODE(b, c0, c1, c2, c3);
    vi_dot4_codes(a0, a1, c0, vi_load(x), c1, vi_load(x + TQ_VB), c2, vi_load(x + 2 * TQ_VB), c3,
                  vi_load(x + 3 * TQ_VB));
}

#if LK_VEC_VNNI
/* Below this K the GEMV masks the codes in place instead of shifting them
 * down: slot j of a byte is then 4^j * code, at most 192, still an
 * unsigned byte for vpdpbusd, and the slot's sum 4^j * sum code * x is at
 * most 64 * 3 * 128 * K / 4 < 2^31 in every lane, so one arithmetic shift
 * per slot at the end divides it back exactly.  One shift per slot per row
 * instead of one per vector. */
#define TQ_SCALED_MAX_K (1 << 18)

LK_INLINE void tq_group1s(vi s[4], const uint8_t *w, const int8_t *x)
{
    const vi b = vi_load(w);
    s[0] = vi_dot_u8s8(s[0], vi_and(b, vi_set1_8(0x03)), vi_load(x));
    s[1] = vi_dot_u8s8(s[1], vi_and(b, vi_set1_8(0x0c)), vi_load(x + TQ_VB));
    s[2] = vi_dot_u8s8(s[2], vi_and(b, vi_set1_8(0x30)), vi_load(x + 2 * TQ_VB));
    s[3] = vi_dot_u8s8(s[3], vi_and(b, vi_set1_8((int8_t)0xc0)), vi_load(x + 3 * TQ_VB));
}

static int32_t tq_row_scaled(const tq_ctx *c, const uint8_t *w, const int8_t *x, int32_t xsum)
{
    vi s[4] = {vi_zero(), vi_zero(), vi_zero(), vi_zero()};
    vi t[4] = {vi_zero(), vi_zero(), vi_zero(), vi_zero()};
    int64_t g = 0;
    /* four groups (four lines) per iteration: on Zen 4, from memory, about
     * twice as fast as two when run back to back (docs/internals/cpu-kernels.md); the sums
     * are the same integers in any order. */
    for (; g + 4 <= c->full; g += 4) {
        if (lk_cpu_prefetch) {
            __builtin_prefetch(w + g * TQ_VB + TQ_ROW_PREFETCH);
            __builtin_prefetch(w + (g + 1) * TQ_VB + TQ_ROW_PREFETCH);
            __builtin_prefetch(w + (g + 2) * TQ_VB + TQ_ROW_PREFETCH);
            __builtin_prefetch(w + (g + 3) * TQ_VB + TQ_ROW_PREFETCH);
        }
        tq_group1s(s, w + g * TQ_VB, x + g * TQ_G);
        tq_group1s(t, w + (g + 1) * TQ_VB, x + (g + 1) * TQ_G);
        tq_group1s(s, w + (g + 2) * TQ_VB, x + (g + 2) * TQ_G);
        tq_group1s(t, w + (g + 3) * TQ_VB, x + (g + 3) * TQ_G);
    }
    for (; g < c->full; g++)
        tq_group1s(s, w + g * TQ_VB, x + g * TQ_G);
    if (g < c->groups) { /* the row's last bytes, copied: no read past it */
        uint8_t tail[TQ_VB];
        memset(tail, 0, sizeof tail);
        memcpy(tail, w + g * TQ_VB, (size_t)(c->rowbytes - g * TQ_VB));
        tq_group1s(t, tail, x + g * TQ_G);
    }
    vi a = vi_add(s[0], t[0]);
    a = vi_add(a, vi_srai(vi_add(s[1], t[1]), 2));
    a = vi_add(a, vi_srai(vi_add(s[2], t[2]), 4));
    a = vi_add(a, vi_srai(vi_add(s[3], t[3]), 6));
    return (int32_t)((uint32_t)vi_hsum(a) - (uint32_t)xsum);
}
#endif

#ifdef LK_VEC_MADDUBS16
/* Without VNNI (AVX2): vpmaddubsw's pair sums stay in int16 for four
 * groups and are widened once, and the codes are decoded with one shift:
 * with h = b >> 4 (16-bit lanes; the low nibble of each byte is then
 * that byte's high nibble), slots 0 and 2 are b & 3 and h & 3 (codes as
 * they are), slots 1 and 3 are b & 0x0c and h & 0x0c (4 * code).  Bounds,
 * for codes up to 3 and |x| <= 128: a pair sum is at most 2 * 3 * 128 =
 * 768 (lo) or 4 * 768 = 3072 (hi), so vpmaddubsw never saturates; over
 * four groups lo sums at most 8 * 768 = 6144 and hi at most 8 * 3072 =
 * 24576 < 2^15; hi is a multiple of 4, so the arithmetic shift by 2 is
 * exact, and lo + hi / 4 is at most 12288: no int16 step wraps before
 * vpmaddwd widens to int32. */
#define TQ_FLUSH 4

LK_INLINE void tq_group1m(vi *lo, vi *hi, const uint8_t *w, const int8_t *x)
{
    const vi b = vi_load(w), h = vi_srli16(b, 4);
    const vi m3 = vi_set1_8(0x03), mc = vi_set1_8(0x0c);
    *lo = vi_add16(*lo, vi_maddubs16(vi_and(b, m3), vi_load(x)));
    *hi = vi_add16(*hi, vi_maddubs16(vi_and(b, mc), vi_load(x + TQ_VB)));
    *lo = vi_add16(*lo, vi_maddubs16(vi_and(h, m3), vi_load(x + 2 * TQ_VB)));
    *hi = vi_add16(*hi, vi_maddubs16(vi_and(h, mc), vi_load(x + 3 * TQ_VB)));
}

static int32_t tq_row_m16(const tq_ctx *c, const uint8_t *w, const int8_t *x, int32_t xsum)
{
    vi a = vi_zero(), lo = vi_zero(), hi = vi_zero(), lo2 = vi_zero(), hi2 = vi_zero();
    int64_t g = 0;
    for (; g + TQ_FLUSH <= c->full; g += TQ_FLUSH) {
        if (lk_cpu_prefetch) {
            __builtin_prefetch(w + g * TQ_VB + TQ_ROW_PREFETCH);
            __builtin_prefetch(w + (g + 2) * TQ_VB + TQ_ROW_PREFETCH);
        }
        tq_group1m(&lo, &hi, w + g * TQ_VB, x + g * TQ_G);
        tq_group1m(&lo2, &hi2, w + (g + 1) * TQ_VB, x + (g + 1) * TQ_G);
        tq_group1m(&lo, &hi, w + (g + 2) * TQ_VB, x + (g + 2) * TQ_G);
        tq_group1m(&lo2, &hi2, w + (g + 3) * TQ_VB, x + (g + 3) * TQ_G);
        a = vi_widen16(a, vi_add16(vi_add16(lo, lo2), vi_srai16(vi_add16(hi, hi2), 2)));
        lo = hi = lo2 = hi2 = vi_zero();
    }
    /* at most TQ_FLUSH - 1 whole groups and the tail: one more flush */
    for (; g < c->full; g++)
        tq_group1m(&lo, &hi, w + g * TQ_VB, x + g * TQ_G);
    if (g < c->groups) { /* the row's last bytes, copied: no read past it */
        uint8_t tail[TQ_VB];
        memset(tail, 0, sizeof tail);
        memcpy(tail, w + g * TQ_VB, (size_t)(c->rowbytes - g * TQ_VB));
        tq_group1m(&lo2, &hi2, tail, x + g * TQ_G);
    }
    a = vi_widen16(a, vi_add16(vi_add16(lo, lo2), vi_srai16(vi_add16(hi, hi2), 2)));
    return (int32_t)((uint32_t)vi_hsum(a) - (uint32_t)xsum);
}
#endif

/* GEMV: a whole row at a time, in memory order, so that the weights are
 * one stream the hardware prefetcher follows at full bandwidth; two
 * groups in flight, two accumulators each, keep the vpdpbusd chains short. */
static int32_t tq_row(const tq_ctx *c, const uint8_t *w, const int8_t *x, int32_t xsum)
{
#if LK_VEC_VNNI
    if (c->kp <= TQ_SCALED_MAX_K)
        return tq_row_scaled(c, w, x, xsum);
#endif
#ifdef LK_VEC_MADDUBS16
    return tq_row_m16(c, w, x, xsum);
#endif
    vi a0 = vi_zero(), a1 = vi_zero(), a2 = vi_zero(), a3 = vi_zero();
    int64_t g = 0;
    for (; g + 2 <= c->full; g += 2) {
        if (lk_cpu_prefetch) {
            __builtin_prefetch(w + g * TQ_VB + TQ_ROW_PREFETCH);
            __builtin_prefetch(w + (g + 1) * TQ_VB + TQ_ROW_PREFETCH);
        }
        tq_group1(&a0, &a1, w + g * TQ_VB, x + g * TQ_G);
        tq_group1(&a2, &a3, w + (g + 1) * TQ_VB, x + (g + 1) * TQ_G);
    }
    if (g < c->full) {
        tq_group1(&a0, &a1, w + g * TQ_VB, x + g * TQ_G);
        g++;
    }
    if (g < c->groups) { /* the row's last bytes, copied: no read past it */
        uint8_t tail[TQ_VB];
        memset(tail, 0, sizeof tail);
        memcpy(tail, w + g * TQ_VB, (size_t)(c->rowbytes - g * TQ_VB));
        tq_group1(&a2, &a3, tail, x + g * TQ_G);
    }
    vi s = vi_add(vi_add(a0, a1), vi_add(a2, a3));
    return (int32_t)((uint32_t)vi_hsum(s) - (uint32_t)xsum);
}

/* ---- GEMV on prepared (interleaved) weights ---- */

/* Software prefetches for one group of a block: its QG_NT vectors. */
LK_INLINE void tq_prefetch_block(const uint8_t *p)
{
    for (int i = 0; i < QG_NT * TQ_VB; i += 64)
        __builtin_prefetch(p + i + TQ_ROW_PREFETCH);
}

#if LK_VEC_VNNI
/* One row of a block into two accumulators: slots 0 and 2 as codes (b & 3,
 * h & 3 with h = b >> 4), slots 1 and 3 as 4 * code (b & 0x0c, h & 0x0c),
 * as tq_group1m splits them.  A lane of `hi` gains at most 2 * 4 * 3 *
 * 128 * 4 per group, so K <= TQ_SCALED_MAX_K keeps it below 2^31 and the
 * one shift at the end exact. */
#define TQ_ROW2(b, lo, hi)                                              \
    do {                                                                \
        const vi h_ = vi_srli16(b, 4);                                  \
        lo = vi_dot_u8s8(vi_dot_u8s8(lo, vi_and(b, m3), x0), vi_and(h_, m3), x2); \
        hi = vi_dot_u8s8(vi_dot_u8s8(hi, vi_and(b, mc), x1), vi_and(h_, mc), x3); \
    } while (0)

#define TQ_ROW2_OUT(r, lo, hi) \
    out[r] = (int32_t)((uint32_t)vi_hsum(vi_add(lo, vi_srai(hi, 2))) - (uint32_t)xsum)

/* The QG_NT rows of one block: each vector of x loaded once for all of
 * them.  Named accumulators, two per row, and the prefetch decided outside
 * the loop: with an array of sixteen, or a branch in the loop, GCC spilled
 * accumulators and reloaded x for every row. */
LK_INLINE void tq_block_vnni(const tq_ctx *c, const uint8_t *blk, const int8_t *x, int32_t xsum,
                             int32_t *out, const int prefetch)
{
    vi l0 = vi_zero(), h0 = vi_zero(), l1 = vi_zero(), h1 = vi_zero();
#if QG_NT == 4
    vi l2 = vi_zero(), h2 = vi_zero(), l3 = vi_zero(), h3 = vi_zero();
#endif
    const vi m3 = vi_set1_8(0x03), mc = vi_set1_8(0x0c);
    const uint8_t *wg = blk;
    const int8_t *xg = x;
    for (int64_t g = 0; g < c->groups; g++, wg += QG_NT * TQ_VB, xg += TQ_G) {
        if (prefetch)
            tq_prefetch_block(wg);
        const vi x0 = vi_load(xg), x1 = vi_load(xg + TQ_VB), x2 = vi_load(xg + 2 * TQ_VB);
        const vi x3 = vi_load(xg + 3 * TQ_VB);
        TQ_ROW2(vi_load(wg), l0, h0);
        TQ_ROW2(vi_load(wg + TQ_VB), l1, h1);
#if QG_NT == 4
        TQ_ROW2(vi_load(wg + 2 * TQ_VB), l2, h2);
        TQ_ROW2(vi_load(wg + 3 * TQ_VB), l3, h3);
#endif
    }
    TQ_ROW2_OUT(0, l0, h0);
    TQ_ROW2_OUT(1, l1, h1);
#if QG_NT == 4
    TQ_ROW2_OUT(2, l2, h2);
    TQ_ROW2_OUT(3, l3, h3);
#endif
}

static void tq_block_scaled(const tq_ctx *c, const uint8_t *blk, const int8_t *x, int32_t xsum,
                            int32_t *out)
{
    if (lk_cpu_prefetch)
        tq_block_vnni(c, blk, x, xsum, out, 1);
    else
        tq_block_vnni(c, blk, x, xsum, out, 0);
}
#endif

#ifdef LK_VEC_MADDUBS16
/* The QG_NT rows of one block with tq_group1m's int16 sums (bounds above:
 * one lo and one hi per row take the TQ_FLUSH groups' eight products). */
static void tq_block_m16(const tq_ctx *c, const uint8_t *blk, const int8_t *x, int32_t xsum,
                         int32_t *out)
{
    vi a[QG_NT], lo[QG_NT], hi[QG_NT];
    for (int r = 0; r < QG_NT; r++)
        a[r] = lo[r] = hi[r] = vi_zero();
    const vi m3 = vi_set1_8(0x03), mc = vi_set1_8(0x0c);
    for (int64_t g = 0; g < c->groups; g++) {
        const uint8_t *wg = blk + g * QG_NT * TQ_VB;
        const int8_t *xg = x + g * TQ_G;
        if (lk_cpu_prefetch)
            tq_prefetch_block(wg);
        const vi x0 = vi_load(xg), x1 = vi_load(xg + TQ_VB), x2 = vi_load(xg + 2 * TQ_VB);
        const vi x3 = vi_load(xg + 3 * TQ_VB);
LK_UNROLL(4)
        for (int r = 0; r < QG_NT; r++) {
            const vi b = vi_load(wg + r * TQ_VB), h = vi_srli16(b, 4);
            lo[r] = vi_add16(lo[r], vi_maddubs16(vi_and(b, m3), x0));
            hi[r] = vi_add16(hi[r], vi_maddubs16(vi_and(b, mc), x1));
            lo[r] = vi_add16(lo[r], vi_maddubs16(vi_and(h, m3), x2));
            hi[r] = vi_add16(hi[r], vi_maddubs16(vi_and(h, mc), x3));
        }
        if (g % TQ_FLUSH == TQ_FLUSH - 1 || g + 1 == c->groups)
            for (int r = 0; r < QG_NT; r++) {
                a[r] = vi_widen16(a[r], vi_add16(lo[r], vi_srai16(hi[r], 2)));
                lo[r] = hi[r] = vi_zero();
            }
    }
    for (int r = 0; r < QG_NT; r++)
        out[r] = (int32_t)((uint32_t)vi_hsum(a[r]) - (uint32_t)xsum);
}
#endif

/* One block's QG_NT rows of a GEMV (rows past N are the layout's zeros)
 * with this ISA's block kernel; 0 where it has none (NEON: the tile's
 * group loop below serves). */
static int tq_block(const tq_ctx *c, const uint8_t *blk, const int8_t *x, int32_t xsum,
                    int32_t *out)
{
#if LK_VEC_VNNI
    if (c->kp <= TQ_SCALED_MAX_K) {
        tq_block_scaled(c, blk, x, xsum, out);
        return 1;
    }
#endif
#ifdef LK_VEC_MADDUBS16
    tq_block_m16(c, blk, x, xsum, out);
    return 1;
#else
    (void)c, (void)blk, (void)x, (void)xsum, (void)out;
    return 0;
#endif
}

LK_INLINE void tq_tile_mn(const int mt, const int nt, const qg_job *j, int64_t m0, int64_t n0,
                          int32_t *out, int64_t ldo)
{
    const tq_ctx *c = (const tq_ctx *)j->ctx;
    const lk_qgemm_args *q = j->q;
    const int64_t ldw = q->w.ld / 4;
    /* vector g of row n0 + n at w0 + n * rs + g * gs: rows of ldw bytes,
     * or (prepared) the interleaved block that n0, a multiple of QG_NT,
     * starts */
    const uint8_t *w0 = (const uint8_t *)q->w.data + n0 * ldw;
    const int64_t rs = c->il ? TQ_VB : ldw, gs = c->il ? QG_NT * TQ_VB : TQ_VB;
    const int8_t *x = c->xp + m0 * c->kp;
    if (mt == 1 && c->il) {
        int32_t r[QG_NT];
        if (tq_block(c, w0, x, c->xsum[m0], r)) {
            for (int n = 0; n < nt; n++)
                out[n] = r[n];
            return;
        }
    } else if (mt == 1) {
        for (int n = 0; n < nt; n++)
            out[n] = tq_row(c, w0 + n * ldw, x, c->xsum[m0]);
        return;
    }
    vi acc[QG_MT][QG_NT];
    for (int m = 0; m < QG_MT; m++)
        for (int n = 0; n < QG_NT; n++)
            acc[m][n] = vi_zero();
    const uint8_t *w[QG_NT];
    int64_t g = 0;
    for (; g < c->full; g++) {
        for (int n = 0; n < nt; n++)
            w[n] = w0 + n * rs + g * gs;
        tq_group(mt, nt, acc, w, x + g * TQ_G, c->kp, 1);
    }
    if (g < c->groups) { /* the last bytes of each row, copied: no read past it */
        uint8_t tail[QG_NT][TQ_VB];
        memset(tail, 0, sizeof tail);
        for (int n = 0; n < nt; n++) {
            memcpy(tail[n], w0 + n * ldw + g * TQ_VB, (size_t)(c->rowbytes - g * TQ_VB));
            w[n] = tail[n];
        }
        tq_group(mt, nt, acc, w, x + g * TQ_G, c->kp, 0);
    }
    for (int m = 0; m < mt; m++)
        for (int n = 0; n < nt; n++)
            out[m * ldo + n] =
                (int32_t)((uint32_t)vi_hsum(acc[m][n]) - (uint32_t)c->xsum[m0 + m]);
}

QG_DEFINE_TILE(tq_tile, tq_tile_mn)

/* x rearranged group by group (value 4i + j of a group to vector j, byte
 * i), and each row's sum. */
static void tq_prepare_rows(void *p, int64_t m0, int64_t m1, int tid)
{
    const qg_job *j = (const qg_job *)p;
    const tq_ctx *c = (const tq_ctx *)j->ctx;
    const lk_tensor *xt = &j->q->x;
    const int64_t k = j->q->k;
    (void)tid;
    for (int64_t m = m0; m < m1; m++) {
        const int8_t *x = (const int8_t *)xt->data + m * xt->ld;
        int8_t *d = (int8_t *)c->xp + m * c->kp;
        int32_t s = 0;
        /* The groups inside K a vector of 32-bit words at a time (byte j
         * of word i is value 4i + j; vi_store_u8 keeps each word's low
         * byte), and their sum from the words' sign-extended bytes: a GEMV
         * of a 640-row matrix is a few microseconds, and a value at a time
         * this took a sizeable part of it. */
        const vi lo8 = vi_set1(0xff);
        vi sum = vi_zero();
        int64_t g = 0;
        for (; (g + 1) * TQ_G <= k; g++) {
            const int8_t *src = x + g * TQ_G;
            int8_t *dst = d + g * TQ_G;
            for (int q = 0; q < 4; q++) {
                const vi v = vi_load(src + q * TQ_VB);
                vi_store_u8(dst + q * VW, vi_and(v, lo8));
                vi_store_u8(dst + TQ_VB + q * VW, vi_and(vi_srli(v, 8), lo8));
                vi_store_u8(dst + 2 * TQ_VB + q * VW, vi_and(vi_srli(v, 16), lo8));
                vi_store_u8(dst + 3 * TQ_VB + q * VW, vi_srli(v, 24));
                sum = vi_add(sum, vi_add(vi_add(vi_srai(vi_slli(v, 24), 24),
                                                vi_srai(vi_slli(v, 16), 24)),
                                         vi_add(vi_srai(vi_slli(v, 8), 24), vi_srai(v, 24))));
            }
        }
        s = vi_hsum(sum);
        const int64_t g0 = g;
        for (; g < c->groups; g++)
            for (int i = 0; i < TQ_VB; i++)
                for (int jj = 0; jj < 4; jj++) {
                    int64_t kk = g * TQ_G + 4 * i + jj;
                    d[g * TQ_G + jj * TQ_VB + i] = kk < k ? x[kk] : 0;
                }
        for (int64_t kk = g0 * TQ_G; kk < k; kk++)
            s += x[kk];
        ((int32_t *)c->xsum)[m] = s;
    }
}

/* prepared: q->w is in the interleaved layout of prepared.h (rows of
 * whole groups, blocks of QG_NT rows, the data pointer at block 0), so no
 * group needs its tail copied and a tile's rows are one stream. */
static lk_status tq_run(lk_cpu_queue *cq, const lk_qgemm_args *q, int prepared)
{
    if (q->m == 0 || q->n == 0)
        return LK_OK;
    tq_ctx c;
    c.groups = (q->k + TQ_G - 1) / TQ_G;
    c.kp = c.groups * TQ_G;
    c.rowbytes = (q->k + 3) / 4;
    c.full = prepared ? c.groups : c.rowbytes / TQ_VB;
    c.il = prepared;
    char *mem = (char *)lk_cpu_scratch(cq, (size_t)q->m * (size_t)c.kp + (size_t)q->m * 4 + 64,
                                       "lk_ternary_gemm");
    if (mem == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    c.xsum = (const int32_t *)(void *)mem;
    c.xp = (const int8_t *)(mem + ((size_t)q->m * 4 + 63) / 64 * 64);
    qg_job j = {q, tq_tile, c.rowbytes, 0, &c};
    lk_cpu_for(lk_cpu_threads_for(cq, (double)q->m * (double)c.kp, q->m), q->m,
               tq_prepare_rows, &j);
    qg_run(cq, &j);
    return LK_OK;
}

LK_CPU_DEFINE(ternary_gemm, lk_qgemm_args) { return tq_run((lk_cpu_queue *)queue, args, 0); }

/* On prepared weights (prepared.h): rows padded to whole 64-byte vectors
 * and interleaved in blocks of a tile's rows, so the kernels run without
 * tail copies and load x once per block. */
LK_CPU_DEFINE(ternary_linear, lk_linear_args)
{
    const lk_cpu_weights *w = (const lk_cpu_weights *)args->prepared;
    if (w->dtype != LK_T2 || w->ldw % TQ_VB != 0 || w->il != QG_NT || w->ilb != TQ_VB)
        return lk_kernel_error(LK_ERR_INTERNAL,
                               "lk_ternary_linear: weights prepared for another kernel");
    lk_qgemm_args q;
    memset(&q, 0, sizeof q);
    q.m = args->m;
    q.n = args->n;
    q.k = args->k;
    q.x = args->x;
    q.x_scale = args->x_scale;
    q.y = args->y;
    q.flags = args->flags;
    q.w = lk_mat_ld(w->data, LK_T2, w->n, w->k, w->ldw * 4);
    q.w_scale = lk_mat(w->scale, LK_F32, 1, w->scale_cols);
    return tq_run((lk_cpu_queue *)queue, &q, 1);
}
