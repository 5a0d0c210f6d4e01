/* Lockstep CPU driver: the reference kernels, run on the queue's threads.
 *
 * The first layer of every variant's table (variants.h) and the whole
 * table of LOCKSTEP_CPU_ISA=ref.  The reference kernels are pure functions
 * of their arguments, so each thread runs one on a slice of independent
 * outputs (rows, or columns of a GEMM): the bits are the reference's. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

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

/* ---- GEMM, both tiers: rows of C (columns of a transposed A) ---- */
typedef struct {
    const lk_gemm_args *g;
    lk_status (*kernel)(const lk_gemm_args *); /* lk_ref_gemm or lk_ref_gemm_tc */
} gemm_ctx;

static void gemm_rows(void *p, int64_t m0, int64_t m1, int tid)
{
    (void)tid;
    const gemm_ctx *c = p;
    lk_gemm_args s = *c->g;
    s.a = s.ta == LK_TRANS ? lk_cols(s.a, m0, m1) : lk_rows(s.a, m0, m1);
    s.c = lk_rows(s.c, m0, m1);
    s.m = m1 - m0;
    (void)c->kernel(&s); /* validated shapes: the reference cannot fail */
}

/* ops_per_product: what one a*b costs the kernel, for the thread count */
static lk_status gemm_on_threads(void *q, const lk_gemm_args *g,
                                 lk_status (*kernel)(const lk_gemm_args *), double ops_per_product)
{
    gemm_ctx c = {g, kernel};
    int nt = lk_cpu_threads_for((const lk_cpu_queue *)q,
                                ops_per_product * (double)g->m * (double)g->n * (double)g->k *
                                    (double)g->batch,
                                g->m);
    lk_cpu_for(nt, g->m, gemm_rows, &c);
    return LK_OK;
}

static lk_status ref_gemm(void *q, const lk_gemm_args *g)
{
    return gemm_on_threads(q, g, lk_ref_gemm, 2.0);
}

/* the tensor-core tier's CPU model: some 40 integer operations a product */
static lk_status ref_gemm_tc(void *q, const lk_gemm_args *g)
{
    return gemm_on_threads(q, g, lk_ref_gemm_tc, 80.0);
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
LK_ROWWISE(rmsnorm_quantize, lk_norm_quant_args,
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

static void glu_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    lk_glu_args s = *(const lk_glu_args *)p;
    s.gate = lk_rows(s.gate, r0, r1);
    s.up = lk_rows(s.up, r0, r1);
    s.y = lk_rows(s.y, r0, r1);
    lk_ref_glu(&s);
}

static lk_status ref_glu(void *q, const lk_glu_args *a)
{
    lk_cpu_for(lk_threads(q, a->gate.rows, a->gate.cols), a->gate.rows, glu_rows, (void *)a);
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

/* ---- the transformer ops (numerics.md section 12) ---- */
LK_ROWWISE(rope, lk_rope_args,
           s.x = lk_rows(s.x, r0, r1); s.pos = lk_rows(s.pos, r0, r1);
           s.y = lk_rows(s.y, r0, r1))

static void embedding_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    lk_embedding_args s = *(const lk_embedding_args *)p;
    s.ids = lk_rows(s.ids, r0, r1);
    s.y = lk_rows(s.y, r0, r1);
    lk_ref_embedding(&s);
}

static lk_status ref_embedding(void *q, const lk_embedding_args *a)
{
    lk_cpu_for(lk_threads(q, a->ids.rows, a->table.cols), a->ids.rows, embedding_rows,
               (void *)a);
    return LK_OK;
}

/* One thread: the rows are few (new KV-cache rows) and go in order, so
 * the last of equal indices wins. */
static lk_status ref_set_rows(void *q, const lk_set_rows_args *a)
{
    (void)q;
    return lk_ref_set_rows(a);
}

/* Matrix b of a batched tensor, as an unbatched one. */
static lk_tensor lk_batch_entry(lk_tensor t, int64_t b)
{
    if (t.data != NULL)
        t.data = (char *)t.data + b * t.batch_stride * (int64_t)lk_dtype_size(t.dtype);
    t.batch_stride = 0;
    return t;
}

/* Work items: (sequence, kv head), each with its group of query heads. */
typedef struct {
    const lk_attention_args *a;
    int failed; /* an lk_status (only out of memory), stored atomically */
} attn_ctx;

static void attention_items(void *p, int64_t i0, int64_t i1, int tid)
{
    attn_ctx *c = p;
    (void)tid;
    const lk_attention_args *a = c->a;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv;
    for (int64_t i = i0; i < i1; i++) {
        int64_t b = i / a->n_kv, g = i % a->n_kv;
        lk_attention_args s = *a;
        s.batch = 1;
        s.n_head = group;
        s.n_kv = 1;
        s.q = lk_cols(lk_batch_entry(a->q, b), g * group * hd, (g + 1) * group * hd);
        s.y = lk_cols(lk_batch_entry(a->y, b), g * group * hd, (g + 1) * group * hd);
        s.k = lk_cols(lk_batch_entry(a->k, b), g * hd, (g + 1) * hd);
        s.v = lk_cols(lk_batch_entry(a->v, b), g * hd, (g + 1) * hd);
        s.pos = lk_batch_entry(a->pos, b);
        lk_status st = lk_ref_attention(&s);
        if (st != LK_OK)
            __atomic_store_n(&c->failed, (int)st, __ATOMIC_RELAXED);
    }
}

lk_status lk_cpu_ref_attention(void *q, const lk_attention_args *a)
{
    attn_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a;
    int64_t items = a->batch * a->n_kv;
    double work = 4.0 * (double)a->batch * (double)a->tokens * (double)a->n_head *
                  (double)a->head_dim * (double)a->cache_len;
    lk_cpu_for(lk_cpu_threads_for((const lk_cpu_queue *)q, work, items), items,
               attention_items, &c);
    return (lk_status)__atomic_load_n(&c.failed, __ATOMIC_RELAXED);
}

/* Paged attention: threads over query rows. */
typedef struct {
    const lk_attention_paged_args *a;
    int failed;
} paged_ctx;

static void paged_items(void *p, int64_t i0, int64_t i1, int tid)
{
    paged_ctx *c = p;
    (void)tid;
    lk_status st = lk_ref_attention_paged_rows(c->a, i0, i1);
    if (st != LK_OK)
        __atomic_store_n(&c->failed, (int)st, __ATOMIC_RELAXED);
}

lk_status lk_cpu_ref_attention_paged(void *q, const lk_attention_paged_args *a)
{
    paged_ctx c = {a, 0};
    double work = 4.0 * (double)a->rows * (double)a->n_head * (double)a->head_dim * 1024.0;
    lk_cpu_for(lk_cpu_threads_for((const lk_cpu_queue *)q, work, a->rows), a->rows,
               paged_items, &c);
    return (lk_status)__atomic_load_n(&c.failed, __ATOMIC_RELAXED);
}

lk_status lk_cpu_ref_kv_write_paged(void *q, const lk_kv_write_paged_args *a)
{
    (void)q;
    return lk_ref_kv_write_paged(a);
}

/* ---- training ops (numerics.md section 13): rows, or columns of the
 * embedding gradient (each column adds its rows in ascending order) ---- */
LK_ROWWISE(unary_backward, lk_unary_backward_args,
           s.x = lk_rows(s.x, r0, r1); s.dy = lk_rows(s.dy, r0, r1);
           s.dx = lk_rows(s.dx, r0, r1))
LK_ROWWISE(norm_backward, lk_norm_backward_args,
           s.x = lk_rows(s.x, r0, r1); s.dy = lk_rows(s.dy, r0, r1);
           s.dx = lk_rows(s.dx, r0, r1);
           if (s.dwt.data != NULL) s.dwt = lk_rows(s.dwt, r0, r1))

static void softmax_backward_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    lk_softmax_backward_args s = *(const lk_softmax_backward_args *)p;
    (void)tid;
    s.y = lk_rows(s.y, r0, r1);
    s.dy = lk_rows(s.dy, r0, r1);
    s.dx = lk_rows(s.dx, r0, r1);
    lk_ref_softmax_backward(&s);
}

static lk_status ref_softmax_backward(void *q, const lk_softmax_backward_args *a)
{
    lk_cpu_for(lk_threads(q, a->y.rows, a->y.cols), a->y.rows, softmax_backward_rows,
               (void *)a);
    return LK_OK;
}

static void embedding_backward_cols(void *p, int64_t c0, int64_t c1, int tid)
{
    lk_embedding_backward_args s = *(const lk_embedding_backward_args *)p;
    (void)tid;
    s.dy = lk_cols(s.dy, c0, c1);
    s.dtable = lk_cols(s.dtable, c0, c1);
    lk_ref_embedding_backward(&s);
}

static lk_status ref_embedding_backward(void *q, const lk_embedding_backward_args *a)
{
    lk_cpu_for(lk_cpu_threads_for((const lk_cpu_queue *)q, (double)a->dy.rows * a->dy.cols,
                                  a->dy.cols),
               a->dy.cols, embedding_backward_cols, (void *)a);
    return LK_OK;
}

static void optim_rows(void *p, int64_t r0, int64_t r1, int tid)
{
    lk_optim_args s = *(const lk_optim_args *)p;
    (void)tid;
    s.param = lk_rows(s.param, r0, r1);
    s.grad = lk_rows(s.grad, r0, r1);
    if (s.s1.data != NULL)
        s.s1 = lk_rows(s.s1, r0, r1);
    if (s.s2.data != NULL)
        s.s2 = lk_rows(s.s2, r0, r1);
    lk_ref_optim_step(&s);
}

static lk_status ref_optim_step(void *q, const lk_optim_args *a)
{
    lk_cpu_for(lk_threads(q, a->param.rows, a->param.cols), a->param.rows, optim_rows,
               (void *)a);
    return LK_OK;
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
    k->gemm_tc = ref_gemm_tc;
    k->rope = ref_rope;
    k->attention = lk_cpu_ref_attention;
    k->embedding = ref_embedding;
    k->rmsnorm_quantize = ref_rmsnorm_quantize;
    k->set_rows = ref_set_rows;
    k->glu = ref_glu;
    k->unary_backward = ref_unary_backward;
    k->softmax_backward = ref_softmax_backward;
    k->norm_backward = ref_norm_backward;
    k->embedding_backward = ref_embedding_backward;
    k->optim_step = ref_optim_step;
}
