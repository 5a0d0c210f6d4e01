/* BitNet example: byte-level BPE encoder (tokenizer.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

#define TOK_CONTROL 3      /* llama.cpp's LLAMA_TOKEN_TYPE_CONTROL */
#define TOK_USER_DEFINED 4 /* LLAMA_TOKEN_TYPE_USER_DEFINED */

/* PRE_DIGITS: every \p{N} a piece of its own, then GPT-2's regex on the
 * text between (llama.cpp's two regexes for StarCoder and the like) */
enum { PRE_LLAMA3, PRE_GPT2, PRE_QWEN2, PRE_DIGITS };

struct bn_tokenizer {
    int64_t n;          /* tokens */
    char *text;         /* every token's text, one after another */
    uint64_t *off;      /* n + 1 offsets into text */
    uint8_t *control;   /* n flags */
    int32_t *strmap;    /* open addressing, text -> id, -1 empty */
    uint64_t strmask;
    /* merges: (left id, right id) -> rank and the merged token (-1 when the
     * merged text is not a token: it can still be formed, then spelled in
     * bytes at the end, as llama.cpp does) */
    uint64_t *mkey;     /* left << 32 | right, UINT64_MAX empty */
    int32_t *mrank, *mres;
    uint64_t mmask;
    int32_t byte_tok[256]; /* the token of each byte's GPT-2 code point, -1 none */
    /* user-defined tokens (token_type 4), longest first: matched in the raw
     * text before anything else, as llama.cpp's tokenizer_st_partition */
    int32_t *user;
    int64_t nuser;
    int pre, add_bos;
    int ignore_merges;  /* a piece that is a token as a whole is that token */
    int64_t bos;        /* -1 when the file names none */
};


static uint64_t rd_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ h >> 29;
}

static uint64_t hash_pair(uint64_t k)
{
    k *= 0x9e3779b97f4a7c15ull;
    return k ^ k >> 31;
}

/* The token whose text is s[0..len), or -1. */
static int64_t find_tok(const bn_tokenizer *t, const char *s, size_t len)
{
    for (uint64_t h = hash_bytes(s, len) & t->strmask;; h = (h + 1) & t->strmask) {
        int32_t id = t->strmap[h];
        if (id < 0)
            return -1;
        if (t->off[id + 1] - t->off[id] == len && !memcmp(t->text + t->off[id], s, len))
            return id;
    }
}

static uint64_t find_merge(const bn_tokenizer *t, int32_t l, int32_t r)
{
    uint64_t k = (uint64_t)(uint32_t)l << 32 | (uint32_t)r;
    for (uint64_t h = hash_pair(k) & t->mmask;; h = (h + 1) & t->mmask)
        if (t->mkey[h] == k || t->mkey[h] == UINT64_MAX)
            return h;
}

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * other 68 for U+0100 + their rank among those. */
static uint32_t byte_cp(int b)
{
    int printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    if (printable)
        return (uint32_t)b;
    int rank = 0;
    for (int c = 0; c < b; c++)
        rank += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff));
    return 0x100u + (uint32_t)rank;
}

static int put_utf8(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2; /* byte_cp is below U+0800 */
}

static const lkg_value *str_array(const lkg_file *f, const char *key, int need, char *err,
                                  size_t errlen, int *bad)
{
    const lkg_kv *kv = lkg_find_kv(f, key);
    *bad = 0;
    if (!kv) {
        if (need)
            *bad = lkg_fail(err, errlen, "the file has no %s", key);
        return NULL;
    }
    if (kv->value.type != LKG_ARRAY || kv->value.v.arr.type != LKG_STRING) {
        *bad = lkg_fail(err, errlen, "%s is not an array of strings", key);
        return NULL;
    }
    return &kv->value;
}

void bn_tok_free(bn_tokenizer *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->off);
    free(t->control);
    free(t->strmap);
    free(t->mkey);
    free(t->mrank);
    free(t->mres);
    free(t->user);
    free(t);
}

const char *bn_tok_pre(const bn_tokenizer *t)
{
    return t->pre == PRE_GPT2     ? "gpt2"
           : t->pre == PRE_QWEN2  ? "qwen2"
           : t->pre == PRE_DIGITS ? "starcoder"
                                  : "llama3";
}

/* The tokenizer.ggml.pre names llama.cpp (llama-vocab.cpp) gives one of
 * the regex sets this encoder implements, with its ignore_merges flag;
 * "gpt2" is this encoder's own alias.  llama.cpp's other names split
 * with regexes not implemented here and are refused. */
static const struct pre_name {
    const char *name;
    int pre, ignore_merges;
} pre_names[] = {
    {"llama3", PRE_LLAMA3, 1},      {"llama-v3", PRE_LLAMA3, 1},   {"llama-bpe", PRE_LLAMA3, 1},
    {"falcon3", PRE_LLAMA3, 1},     {"falcon-h1", PRE_LLAMA3, 1},  {"pixtral", PRE_LLAMA3, 1},
    {"midm-2.0", PRE_LLAMA3, 1},    {"lfm2", PRE_LLAMA3, 1},       {"jina-v5-nano", PRE_LLAMA3, 1},
    {"gpt-2", PRE_GPT2, 0},         {"gpt2", PRE_GPT2, 0},         {"phi-2", PRE_GPT2, 0},
    {"jina-es", PRE_GPT2, 0},       {"jina-de", PRE_GPT2, 0},      {"gigachat", PRE_GPT2, 0},
    {"jina-v2-es", PRE_GPT2, 0},    {"jina-v2-de", PRE_GPT2, 0},   {"a.x-4.0", PRE_GPT2, 0},
    {"mellum", PRE_GPT2, 0},        {"modern-bert", PRE_GPT2, 0},  {"mpt", PRE_GPT2, 0},
    {"olmo", PRE_GPT2, 0},          {"qwen2", PRE_QWEN2, 0},       {"deepseek-r1-qwen", PRE_QWEN2, 0},
    {"kormo", PRE_QWEN2, 0},        {"f2llmv2", PRE_QWEN2, 0},     {"starcoder", PRE_DIGITS, 0},
    {"refact", PRE_DIGITS, 0},      {"command-r", PRE_DIGITS, 0},  {"smollm", PRE_DIGITS, 0},
    {"codeshell", PRE_DIGITS, 0},   {"exaone", PRE_DIGITS, 0},     {"minerva-7b", PRE_DIGITS, 0},
    {"mellum2", PRE_DIGITS, 0},
};

int bn_tok_pre_known(const char *name)
{
    for (size_t i = 0; i < sizeof pre_names / sizeof *pre_names; i++)
        if (!strcmp(pre_names[i].name, name))
            return 1;
    return 0;
}

static uint64_t pow2_above(uint64_t n)
{
    uint64_t s = 16;
    while (s < 2 * n)
        s *= 2;
    return s;
}

int bn_tok_load(const lkg_file *f, bn_tokenizer **out, char *err, size_t errlen)
{
    char model[64] = "", pre[64] = "";
    int bad;
    if (lkg_get_str(f, "tokenizer.ggml.model", model, sizeof model, NULL, 0))
        return lkg_fail(err, errlen, "the file has no tokenizer (tokenizer.ggml.model)");
    if (strcmp(model, "gpt2"))
        return lkg_fail(err, errlen,
                    "tokenizer.ggml.model \"%s\" is not supported: only byte-level BPE "
                    "(\"gpt2\") can encode a prompt; give token ids with --tokens",
                    model);
    const lkg_value *toks = str_array(f, "tokenizer.ggml.tokens", 1, err, errlen, &bad);
    if (!toks)
        return -1;
    const lkg_value *merges = str_array(f, "tokenizer.ggml.merges", 1, err, errlen, &bad);
    if (!merges)
        return -1;
    uint64_t n = toks->v.arr.count, nm = merges->v.arr.count;
    if (n == 0 || n > INT32_MAX)
        return lkg_fail(err, errlen, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n);
    if (nm > INT32_MAX)
        return lkg_fail(err, errlen, "tokenizer.ggml.merges has %llu entries", (unsigned long long)nm);

    bn_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return lkg_fail(err, errlen, "out of memory");
    t->n = (int64_t)n;
    t->strmask = pow2_above(n) - 1;
    t->mmask = pow2_above(nm) - 1;
    /* The array was checked at parse time: every length is inside the file,
     * so the encoded bytes bound the text. */
    t->text = malloc(toks->v.arr.bytes + 1);
    t->off = malloc((n + 1) * sizeof *t->off);
    t->control = calloc(n, 1);
    t->strmap = malloc((t->strmask + 1) * sizeof *t->strmap);
    t->mkey = malloc((t->mmask + 1) * sizeof *t->mkey);
    t->mrank = malloc((t->mmask + 1) * sizeof *t->mrank);
    t->mres = malloc((t->mmask + 1) * sizeof *t->mres);
    if (!t->text || !t->off || !t->control || !t->strmap || !t->mkey || !t->mrank || !t->mres) {
        bn_tok_free(t);
        return lkg_fail(err, errlen, "out of memory");
    }
    memset(t->strmap, 0xff, (t->strmask + 1) * sizeof *t->strmap);
    memset(t->mkey, 0xff, (t->mmask + 1) * sizeof *t->mkey);

    const uint8_t *p = toks->v.arr.raw;
    uint64_t at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = rd_le(p, 8);
        memcpy(t->text + at, p + 8, len);
        t->off[i] = at;
        at += len;
        p += 8 + len;
    }
    t->off[n] = at;
    /* Later duplicates win, as in llama.cpp's token_to_id. */
    for (uint64_t i = 0; i < n; i++) {
        const char *s = t->text + t->off[i];
        size_t len = (size_t)(t->off[i + 1] - t->off[i]);
        uint64_t h = hash_bytes(s, len) & t->strmask;
        for (;; h = (h + 1) & t->strmask) {
            int32_t id = t->strmap[h];
            if (id < 0 || (t->off[id + 1] - t->off[id] == len && !memcmp(t->text + t->off[id], s, len)))
                break;
        }
        t->strmap[h] = (int32_t)i;
    }

    const lkg_kv *tt = lkg_find_kv(f, "tokenizer.ggml.token_type");
    if (tt) {
        const lkg_value *v = &tt->value;
        if (v->type != LKG_ARRAY || (v->v.arr.type != LKG_I32 && v->v.arr.type != LKG_U32) ||
            v->v.arr.count != n) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.token_type is not an array of %llu int32",
                        (unsigned long long)n);
        }
        for (uint64_t i = 0; i < n; i++)
            t->control[i] = rd_le(v->v.arr.raw + 4 * i, 4) == TOK_CONTROL;
        for (uint64_t i = 0; i < n; i++)
            t->nuser += rd_le(v->v.arr.raw + 4 * i, 4) == TOK_USER_DEFINED;
        if (t->nuser && !(t->user = malloc((size_t)t->nuser * sizeof *t->user))) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "out of memory");
        }
        int64_t k = 0;
        for (uint64_t i = 0; i < n; i++)
            if (rd_le(v->v.arr.raw + 4 * i, 4) == TOK_USER_DEFINED && t->off[i + 1] > t->off[i])
                t->user[k++] = (int32_t)i;
        t->nuser = k;
        /* longest first, then by id (llama.cpp sorts by length alone) */
        for (int64_t a = 1; a < k; a++) {
            int32_t id = t->user[a];
            uint64_t l = t->off[id + 1] - t->off[id];
            int64_t b = a;
            for (; b > 0; b--) {
                int32_t o = t->user[b - 1];
                if (t->off[o + 1] - t->off[o] >= l)
                    break;
                t->user[b] = o;
            }
            t->user[b] = id;
        }
    }

    p = merges->v.arr.raw;
    for (uint64_t i = 0; i < nm; i++) {
        uint64_t len = rd_le(p, 8);
        const char *s = (const char *)p + 8;
        p += 8 + len;
        /* "left right": neither side holds a space (bytes_to_unicode maps
         * it to U+0120), so the split is at the first space after the
         * first byte, as llama.cpp splits. */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        if (!sp) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.merges[%llu] \"%.*s\" is not \"left right\"",
                        (unsigned long long)i, (int)(len > 64 ? 64 : len), s);
        }
        size_t ll = (size_t)(sp - s), rl = (size_t)(len - ll - 1);
        int64_t l = find_tok(t, s, ll), r = find_tok(t, sp + 1, rl);
        if (l < 0 || r < 0) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.merges[%llu] \"%.*s\" names an unknown token",
                        (unsigned long long)i, (int)(len > 64 ? 64 : len), s);
        }
        uint64_t h = find_merge(t, (int32_t)l, (int32_t)r);
        if (t->mkey[h] != UINT64_MAX)
            continue; /* the first rank of a pair counts */
        /* left and right are in the arena one after another only by
         * chance: build the merged text to look it up */
        char small[256], *m = ll + rl <= sizeof small ? small : malloc(ll + rl);
        if (!m) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "out of memory");
        }
        memcpy(m, s, ll);
        memcpy(m + ll, sp + 1, rl);
        int64_t res = find_tok(t, m, ll + rl);
        if (m != small)
            free(m);
        t->mkey[h] = (uint64_t)l << 32 | (uint64_t)r;
        t->mrank[h] = (int32_t)i;
        t->mres[h] = (int32_t)res;
    }

    for (int b = 0; b < 256; b++) {
        char u[2];
        int k = put_utf8(byte_cp(b), u);
        t->byte_tok[b] = (int32_t)find_tok(t, u, (size_t)k);
    }

    /* Without the key, Llama 3's (llama.cpp would take its "default"
     * regexes, not implemented here): said on stderr, as llama.cpp warns. */
    t->pre = PRE_LLAMA3;
    t->ignore_merges = 1;
    if (!lkg_find_kv(f, "tokenizer.ggml.pre")) {
        fprintf(stderr, "lockstep: the file names no pre-tokenizer (tokenizer.ggml.pre); using "
                        "Llama 3's\n");
    } else {
        size_t i = 0, np = sizeof pre_names / sizeof *pre_names;
        if (lkg_get_str(f, "tokenizer.ggml.pre", pre, sizeof pre, err, errlen)) {
            bn_tok_free(t);
            return -1;
        }
        while (i < np && strcmp(pre_names[i].name, pre))
            i++;
        if (i == np) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.pre \"%s\" is not a pre-tokenizer this "
                            "encoder implements (Llama 3's, GPT-2's, Qwen2's and StarCoder's: "
                            "docs/demo.md lists their names); give token ids with --tokens", pre);
        }
        t->pre = pre_names[i].pre;
        t->ignore_merges = pre_names[i].ignore_merges;
    }
    t->add_bos = t->pre == PRE_LLAMA3;
    const lkg_kv *ab = lkg_find_kv(f, "tokenizer.ggml.add_bos_token");
    if (ab) {
        if (ab->value.type != LKG_BOOL) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.add_bos_token is not a bool");
        }
        t->add_bos = ab->value.v.u != 0;
    }
    uint64_t bos;
    t->bos = -1;
    if (lkg_find_kv(f, "tokenizer.ggml.bos_token_id")) {
        if (lkg_get_u64(f, "tokenizer.ggml.bos_token_id", &bos, NULL, 0) || bos >= n) {
            bn_tok_free(t);
            return lkg_fail(err, errlen, "tokenizer.ggml.bos_token_id is not a token id");
        }
        t->bos = (int64_t)bos;
    }
    *out = t;
    return 0;
}

/* ------------------------------------------------------ pre-tokenizer */

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE, C_INVALID };

typedef struct range {
    uint32_t lo, hi;
} range;

/* \p{L} and \p{N}, exact (Unicode 14) in U+0080..U+052F (Latin-1, Latin
 * Extended-A/B, IPA, spacing modifiers, combining marks, Greek, Cyrillic),
 * U+1E00..U+2BFF (Latin Extended Additional, Greek Extended, punctuation,
 * letterlike, number forms, symbols), U+3000..U+30FF (CJK punctuation,
 * kana) and U+FF00..U+FFEF (fullwidth and halfwidth forms); block_class
 * says what the other code points are taken to be. */
static const range letters[] = {
    {0x00aa, 0x00aa}, {0x00b5, 0x00b5}, {0x00ba, 0x00ba}, {0x00c0, 0x00d6}, {0x00d8, 0x00f6},
    {0x00f8, 0x02c1}, {0x02c6, 0x02d1}, {0x02e0, 0x02e4}, {0x02ec, 0x02ec}, {0x02ee, 0x02ee},
    {0x0370, 0x0374}, {0x0376, 0x0377}, {0x037a, 0x037d}, {0x037f, 0x037f}, {0x0386, 0x0386},
    {0x0388, 0x038a}, {0x038c, 0x038c}, {0x038e, 0x03a1}, {0x03a3, 0x03f5}, {0x03f7, 0x0481},
    {0x048a, 0x052f}, {0x1e00, 0x1f15}, {0x1f18, 0x1f1d}, {0x1f20, 0x1f45}, {0x1f48, 0x1f4d},
    {0x1f50, 0x1f57}, {0x1f59, 0x1f59}, {0x1f5b, 0x1f5b}, {0x1f5d, 0x1f5d}, {0x1f5f, 0x1f7d},
    {0x1f80, 0x1fb4}, {0x1fb6, 0x1fbc}, {0x1fbe, 0x1fbe}, {0x1fc2, 0x1fc4}, {0x1fc6, 0x1fcc},
    {0x1fd0, 0x1fd3}, {0x1fd6, 0x1fdb}, {0x1fe0, 0x1fec}, {0x1ff2, 0x1ff4}, {0x1ff6, 0x1ffc},
    {0x2071, 0x2071}, {0x207f, 0x207f}, {0x2090, 0x209c}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210a, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211d}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212a, 0x212d}, {0x212f, 0x2139}, {0x213c, 0x213f}, {0x2145, 0x2149},
    {0x214e, 0x214e}, {0x2183, 0x2184}, {0x3005, 0x3006}, {0x3031, 0x3035}, {0x303b, 0x303c},
    {0x3041, 0x3096}, {0x309d, 0x309f}, {0x30a1, 0x30fa}, {0x30fc, 0x30ff}, {0xff21, 0xff3a},
    {0xff41, 0xff5a}, {0xff66, 0xffbe}, {0xffc2, 0xffc7}, {0xffca, 0xffcf}, {0xffd2, 0xffd7},
    {0xffda, 0xffdc},
};
static const range numbers[] = {
    {0x00b2, 0x00b3}, {0x00b9, 0x00b9}, {0x00bc, 0x00be}, {0x2070, 0x2070}, {0x2074, 0x2079},
    {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249b}, {0x24ea, 0x24ff},
    {0x2776, 0x2793}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303a}, {0xff10, 0xff19},
};

/* Decimal digits (\p{Nd}) of every other script, exact: a number split
 * in threes should not depend on the script's block. */
static const range digits[] = {
    {0x0660, 0x0669}, {0x06f0, 0x06f9}, {0x07c0, 0x07c9}, {0x0966, 0x096f}, {0x09e6, 0x09ef},
    {0x0a66, 0x0a6f}, {0x0ae6, 0x0aef}, {0x0b66, 0x0b6f}, {0x0be6, 0x0bef}, {0x0c66, 0x0c6f},
    {0x0ce6, 0x0cef}, {0x0d66, 0x0d6f}, {0x0de6, 0x0def}, {0x0e50, 0x0e59}, {0x0ed0, 0x0ed9},
    {0x0f20, 0x0f29}, {0x1040, 0x1049}, {0x1090, 0x1099}, {0x17e0, 0x17e9}, {0x1810, 0x1819},
    {0x1946, 0x194f}, {0x19d0, 0x19d9}, {0x1a80, 0x1a89}, {0x1a90, 0x1a99}, {0x1b50, 0x1b59},
    {0x1bb0, 0x1bb9}, {0x1c40, 0x1c49}, {0x1c50, 0x1c59}, {0xa620, 0xa629}, {0xa8d0, 0xa8d9},
    {0xa900, 0xa909}, {0xa9d0, 0xa9d9}, {0xa9f0, 0xa9f9}, {0xaa50, 0xaa59}, {0xabf0, 0xabf9},
    {0x104a0, 0x104a9}, {0x10d30, 0x10d39}, {0x11066, 0x1106f}, {0x110f0, 0x110f9},
    {0x11136, 0x1113f}, {0x111d0, 0x111d9}, {0x112f0, 0x112f9}, {0x11450, 0x11459},
    {0x114d0, 0x114d9}, {0x11650, 0x11659}, {0x116c0, 0x116c9}, {0x11730, 0x11739},
    {0x118e0, 0x118e9}, {0x11950, 0x11959}, {0x11c50, 0x11c59}, {0x11d50, 0x11d59},
    {0x11da0, 0x11da9}, {0x16a60, 0x16a69}, {0x16ac0, 0x16ac9}, {0x16b50, 0x16b59},
    {0x1d7ce, 0x1d7ff}, {0x1e140, 0x1e149}, {0x1e2f0, 0x1e2f9}, {0x1e950, 0x1e959},
    {0x1fbf0, 0x1fbf9},
};

static int in_ranges(const range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp > r[mid].hi)
            lo = mid + 1;
        else if (cp < r[mid].lo)
            hi = mid;
        else
            return 1;
    }
    return 0;
}

/* Outside the exact tables: symbol, punctuation, private-use and emoji
 * blocks are "other"; every other block is taken as letters (its combining
 * marks and its non-decimal numbers too: the approximation docs/demo.md
 * states). */
static int block_class(uint32_t cp)
{
    if ((cp >= 0x2c00 && cp <= 0x2dff) || (cp >= 0x3100 && cp <= 0xd7ff) ||
        (cp >= 0xf900 && cp <= 0xfdff) || (cp >= 0xfe70 && cp <= 0xfefe))
        return C_LETTER;
    if ((cp >= 0x2e00 && cp <= 0x2fff) || (cp >= 0xe000 && cp <= 0xf8ff) ||
        (cp >= 0xfe00 && cp <= 0xfe6f) || cp == 0xfeff || (cp >= 0xfff0 && cp <= 0xffff) ||
        (cp >= 0x1f000 && cp <= 0x1faff) || cp >= 0xe0000)
        return C_OTHER;
    return C_LETTER;
}

static int cp_class(uint32_t cp)
{
    if ((cp >= 9 && cp <= 13) || cp == ' ' || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
        (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
        cp == 0x205f || cp == 0x3000)
        return C_SPACE;
    if (cp < 0x80)
        return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z' ? C_LETTER
               : cp >= '0' && cp <= '9'               ? C_NUMBER
                                                      : C_OTHER;
    if (in_ranges(letters, sizeof letters / sizeof *letters, cp))
        return C_LETTER;
    if (in_ranges(numbers, sizeof numbers / sizeof *numbers, cp))
        return C_NUMBER;
    if (cp < 0x530 || (cp >= 0x1e00 && cp < 0x2c00) || (cp >= 0x3000 && cp < 0x3100) ||
        (cp >= 0xff00 && cp < 0xfff0))
        return C_OTHER;
    if (in_ranges(digits, sizeof digits / sizeof *digits, cp))
        return C_NUMBER;
    return block_class(cp);
}

/* One UTF-8 code point at s (len bytes left): its length, 0 when the
 * bytes are not UTF-8 (overlong forms, surrogates and values past U+10FFFF
 * included). */
static int utf8_dec(const uint8_t *s, size_t len, uint32_t *cp)
{
    int n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (n == 0 || (size_t)n > len)
        return 0;
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7fu >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return n;
}

typedef struct cpinfo {
    uint32_t cp;
    uint8_t cls;
} cpinfo;

static int is_crlf(const cpinfo *c)
{
    return c->cls == C_SPACE && (c->cp == '\r' || c->cp == '\n');
}

static int lower(uint32_t cp)
{
    return cp < 0x80 ? (int)(cp | 0x20) : 0;
}

/* A contraction at i: 's 't 're 've 'm 'll 'd (any case when ci); its
 * length or 0. */
static size_t contraction(const cpinfo *c, size_t i, size_t n, int ci)
{
    if (c[i].cp != '\'' || i + 1 >= n)
        return 0;
    uint32_t a = c[i + 1].cp, b = i + 2 < n ? c[i + 2].cp : 0;
    if (ci) {
        a = (uint32_t)lower(a);
        b = (uint32_t)lower(b);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

static size_t run(const cpinfo *c, size_t i, size_t n, int cls)
{
    size_t j = i;
    while (j < n && c[j].cls == cls)
        j++;
    return j;
}

/* \s+(?!\S) then \s+ at i (a space): the run up to its end, less the last
 * space when a non-space follows and more than one is there. */
static size_t spaces_end(const cpinfo *c, size_t i, size_t n)
{
    size_t j = run(c, i, n, C_SPACE);
    return j < n && j - i > 1 ? j - 1 : j;
}

/* The end of the piece starting at i (i < n), Llama 3's rule (maxnum 3;
 * Qwen2's is the same with \p{N} alone, maxnum 1):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t piece_llama3(const cpinfo *c, size_t i, size_t n, size_t maxnum)
{
    size_t k;
    if (c[i].cls == C_INVALID)
        return i + 1;
    if ((k = contraction(c, i, n, 1)))
        return i + k;
    if (c[i].cls == C_LETTER)
        return run(c, i, n, C_LETTER);
    if (c[i].cls != C_NUMBER && !is_crlf(&c[i]) && i + 1 < n && c[i + 1].cls == C_LETTER)
        return run(c, i + 1, n, C_LETTER);
    if (c[i].cls == C_NUMBER) {
        size_t j = i + 1;
        while (j < n && j < i + maxnum && c[j].cls == C_NUMBER)
            j++;
        return j;
    }
    size_t s = c[i].cp == ' ' && i + 1 < n && c[i + 1].cls == C_OTHER ? i + 1 : i;
    if (c[s].cls == C_OTHER) {
        size_t j = run(c, s, n, C_OTHER);
        while (j < n && is_crlf(&c[j]))
            j++;
        return j;
    }
    /* a space: \s*[\r\n]+ ends after the run's last CR/LF */
    size_t j = run(c, i, n, C_SPACE), last = 0;
    for (size_t k2 = i; k2 < j; k2++)
        if (is_crlf(&c[k2]))
            last = k2 + 1;
    return last ? last : spaces_end(c, i, n);
}

/* GPT-2's rule: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
 * \s+(?!\S)|\s+ */
static size_t piece_gpt2(const cpinfo *c, size_t i, size_t n)
{
    size_t k;
    if (c[i].cls == C_INVALID)
        return i + 1;
    if ((k = contraction(c, i, n, 0)))
        return i + k;
    size_t s = c[i].cp == ' ' && i + 1 < n ? i + 1 : i;
    int cls = c[s].cls;
    if (cls == C_LETTER || cls == C_NUMBER || cls == C_OTHER)
        return run(c, s, n, cls);
    return spaces_end(c, i, n);
}

/* ---------------------------------------------------------------- BPE */

typedef struct sym {
    int32_t id;     /* token of the symbol's text, -1 when none */
    int32_t prev, next;
    uint32_t off, len; /* bytes of the piece */
} sym;

typedef struct cand {
    int32_t rank, left, lid, rid;
} cand;

typedef struct work {
    sym *s;
    cand *heap;
    size_t cap, nheap;
    int32_t *ids;
    int64_t nids, capids;
} work;

static int cand_less(const cand *a, const cand *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(work *w, cand c)
{
    size_t i = w->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &w->heap[p]))
            break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static cand heap_pop(work *w)
{
    cand top = w->heap[0], last = w->heap[--w->nheap];
    size_t i = 0, n = w->nheap;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_less(&w->heap[l], best)) {
            m = l;
            best = &w->heap[l];
        }
        if (l + 1 < n && cand_less(&w->heap[l + 1], best))
            m = l + 1;
        if (m == i)
            break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n)
        w->heap[i] = last;
    return top;
}

static void try_pair(const bn_tokenizer *t, work *w, int32_t l)
{
    if (l < 0)
        return;
    int32_t r = w->s[l].next;
    if (r < 0 || w->s[l].id < 0 || w->s[r].id < 0)
        return;
    uint64_t h = find_merge(t, w->s[l].id, w->s[r].id);
    if (t->mkey[h] == UINT64_MAX)
        return;
    cand c = {t->mrank[h], l, w->s[l].id, w->s[r].id};
    heap_push(w, c);
}

static int emit(work *w, int32_t id)
{
    if (w->nids == w->capids) {
        int64_t cap = w->capids ? 2 * w->capids : 64;
        int32_t *p = realloc(w->ids, (size_t)cap * sizeof *p);
        if (!p)
            return -1;
        w->ids = p;
        w->capids = cap;
    }
    w->ids[w->nids++] = id;
    return 0;
}

/* The bytes b[0..len) of one piece, merged and appended to w->ids.
 * Lowest rank first, the leftmost of equal ranks, as llama.cpp. */
static int bpe_piece(const bn_tokenizer *t, work *w, const uint8_t *b, size_t len, char *err,
                     size_t errlen)
{
    if (len > w->cap) {
        size_t cap = len > 2 * w->cap ? len : 2 * w->cap;
        sym *s = realloc(w->s, cap * sizeof *s);
        if (s)
            w->s = s;
        cand *h = realloc(w->heap, 2 * cap * sizeof *h);
        if (h)
            w->heap = h;
        if (!s || !h)
            return lkg_fail(err, errlen, "out of memory");
        w->cap = cap;
    }
    w->nheap = 0;
    if (t->ignore_merges) {
        /* the piece as a whole, in bytes_to_unicode form, is a token: that
         * token, whatever the merges would give (llama.cpp's
         * ignore_merges, HF's tokenizer.json "ignore_merges": true) */
        char small[256], *u = len <= 128 ? small : malloc(2 * len);
        size_t k = 0;
        if (!u)
            return lkg_fail(err, errlen, "out of memory");
        for (size_t i = 0; i < len; i++)
            k += (size_t)put_utf8(byte_cp(b[i]), u + k);
        int64_t id = find_tok(t, u, k);
        if (u != small)
            free(u);
        if (id >= 0 && !t->control[id])
            return emit(w, (int32_t)id) ? lkg_fail(err, errlen, "out of memory") : 0;
    }
    for (size_t i = 0; i < len; i++)
        w->s[i] = (sym){t->byte_tok[b[i]], (int32_t)i - 1, i + 1 < len ? (int32_t)i + 1 : -1,
                        (uint32_t)i, 1};
    for (size_t i = 0; i + 1 < len; i++)
        try_pair(t, w, (int32_t)i);
    /* Every merge removes a symbol and pushes at most two pairs: the heap
     * never holds more than 2 * len. */
    while (w->nheap) {
        cand c = heap_pop(w);
        sym *l = &w->s[c.left];
        if (l->len == 0 || l->next < 0 || l->id != c.lid || w->s[l->next].id != c.rid)
            continue; /* stale: one side has merged since */
        sym *r = &w->s[l->next];
        uint64_t h = find_merge(t, c.lid, c.rid);
        l->id = t->mres[h];
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0)
            w->s[r->next].prev = c.left;
        if (l->prev >= 0)
            try_pair(t, w, l->prev);
        try_pair(t, w, c.left);
    }
    for (int32_t i = 0; i >= 0; i = w->s[i].next) {
        const sym *s = &w->s[i];
        if (s->id >= 0 && !t->control[s->id]) {
            if (emit(w, s->id))
                return lkg_fail(err, errlen, "out of memory");
            continue;
        }
        /* no token for the merged text: its bytes, as llama.cpp does */
        for (uint32_t k = s->off; k < s->off + s->len; k++) {
            int32_t id = t->byte_tok[b[k]];
            if (id < 0 || t->control[id])
                return lkg_fail(err, errlen, "the vocabulary has no token for byte 0x%02x", b[k]);
            if (emit(w, id))
                return lkg_fail(err, errlen, "out of memory");
        }
    }
    return 0;
}

/* The raw text b[0..len) without user-defined tokens: pre-tokenized and
 * merged, appended to w->ids; c and at hold room for len entries. */
static int encode_raw(const bn_tokenizer *t, work *w, const uint8_t *b, size_t len, cpinfo *c,
                      size_t *at, char *err, size_t errlen)
{
    size_t ncp = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        int k = utf8_dec(b + i, len - i, &cp);
        at[ncp] = i;
        if (k == 0) {
            c[ncp++] = (cpinfo){b[i], C_INVALID};
            i++;
        } else {
            c[ncp++] = (cpinfo){cp, (uint8_t)cp_class(cp)};
            i += (size_t)k;
        }
    }
    at[ncp] = len;
    for (size_t i = 0, seg = ncp; i < ncp;) {
        if (t->pre == PRE_DIGITS) {
            /* the segment i is in: one number, or the run up to the next */
            seg = i + 1;
            if (c[i].cls != C_NUMBER)
                while (seg < ncp && c[seg].cls != C_NUMBER)
                    seg++;
        }
        size_t j = t->pre == PRE_GPT2 || t->pre == PRE_DIGITS ? piece_gpt2(c, i, seg)
                   : t->pre == PRE_QWEN2                      ? piece_llama3(c, i, ncp, 1)
                                                              : piece_llama3(c, i, ncp, 3);
        if (j <= i)
            j = i + 1; /* cannot happen; never loop */
        if (bpe_piece(t, w, b + at[i], at[j] - at[i], err, errlen))
            return -1;
        i = j;
    }
    return 0;
}

/* The first occurrence of s[0..n) in b[from..to), or SIZE_MAX. */
static size_t find_bytes(const uint8_t *b, size_t from, size_t to, const char *s, size_t n)
{
    for (size_t i = from; i + n <= to; i++)
        if (b[i] == (uint8_t)s[0] && !memcmp(b + i, s, n))
            return i;
    return SIZE_MAX;
}

/* The text split at user-defined tokens: fragments (offset, length,
 * token or -1 for raw text), each token's occurrences taken left to right
 * in the raw fragments the longer tokens left, as llama.cpp. */
typedef struct frag {
    size_t off, len;
    int32_t tok;
} frag;

static int partition(const bn_tokenizer *t, const uint8_t *b, size_t len, frag **out, size_t *nout)
{
    size_t n = 1, cap = 16;
    frag *f = malloc(cap * sizeof *f);
    if (!f)
        return -1;
    f[0] = (frag){0, len, -1};
    for (int64_t u = 0; u < t->nuser; u++) {
        const int32_t id = t->user[u];
        const char *s = t->text + t->off[id];
        const size_t sl = (size_t)(t->off[id + 1] - t->off[id]);
        for (size_t i = 0; i < n; i++) {
            if (f[i].tok >= 0)
                continue;
            size_t m = find_bytes(b, f[i].off, f[i].off + f[i].len, s, sl);
            if (m == SIZE_MAX)
                continue;
            if (n + 2 > cap) {
                frag *g = realloc(f, 2 * cap * sizeof *g);
                if (!g) {
                    free(f);
                    return -1;
                }
                f = g;
                cap *= 2;
            }
            /* [left] token [right]: the right part is looked at next */
            const frag old = f[i];
            const size_t left = m - old.off, right = old.off + old.len - (m + sl);
            const size_t add = (left > 0) + (right > 0);
            memmove(f + i + 1 + add, f + i + 1, (n - i - 1) * sizeof *f);
            n += add;
            size_t k = i;
            if (left)
                f[k++] = (frag){old.off, left, -1};
            f[k++] = (frag){m, sl, id};
            if (right)
                f[k++] = (frag){m + sl, right, -1};
            i = right ? k - 2 : k - 1;
        }
    }
    *out = f;
    *nout = n;
    return 0;
}

int bn_tok_encode(const bn_tokenizer *t, const char *text, size_t len, int bos, int32_t **ids,
                  int64_t *n, char *err, size_t errlen)
{
    const uint8_t *b = (const uint8_t *)text;
    work w = {0};
    cpinfo *c = malloc((len ? len : 1) * sizeof *c);
    size_t *at = malloc((len + 1) * sizeof *at);
    frag *fr = NULL;
    size_t nfr = 0;
    int rc = -1;
    if (!c || !at || partition(t, b, len, &fr, &nfr)) {
        lkg_fail(err, errlen, "out of memory");
        goto out;
    }
    if (bos < 0)
        bos = t->add_bos;
    if (bos) {
        if (t->bos < 0) {
            lkg_fail(err, errlen, "the file names no BOS token (tokenizer.ggml.bos_token_id)");
            goto out;
        }
        if (emit(&w, (int32_t)t->bos)) {
            lkg_fail(err, errlen, "out of memory");
            goto out;
        }
    }
    for (size_t i = 0; i < nfr; i++) {
        if (fr[i].tok >= 0) {
            if (emit(&w, fr[i].tok)) {
                lkg_fail(err, errlen, "out of memory");
                goto out;
            }
        } else if (encode_raw(t, &w, b + fr[i].off, fr[i].len, c, at, err, errlen)) {
            goto out;
        }
    }
    rc = 0;
    *ids = w.ids;
    *n = w.nids;
    w.ids = NULL;
out:
    free(c);
    free(at);
    free(fr);
    free(w.s);
    free(w.heap);
    free(w.ids);
    return rc;
}
