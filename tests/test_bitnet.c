/* Lockstep tests: lk_bitnet_decode (include/lockstep/bitnet.h) is the
 * composition of its public ops, bit for bit, on every device.
 *
 * - random small models (odd widths, head_dim 2 .. 64 and 128, GQA ratios
 *   1, 2, 4, 1 to 3 layers, 1 to 5 sequences, ternary codes 0 .. 3, per-row
 *   and per-tensor weight scales, a layer without norm weights), decoded
 *   over 3 to 5 steps whose positions advance, so attention reads the rows
 *   earlier steps wrote: x after every step and the caches at the end equal
 *   those of lk_rmsnorm_ternary_linear, lk_rope, lk_set_rows, lk_attention
 *   and lk_glu called one by one on the same device (memcmp), and the
 *   reference device's;
 * - the CUDA kernel's weight ring cut to one load group
 *   (LOCKSTEP_CUDA_BITNET_RING=1), so that every load reuses its bytes;
 * - NaN, Inf and zero rows of x; batch invariance (a sequence alone gives
 *   its bits inside a batch of 4);
 * - argument errors: the right status, x and the caches untouched;
 * - graph capture: launches with new positions and x equal eager calls, a
 *   bad position inside a launched graph writes nothing and is reported by
 *   the next lk_queue_sync.
 * LOCKSTEP_TEST_QUICK=1 (qemu) runs fewer random models. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tests/devices.h"

#define MAXL 3 /* layers */
#define MAXS 5 /* decode steps */

enum { W_QKV, W_O, W_GU, W_DOWN, NW };
enum { N_ATTN, N_ATTN_SUB, N_FFN, N_FFN_SUB, NN };

static uint64_t rng;

static float rnd(float lim) /* [-lim, lim) */
{
    return (float)(((double)(tap_rand(&rng) >> 40) / (double)(1ull << 23) - 1.0) * lim);
}

static uint64_t pick(uint64_t n) { return tap_rand(&rng) % n; }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        bail("out of host memory");
    return p;
}

/* ------------------------------------------------------------ a case */

typedef struct cfg {
    lk_bitnet_config c;
    int64_t L, B, ctx, steps;
} cfg;

static int64_t qd_of(const cfg *k) { return k->c.n_head * k->c.head_dim; }
static int64_t kvd_of(const cfg *k) { return k->c.n_kv * k->c.head_dim; }

/* weight w of a layer: n x kk */
static void wshape(const cfg *k, int w, int64_t *n, int64_t *kk)
{
    const int64_t qd = qd_of(k), kvd = kvd_of(k);
    switch (w) {
    case W_QKV: *n = qd + 2 * kvd, *kk = k->c.dim; break;
    case W_O: *n = k->c.dim, *kk = qd; break;
    case W_GU: *n = 2 * k->c.ffn, *kk = k->c.dim; break;
    default: *n = k->c.dim, *kk = k->c.ffn; break;
    }
}

static int64_t nnorm(const cfg *k, int i)
{
    return i == N_ATTN || i == N_FFN ? k->c.dim : i == N_ATTN_SUB ? qd_of(k) : k->c.ffn;
}

static size_t kv_elems(const cfg *k) { return (size_t)(k->B * k->ctx * 2 * kvd_of(k)); }

/* The host inputs of one case. */
typedef struct hcase {
    cfg k;
    uint8_t *codes[MAXL][NW]; /* LK_T2, ld = K rounded up to 4 */
    float *ws[MAXL][NW];
    int64_t nws[MAXL][NW];    /* 1 or N */
    float *norm[MAXL][NN];    /* NULL: none */
    float *kv0[MAXL];         /* the caches before the first step */
    float *x[MAXS];           /* B x dim, each step */
    int32_t *pos[MAXS];       /* B, each step */
} hcase;

/* null_layer: the layer without norm weights (-1: none); edge: NaN, Inf
 * and zero rows in x */
static void hcase_make(hcase *h, const cfg *k, int null_layer, int edge)
{
    memset(h, 0, sizeof *h);
    h->k = *k;
    const int64_t B = k->B, dim = k->c.dim;
    for (int64_t l = 0; l < k->L; l++) {
        for (int w = 0; w < NW; w++) {
            int64_t n, kk;
            wshape(k, w, &n, &kk);
            const int64_t rb = (kk + 3) / 4;
            uint8_t *c = h->codes[l][w] = xmalloc((size_t)(n * rb));
            for (int64_t i = 0; i < n * rb; i++) /* every code, the reserved 3 included */
                c[i] = (uint8_t)tap_rand(&rng);
            for (int64_t r = 0; r < n; r++) /* padding codes 1 */
                for (int64_t j = kk; j < rb * 4; j++) {
                    uint8_t *b = &c[r * rb + j / 4];
                    *b = (uint8_t)((*b & ~(3u << 2 * (j % 4))) | 1u << 2 * (j % 4));
                }
            h->nws[l][w] = pick(2) ? n : 1;
            h->ws[l][w] = xmalloc((size_t)h->nws[l][w] * 4);
            for (int64_t i = 0; i < h->nws[l][w]; i++)
                h->ws[l][w][i] = 0.25f + (float)pick(1000) / 997.0f;
        }
        for (int i = 0; i < NN; i++) {
            if (l == null_layer)
                continue;
            const int64_t n = nnorm(k, i);
            h->norm[l][i] = xmalloc((size_t)n * 4);
            for (int64_t j = 0; j < n; j++)
                h->norm[l][i][j] = rnd(2.0f);
        }
        h->kv0[l] = xmalloc(kv_elems(k) * 4);
        for (size_t i = 0; i < kv_elems(k); i++)
            h->kv0[l][i] = rnd(2.0f);
    }
    int64_t p0[8];
    for (int64_t b = 0; b < B; b++)
        p0[b] = (int64_t)pick((uint64_t)(k->ctx - k->steps + 1));
    for (int64_t s = 0; s < k->steps; s++) {
        h->x[s] = xmalloc((size_t)(B * dim) * 4);
        h->pos[s] = xmalloc((size_t)B * 4);
        for (int64_t i = 0; i < B * dim; i++)
            h->x[s][i] = rnd(4.0f);
        for (int64_t b = 0; b < B; b++)
            h->pos[s][b] = (int32_t)(p0[b] + s);
    }
    if (edge) { /* sequence 0: NaN at step 1, Inf at step 2; the last: zeros at step 0 */
        h->x[1][3 % dim] = __builtin_nanf("");
        h->x[2][5 % dim] = -__builtin_inff();
        memset(h->x[0] + (B - 1) * dim, 0, (size_t)dim * 4);
    }
}

static void hcase_free(hcase *h)
{
    for (int l = 0; l < MAXL; l++) {
        for (int w = 0; w < NW; w++)
            free(h->codes[l][w]), free(h->ws[l][w]);
        for (int i = 0; i < NN; i++)
            free(h->norm[l][i]);
        free(h->kv0[l]);
    }
    for (int s = 0; s < MAXS; s++)
        free(h->x[s]), free(h->pos[s]);
}

/* What a run leaves: x after each step, the caches at the end. */
typedef struct hout {
    float *x[MAXS];
    float *kv[MAXL];
} hout;

static void hout_make(hout *o, const cfg *k)
{
    memset(o, 0, sizeof *o);
    for (int64_t s = 0; s < k->steps; s++)
        o->x[s] = xmalloc((size_t)(k->B * k->c.dim) * 4);
    for (int64_t l = 0; l < k->L; l++)
        o->kv[l] = xmalloc(kv_elems(k) * 4);
}

static void hout_free(hout *o)
{
    for (int s = 0; s < MAXS; s++)
        free(o->x[s]);
    for (int l = 0; l < MAXL; l++)
        free(o->kv[l]);
}

/* 1 when equal; else *what says where */
static int hout_same(const hout *a, const hout *b, const cfg *k, char *what, size_t n)
{
    for (int64_t s = 0; s < k->steps; s++)
        if (memcmp(a->x[s], b->x[s], (size_t)(k->B * k->c.dim) * 4)) {
            for (int64_t i = 0; i < k->B * k->c.dim; i++)
                if (memcmp(&a->x[s][i], &b->x[s][i], 4)) {
                    snprintf(what, n, "x of step %lld differs at [%lld][%lld]: %a vs %a",
                             (long long)s, (long long)(i / k->c.dim), (long long)(i % k->c.dim),
                             (double)a->x[s][i], (double)b->x[s][i]);
                    break;
                }
            return 0;
        }
    for (int64_t l = 0; l < k->L; l++)
        if (memcmp(a->kv[l], b->kv[l], kv_elems(k) * 4)) {
            snprintf(what, n, "layer %lld's cache differs", (long long)l);
            return 0;
        }
    return 1;
}

/* ------------------------------------------------------------ on a device */

/* The weights and norms of a case on one device. */
typedef struct dmodel {
    lk_device *d;
    lk_queue *q;
    dbuf codes[MAXL][NW], ws[MAXL][NW], norm[MAXL][NN];
    lk_weights *w[MAXL][NW];
    lk_tensor normt[MAXL][NN];
} dmodel;

static void dmodel_make(dmodel *m, lk_device *d, lk_queue *q, const hcase *h)
{
    memset(m, 0, sizeof *m);
    m->d = d, m->q = q;
    const cfg *k = &h->k;
    for (int64_t l = 0; l < k->L; l++) {
        for (int w = 0; w < NW; w++) {
            int64_t n, kk;
            wshape(k, w, &n, &kk);
            const int64_t ld = (kk + 3) / 4 * 4;
            if (!dbuf_up(d, q, &m->codes[l][w], h->codes[l][w], (size_t)(n * ld / 4)) ||
                !dbuf_up(d, q, &m->ws[l][w], h->ws[l][w], (size_t)h->nws[l][w] * 4))
                bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
            lk_tensor wt = lk_mat_ld(m->codes[l][w].p, LK_T2, n, kk, ld);
            lk_tensor st = lk_mat(m->ws[l][w].p, LK_F32, 1, h->nws[l][w]);
            if (lk_weights_prepare(q, &wt, &st, &m->w[l][w]) != LK_OK)
                bail("%s: prepare: %s", lk_device_name(d), lk_last_error());
        }
        for (int i = 0; i < NN; i++) {
            if (!h->norm[l][i])
                continue;
            const int64_t n = nnorm(k, i);
            if (!dbuf_up(d, q, &m->norm[l][i], h->norm[l][i], (size_t)n * 4))
                bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
            m->normt[l][i] = lk_mat(m->norm[l][i].p, LK_F32, 1, n);
        }
    }
}

static void dmodel_free(dmodel *m)
{
    for (int l = 0; l < MAXL; l++) {
        for (int w = 0; w < NW; w++) {
            lk_weights_destroy(m->w[l][w]);
            dbuf_free(m->d, &m->codes[l][w]);
            dbuf_free(m->d, &m->ws[l][w]);
        }
        for (int i = 0; i < NN; i++)
            dbuf_free(m->d, &m->norm[l][i]);
    }
}

/* The buffers of one run: x, pos and the caches (the layers of the call
 * point into them), the scratch of lk_bitnet_decode and the composition's
 * intermediates. */
typedef struct dstate {
    dbuf x, pos, idx, kv[MAXL], scratch, xq, xs, qkv, att, gu, g;
    lk_tensor xt, pt, it, kvt[MAXL];
    lk_bitnet_layer lay[MAXL];
    size_t sbytes;
} dstate;

static void dstate_make(dstate *s, dmodel *m, const hcase *h)
{
    const cfg *k = &h->k;
    const int64_t B = k->B, qd = qd_of(k), kvd = kvd_of(k);
    lk_device *d = m->d;
    lk_queue *q = m->q;
    memset(s, 0, sizeof *s);
    s->sbytes = lk_bitnet_decode_scratch(&k->c, B);
    if (!s->sbytes)
        bail("lk_bitnet_decode_scratch: 0 (%s)", lk_last_error());
    int64_t kq = k->c.dim > qd ? k->c.dim : qd;
    kq = kq > k->c.ffn ? kq : k->c.ffn;
    int good = dbuf_up(d, q, &s->x, NULL, (size_t)(B * k->c.dim) * 4) &&
               dbuf_up(d, q, &s->pos, NULL, (size_t)B * 4) &&
               dbuf_up(d, q, &s->idx, NULL, (size_t)B * 4) &&
               dbuf_up(d, q, &s->scratch, NULL, s->sbytes) &&
               dbuf_up(d, q, &s->xq, NULL, (size_t)(B * kq)) &&
               dbuf_up(d, q, &s->xs, NULL, (size_t)B * 4) &&
               dbuf_up(d, q, &s->qkv, NULL, (size_t)(B * (qd + 2 * kvd)) * 4) &&
               dbuf_up(d, q, &s->att, NULL, (size_t)(B * qd) * 4) &&
               dbuf_up(d, q, &s->gu, NULL, (size_t)(B * 2 * k->c.ffn) * 4) &&
               dbuf_up(d, q, &s->g, NULL, (size_t)(B * k->c.ffn) * 4);
    for (int64_t l = 0; good && l < k->L; l++)
        good = dbuf_up(d, q, &s->kv[l], h->kv0[l], kv_elems(k) * 4);
    if (!good)
        bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
    s->xt = lk_mat(s->x.p, LK_F32, B, k->c.dim);
    s->pt = lk_mat(s->pos.p, LK_I32, B, 1);
    s->it = lk_mat(s->idx.p, LK_I32, B, 1);
    for (int64_t l = 0; l < k->L; l++) {
        lk_bitnet_layer *y = &s->lay[l];
        s->kvt[l] = lk_mat(s->kv[l].p, LK_F32, B * k->ctx, 2 * kvd);
        y->qkv = m->w[l][W_QKV], y->o = m->w[l][W_O];
        y->gate_up = m->w[l][W_GU], y->down = m->w[l][W_DOWN];
        y->attn_norm = h->norm[l][N_ATTN] ? &m->normt[l][N_ATTN] : NULL;
        y->attn_sub_norm = h->norm[l][N_ATTN_SUB] ? &m->normt[l][N_ATTN_SUB] : NULL;
        y->ffn_norm = h->norm[l][N_FFN] ? &m->normt[l][N_FFN] : NULL;
        y->ffn_sub_norm = h->norm[l][N_FFN_SUB] ? &m->normt[l][N_FFN_SUB] : NULL;
        y->kv = &s->kvt[l];
    }
}

static void dstate_free(dstate *s, lk_device *d)
{
    dbuf *all[] = {&s->x, &s->pos, &s->idx, &s->scratch, &s->xq, &s->xs,
                   &s->qkv, &s->att, &s->gu, &s->g};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dbuf_free(d, all[i]);
    for (int l = 0; l < MAXL; l++)
        dbuf_free(d, &s->kv[l]);
}

#define TRY(e)                                                                         \
    do {                                                                               \
        lk_status st_ = (e);                                                           \
        if (st_ != LK_OK)                                                              \
            return st_;                                                                \
    } while (0)

/* One step as the header writes it, through the public ops (as
 * examples/bitnet/model.c runs a decode step); idx holds b ctx + pos[b]. */
static lk_status compose_step(lk_queue *q, const cfg *k, dstate *s)
{
    const lk_bitnet_config *c = &k->c;
    const int64_t B = k->B, qd = qd_of(k), kvd = kvd_of(k), w3 = qd + 2 * kvd;
    lk_tensor qkv = lk_mat(s->qkv.p, LK_F32, B, w3);
    lk_tensor qr = lk_mat_ld(s->qkv.p, LK_F32, B, qd + kvd, w3);
    lk_tensor src = lk_mat_ld((float *)s->qkv.p + qd, LK_F32, B, 2 * kvd, w3);
    lk_tensor qa = lk_mat_ld(s->qkv.p, LK_F32, 1, qd, w3);
    lk_tensor pa = lk_mat(s->pos.p, LK_I32, 1, 1);
    lk_tensor oa = lk_mat(s->att.p, LK_F32, 1, qd), att = lk_mat(s->att.p, LK_F32, B, qd);
    lk_tensor gu = lk_mat(s->gu.p, LK_F32, B, 2 * c->ffn);
    lk_tensor gv = lk_mat_ld(s->gu.p, LK_F32, B, c->ffn, 2 * c->ffn);
    lk_tensor uv = lk_mat_ld((float *)s->gu.p + c->ffn, LK_F32, B, c->ffn, 2 * c->ffn);
    lk_tensor g = lk_mat(s->g.p, LK_F32, B, c->ffn);
    lk_tensor xs = lk_mat(s->xs.p, LK_F32, B, 1);
    lk_tensor xq_d = lk_mat(s->xq.p, LK_I8, B, c->dim), xq_q = lk_mat(s->xq.p, LK_I8, B, qd);
    lk_tensor xq_f = lk_mat(s->xq.p, LK_I8, B, c->ffn);
    qa.batch_stride = w3;
    pa.batch_stride = 1;
    oa.batch_stride = qd;
    for (int64_t l = 0; l < k->L; l++) {
        const lk_bitnet_layer *y = &s->lay[l];
        lk_tensor kc = lk_mat_ld(s->kv[l].p, LK_F32, k->ctx, kvd, 2 * kvd);
        lk_tensor vc = lk_mat_ld((float *)s->kv[l].p + kvd, LK_F32, k->ctx, kvd, 2 * kvd);
        kc.batch_stride = vc.batch_stride = k->ctx * 2 * kvd;
        TRY(lk_rmsnorm_ternary_linear(q, &s->xt, y->attn_norm, c->eps, &xq_d, &xs, y->qkv, &qkv,
                                      0));
        TRY(lk_rope(q, &qr, &s->pt, c->head_dim, c->theta, c->rope_flags, &qr));
        TRY(lk_set_rows(q, &src, &s->it, y->kv));
        TRY(lk_attention(q, &qa, &kc, &vc, &pa, c->n_head, c->n_kv, c->attn_scale, &oa, B));
        TRY(lk_rmsnorm_ternary_linear(q, &att, y->attn_sub_norm, c->eps, &xq_q, &xs, y->o,
                                      &s->xt, LK_GEMM_ACCUMULATE));
        TRY(lk_rmsnorm_ternary_linear(q, &s->xt, y->ffn_norm, c->eps, &xq_d, &xs, y->gate_up,
                                      &gu, 0));
        TRY(lk_glu(q, LK_UNARY_RELU2, &gv, &uv, &g));
        TRY(lk_rmsnorm_ternary_linear(q, &g, y->ffn_sub_norm, c->eps, &xq_f, &xs, y->down,
                                      &s->xt, LK_GEMM_ACCUMULATE));
    }
    return LK_OK;
}

static lk_status decode(lk_queue *q, const cfg *k, dstate *s)
{
    return lk_bitnet_decode(q, &k->c, s->lay, k->L, &s->xt, &s->pt, k->ctx, s->scratch.p,
                            s->sbytes);
}

/* x and pos of step st into s (and the cache rows into idx) */
static lk_status upload_step(lk_queue *q, const hcase *h, dstate *s, int64_t st)
{
    const cfg *k = &h->k;
    int32_t idx[8];
    for (int64_t b = 0; b < k->B; b++)
        idx[b] = (int32_t)(b * k->ctx + h->pos[st][b]);
    TRY(lk_memcpy(q, s->x.p, h->x[st], (size_t)(k->B * k->c.dim) * 4, LK_COPY_HOST_TO_DEVICE));
    TRY(lk_memcpy(q, s->pos.p, h->pos[st], (size_t)k->B * 4, LK_COPY_HOST_TO_DEVICE));
    TRY(lk_memcpy(q, s->idx.p, idx, (size_t)k->B * 4, LK_COPY_HOST_TO_DEVICE));
    return lk_queue_sync(q); /* the host arrays are the callers' again */
}

static lk_status download(lk_queue *q, const cfg *k, dstate *s, float *x, float **kv)
{
    if (x)
        TRY(lk_memcpy(q, x, s->x.p, (size_t)(k->B * k->c.dim) * 4, LK_COPY_DEVICE_TO_HOST));
    for (int64_t l = 0; kv && l < k->L; l++)
        TRY(lk_memcpy(q, kv[l], s->kv[l].p, kv_elems(k) * 4, LK_COPY_DEVICE_TO_HOST));
    return lk_queue_sync(q);
}

/* the message of run()'s failure (freeing the buffers clears lk_last_error) */
static char run_msg[400];

/* Every step of the case on m's device, by lk_bitnet_decode (fused) or by
 * the composition, into o. */
static lk_status run(dmodel *m, const hcase *h, int fused, hout *o)
{
    dstate s;
    dstate_make(&s, m, h);
    lk_status st = LK_OK;
    for (int64_t i = 0; i < h->k.steps && st == LK_OK; i++) {
        st = upload_step(m->q, h, &s, i);
        if (st == LK_OK)
            st = fused ? decode(m->q, &h->k, &s) : compose_step(m->q, &h->k, &s);
        if (st == LK_OK)
            st = download(m->q, &h->k, &s, o->x[i], i == h->k.steps - 1 ? o->kv : NULL);
    }
    snprintf(run_msg, sizeof run_msg, "%s", st == LK_OK ? "" : lk_last_error());
    dstate_free(&s, m->d);
    return st;
}

static const char *cfg_str(const cfg *k, char *buf, size_t n)
{
    snprintf(buf, n, "dim %lld heads %lld/%lld hd %lld ffn %lld, %lld layer%s, B %lld ctx %lld, "
             "%lld steps%s",
             (long long)k->c.dim, (long long)k->c.n_head, (long long)k->c.n_kv,
             (long long)k->c.head_dim, (long long)k->c.ffn, (long long)k->L,
             k->L == 1 ? "" : "s", (long long)k->B, (long long)k->ctx, (long long)k->steps,
             k->c.rope_flags ? " interleaved" : "");
    return buf;
}

/* ------------------------------------------------------------ the cases */

static void random_cfg(cfg *k, int i)
{
    static const int64_t ratio[3] = {1, 2, 4};
    memset(k, 0, sizeof *k);
    k->c.n_kv = 1 + (int64_t)pick(2);
    k->c.n_head = k->c.n_kv * ratio[pick(3)];
    k->c.head_dim = i == 1 ? 128 : 2 * (1 + (int64_t)pick(32));
    k->c.dim = 32 + (int64_t)pick(269);
    if (pick(3) == 0)
        k->c.dim = k->c.dim / 16 * 16;
    k->c.ffn = 16 + (int64_t)pick(385);
    k->c.eps = pick(2) ? 1e-5f : 1e-6f;
    k->c.theta = pick(2) ? 500000.0f : 10000.0f;
    k->c.attn_scale = 1.0f / sqrtf((float)k->c.head_dim);
    k->c.rope_flags = pick(3) == 0 ? LK_ROPE_INTERLEAVED : LK_ROPE_NEOX;
    k->L = 1 + (int64_t)pick(3);
    k->B = 1 + (int64_t)pick(5);
    k->steps = 3 + (int64_t)pick(3);
    k->ctx = 3 + (int64_t)pick(38);
    if (k->ctx < k->steps)
        k->ctx = k->steps;
    if (i % 2 == 0) { /* shapes the CUDA driver's fused kernel takes (docs/api.md) */
        k->c.dim = (k->c.dim + 3) / 4 * 4;
        k->c.ffn = (k->c.ffn + 3) / 4 * 4;
        k->c.head_dim = (k->c.head_dim + 3) / 4 * 4;
        k->c.attn_scale = 1.0f / sqrtf((float)k->c.head_dim);
        if (k->B > 4)
            k->B = 4;
    }
}

/* One case on every device: fused == composition on the device, and ==
 * the reference.  *sup[d] = 0 where the device does not take the op. */
static void test_case(test_devices *t, const hcase *h, const char *label, int *sup)
{
    char cs[200], what[200];
    cfg_str(&h->k, cs, sizeof cs);
    hout ref;
    hout_make(&ref, &h->k);
    int have_ref = 0;
    /* the reference first: every other device is compared with it */
    int order[TEST_MAX_DEVICES], n = 0;
    for (int d = 0; d < t->n; d++)
        if (t->q[d] == t->ref_q)
            order[n++] = d;
    for (int d = 0; d < t->n; d++)
        if (t->q[d] != t->ref_q)
            order[n++] = d;
    for (int j = 0; j < n; j++) {
        const int d = order[j];
        const char *name = lk_device_name(t->dev[d]);
        const int is_ref = t->q[d] == t->ref_q;
        dmodel m;
        dmodel_make(&m, t->dev[d], t->q[d], h);
        hout f, c;
        hout_make(&f, &h->k);
        hout_make(&c, &h->k);
        lk_status sf = run(&m, h, 1, &f);
        if (sf == LK_ERR_UNSUPPORTED) {
            skip(is_ref ? 1 : 2, "%s on %s: unsupported (%s)", label, name, run_msg);
            sup[d] = 0;
        } else {
            char fmsg[400];
            snprintf(fmsg, sizeof fmsg, "%s", run_msg);
            lk_status sc = run(&m, h, 0, &c);
            what[0] = '\0';
            int same = sf == LK_OK && sc == LK_OK && hout_same(&f, &c, &h->k, what, sizeof what);
            ok(same, "%s (%s) on %s: lk_bitnet_decode == the composition of its ops", label, cs,
               name);
            if (!same)
                diag("  fused %s (%s), composition %s (%s) %s", lk_status_string(sf), fmsg,
                     lk_status_string(sc), run_msg, what);
            if (is_ref) {
                have_ref = sf == LK_OK;
                if (have_ref)
                    for (int64_t s = 0; s < h->k.steps; s++)
                        memcpy(ref.x[s], f.x[s], (size_t)(h->k.B * h->k.c.dim) * 4);
                for (int64_t l = 0; have_ref && l < h->k.L; l++)
                    memcpy(ref.kv[l], f.kv[l], kv_elems(&h->k) * 4);
            } else {
                what[0] = '\0';
                same = have_ref && sf == LK_OK && hout_same(&f, &ref, &h->k, what, sizeof what);
                ok(same, "%s on %s: == ref", label, name);
                if (!same)
                    diag("  %s", what);
            }
        }
        hout_free(&f);
        hout_free(&c);
        dmodel_free(&m);
    }
    hout_free(&ref);
}

/* Sequence b alone (B = 1: its cache rows at 0 .. ctx - 1) gives the bits
 * it gets inside a batch of 4. */
static void test_batch_invariance(lk_device *d, lk_queue *q)
{
    cfg k;
    random_cfg(&k, 0);
    k.B = 4, k.L = 2, k.steps = 3;
    hcase h;
    hcase_make(&h, &k, -1, 0);
    dmodel m;
    dmodel_make(&m, d, q, &h);
    hout all;
    hout_make(&all, &k);
    lk_status st = run(&m, &h, 1, &all);
    int same = st == LK_OK;
    const int64_t dim = k.c.dim, rows = k.ctx * 2 * kvd_of(&k);
    for (int64_t b = 0; b < 4 && same; b++) {
        hcase one = h; /* the model's arrays are shared; the sequence's own below */
        one.k.B = 1;
        for (int64_t l = 0; l < k.L; l++)
            one.kv0[l] = h.kv0[l] + b * rows;
        for (int64_t s = 0; s < k.steps; s++) {
            one.x[s] = h.x[s] + b * dim;
            one.pos[s] = h.pos[s] + b;
        }
        hout o;
        hout_make(&o, &one.k);
        st = run(&m, &one, 1, &o);
        same = st == LK_OK;
        for (int64_t s = 0; s < k.steps && same; s++)
            same = !memcmp(o.x[s], all.x[s] + b * dim, (size_t)dim * 4);
        for (int64_t l = 0; l < k.L && same; l++)
            same = !memcmp(o.kv[l], all.kv[l] + b * rows, (size_t)rows * 4);
        hout_free(&o);
    }
    if (st == LK_ERR_UNSUPPORTED)
        skip(1, "batch invariance on %s: unsupported (%s)", lk_device_name(d), run_msg);
    else
        ok(same, "batch invariance on %s: each sequence alone == inside a batch of 4",
           lk_device_name(d));
    if (!same && st != LK_OK)
        diag("  %s: %s", lk_status_string(st), run_msg);
    hout_free(&all);
    dmodel_free(&m);
    hcase_free(&h);
}

/* ------------------------------------------------------------ errors */

/* A small fixed model for the errors and the graphs: qd 32, kvd 16, qkv
 * 64 x 40, gate_up 48 x 40. */
static void small_cfg(cfg *k)
{
    memset(k, 0, sizeof *k);
    k->c.dim = 40, k->c.n_head = 4, k->c.n_kv = 2, k->c.head_dim = 8, k->c.ffn = 24;
    k->c.eps = 1e-5f, k->c.theta = 10000.0f, k->c.attn_scale = 0.35f;
    k->c.rope_flags = LK_ROPE_NEOX;
    k->L = 2, k->B = 2, k->ctx = 5, k->steps = 3;
}

typedef struct snap {
    float *x, *kv[MAXL];
} snap;

static void snap_take(lk_queue *q, const cfg *k, dstate *s, snap *p)
{
    p->x = xmalloc((size_t)(k->B * k->c.dim) * 4);
    for (int64_t l = 0; l < k->L; l++)
        p->kv[l] = xmalloc(kv_elems(k) * 4);
    if (download(q, k, s, p->x, p->kv) != LK_OK)
        bail("download: %s", lk_last_error());
}

static int snap_same(lk_queue *q, const cfg *k, dstate *s, const snap *p)
{
    snap now;
    snap_take(q, k, s, &now);
    int same = !memcmp(now.x, p->x, (size_t)(k->B * k->c.dim) * 4);
    for (int64_t l = 0; l < k->L; l++) {
        same = same && !memcmp(now.kv[l], p->kv[l], kv_elems(k) * 4);
        free(now.kv[l]);
    }
    free(now.x);
    return same;
}

static void snap_free(snap *p, const cfg *k)
{
    free(p->x);
    for (int64_t l = 0; l < k->L; l++)
        free(p->kv[l]);
}

#define EXPECT(call, want, what)                                                          \
    do {                                                                                  \
        lk_status st_ = (call);                                                           \
        const int same_ = snap_same(q, k, &s, &before);                                   \
        ok(st_ == (want) && same_, "%s on %s: %s, x and caches untouched", what, dn,      \
           lk_status_string(want));                                                       \
        if (st_ != (want) || !same_)                                                      \
            diag("  got %s (%s)%s", lk_status_string(st_), lk_last_error(),               \
                 same_ ? "" : ", something was written");                                 \
    } while (0)

static lk_status decode_with(lk_queue *q, const lk_bitnet_config *c, const lk_bitnet_layer *lay,
                             int64_t nl, dstate *s, const lk_tensor *x, int64_t ctx,
                             void *scratch, size_t bytes)
{
    return lk_bitnet_decode(q, c, lay, nl, x, &s->pt, ctx, scratch, bytes);
}

static void test_errors(lk_device *d, lk_queue *q)
{
    const char *dn = lk_device_name(d);
    cfg kc;
    small_cfg(&kc);
    const cfg *k = &kc;
    hcase h;
    hcase_make(&h, k, -1, 0);
    dmodel m;
    dmodel_make(&m, d, q, &h);
    dstate s;
    dstate_make(&s, &m, &h);
    if (upload_step(q, &h, &s, 0) != LK_OK)
        bail("%s: upload: %s", dn, lk_last_error());
    snap before;
    snap_take(q, k, &s, &before);
    lk_bitnet_layer lay[MAXL];
    lk_bitnet_config c;
    int32_t pos[2];

    /* positions outside [0, ctx) */
    pos[0] = h.pos[0][0], pos[1] = (int32_t)k->ctx;
    lk_memcpy(q, s.pos.p, pos, 8, LK_COPY_HOST_TO_DEVICE);
    EXPECT(decode(q, k, &s), LK_ERR_RANGE, "pos = ctx");
    pos[0] = -1, pos[1] = h.pos[0][1];
    lk_memcpy(q, s.pos.p, pos, 8, LK_COPY_HOST_TO_DEVICE);
    EXPECT(decode(q, k, &s), LK_ERR_RANGE, "pos = -1");
    lk_memcpy(q, s.pos.p, h.pos[0], 8, LK_COPY_HOST_TO_DEVICE);
    lk_queue_sync(q);

    /* weights */
    memcpy(lay, s.lay, sizeof lay);
    lay[1].qkv = lay[1].gate_up;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "a 48 x 40 weight as the 64 x 40 qkv");
    dbuf fb = {0};
    lk_weights *fw = NULL;
    if (!dbuf_up(d, q, &fb, NULL, (size_t)(40 * 32) * 2))
        bail("%s: no device memory", dn);
    lk_tensor ft = lk_mat(fb.p, LK_BF16, 40, 32);
    uint16_t zeros[40 * 32];
    memset(zeros, 0, sizeof zeros);
    lk_memcpy(q, fb.p, zeros, sizeof zeros, LK_COPY_HOST_TO_DEVICE);
    if (lk_weights_prepare(q, &ft, NULL, &fw) != LK_OK)
        bail("%s: prepare bf16: %s", dn, lk_last_error());
    memcpy(lay, s.lay, sizeof lay);
    lay[0].o = fw;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_DTYPE, "a bf16 prepared weight as o");
    memcpy(lay, s.lay, sizeof lay);
    lay[1].down = NULL;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_NULL_POINTER, "down NULL");

    /* scratch */
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes - 1),
           LK_ERR_INVALID_ARGUMENT, "scratch one byte too small");
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &s.xt, k->ctx, (char *)s.scratch.p + 8,
                       s.sbytes),
           LK_ERR_INVALID_ARGUMENT, "scratch not 16-byte aligned");
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &s.xt, k->ctx, NULL, s.sbytes),
           LK_ERR_NULL_POINTER, "scratch NULL");
    {
        /* x inside the scratch: a buffer holding both */
        const size_t xb = (size_t)(k->B * k->c.dim) * 4;
        dbuf big = {0};
        if (!dbuf_up(d, q, &big, NULL, s.sbytes + xb + 256))
            bail("%s: no device memory", dn);
        lk_tensor xin = lk_mat((char *)big.p + 256, LK_F32, k->B, k->c.dim);
        float *xh = xmalloc(xb), *xa = xmalloc(xb);
        for (size_t i = 0; i < xb / 4; i++)
            xh[i] = (float)i;
        lk_memcpy(q, xin.data, xh, xb, LK_COPY_HOST_TO_DEVICE);
        lk_status st = decode_with(q, &k->c, s.lay, k->L, &s, &xin, k->ctx, big.p, s.sbytes);
        lk_memcpy(q, xa, xin.data, xb, LK_COPY_DEVICE_TO_HOST);
        lk_queue_sync(q);
        const int same = snap_same(q, k, &s, &before) && !memcmp(xa, xh, xb);
        ok(st == LK_ERR_ALIASING && same,
           "scratch overlapping x on %s: LK_ERR_ALIASING, x and caches untouched", dn);
        if (st != LK_ERR_ALIASING)
            diag("  got %s (%s)", lk_status_string(st), lk_last_error());
        free(xh), free(xa);
        dbuf_free(d, &big);
    }

    /* layers and caches */
    EXPECT(decode_with(q, &k->c, NULL, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_NULL_POINTER, "layers NULL with n_layers 2");
    EXPECT(decode_with(q, &k->c, s.lay, -1, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "n_layers -1");
    memcpy(lay, s.lay, sizeof lay);
    lay[1].kv = lay[0].kv;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_ALIASING, "two layers sharing one cache");
    memcpy(lay, s.lay, sizeof lay);
    lk_tensor nw = lk_mat((float *)s.kv[0].p + 7, LK_F32, 1, k->c.dim);
    lay[1].ffn_norm = &nw;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_ALIASING, "layer 1's ffn_norm inside layer 0's cache");
    memcpy(lay, s.lay, sizeof lay);
    lk_tensor kvs = lk_mat(s.kv[1].p, LK_F32, k->B * k->ctx - 1, 2 * kvd_of(k));
    lay[1].kv = &kvs;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "a cache of B ctx - 1 rows");
    memcpy(lay, s.lay, sizeof lay);
    lk_tensor nbad = lk_mat(m.norm[0][N_ATTN_SUB].p, LK_F32, 1, qd_of(k) - 1);
    lay[0].attn_sub_norm = &nbad;
    EXPECT(decode_with(q, &k->c, lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "attn_sub_norm of n_head head_dim - 1");
    lk_tensor x39 = lk_mat(s.x.p, LK_F32, k->B, k->c.dim - 1);
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &x39, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "x cols != dim");
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &s.xt, 0, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "ctx 0");
    EXPECT(decode_with(q, &k->c, s.lay, k->L, &s, &s.xt, ((int64_t)1 << 24) + 1, s.scratch.p,
                       s.sbytes),
           LK_ERR_RANGE, "ctx 2^24 + 1");

    /* the configuration */
    c = k->c, c.n_head = 3;
    EXPECT(decode_with(q, &c, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "n_head 3, n_kv 2");
    c = k->c, c.head_dim = 7;
    EXPECT(decode_with(q, &c, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_BAD_SHAPE, "odd head_dim");
    c = k->c, c.theta = 0.0f;
    EXPECT(decode_with(q, &c, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_INVALID_ARGUMENT, "theta 0");
    c = k->c, c.rope_flags = 4;
    EXPECT(decode_with(q, &c, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_INVALID_ARGUMENT, "unknown rope_flags");
    EXPECT(decode_with(q, NULL, s.lay, k->L, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes),
           LK_ERR_NULL_POINTER, "c NULL");
    c = k->c, c.head_dim = 7;
    ok(lk_bitnet_decode_scratch(&c, 2) == 0 && lk_bitnet_decode_scratch(&k->c, 0) == 0 &&
           lk_bitnet_decode_scratch(NULL, 2) == 0 && lk_bitnet_decode_scratch(&k->c, 2) > 0,
       "lk_bitnet_decode_scratch: 0 for a bad configuration or batch");
    c = k->c, c.dim = (int64_t)1 << 62;
    ok(lk_bitnet_decode_scratch(&c, 1) == 0, "lk_bitnet_decode_scratch: 0 on overflow (%s)",
       lk_last_error());

    /* no layers: nothing to do, nothing written; then a valid call writes */
    EXPECT(decode_with(q, &k->c, NULL, 0, &s, &s.xt, k->ctx, s.scratch.p, s.sbytes), LK_OK,
           "no layers (a no-op)");
    lk_status st = decode(q, k, &s);
    ok(st == LK_OK && !snap_same(q, k, &s, &before), "a valid call on %s writes", dn);
    if (st != LK_OK)
        diag("  %s: %s", lk_status_string(st), lk_last_error());

    lk_weights_destroy(fw);
    dbuf_free(d, &fb);
    snap_free(&before, k);
    dstate_free(&s, d);
    dmodel_free(&m);
    hcase_free(&h);
}
#undef EXPECT

/* ------------------------------------------------------------ graphs */

/* One lk_bitnet_decode captured; launched with the positions and x of
 * two steps, each launch against an eager call on a twin state; then a
 * bad position in the graph. */
static void test_graph(lk_device *d, lk_queue *q)
{
    const char *dn = lk_device_name(d);
    cfg kc;
    small_cfg(&kc);
    const cfg *k = &kc;
    hcase h;
    hcase_make(&h, k, 1, 0);
    dmodel m;
    dmodel_make(&m, d, q, &h);
    dstate gs, es; /* the graph's buffers, the eager calls' */
    dstate_make(&gs, &m, &h);
    dstate_make(&es, &m, &h);
    if (upload_step(q, &h, &gs, 0) != LK_OK)
        bail("%s: upload: %s", dn, lk_last_error());
    snap before;
    snap_take(q, k, &gs, &before);
    lk_graph *g = NULL;
    lk_status sb = lk_queue_capture_begin(q), sd = LK_OK, se = LK_OK;
    if (sb == LK_OK) {
        sd = decode(q, k, &gs);
        se = lk_queue_capture_end(q, &g);
    }
    if (sb != LK_OK || sd == LK_ERR_UNSUPPORTED) {
        skip(4, "graph on %s: %s (%s)", dn, lk_status_string(sb != LK_OK ? sb : sd),
             lk_last_error());
    } else {
        int good = sd == LK_OK && se == LK_OK && snap_same(q, k, &gs, &before);
        ok(good, "graph on %s: lk_bitnet_decode captured, nothing written by the capture", dn);
        if (!good)
            diag("  %s / %s: %s", lk_status_string(sd), lk_status_string(se), lk_last_error());
        snap_free(&before, k);
        for (int64_t i = 1; i < 3; i++) {
            hout a, b;
            hout_make(&a, k);
            hout_make(&b, k);
            lk_status sl = upload_step(q, &h, &gs, i);
            if (sl == LK_OK)
                sl = upload_step(q, &h, &es, i);
            if (sl == LK_OK)
                sl = g ? lk_graph_launch(g, q) : LK_ERR_INTERNAL;
            if (sl == LK_OK)
                sl = decode(q, k, &es);
            if (sl == LK_OK)
                sl = download(q, k, &gs, a.x[0], a.kv);
            if (sl == LK_OK)
                sl = download(q, k, &es, b.x[0], b.kv);
            cfg one = *k;
            one.steps = 1;
            char what[200] = "";
            ok(sl == LK_OK && hout_same(&a, &b, &one, what, sizeof what),
               "graph on %s: launch %lld (new x and positions) == an eager call", dn,
               (long long)i);
            if (sl != LK_OK || what[0])
                diag("  %s: %s %s", lk_status_string(sl), lk_last_error(), what);
            hout_free(&a);
            hout_free(&b);
        }
        /* a position outside [0, ctx) in the graph: nothing written, the
         * next sync reports it, the one after is clean */
        int32_t bad[2] = {h.pos[2][0], (int32_t)k->ctx};
        snap_take(q, k, &gs, &before);
        lk_status sl = lk_memcpy(q, gs.pos.p, bad, 8, LK_COPY_HOST_TO_DEVICE);
        if (sl == LK_OK)
            sl = lk_queue_sync(q);
        if (sl == LK_OK)
            sl = g ? lk_graph_launch(g, q) : LK_ERR_INTERNAL;
        lk_status ss = lk_queue_sync(q);
        char msg[320];
        snprintf(msg, sizeof msg, "%s", lk_last_error());
        const int same = snap_same(q, k, &gs, &before);
        ok(sl == LK_OK && ss == LK_ERR_RANGE && same && lk_queue_sync(q) == LK_OK,
           "graph on %s: a bad position: nothing written, the next sync says LK_ERR_RANGE (%s)",
           dn, msg);
    }
    snap_free(&before, k);
    lk_graph_destroy(g);
    dstate_free(&gs, d);
    dstate_free(&es, d);
    dmodel_free(&m);
    hcase_free(&h);
}

int main(void)
{
    uint64_t seed = tap_seed();
    rng = seed;
    const int quick = getenv("LOCKSTEP_TEST_QUICK") != NULL;
    test_devices t;
    test_devices_open(&t);
    int sup[TEST_MAX_DEVICES];
    for (int d = 0; d < t.n; d++)
        sup[d] = 1;

    const int ncases = quick ? 3 : 8;
    for (int i = 0; i < ncases; i++) {
        cfg k;
        random_cfg(&k, i);
        hcase h;
        hcase_make(&h, &k, i % 2 ? (int)pick((uint64_t)k.L) : -1, 0);
        char label[32];
        snprintf(label, sizeof label, "[%d]", i);
        test_case(&t, &h, label, sup);
        hcase_free(&h);
    }
    /* long contexts: more keys than one of the CUDA kernel's attention
     * tiles (64 keys, 32 past head_dim 128) and past the first 128-key
     * block of the P.V dot, the positions near the end of the cache */
    for (int i = 0; i < 2; i++) {
        cfg k;
        random_cfg(&k, 2 * i); /* fused-kernel shapes */
        k.c.head_dim = 128;
        if (i == 1)
            k.c.n_kv = 1, k.c.n_head = 2, k.c.head_dim = 192;
        k.c.attn_scale = 1.0f / sqrtf((float)k.c.head_dim);
        k.L = 1, k.B = 2, k.steps = 3;
        k.ctx = 150 + (int64_t)pick(120);
        hcase h;
        hcase_make(&h, &k, -1, 0);
        for (int64_t st = 0; st < k.steps; st++)
            for (int64_t b = 0; b < k.B; b++)
                h.pos[st][b] = (int32_t)(k.ctx - k.steps + st - 9 * b);
        char label[40];
        snprintf(label, sizeof label, "[long context %d]", i);
        test_case(&t, &h, label, sup);
        hcase_free(&h);
    }
    { /* more (sequence, head) items than a GPU has SMs: the CUDA kernel's
       * blocks then take several attention items a layer, the later ones
       * without the first tile requested ahead */
        cfg k;
        random_cfg(&k, 0); /* fused-kernel shapes */
        k.c.n_kv = 4, k.c.n_head = 64, k.c.head_dim = 8;
        k.c.attn_scale = 1.0f / sqrtf((float)k.c.head_dim);
        k.L = 2, k.B = 4, k.steps = 3;
        hcase h;
        hcase_make(&h, &k, -1, 0);
        test_case(&t, &h, "[256 attention items]", sup);
        hcase_free(&h);
    }
    /* the CUDA kernel's weight ring cut to its largest load group
     * (LOCKSTEP_CUDA_BITNET_RING): each load reuses bytes of the ones
     * before it, as the full ring does with a real model's layers, so that
     * compute-sanitizer's racecheck sees the frees' order (it is never
     * reused at these shapes otherwise); one sequence and four */
    for (int64_t B = 1; B <= 4; B += 3) {
        cfg k;
        random_cfg(&k, 0); /* fused-kernel shapes */
        k.L = MAXL, k.B = B, k.steps = 3;
        hcase h;
        hcase_make(&h, &k, -1, 0);
        char label[48];
        snprintf(label, sizeof label, "[weight ring of one load group, B %lld]", (long long)B);
        setenv("LOCKSTEP_CUDA_BITNET_RING", "1", 1);
        test_case(&t, &h, label, sup);
        unsetenv("LOCKSTEP_CUDA_BITNET_RING");
        hcase_free(&h);
    }
    { /* NaN, Inf and zero rows */
        cfg k;
        random_cfg(&k, 0);
        k.B = 3, k.steps = 3;
        hcase h;
        hcase_make(&h, &k, -1, 1);
        test_case(&t, &h, "[NaN, Inf, zeros]", sup);
        hcase_free(&h);
    }
    for (int d = 0; d < t.n; d++) {
        if (!sup[d]) {
            skip(1, "batch invariance, errors and graphs on %s: the device does not take "
                 "lk_bitnet_decode", lk_device_name(t.dev[d]));
            continue;
        }
        test_batch_invariance(t.dev[d], t.q[d]);
        test_errors(t.dev[d], t.q[d]);
        test_graph(t.dev[d], t.q[d]);
    }
    test_devices_close(&t);
    return done_testing();
}
