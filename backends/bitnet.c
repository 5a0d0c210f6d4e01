/* Lockstep backends: lk_bitnet_decode as the composition of its ops
 * (include/lockstep/bitnet.h, docs/numerics.md section 12.6), on any
 * kernel table.
 *
 * Each step is one kernel call with the normalised args the core builds
 * for the public op of the composition (core/ops_norm.c, core/weights.c,
 * core/ops_model.c, core/ops_unary.c, core/ops_binary.c): the same kernel
 * on the same arguments gives the same bits, which is the whole definition
 * of the op.  This file uses nothing of the core (no lk_error): the CUDA
 * module links it too, and a failing kernel has set its own message. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "backends/bitnet.h"
#include "core/builtin.h" /* the declaration lk_host's table is built with */

/* The intermediates of one call: views into the scratch memory. */
typedef struct bn_views {
    lk_tensor xq_dim, xq_qd, xq_ffn; /* xq with K = dim, qd, ffn columns */
    lk_tensor xs, qkv, att, gu, g, idx;
} bn_views;

static lk_tensor bn_mat(void *base, size_t off, lk_dtype dt, int64_t rows, int64_t cols,
                        int64_t ld)
{
    lk_tensor t;
    memset(&t, 0, sizeof t);
    t.data = (char *)base + off;
    t.dtype = dt;
    t.rows = rows;
    t.cols = cols;
    t.ld = ld;
    return t;
}

/* columns [c0, c0 + n) of an f32 matrix (same ld) */
static lk_tensor bn_cols(lk_tensor t, int64_t c0, int64_t n)
{
    t.data = (float *)t.data + c0;
    t.cols = n;
    return t;
}

/* One ternary projection y = xq . W^T (plus y's old value with
 * LK_GEMM_ACCUMULATE), as lk_ternary_linear builds it: the prepared kernel,
 * or ternary_gemm on the core's copy, which takes the flag itself (one f32
 * add of y's old value first: numerics.md section 9). */
static lk_status bn_project(const lk_kernels *k, void *queue, const lk_bitnet_weight_args *w,
                            const lk_tensor *xq, const lk_tensor *xs, const lk_tensor *y,
                            unsigned flags)
{
    if (w->prepared) {
        lk_linear_args a;
        memset(&a, 0, sizeof a);
        a.m = xq->rows;
        a.n = y->cols;
        a.k = xq->cols;
        a.flags = flags;
        a.prepared = w->prepared;
        a.w_dtype = LK_T2;
        a.x = *xq;
        a.x_scale = *xs;
        a.y = *y;
        return k->ternary_linear(queue, &a);
    }
    lk_qgemm_args g;
    memset(&g, 0, sizeof g);
    g.m = xq->rows;
    g.n = y->cols;
    g.k = xq->cols;
    g.x = *xq;
    g.x_scale = *xs;
    g.w = w->w;
    g.w_scale = w->w_scale;
    g.y = *y;
    g.flags = flags;
    return k->ternary_gemm(queue, &g);
}

/* lk_rmsnorm_ternary_linear(x, nw, eps, xq, xs, w, y, flags) through its
 * two steps. */
static lk_status bn_norm_project(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                                 const lk_tensor *x, const lk_tensor *nw, const lk_tensor *xq,
                                 const lk_tensor *xs, const lk_bitnet_weight_args *w,
                                 const lk_tensor *y, unsigned flags)
{
    lk_norm_quant_args n;
    memset(&n, 0, sizeof n);
    n.x = *x;
    n.weight = *nw;
    n.q = *xq;
    n.scale = *xs;
    n.eps = a->eps;
    lk_status st = k->rmsnorm_quantize(queue, &n);
    return st != LK_OK ? st : bn_project(k, queue, w, xq, xs, y, flags);
}

/* Layer l: the eight steps of include/lockstep/bitnet.h. */
static lk_status bn_layer(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                          const lk_bitnet_layer_args *L, const bn_views *s)
{
    const int64_t B = a->batch, hd = a->head_dim;
    const int64_t qd = a->n_head * hd, kvd = a->n_kv * hd, w3 = qd + 2 * kvd;
    const int batched = B > 1; /* the core keeps batch strides only then */
    lk_status st;

    st = bn_norm_project(k, queue, a, &a->x, &L->attn_norm, &s->xq_dim, &s->xs, &L->qkv,
                         &s->qkv, 0);
    if (st != LK_OK)
        return st;

    lk_rope_args r; /* q and k in place */
    memset(&r, 0, sizeof r);
    r.x = bn_cols(s->qkv, 0, qd + kvd);
    r.pos = a->pos;
    r.y = r.x;
    r.head_dim = hd;
    r.theta = a->theta;
    r.flags = a->rope_flags;
    if ((st = k->rope(queue, &r)) != LK_OK)
        return st;

    lk_set_rows_args c; /* k and v into the cache rows b ctx + pos[b] */
    memset(&c, 0, sizeof c);
    c.src = bn_cols(s->qkv, qd, 2 * kvd);
    c.idx = s->idx;
    c.dst = L->kv;
    if ((st = k->set_rows(queue, &c)) != LK_OK)
        return st;

    /* one token of each sequence against its own ctx rows of the cache:
     * lk_attention with batch B, as examples/bitnet/model.c calls it */
    lk_attention_args t;
    memset(&t, 0, sizeof t);
    t.batch = B;
    t.tokens = 1;
    t.n_head = a->n_head;
    t.n_kv = a->n_kv;
    t.head_dim = hd;
    t.cache_len = a->ctx;
    t.scale = a->attn_scale;
    t.q = bn_cols(s->qkv, 0, qd);
    t.q.rows = 1;
    t.k = L->kv;
    t.k.rows = a->ctx;
    t.k.cols = kvd;
    t.k.batch_stride = 0;
    t.v = bn_cols(t.k, kvd, kvd);
    t.pos = a->pos;
    t.pos.rows = 1;
    t.y = s->att;
    t.y.rows = 1;
    if (batched) {
        t.q.batch_stride = w3;
        t.k.batch_stride = t.v.batch_stride = a->ctx * L->kv.ld;
        t.pos.batch_stride = a->pos.ld;
        t.y.batch_stride = qd;
    }
    if ((st = k->attention(queue, &t)) != LK_OK)
        return st;

    st = bn_norm_project(k, queue, a, &s->att, &L->attn_sub_norm, &s->xq_qd, &s->xs, &L->o,
                         &a->x, LK_GEMM_ACCUMULATE);
    if (st != LK_OK)
        return st;
    st = bn_norm_project(k, queue, a, &a->x, &L->ffn_norm, &s->xq_dim, &s->xs, &L->gate_up,
                         &s->gu, 0);
    if (st != LK_OK)
        return st;

    lk_glu_args u; /* relu(gate)^2 * up */
    memset(&u, 0, sizeof u);
    u.op = LK_UNARY_RELU2;
    u.gate = bn_cols(s->gu, 0, a->ffn);
    u.up = bn_cols(s->gu, a->ffn, a->ffn);
    u.y = s->g;
    if ((st = k->glu(queue, &u)) != LK_OK)
        return st;

    return bn_norm_project(k, queue, a, &s->g, &L->ffn_sub_norm, &s->xq_ffn, &s->xs, &L->down,
                           &a->x, LK_GEMM_ACCUMULATE);
}

lk_status lk_bitnet_compose(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                            int idx_ready)
{
    lk_bitnet_layout L;
    if (a->n_layers <= 0)
        return LK_OK;
    /* the core sized the scratch with this very layout: it cannot fail */
    if (!lk_bitnet_layout_of(a->batch, a->dim, a->n_head, a->n_kv, a->head_dim, a->ffn, &L) ||
        a->scratch_bytes < L.total)
        return LK_ERR_INTERNAL;
    const int64_t B = a->batch, qd = a->n_head * a->head_dim, kvd = a->n_kv * a->head_dim;
    void *m = a->scratch;
    bn_views s;
    s.xq_dim = bn_mat(m, L.xq, LK_I8, B, a->dim, L.kq);
    s.xq_qd = bn_mat(m, L.xq, LK_I8, B, qd, L.kq);
    s.xq_ffn = bn_mat(m, L.xq, LK_I8, B, a->ffn, L.kq);
    s.xs = bn_mat(m, L.xs, LK_F32, B, 1, 1);
    s.qkv = bn_mat(m, L.qkv, LK_F32, B, qd + 2 * kvd, qd + 2 * kvd);
    s.att = bn_mat(m, L.att, LK_F32, B, qd, qd);
    s.gu = bn_mat(m, L.gu, LK_F32, B, 2 * a->ffn, 2 * a->ffn);
    s.g = bn_mat(m, L.g, LK_F32, B, a->ffn, a->ffn);
    s.idx = bn_mat(m, L.idx, LK_I32, B, 1, 1);
    if (!idx_ready) { /* host memory: the positions were checked in [0, ctx) */
        const int32_t *pos = a->pos.data;
        int32_t *idx = s.idx.data;
        for (int64_t b = 0; b < B; b++)
            idx[b] = (int32_t)(b * a->ctx + pos[b * a->pos.ld]);
    }
    for (int64_t l = 0; l < a->n_layers; l++) {
        lk_status st = bn_layer(k, queue, a, &a->layers[l], &s);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}
