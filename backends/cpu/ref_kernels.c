/* Lockstep CPU driver: the reference kernels, run on the queue's threads.
 *
 * The first layer of every variant's table (variants.h) and the whole
 * table of LOCKSTEP_CPU_ISA=ref.  The reference kernels are pure functions
 * of their arguments, so each thread runs one on a slice of independent
 * outputs (rows, or columns of a GEMM): the bits are the reference's. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "backends/cpu/threads.h"
#include "backends/cpu/variants.h"
#include "backends/ref/ref.h"

/* Rows [r0, r1) of t (matrix 0 and every matrix of a batch alike). */
static lk_tensor lk_rows(lk_tensor t, int64_t r0, int64_t r1)
{
    size_t es = t.dtype == LK_T2 ? 0 : lk_dtype_size(t.dtype);
    char *p = (char *)t.data;
    if (p != NULL)
        t.data = t.dtype == LK_T2 ? p + r0 * (t.ld / 4) : p + r0 * t.ld * (int64_t)es;
    t.rows = r1 - r0;
    return t;
}

/* Columns [c0, c1) of t (not LK_T2). */
static lk_tensor lk_cols(lk_tensor t, int64_t c0, int64_t c1)
{
    if (t.data != NULL)
        t.data = (char *)t.data + c0 * (int64_t)lk_dtype_size(t.dtype);
    t.cols = c1 - c0;
    return t;
}

static int lk_threads(void *queue, int64_t rows, int64_t cols)
{
    return lk_cpu_threads_for((const lk_cpu_queue *)queue, 8.0 * (double)rows * (double)cols,
                              rows);
}

/* ---- GEMM: rows of C (columns of a transposed A) ---- */
typedef struct {
    const lk_gemm_args *g;
} gemm_ctx;

static void gemm_rows(void *p, int64_t m0, int64_t m1, int tid)
{
    (void)tid;
    lk_gemm_args s = *((gemm_ctx *)p)->g;
    s.a = s.ta == LK_TRANS ? lk_cols(s.a, m0, m1) : lk_rows(s.a, m0, m1);
    s.c = lk_rows(s.c, m0, m1);
    s.m = m1 - m0;
    lk_ref_gemm(&s);
}

static lk_status ref_gemm(void *q, const lk_gemm_args *g)
{
    gemm_ctx c = {g};
    int nt = lk_cpu_threads_for((const lk_cpu_queue *)q,
                                2.0 * (double)g->m * (double)g->n * (double)g->k * (double)g->batch,
                                g->m);
    lk_cpu_for(nt, g->m, gemm_rows, &c);
    return LK_OK;
}

/* ---- row-wise ops: slice x, y (and per-row companions) ---- */
#define LK_ROWWISE(op, type, slice)                                                \
    static void op##_rows(void *p, int64_t r0, int64_t r1, int tid)                \
    {                                                                              \
        type s = *(const type *)p;                                                 \
        (void)tid;                                                                 \
        slice;                                                                     \
        lk_ref_##op(&s);                                                           \
    }                                                                              \
    static lk_status ref_##op(void *q, const type *a)                              \
    {                                                                              \
        int64_t rows = a->x.rows;                                                  \
        lk_cpu_for(lk_threads(q, rows, a->x.cols), rows, op##_rows, (void *)a);    \
        return LK_OK;                                                              \
    }

#define XY_ROWS                      \
    s.x = lk_rows(s.x, r0, r1);      \
    s.y = lk_rows(s.y, r0, r1)

LK_ROWWISE(reduce, lk_reduce_args, XY_ROWS)
LK_ROWWISE(rmsnorm, lk_norm_args, XY_ROWS)
LK_ROWWISE(layernorm, lk_norm_args, XY_ROWS)
LK_ROWWISE(softmax, lk_softmax_args, XY_ROWS)
LK_ROWWISE(log_softmax, lk_softmax_args, XY_ROWS)
LK_ROWWISE(unary, lk_unary_args, XY_ROWS)
LK_ROWWISE(quantize_act, lk_quant_args,
           s.x = lk_rows(s.x, r0, r1); s.q = lk_rows(s.q, r0, r1);
           s.scale = lk_rows(s.scale, r0, r1))

static void binary_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    lk_binary_args s = *(const lk_binary_args *)p;
    if (s.b.rows == s.a.rows)
        s.b = lk_rows(s.b, r0, r1);
    s.a = lk_rows(s.a, r0, r1);
    s.y = lk_rows(s.y, r0, r1);
    lk_ref_binary(&s);
}

static lk_status ref_binary(void *q, const lk_binary_args *a)
{
    lk_cpu_for(lk_threads(q, a->a.rows, a->a.cols), a->a.rows, binary_rows, (void *)a);
    return LK_OK;
}

static void unpack_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    lk_pack_args s = *(const lk_pack_args *)p;
    s.src = lk_rows(s.src, r0, r1);
    s.dst = lk_rows(s.dst, r0, r1);
    lk_ref_ternary_unpack(&s);
}

static lk_status ref_ternary_unpack(void *q, const lk_pack_args *a)
{
    lk_cpu_for(lk_threads(q, a->src.rows, a->src.cols), a->src.rows, unpack_rows, (void *)a);
    return LK_OK;
}

/* ---- integer GEMMs: rows of x, or columns of y when M is small ---- */
static void qgemm_m(void *p, int64_t m0, int64_t m1, lk_status (*fn)(const lk_qgemm_args *))
{
    lk_qgemm_args s = *(const lk_qgemm_args *)p;
    s.x = lk_rows(s.x, m0, m1);
    s.x_scale = lk_rows(s.x_scale, m0, m1);
    s.y = lk_rows(s.y, m0, m1);
    s.m = m1 - m0;
    fn(&s);
}

static void qgemm_n(void *p, int64_t n0, int64_t n1, lk_status (*fn)(const lk_qgemm_args *))
{
    lk_qgemm_args s = *(const lk_qgemm_args *)p;
    s.w = lk_rows(s.w, n0, n1);
    if (s.w_scale.data != NULL && s.w_scale.cols != 1)
        s.w_scale = lk_cols(s.w_scale, n0, n1);
    s.y = lk_cols(s.y, n0, n1);
    s.n = n1 - n0;
    fn(&s);
}

#define LK_QGEMM(op)                                                                   \
    static void op##_m(void *p, int64_t b, int64_t e, int t) { (void)t; qgemm_m(p, b, e, lk_ref_##op); } \
    static void op##_n(void *p, int64_t b, int64_t e, int t) { (void)t; qgemm_n(p, b, e, lk_ref_##op); } \
    static lk_status ref_##op(void *q, const lk_qgemm_args *a)                         \
    {                                                                                  \
        const lk_cpu_queue *cq = (const lk_cpu_queue *)q;                              \
        double work = 2.0 * (double)a->m * (double)a->n * (double)a->k;               \
        if (a->m >= cq->nthreads)                                                      \
            lk_cpu_for(lk_cpu_threads_for(cq, work, a->m), a->m, op##_m, (void *)a);   \
        else                                                                           \
            lk_cpu_for(lk_cpu_threads_for(cq, work, a->n), a->n, op##_n, (void *)a);   \
        return LK_OK;                                                                  \
    }

LK_QGEMM(ternary_gemm)
LK_QGEMM(int8_gemm)

/* Whole-tensor ops stay on one thread: quantize_ternary's scale is a sum
 * over the tensor, and ternary_pack checks every value before it writes. */
static lk_status ref_quantize_ternary(void *q, const lk_quant_args *a)
{
    (void)q;
    return lk_ref_quantize_ternary(a);
}

static lk_status ref_ternary_pack(void *q, const lk_pack_args *a)
{
    (void)q;
    return lk_ref_ternary_pack(a);
}

void lk_cpu_ref_kernels(lk_kernels *k)
{
    k->gemm = ref_gemm;
    k->reduce = ref_reduce;
    k->rmsnorm = ref_rmsnorm;
    k->layernorm = ref_layernorm;
    k->softmax = ref_softmax;
    k->log_softmax = ref_log_softmax;
    k->unary = ref_unary;
    k->binary = ref_binary;
    k->quantize_act = ref_quantize_act;
    k->quantize_ternary = ref_quantize_ternary;
    k->ternary_pack = ref_ternary_pack;
    k->ternary_unpack = ref_ternary_unpack;
    k->ternary_gemm = ref_ternary_gemm;
    k->int8_gemm = ref_int8_gemm;
}
