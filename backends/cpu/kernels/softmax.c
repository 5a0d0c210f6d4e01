/* Lockstep CPU kernels: softmax and log-softmax (docs/numerics.md section
 * 6), the reference's backends/ref/softmax.c on vectors: mx = maximum of
 * the row, e_i = exp(x_i - mx) kept in a row buffer, s = the lane sum of
 * the e_i, then y_i = e_i / s, or y_i = (x_i - mx) - log(s).  Threads take
 * whole rows. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"

typedef struct sm_job {
    const lk_softmax_args *a;
    int log;
    float *buf; /* per thread: 2 rows (the widened x, the e_i) */
} sm_job;

static void sm_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const sm_job *j = (const sm_job *)p;
    const lk_softmax_args *a = j->a;
    const int64_t n = a->x.cols;
    float *e = j->buf + (int64_t)tid * 2 * n;
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
        const vf vs = vf_set1(j->log ? lk_logf(s) : s);
        /* the row is in cache: ask for the next one while this one ends */
        const int64_t es = dt_size(a->x.dtype);
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        for (i = 0; i < n; i += VW) {
            if (pf)
                __builtin_prefetch(pf + i * es);
            const int part = n - i < VW ? (int)(n - i) : VW;
            vf v = j->log ? vf_sub(vf_sub(vf_load_part(x + i, part, vf_zero()), mx), vs)
                          : vf_div(vf_load_part(e + i, part, vf_zero()), vs);
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
    j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * 2 * (size_t)n * sizeof(float), who);
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
