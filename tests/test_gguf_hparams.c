/* Lockstep tests: the BitNet example's model loader (bn_weights_from_gguf)
 * refuses, at load time and with the key in its message, a GGUF file whose
 * hyper-parameters make the model meaningless: a RoPE base or norm epsilon
 * that is NaN, infinite or not positive, head counts that are zero,
 * negative or do not divide, a key/value length or rotary dimension other
 * than the head size, a context length of 0, a vocabulary or layer count
 * that disagrees with the tensors, a key of the wrong type, RoPE scaling
 * it does not run, an architecture not in its table or output.weight where
 * the architecture ties the head; and takes the RoPE pairing and FFN gate
 * from the architecture.
 *
 * Each case rewrites the demo's tiny model file with one key changed (the
 * rest copied as it was) and must be refused; the unchanged rewrite and
 * harmless variants must load. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/model.h"
#include "tests/tap.h"

#define ARCH "bitnet-b1.58."

static char err[512];

/* one key to change: its new value (type and encoding) or, with drop, gone */
typedef struct change {
    const char *key;
    uint32_t type;
    uint8_t enc[8];
    size_t n;
    int drop;
} change;

static change c_u32(const char *key, uint32_t v)
{
    change c = {key, LKG_U32, {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)},
                4, 0};
    return c;
}

static change c_i32(const char *key, int32_t v)
{
    change c = c_u32(key, (uint32_t)v);
    c.type = LKG_I32;
    return c;
}

static change c_f32(const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    change c = c_u32(key, b);
    c.type = LKG_F32;
    return c;
}

static change c_f64(const char *key, double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    change c = {key, LKG_F64, {0}, 8, 0};
    for (int i = 0; i < 8; i++)
        c.enc[i] = (uint8_t)(b >> 8 * i);
    return c;
}

static change c_drop(const char *key)
{
    change c = {key, 0, {0}, 0, 1};
    return c;
}

static size_t scalar_size(uint32_t t)
{
    switch (t) {
    case LKG_U8: case LKG_I8: case LKG_BOOL: return 1;
    case LKG_U16: case LKG_I16: return 2;
    case LKG_U32: case LKG_I32: case LKG_F32: return 4;
    default: return 8;
    }
}

static char *cstr(lkg_str s)
{
    char *p = malloc((size_t)s.len + 1);
    if (!p)
        bail("out of memory");
    memcpy(p, s.s, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

/* The file d with ch applied (a changed key moves to the end); extra_tokens
 * >= 0 replaces tokenizer.ggml.tokens by that many placeholder tokens. */
static void rewrite(const uint8_t *d, size_t n, const change *ch, int nch, long extra_tokens,
                    uint8_t **out, size_t *on)
{
    lkg_file *f;
    if (lkg_parse(d, n, &f, err, sizeof err))
        bail("the model file does not parse: %s", err);
    lkg_writer *w = lkg_writer_new((uint32_t)f->alignment);
    int rc = w ? 0 : -1;
    for (uint64_t i = 0; !rc && i < f->n_kv; i++) {
        const lkg_kv *kv = &f->kv[i];
        char *key = cstr(kv->key);
        int skip_it = !strcmp(key, "general.alignment") ||
                      (extra_tokens >= 0 && !strcmp(key, "tokenizer.ggml.tokens"));
        for (int c = 0; c < nch; c++)
            skip_it |= !strcmp(key, ch[c].key);
        const lkg_value *v = &kv->value;
        if (skip_it) {
        } else if (v->type == LKG_STRING) {
            char *s = cstr(v->v.str);
            rc |= lkg_w_str(w, key, s);
            free(s);
        } else if (v->type == LKG_ARRAY) {
            size_t len = 12 + (size_t)v->v.arr.bytes;
            uint8_t *enc = malloc(len);
            if (!enc)
                bail("out of memory");
            for (int k = 0; k < 4; k++)
                enc[k] = (uint8_t)(v->v.arr.type >> 8 * k);
            for (int k = 0; k < 8; k++)
                enc[4 + k] = (uint8_t)(v->v.arr.count >> 8 * k);
            memcpy(enc + 12, v->v.arr.raw, (size_t)v->v.arr.bytes);
            rc |= lkg_w_raw(w, key, LKG_ARRAY, enc, len);
            free(enc);
        } else {
            uint8_t enc[8];
            uint64_t bits = v->v.u;
            if (v->type == LKG_F32) {
                float x = (float)v->v.f;
                uint32_t b;
                memcpy(&b, &x, 4);
                bits = b;
            } else if (v->type == LKG_F64) {
                memcpy(&bits, &v->v.f, 8);
            } else if (v->type == LKG_I8 || v->type == LKG_I16 || v->type == LKG_I32 ||
                       v->type == LKG_I64) {
                bits = (uint64_t)v->v.i;
            }
            for (int k = 0; k < 8; k++)
                enc[k] = (uint8_t)(bits >> 8 * k);
            rc |= lkg_w_raw(w, key, v->type, enc, scalar_size(v->type));
        }
        free(key);
    }
    for (int c = 0; !rc && c < nch; c++)
        if (!ch[c].drop)
            rc |= lkg_w_raw(w, ch[c].key, ch[c].type, ch[c].enc, ch[c].n);
    if (!rc && extra_tokens >= 0) {
        char **toks = calloc((size_t)extra_tokens + 1, sizeof *toks);
        for (long i = 0; toks && i < extra_tokens; i++) {
            toks[i] = malloc(24);
            if (toks[i])
                snprintf(toks[i], 24, "<t%ld>", i);
        }
        rc |= toks ? lkg_w_str_array(w, "tokenizer.ggml.tokens", (const char *const *)toks,
                                     (uint64_t)extra_tokens)
                   : -1;
        for (long i = 0; toks && i < extra_tokens; i++)
            free(toks[i]);
        free(toks);
    }
    for (uint64_t i = 0; !rc && i < f->n_tensors; i++) {
        const lkg_tensor *t = &f->tensors[i];
        char *name = cstr(t->name);
        rc |= lkg_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
        free(name);
    }
    if (rc || lkg_writer_finish(w, out, on))
        bail("rewriting the model file: out of memory");
    lkg_writer_free(w);
    lkg_close(f);
}

/* 0 loaded, -1 refused (message in err) */
static int load(const uint8_t *d, size_t n)
{
    lkg_file *f;
    if (lkg_parse(d, n, &f, err, sizeof err))
        return -1;
    bn_weights w;
    int rc = bn_weights_from_gguf(&w, f, 128, 0, err, sizeof err);
    if (rc == 0)
        bn_weights_free(&w);
    lkg_close(f);
    return rc;
}

static const uint8_t *good;
static size_t good_n;

/* the file with ch must be refused with `needle` in the message */
static void refuse(change ch, long tokens, const char *what, const char *needle)
{
    uint8_t *d;
    size_t n;
    rewrite(good, good_n, &ch, 1, tokens, &d, &n);
    err[0] = 0;
    int rc = load(d, n);
    ok(rc != 0 && strstr(err, needle) != NULL, "%s is refused at load time (%s)", what,
       rc ? err : "loaded");
    free(d);
}

static void accept(change ch, const char *what)
{
    uint8_t *d;
    size_t n;
    rewrite(good, good_n, &ch, 1, -1, &d, &n);
    int rc = load(d, n);
    ok(rc == 0, "%s loads (%s)", what, rc ? err : "ok");
    free(d);
}

int main(void)
{
    bn_config cfg = bn_config_tiny(2); /* dim 256, 4 heads of 64, 2 KV heads, vocab 1000 */
    bn_weights w;
    if (bn_weights_generate(&w, &cfg, 7, err, sizeof err))
        bail("bn_weights_generate: %s", err);
    uint8_t *d0;
    if (bn_weights_to_gguf(&w, LKG_T_TQ2_0, &d0, &good_n, err, sizeof err))
        bail("bn_weights_to_gguf: %s", err);
    bn_weights_free(&w);
    good = d0;

    uint8_t *d;
    size_t n;
    rewrite(good, good_n, NULL, 0, -1, &d, &n);
    ok(load(d, n) == 0, "the model file rewritten unchanged loads (%s)", err);
    free(d);

    const char *fb = ARCH "rope.freq_base", *eps = ARCH "attention.layer_norm_rms_epsilon";
    refuse(c_f32(fb, NAN), -1, "rope.freq_base = NaN", "rope.freq_base");
    refuse(c_f32(fb, INFINITY), -1, "rope.freq_base = inf", "rope.freq_base");
    refuse(c_f32(fb, 0.0f), -1, "rope.freq_base = 0", "rope.freq_base");
    refuse(c_f32(fb, -10000.0f), -1, "rope.freq_base = -10000", "rope.freq_base");
    refuse(c_f64(fb, 1e300), -1, "rope.freq_base = 1e300 (f64, beyond f32)", "rope.freq_base");
    refuse(c_u32(fb, 0), -1, "rope.freq_base = 0 (u32)", "rope.freq_base");
    {
        change s = {fb, LKG_STRING, {1, 0, 0, 0, 0, 0, 0, 0}, 8, 0}; /* "" then junk: a string */
        s.enc[0] = 0;
        refuse(s, -1, "rope.freq_base as a string", "rope.freq_base");
    }
    refuse(c_f32(eps, NAN), -1, "layer_norm_rms_epsilon = NaN", "layer_norm_rms_epsilon");
    refuse(c_f32(eps, -1e-5f), -1, "layer_norm_rms_epsilon = -1e-5", "layer_norm_rms_epsilon");
    refuse(c_f32(eps, 0.0f), -1, "layer_norm_rms_epsilon = 0", "layer_norm_rms_epsilon");
    refuse(c_f32(eps, INFINITY), -1, "layer_norm_rms_epsilon = inf", "layer_norm_rms_epsilon");
    refuse(c_u32(ARCH "attention.head_count", 0), -1, "head_count = 0", "head_count");
    refuse(c_u32(ARCH "attention.head_count", 3), -1, "head_count = 3 (dim 256)", "head");
    refuse(c_i32(ARCH "attention.head_count", -4), -1, "head_count = -4", "head_count");
    refuse(c_u32(ARCH "attention.head_count", 1024), -1, "head_count = 1024 (dim 256)", "head");
    refuse(c_u32(ARCH "attention.head_count_kv", 0), -1, "head_count_kv = 0", "head_count_kv");
    refuse(c_u32(ARCH "attention.head_count_kv", 3), -1, "head_count_kv = 3 (4 heads)", "head");
    refuse(c_u32(ARCH "attention.head_count_kv", 8), -1, "head_count_kv = 8 (4 heads)", "head");
    refuse(c_i32(ARCH "attention.head_count_kv", -2), -1, "head_count_kv = -2", "head_count_kv");
    refuse(c_u32(ARCH "attention.key_length", 32), -1, "key_length 32 (head 64)", "key_length");
    refuse(c_u32(ARCH "attention.value_length", 128), -1, "value_length 128 (head 64)",
           "value_length");
    refuse(c_u32(ARCH "rope.dimension_count", 32), -1, "rope.dimension_count 32 (head 64)",
           "rope.dimension_count");
    refuse(c_u32(ARCH "context_length", 0), -1, "context_length = 0", "context_length");
    refuse(c_i32(ARCH "context_length", -1), -1, "context_length = -1", "context_length");
    refuse(c_u32(ARCH "vocab_size", 1001), -1, "vocab_size 1001 (embedding 1000 rows)",
           "token_embd");
    refuse(c_u32(ARCH "embedding_length", 512), -1, "embedding_length 512 (tensors 256)",
           "256");
    refuse(c_u32(ARCH "block_count", 0), -1, "block_count = 0", "block_count");
    refuse(c_u32(ARCH "block_count", 1), -1, "block_count 1 (the file holds 2 blocks)",
           "block_count");
    refuse(c_u32(ARCH "block_count", 3), -1, "block_count 3 (the file holds 2 blocks)",
           "block_count");
    refuse(c_u32(ARCH "block_count", 1u << 30), -1, "block_count 2^30", "block_count");
    refuse(c_u32(ARCH "feed_forward_length", 0), -1, "feed_forward_length = 0",
           "feed_forward_length");
    refuse(c_drop(ARCH "attention.head_count"), -1, "no head_count", "head_count");
    refuse(c_drop("nothing.dropped"), 999, "999 tokens for an embedding of 1000 rows",
           "tokenizer.ggml.tokens");
    refuse(c_drop("nothing.dropped"), 1001, "1001 tokens for an embedding of 1000 rows",
           "tokenizer.ggml.tokens");

    accept(c_f64(fb, 500000.0), "rope.freq_base = 500000 (f64)");
    accept(c_u32(fb, 10000), "rope.freq_base = 10000 (u32)");
    accept(c_f32(eps, 1e-6f), "layer_norm_rms_epsilon = 1e-6");
    accept(c_u32(ARCH "attention.key_length", 64), "key_length 64 (head 64)");
    accept(c_u32(ARCH "rope.dimension_count", 64), "rope.dimension_count 64 (head 64)");
    accept(c_i32(ARCH "attention.head_count_kv", 2), "head_count_kv = 2 as an i32");
    accept(c_drop(ARCH "rope.freq_base"), "no rope.freq_base (the default)");
    accept(c_drop(ARCH "vocab_size"), "no vocab_size (the embedding's rows)");

    /* The architecture decides the RoPE pairing and the FFN gate
     * (examples/bitnet/arch.c); RoPE scaling that would change the model
     * is refused, linear by 1 (llama.cpp's converter writes it) is not. */
    refuse(c_f32(ARCH "rope.scaling.factor", 2.0f), -1, "rope.scaling.factor 2",
           "rope.scaling.factor");
    accept(c_f32(ARCH "rope.scaling.factor", 1.0f), "rope.scaling.factor 1");
    {
        lkg_file *f = NULL;
        int good_arch = lkg_parse(good, good_n, &f, err, sizeof err) == 0 &&
                        bn_weights_from_gguf(&w, f, 128, 0, err, sizeof err) == 0;
        ok(good_arch && w.cfg.rope_flags == LK_ROPE_NEOX && w.ffn_act == LK_UNARY_RELU2 &&
               !strcmp(w.arch, "bitnet-b1.58"),
           "bitnet-b1.58: NEOX RoPE, relu^2 FFN (%s)", good_arch ? "ok" : err);
        lkg_close(f);
        if (!good_arch)
            bail("cannot go on: %s", err);
        static const char *const names[3] = {"bitnet", "llama", "bitnet"};
        for (int i = 0; i < 3; i++) {
            bn_weights w2;
            uint8_t *dd = NULL;
            size_t nn = 0;
            w.arch = names[i];
            if (i == 2 && !(w.lm_head = malloc((size_t)(w.cfg.vocab * w.cfg.dim) * 2)))
                bail("out of memory");
            if (i == 2)
                memcpy(w.lm_head, w.embd, (size_t)(w.cfg.vocab * w.cfg.dim) * 2);
            f = NULL;
            int rc = bn_weights_to_gguf(&w, LKG_T_TQ2_0, &dd, &nn, err, sizeof err) ||
                     lkg_parse(dd, nn, &f, err, sizeof err) ||
                     bn_weights_from_gguf(&w2, f, 128, 0, err, sizeof err);
            if (i == 0)
                ok(rc == 0 && w2.cfg.rope_flags == LK_ROPE_NEOX && w2.ffn_act == LK_UNARY_SILU,
                   "bitnet (llama.cpp's): NEOX RoPE, SiLU FFN (%s)", rc ? err : "ok");
            else if (i == 1)
                ok(rc != 0 && strstr(err, "'llama'") && strstr(err, "bitnet-b1.58"),
                   "an architecture not in the table is refused with the list (%s)", err);
            else
                ok(rc != 0 && strstr(err, "output.weight"),
                   "bitnet with output.weight (its head is token_embd) is refused (%s)", err);
            if (rc == 0)
                bn_weights_free(&w2);
            lkg_close(f);
            free(dd);
        }
        bn_weights_free(&w);
    }
    free(d0);
    return done_testing();
}
