/* Lockstep reference: the lane sum (numerics.md section 5).
 *
 * Written as a stream of terms through a fixed stack of levels, so that no
 * memory is allocated: level 0 takes the row's terms, level k + 1 takes the
 * chunk partials of level k, and the top level is the first whose term
 * count fits in one chunk.  The arithmetic is exactly the contract's. */
#include <math.h>

#include "backends/ref/lanes.h"
#include "numerics/contract.h"

#define MAX_LEVELS 8 /* 4096^6 > 2^63: six levels cover any int64 row */

typedef struct level {
    float lane[LK_LANES];
    int64_t total;  /* terms this level receives in all */
    int64_t pushed; /* terms received so far */
    int64_t in_chunk;
} level;

static void lanes_reset(level *lv)
{
    for (int l = 0; l < LK_LANES; l++)
        lv->lane[l] = -0.0f; /* the identity of IEEE addition */
    lv->in_chunk = 0;
}

/* for s = 32, 16, ..., 1: lane[l] = lane[l] + lane[l + s] */
static float butterfly(float lane[LK_LANES])
{
    for (int s = LK_LANES / 2; s >= 1; s /= 2)
        for (int l = 0; l < s; l++)
            lane[l] = lane[l] + lane[l + s];
    return lane[0];
}

typedef struct stream {
    level lv[MAX_LEVELS];
    int top;
    float result;
} stream;

static void stream_init(stream *st, int64_t n)
{
    int k = 0;
    st->lv[0].total = n;
    while (st->lv[k].total > LK_CHUNK) {
        st->lv[k + 1].total = (st->lv[k].total + LK_CHUNK - 1) / LK_CHUNK;
        k++;
    }
    st->top = k;
    for (int i = 0; i <= k; i++) {
        st->lv[i].pushed = 0;
        lanes_reset(&st->lv[i]);
    }
    st->result = -0.0f;
}

/* Add one term at level k; squares selects the fma leaf of sums of squares. */
static void push(stream *st, int k, float t, int squares)
{
    level *lv = &st->lv[k];
    int l = (int)(lv->in_chunk % LK_LANES);
    lv->lane[l] = squares ? fmaf(t, t, lv->lane[l]) : lv->lane[l] + t;
    lv->in_chunk++;
    lv->pushed++;
    if (lv->in_chunk == LK_CHUNK || lv->pushed == lv->total) {
        float partial = butterfly(lv->lane);
        lanes_reset(lv);
        if (k == st->top)
            st->result = partial;
        else
            push(st, k + 1, partial, 0); /* partials: plain additions */
    }
}

static float lane_sum(const float *t, int64_t n, int squares)
{
    stream st;
    stream_init(&st, n);
    for (int64_t i = 0; i < n; i++)
        push(&st, 0, t[i], squares);
    return st.result;
}

float lk_ref_lane_sum(const float *t, int64_t n) { return lane_sum(t, n, 0); }

float lk_ref_lane_sumsq(const float *d, int64_t n) { return lane_sum(d, n, 1); }
