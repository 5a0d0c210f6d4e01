/* Lockstep CPU kernels: the lane sum of docs/numerics.md section 5 on
 * vectors (the scalar original is backends/ref/lanes.c).
 *
 * The 64 lanes are LK_LANES / VW registers: lane l is lane l % VW of
 * register l / VW, so term i of a chunk lands in lane i mod 64 by loading
 * 64 consecutive terms into the registers in order.  Every lane starts at
 * -0; a lane past the end of a chunk is left alone (a masked update).  The
 * butterfly's steps s >= VW add whole registers, the rest is vf_butterfly.
 * A row longer than LK_CHUNK is the same sum over the row of chunk
 * partials, recursively; the partials of level 1 are independent, which is
 * what lets a long row be split across threads at chunk boundaries. */
#ifndef LK_CPU_KERNELS_LANES_H
#define LK_CPU_KERNELS_LANES_H

#define LANES_NV (LK_LANES / VW) /* registers */

/* The term a lane takes (numerics.md sections 5 and 6). */
enum lane_kind {
    LANE_SUM = 0,   /* lane + x_i */
    LANE_SQ = 1,    /* fma(x_i, x_i, lane) */
    LANE_DEV_SQ = 2, /* d = x_i - m; fma(d, d, lane) */
    LANE_ABS = 3     /* lane + |x_i| */
};

LK_INLINE vf lane_term(const int kind, vf lane, vf x, vf m)
{
    if (kind == LANE_SUM)
        return vf_add(lane, x);
    if (kind == LANE_ABS)
        return vf_add(lane, vf_and(x, vf_bits(0x7fffffffu)));
    if (kind == LANE_DEV_SQ)
        x = vf_sub(x, m);
    return vf_fma(x, x, lane);
}

#include "backends/cpu/isa.h"

/* Bytes ahead that a chunk asks the memory for, on top of the hardware
 * prefetcher, where that pays (lk_cpu_prefetch): on a Xeon it took a 2^26
 * sum from 0.72 to 0.97 of the streaming read (docs/internals/reductions.md). */
#define LANE_PREFETCH 2048

/* A stream of prefetches spread over an in-cache pass: every call of
 * lane_pf_step moves the target on by `step` bytes and asks for each 64-byte
 * line of [p, end) up to it.  A pass that finds its row in cache leaves the
 * memory idle; this keeps requests for a later row in flight through it. */
typedef struct lane_pf {
    const char *p, *t, *end;
    int64_t step;
} lane_pf;

/* bytes of [base, base + bytes) over `units` calls of lane_pf_step; base
 * NULL (or bytes 0): no prefetches. */
LK_INLINE lane_pf lane_pf_make(const char *base, int64_t bytes, int64_t units)
{
    lane_pf q = {base, base, base ? base + bytes : base, 0};
    if (units < 1)
        units = 1;
    q.step = (bytes + units - 1) / units;
    return q;
}

/* q NULL, or made from a NULL base (end NULL): no stream (no step is
 * taken, so no offset is applied to a NULL pointer). */
LK_INLINE void lane_pf_step(lane_pf *q)
{
    if (!q || !q->end)
        return;
    q->t += q->step;
    for (; q->p < q->t && q->p < q->end; q->p += 64)
        __builtin_prefetch(q->p);
}

/* One chunk, 1 <= n <= LK_CHUNK terms; q (NULL: none) gets one step per
 * LK_LANES terms. */
LK_INLINE float lane_chunk_q(const int kind, const float *x, int64_t n, float mean, lane_pf *q)
{
    const vf m = vf_set1(mean);
    vf acc[LANES_NV];
    for (int a = 0; a < LANES_NV; a++)
        acc[a] = vf_bits(0x80000000u); /* -0 */
    int64_t i = 0;
    for (; i + LK_LANES <= n; i += LK_LANES) {
        if (lk_cpu_prefetch)
            for (int b = 0; b < LK_LANES * 4; b += 64)
                __builtin_prefetch((const char *)(x + i) + LANE_PREFETCH + b);
        lane_pf_step(q);
        for (int a = 0; a < LANES_NV; a++)
            acc[a] = lane_term(kind, acc[a], vf_load(x + i + a * VW), m);
    }
    for (int a = 0; a < LANES_NV && i + a * VW < n; a++) {
        int64_t left = n - i - a * VW;
        if (left >= VW) {
            acc[a] = lane_term(kind, acc[a], vf_load(x + i + a * VW), m);
        } else {
            vf t = lane_term(kind, acc[a], vf_load_part(x + i + a * VW, (int)left, m), m);
            acc[a] = vf_select(vm_first((int)left), t, acc[a]);
        }
    }
    for (int s = LANES_NV / 2; s >= 1; s /= 2)
        for (int a = 0; a < s; a++)
            acc[a] = vf_add(acc[a], acc[a + s]);
    return vf_butterfly(acc[0]);
}

LK_INLINE float lane_chunk(const int kind, const float *x, int64_t n, float mean)
{
    return lane_chunk_q(kind, x, n, mean, NULL);
}

static float lane_chunk_any(int kind, const float *x, int64_t n, float mean, lane_pf *q)
{
    switch (kind) {
    case LANE_SQ:
        return lane_chunk_q(LANE_SQ, x, n, mean, q);
    case LANE_DEV_SQ:
        return lane_chunk_q(LANE_DEV_SQ, x, n, mean, q);
    case LANE_ABS:
        return lane_chunk_q(LANE_ABS, x, n, mean, q);
    default:
        return lane_chunk_q(LANE_SUM, x, n, mean, q);
    }
}

/* Partial i of level `level` (>= 1) of the tree over x; cnt[l] is the
 * number of terms at level l (cnt[0] = n).  The level-1 chunks are visited
 * in ascending order, so q streams once over the row. */
static float lane_node(int kind, const float *x, float mean, const int64_t *cnt, int level,
                       int64_t i, lane_pf *q)
{
    const int64_t lo = i * LK_CHUNK;
    const int64_t c = cnt[level - 1] - lo < LK_CHUNK ? cnt[level - 1] - lo : LK_CHUNK;
    if (level == 1)
        return lane_chunk_any(kind, x + lo, c, mean, q);
    float buf[LK_CHUNK];
    for (int64_t j = 0; j < c; j++)
        buf[j] = lane_node(kind, x, mean, cnt, level - 1, lo + j, q);
    return lane_chunk(LANE_SUM, buf, c, 0.0f);
}

/* The lane sum of a row of n >= 1 terms, feeding q (NULL: none), which
 * expects n / LK_LANES steps. */
static inline float lane_sum_q(int kind, const float *x, int64_t n, float mean, lane_pf *q)
{
    if (n <= LK_CHUNK)
        return lane_chunk_any(kind, x, n, mean, q);
    int64_t cnt[8];
    int top = 0;
    cnt[0] = n;
    while (cnt[top] > LK_CHUNK) {
        cnt[top + 1] = (cnt[top] + LK_CHUNK - 1) / LK_CHUNK;
        top++;
    }
    float buf[LK_CHUNK];
    for (int64_t j = 0; j < cnt[top]; j++)
        buf[j] = lane_node(kind, x, mean, cnt, top, j, q);
    return lane_chunk(LANE_SUM, buf, cnt[top], 0.0f);
}

static inline float lane_sum(int kind, const float *x, int64_t n, float mean)
{
    return lane_sum_q(kind, x, n, mean, NULL);
}

#endif
