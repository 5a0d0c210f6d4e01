/* Lockstep CPU kernels: BitNet b1.58 quantisation (docs/numerics.md
 * section 8), the reference's backends/ref/quant.c on vectors.
 *
 * rne of a value already clamped to the int8 range is vcvtps2dq under the
 * canonical MXCSR (round to nearest even), after NaN went to 0. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/quant_row.h"
#include "backends/cpu/kernels/t2.h"
#include "backends/cpu/threads.h"

typedef struct quant_job {
    const lk_quant_args *a;
    float *buf;    /* per thread: a widened row */
    int8_t *tbuf;  /* per thread: a row of ternary values */
    float *rs;     /* quantize_ternary: per-row sums of |w| */
    float m;
} quant_job;

static void act_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const quant_job *j = (const quant_job *)p;
    const lk_quant_args *a = j->a;
    const int64_t n = a->x.cols;
    for (int64_t r = r0; r < r1; r++) {
        /* no buffer for f32 rows (and no offset from a NULL one) */
        const float *x = row_f32(&a->x, r, j->buf ? j->buf + tid * n : NULL);
        quantize_act_row(x, n, (int8_t *)a->q.data + r * a->q.ld, &a->scale, r * a->scale.ld);
    }
}

LK_CPU_DEFINE(quantize_act, lk_quant_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_quant_args *a = args;
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (rows == 0) /* n == 0 still stores each row's scale, 127 / 1e-5 */
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 2.0 * (double)rows * (double)n * 4.0, rows);
    quant_job j = {a, NULL, NULL, NULL, 0.0f};
    if (a->x.dtype != LK_F32) {
        j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * (size_t)n * sizeof(float), "lk_quantize_act");
        if (j.buf == NULL)
            return LK_ERR_OUT_OF_MEMORY;
    }
    lk_cpu_for(nt, rows, act_rows, &j);
    return LK_OK;
}

static void absmean_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const quant_job *j = (const quant_job *)p;
    const lk_tensor *w = &j->a->x;
    for (int64_t r = r0; r < r1; r++)
        j->rs[r] = lane_sum(LANE_ABS, row_f32(w, r, j->buf + tid * w->cols), w->cols, 0.0f);
}

static void ternarise_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const quant_job *j = (const quant_job *)p;
    const lk_tensor *w = &j->a->x;
    int8_t *t = j->tbuf + tid * w->cols;
    for (int64_t r = r0; r < r1; r++) {
        quantize_row(row_f32(w, r, j->buf + tid * w->cols), w->cols, j->m, 1, -1.0f, 1.0f, t);
        t2_pack_row(t, w->cols, lk_t2_row(&j->a->q, r));
    }
}

/* rs_r = lane sum of |w[r, :]|, total = lane sum of the rs, then every
 * row ternarised by the one m: three passes, the middle one on one thread. */
LK_CPU_DEFINE(quantize_ternary, lk_quant_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_quant_args *a = args;
    const int64_t n = a->x.rows, k = a->x.cols;
    if (n == 0 || k == 0)
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 4.0 * (double)n * (double)k * 4.0, n);
    const size_t per = a->x.dtype == LK_F32 ? 0 : (size_t)k;
    char *mem = (char *)lk_cpu_scratch(q, (size_t)n * sizeof(float) +
                                              (size_t)nt * (per * sizeof(float) + (size_t)k) + 64,
                                       "lk_quantize_ternary");
    if (mem == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    quant_job j = {a, NULL, NULL, (float *)(void *)mem, 0.0f};
    j.buf = j.rs + n;
    j.tbuf = (int8_t *)(j.buf + (size_t)nt * per);
    lk_cpu_for(nt, n, absmean_rows, &j);
    float total = lane_sum(LANE_SUM, j.rs, n, 0.0f);
    float mean = total / (float)(n * k);
    j.m = lk_maximum(mean, LK_QUANT_EPS);
    lk_cpu_for(nt, n, ternarise_rows, &j);
    st1(a->scale.data, a->scale.dtype, 0, j.m);
    return LK_OK;
}
