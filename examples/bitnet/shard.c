/* BitNet example: the decoder split across ranks (shard.h).  The ops are
 * those of model.c in the same order, on this rank's share of each
 * tensor; the collectives fill in the rest. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard.h"

typedef struct sh_tern {
    void *codes;
    float *scale;   /* one per row */
    int64_t rows, cols;
    lk_weights *prep;
} sh_tern;

typedef struct sh_layer {
    float *attn_norm, *attn_sub_norm, *ffn_norm, *ffn_sub_norm;
    sh_tern qkv, o, gu, down;
    float *kvc;     /* max_b * max_ctx rows of k | v, this rank's heads */
} sh_layer;

struct bn_shard {
    lk_comm *comm;
    lk_device *dev;
    lk_queue *q;
    int host, rank, size, mode;
    bn_config c;
    int64_t max_b, max_t, micro;
    /* shares: [lo, hi) of each split dimension (TP), layers (PP) */
    int64_t kv0, kv1, d0, d1, f0, f1, v0, v1, l0, l1;
    int64_t qd_r, kvd_r, f_r, d_r, v_r;
    void **allocs;
    int nalloc, capalloc;
    void **hbufs;
    int nhbuf;
    void *embd, *head, *out_norm;
    lk_weights *head_prep;
    sh_layer *L;
    float *x, *qkv, *att_r, *att, *gu, *g_r, *g, *tmp, *xn, *logits, *lgr;
    int8_t *xq;
    float *xs;
    int32_t *ids, *pos, *kvi, *h_ids, *h_pos, *h_kvi, *nextd;
    int64_t *am, *h_am;
    int64_t last_b;
    double wbytes;
    /* BN_GRAPH with NCCL (TP): each batch size's decode layers as one
     * captured graph, made at its second decode step (the first, eager,
     * sizes the transport's scratch); the head runs eagerly after */
    int graphs;
    lk_graph **step;
    char *warm;
    unsigned flags;
};

/* ------------------------------------------------------------ memory */

static void *dalloc(bn_shard *s, size_t bytes)
{
    void *p = NULL;
    if (s->nalloc == s->capalloc) {
        int cap = s->capalloc ? s->capalloc * 2 : 64;
        void **a = realloc(s->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        s->allocs = a;
        s->capalloc = cap;
    }
    if (lk_malloc(s->dev, bytes ? bytes : 1, &p) != LK_OK)
        return NULL;
    s->allocs[s->nalloc++] = p;
    return p;
}

/* A host buffer kept until destroy (host devices read it in place). */
static void *hkeep(bn_shard *s, void *p)
{
    void **h = p ? realloc(s->hbufs, (size_t)(s->nhbuf + 1) * sizeof *h) : NULL;
    if (!h) {
        free(p);
        return NULL;
    }
    s->hbufs = h;
    s->hbufs[s->nhbuf++] = p;
    return p;
}

static void *upload(bn_shard *s, const void *host, size_t bytes)
{
    if (s->host)
        return (void *)(uintptr_t)host;
    void *p = dalloc(s, bytes);
    if (p && bytes && lk_memcpy(s->q, p, host, bytes, LK_COPY_HOST_TO_DEVICE) != LK_OK)
        return NULL;
    return p;
}

/* Rows [r0, r1) of each part, stacked, one scale per row, on the device. */
static int stack(bn_shard *s, const lkg_ternary *const *parts, const int64_t *r0,
                 const int64_t *r1, int np, sh_tern *out)
{
    const int64_t ld = parts[0]->ld;
    const size_t rb = (size_t)(ld / 4);
    int64_t rows = 0;
    for (int i = 0; i < np; i++)
        rows += r1[i] - r0[i];
    /* host devices read these in place; others get a copy, and the host
     * buffers go once it is made (a large model's share is not held
     * twice) */
    uint8_t *codes = malloc((size_t)rows * rb + 1);
    float *scale = malloc((size_t)rows * 4 + 4);
    if (s->host) {
        codes = hkeep(s, codes);
        scale = hkeep(s, scale);
    }
    if (!codes || !scale) {
        if (!s->host)
            free(codes), free(scale);
        return -1;
    }
    int64_t o = 0;
    for (int i = 0; i < np; i++) {
        const lkg_ternary *t = parts[i];
        memcpy(codes + (size_t)o * rb, t->codes + (size_t)r0[i] * rb, (size_t)(r1[i] - r0[i]) * rb);
        for (int64_t r = r0[i]; r < r1[i]; r++)
            scale[o++] = t->scale[t->nscale == 1 ? 0 : r];
    }
    out->rows = rows;
    out->cols = parts[0]->cols;
    s->wbytes += (double)rows * (double)rb;
    int ok = 1;
    if (rows) {
        out->codes = upload(s, codes, (size_t)rows * rb);
        out->scale = upload(s, scale, (size_t)rows * 4);
        ok = out->codes && out->scale;
    }
    if (!s->host) {
        ok = ok && lk_queue_sync(s->q) == LK_OK;
        free(codes);
        free(scale);
    }
    return ok ? 0 : -1;
}

static void prepare(bn_shard *s, sh_tern *t)
{
    if (!t->rows)
        return;
    lk_tensor w = lk_mat_ld(t->codes, LK_T2, t->rows, t->cols, (t->cols + 3) / 4 * 4);
    lk_tensor sc = lk_mat(t->scale, LK_F32, 1, t->rows);
    if (lk_weights_prepare(s->q, &w, &sc, &t->prep) != LK_OK)
        t->prep = NULL;
}

void bn_shard_destroy(bn_shard *s)
{
    if (!s)
        return;
    if (s->q)
        lk_queue_sync(s->q);
    for (int64_t l = 0; s->L && l < s->c.n_layer; l++) {
        sh_tern *t[4] = {&s->L[l].qkv, &s->L[l].o, &s->L[l].gu, &s->L[l].down};
        for (int i = 0; i < 4; i++)
            lk_weights_destroy(t[i]->prep);
    }
    lk_weights_destroy(s->head_prep);
    for (int64_t b = 0; s->step && b < s->max_b; b++)
        lk_graph_destroy(s->step[b]);
    free(s->step);
    free(s->warm);
    if (s->q)
        lk_queue_destroy(s->q);
    for (int i = 0; i < s->nalloc; i++)
        lk_free(s->dev, s->allocs[i]);
    for (int i = 0; i < s->nhbuf; i++)
        free(s->hbufs[i]);
    free(s->allocs);
    free(s->hbufs);
    free(s->L);
    free(s->h_ids), free(s->h_pos), free(s->h_kvi), free(s->h_am);
    free(s);
}

static int fail(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    snprintf(err, errlen, fmt, a, b);
    return -1;
}

/* ------------------------------------------------------------ create */

int bn_shard_create(lk_comm *comm, lk_device *dev, int threads, const bn_weights *w, int mode,
                    int64_t max_batch, int64_t max_tokens, int64_t micro, unsigned flags,
                    bn_shard **out, char *err, size_t errlen)
{
    const bn_config *c = &w->cfg;
    lk_device_props props;
    if (mode != BN_SHARD_TP && mode != BN_SHARD_PP)
        return fail(err, errlen, "bn_shard_create: mode is BN_SHARD_TP or BN_SHARD_PP%s%s", "", "");
    bn_shard *s = calloc(1, sizeof *s);
    if (!s)
        return fail(err, errlen, "out of memory%s%s", "", "");
    s->comm = comm, s->dev = dev, s->mode = mode, s->c = *c, s->flags = flags;
    s->max_b = max_batch, s->max_t = max_tokens;
    s->micro = mode == BN_SHARD_PP ? (micro < 1 ? 1 : micro > max_batch ? max_batch : micro) : 1;
    s->rank = lk_comm_rank(comm), s->size = lk_comm_size(comm);
    /* the communicator's queue: on GPUs its collectives need no sync */
    if (lk_device_props_get(dev, &props) != LK_OK ||
        lk_comm_queue_create(comm, threads, &s->q) != LK_OK) {
        fail(err, errlen, "%s%s", lk_last_error(), "");
        bn_shard_destroy(s);
        return -1;
    }
    s->host = props.host_memory;
    const int64_t N = mode == BN_SHARD_TP ? s->size : 1, r = mode == BN_SHARD_TP ? s->rank : 0;
    const int64_t g = c->n_head / c->n_kv, hd = c->head_dim;
    s->kv0 = c->n_kv * r / N, s->kv1 = c->n_kv * (r + 1) / N;
    s->d0 = c->dim * r / N, s->d1 = c->dim * (r + 1) / N;
    s->f0 = c->ffn * r / N, s->f1 = c->ffn * (r + 1) / N;
    s->v0 = c->vocab * r / N, s->v1 = c->vocab * (r + 1) / N;
    if (mode == BN_SHARD_PP) {
        s->l0 = c->n_layer * s->rank / s->size, s->l1 = c->n_layer * (s->rank + 1) / s->size;
    } else {
        s->l0 = 0, s->l1 = c->n_layer;
    }
    s->kvd_r = (s->kv1 - s->kv0) * hd, s->qd_r = s->kvd_r * g;
    s->f_r = s->f1 - s->f0, s->d_r = s->d1 - s->d0, s->v_r = s->v1 - s->v0;
    const int64_t qd = c->n_head * hd, M = max_batch * max_tokens;
    const int64_t wide = c->ffn > c->dim ? (c->ffn > qd ? c->ffn : qd) : (c->dim > qd ? c->dim : qd);
    const int first = mode == BN_SHARD_TP || s->rank == 0;
    const int last = mode == BN_SHARD_TP || s->rank == s->size - 1;
    int ok = (s->L = calloc((size_t)c->n_layer, sizeof *s->L)) != NULL;
    ok = ok && (s->h_ids = malloc((size_t)M * 4)) && (s->h_pos = malloc((size_t)M * 4)) &&
         (s->h_kvi = malloc((size_t)M * 4)) && (s->h_am = malloc((size_t)max_batch * 8));
    const size_t eb = (size_t)(c->vocab * c->dim) * 2;
    if (ok && first)
        ok = (s->embd = upload(s, w->embd, eb)) != NULL;
    if (ok && last) {
        const uint16_t *h = w->lm_head ? w->lm_head : w->embd;
        const size_t hb = (size_t)(s->v_r * c->dim) * 2;
        s->wbytes += (double)hb;
        ok = (s->head = s->host ? (void *)(uintptr_t)(h + s->v0 * c->dim)
                                : upload(s, h + s->v0 * c->dim, hb)) != NULL;
        ok = ok && (s->out_norm = upload(s, w->out_norm, (size_t)c->dim * 4));
    }
    for (int64_t l = s->l0; ok && l < s->l1; l++) {
        const bn_layer_w *L = &w->layers[l];
        sh_layer *D = &s->L[l];
        ok = (D->attn_norm = upload(s, L->attn_norm, (size_t)c->dim * 4)) &&
             (D->attn_sub_norm = upload(s, L->attn_sub_norm, (size_t)qd * 4)) &&
             (D->ffn_norm = upload(s, L->ffn_norm, (size_t)c->dim * 4)) &&
             (D->ffn_sub_norm = upload(s, L->ffn_sub_norm, (size_t)c->ffn * 4));
        const lkg_ternary *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->wgate, &L->wup};
        const int64_t q0[3] = {s->kv0 * g * hd, s->kv0 * hd, s->kv0 * hd};
        const int64_t q1[3] = {s->kv1 * g * hd, s->kv1 * hd, s->kv1 * hd};
        const int64_t fl[2] = {s->f0, s->f0}, fh[2] = {s->f1, s->f1};
        const lkg_ternary *o = &L->wo, *dn = &L->wdown;
        ok = ok && !stack(s, qkv, q0, q1, 3, &D->qkv) && !stack(s, gu, fl, fh, 2, &D->gu) &&
             !stack(s, &o, &s->d0, &s->d1, 1, &D->o) && !stack(s, &dn, &s->d0, &s->d1, 1, &D->down);
        ok = ok && (D->kvc = dalloc(s, (size_t)(max_batch * c->max_ctx * 2 * s->kvd_r) * 4));
        if (ok && (flags & BN_PREPARED)) {
            prepare(s, &D->qkv), prepare(s, &D->o), prepare(s, &D->gu), prepare(s, &D->down);
        }
    }
    ok = ok && (s->x = dalloc(s, (size_t)(M * c->dim) * 4));
    ok = ok && (s->qkv = dalloc(s, (size_t)(M * (s->qd_r + 2 * s->kvd_r)) * 4));
    ok = ok && (s->att_r = dalloc(s, (size_t)(M * s->qd_r) * 4));
    ok = ok && (s->att = dalloc(s, (size_t)(M * qd) * 4));
    ok = ok && (s->gu = dalloc(s, (size_t)(M * 2 * s->f_r) * 4));
    ok = ok && (s->g_r = dalloc(s, (size_t)(M * s->f_r) * 4));
    ok = ok && (s->g = dalloc(s, (size_t)(M * c->ffn) * 4));
    ok = ok && (s->tmp = dalloc(s, (size_t)(M * c->dim) * 4));
    ok = ok && (s->xn = dalloc(s, (size_t)(max_batch * c->dim) * 4));
    ok = ok && (s->logits = dalloc(s, (size_t)(max_batch * (s->v_r ? s->v_r : 1)) * 4));
    if (ok && mode == BN_SHARD_TP && s->rank == 0)
        ok = (s->lgr = dalloc(s, (size_t)(max_batch * (c->vocab / s->size + 1)) * 4)) != NULL;
    ok = ok && (s->xq = dalloc(s, (size_t)(M * wide)));
    ok = ok && (s->xs = dalloc(s, (size_t)M * 4));
    ok = ok && (s->ids = dalloc(s, (size_t)M * 4));
    ok = ok && (s->pos = dalloc(s, (size_t)M * 4));
    ok = ok && (s->kvi = dalloc(s, (size_t)M * 4));
    ok = ok && (s->nextd = dalloc(s, (size_t)max_batch * 4));
    ok = ok && (s->am = dalloc(s, (size_t)max_batch * 8));
    /* graphs hold the collectives only where NCCL enqueues them on the
     * queue's stream (MPI's run on the host and cannot be replayed); one
     * rank's layers have none */
    s->graphs = (flags & BN_GRAPH) && mode == BN_SHARD_TP &&
                (s->size == 1 || !strcmp(lk_comm_transport(comm), "nccl"));
    if (ok && s->graphs)
        ok = (s->step = calloc((size_t)max_batch, sizeof *s->step)) &&
             (s->warm = calloc((size_t)max_batch, 1));
    if (ok && last && (flags & BN_PREPARED) && s->v_r) {
        lk_tensor h = lk_mat(s->head, LK_BF16, s->v_r, c->dim);
        if (lk_weights_prepare(s->q, &h, NULL, &s->head_prep) != LK_OK)
            s->head_prep = NULL;
    }
    if (!ok || lk_queue_sync(s->q) != LK_OK) {
        snprintf(err, errlen, "%s: cannot hold this rank's shard (%s)", lk_device_name(dev),
                 lk_last_error()[0] ? lk_last_error() : "out of memory");
        bn_shard_destroy(s);
        return -1;
    }
    *out = s;
    return 0;
}

int bn_shard_graphs(const bn_shard *s)
{
    return s->graphs;
}

void bn_shard_describe(const bn_shard *s, char *buf, size_t len)
{
    if (s->mode == BN_SHARD_TP)
        snprintf(buf, len, "rank %d of %d on %s: %lld KV heads from %lld, hidden rows "
                 "%lld..%lld, FFN rows %lld..%lld, vocabulary %lld..%lld, %.1f MB of weights",
                 s->rank, s->size, lk_device_name(s->dev), (long long)(s->kv1 - s->kv0),
                 (long long)s->kv0,
                 (long long)s->d0, (long long)s->d1 - 1, (long long)s->f0, (long long)s->f1 - 1,
                 (long long)s->v0, (long long)s->v1 - 1, s->wbytes / 1e6);
    else
        snprintf(buf, len, "rank %d of %d on %s: layers %lld..%lld%s%s, %.1f MB of weights, "
                 "%lld micro-batches", s->rank, s->size, lk_device_name(s->dev), (long long)s->l0,
                 (long long)s->l1 - 1, s->rank == 0 ? ", embedding" : "",
                 s->rank == s->size - 1 ? ", head" : "", s->wbytes / 1e6, (long long)s->micro);
}

double bn_shard_weight_bytes(const bn_shard *s)
{
    return s->wbytes;
}

/* ------------------------------------------------------------ forward */

#define TRY(call)                                                                       \
    do {                                                                                \
        lk_status st_ = (call);                                                         \
        if (st_ != LK_OK) {                                                             \
            snprintf(err, errlen, "rank %d: %s: %s: %s: %s", s->rank,                   \
                     lk_device_name(s->dev), #call, lk_status_string(st_), lk_last_error()); \
            return -1;                                                                  \
        }                                                                               \
    } while (0)

/* y (M x t->rows) = BitLinear(rmsnorm(x) * nw), or y += it (LK_GEMM_ACCUMULATE),
 * as model.c's bitlinear. */
static int bitlinear(bn_shard *s, const lk_tensor *x, const float *nw, int64_t M,
                     const sh_tern *t, const lk_tensor *y, unsigned flags, char *err,
                     size_t errlen)
{
    if (!t->rows)
        return 0;
    lk_tensor xq = lk_mat(s->xq, LK_I8, M, x->cols), xs = lk_mat(s->xs, LK_F32, M, 1);
    lk_tensor nt = lk_mat(nw, LK_F32, 1, x->cols);
    if (t->prep) {
        TRY(lk_rmsnorm_ternary_linear(s->q, x, &nt, s->c.eps, &xq, &xs, t->prep, y, flags));
        return 0;
    }
    lk_tensor wt = lk_mat_ld(t->codes, LK_T2, t->rows, t->cols, (t->cols + 3) / 4 * 4);
    lk_tensor ws = lk_mat(t->scale, LK_F32, 1, t->rows);
    TRY(lk_rmsnorm_quantize(s->q, x, &nt, s->c.eps, &xq, &xs));
    if (flags & LK_GEMM_ACCUMULATE) {
        lk_tensor tmp = lk_mat(s->tmp, LK_F32, M, t->rows);
        TRY(lk_ternary_gemm(s->q, &xq, &xs, &wt, &ws, &tmp));
        TRY(lk_binary(s->q, LK_BINARY_ADD, y, &tmp, y));
    } else {
        TRY(lk_ternary_gemm(s->q, &xq, &xs, &wt, &ws, y));
    }
    return 0;
}

/* x's columns [d0, d1) updated here: the whole of x on every rank. */
static int gather_x(bn_shard *s, int64_t M, char *err, size_t errlen)
{
    if (s->mode != BN_SHARD_TP || s->size == 1)
        return 0;
    lk_tensor part = lk_mat_ld(s->x + s->d0, LK_F32, M, s->d_r, s->c.dim);
    lk_tensor all = lk_mat(s->x, LK_F32, M, s->c.dim);
    TRY(lk_comm_all_gather(s->comm, s->q, &part, &all));
    return 0;
}

/* Layer l on the M = B * T rows of x of sequences seq0 .. seq0 + B - 1
 * (the cache rows m->kvi holds), attention over cache_len positions. */
static int layer(bn_shard *s, int64_t l, int64_t B, int64_t T, int64_t seq0, int64_t cache_len,
                 char *err, size_t errlen)
{
    const bn_config *c = &s->c;
    const int64_t M = B * T, qd = c->n_head * c->head_dim, w3 = s->qd_r + 2 * s->kvd_r;
    const int tp = s->mode == BN_SHARD_TP && s->size > 1;
    sh_layer *D = &s->L[l];
    lk_tensor x = lk_mat(s->x, LK_F32, M, c->dim);
    lk_tensor qkv = lk_mat(s->qkv, LK_F32, M, w3);
    lk_tensor att_r = lk_mat(s->att_r, LK_F32, M, s->qd_r), att = lk_mat(s->att, LK_F32, M, qd);
    if (!tp)
        att = att_r;
    if (s->kvd_r) {
        if (bitlinear(s, &x, D->attn_norm, M, &D->qkv, &qkv, 0, err, errlen))
            return -1;
        lk_tensor qr = lk_mat_ld(s->qkv, LK_F32, M, s->qd_r + s->kvd_r, w3);
        lk_tensor pos = lk_mat(s->pos, LK_I32, M, 1);
        TRY(lk_rope(s->q, &qr, &pos, c->head_dim, c->theta, c->rope_flags, &qr));
        lk_tensor src = lk_mat_ld(s->qkv + s->qd_r, LK_F32, M, 2 * s->kvd_r, w3);
        lk_tensor idx = lk_mat(s->kvi, LK_I32, M, 1);
        lk_tensor dst = lk_mat(D->kvc, LK_F32, s->max_b * c->max_ctx, 2 * s->kvd_r);
        TRY(lk_set_rows(s->q, &src, &idx, &dst));
        lk_tensor qa = lk_mat_ld(s->qkv, LK_F32, T, s->qd_r, w3), oa = att_r;
        oa.rows = T;
        qa.batch_stride = T * w3;
        oa.batch_stride = T * s->qd_r;
        float *kv = D->kvc + seq0 * c->max_ctx * 2 * s->kvd_r;
        lk_tensor kc = lk_mat_ld(kv, LK_F32, cache_len, s->kvd_r, 2 * s->kvd_r);
        lk_tensor vc = lk_mat_ld(kv + s->kvd_r, LK_F32, cache_len, s->kvd_r, 2 * s->kvd_r);
        kc.batch_stride = vc.batch_stride = c->max_ctx * 2 * s->kvd_r;
        lk_tensor pa = lk_mat(s->pos, LK_I32, T, 1);
        pa.batch_stride = T;
        TRY(lk_attention(s->q, &qa, &kc, &vc, &pa, s->kvd_r / c->head_dim * (c->n_head / c->n_kv),
                         s->kvd_r / c->head_dim, 1.0f / sqrtf((float)c->head_dim), &oa, B));
    }
    if (tp)
        TRY(lk_comm_all_gather(s->comm, s->q, &att_r, &att));
    lk_tensor xr = lk_mat_ld(s->x + s->d0, LK_F32, M, s->d_r, c->dim);
    if (bitlinear(s, &att, D->attn_sub_norm, M, &D->o, &xr, LK_GEMM_ACCUMULATE, err, errlen) ||
        gather_x(s, M, err, errlen))
        return -1;
    lk_tensor gu = lk_mat(s->gu, LK_F32, M, 2 * s->f_r);
    lk_tensor gv = lk_mat_ld(s->gu, LK_F32, M, s->f_r, 2 * s->f_r);
    lk_tensor uv = lk_mat_ld(s->gu + s->f_r, LK_F32, M, s->f_r, 2 * s->f_r);
    lk_tensor g_r = lk_mat(s->g_r, LK_F32, M, s->f_r), g = lk_mat(s->g, LK_F32, M, c->ffn);
    if (!tp)
        g = g_r;
    if (s->f_r) {
        if (bitlinear(s, &x, D->ffn_norm, M, &D->gu, &gu, 0, err, errlen))
            return -1;
        TRY(lk_glu(s->q, LK_UNARY_RELU2, &gv, &uv, &g_r));
    }
    if (tp)
        TRY(lk_comm_all_gather(s->comm, s->q, &g_r, &g));
    if (bitlinear(s, &g, D->ffn_sub_norm, M, &D->down, &xr, LK_GEMM_ACCUMULATE, err, errlen) ||
        gather_x(s, M, err, errlen))
        return -1;
    return 0;
}

/* The head on the last token of each of B sequences: this rank's
 * vocabulary rows of the logits, and the argmax over every rank's (TP) or
 * this rank's (PP, the whole vocabulary) into am[a0 ..]. */
static int head(bn_shard *s, int64_t B, int64_t T, int64_t a0, char *err, size_t errlen)
{
    const bn_config *c = &s->c;
    lk_tensor xl = lk_mat_ld(s->x + (T - 1) * c->dim, LK_F32, B, c->dim, T * c->dim);
    lk_tensor xo = lk_mat(s->xn, LK_F32, B, c->dim);
    lk_tensor on = lk_mat(s->out_norm, LK_F32, 1, c->dim);
    lk_tensor lg = lk_mat(s->logits + a0 * s->v_r, LK_F32, B, s->v_r);
    lk_tensor am = lk_mat(s->am + a0, LK_I64, B, 1);
    TRY(lk_rmsnorm(s->q, &xl, &on, c->eps, &xo));
    if (s->v_r) {
        lk_tensor hw = lk_mat(s->head, LK_BF16, s->v_r, c->dim);
        if (s->head_prep)
            TRY(lk_linear(s->q, &xo, s->head_prep, NULL, &lg, 0));
        else
            TRY(lk_gemm(s->q, LK_NO_TRANS, LK_TRANS, &xo, &hw, NULL, &lg, 1, 0));
    }
    if (s->mode == BN_SHARD_TP && s->size > 1)
        TRY(lk_comm_argmax(s->comm, s->q, &lg, &am));
    else
        TRY(lk_reduce(s->q, LK_REDUCE_ARGMAX, &lg, &am));
    return 0;
}

int bn_shard_forward(bn_shard *s, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                     int32_t *next, char *err, size_t errlen)
{
    const bn_config *c = &s->c;
    const int64_t M = B * T;
    if (B < 1 || T < 1 || B > s->max_b || T > s->max_t || pos0 < 0 || pos0 + T > c->max_ctx) {
        snprintf(err, errlen, "batch %lld x %lld tokens at %lld does not fit the shard",
                 (long long)B, (long long)T, (long long)pos0);
        return -1;
    }
    for (int64_t r = 0; r < M; r++) {
        if (ids[r] < 0 || ids[r] >= c->vocab) {
            snprintf(err, errlen, "token id %d is outside the vocabulary (%lld)", ids[r],
                     (long long)c->vocab);
            return -1;
        }
        s->h_ids[r] = ids[r];
        s->h_pos[r] = (int32_t)(pos0 + r % T);
        s->h_kvi[r] = (int32_t)(r / T * c->max_ctx + pos0 + r % T);
    }
    TRY(lk_memcpy(s->q, s->ids, s->h_ids, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    TRY(lk_memcpy(s->q, s->pos, s->h_pos, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    TRY(lk_memcpy(s->q, s->kvi, s->h_kvi, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    lk_tensor emb = lk_mat(s->embd, LK_BF16, c->vocab, c->dim);
    if (s->mode == BN_SHARD_TP) {
        lk_tensor idt = lk_mat(s->ids, LK_I32, M, 1), x = lk_mat(s->x, LK_F32, M, c->dim);
        const int graph = s->graphs && T == 1 && (s->step[B - 1] || s->warm[B - 1]);
        if (graph && !s->step[B - 1]) {
            /* capture the layers over the whole cache (positions decide
             * which rows attention reads: the same bits) */
            TRY(lk_queue_capture_begin(s->q));
            int bad = lk_embedding(s->q, &emb, &idt, &x) != LK_OK;
            if (bad)
                snprintf(err, errlen, "rank %d: lk_embedding in a capture: %s", s->rank,
                         lk_last_error());
            for (int64_t l = 0; l < c->n_layer && !bad; l++)
                bad = layer(s, l, B, T, 0, c->max_ctx, err, errlen);
            lk_graph *g = NULL;
            lk_status st = lk_queue_capture_end(s->q, &g);
            if (bad || st != LK_OK) {
                lk_graph_destroy(g);
                if (!bad)
                    snprintf(err, errlen, "rank %d: lk_queue_capture_end: %s", s->rank,
                             lk_last_error());
                return -1;
            }
            s->step[B - 1] = g;
        }
        if (graph) {
            TRY(lk_graph_launch(s->step[B - 1], s->q));
        } else {
            TRY(lk_embedding(s->q, &emb, &idt, &x));
            for (int64_t l = 0; l < c->n_layer; l++)
                if (layer(s, l, B, T, 0, pos0 + T, err, errlen))
                    return -1;
            if (s->graphs && T == 1)
                s->warm[B - 1] = 1;
        }
        if (head(s, B, T, 0, err, errlen))
            return -1;
    } else {
        /* micro-batches of sequences [b0, b1): rows b0 * T .., their own
         * cache rows (kvi) and positions; x holds each in its rows */
        const int first = s->rank == 0, last = s->rank == s->size - 1;
        const int64_t nm = s->micro < B ? s->micro : B;
        for (int64_t mb = 0; mb < nm; mb++) {
            const int64_t b0 = B * mb / nm, b1 = B * (mb + 1) / nm, Bm = b1 - b0, Mm = Bm * T;
            lk_tensor x = lk_mat(s->x + b0 * T * c->dim, LK_F32, Mm, c->dim);
            if (first) {
                lk_tensor idt = lk_mat(s->ids + b0 * T, LK_I32, Mm, 1);
                TRY(lk_embedding(s->q, &emb, &idt, &x));
            } else {
                TRY(lk_comm_recv(s->comm, s->q, &x, s->rank - 1));
            }
            /* the layers read pos / kvi from row 0 and x from row 0: move
             * the views by pointing the buffers at the micro-batch */
            float *x0 = s->x;
            int32_t *p0 = s->pos, *k0 = s->kvi;
            s->x = x0 + b0 * T * c->dim, s->pos = p0 + b0 * T, s->kvi = k0 + b0 * T;
            int bad = 0;
            for (int64_t l = s->l0; l < s->l1 && !bad; l++)
                bad = layer(s, l, Bm, T, b0, pos0 + T, err, errlen);
            if (!bad && last)
                bad = head(s, Bm, T, b0, err, errlen);
            s->x = x0, s->pos = p0, s->kvi = k0;
            if (bad)
                return -1;
            if (!last)
                TRY(lk_comm_send(s->comm, s->q, &x, s->rank + 1));
        }
        /* the next tokens from the last rank to every rank */
        if (last) {
            TRY(lk_memcpy(s->q, s->h_am, s->am, (size_t)B * 8, LK_COPY_DEVICE_TO_HOST));
            TRY(lk_queue_sync(s->q));
            for (int64_t b = 0; b < B; b++)
                s->h_ids[b] = (int32_t)s->h_am[b];
        }
        lk_tensor nh = lk_mat(s->h_ids, LK_I32, B, 1);
        lk_queue *hq = s->q;
        if (!s->host) {
            /* the broadcast moves device tensors: go through nextd */
            TRY(lk_memcpy(s->q, s->nextd, s->h_ids, (size_t)B * 4, LK_COPY_HOST_TO_DEVICE));
            nh.data = s->nextd;
        }
        TRY(lk_comm_broadcast(s->comm, hq, &nh, s->size - 1));
        if (!s->host) {
            TRY(lk_memcpy(s->q, s->h_ids, s->nextd, (size_t)B * 4, LK_COPY_DEVICE_TO_HOST));
            TRY(lk_queue_sync(s->q));
        }
        for (int64_t b = 0; b < B; b++)
            next[b] = s->h_ids[b];
        s->last_b = B;
        return 0;
    }
    TRY(lk_memcpy(s->q, s->h_am, s->am, (size_t)B * 8, LK_COPY_DEVICE_TO_HOST));
    TRY(lk_queue_sync(s->q));
    for (int64_t b = 0; b < B; b++)
        next[b] = (int32_t)s->h_am[b];
    s->last_b = B;
    return 0;
}

int bn_shard_logits(bn_shard *s, int64_t B, float *logits, char *err, size_t errlen)
{
    const int64_t V = s->c.vocab;
    if (B < 1 || B > s->last_b) {
        snprintf(err, errlen, "bn_shard_logits: batch %lld (the last call ran %lld)",
                 (long long)B, (long long)s->last_b);
        return -1;
    }
    if (s->mode == BN_SHARD_PP) {
        const int src = s->size - 1;
        lk_tensor lg = lk_mat(s->logits, LK_F32, B, V);
        if (s->size > 1 && s->rank == src)
            TRY(lk_comm_send(s->comm, s->q, &lg, 0));
        if (s->rank == 0 && s->size > 1)
            TRY(lk_comm_recv(s->comm, s->q, &lg, src));
        if (s->rank == 0) {
            TRY(lk_memcpy(s->q, logits, s->logits, (size_t)(B * V) * 4, LK_COPY_DEVICE_TO_HOST));
            TRY(lk_queue_sync(s->q));
        }
        return 0;
    }
    /* TP: rank r's columns [v0, v1) of each row, to rank 0 one rank at a
     * time (through this rank's logits buffer, which rank 0 reuses) */
    lk_tensor mine = lk_mat(s->logits, LK_F32, B, s->v_r);
    if (s->rank != 0) {
        if (s->v_r)
            TRY(lk_comm_send(s->comm, s->q, &mine, 0));
        return 0;
    }
    float *part = malloc((size_t)(B * (V / s->size + 1)) * 4 + 4);
    if (!part) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int r = 0; r < s->size; r++) {
        const int64_t a = V * r / s->size, b = V * (r + 1) / s->size;
        if (a == b)
            continue;
        lk_status st = LK_OK;
        if (r == 0) {
            st = lk_memcpy(s->q, part, s->logits, (size_t)(B * (b - a)) * 4,
                           LK_COPY_DEVICE_TO_HOST);
        } else {
            /* the peer's share lands in lgr (room for the largest) */
            lk_tensor in = lk_mat(s->lgr, LK_F32, B, b - a);
            st = lk_comm_recv(s->comm, s->q, &in, r);
            if (!st)
                st = lk_memcpy(s->q, part, s->lgr, (size_t)(B * (b - a)) * 4,
                               LK_COPY_DEVICE_TO_HOST);
        }
        if (!st)
            st = lk_queue_sync(s->q);
        if (st) {
            snprintf(err, errlen, "rank 0: gathering the logits: %s", lk_last_error());
            free(part);
            return -1;
        }
        for (int64_t i = 0; i < B; i++)
            memcpy(logits + i * V + a, part + i * (b - a), (size_t)(b - a) * 4);
    }
    free(part);
    return 0;
}

/* ------------------------------------------------------------ pipelined decode */

/* One micro-batch's work on this rank for a decode step, the buffers at
 * its rows: rank 0's embedding of the ids in am (the low words of the
 * int64 tokens: little-endian, ids < 2^31), the layers, the last rank's
 * head into am. */
static int pp_item(bn_shard *s, int64_t b0, int64_t Bm, int64_t cache_len, char *err,
                   size_t errlen)
{
    const bn_config *c = &s->c;
    if (s->rank == 0) {
        lk_tensor emb = lk_mat(s->embd, LK_BF16, c->vocab, c->dim);
        lk_tensor idt = lk_mat_ld((int32_t *)(s->am + b0), LK_I32, Bm, 1, 2);
        lk_tensor x = lk_mat(s->x + b0 * c->dim, LK_F32, Bm, c->dim);
        TRY(lk_embedding(s->q, &emb, &idt, &x));
    }
    float *x0 = s->x;
    int32_t *p0 = s->pos, *k0 = s->kvi;
    s->x = x0 + b0 * c->dim, s->pos = p0 + b0, s->kvi = k0 + b0;
    int bad = 0;
    for (int64_t l = s->l0; l < s->l1 && !bad; l++)
        bad = layer(s, l, Bm, 1, b0, cache_len, err, errlen);
    if (!bad && s->rank == s->size - 1)
        bad = head(s, Bm, 1, b0, err, errlen);
    s->x = x0, s->pos = p0, s->kvi = k0;
    return bad ? -1 : 0;
}

/* Item i's micro-batch: sequences [*b0, *b0 + *bm). */
static void pp_rows(int64_t B, int64_t nm, int64_t i, int64_t *b0, int64_t *bm)
{
    const int64_t k = i % nm;
    *b0 = B * k / nm;
    *bm = B * (k + 1) / nm - *b0;
}

/* The tokens of item j from the last rank into am (rank 0), kept in tk. */
static int pp_recv_ids(bn_shard *s, int64_t B, int64_t nm, int64_t j, int64_t *tk, char *err,
                       size_t errlen)
{
    int64_t b0, bm;
    pp_rows(B, nm, j, &b0, &bm);
    lk_tensor t = lk_mat(s->am + b0, LK_I64, bm, 1);
    TRY(lk_comm_recv(s->comm, s->q, &t, s->size - 1));
    TRY(lk_memcpy(s->q, tk + j / nm * B + b0, s->am + b0, (size_t)bm * 8,
                  LK_COPY_DEVICE_TO_DEVICE));
    return 0;
}

int bn_shard_decode_pipelined(bn_shard *s, int64_t B, int64_t steps, int64_t pos0,
                              const int32_t *ids, int32_t *tokens, char *err, size_t errlen)
{
    const bn_config *c = &s->c;
    const int P = s->size, first = s->rank == 0, last = s->rank == P - 1;
    if (s->mode != BN_SHARD_PP || P < 2 || B < 1 || B > s->max_b || steps < 1 ||
        pos0 < 0 || pos0 + steps > c->max_ctx) {
        snprintf(err, errlen, "bn_shard_decode_pipelined: %lld sequences x %lld steps at %lld "
                 "on %s over %d ranks", (long long)B, (long long)steps, (long long)pos0,
                 s->mode == BN_SHARD_PP ? "a pipeline" : "tensor-parallel ranks", P);
        return -1;
    }
    for (int64_t b = 0; first && b < B; b++)
        if (ids[b] < 0 || ids[b] >= c->vocab) {
            snprintf(err, errlen, "token id %d is outside the vocabulary (%lld)", ids[b],
                     (long long)c->vocab);
            return -1;
        }
    const int64_t nm = s->micro < B ? s->micro : B, N = steps * nm;
    /* every step's positions and cache rows, and (rank 0) every step's
     * tokens, uploaded or kept on the device: nothing waits on the host
     * inside the loop */
    const size_t nb = (size_t)(steps * B);
    int32_t *hp = malloc(nb * 8);
    int64_t *ht = first ? malloc(nb * 8 + 8) : NULL;
    void *dp = NULL, *dt = NULL;
    lk_graph **g = calloc((size_t)nm, sizeof *g);
    int bad = !hp || (first && !ht) || !g || lk_malloc(s->dev, nb * 8, &dp) != LK_OK ||
              (first && lk_malloc(s->dev, nb * 8, &dt) != LK_OK);
    if (bad)
        snprintf(err, errlen, "rank %d: no memory for %lld steps of %lld sequences", s->rank,
                 (long long)steps, (long long)B);
    int32_t *pa = dp, *ka = pa ? pa + nb : NULL;
    int64_t *tk = dt;
    if (!bad) {
        for (int64_t t = 0; t < steps; t++)
            for (int64_t b = 0; b < B; b++) {
                hp[t * B + b] = (int32_t)(pos0 + t);
                hp[nb + (size_t)(t * B + b)] = (int32_t)(b * c->max_ctx + pos0 + t);
            }
        for (int64_t b = 0; first && b < B; b++)
            ht[b] = ids[b];
        bad = lk_memcpy(s->q, dp, hp, nb * 8, LK_COPY_HOST_TO_DEVICE) != LK_OK ||
              (first && lk_memcpy(s->q, s->am, ht, (size_t)B * 8, LK_COPY_HOST_TO_DEVICE)) ||
              lk_queue_sync(s->q) != LK_OK;
        if (bad)
            snprintf(err, errlen, "rank %d: uploading positions: %s", s->rank, lk_last_error());
    }
    /* graphs: each micro-batch's work captured at its second step (the
     * first runs eagerly), over the whole cache as bn_shard_forward's */
    int graphs = (s->flags & BN_GRAPH) != 0;
    /* Item i = step i / nm, micro-batch i % nm.  Each pair of ranks meets
     * its sends and receives in one order, so no rank waits on a peer
     * that waits on it: rank 0 takes item j's tokens back before it sends
     * item j + min(nm, P) - 1 on (with fewer micro-batches than stages,
     * before it starts item j + nm, which needs them). */
    const int64_t lag = nm < P ? nm : P - 1;
    int64_t got = 0;  /* rank 0: items whose tokens came back */
    for (int64_t i = 0; i < N && !bad; i++) {
        const int64_t t = i / nm, k = i % nm;
        int64_t b0, bm;
        pp_rows(B, nm, i, &b0, &bm);
        if (first && nm < P && i >= nm && got <= i - nm) {
            if ((bad = pp_recv_ids(s, B, nm, got, tk, err, errlen)))
                break;
            got++;
        }
        lk_tensor x = lk_mat(s->x + b0 * c->dim, LK_F32, bm, c->dim);
        if (!first) {
            lk_status st = lk_comm_recv(s->comm, s->q, &x, s->rank - 1);
            if (st) {
                snprintf(err, errlen, "rank %d: lk_comm_recv: %s", s->rank, lk_last_error());
                bad = 1;
                break;
            }
        }
        if (lk_memcpy(s->q, s->pos + b0, pa + t * B + b0, (size_t)bm * 4,
                      LK_COPY_DEVICE_TO_DEVICE) ||
            lk_memcpy(s->q, s->kvi + b0, ka + t * B + b0, (size_t)bm * 4,
                      LK_COPY_DEVICE_TO_DEVICE)) {
            snprintf(err, errlen, "rank %d: lk_memcpy: %s", s->rank, lk_last_error());
            bad = 1;
            break;
        }
        if (graphs && t == 1) {
            /* a capture that fails leaves the queue as it was: this rank
             * goes on eagerly (the bits are the same), and says so */
            lk_status st = lk_queue_capture_begin(s->q);
            int cbad = st != LK_OK;
            if (cbad)
                snprintf(err, errlen, "lk_queue_capture_begin: %s", lk_last_error());
            else
                cbad = pp_item(s, b0, bm, c->max_ctx, err, errlen);
            if (st == LK_OK) {
                lk_status se = lk_queue_capture_end(s->q, &g[k]);
                if (!cbad && se != LK_OK) {
                    snprintf(err, errlen, "lk_queue_capture_end: %s", lk_last_error());
                    cbad = 1;
                }
            }
            if (cbad) {
                fprintf(stderr, "rank %d: pipelined decode runs eagerly: no graph (%s)\n",
                        s->rank, err);
                for (int64_t m = 0; m < nm; m++)
                    lk_graph_destroy(g[m]), g[m] = NULL;
                graphs = 0;
            }
        }
        if (graphs && t >= 1) {
            if (lk_graph_launch(g[k], s->q) != LK_OK) {
                snprintf(err, errlen, "rank %d: lk_graph_launch: %s", s->rank, lk_last_error());
                bad = 1;
                break;
            }
        } else if ((bad = pp_item(s, b0, bm, pos0 + t + 1, err, errlen))) {
            break;
        }
        if (first && nm >= P && i >= lag && got <= i - lag) {
            if ((bad = pp_recv_ids(s, B, nm, got, tk, err, errlen)))
                break;
            got++;
        }
        lk_status st = LK_OK;
        if (!last) {
            st = lk_comm_send(s->comm, s->q, &x, s->rank + 1);
        } else {
            lk_tensor t64 = lk_mat(s->am + b0, LK_I64, bm, 1);
            st = lk_comm_send(s->comm, s->q, &t64, 0);
        }
        if (st) {
            snprintf(err, errlen, "rank %d: lk_comm_send: %s", s->rank, lk_last_error());
            bad = 1;
        }
    }
    while (first && !bad && got < N) {
        bad = pp_recv_ids(s, B, nm, got, tk, err, errlen);
        got++;
    }
    if (!bad && first &&
        lk_memcpy(s->q, ht, tk, nb * 8, LK_COPY_DEVICE_TO_HOST) != LK_OK) {
        snprintf(err, errlen, "rank %d: lk_memcpy: %s", s->rank, lk_last_error());
        bad = 1;
    }
    if (lk_queue_sync(s->q) != LK_OK && !bad) {
        snprintf(err, errlen, "rank %d: lk_queue_sync: %s", s->rank, lk_last_error());
        bad = 1;
    }
    for (size_t r = 0; !bad && first && r < nb; r++)
        tokens[r] = (int32_t)ht[r];
    for (int64_t k = 0; g && k < nm; k++)
        lk_graph_destroy(g[k]);
    free(g);
    if (dp)
        lk_free(s->dev, dp);
    if (dt)
        lk_free(s->dev, dt);
    free(hp);
    free(ht);
    return bad ? -1 : 0;
}
