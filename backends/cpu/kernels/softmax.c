/* Lockstep CPU kernels: softmax and log-softmax (docs/numerics.md section
 * 6), the reference's backends/ref/softmax.c on vectors.  Threads take
 * whole rows; per row three passes, only the first from memory:
 *
 *   1. mx = maximum of the row (the row was prefetched during pass 2 of
 *      the row before);
 *   2. e_i = exp(x_i - mx) and, in the same loop, the lane sum s
 *      (numerics.md 5: vector j of a chunk is register j % (64 / VW) of
 *      the 64 lanes), the next row prefetched meanwhile;
 *   3. softmax: r = 1 / s, y_i = e_i * r; log-softmax:
 *      y_i = (x_i - mx) - log(s).
 *
 * Pass 2 is nearly all the arithmetic and pass 3 nearly all the stores to
 * memory, so (f32 output) softmax runs pass 3 of row r - 1 inside pass 2
 * of row r (two buffers of e_i): the memory writes y while the cores
 * compute exps.  Pass 2 uses sm_exp, the contract's exp with the exponent
 * scaling done by an integer add wherever that gives the same bits (proof
 * below). */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/stream.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"

#define C(x) vf_set1(x)

typedef struct sm_job {
    const lk_softmax_args *a;
    int log;
    float *buf;  /* per thread: `per` floats */
    int64_t per; /* two rows of e_i, the chunk partials (nc), a widened row (bf16/f16 x) */
} sm_job;

/* sm_exp, the contract's exp for t <= 0: kernels/transcendental.h. */

/* e = exp(x - mx) (sm_exp when fast) for one vector. */
LK_INLINE vf sm_e(const int fast, vf x, vf mx)
{
    const vf t = vf_sub(x, mx);
    return fast ? sm_exp(t) : v_expf(t);
}

/* The pending pass 3 of the previous row run inside pass 2 of this one:
 * y[i] = e[i] * r, f32, none NaN; y == NULL when there is none; nt: whole
 * vectors stored non-temporally (y aligned for it). */
typedef struct sm_pend {
    float *y;
    const float *e;
    vf r;
    int nt;
} sm_pend;

LK_INLINE void sm_pend_do(const sm_pend *p, int64_t i, int w)
{
    if (w == VW && p->nt)
        vf_stream(p->y + i, vf_mul(vf_load(p->e + i), p->r));
    else if (w == VW)
        vf_store(p->y + i, vf_mul(vf_load(p->e + i), p->r));
    else
        vf_store_part(p->y + i, w, vf_mul(vf_load_part(p->e + i, w, p->r), p->r));
}

/* One chunk (1 <= n <= LK_CHUNK terms) of pass 2: the e_i into e (when e
 * is not NULL) and their lane sum, the chunk's partial.  pf: the same
 * place in the next row (es bytes per element), or NULL; pd: the pending
 * pass 3 at the same place, its y NULL when there is none. */
LK_INLINE float sm_chunk(const int fast, const float *x, int64_t n, vf mx, float *e,
                         const char *pf, int64_t es, const sm_pend *pd)
{
    vf acc[LANES_NV];
    for (int a = 0; a < LANES_NV; a++)
        acc[a] = vf_bits(0x80000000u); /* -0 */
    int64_t i = 0;
    for (; i + LK_LANES <= n; i += LK_LANES) {
        if (pf)
            for (int64_t b = 0; b < LK_LANES * es; b += 64)
                __builtin_prefetch(pf + i * es + b);
        for (int a = 0; a < LANES_NV; a++) {
            const vf v = sm_e(fast, vf_load(x + i + a * VW), mx);
            if (e)
                vf_store(e + i + a * VW, v);
            acc[a] = vf_add(acc[a], v);
            if (pd->y)
                sm_pend_do(pd, i + a * VW, VW);
        }
    }
    for (int a = 0; a < LANES_NV && i + a * VW < n; a++) {
        const int64_t left = n - i - a * VW;
        if (left >= VW) {
            const vf v = sm_e(fast, vf_load(x + i + a * VW), mx);
            if (e)
                vf_store(e + i + a * VW, v);
            acc[a] = vf_add(acc[a], v);
            if (pd->y)
                sm_pend_do(pd, i + a * VW, VW);
        } else {
            /* the fill mx makes t = +0 in the lanes past the row */
            const vf v = sm_e(fast, vf_load_part(x + i + a * VW, (int)left, mx), mx);
            if (e)
                vf_store_part(e + i + a * VW, (int)left, v);
            acc[a] = vf_select(vm_first((int)left), vf_add(acc[a], v), acc[a]);
            if (pd->y)
                sm_pend_do(pd, i + a * VW, (int)left);
        }
    }
    for (int s = LANES_NV / 2; s >= 1; s /= 2)
        for (int a = 0; a < s; a++)
            acc[a] = vf_add(acc[a], acc[a + s]);
    return vf_butterfly(acc[0]);
}

/* Pass 2 over a row: the lane sum of e_i = exp(x_i - mx); part holds
 * ceil(n / LK_CHUNK) floats. */
static float sm_exp_sum(const float *x, int64_t n, float mx, float *e, float *part,
                        const char *pf, int64_t es, sm_pend pd)
{
    /* a finite mx: every t_i <= 0 and none NaN (sm_exp); otherwise every
     * t_i is NaN or -Inf and the row is NaN or all +0 anyway */
    const int fast = mx - mx == 0.0f;
    const vf vmx = vf_set1(mx);
    int64_t c = 0;
    for (int64_t lo = 0; lo < n; lo += LK_CHUNK, c++) {
        const int64_t cn = n - lo < LK_CHUNK ? n - lo : LK_CHUNK;
        const char *p = pf ? pf + lo * es : NULL;
        float *ec = e ? e + lo : NULL;
        const sm_pend pc = {pd.y ? pd.y + lo : NULL, pd.e ? pd.e + lo : NULL, pd.r, pd.nt};
        part[c] = fast ? sm_chunk(1, x + lo, cn, vmx, ec, p, es, &pc)
                       : sm_chunk(0, x + lo, cn, vmx, ec, p, es, &pc);
    }
    return c == 1 ? part[0] : lane_sum(LANE_SUM, part, c, 0.0f);
}

/* Pass 3 of softmax on its own: y_i = e_i * rs, rounded at the store. */
static void sm_scale(const lk_softmax_args *a, int64_t r, const float *e, float rs)
{
    const int64_t n = a->x.cols, yi = r * a->y.ld;
    const vf vr = vf_set1(rs);
    for (int64_t i = 0; i < n; i += VW) {
        const int w = n - i < VW ? (int)(n - i) : VW;
        const vf v = vf_mul(vf_load_part(e + i, w, vf_zero()), vr);
        if (w == VW)
            st_dt(a->y.data, a->y.dtype, yi + i, v);
        else
            st_dt_part(a->y.data, a->y.dtype, yi + i, w, v);
    }
}

static void sm_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    const sm_job *j = (const sm_job *)p;
    const lk_softmax_args *a = j->a;
    const int64_t n = a->x.cols, es = dt_size(a->x.dtype), ns = (n + 15) & ~(int64_t)15;
    float *ec = j->buf + (int64_t)tid * j->per, *ep = ec + ns, *part = ep + ns;
    float *xb = part + (n + LK_CHUNK - 1) / LK_CHUNK;
    sm_pend pd = {NULL, NULL, vf_zero(), 0};
    const int stream = lk_stream_output(a->y.dtype, a->x.rows, a->y.ld);
    for (int64_t r = r0; r < r1; r++) {
        const float *x = row_f32(&a->x, r, xb);
        const float mx = row_extreme(1, x, n);
        /* the row is in cache: ask for the next one while this one ends */
        const char *pf = r + 1 < r1 ? (const char *)a->x.data + (r + 1) * a->x.ld * es : NULL;
        const float s = sm_exp_sum(x, n, mx, j->log ? NULL : ec, part, pf, es, pd);
        pd.y = NULL;
        if (j->log) {
            const int64_t yi = r * a->y.ld;
            const vf vmx = vf_set1(mx), ls = vf_set1(lk_logf(s));
            for (int64_t i = 0; i < n; i += VW) {
                const int w = n - i < VW ? (int)(n - i) : VW;
                const vf v = vf_sub(vf_sub(vf_load_part(x + i, w, vf_zero()), vmx), ls);
                if (w == VW)
                    st_dt(a->y.data, a->y.dtype, yi + i, v);
                else
                    st_dt_part(a->y.data, a->y.dtype, yi + i, w, v);
            }
            continue;
        }
        const float rs = 1.0f / s;
        /* s not NaN: no e_i is NaN (a NaN e_i makes s NaN), so neither is
         * any product, and an f32 y takes them as they are, during the
         * next row's pass 2 */
        if (a->y.dtype == LK_F32 && s == s && r + 1 < r1) {
            pd.y = (float *)a->y.data + r * a->y.ld;
            pd.e = ec;
            pd.r = vf_set1(rs);
            pd.nt = lk_stream_row(stream, pd.y);
            float *t = ec;
            ec = ep;
            ep = t;
        } else {
            sm_scale(a, r, ec, rs);
        }
    }
    /* the streamed lines reach memory before the team's end publishes y */
    if (stream)
        vf_stream_end();
}

static lk_status softmax(lk_cpu_queue *q, const lk_softmax_args *a, int log, const char *who)
{
    const int64_t rows = a->x.rows, n = a->x.cols;
    if (rows == 0 || n == 0)
        return LK_OK;
    const int nt = lk_cpu_threads_for(q, 32.0 * (double)rows * (double)n, rows);
    const int64_t nc = (n + LK_CHUNK - 1) / LK_CHUNK;
    sm_job j = {a, log, NULL, 0};
    j.per = 2 * ((n + 15) & ~(int64_t)15) + nc + (a->x.dtype == LK_F32 ? 0 : n);
    j.per = (j.per + 15) & ~(int64_t)15; /* each thread's rows start on a 64-byte line */
    j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * (size_t)j.per * sizeof(float), who);
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
