/* Lockstep CPU kernels: row reductions (docs/numerics.md section 5).
 *
 * Rows are independent, so threads take whole rows.  A few long rows are
 * split across threads at chunk boundaries instead: each thread computes
 * the level-1 partials of its chunks (the same numbers one thread would),
 * and the partials are then summed in the contract's order by one thread;
 * maximum, minimum and argmax combine per-chunk results in any order
 * (maximum and minimum) or in index order (argmax). */
#include <stdlib.h>

#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/threads.h"
#include "backends/host.h"

/* x's position in the total order NaN > +Inf > ... > +0 > -0 > ... > -Inf
 * as an int32 (all NaNs equal): sign-magnitude flipped to two's
 * complement.  The scalar form is backends/ref/reduce.c's order_key. */
LK_INLINE vi order_key(vf x)
{
    vi s = vf_as_vi(x);
    vi k = vi_xor(s, vi_and(vi_srai(s, 31), vi_set1(0x7fffffff)));
    return vi_select(vf_isnan(x), vi_set1(INT32_MAX), k);
}

static int32_t order_key1(float x)
{
    int32_t s = (int32_t)lk_f32_bits(x);
    return lk_isnan(x) ? INT32_MAX : s < 0 ? s ^ 0x7fffffff : s;
}

/* The smallest index of the largest x in the total order, n < 2^31:
 * each lane keeps its first best (its indices ascend), then the lanes
 * are compared, ties going to the smaller index. */
static int64_t argmax_block(const float *x, int64_t n)
{
    int32_t io[VW];
    for (int j = 0; j < VW; j++)
        io[j] = j;
    vi idx = vi_load(io), bk = vi_set1(INT32_MIN), bi = vi_set1(0);
    const vi step = vi_set1(VW);
    int64_t i = 0;
    for (; i + VW <= n; i += VW, idx = vi_add(idx, step)) {
        vi k = order_key(vf_load(x + i));
        vm gt = vi_gt(k, bk);
        bk = vi_select(gt, k, bk);
        bi = vi_select(gt, idx, bi);
    }
    if (i < n) { /* lanes past the end keep INT32_MIN, below every key */
        vi k = vi_select(vm_first((int)(n - i)), order_key(vf_load_part(x + i, (int)(n - i),
                                                                        vf_zero())),
                         vi_set1(INT32_MIN));
        vm gt = vi_gt(k, bk);
        bk = vi_select(gt, k, bk);
        bi = vi_select(gt, idx, bi);
    }
    int32_t keys[VW], ids[VW];
    memcpy(keys, &bk, sizeof keys);
    memcpy(ids, &bi, sizeof ids);
    int best = 0;
    for (int j = 1; j < VW; j++)
        if (keys[j] > keys[best] || (keys[j] == keys[best] && ids[j] < ids[best]))
            best = j;
    return ids[best];
}

static int64_t row_argmax(const float *x, int64_t n)
{
    const int64_t block = (int64_t)1 << 30;
    int64_t best = 0;
    int32_t key = INT32_MIN;
    for (int64_t b = 0; b < n; b += block) {
        int64_t i = b + argmax_block(x + b, n - b < block ? n - b : block);
        int32_t k = order_key1(x[i]);
        if (k > key) { /* strictly: an earlier block wins a tie */
            key = k;
            best = i;
        }
    }
    return best;
}

/* One row, n >= 1 f32 terms, as the reference computes it. */
static float reduce_row(lk_reduce_op op, const float *x, int64_t n)
{
    switch (op) {
    case LK_REDUCE_SUM:
        return lane_sum(LANE_SUM, x, n, 0.0f);
    case LK_REDUCE_MEAN:
        return lane_sum(LANE_SUM, x, n, 0.0f) / (float)n;
    case LK_REDUCE_MAX:
        return row_extreme(1, x, n);
    case LK_REDUCE_MIN:
        return row_extreme(0, x, n);
    default: { /* VAR, VAR_UNBIASED: two passes, d_i = x_i - m */
        float m = lane_sum(LANE_SUM, x, n, 0.0f) / (float)n;
        float ss = lane_sum(LANE_DEV_SQ, x, n, m);
        return op == LK_REDUCE_VAR ? ss / (float)n : ss / (float)(n - 1);
    }
    }
}

typedef struct red_job {
    const lk_reduce_args *a;
    float *buf;        /* per thread: a widened row (rows) or chunk (chunks) */
    int64_t buf_len;
    /* long rows: the row, the pass and its per-chunk results */
    int64_t row;
    int kind;
    float mean;
    float *part;
    int64_t *ipart;
} red_job;

static void red_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const red_job *j = (const red_job *)p;
    const lk_reduce_args *a = j->a;
    for (int64_t r = r0; r < r1; r++) {
        /* no buffer for f32 rows (and no offset from a NULL one) */
        const float *x = row_f32(&a->x, r, j->buf ? j->buf + tid * j->buf_len : NULL);
        if (a->op == LK_REDUCE_ARGMAX)
            ((int64_t *)a->y.data)[r * a->y.ld] = row_argmax(x, a->x.cols);
        else
            st1(a->y.data, a->y.dtype, r * a->y.ld, reduce_row(a->op, x, a->x.cols));
    }
}

/* Per-chunk results of chunks c0 .. c1 of row j->row. */
static void red_chunks(void *p, int64_t c0, int64_t c1, int tid)
{
    const red_job *j = (const red_job *)p;
    const lk_tensor *xt = &j->a->x;
    const int64_t n = xt->cols;
    for (int64_t c = c0; c < c1; c++) {
        const int64_t lo = c * LK_CHUNK, len = n - lo < LK_CHUNK ? n - lo : LK_CHUNK;
        const float *x;
        if (xt->dtype == LK_F32) {
            x = (const float *)xt->data + j->row * xt->ld + lo;
        } else {
            float *b = j->buf + tid * j->buf_len;
            widen_span(xt->data, xt->dtype, j->row * xt->ld + lo, len, b);
            x = b;
        }
        switch (j->a->op) {
        case LK_REDUCE_MAX:
            j->part[c] = row_extreme(1, x, len);
            break;
        case LK_REDUCE_MIN:
            j->part[c] = row_extreme(0, x, len);
            break;
        case LK_REDUCE_ARGMAX:
            j->ipart[c] = lo + row_argmax(x, len);
            break;
        default:
            j->part[c] = lane_chunk_any(j->kind, x, len, j->mean, NULL);
            break;
        }
    }
}

/* A long row on nt threads: per-chunk passes, combined in order. */
static void red_long_row(red_job *j, int nt, int64_t r)
{
    const lk_reduce_args *a = j->a;
    const int64_t n = a->x.cols, nch = (n + LK_CHUNK - 1) / LK_CHUNK;
    j->row = r;
    j->kind = LANE_SUM;
    j->mean = 0.0f;
    lk_cpu_for(nt, nch, red_chunks, j);
    float v = 0.0f;
    switch (a->op) {
    case LK_REDUCE_ARGMAX: {
        int64_t best = j->ipart[0];
        int32_t key = order_key1(ld1(a->x.data, a->x.dtype, r * a->x.ld + best));
        for (int64_t c = 1; c < nch; c++) {
            int32_t k = order_key1(ld1(a->x.data, a->x.dtype, r * a->x.ld + j->ipart[c]));
            if (k > key) {
                key = k;
                best = j->ipart[c];
            }
        }
        ((int64_t *)a->y.data)[r * a->y.ld] = best;
        return;
    }
    case LK_REDUCE_MAX:
    case LK_REDUCE_MIN:
        v = j->part[0];
        for (int64_t c = 1; c < nch; c++)
            v = a->op == LK_REDUCE_MAX ? lk_maximum(v, j->part[c]) : lk_minimum(v, j->part[c]);
        break;
    case LK_REDUCE_SUM:
    case LK_REDUCE_MEAN:
        v = lane_sum(LANE_SUM, j->part, nch, 0.0f);
        if (a->op == LK_REDUCE_MEAN)
            v = v / (float)n;
        break;
    default: /* VAR, VAR_UNBIASED */
        j->mean = lane_sum(LANE_SUM, j->part, nch, 0.0f) / (float)n;
        j->kind = LANE_DEV_SQ;
        lk_cpu_for(nt, nch, red_chunks, j);
        v = lane_sum(LANE_SUM, j->part, nch, 0.0f);
        v = a->op == LK_REDUCE_VAR ? v / (float)n : v / (float)(n - 1);
        break;
    }
    st1(a->y.data, a->y.dtype, r * a->y.ld, v);
}

LK_CPU_DEFINE(reduce, lk_reduce_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_reduce_args *a = args;
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (a->op < LK_REDUCE_SUM || a->op > LK_REDUCE_ARGMAX)
        return lk_kernel_error(LK_ERR_INVALID_ARGUMENT, "lk_reduce: unknown op %d", (int)a->op);
    if (rows == 0 || n == 0)
        return LK_OK;
    red_job j;
    memset(&j, 0, sizeof j);
    j.a = a;
    const double bytes = (double)rows * (double)n * (double)dt_size(a->x.dtype);
    const int64_t nch = (n + LK_CHUNK - 1) / LK_CHUNK;
    if (rows < q->nthreads && nch >= 4 * (int64_t)q->nthreads) {
        const int nt = lk_cpu_threads_for(q, bytes / (double)rows, nch);
        j.buf_len = a->x.dtype == LK_F32 ? 0 : LK_CHUNK;
        size_t bytes_needed = (size_t)nt * (size_t)j.buf_len * sizeof(float) +
                              (size_t)nch * sizeof(int64_t);
        char *mem = (char *)lk_cpu_scratch(q, bytes_needed, "lk_reduce");
        if (mem == NULL)
            return LK_ERR_OUT_OF_MEMORY;
        j.ipart = (int64_t *)(void *)mem;
        j.part = (float *)(void *)mem; /* the float and index passes never mix */
        j.buf = (float *)(void *)(mem + (size_t)nch * sizeof(int64_t));
        for (int64_t r = 0; r < rows; r++)
            red_long_row(&j, nt, r);
        return LK_OK;
    }
    const int nt = lk_cpu_threads_for(q, bytes, rows);
    j.buf_len = a->x.dtype == LK_F32 ? 0 : n;
    if (j.buf_len) {
        j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * (size_t)n * sizeof(float), "lk_reduce");
        if (j.buf == NULL)
            return LK_ERR_OUT_OF_MEMORY;
    }
    lk_cpu_for(nt, rows, red_rows, &j);
    return LK_OK;
}
