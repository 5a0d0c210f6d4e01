/* BitNet example: the decoder (model.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch.h"
#include "kvpages.h"
#include "model.h"


bn_config bn_config_2b4t(int64_t n_layer)
{
    bn_config c = {n_layer, 2560, 20, 5, 128, 6912, 128256, 32768, 500000.0f, 1e-5f, LK_ROPE_NEOX};
    return c;
}

bn_config bn_config_tiny(int64_t n_layer)
{
    bn_config c = {n_layer, 256, 4, 2, 64, 512, 1000, 4096, 10000.0f, 1e-5f, LK_ROPE_NEOX};
    return c;
}

/* ------------------------------------------------------------ weights */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int tern_alloc(lkg_ternary *t, int64_t rows, int64_t cols, int64_t nscale)
{
    t->rows = rows;
    t->cols = cols;
    t->ld = (cols + 3) / 4 * 4;
    t->nscale = nscale;
    t->codes = malloc((size_t)(rows * (t->ld / 4)));
    t->scale = malloc((size_t)nscale * sizeof(float));
    return t->codes && t->scale ? 0 : -1;
}

/* Uniform codes 0..2; scale 1 / sqrt(2/3 K) rounded to f16, so that an
 * output has about unit variance and every GGUF type stores it exactly. */
static int tern_random(lkg_ternary *t, int64_t rows, int64_t cols, uint64_t *s)
{
    if (tern_alloc(t, rows, cols, 1))
        return -1;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = t->codes + r * (t->ld / 4);
        for (int64_t b = 0; b < t->ld / 4; b++) {
            uint64_t x = rnd(s);
            uint8_t v = 0;
            for (int i = 0; i < 4; i++) {
                int64_t k = b * 4 + i;
                unsigned code = k < cols ? (unsigned)((x >> (16 * i)) % 3u) : 1u;
                v |= (uint8_t)(code << 2 * i);
            }
            row[b] = v;
        }
    }
    float sc = 1.0f / sqrtf((float)cols * (2.0f / 3.0f));
    t->scale[0] = lk_f16_to_f32(lk_f32_to_f16(sc));
    return 0;
}

static float *norm_random(int64_t n, uint64_t *s)
{
    float *p = malloc((size_t)n * sizeof *p);
    for (int64_t i = 0; p && i < n; i++)
        p[i] = 0.875f + (float)(rnd(s) >> 40) * 0x1p-26f; /* [0.875, 1.125) */
    return p;
}

int bn_weights_generate(bn_weights *w, const bn_config *cfg, uint64_t seed, char *err,
                        size_t errlen)
{
    uint64_t s = seed;
    const bn_config c = *cfg;
    memset(w, 0, sizeof *w);
    w->cfg = c;
    size_t ne = (size_t)(c.vocab * c.dim);
    w->embd = malloc(ne * sizeof *w->embd);
    w->layers = calloc((size_t)c.n_layer, sizeof *w->layers);
    if (!w->embd || !w->layers)
        goto oom;
    for (size_t i = 0; i < ne; i++) {
        uint64_t x = rnd(&s);
        /* Two values per draw: uniform multiples of 2^-14 in [-1/16, 1/16). */
        w->embd[i] = lk_f32_to_bf16((float)((int32_t)(x & 0x7ff) - 1024) * 0x1p-14f);
        if (++i < ne)
            w->embd[i] = lk_f32_to_bf16((float)((int32_t)((x >> 32) & 0x7ff) - 1024) * 0x1p-14f);
    }
    if (!(w->out_norm = norm_random(c.dim, &s)))
        goto oom;
    const int64_t qd = c.n_head * c.head_dim, kvd = c.n_kv * c.head_dim;
    for (int64_t l = 0; l < c.n_layer; l++) {
        bn_layer_w *L = &w->layers[l];
        if (!(L->attn_norm = norm_random(c.dim, &s)) || !(L->attn_sub_norm = norm_random(qd, &s)) ||
            !(L->ffn_norm = norm_random(c.dim, &s)) || !(L->ffn_sub_norm = norm_random(c.ffn, &s)) ||
            tern_random(&L->wq, qd, c.dim, &s) || tern_random(&L->wk, kvd, c.dim, &s) ||
            tern_random(&L->wv, kvd, c.dim, &s) || tern_random(&L->wo, c.dim, qd, &s) ||
            tern_random(&L->wgate, c.ffn, c.dim, &s) || tern_random(&L->wup, c.ffn, c.dim, &s) ||
            tern_random(&L->wdown, c.dim, c.ffn, &s))
            goto oom;
    }
    return 0;
oom:
    bn_weights_free(w);
    return lkg_fail(err, errlen, "out of memory generating the weights");
}

void bn_weights_free(bn_weights *w)
{
    if (!w)
        return;
    for (int64_t l = 0; w->layers && l < w->cfg.n_layer; l++) {
        bn_layer_w *L = &w->layers[l];
        free(L->attn_norm), free(L->attn_sub_norm), free(L->ffn_norm), free(L->ffn_sub_norm);
        lkg_ternary *t[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
        for (int i = 0; i < 7; i++)
            lkg_ternary_free(t[i]);
    }
    free(w->layers);
    free(w->embd);
    free(w->lm_head);
    free(w->out_norm);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------ GGUF */

static const char *const tern_names[7] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                          "ffn_gate", "ffn_up", "ffn_down"};
static const char *const norm_names[4] = {"attn_norm", "attn_sub_norm", "ffn_norm",
                                          "ffn_sub_norm"};

static lkg_ternary *layer_tern(bn_layer_w *L, int i)
{
    lkg_ternary *t[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown};
    return t[i];
}

static float **layer_norm(bn_layer_w *L, int i)
{
    float **n[4] = {&L->attn_norm, &L->attn_sub_norm, &L->ffn_norm, &L->ffn_sub_norm};
    return n[i];
}

/* A float tensor that holds exactly {-s, 0, +s} (as bitnet.cpp's converter
 * writes F16 projections) as LK_T2 with scale s. */
static int float_ternary(const lkg_tensor *t, lkg_ternary *out, char *err, size_t errlen)
{
    int64_t rows, cols;
    if (lkg_tensor_shape(t, &rows, &cols, err, errlen))
        return -1;
    float *v = malloc((size_t)(rows * cols) * sizeof *v);
    if (!v || lkg_tensor_to_f32(t, v, err, errlen) || tern_alloc(out, rows, cols, 1)) {
        free(v);
        lkg_ternary_free(out);
        return v ? -1 : lkg_fail(err, errlen, "out of memory");
    }
    float s = 0;
    for (int64_t i = 0; i < rows * cols; i++)
        if (v[i] != 0) {
            s = v[i] < 0 ? -v[i] : v[i];
            break;
        }
    memset(out->codes, 0x55, (size_t)(rows * (out->ld / 4)));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < cols; k++) {
            float x = v[r * cols + k];
            unsigned code = x == 0 ? 1u : x == s ? 2u : x == -s ? 0u : 3u;
            if (code == 3u) {
                free(v);
                lkg_ternary_free(out);
                return lkg_fail(err, errlen, "tensor '%.*s' is %s but not ternary (%g and %g)",
                            (int)(t->name.len > 64 ? 64 : t->name.len), t->name.s,
                            lkg_type_name(t->type), (double)s, (double)x);
            }
            uint8_t *b = out->codes + r * (out->ld / 4) + k / 4;
            *b = (uint8_t)((*b & ~(3u << 2 * (k % 4))) | code << 2 * (k % 4));
        }
    out->scale[0] = s;
    free(v);
    return 0;
}

static int want_shape(const lkg_tensor *t, const char *name, int64_t rows, int64_t cols,
                      char *err, size_t errlen)
{
    int64_t r, c;
    if (!t)
        return lkg_fail(err, errlen, "tensor '%s' is missing", name);
    if (lkg_tensor_shape(t, &r, &c, err, errlen))
        return -1;
    if (r != rows || c != cols)
        return lkg_fail(err, errlen, "tensor '%s' is %lld x %lld, the model needs %lld x %lld", name,
                    (long long)r, (long long)c, (long long)rows, (long long)cols);
    return 0;
}

int bn_weights_from_gguf(bn_weights *w, const lkg_file *f, int i2s_block, int64_t max_ctx,
                         char *err, size_t errlen)
{
    char arch[64], key[160], name[96];
    uint64_t u;
    bn_config c;
    memset(w, 0, sizeof *w);
    memset(&c, 0, sizeof c);
    if (lkg_get_str(f, "general.architecture", arch, sizeof arch, err, errlen))
        return -1;
    /* Every hyper-parameter is checked here, so that a file that makes the
     * model meaningless is refused at load time with the key named, not at
     * its first op.  A key that is present must be well formed even when
     * it is optional. */
#define U64(field, suffix, required)                                                     \
    do {                                                                                 \
        snprintf(key, sizeof key, "%s.%s", arch, suffix);                                \
        if (lkg_get_u64(f, key, &u, err, errlen) == 0) {                                 \
            if (u == 0 || u > ((uint64_t)1 << 31))                                       \
                return lkg_fail(err, errlen, "metadata '%s' = %llu is absurd", key,          \
                            (unsigned long long)u);                                      \
            c.field = (int64_t)u;                                                        \
        } else if (required || lkg_find_kv(f, key))                                      \
            return -1;                                                                   \
    } while (0)
    U64(n_layer, "block_count", 1);
    U64(dim, "embedding_length", 1);
    U64(ffn, "feed_forward_length", 1);
    U64(n_head, "attention.head_count", 1);
    c.n_kv = c.n_head;
    U64(n_kv, "attention.head_count_kv", 0);
    c.max_ctx = 4096;
    U64(max_ctx, "context_length", 0);
    U64(vocab, "vocab_size", 0);
#undef U64
    if (max_ctx > 0 && max_ctx < c.max_ctx)
        c.max_ctx = max_ctx;
    /* positive and finite: a NaN, infinite or non-positive base makes every
     * rotation angle meaningless; a non-positive or non-finite epsilon lets
     * an all-zero row divide by zero */
    c.theta = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    if (lkg_find_kv(f, key)) {
        if (lkg_get_f32(f, key, &c.theta, err, errlen))
            return -1;
        if (!(c.theta > 0.0f) || !isfinite(c.theta))
            return lkg_fail(err, errlen, "metadata '%s' = %g: the RoPE base must be positive "
                            "and finite", key, (double)c.theta);
    }
    c.eps = 1e-5f;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if (lkg_find_kv(f, key)) {
        if (lkg_get_f32(f, key, &c.eps, err, errlen))
            return -1;
        if (!(c.eps > 0.0f) || !(c.eps < 1.0f))
            return lkg_fail(err, errlen, "metadata '%s' = %g: the RMSNorm epsilon must be "
                            "positive, finite and below 1", key, (double)c.eps);
    }
    if (c.dim % c.n_head || c.n_head % c.n_kv || (c.dim / c.n_head) % 2)
        return lkg_fail(err, errlen, "dim %lld, %lld heads (attention.head_count), %lld KV heads "
                        "(attention.head_count_kv) do not fit together: the heads must divide "
                        "dim into an even head size and the KV heads the heads",
                    (long long)c.dim, (long long)c.n_head, (long long)c.n_kv);
    c.head_dim = c.dim / c.n_head;
    /* the head size other keys state must be this one (this model has no
     * separate key/value sizes and rotates the whole head) */
    static const char *const head_keys[3] = {"attention.key_length", "attention.value_length",
                                             "rope.dimension_count"};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, head_keys[i]);
        if (!lkg_find_kv(f, key))
            continue;
        if (lkg_get_u64(f, key, &u, err, errlen))
            return -1;
        if (u != (uint64_t)c.head_dim)
            return lkg_fail(err, errlen, "metadata '%s' = %llu, but the head size is %lld "
                            "(embedding_length / attention.head_count)", key,
                            (unsigned long long)u, (long long)c.head_dim);
    }
    /* the layers the file holds: blk.0 .. blk.(n_layer - 1), no more (so a
     * huge count is refused before anything is allocated) */
    snprintf(name, sizeof name, "blk.%lld.attn_norm.weight", (long long)c.n_layer - 1);
    if (!lkg_find_tensor(f, name))
        return lkg_fail(err, errlen, "metadata '%s.block_count' = %lld, but tensor '%s' is "
                        "missing", arch, (long long)c.n_layer, name);
    snprintf(name, sizeof name, "blk.%lld.attn_norm.weight", (long long)c.n_layer);
    if (lkg_find_tensor(f, name))
        return lkg_fail(err, errlen, "metadata '%s.block_count' = %lld, but the file holds %s",
                        arch, (long long)c.n_layer, name);
    /* the RoPE pairing and FFN activation of the engine that writes this
     * architecture (arch.h) */
    const bn_arch *ar = bn_arch_find(arch);
    if (!ar)
        return lkg_fail(err, errlen, "general.architecture '%s' is not one this model runs "
                        "(%s)", arch, bn_arch_names());
    if (bn_arch_check(f, ar, err, errlen))
        return -1;
    c.rope_flags = ar->rope_flags;
    const lkg_tensor *te = lkg_find_tensor(f, "token_embd.weight");
    if (!te)
        return lkg_fail(err, errlen, "tensor 'token_embd.weight' is missing");
    if (c.vocab == 0)
        c.vocab = (int64_t)te->ne[1];
    if (want_shape(te, "token_embd.weight", c.vocab, c.dim, err, errlen))
        return -1;
    /* the tokenizer's tokens, when the file has them, are the embedding's rows */
    const lkg_kv *tk = lkg_find_kv(f, "tokenizer.ggml.tokens");
    if (tk && (tk->value.type != LKG_ARRAY || tk->value.v.arr.count != (uint64_t)c.vocab))
        return lkg_fail(err, errlen, "metadata 'tokenizer.ggml.tokens' holds %llu tokens, but "
                        "the vocabulary is %lld (token_embd.weight's rows)",
                        tk->value.type == LKG_ARRAY ? (unsigned long long)tk->value.v.arr.count : 0ull,
                        (long long)c.vocab);
    w->cfg = c;
    w->ffn_act = ar->ffn_act, w->arch = ar->name;
    w->layers = calloc((size_t)c.n_layer, sizeof *w->layers);
    w->embd = malloc((size_t)(c.vocab * c.dim) * 2);
    w->out_norm = malloc((size_t)c.dim * 4);
    if (!w->layers || !w->embd || !w->out_norm) {
        bn_weights_free(w);
        return lkg_fail(err, errlen, "out of memory");
    }
    if (lkg_tensor_to_bf16(te, w->embd, err, errlen))
        goto bad;
    const lkg_tensor *to = lkg_find_tensor(f, "output.weight");
    if (to) {
        if (want_shape(to, "output.weight", c.vocab, c.dim, err, errlen) ||
            !(w->lm_head = malloc((size_t)(c.vocab * c.dim) * 2)) ||
            lkg_tensor_to_bf16(to, w->lm_head, err, errlen))
            goto bad;
    }
    const lkg_tensor *tn = lkg_find_tensor(f, "output_norm.weight");
    if (want_shape(tn, "output_norm.weight", 1, c.dim, err, errlen) ||
        lkg_tensor_to_f32(tn, w->out_norm, err, errlen))
        goto bad;
    const int64_t qd = c.n_head * c.head_dim, kvd = c.n_kv * c.head_dim;
    const int64_t trows[7] = {qd, kvd, kvd, c.dim, c.ffn, c.ffn, c.dim};
    const int64_t tcols[7] = {c.dim, c.dim, c.dim, qd, c.dim, c.dim, c.ffn};
    const int64_t nlen[4] = {c.dim, qd, c.dim, c.ffn};
    for (int64_t l = 0; l < c.n_layer; l++) {
        bn_layer_w *L = &w->layers[l];
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, norm_names[i]);
            const lkg_tensor *t = lkg_find_tensor(f, name);
            float **dst = layer_norm(L, i);
            if (want_shape(t, name, 1, nlen[i], err, errlen) ||
                !(*dst = malloc((size_t)nlen[i] * 4)) || lkg_tensor_to_f32(t, *dst, err, errlen))
                goto bad;
        }
        for (int i = 0; i < 7; i++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, tern_names[i]);
            const lkg_tensor *t = lkg_find_tensor(f, name);
            if (want_shape(t, name, trows[i], tcols[i], err, errlen))
                goto bad;
            int rc = t->type == LKG_T_F32 || t->type == LKG_T_F16 || t->type == LKG_T_BF16
                         ? float_ternary(t, layer_tern(L, i), err, errlen)
                         : lkg_tensor_to_t2(t, i2s_block, layer_tern(L, i), err, errlen);
            if (rc)
                goto bad;
        }
    }
    return 0;
bad:
    bn_weights_free(w);
    return -1;
}

/* The vocabulary of the demo's own GGUF files: a small byte-level BPE
 * tokenizer (tokenizer.ggml.model "gpt2", Llama 3's pre-tokenizer), so that
 * `lockstep demo --model FILE --prompt TEXT` works on them.  Ids 0..255 are
 * the byte tokens in byte order (GPT-2's bytes_to_unicode strings), then one
 * token per merge below (id 256 + rank), then control placeholders "<tN>"
 * up to the last two ids, BOS and EOS.  The merges are a few of GPT-2's
 * first ones (common English pairs): fixed, so a prompt's ids are too. */
#define SP "\xc4\xa0" /* the space byte's code point, U+0120 */
static const char *const demo_merges[] = {
    SP " t",   SP " a",   "h e",     "i n",    "r e",      "o n",     SP "t he", "e r",
    SP " s",   "a t",     SP " w",   SP " o",  "e n",      SP " c",   "i t",     "i s",
    "a n",     "o r",     "e s",     SP " b",  "e d",      SP " f",   "in g",    SP " p",
    "o u",     SP "a n",  "a l",     "a r",    SP "t o",   SP " m",   SP "o f",  SP " in",
    SP " d",   SP " h",   SP "an d", "i c",    "a s",      "l e",     SP "t h",  "i on",
    "l l",     "en t",    SP " l",   "s t",    SP " re",   "v e",     SP " is",  SP " on",
    SP "th at", SP " T",  "t he",    SP "the n", SP " I",  "at ion",  SP " it",  "' s",
    "o w",     SP "w h",  SP " 1",
};
#undef SP
#define DEMO_NMERGES ((int64_t)(sizeof demo_merges / sizeof *demo_merges))

/* GPT-2's bytes_to_unicode as UTF-8: printable bytes stand for themselves,
 * the other 68 for U+0100 + their rank among those. */
static void byte_token(int b, char out[3])
{
    int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    unsigned cp = (unsigned)b;
    if (!printable) {
        cp = 0x100;
        for (int c = 0; c < b; c++)
            cp += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff));
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
    }
}

/* The tokenizer keys for a vocabulary of n tokens.  One too small for the
 * byte tokens, the merges, BOS and EOS gets placeholders alone and no
 * merges (--prompt then says so). */
static int write_vocab(lkg_writer *wr, int64_t n)
{
    const int full = n >= 256 + DEMO_NMERGES + 2;
    char **toks = calloc((size_t)n, sizeof *toks);
    uint8_t *tt = malloc(12 + 4 * (size_t)n);
    int rc = toks && tt ? 0 : -1;
    for (int64_t i = 0; !rc && i < n; i++) {
        int type = 3; /* control: never produced from text */
        if (!(toks[i] = malloc(24))) {
            rc = -1;
            break;
        }
        if (full && i < 256) {
            byte_token((int)i, toks[i]);
            type = 1;
        } else if (full && i < 256 + DEMO_NMERGES) {
            /* "left right" -> "leftright": the split is the first space
             * after the first byte, as the tokenizer splits */
            const char *m = demo_merges[i - 256], *sp = strchr(m + 1, ' ');
            size_t ll = (size_t)(sp - m);
            memcpy(toks[i], m, ll);
            strcpy(toks[i] + ll, sp + 1);
            type = 1;
        } else if (full && i == n - 2) {
            strcpy(toks[i], "<|begin_of_text|>");
        } else if (full && i == n - 1) {
            strcpy(toks[i], "<|end_of_text|>");
        } else {
            snprintf(toks[i], 24, "<t%lld>", (long long)i);
        }
        for (int k = 0; k < 4; k++)
            tt[12 + 4 * i + k] = (uint8_t)((unsigned)type >> 8 * k);
    }
    rc |= lkg_w_str(wr, "tokenizer.ggml.model", "gpt2");
    if (!rc)
        rc |= lkg_w_str_array(wr, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
    if (!rc && full) {
        tt[0] = LKG_I32, tt[1] = tt[2] = tt[3] = 0;
        for (int k = 0; k < 8; k++)
            tt[4 + k] = (uint8_t)((uint64_t)n >> 8 * k);
        const uint8_t yes = 1;
        rc |= lkg_w_str(wr, "tokenizer.ggml.pre", "llama-bpe");
        rc |= lkg_w_raw(wr, "tokenizer.ggml.token_type", LKG_ARRAY, tt, 12 + 4 * (size_t)n);
        rc |= lkg_w_str_array(wr, "tokenizer.ggml.merges", demo_merges, (uint64_t)DEMO_NMERGES);
        rc |= lkg_w_u32(wr, "tokenizer.ggml.bos_token_id", (uint32_t)(n - 2));
        rc |= lkg_w_u32(wr, "tokenizer.ggml.eos_token_id", (uint32_t)(n - 1));
        rc |= lkg_w_raw(wr, "tokenizer.ggml.add_bos_token", LKG_BOOL, &yes, 1);
    }
    for (int64_t i = 0; toks && i < n; i++)
        free(toks[i]);
    free(toks);
    free(tt);
    return rc;
}

int bn_weights_to_gguf(const bn_weights *w, uint32_t ttype, uint8_t **data, size_t *size,
                       char *err, size_t errlen)
{
    const bn_config *c = &w->cfg;
    const char *arch = w->arch ? w->arch : "bitnet-b1.58";
    char key[128], name[96];
    lkg_writer *wr = lkg_writer_new(32);
    int rc = 0;
    if (!wr)
        return lkg_fail(err, errlen, "out of memory");
    rc |= lkg_w_str(wr, "general.architecture", arch);
    rc |= lkg_w_str(wr, "general.name", "lockstep-demo");
#define PUTU(suffix, v) (snprintf(key, sizeof key, "%s.%s", arch, suffix), lkg_w_u32(wr, key, (uint32_t)(v)))
#define PUTF(suffix, v) (snprintf(key, sizeof key, "%s.%s", arch, suffix), lkg_w_f32(wr, key, v))
    rc |= PUTU("block_count", c->n_layer);
    rc |= PUTU("embedding_length", c->dim);
    rc |= PUTU("feed_forward_length", c->ffn);
    rc |= PUTU("attention.head_count", c->n_head);
    rc |= PUTU("attention.head_count_kv", c->n_kv);
    rc |= PUTU("context_length", c->max_ctx);
    rc |= PUTU("vocab_size", c->vocab);
    rc |= PUTF("rope.freq_base", c->theta);
    rc |= PUTF("attention.layer_norm_rms_epsilon", c->eps);
#undef PUTU
#undef PUTF
    /* A small byte-level BPE tokenizer, so that --prompt works on the file
     * and generated tokens print as text (write_vocab). */
    rc |= write_vocab(wr, c->vocab);
    uint64_t ne[2] = {(uint64_t)c->dim, (uint64_t)c->vocab};
    rc |= lkg_w_tensor(wr, "token_embd.weight", LKG_T_BF16, 2, ne, w->embd,
                       (uint64_t)(c->vocab * c->dim) * 2);
    if (w->lm_head)
        rc |= lkg_w_tensor(wr, "output.weight", LKG_T_BF16, 2, ne, w->lm_head,
                           (uint64_t)(c->vocab * c->dim) * 2);
    ne[0] = (uint64_t)c->dim;
    rc |= lkg_w_tensor(wr, "output_norm.weight", LKG_T_F32, 1, ne, w->out_norm,
                       (uint64_t)c->dim * 4);
    for (int64_t l = 0; l < c->n_layer && !rc; l++) {
        bn_layer_w *L = &w->layers[l];
        const int64_t nlen[4] = {c->dim, c->n_head * c->head_dim, c->dim, c->ffn};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, norm_names[i]);
            ne[0] = (uint64_t)nlen[i];
            rc |= lkg_w_tensor(wr, name, LKG_T_F32, 1, ne, *layer_norm(L, i),
                               (uint64_t)nlen[i] * 4);
        }
        for (int i = 0; i < 7 && !rc; i++) {
            const lkg_ternary *t = layer_tern(L, i);
            snprintf(name, sizeof name, "blk.%lld.%s.weight", (long long)l, tern_names[i]);
            uint64_t nb = lkg_ternary_bytes(ttype, t->rows, t->cols, 128);
            uint8_t *buf = malloc(nb ? (size_t)nb : 1);
            float *rs = malloc((size_t)t->rows * sizeof *rs);
            if (!buf || !rs) {
                free(buf), free(rs);
                rc = -1;
                break;
            }
            for (int64_t r = 0; r < t->rows; r++)
                rs[r] = t->scale[t->nscale == 1 ? 0 : r];
            if (lkg_encode_ternary(ttype, t->codes, t->rows, t->cols, ttype == LKG_T_I2_S ? t->scale : rs,
                                   128, buf)) {
                free(buf), free(rs);
                lkg_writer_free(wr);
                return lkg_fail(err, errlen, "%s: cannot be stored as %s (shape %lld x %lld)", name,
                            lkg_type_name(ttype), (long long)t->rows, (long long)t->cols);
            }
            ne[0] = (uint64_t)t->cols;
            ne[1] = (uint64_t)t->rows;
            rc |= lkg_w_tensor(wr, name, ttype, 2, ne, buf, nb);
            free(buf), free(rs);
        }
    }
    if (rc || lkg_writer_finish(wr, data, size)) {
        lkg_writer_free(wr);
        return lkg_fail(err, errlen, "out of memory writing the GGUF file");
    }
    lkg_writer_free(wr);
    return 0;
}

/* ------------------------------------------------------------ device */

typedef struct bn_tdev {
    void *codes, *scale;
    int64_t nscale;
    lk_weights *prep; /* NULL: lk_ternary_gemm on codes and scale */
} bn_tdev;

/* On the device the projections that read the same input are one ternary
 * matrix: q, k, v stacked as qkv, gate and up as gu, each row with its own
 * tensor's scale (a 1 x N scale gives each row the bits of the separate
 * product), so a layer runs two GEMVs fewer.  t[3] (output) and t[6] (down)
 * stay as they are; t[0 .. 2], t[4], t[5] are not uploaded. */
typedef struct bn_ldev {
    void *attn_norm, *attn_sub_norm, *ffn_norm, *ffn_sub_norm;
    bn_tdev t[7];
    bn_tdev qkv, gu;
    float *kvc; /* the page pool: n_pages * page_size rows x 2 kvd, each row k then v */
} bn_ldev;

/* How a call's attention runs (bn_model_attention_mode). */
enum { ATT_BATCHED, ATT_PAGED, ATT_EACH };

struct bn_model {
    lk_device *dev;
    lk_queue *q;
    int host;
    bn_config c;
    int ffn_act; /* bn_weights.ffn_act, 0 taken as LK_UNARY_RELU2 */
    int64_t max_seqs, max_rows;
    int64_t ctx_rows; /* rows a sequence spans in the identity layout: width * page_size */
    bn_pages pg;
    void **allocs;
    int nalloc, capalloc;
    void *embd, *lm_head, *out_norm;
    lk_weights *head_prep;
    int nprep;
    bn_ldev *L;
    /* activations: max_rows rows; qkv rows are q | k | v, gu rows gate | up */
    float *x, *xn, *qkv, *att, *tmp, *gu, *g, *logits; /* xn: the head's normed rows */
    int8_t *xq;
    float *xs;
    int32_t *ids, *pos;
    int32_t *kvi;   /* each row's pool row (lk_set_rows) */
    int32_t *last;  /* each entry's last row (the head's rows of a ragged call) */
    int32_t *seqr;  /* ATT_PAGED: each row's entry (its row of table) */
    int32_t *table; /* ATT_PAGED: each entry's pages, max_seqs x width */
    int no_paged;   /* the device has no lk_attention_paged */
    int32_t *gidx;  /* the pool rows gathered for one-at-a-time attention */
    float *kvg;     /* those rows: max_ctx x 2 kvd */
    int64_t gidx_cap;
    int64_t *am;
    int32_t *h_ids, *h_pos, *h_kvi, *h_last, *h_gidx; /* host staging, alive until the sync */
    int32_t *h_seqr, *h_table;
    int64_t *h_am;
    int64_t *h_rows; /* per entry: its first row */
    unsigned flags;
    lk_graph **step; /* BN_GRAPH: the whole decode step of b + 1 sequences */
    int64_t *step_len; /* the cache_len each was captured with */
    int64_t last_b;  /* the batch of the last decode step, 0: none yet */
    int att_mode;    /* the last call's ATT_* */
    void **hbufs;    /* host copies of the fused projections (host devices read them) */
    int nhbuf;
    /* lk_bitnet_decode (every projection prepared, BN_LAYERS_OP): the
     * layers of a decode step as one call; the tensors its layers point to */
    lk_bitnet_layer *bl;
    lk_tensor *blt;  /* per layer: 4 norm weights and the cache */
    void *scratch;
    size_t scratch_bytes;
    float *kept;          /* bn_model_keep: kept_slots x max_seqs x vocab logits */
    int64_t kept_slots;
};

static void *dalloc(bn_model *m, size_t bytes)
{
    void *p = NULL;
    if (m->nalloc == m->capalloc) {
        int cap = m->capalloc ? m->capalloc * 2 : 64;
        void **a = realloc(m->allocs, (size_t)cap * sizeof *a);
        if (!a)
            return NULL;
        m->allocs = a;
        m->capalloc = cap;
    }
    if (lk_malloc(m->dev, bytes ? bytes : 1, &p) != LK_OK)
        return NULL;
    m->allocs[m->nalloc++] = p;
    return p;
}

/* Host-memory devices read the host copy in place; others get their own. */
static void *upload(bn_model *m, const void *host, size_t bytes)
{
    if (m->host)
        return (void *)(uintptr_t)host;
    void *p = dalloc(m, bytes);
    if (p && lk_memcpy(m->q, p, host, bytes, LK_COPY_HOST_TO_DEVICE) != LK_OK)
        return NULL;
    return p;
}

static void drop_graphs(bn_model *m);

void bn_model_destroy(bn_model *m)
{
    if (!m)
        return;
    if (m->q)
        lk_queue_sync(m->q);
    drop_graphs(m);
    if (m->q)
        lk_queue_destroy(m->q);
    for (int64_t l = 0; m->L && l < m->c.n_layer; l++) {
        for (int i = 0; i < 7; i++)
            lk_weights_destroy(m->L[l].t[i].prep);
        lk_weights_destroy(m->L[l].qkv.prep);
        lk_weights_destroy(m->L[l].gu.prep);
    }
    lk_weights_destroy(m->head_prep);
    for (int i = 0; i < m->nalloc; i++)
        lk_free(m->dev, m->allocs[i]);
    free(m->allocs);
    for (int i = 0; i < m->nhbuf; i++)
        free(m->hbufs[i]);
    free(m->hbufs);
    free(m->L);
    free(m->bl);
    free(m->blt);
    free(m->h_ids);
    free(m->h_pos);
    free(m->h_kvi);
    free(m->h_last);
    free(m->h_gidx);
    free(m->h_seqr);
    free(m->h_table);
    free(m->h_rows);
    free(m->h_am);
    bn_pages_free(&m->pg);
    free(m);
}

int bn_model_prepared(const bn_model *m)
{
    return m->nprep;
}

/* A prepared copy of w, or NULL where the device cannot make one (the plain
 * op then runs on w: the same bits). */
static lk_weights *prepare(bn_model *m, const lk_tensor *w, const lk_tensor *scale)
{
    lk_weights *h = NULL;
    if (lk_weights_prepare(m->q, w, scale, &h) != LK_OK)
        return NULL;
    m->nprep++;
    return h;
}
/* The rows of np ternary matrices of equal width stacked into one, with one
 * scale per row, on the device. */
static int fuse(bn_model *m, const lkg_ternary *const *parts, int np, bn_tdev *out)
{
    const int64_t ld = parts[0]->ld;
    int64_t rows = 0;
    for (int i = 0; i < np; i++)
        rows += parts[i]->rows;
    const size_t rb = (size_t)(ld / 4);
    uint8_t *codes = malloc((size_t)rows * rb);
    float *scale = malloc((size_t)rows * sizeof *scale);
    void **hb = realloc(m->hbufs, (size_t)(m->nhbuf + 2) * sizeof *hb);
    if (hb)
        m->hbufs = hb;
    if (!codes || !scale || !hb) {
        free(codes), free(scale);
        return -1;
    }
    m->hbufs[m->nhbuf++] = codes;
    m->hbufs[m->nhbuf++] = scale;
    int64_t r0 = 0;
    for (int i = 0; i < np; i++) {
        const lkg_ternary *t = parts[i];
        memcpy(codes + (size_t)r0 * rb, t->codes, (size_t)t->rows * rb);
        for (int64_t r = 0; r < t->rows; r++)
            scale[r0 + r] = t->scale[t->nscale == 1 ? 0 : r];
        r0 += t->rows;
    }
    out->nscale = rows;
    out->codes = upload(m, codes, (size_t)rows * rb);
    out->scale = upload(m, scale, (size_t)rows * sizeof *scale);
    return out->codes && out->scale ? 0 : -1;
}

static lk_bitnet_config bitnet_config(const bn_config *c)
{
    lk_bitnet_config b;
    memset(&b, 0, sizeof b);
    b.dim = c->dim, b.n_head = c->n_head, b.n_kv = c->n_kv, b.head_dim = c->head_dim;
    b.ffn = c->ffn, b.eps = c->eps, b.theta = c->theta;
    b.attn_scale = 1.0f / sqrtf((float)c->head_dim); /* as layer_back's */
    b.rope_flags = c->rope_flags;
    return b;
}

/* The layers as lk_bitnet_decode takes them, where every projection is
 * prepared (it takes nothing else); returns -1 only when out of memory. */
static int layers_op_setup(bn_model *m)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    for (int64_t l = 0; l < c->n_layer; l++)
        if (!m->L[l].qkv.prep || !m->L[l].t[3].prep || !m->L[l].gu.prep || !m->L[l].t[6].prep)
            return 0;
    if (m->ffn_act != LK_UNARY_RELU2)
        return 0; /* lk_bitnet_decode gates with relu^2 only */
    const lk_bitnet_config bc = bitnet_config(c);
    m->scratch_bytes = lk_bitnet_decode_scratch(&bc, m->max_seqs);
    m->bl = calloc((size_t)c->n_layer, sizeof *m->bl);
    m->blt = calloc((size_t)c->n_layer * 5, sizeof *m->blt);
    if (!m->scratch_bytes || !m->bl || !m->blt || !(m->scratch = dalloc(m, m->scratch_bytes)))
        return -1;
    for (int64_t l = 0; l < c->n_layer; l++) {
        bn_ldev *D = &m->L[l];
        lk_tensor *t = m->blt + 5 * l;
        t[0] = lk_mat(D->attn_norm, LK_F32, 1, c->dim);
        t[1] = lk_mat(D->attn_sub_norm, LK_F32, 1, qd);
        t[2] = lk_mat(D->ffn_norm, LK_F32, 1, c->dim);
        t[3] = lk_mat(D->ffn_sub_norm, LK_F32, 1, c->ffn);
        t[4] = lk_mat(D->kvc, LK_F32, m->pg.n_pages * m->pg.page_size, 2 * kvd);
        lk_bitnet_layer *L = &m->bl[l];
        L->qkv = D->qkv.prep, L->o = D->t[3].prep, L->gate_up = D->gu.prep, L->down = D->t[6].prep;
        L->attn_norm = &t[0], L->attn_sub_norm = &t[1], L->ffn_norm = &t[2];
        L->ffn_sub_norm = &t[3], L->kv = &t[4];
    }
    return 0;
}

int bn_model_layers_op(const bn_model *m)
{
    return m->bl != NULL;
}

/* a * b, or -1 past 2^62 (sizes from files and options are multiplied) */
static int64_t mul(int64_t a, int64_t b)
{
    return a < 0 || b < 0 || (a && b > ((int64_t)1 << 62) / a) ? -1 : a * b;
}

/* The machine's memory, for a host-memory device (0: unknown). */
static uint64_t host_memory(void)
{
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0)
        return (uint64_t)pages * (uint64_t)size;
#endif
    return 0;
}

uint64_t bn_kv_bytes_read(const bn_config *c, int64_t n)
{
    return (uint64_t)c->n_layer * (uint64_t)n * (uint64_t)(2 * c->n_kv * c->head_dim) * 4u;
}

uint64_t bn_model_kv_bytes(const bn_model *m)
{
    return bn_kv_bytes_read(&m->c, m->pg.n_pages * m->pg.page_size);
}

int64_t bn_model_free_pages(const bn_model *m)
{
    return m->pg.nfree;
}

int64_t bn_model_pages(const bn_model *m)
{
    return m->pg.n_pages;
}

int bn_model_attention_mode(const bn_model *m)
{
    return m->att_mode;
}

int64_t bn_seq_len(const bn_model *m, int64_t s)
{
    return s >= 0 && s < m->max_seqs ? m->pg.len[s] : 0;
}

int bn_model_create_ex(lk_device *dev, int threads, const bn_weights *w, const bn_model_opts *o,
                       bn_model **out, char *err, size_t errlen)
{
    lk_device_props props;
    const bn_config *c = &w->cfg;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    const int64_t S = o->max_seqs, M = o->max_rows, ps = o->page_size ? o->page_size : 64;
    if (S < 1 || S > 4096 || M < 1 || M > ((int64_t)1 << 24) || ps < 1 || ps > 65536 ||
        c->max_ctx < 1 || c->max_ctx > ((int64_t)1 << 24) || o->n_pages < 0)
        return lkg_fail(err, errlen, "bn_model_create: %lld sequences, %lld rows per call, "
                        "pages of %lld, context %lld: out of range", (long long)S, (long long)M,
                        (long long)ps, (long long)c->max_ctx);
    const int64_t width = (c->max_ctx + ps - 1) / ps;
    const int64_t np = o->n_pages ? o->n_pages : mul(S, width);
    const int64_t pool_rows = mul(np, ps);
    /* Every size is checked before anything is allocated, so that a
     * context the device cannot hold is refused with the numbers. */
    const int64_t pool_bytes = mul(mul(pool_rows, 2 * kvd), 4);
    const int64_t kv_bytes = mul(pool_bytes, c->n_layer);
    if (np < 1 || pool_rows < 0 || pool_rows > INT32_MAX || kv_bytes < 0 ||
        (uint64_t)kv_bytes > (uint64_t)SIZE_MAX / 2)
        return lkg_fail(err, errlen, "a KV cache of %lld pages of %lld positions for %lld layers "
                        "is too large to address", (long long)np, (long long)ps,
                        (long long)c->n_layer);
    if (lk_device_props_get(dev, &props) != LK_OK)
        return lkg_fail(err, errlen, "%s", lk_last_error());
    /* A host-memory device has the machine's memory (a cache larger than
     * that would only be found out by the kernel killing the process). */
    const uint64_t mem = props.memory_bytes ? props.memory_bytes
                         : props.host_memory ? host_memory() : 0;
    if (mem && (uint64_t)kv_bytes > mem)
        return lkg_fail(err, errlen, "%s: the KV cache (%lld sequences x %lld positions, %lld "
                        "layers: %.2f GB) exceeds the device's %.2f GB of memory; ask for a "
                        "shorter context or fewer sequences", lk_device_name(dev), (long long)S,
                        (long long)c->max_ctx, (long long)c->n_layer, (double)kv_bytes / 1e9,
                        (double)mem / 1e9);
    bn_model *m = calloc(1, sizeof *m);
    if (!m)
        return lkg_fail(err, errlen, "out of memory");
    m->dev = dev;
    m->c = *c;
    m->ffn_act = w->ffn_act ? w->ffn_act : LK_UNARY_RELU2;
    m->max_seqs = S;
    m->max_rows = M;
    m->ctx_rows = width * ps;
    m->flags = o->flags;
    lk_queue_opts opts = {threads, NULL};
    if (bn_pages_init(&m->pg, np, ps, S, width)) {
        bn_model_destroy(m);
        return lkg_fail(err, errlen, "out of memory");
    }
    if (lk_queue_create(dev, &opts, &m->q) != LK_OK) {
        lkg_fail(err, errlen, "%s", lk_last_error());
        bn_model_destroy(m);
        return -1;
    }
    m->host = props.host_memory;
    const int64_t wide = c->ffn > c->dim ? (c->ffn > qd ? c->ffn : qd) : (c->dim > qd ? c->dim : qd);
    int ok = 1;
    m->L = calloc((size_t)c->n_layer, sizeof *m->L);
    m->h_ids = malloc((size_t)M * 4);
    m->h_pos = malloc((size_t)M * 4);
    m->h_kvi = malloc((size_t)M * 4);
    m->h_last = malloc((size_t)S * 4);
    m->h_rows = malloc((size_t)S * 8);
    m->h_am = malloc((size_t)S * 8);
    m->h_seqr = malloc((size_t)M * 4);
    m->h_table = malloc((size_t)(S * width) * 4);
    ok = m->L && m->h_ids && m->h_pos && m->h_kvi && m->h_last && m->h_rows && m->h_am &&
         m->h_seqr && m->h_table;
    size_t eb = (size_t)(c->vocab * c->dim) * 2;
    ok = ok && (m->embd = upload(m, w->embd, eb));
    ok = ok && (m->lm_head = w->lm_head ? upload(m, w->lm_head, eb) : m->embd);
    ok = ok && (m->out_norm = upload(m, w->out_norm, (size_t)c->dim * 4));
    for (int64_t l = 0; ok && l < c->n_layer; l++) {
        bn_layer_w *L = &w->layers[l];
        bn_ldev *D = &m->L[l];
        ok = ok && (D->attn_norm = upload(m, L->attn_norm, (size_t)c->dim * 4));
        ok = ok && (D->attn_sub_norm = upload(m, L->attn_sub_norm, (size_t)qd * 4));
        ok = ok && (D->ffn_norm = upload(m, L->ffn_norm, (size_t)c->dim * 4));
        ok = ok && (D->ffn_sub_norm = upload(m, L->ffn_sub_norm, (size_t)c->ffn * 4));
        for (int i = 3; ok && i < 7; i += 3) {
            const lkg_ternary *t = layer_tern(L, i);
            D->t[i].nscale = t->nscale;
            ok = (D->t[i].codes = upload(m, t->codes, (size_t)(t->rows * (t->ld / 4)))) &&
                 (D->t[i].scale = upload(m, t->scale, (size_t)t->nscale * 4));
        }
        const lkg_ternary *qkv[3] = {&L->wq, &L->wk, &L->wv}, *gu[2] = {&L->wgate, &L->wup};
        ok = ok && !fuse(m, qkv, 3, &D->qkv) && !fuse(m, gu, 2, &D->gu);
        ok = ok && (D->kvc = dalloc(m, (size_t)pool_bytes));
    }
    ok = ok && (m->x = dalloc(m, (size_t)(M * c->dim) * 4));
    ok = ok && (m->xn = dalloc(m, (size_t)(M * wide) * 4));
    ok = ok && (m->qkv = dalloc(m, (size_t)(M * (qd + 2 * kvd)) * 4));
    ok = ok && (m->gu = dalloc(m, (size_t)(M * 2 * c->ffn) * 4));
    ok = ok && (m->att = dalloc(m, (size_t)(M * qd) * 4));
    ok = ok && (m->tmp = dalloc(m, (size_t)(M * c->dim) * 4));
    ok = ok && (m->g = dalloc(m, (size_t)(M * c->ffn) * 4));
    ok = ok && (m->logits = dalloc(m, (size_t)(S * c->vocab) * 4));
    ok = ok && (m->xq = dalloc(m, (size_t)(M * wide)));
    ok = ok && (m->xs = dalloc(m, (size_t)M * 4));
    ok = ok && (m->ids = dalloc(m, (size_t)M * 4));
    ok = ok && (m->pos = dalloc(m, (size_t)M * 4));
    ok = ok && (m->kvi = dalloc(m, (size_t)M * 4));
    ok = ok && (m->last = dalloc(m, (size_t)S * 4));
    ok = ok && (m->seqr = dalloc(m, (size_t)M * 4));
    ok = ok && (m->table = dalloc(m, (size_t)(S * width) * 4));
    ok = ok && (m->am = dalloc(m, (size_t)S * 8));
    for (int64_t l = 0; ok && (o->flags & BN_PREPARED) && l < c->n_layer; l++) {
        bn_tdev *td[4] = {&m->L[l].qkv, &m->L[l].t[3], &m->L[l].gu, &m->L[l].t[6]};
        const int64_t rows[4] = {qd + 2 * kvd, c->dim, 2 * c->ffn, c->dim};
        const int64_t cols[4] = {c->dim, qd, c->dim, c->ffn};
        for (int i = 0; i < 4; i++) {
            lk_tensor wt = lk_mat_ld(td[i]->codes, LK_T2, rows[i], cols[i], (cols[i] + 3) / 4 * 4);
            lk_tensor ws = lk_mat(td[i]->scale, LK_F32, 1, td[i]->nscale);
            td[i]->prep = prepare(m, &wt, &ws);
        }
    }
    if (ok && (o->flags & BN_PREPARED)) {
        lk_tensor h = lk_mat(m->lm_head, LK_BF16, c->vocab, c->dim);
        m->head_prep = prepare(m, &h, NULL);
    }
    if (ok && (o->flags & BN_PREPARED) && (o->flags & BN_LAYERS_OP) && layers_op_setup(m))
        ok = 0;
    if (!ok || lk_queue_sync(m->q) != LK_OK) {
        char msg[320];
        snprintf(msg, sizeof msg, "%s", lk_last_error()[0] ? lk_last_error() : "out of memory");
        lkg_fail(err, errlen, "%s: cannot hold the model with a KV cache of %.2f GB (%s)",
                 lk_device_name(dev), (double)kv_bytes / 1e9, msg);
        bn_model_destroy(m);
        return -1;
    }
    *out = m;
    return 0;
}

int bn_model_create(lk_device *dev, int threads, const bn_weights *w, int64_t max_batch,
                    int64_t max_tokens, unsigned flags, bn_model **out, char *err,
                    size_t errlen)
{
    bn_model_opts o = {max_batch, mul(max_batch, max_tokens), 0, 0, flags};
    return bn_model_create_ex(dev, threads, w, &o, out, err, errlen);
}
/* The message is copied before any other Lockstep call replaces it. */
#define TRY(call)                                                                       \
    do {                                                                                \
        lk_status st_ = (call);                                                         \
        if (st_ != LK_OK) {                                                             \
            char msg_[320];                                                             \
            snprintf(msg_, sizeof msg_, "%s", lk_last_error());                         \
            return lkg_fail(err, errlen, "%s: %s: %s: %s", lk_device_name(m->dev), #call,   \
                        lk_status_string(st_), msg_);                                   \
        }                                                                               \
    } while (0)

/* BitLinear after the norm that feeds it: y = ternary(W) . int8(rmsnorm(x) * nw)
 * for the rows of x (M x K), the norm and the activation quantisation in
 * one op (the bits of lk_rmsnorm then lk_quantize_act).  flags
 * LK_GEMM_ACCUMULATE: y += that instead (the residual add, fused into
 * lk_ternary_linear; unprepared weights go through m->tmp, same bits).
 * Prepared weights: the whole of it in lk_rmsnorm_ternary_linear. */
static int bitlinear(bn_model *m, const lk_tensor *x, const lk_tensor *nw, int64_t M,
                     const bn_tdev *w, int64_t n, const lk_tensor *y, unsigned flags, char *err,
                     size_t errlen)
{
    lk_tensor xq = lk_mat(m->xq, LK_I8, M, x->cols), xs = lk_mat(m->xs, LK_F32, M, 1);
    lk_tensor wt = lk_mat(w->codes, LK_T2, n, x->cols);
    wt.ld = (x->cols + 3) / 4 * 4;
    lk_tensor ws = lk_mat(w->scale, LK_F32, 1, w->nscale);
    if (w->prep) { /* one op: one kernel for decode on a GPU, the same bits */
        TRY(lk_rmsnorm_ternary_linear(m->q, x, nw, m->c.eps, &xq, &xs, w->prep, y, flags));
        return 0;
    }
    TRY(lk_rmsnorm_quantize(m->q, x, nw, m->c.eps, &xq, &xs));
    if (flags & LK_GEMM_ACCUMULATE) {
        lk_tensor t = lk_mat(m->tmp, LK_F32, M, n);
        TRY(lk_ternary_gemm(m->q, &xq, &xs, &wt, &ws, &t));
        TRY(lk_binary(m->q, LK_BINARY_ADD, y, &t, y));
    } else {
        TRY(lk_ternary_gemm(m->q, &xq, &xs, &wt, &ws, y));
    }
    return 0;
}

/* One entry of a call as the model runs it. */
typedef struct bn_ent {
    int64_t seq, n, len; /* len: positions held before the call */
    int64_t row;         /* its first row */
    int64_t goff;        /* ATT_EACH, pages not in the identity layout: its offset in gidx */
    int ident;           /* its pages are in the identity layout */
} bn_ent;

/* The tensors and the plan of a call of M rows, E entries. */
typedef struct bn_acts {
    int64_t E, T, M; /* T: tokens per entry when all entries have as many, else 0 */
    int att;         /* ATT_* */
    int64_t s0;      /* ATT_BATCHED: entry e is sequence s0 + e */
    int64_t cache_len;
    int64_t gather; /* ATT_EACH: pool rows gathered, all entries */
    const bn_ent *ent;
    lk_tensor x, tmp, qkv, qr, att_out, gu, gv, uv, g, idt, pos, emb;
} bn_acts;

static bn_acts acts(bn_model *m, int64_t E, int64_t T, int64_t M)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    bn_acts a;
    memset(&a, 0, sizeof a);
    a.E = E, a.T = T, a.M = M;
    a.x = lk_mat(m->x, LK_F32, M, c->dim), a.tmp = lk_mat(m->tmp, LK_F32, M, c->dim);
    a.qkv = lk_mat(m->qkv, LK_F32, M, qd + 2 * kvd);
    a.qr = lk_mat_ld(m->qkv, LK_F32, M, qd + kvd, qd + 2 * kvd);
    a.att_out = lk_mat(m->att, LK_F32, M, qd);
    a.gu = lk_mat(m->gu, LK_F32, M, 2 * c->ffn);
    a.gv = lk_mat_ld(m->gu, LK_F32, M, c->ffn, 2 * c->ffn);
    a.uv = lk_mat_ld(m->gu + c->ffn, LK_F32, M, c->ffn, 2 * c->ffn);
    a.g = lk_mat(m->g, LK_F32, M, c->ffn);
    a.idt = lk_mat(m->ids, LK_I32, M, 1), a.pos = lk_mat(m->pos, LK_I32, M, 1);
    a.emb = lk_mat(m->embd, LK_BF16, c->vocab, c->dim);
    return a;
}

/* Layer l up to the rotated q and k and the new v (for the cache). */
static int layer_front(bn_model *m, bn_acts *a, int64_t l, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    bn_ldev *D = &m->L[l];
    lk_tensor an = lk_mat(D->attn_norm, LK_F32, 1, c->dim);
    if (bitlinear(m, &a->x, &an, a->M, &D->qkv, qd + 2 * kvd, &a->qkv, 0, err, errlen))
        return -1;
    TRY(lk_rope(m->q, &a->qr, &a->pos, c->head_dim, c->theta, c->rope_flags, &a->qr));
    return 0;
}

/* The new k and v rows into layer l's page pool, at the rows m->kvi holds
 * (each token's page and offset): one scatter whose destination is read
 * from the device, so a captured graph stays valid as positions move.
 * The host chose the rows: never a page another sequence holds. */
static int cache_store(bn_model *m, bn_acts *a, int64_t l, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    lk_tensor s = lk_mat_ld(m->qkv + qd, LK_F32, a->M, 2 * kvd, qd + 2 * kvd);
    lk_tensor i = lk_mat(m->kvi, LK_I32, a->M, 1);
    lk_tensor d = lk_mat(m->L[l].kvc, LK_F32, m->pg.n_pages * m->pg.page_size, 2 * kvd);
    TRY(lk_set_rows(m->q, &s, &i, &d)); /* the same bits */
    return 0;
}

static int gather_prepare(bn_model *m, bn_acts *a, char *err, size_t errlen);

/* Attention of layer l.  Keys past a token's position are never read and
 * the order of the sums is fixed by the position (docs/numerics.md,
 * attention), so the three ways give the same bits:
 * - ATT_BATCHED: every entry has T tokens and its sequence's pages in the
 *   identity layout, sequences s0 .. s0 + E - 1: one call over the pool
 *   as E contiguous caches of ctx_rows rows;
 * - ATT_PAGED: one lk_attention_paged call over the pool, each row with
 *   its entry's row of the page table;
 * - ATT_EACH, where the device has no paged op: one call per entry, on its
 *   identity pages in place or on its rows gathered from the pool
 *   (lk_embedding: an identical copy). */
static int attend(bn_model *m, bn_acts *a, int64_t l, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim, kvd = c->n_kv * c->head_dim;
    const float scale = 1.0f / sqrtf((float)c->head_dim);
    bn_ldev *D = &m->L[l];
    if (a->att == ATT_BATCHED) {
        const int64_t T = a->T;
        lk_tensor qa = lk_mat_ld(m->qkv, LK_F32, T, qd, qd + 2 * kvd);
        lk_tensor oa = lk_mat(m->att, LK_F32, T, qd);
        qa.batch_stride = T * (qd + 2 * kvd);
        oa.batch_stride = T * qd;
        const float *base = D->kvc + a->s0 * m->ctx_rows * 2 * kvd;
        lk_tensor kc = lk_mat_ld(base, LK_F32, a->cache_len, kvd, 2 * kvd);
        lk_tensor vc = lk_mat_ld(base + kvd, LK_F32, a->cache_len, kvd, 2 * kvd);
        kc.batch_stride = vc.batch_stride = m->ctx_rows * 2 * kvd;
        lk_tensor pa = lk_mat(m->pos, LK_I32, T, 1);
        pa.batch_stride = T;
        TRY(lk_attention(m->q, &qa, &kc, &vc, &pa, c->n_head, c->n_kv, scale, &oa, a->E));
        return 0;
    }
    if (a->att == ATT_PAGED) {
        const int64_t rows = m->pg.n_pages * m->pg.page_size;
        lk_tensor qa = lk_mat_ld(m->qkv, LK_F32, a->M, qd, qd + 2 * kvd);
        lk_tensor kp = lk_mat_ld(D->kvc, LK_F32, rows, kvd, 2 * kvd);
        lk_tensor vp = lk_mat_ld(D->kvc + kvd, LK_F32, rows, kvd, 2 * kvd);
        lk_tensor bt = lk_mat(m->table, LK_I32, a->E, m->pg.width);
        lk_tensor sq = lk_mat(m->seqr, LK_I32, a->M, 1);
        lk_status st = lk_attention_paged(m->q, &qa, &kp, &vp, &bt, &sq, &a->pos,
                                          m->pg.page_size, c->n_head, c->n_kv, scale,
                                          &a->att_out);
        if (st == LK_OK)
            return 0;
        if (st != LK_ERR_UNSUPPORTED || l != 0) /* a device has it for every layer or none */
            TRY(st);
        m->no_paged = 1; /* this call and the next ones: one entry at a time */
        if (gather_prepare(m, a, err, errlen))
            return -1;
        a->att = ATT_EACH;
        m->att_mode = ATT_EACH;
    }
    for (int64_t e = 0; e < a->E; e++) {
        const bn_ent *t = &a->ent[e];
        const int64_t upto = t->len + t->n;
        lk_tensor qa = lk_mat_ld(m->qkv + t->row * (qd + 2 * kvd), LK_F32, t->n, qd, qd + 2 * kvd);
        lk_tensor oa = lk_mat(m->att + t->row * qd, LK_F32, t->n, qd);
        lk_tensor pa = lk_mat(m->pos + t->row, LK_I32, t->n, 1);
        const float *base = D->kvc + t->seq * m->ctx_rows * 2 * kvd;
        if (!t->ident) {
            lk_tensor pool = lk_mat(D->kvc, LK_F32, m->pg.n_pages * m->pg.page_size, 2 * kvd);
            lk_tensor idx = lk_mat(m->gidx + t->goff, LK_I32, upto, 1);
            lk_tensor y = lk_mat(m->kvg, LK_F32, upto, 2 * kvd);
            TRY(lk_embedding(m->q, &pool, &idx, &y));
            base = m->kvg;
        }
        lk_tensor kc = lk_mat_ld(base, LK_F32, upto, kvd, 2 * kvd);
        lk_tensor vc = lk_mat_ld(base + kvd, LK_F32, upto, kvd, 2 * kvd);
        TRY(lk_attention(m->q, &qa, &kc, &vc, &pa, c->n_head, c->n_kv, scale, &oa, 1));
    }
    return 0;
}

/* The rest of layer l: attention, the output projection and the FFN. */
static int layer_back(bn_model *m, bn_acts *a, int64_t l, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t qd = c->n_head * c->head_dim;
    bn_ldev *D = &m->L[l];
    lk_tensor asn = lk_mat(D->attn_sub_norm, LK_F32, 1, qd);
    lk_tensor fn = lk_mat(D->ffn_norm, LK_F32, 1, c->dim);
    lk_tensor fsn = lk_mat(D->ffn_sub_norm, LK_F32, 1, c->ffn);
    if (attend(m, a, l, err, errlen))
        return -1;
    if (bitlinear(m, &a->att_out, &asn, a->M, &D->t[3], c->dim, &a->x, LK_GEMM_ACCUMULATE, err,
                  errlen))
        return -1;

    if (bitlinear(m, &a->x, &fn, a->M, &D->gu, 2 * c->ffn, &a->gu, 0, err, errlen))
        return -1;
    TRY(lk_glu(m->q, (lk_unary_op)m->ffn_act, &a->gv, &a->uv, &a->g)); /* relu(gate)^2 * up,
                                                                         or silu(gate) * up */
    if (bitlinear(m, &a->g, &fsn, a->M, &D->t[6], c->dim, &a->x, LK_GEMM_ACCUMULATE, err,
                  errlen))
        return -1;
    return 0;
}

/* Output norm, logits and argmax of the last token of each entry. */
static int model_head(bn_model *m, bn_acts *a, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t E = a->E, T = a->T;
    /* The last token of each entry: rows e * T + T - 1, or gathered. */
    lk_tensor xl = lk_mat_ld(m->x + (T - 1) * c->dim, LK_F32, E, c->dim, T * c->dim);
    if (!T) {
        lk_tensor idx = lk_mat(m->last, LK_I32, E, 1);
        xl = lk_mat(m->tmp, LK_F32, E, c->dim);
        TRY(lk_embedding(m->q, &a->x, &idx, &xl));
    }
    lk_tensor xo = lk_mat(m->xn, LK_F32, E, c->dim);
    lk_tensor on = lk_mat(m->out_norm, LK_F32, 1, c->dim);
    lk_tensor head = lk_mat(m->lm_head, LK_BF16, c->vocab, c->dim);
    lk_tensor lg = lk_mat(m->logits, LK_F32, E, c->vocab), am = lk_mat(m->am, LK_I64, E, 1);
    TRY(lk_rmsnorm(m->q, &xl, &on, c->eps, &xo));
    if (m->head_prep)
        TRY(lk_linear(m->q, &xo, m->head_prep, NULL, &lg, 0));
    else
        TRY(lk_gemm(m->q, LK_NO_TRANS, LK_TRANS, &xo, &head, NULL, &lg, 1, 0));
    TRY(lk_reduce(m->q, LK_REDUCE_ARGMAX, &lg, &am));
    return 0;
}

static void drop_graphs(bn_model *m)
{
    for (int64_t b = 0; m->step && b < m->max_seqs; b++)
        lk_graph_destroy(m->step[b]);
    free(m->step);
    free(m->step_len);
    m->step = NULL;
    m->step_len = NULL;
    m->last_b = 0;
}

/* lk_bitnet_decode can run the step: one token per entry, sequences 0 ..
 * E - 1 in the identity layout, which its cache rows b * ctx + pos are. */
static int fused_ok(const bn_model *m, const bn_acts *a)
{
    return m->bl && a->T == 1 && a->att == ATT_BATCHED && a->s0 == 0 &&
           a->E * m->ctx_rows <= m->pg.n_pages * m->pg.page_size;
}

/* A call (prefill, decode or both) over the tokens of a: embedding, every
 * layer with its cache store, the head. */
static int model_step(bn_model *m, bn_acts *a, char *err, size_t errlen)
{
    TRY(lk_embedding(m->q, &a->emb, &a->idt, &a->x));
    if (fused_ok(m, a)) {
        /* decode: every layer in one call (the same bits as the loop
         * below); a device that cannot capture it in a graph says so and
         * the capture goes on with the ops one by one */
        const lk_bitnet_config bc = bitnet_config(&m->c);
        lk_status st = lk_bitnet_decode(m->q, &bc, m->bl, m->c.n_layer, &a->x, &a->pos,
                                        m->ctx_rows, m->scratch, m->scratch_bytes);
        if (st == LK_OK)
            return model_head(m, a, err, errlen);
        if (st != LK_ERR_UNSUPPORTED || !lk_queue_capturing(m->q))
            return lkg_fail(err, errlen, "%s: lk_bitnet_decode: %s: %s", lk_device_name(m->dev),
                            lk_status_string(st), lk_last_error());
    }
    for (int64_t l = 0; l < m->c.n_layer; l++)
        if (layer_front(m, a, l, err, errlen) || cache_store(m, a, l, err, errlen) ||
            layer_back(m, a, l, err, errlen))
            return -1;
    return model_head(m, a, err, errlen);
}

/* The whole decode step of sequences 0 .. E - 1 as one graph: the ids,
 * positions and cache rows it reads are uploaded before each launch. */
static int capture_step(bn_model *m, bn_acts *a, char *err, size_t errlen)
{
    TRY(lk_queue_capture_begin(m->q));
    int rc = model_step(m, a, err, errlen);
    lk_graph *g = NULL;
    lk_status st = lk_queue_capture_end(m->q, &g);
    if (rc) {
        lk_graph_destroy(g);
        return -1;
    }
    if (st != LK_OK)
        return lkg_fail(err, errlen, "%s: lk_queue_capture_end: %s", lk_device_name(m->dev),
                    lk_last_error());
    m->step[a->E - 1] = g;
    return 0;
}

int bn_model_graph_mode(const bn_model *m)
{
    if (!m->step || !m->last_b || !m->step[m->last_b - 1])
        return 0;
    int native = 0;
    lk_graph_info(m->step[m->last_b - 1], &native, NULL);
    return native ? 2 : 1;
}

/* Block k of sequence s gets a page of its own, a copy of the shared one
 * it held (every layer's rows; the copy is exact). */
static int page_copy(bn_model *m, int64_t s, int64_t k, char *err, size_t errlen)
{
    const int64_t kvd = m->c.n_kv * m->c.head_dim, ps = m->pg.page_size;
    int32_t *t = m->pg.table + s * m->pg.width;
    const int32_t old = t[k], np = bn_pages_take(&m->pg, s, k);
    if (np < 0)
        return lkg_fail(err, errlen, "the KV page pool is full (%lld pages)",
                        (long long)m->pg.n_pages);
    t[k] = np;
    m->pg.ref[old]--;
    for (int64_t l = 0; l < m->c.n_layer; l++)
        TRY(lk_memcpy(m->q, m->L[l].kvc + np * ps * 2 * kvd, m->L[l].kvc + old * ps * 2 * kvd,
                      (size_t)(ps * 2 * kvd) * 4, LK_COPY_DEVICE_TO_DEVICE));
    return 0;
}

/* Pages for sequence s to write positions from .. upto - 1: a copy of a
 * shared page it writes into, new pages for the blocks it lacks.  The
 * caller checked that the pool has them. */
static int seq_grow(bn_model *m, int64_t s, int64_t from, int64_t upto, char *err, size_t errlen)
{
    const int64_t ps = m->pg.page_size;
    int64_t cow;
    bn_pages_need(&m->pg, s, from, upto, &cow);
    if (cow >= 0 && page_copy(m, s, cow, err, errlen))
        return -1;
    int32_t *t = m->pg.table + s * m->pg.width;
    for (int64_t k = from / ps; upto > from && k <= (upto - 1) / ps; k++)
        if (t[k] < 0)
            t[k] = bn_pages_take(&m->pg, s, k);
    return 0;
}

/* The device room ATT_EACH needs for gathering n pool rows in all. */
static int gather_room(bn_model *m, int64_t n, char *err, size_t errlen)
{
    const int64_t kvd = m->c.n_kv * m->c.head_dim;
    if (!m->kvg && !(m->kvg = dalloc(m, (size_t)(m->c.max_ctx * 2 * kvd) * 4)))
        return lkg_fail(err, errlen, "%s: no room for a gathered cache: %s",
                        lk_device_name(m->dev), lk_last_error());
    if (n <= m->gidx_cap)
        return 0;
    /* Grown once to the largest call (the old buffers stay until the
     * model goes: queued copies may still read them). */
    int32_t *h = malloc((size_t)n * 4);
    int32_t *d = dalloc(m, (size_t)n * 4);
    if (!h || !d) {
        free(h);
        return lkg_fail(err, errlen, "%s: no room for %lld gathered rows", lk_device_name(m->dev),
                        (long long)n);
    }
    if (m->h_gidx) {
        void **hb = realloc(m->hbufs, (size_t)(m->nhbuf + 1) * sizeof *hb);
        if (!hb) {
            free(h);
            return lkg_fail(err, errlen, "out of memory");
        }
        m->hbufs = hb;
        m->hbufs[m->nhbuf++] = m->h_gidx;
    }
    m->h_gidx = h, m->gidx = d, m->gidx_cap = n;
    return 0;
}

/* ATT_EACH: the pool rows of the entries whose pages are not in the
 * identity layout, on the device (h_gidx lives until the call's sync). */
static int gather_prepare(bn_model *m, bn_acts *a, char *err, size_t errlen)
{
    const int64_t ps = m->pg.page_size;
    if (!a->gather)
        return 0;
    if (gather_room(m, a->gather, err, errlen))
        return -1;
    for (int64_t i = 0; i < a->E; i++) {
        const bn_ent *t = &a->ent[i];
        const int32_t *tab = m->pg.table + t->seq * m->pg.width;
        for (int64_t p = 0; !t->ident && p < t->len + t->n; p++)
            m->h_gidx[t->goff + p] = (int32_t)(tab[p / ps] * ps + p % ps);
    }
    TRY(lk_memcpy(m->q, m->gidx, m->h_gidx, (size_t)a->gather * 4, LK_COPY_HOST_TO_DEVICE));
    return 0;
}

/* Checks a call's entries against the model and the pool (nothing
 * changes): 0, or -1 with err. */
static int check_entries(bn_model *m, int64_t E, const bn_entry *e, int64_t *rows, char *err,
                         size_t errlen)
{
    const bn_config *c = &m->c;
    if (E < 1 || E > m->max_seqs || !e)
        return lkg_fail(err, errlen, "%lld entries in a call: the model takes 1 to %lld",
                        (long long)E, (long long)m->max_seqs);
    int64_t M = 0, need = 0;
    for (int64_t i = 0; i < E; i++) {
        const int64_t s = e[i].seq, n = e[i].n;
        if (s < 0 || s >= m->max_seqs)
            return lkg_fail(err, errlen, "entry %lld: sequence %lld outside 0 .. %lld",
                            (long long)i, (long long)s, (long long)m->max_seqs - 1);
        for (int64_t j = 0; j < i; j++)
            if (e[j].seq == s)
                return lkg_fail(err, errlen, "sequence %lld appears twice in one call",
                                (long long)s);
        if (n < 1 || !e[i].ids)
            return lkg_fail(err, errlen, "entry %lld: %lld tokens", (long long)i, (long long)n);
        const int64_t len = m->pg.len[s];
        if (n > c->max_ctx - len)
            return lkg_fail(err, errlen, "sequence %lld: %lld positions + %lld tokens exceed the "
                            "context (%lld)", (long long)s, (long long)len, (long long)n,
                            (long long)c->max_ctx);
        M += n;
        if (M > m->max_rows)
            return lkg_fail(err, errlen, "the call has more than the %lld tokens the model "
                            "takes per call", (long long)m->max_rows);
        for (int64_t t = 0; t < n; t++)
            if (e[i].ids[t] < 0 || e[i].ids[t] >= c->vocab)
                return lkg_fail(err, errlen, "token id %d is outside the vocabulary (%lld)",
                                e[i].ids[t], (long long)c->vocab);
        int64_t cow;
        need += bn_pages_need(&m->pg, s, len, len + n, &cow);
    }
    if (need > m->pg.nfree)
        return lkg_fail(err, errlen, "the KV page pool is full: the call needs %lld new pages, "
                        "%lld of %lld are free", (long long)need, (long long)m->pg.nfree,
                        (long long)m->pg.n_pages);
    *rows = M;
    return 0;
}

/* bn_model_step and the calls built on it: the logits to the host (logits)
 * and/or into a kept slot (slot >= 0). */
static int run(bn_model *m, int64_t E, const bn_entry *e, float *logits, int64_t slot,
               int32_t *next, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    const int64_t ps = m->pg.page_size;
    int64_t M = 0;
    if (check_entries(m, E, e, &M, err, errlen))
        return -1;
    bn_ent *ent = malloc((size_t)E * sizeof *ent);
    if (!ent)
        return lkg_fail(err, errlen, "out of memory");
    int64_t T = e[0].n, r = 0, gather = 0;
    int batched = 1;
    for (int64_t i = 0; i < E; i++) {
        bn_ent *t = &ent[i];
        t->seq = e[i].seq, t->n = e[i].n, t->len = m->pg.len[t->seq], t->row = r;
        if (seq_grow(m, t->seq, t->len, t->len + t->n, err, errlen)) {
            free(ent);
            return -1;
        }
        t->ident = bn_pages_identity(&m->pg, t->seq, t->len + t->n);
        t->goff = t->ident ? 0 : gather;
        gather += t->ident ? 0 : t->len + t->n;
        if (e[i].n != T)
            T = 0;
        batched &= t->ident && t->seq == e[0].seq + i;
        const int32_t *tab = m->pg.table + t->seq * m->pg.width;
        for (int64_t j = 0; j < t->n; j++, r++) {
            const int64_t p = t->len + j;
            m->h_ids[r] = e[i].ids[j];
            m->h_pos[r] = (int32_t)p;
            m->h_kvi[r] = (int32_t)(tab[p / ps] * ps + p % ps);
        }
        m->h_last[i] = (int32_t)(r - 1);
    }
    bn_acts a = acts(m, E, T, M);
    a.ent = ent;
    a.att = batched && T ? ATT_BATCHED : m->no_paged ? ATT_EACH : ATT_PAGED;
    a.s0 = e[0].seq;
    a.gather = gather;
    for (int64_t i = 0; i < E; i++)
        a.cache_len = ent[i].len + ent[i].n > a.cache_len ? ent[i].len + ent[i].n : a.cache_len;
    if (a.att == ATT_PAGED) {
        /* each entry's row of the page table (-1: no page), each row's entry */
        for (int64_t i = 0; i < E; i++) {
            memcpy(m->h_table + i * m->pg.width, m->pg.table + ent[i].seq * m->pg.width,
                   (size_t)m->pg.width * 4);
            for (int64_t j = 0; j < ent[i].n; j++)
                m->h_seqr[ent[i].row + j] = (int32_t)i;
        }
    }
    m->att_mode = a.att;
    int rc = -1;
#define RUN(call)                                                                       \
    do {                                                                                \
        lk_status st_ = (call);                                                         \
        if (st_ != LK_OK) {                                                             \
            char msg_[320];                                                             \
            snprintf(msg_, sizeof msg_, "%s", lk_last_error());                         \
            lkg_fail(err, errlen, "%s: %s: %s: %s", lk_device_name(m->dev), #call,      \
                     lk_status_string(st_), msg_);                                      \
            goto out;                                                                   \
        }                                                                               \
    } while (0)
    RUN(lk_memcpy(m->q, m->ids, m->h_ids, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    RUN(lk_memcpy(m->q, m->pos, m->h_pos, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    RUN(lk_memcpy(m->q, m->kvi, m->h_kvi, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    if (!T)
        RUN(lk_memcpy(m->q, m->last, m->h_last, (size_t)E * 4, LK_COPY_HOST_TO_DEVICE));
    if (a.att == ATT_EACH && gather_prepare(m, &a, err, errlen))
        goto out;
    if (a.att == ATT_PAGED) {
        RUN(lk_memcpy(m->q, m->table, m->h_table, (size_t)(E * m->pg.width) * 4,
                      LK_COPY_HOST_TO_DEVICE));
        RUN(lk_memcpy(m->q, m->seqr, m->h_seqr, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE));
    }
    if (T == 1 && a.att == ATT_BATCHED && a.s0 == 0 && (m->flags & BN_GRAPH)) {
        /* Decode: one graph per batch size, launched once per step.  Its
         * attention is given the positions held rounded up to a multiple
         * of 512 (rows past a position are never read, so any cache_len
         * gives the same bits, but a kernel may split its work by
         * cache_len): the graph is captured again every 512 positions. */
        const int64_t span = 512;
        a.cache_len = (a.cache_len + span - 1) / span * span;
        a.cache_len = a.cache_len < m->ctx_rows ? a.cache_len : m->ctx_rows;
        if (!m->step && (!(m->step = calloc((size_t)m->max_seqs, sizeof *m->step)) ||
                         !(m->step_len = calloc((size_t)m->max_seqs, sizeof *m->step_len)))) {
            lkg_fail(err, errlen, "out of memory");
            goto out;
        }
        if (m->step[E - 1] && m->step_len[E - 1] != a.cache_len) {
            RUN(lk_queue_sync(m->q)); /* the graph may still run */
            lk_graph_destroy(m->step[E - 1]);
            m->step[E - 1] = NULL;
        }
        if (!m->step[E - 1] && capture_step(m, &a, err, errlen))
            goto out;
        m->step_len[E - 1] = a.cache_len;
        m->last_b = E;
        RUN(lk_graph_launch(m->step[E - 1], m->q));
    } else if (model_step(m, &a, err, errlen)) {
        goto out;
    }
    RUN(lk_memcpy(m->q, m->h_am, m->am, (size_t)E * 8, LK_COPY_DEVICE_TO_HOST));
    if (logits)
        RUN(lk_memcpy(m->q, logits, m->logits, (size_t)(E * c->vocab) * 4,
                      LK_COPY_DEVICE_TO_HOST));
    if (slot >= 0)
        RUN(lk_memcpy(m->q, m->kept + slot * m->max_seqs * c->vocab, m->logits,
                      (size_t)(E * c->vocab) * 4, LK_COPY_DEVICE_TO_DEVICE));
    RUN(lk_queue_sync(m->q));
#undef RUN
    for (int64_t i = 0; i < E; i++) {
        next[i] = (int32_t)m->h_am[i];
        m->pg.len[ent[i].seq] = ent[i].len + ent[i].n;
    }
    rc = 0;
out:
    free(ent);
    return rc;
}

int bn_model_step(bn_model *m, int64_t n, const bn_entry *e, float *logits, int32_t *next,
                  char *err, size_t errlen)
{
    return run(m, n, e, logits, -1, next, err, errlen);
}

int bn_seq_truncate(bn_model *m, int64_t s, int64_t n, char *err, size_t errlen)
{
    if (s < 0 || s >= m->max_seqs || n < 0 || n > m->pg.len[s])
        return lkg_fail(err, errlen, "bn_seq_truncate: sequence %lld to %lld positions",
                        (long long)s, (long long)n);
    /* A page left partly held stays (shared or not): a later write into a
     * shared one copies it first (bn_pages_need). */
    bn_pages_release(&m->pg, s, (n + m->pg.page_size - 1) / m->pg.page_size);
    m->pg.len[s] = n;
    return 0;
}

int bn_seq_share(bn_model *m, int64_t dst, int64_t src, int64_t n, char *err, size_t errlen)
{
    const int64_t ps = m->pg.page_size;
    if (dst < 0 || dst >= m->max_seqs || src < 0 || src >= m->max_seqs || dst == src || n < 0 ||
        n > m->pg.len[src])
        return lkg_fail(err, errlen, "bn_seq_share: sequence %lld from the first %lld of %lld",
                        (long long)dst, (long long)n, (long long)src);
    const int64_t full = n / ps;
    /* the partial page is copied: one free page needed, counting dst's own */
    int64_t freed = 0;
    for (int64_t k = 0; k < m->pg.width; k++) {
        int32_t p = m->pg.table[dst * m->pg.width + k];
        freed += p >= 0 && m->pg.ref[p] == 1;
    }
    if (n % ps && m->pg.nfree + freed < 1)
        return lkg_fail(err, errlen, "the KV page pool is full (%lld pages)",
                        (long long)m->pg.n_pages);
    bn_pages_release(&m->pg, dst, 0);
    int32_t *td = m->pg.table + dst * m->pg.width, *ts = m->pg.table + src * m->pg.width;
    for (int64_t k = 0; k < (n + ps - 1) / ps; k++) {
        td[k] = ts[k];
        m->pg.ref[ts[k]]++;
    }
    m->pg.len[dst] = n;
    if (n % ps && page_copy(m, dst, full, err, errlen))
        return -1;
    return 0;
}

/* bn_model_forward(_kept): sequences 0 .. B - 1 cut or extended to pos0
 * positions, then T tokens each. */
static int forward(bn_model *m, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                   float *logits, int64_t slot, int32_t *next, char *err, size_t errlen)
{
    const bn_config *c = &m->c;
    bn_entry e[64], *ep = B <= 64 ? e : NULL;
    if (B < 1 || T < 1 || B > m->max_seqs || T > m->max_rows / B || pos0 < 0 ||
        pos0 + T > c->max_ctx)
        return lkg_fail(err, errlen, "batch %lld x %lld tokens at %lld does not fit the model "
                        "(%lld sequences, %lld tokens per call, context %lld)", (long long)B,
                        (long long)T, (long long)pos0, (long long)m->max_seqs,
                        (long long)m->max_rows, (long long)c->max_ctx);
    if (!ep && !(ep = malloc((size_t)B * sizeof *ep)))
        return lkg_fail(err, errlen, "out of memory");
    int rc = 0;
    for (int64_t b = 0; b < B && !rc; b++) {
        ep[b].seq = b, ep[b].n = T, ep[b].ids = ids + b * T;
        if (m->pg.len[b] > pos0) {
            rc = bn_seq_truncate(m, b, pos0, err, errlen);
        } else if (m->pg.len[b] < pos0) {
            /* positions the caller says are held: pages for them */
            int64_t cow;
            if (bn_pages_need(&m->pg, b, m->pg.len[b], pos0, &cow) > m->pg.nfree)
                rc = lkg_fail(err, errlen, "the KV page pool is full (%lld pages)",
                              (long long)m->pg.n_pages);
            else if (!(rc = seq_grow(m, b, m->pg.len[b], pos0, err, errlen)))
                m->pg.len[b] = pos0;
        }
    }
    rc = rc ? rc : run(m, B, ep, logits, slot, next, err, errlen);
    if (ep != e)
        free(ep);
    return rc;
}

int bn_model_forward(bn_model *m, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                     float *logits, int32_t *next, char *err, size_t errlen)
{
    return forward(m, B, T, pos0, ids, logits, -1, next, err, errlen);
}

int bn_model_keep(bn_model *m, int64_t slots, char *err, size_t errlen)
{
    if (slots < 1 || slots > (int64_t)(SIZE_MAX / 4) / m->max_seqs / m->c.vocab)
        return lkg_fail(err, errlen, "bn_model_keep: %lld slots", (long long)slots);
    if (m->kept && slots <= m->kept_slots)
        return 0;
    if (m->kept)
        return lkg_fail(err, errlen, "bn_model_keep: %lld slots asked after %lld",
                        (long long)slots, (long long)m->kept_slots);
    const size_t bytes = (size_t)(slots * m->max_seqs * m->c.vocab) * 4;
    if (!(m->kept = dalloc(m, bytes)))
        return lkg_fail(err, errlen, "%s: no room for %lld steps' logits (%zu bytes): %s",
                        lk_device_name(m->dev), (long long)slots, bytes, lk_last_error());
    m->kept_slots = slots;
    return 0;
}

/* 0 when slot s of B sequences is kept (bn_model_keep), else -1 and err */
static int kept_slot_ok(const bn_model *m, const char *fn, int64_t slot, int64_t B, char *err,
                        size_t errlen)
{
    if (slot >= 0 && slot < m->kept_slots && B >= 1 && B <= m->max_seqs)
        return 0;
    return lkg_fail(err, errlen, "%s: slot %lld outside the %lld kept (bn_model_keep), or batch "
                    "%lld outside 1 .. %lld", fn, (long long)slot, (long long)m->kept_slots,
                    (long long)B, (long long)m->max_seqs);
}

int bn_model_forward_kept(bn_model *m, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                          int64_t slot, int32_t *next, char *err, size_t errlen)
{
    if (kept_slot_ok(m, "bn_model_forward_kept", slot, B, err, errlen))
        return -1;
    return forward(m, B, T, pos0, ids, NULL, slot, next, err, errlen);
}

int bn_model_step_kept(bn_model *m, int64_t n, const bn_entry *e, int64_t slot, int32_t *next,
                       char *err, size_t errlen)
{
    if (kept_slot_ok(m, "bn_model_step_kept", slot, n, err, errlen))
        return -1;
    return run(m, n, e, NULL, slot, next, err, errlen);
}

int bn_model_kept(bn_model *m, int64_t slot, int64_t B, float *logits, char *err, size_t errlen)
{
    if (kept_slot_ok(m, "bn_model_kept", slot, B, err, errlen))
        return -1;
    TRY(lk_memcpy(m->q, logits, m->kept + slot * m->max_seqs * m->c.vocab,
                  (size_t)(B * m->c.vocab) * 4, LK_COPY_DEVICE_TO_HOST));
    TRY(lk_queue_sync(m->q));
    return 0;
}
