/* Lockstep CPU kernels: softmax and log-softmax (docs/numerics.md section
 * 6), the reference's backends/ref/softmax.c on vectors: mx = maximum of
 * the row, e_i = exp(x_i - mx) kept in a row buffer, s = the lane sum of
 * the e_i, then y_i = e_i / s, or y_i = (x_i - mx) - log(s).  Threads take
 * whole rows.
 *
 * Softmax is bound by arithmetic, not memory (docs/bench.md, "Floors"):
 * the exp keeps the FMA and ALU ports busy while the divider idles, and
 * the division pass the other way round.  So each thread runs the division
 * of its previous row inside the exp loop of the current one (two row
 * buffers of exps): the same operations on the same values, overlapped. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"

typedef struct sm_job {
    const lk_softmax_args *a;
    int log;
    float *buf; /* per thread: SM_ROWS rows (the widened x, the e_i, the previous e_i) */
} sm_job;

#define SM_ROWS 3

/* y[r, i .. i + part) = e[i ..] / s, rounded at the store. */
LK_INLINE void sm_div(const lk_softmax_args *a, int64_t r, const float *e, vf vs, int64_t i,
                      int part)
{
    const int64_t yi = r * a->y.ld + i;
    if (part == VW)
        st_dt(a->y.data, a->y.dtype, yi, vf_div(vf_load(e + i), vs));
    else
        st_dt_part(a->y.data, a->y.dtype, yi, part,
                   vf_div(vf_load_part(e + i, part, vf_zero()), vs));
}

/* Softmax over rows r0 .. r1 - 1, the division of row r - 1 inside the exp
 * loop of row r. */
static void sm_rows_pipe(const sm_job *j, int64_t r0, int64_t r1, int tid)
{
    const lk_softmax_args *a = j->a;
    const int64_t n = a->x.cols, es = dt_size(a->x.dtype);
    float *xb = j->buf + (int64_t)tid * SM_ROWS * n, *ec = xb + n, *ep = ec + n;
    vf vsp = vf_zero();
    int64_t rp = -1; /* the row whose division is pending, its exps in ep */
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(&a->x, r, xb);
        const vf mx = vf_set1(row_extreme(1, x, n));
        /* the row is in cache: ask for the next one while this one ends */
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        int64_t i = 0;
        for (; i + VW <= n; i += VW) {
            if (pf)
                __builtin_prefetch(pf + i * es);
            vf_store(ec + i, v_expf(vf_sub(vf_load(x + i), mx)));
            if (rp >= 0)
                sm_div(a, rp, ep, vsp, i, VW);
        }
        if (i < n) {
            vf_store_part(ec + i, (int)(n - i),
                          v_expf(vf_sub(vf_load_part(x + i, (int)(n - i), vf_zero()), mx)));
            if (rp >= 0)
                sm_div(a, rp, ep, vsp, i, (int)(n - i));
        }
        vsp = vf_set1(lane_sum(LANE_SUM, ec, n, 0.0f));
        rp = r;
        float *t = ec;
        ec = ep;
        ep = t;
    }
    if (rp >= 0)
        for (int64_t i = 0; i < n; i += VW)
            sm_div(a, rp, ep, vsp, i, n - i < VW ? (int)(n - i) : VW);
}

static void sm_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const sm_job *j = (const sm_job *)p;
    const lk_softmax_args *a = j->a;
    const int64_t n = a->x.cols;
    if (!j->log) {
        sm_rows_pipe(j, r0, r1, tid);
        return;
    }
    /* log-softmax: y_i = (x_i - mx) - log(s), no division to overlap */
    float *e = j->buf + (int64_t)tid * SM_ROWS * n;
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(&a->x, r, e + n);
        const vf mx = vf_set1(row_extreme(1, x, n));
        int64_t i = 0;
        for (; i + VW <= n; i += VW)
            vf_store(e + i, v_expf(vf_sub(vf_load(x + i), mx)));
        if (i < n)
            vf_store_part(e + i, (int)(n - i),
                          v_expf(vf_sub(vf_load_part(x + i, (int)(n - i), vf_zero()), mx)));
        const float s = lane_sum(LANE_SUM, e, n, 0.0f);
        const int64_t yi = r * a->y.ld;
        const vf vs = vf_set1(lk_logf(s));
        /* the row is in cache: ask for the next one while this one ends */
        const int64_t es = dt_size(a->x.dtype);
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        for (i = 0; i < n; i += VW) {
            if (pf)
                __builtin_prefetch(pf + i * es);
            const int part = n - i < VW ? (int)(n - i) : VW;
            vf v = vf_sub(vf_sub(vf_load_part(x + i, part, vf_zero()), mx), vs);
            if (part == VW)
                st_dt(a->y.data, a->y.dtype, yi + i, v);
            else
                st_dt_part(a->y.data, a->y.dtype, yi + i, part, v);
        }
    }
}

static lk_status softmax(lk_cpu_queue *q, const lk_softmax_args *a, int log, const char *who)
{
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (rows == 0 || n == 0)
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 48.0 * (double)rows * (double)n, rows);
    sm_job j = {a, log, NULL};
    j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * SM_ROWS * (size_t)n * sizeof(float), who);
    if (j.buf == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    lk_cpu_for(nt, rows, sm_rows, &j);
    return LK_OK;
}

LK_CPU_DEFINE(softmax, lk_softmax_args)
{
    return softmax((lk_cpu_queue *)queue, args, 0, "lk_softmax");
}

LK_CPU_DEFINE(log_softmax, lk_softmax_args)
{
    return softmax((lk_cpu_queue *)queue, args, 1, "lk_log_softmax");
}
