/* Lockstep CPU kernels: RMSNorm and LayerNorm (docs/numerics.md section
 * 6), the reference's backends/ref/norm.c on vectors.  Threads take whole
 * rows; the weight and bias rows are widened once for all of them. */
#include <math.h>

#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/quant_row.h"
#include "backends/cpu/kernels/stream.h"
#include "backends/cpu/threads.h"

typedef struct norm_job {
    const lk_norm_args *a;
    int layer;           /* LayerNorm (else RMSNorm) */
    const float *w, *b;  /* f32 weight and bias rows, NULL when absent */
    float *buf;          /* per thread: the widened x row (non-f32 x) */
} norm_job;

/* y = ((x - m) * r) (* w) (+ b), for i in [0, n); rms: m unused.  The
 * row is in cache by now, so this pass also asks q for (its share of) the
 * next row, one step per vector: the memory keeps streaming while the row
 * is finished.  nt: whole vectors of an f32 y go out non-temporally
 * (stream.h). */
LK_INLINE void norm_apply(const int layer, const int hw, const int hb, const float *x,
                          const float *w, const float *b, float m, float r, void *y,
                          lk_dtype dt, int64_t yi, int64_t n, lane_pf *q, int nt)
{
    const vf vm_ = vf_set1(m), vr = vf_set1(r);
    int64_t i = 0;
    for (; i < n; i += VW) {
        lane_pf_step(q);
        const int part = n - i < VW ? (int)(n - i) : VW;
        vf v = part == VW ? vf_load(x + i) : vf_load_part(x + i, part, vf_zero());
        if (layer)
            v = vf_sub(v, vm_);
        v = vf_mul(v, vr);
        if (hw)
            v = vf_mul(v, part == VW ? vf_load(w + i) : vf_load_part(w + i, part, vf_zero()));
        if (hb)
            v = vf_add(v, part == VW ? vf_load(b + i) : vf_load_part(b + i, part, vf_zero()));
        if (part == VW && nt)
            vf_stream((float *)y + yi + i, vf_canon(v));
        else if (part == VW)
            st_dt(y, dt, yi + i, v);
        else
            st_dt_part(y, dt, yi + i, part, v);
    }
}

static void norm_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const norm_job *j = (const norm_job *)p;
    const lk_norm_args *a = j->a;
    const int64_t n = a->x.cols;
    const int64_t es = dt_size(a->x.dtype), nv = (n + VW - 1) / VW;
    const int stream = lk_stream_output(a->y.dtype, a->x.rows, a->y.ld);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(&a->x, r, j->buf + tid * n);
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        lane_pf q;
        float m = 0.0f, ss;
        if (j->layer) {
            /* LayerNorm asks for the whole next row in its deviation pass,
             * the first in cache: on Zen 4 (2 threads, 4096 x 4096) that
             * took it from 0.75 to 0.84 of the copy loop, where the last
             * pass (as RMSNorm does) or half in each stayed at 0.75 */
            m = lane_sum(LANE_SUM, x, n, 0.0f) / (float)n;
            lane_pf q2 = lane_pf_make(pf, n * es, n / LK_LANES);
            ss = lane_sum_q(LANE_DEV_SQ, x, n, m, &q2);
            q = lane_pf_make(NULL, 0, nv);
        } else {
            ss = lane_sum(LANE_SQ, x, n, 0.0f);
            q = lane_pf_make(pf, n * es, nv);
        }
        const float rs = 1.0f / sqrtf(ss / (float)n + a->eps);
        const int64_t yi = r * a->y.ld;
        const int nt = lk_stream_row(stream, (const float *)a->y.data + yi);
        /* the weight/bias combinations as separate loops: no test per element */
        if (j->layer) {
            if (j->w && j->b)
                norm_apply(1, 1, 1, x, j->w, j->b, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
            else if (j->w)
                norm_apply(1, 1, 0, x, j->w, NULL, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
            else if (j->b)
                norm_apply(1, 0, 1, x, NULL, j->b, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
            else
                norm_apply(1, 0, 0, x, NULL, NULL, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
        } else if (j->w) {
            norm_apply(0, 1, 0, x, j->w, NULL, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
        } else {
            norm_apply(0, 0, 0, x, NULL, NULL, m, rs, a->y.data, a->y.dtype, yi, n, &q, nt);
        }
    }
    if (stream)
        vf_stream_end();
}

static lk_status norm(lk_cpu_queue *q, const lk_norm_args *a, int layer, const char *who)
{
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (rows == 0 || n == 0)
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 2.0 * (double)rows * (double)n * (double)dt_size(a->x.dtype),
                                      rows);
    const int hw = a->weight.data != NULL, hb = layer && a->bias.data != NULL;
    const int ww = hw && a->weight.dtype != LK_F32, wb = hb && a->bias.dtype != LK_F32;
    const int64_t per = a->x.dtype == LK_F32 ? 0 : n;
    float *mem = (float *)lk_cpu_scratch(q, ((size_t)nt * (size_t)per + (size_t)(ww + wb) * (size_t)n) * sizeof(float) + 64, who);
    if (mem == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    norm_job j = {a, layer, NULL, NULL, mem};
    float *next = mem + (size_t)nt * (size_t)per;
    if (hw)
        j.w = row_f32(&a->weight, 0, next);
    if (ww)
        next += n;
    if (hb)
        j.b = row_f32(&a->bias, 0, next);
    lk_cpu_for(nt, rows, norm_rows, &j);
    return LK_OK;
}

LK_CPU_DEFINE(rmsnorm, lk_norm_args)
{
    return norm((lk_cpu_queue *)queue, args, 0, "lk_rmsnorm");
}

LK_CPU_DEFINE(layernorm, lk_norm_args)
{
    return norm((lk_cpu_queue *)queue, args, 1, "lk_layernorm");
}

/* lk_rmsnorm_quantize: each row is normalised into a per-thread f32 row
 * (the y lk_rmsnorm would store) and quantised from there, as quant.c's
 * quantize_act does; the row never leaves the cache. */
typedef struct nq_job {
    const lk_norm_quant_args *a;
    const float *w;  /* f32 weight row, NULL when absent */
    float *buf;      /* per thread: the widened x row (non-f32 x), then y */
    int64_t per;     /* floats per thread */
} nq_job;

static void nq_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const nq_job *j = (const nq_job *)p;
    const lk_norm_quant_args *a = j->a;
    const int64_t n = a->x.cols;
    float *xb = j->buf + tid * j->per;
    float *y = a->x.dtype == LK_F32 ? xb : xb + n;
    const int64_t es = dt_size(a->x.dtype);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(&a->x, r, xb);
        const float ss = lane_sum(LANE_SQ, x, n, 0.0f);
        const float rs = 1.0f / sqrtf(ss / (float)n + a->eps);
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        lane_pf q = lane_pf_make(pf, n * es, (n + VW - 1) / VW);
        if (j->w)
            norm_apply(0, 1, 0, x, j->w, NULL, 0.0f, rs, y, LK_F32, 0, n, &q, 0);
        else
            norm_apply(0, 0, 0, x, NULL, NULL, 0.0f, rs, y, LK_F32, 0, n, &q, 0);
        quantize_act_row(y, n, (int8_t *)a->q.data + r * a->q.ld, &a->scale, r * a->scale.ld);
    }
}

LK_CPU_DEFINE(rmsnorm_quantize, lk_norm_quant_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_norm_quant_args *a = args;
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (rows == 0 || n == 0)
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 3.0 * (double)rows * (double)n * (double)dt_size(a->x.dtype),
                                      rows);
    const int hw = a->weight.data != NULL, ww = hw && a->weight.dtype != LK_F32;
    /* 16 floats of padding keep each thread's rows apart */
    const int64_t per = (a->x.dtype == LK_F32 ? n : 2 * n) + 16;
    float *mem = (float *)lk_cpu_scratch(q, ((size_t)nt * (size_t)per + (size_t)ww * (size_t)n) * sizeof(float) + 64,
                                         "lk_rmsnorm_quantize");
    if (mem == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    nq_job j = {a, NULL, mem, per};
    if (hw)
        j.w = row_f32(&a->weight, 0, mem + (size_t)nt * (size_t)per);
    lk_cpu_for(nt, rows, nq_rows, &j);
    return LK_OK;
}
