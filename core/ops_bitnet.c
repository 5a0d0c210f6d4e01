/* Lockstep core: lk_bitnet_decode, the decoder layers of a BitNet b1.58
 * model for one new token per sequence (include/lockstep/bitnet.h,
 * docs/numerics.md section 12.6).
 *
 * Everything the composition's ops would check is checked here, once,
 * before the driver's kernel runs: a fused kernel then only computes, and
 * nothing is written on error.  Aliasing is checked one layer at a time
 * (a validator holds LK_V_MAX tensors), then across the layers. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep/bitnet.h>

#include "core/validate.h"

#define BN_MAX_CTX ((int64_t)1 << 24) /* lk_attention's cache_len limit */

/* The configuration on its own (also what lk_bitnet_decode_scratch takes). */
static lk_status bn_config_check(const char *fn, const lk_bitnet_config *c)
{
    if (!c)
        return lk_error(LK_ERR_NULL_POINTER, "%s: c is NULL", fn);
    const struct {
        const char *name;
        int64_t v;
    } dims[] = {{"dim", c->dim},           {"n_head", c->n_head}, {"n_kv", c->n_kv},
                {"head_dim", c->head_dim}, {"ffn", c->ffn}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v < 1)
            return lk_error(LK_ERR_BAD_SHAPE, "%s: c->%s (%lld) < 1", fn, dims[i].name,
                            (long long)dims[i].v);
    if (c->n_head % c->n_kv != 0)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: c->n_head (%lld) is not a multiple of c->n_kv (%lld)",
                        fn, (long long)c->n_head, (long long)c->n_kv);
    if (c->head_dim % 2 != 0)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: c->head_dim (%lld) is odd (RoPE rotates pairs)", fn,
                        (long long)c->head_dim);
    if (c->head_dim > BN_MAX_CTX) /* lk_rope's limit */
        return lk_error(LK_ERR_RANGE, "%s: c->head_dim (%lld) > 2^24", fn,
                        (long long)c->head_dim);
    if (!(c->theta > 0.0f) || isinf(c->theta))
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: c->theta (%g) must be finite and > 0", fn,
                        (double)c->theta);
    if (c->rope_flags & ~(unsigned)LK_ROPE_INTERLEAVED)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: c->rope_flags: unknown bits 0x%x", fn,
                        c->rope_flags & ~(unsigned)LK_ROPE_INTERLEAVED);
    return LK_OK;
}

/* The scratch layout of B sequences; LK_ERR_OVERFLOW when it does not fit. */
static lk_status bn_layout(const char *fn, const lk_bitnet_config *c, int64_t batch,
                           lk_bitnet_layout *L)
{
    if (!lk_bitnet_layout_of(batch, c->dim, c->n_head, c->n_kv, c->head_dim, c->ffn, L) ||
        L->total > (size_t)INT64_MAX)
        return lk_error(LK_ERR_OVERFLOW, "%s: the scratch size of %lld sequences overflows", fn,
                        (long long)batch);
    return LK_OK;
}

LK_API size_t lk_bitnet_decode_scratch(const lk_bitnet_config *c, int64_t batch)
{
    static const char fn[] = "lk_bitnet_decode_scratch";
    lk_bitnet_layout L;
    lk_error_clear();
    if (bn_config_check(fn, c) != LK_OK)
        return 0;
    if (batch < 1) {
        lk_error(LK_ERR_BAD_SHAPE, "%s: batch (%lld) < 1", fn, (long long)batch);
        return 0;
    }
    return bn_layout(fn, c, batch, &L) == LK_OK ? L.total : 0;
}

/* One projection's handle: the kernel's view of it into *out. */
#define BN_WEIGHTS(v, lay, field, n, k, out) \
    LK_V_TRY(lk_weights_bitnet((v), #field, (lay)->field, (n), (k), &(out)->field))

/* An optional f32 1 x n norm weight. */
static lk_status bn_norm(lk_validator *v, const char *name, const lk_tensor *src, lk_tensor *dst,
                         int64_t n, const char *what)
{
    LK_V_TRY(lk_v_tensor(v, name, src, dst, LK_DT(LK_F32), LK_V_IN | LK_V_OPTIONAL, 1));
    if (src)
        LK_V_TRY(lk_v_dims(v, name, dst, 1, NULL, n, what));
    return LK_OK;
}

/* What every layer is checked against: the caller's x and pos and the
 * scratch's tensor (each layer's validator holds them again). */
typedef struct bn_common {
    const lk_bitnet_config *c;
    int64_t batch, ctx;
    const lk_tensor *x, *pos, *scratch;
} bn_common;

/* Layer l on its own: weights, norms, cache, and no overlap of its cache
 * and norms with x, pos, the scratch or each other (one validator). */
static lk_status bn_layer_check(lk_queue *q, const bn_common *com, const lk_bitnet_layer *in,
                                int64_t l, lk_bitnet_layer_args *out)
{
    const lk_bitnet_config *c = com->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    char fn[64];
    snprintf(fn, sizeof fn, "lk_bitnet_decode: layers[%lld]", (long long)l);
    lk_validator v;
    lk_tensor x, pos, scratch;
    LK_V_TRY(lk_v_begin(&v, fn, q));
    BN_WEIGHTS(&v, in, qkv, qd + 2 * kvd, c->dim, out);
    BN_WEIGHTS(&v, in, o, c->dim, qd, out);
    BN_WEIGHTS(&v, in, gate_up, 2 * c->ffn, c->dim, out);
    BN_WEIGHTS(&v, in, down, c->dim, c->ffn, out);
    LK_V_TRY(lk_v_tensor(&v, "x", com->x, &x, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "pos", com->pos, &pos, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "scratch", com->scratch, &scratch, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "kv", in->kv, &out->kv, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "kv", &out->kv, -1, NULL, 2 * kvd, "2 n_kv head_dim"));
    if (out->kv.rows < com->batch * com->ctx) /* < 2^31: checked */
        return lk_error(LK_ERR_BAD_SHAPE, "%s: kv: rows (%lld) < batch * ctx (%lld)", fn,
                        (long long)out->kv.rows, (long long)(com->batch * com->ctx));
    LK_V_TRY(bn_norm(&v, "attn_norm", in->attn_norm, &out->attn_norm, c->dim, "dim"));
    LK_V_TRY(bn_norm(&v, "attn_sub_norm", in->attn_sub_norm, &out->attn_sub_norm, qd,
                     "n_head head_dim"));
    LK_V_TRY(bn_norm(&v, "ffn_norm", in->ffn_norm, &out->ffn_norm, c->dim, "dim"));
    LK_V_TRY(bn_norm(&v, "ffn_sub_norm", in->ffn_sub_norm, &out->ffn_sub_norm, c->ffn, "ffn"));
    return lk_v_finish(&v);
}

/* The bytes one layer's cache or norm weight spans, for the check across
 * layers. */
typedef struct bn_span {
    uintptr_t lo, hi;
    int64_t layer;
    const char *name; /* "kv", "attn_norm", ... */
    int kv;           /* a cache (written), else a norm weight (read) */
} bn_span;

static int bn_span_cmp(const void *a, const void *b)
{
    const bn_span *p = a, *q = b;
    return p->lo < q->lo ? -1 : p->lo > q->lo;
}

static bn_span bn_span_of(const lk_tensor *t, int64_t layer, const char *name, int kv)
{
    bn_span s = {(uintptr_t)t->data, (uintptr_t)t->data, layer, name, kv};
    if (t->data && t->rows > 0 && t->cols > 0) /* validated: no overflow */
        s.hi = s.lo + (uintptr_t)(((t->rows - 1) * t->ld + t->cols) * 4);
    return s;
}

/* No cache overlaps another layer's cache or norm weights (each layer's
 * own were checked with it).  Sorted by start, a span overlaps an earlier
 * one exactly when the furthest end so far lies past its start: tracking
 * that end over the caches alone and over every span finds each pair with
 * a cache in it, in n log n. */
static lk_status bn_cross_check(const lk_bitnet_layer_args *la, int64_t n)
{
    static const char fn[] = "lk_bitnet_decode";
    if (n < 2)
        return LK_OK;
    if ((uint64_t)n > SIZE_MAX / (5 * sizeof(bn_span)))
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: too many layers to check", fn);
    bn_span *s = malloc((size_t)n * 5 * sizeof *s);
    if (!s)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    size_t m = 0;
    for (int64_t l = 0; l < n; l++) {
        const lk_tensor *t[5] = {&la[l].kv, &la[l].attn_norm, &la[l].attn_sub_norm,
                                 &la[l].ffn_norm, &la[l].ffn_sub_norm};
        static const char *const names[5] = {"kv", "attn_norm", "attn_sub_norm", "ffn_norm",
                                             "ffn_sub_norm"};
        for (int i = 0; i < 5; i++) {
            bn_span sp = bn_span_of(t[i], l, names[i], i == 0);
            if (sp.lo < sp.hi)
                s[m++] = sp;
        }
    }
    qsort(s, m, sizeof *s, bn_span_cmp);
    const bn_span *far_kv = NULL, *far_any = NULL;
    lk_status st = LK_OK;
    for (size_t i = 0; i < m && st == LK_OK; i++) {
        const bn_span *p = &s[i], *hit = NULL;
        const int is_kv = p->kv;
        if (far_kv && far_kv->hi > p->lo)
            hit = far_kv;
        else if (is_kv && far_any && far_any->hi > p->lo)
            hit = far_any;
        if (hit)
            st = lk_error(LK_ERR_ALIASING, "%s: layers[%lld].%s overlaps layers[%lld].%s", fn,
                          (long long)p->layer, p->name, (long long)hit->layer, hit->name);
        if (is_kv && (!far_kv || p->hi > far_kv->hi))
            far_kv = p;
        if (!far_any || p->hi > far_any->hi)
            far_any = p;
    }
    free(s);
    return st;
}

LK_API lk_status lk_bitnet_decode(lk_queue *q, const lk_bitnet_config *c,
                                  const lk_bitnet_layer *layers, int64_t n_layers,
                                  const lk_tensor *x, const lk_tensor *pos, int64_t ctx,
                                  void *scratch, size_t scratch_bytes)
{
    static const char fn[] = "lk_bitnet_decode";
    lk_validator v;
    lk_bitnet_args a;
    lk_tensor sv, sn;
    lk_bitnet_layout L;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, fn, q));
    LK_V_TRY(bn_config_check(fn, c));
    if (n_layers < 0)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: n_layers (%lld) < 0", fn, (long long)n_layers);
    if (n_layers > 0 && !layers)
        return lk_error(LK_ERR_NULL_POINTER, "%s: layers is NULL (n_layers %lld)", fn,
                        (long long)n_layers);
    if (ctx < 1 || ctx > BN_MAX_CTX)
        return lk_error(ctx < 1 ? LK_ERR_BAD_SHAPE : LK_ERR_RANGE,
                        "%s: ctx (%lld) is outside [1, 2^24]", fn, (long long)ctx);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT(LK_F32), LK_V_OUT, 1));
    if (a.x.rows < 1)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: x: rows (%lld) < 1: no sequence", fn,
                        (long long)a.x.rows);
    LK_V_TRY(lk_v_dims(&v, "x", &a.x, -1, NULL, c->dim, "dim"));
    LK_V_TRY(lk_v_tensor(&v, "pos", pos, &a.pos, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(&v, "pos", &a.pos, a.x.rows, "x rows", 1, NULL));
    const int64_t B = a.x.rows;
    /* the cache row b ctx + pos[b] is an int32 index (lk_set_rows) */
    if (B > INT32_MAX / ctx)
        return lk_error(LK_ERR_RANGE, "%s: batch (%lld) * ctx (%lld) cache rows > 2^31 - 1", fn,
                        (long long)B, (long long)ctx);
    LK_V_TRY(bn_layout(fn, c, B, &L));
    if (!scratch)
        return lk_error(LK_ERR_NULL_POINTER, "%s: scratch is NULL", fn);
    if ((uintptr_t)scratch % 16 != 0)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: scratch (%p) is not 16-byte aligned", fn,
                        scratch);
    if (scratch_bytes < L.total)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "%s: scratch_bytes (%zu) < lk_bitnet_decode_scratch (%zu)", fn,
                        scratch_bytes, L.total);
    /* the bytes the call may touch, as a tensor: lk_v_finish checks their
     * device and that they overlap nothing else */
    sv = lk_mat(scratch, LK_I8, 1, (int64_t)L.total);
    LK_V_TRY(lk_v_tensor(&v, "scratch", &sv, &sn, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_finish(&v));

    lk_bitnet_layer_args *la = NULL;
    if (n_layers > 0) {
        if ((uint64_t)n_layers > SIZE_MAX / sizeof *la ||
            !(la = calloc((size_t)n_layers, sizeof *la)))
            return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of host memory for %lld layers", fn,
                            (long long)n_layers);
    }
    const bn_common com = {c, B, ctx, x, pos, &sv};
    lk_status st = LK_OK;
    for (int64_t l = 0; l < n_layers && st == LK_OK; l++)
        st = bn_layer_check(q, &com, &layers[l], l, &la[l]);
    if (st == LK_OK)
        st = bn_cross_check(la, n_layers);
    /* Under capture the positions are read when the graph runs: by the
     * replay (core/graph.c) or on the device (driver.h, queue_capturing). */
    if (st == LK_OK && n_layers > 0 && !q->cap && !lk_capture_on_device(q))
        st = lk_index_check(fn, "pos", q, &a.pos, ctx);
    if (st != LK_OK) {
        free(la);
        return st;
    }
    a.batch = B;
    a.dim = c->dim;
    a.n_head = c->n_head;
    a.n_kv = c->n_kv;
    a.head_dim = c->head_dim;
    a.ffn = c->ffn;
    a.ctx = ctx;
    a.n_layers = n_layers;
    a.eps = c->eps;
    a.theta = c->theta;
    a.attn_scale = c->attn_scale;
    a.rope_flags = c->rope_flags;
    a.layers = la;
    a.scratch = scratch;
    a.scratch_bytes = scratch_bytes;

    /* LK_V_RUN's tail, with the layers freed on every path */
    const lk_device_iface *f = q->dev->iface;
    st = lk_v_supported(&v, LK_OP_BITNET_DECODE, "bitnet_decode",
                        f->kernels.bitnet_decode != NULL, &a);
    if (st != LK_OK || n_layers == 0) {
        free(la);
        return st;
    }
    if (lk_capture_hosted(q)) /* the record keeps la until the graph goes */
        return lk_capture_record_owned(q, fn, LK_KSLOT_bitnet_decode, &a, sizeof a, la);
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    st = f->kernels.bitnet_decode(q->state, &a);
    lk_fpenv_leave(&fe);
    free(la);
    st = lk_v_result(&v, st);
    if (st == LK_OK && q->cap)
        lk_capture_count(q);
    return st;
}
