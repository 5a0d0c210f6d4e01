/* The prompt encoder of the BitNet example (examples/bitnet/tokenizer.h):
 * a toy byte-level BPE vocabulary (the 256 byte tokens in byte order, so a
 * byte's id is its value, and a few merges) written as a GGUF file, exact
 * ids for words, numbers, contractions, spaces and newlines, punctuation,
 * UTF-8 and invalid bytes under both pre-tokenizers; decode(encode(s)) == s;
 * malformed metadata refused with a message; a seeded fuzz loop (CI runs
 * it under ASan+UBSan too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/tokenizer.h"
#include "examples/bitnet/vocab.h"
#include "tests/tap.h"

static char err[256];

enum { T_BOS = 256, T_GT, T_HE, T_GTHE, T_IN, T_LL, T_GG, T_12, T_AB, T_APS, T_NLNL, T_YZ, T_EACUTE,
       NTOK };

static const char *const extra[NTOK - 256] = {
    "<|begin_of_text|>", "\xc4\xa0t", "he", "\xc4\xa0the", "in", "ll", "\xc4\xa0\xc4\xa0", "12",
    "ab", "'s", "\xc4\x8a\xc4\x8a", "yz", "\xc3\x83\xc2\xa9"};

/* Rank order.  "x y" forms "xy", which is no token. */
static const char *const merges[] = {
    "\xc4\xa0 t", "h e", "\xc4\xa0t he", "i n", "l l", "\xc4\xa0 \xc4\xa0", "1 2", "a b", "' s",
    "\xc4\x8a \xc4\x8a", "x y", "y z", "\xc3\x83 \xc2\xa9"};

static int printable(int b)
{
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

static char bytetok[256][3];

static void make_bytetoks(void)
{
    int rank = 0;
    for (int b = 0; b < 256; b++) {
        unsigned cp = printable(b) ? (unsigned)b : 0x100u + (unsigned)rank++;
        if (cp < 0x80) {
            bytetok[b][0] = (char)cp;
        } else {
            bytetok[b][0] = (char)(0xc0 | cp >> 6);
            bytetok[b][1] = (char)(0x80 | (cp & 0x3f));
        }
    }
}

/* What a test file leaves out or spoils. */
enum { TF_OK = 0, TF_NO_TOKENS = 1, TF_BAD_MERGE = 2, TF_SPM = 4, TF_TOKENS_U32 = 8, TF_NO_SPACE = 16,
       TF_TT_COUNT = 32, TF_GPT2 = 64, TF_NO_BOS = 128, TF_BOS_U32 = 256, TF_UNKNOWN_PRE = 512,
       TF_NO_MODEL = 1024, TF_USER = 2048, TF_STARCODER = 4096 };

static lkg_file *make_file(unsigned flags)
{
    const char *toks[NTOK], *mg[sizeof merges / sizeof *merges + 1];
    size_t nm = sizeof merges / sizeof *merges;
    for (int b = 0; b < 256; b++)
        toks[b] = bytetok[b];
    for (int i = 256; i < NTOK; i++)
        toks[i] = extra[i - 256];
    memcpy(mg, merges, sizeof merges);
    if (flags & TF_BAD_MERGE)
        mg[nm++] = "\xc4\xa0 qq";
    if (flags & TF_NO_SPACE)
        mg[nm++] = "abc";
    lkg_writer *w = lkg_writer_new(32);
    if (!(flags & TF_NO_MODEL))
        lkg_w_str(w, "tokenizer.ggml.model", flags & TF_SPM ? "llama" : "gpt2");
    lkg_w_str(w, "tokenizer.ggml.pre",
              flags & TF_GPT2          ? "gpt2"
              : flags & TF_UNKNOWN_PRE ? "mystery"
              : flags & TF_STARCODER   ? "starcoder"
                                       : "llama-bpe");
    if (flags & TF_TOKENS_U32)
        lkg_w_u32(w, "tokenizer.ggml.tokens", 3);
    else if (!(flags & TF_NO_TOKENS))
        lkg_w_str_array(w, "tokenizer.ggml.tokens", toks, NTOK);
    lkg_w_str_array(w, "tokenizer.ggml.merges", mg, nm);
    {
        uint32_t n = flags & TF_TT_COUNT ? NTOK - 1 : NTOK;
        uint8_t enc[4 + 8 + 4 * NTOK];
        memset(enc, 0, sizeof enc);
        enc[0] = LKG_I32;
        for (int i = 0; i < 4; i++)
            enc[4 + i] = (uint8_t)(n >> 8 * i);
        for (uint32_t i = 0; i < n; i++)
            enc[12 + 4 * i] = i == T_BOS || i == T_AB ? 3 : i == T_YZ && (flags & TF_USER) ? 4 : 1;
        lkg_w_raw(w, "tokenizer.ggml.token_type", LKG_ARRAY, enc, 12 + 4 * n);
    }
    if (!(flags & TF_NO_BOS))
        lkg_w_u32(w, "tokenizer.ggml.bos_token_id", T_BOS);
    if (flags & TF_BOS_U32)
        lkg_w_u32(w, "tokenizer.ggml.add_bos_token", 1);
    uint8_t *data;
    size_t size;
    lkg_file *f = NULL;
    if (lkg_writer_finish(w, &data, &size) || lkg_parse(data, size, &f, err, sizeof err))
        bail("cannot write the test file: %s", err);
    free(data);
    lkg_writer_free(w);
    return f;
}

static int decode(const lkg_file *f, const int32_t *ids, int64_t n, char *out, size_t cap)
{
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = bn_detok(f, ids[i], out + at, cap - at);
        if (k < 0)
            return -1;
        at += (size_t)k;
    }
    return (int)at;
}

typedef struct tcase {
    const char *what, *s;
    size_t len; /* 0: strlen */
    int ids[16];
    int n;
} tcase;

static void check(const bn_tokenizer *t, const lkg_file *f, const tcase *c)
{
    size_t len = c->len ? c->len : strlen(c->s);
    int32_t *ids = NULL;
    int64_t n = 0;
    char back[256];
    if (!ok(!bn_tok_encode(t, c->s, len, 0, &ids, &n, err, sizeof err), "%s: %s encodes", bn_tok_pre(t),
            c->what)) {
        diag("%s", err);
        return;
    }
    int same = n == c->n;
    for (int64_t i = 0; same && i < n; i++)
        same = ids[i] == c->ids[i];
    if (!ok(same, "%s: %s gives the expected ids", bn_tok_pre(t), c->what)) {
        char got[512] = "";
        for (int64_t i = 0; i < n && strlen(got) < 480; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ids[i]);
        diag("got%s", got);
    }
    int k = decode(f, ids, n, back, sizeof back);
    ok(k == (int)len && !memcmp(back, c->s, len), "%s: %s decodes back", bn_tok_pre(t), c->what);
    free(ids);
}

static const tcase llama3_cases[] = {
    {"a word", "the", 0, {'t', T_HE}, 2},
    {"a word after a space", " the", 0, {T_GTHE}, 1},
    {"two words", "the cat", 0, {'t', T_HE, ' ', 'c', 'a', 't'}, 6},
    {"digits in threes", "3312", 0, {'3', '3', '1', '2'}, 4},
    {"digits after a letter", "a12", 0, {'a', T_12}, 2},
    {"seven digits", "1234567", 0, {T_12, '3', '4', '5', '6', '7'}, 6},
    {"an odd run of spaces merges left first", "   ", 0, {T_GG, ' '}, 2},
    {"a contraction", "it's", 0, {'i', 't', T_APS}, 3},
    {"a contraction in capitals", "DON'T", 0, {'D', 'O', 'N', '\'', 'T'}, 5},
    {"three spaces", "a   b", 0, {'a', T_GG, ' ', 'b'}, 4},
    {"trailing spaces", "a  ", 0, {'a', T_GG}, 2},
    {"two newlines", "a\n\nb", 0, {'a', T_NLNL, 'b'}, 3},
    {"space newline space", "a \n b", 0, {'a', ' ', '\n', ' ', 'b'}, 5},
    {"punctuation and newline", "hi!!\n\n", 0, {'h', 'i', '!', '!', T_NLNL}, 5},
    {"a bracket before a word", "(hello", 0, {'(', T_HE, T_LL, 'o'}, 4},
    {"Latin-1 letters", "caf\xc3\xa9", 0, {'c', 'a', 'f', T_EACUTE}, 4},
    {"an emoji", "hi \xf0\x9f\x91\x8b", 0, {'h', 'i', ' ', 0xf0, 0x9f, 0x91, 0x8b}, 7},
    {"invalid UTF-8", "a\xff" "b", 0, {'a', 0xff, 'b'}, 3},
    {"a cut sequence", "x\xc3", 0, {'x', 0xc3}, 2},
    {"an overlong form", "\xc0\xaf", 0, {0xc0, 0xaf}, 2},
    {"a NUL byte", "a\0b", 3, {'a', 0, 'b'}, 3},
    {"a control token's text", "ab", 0, {'a', 'b'}, 2},
    {"a merge that is no token", "xyz", 0, {'x', 'y', 'z'}, 3},
    {"a merge after it", "yz", 0, {T_YZ}, 1},
    {"a special token's text", "<|begin_of_text|>", 0,
     {'<', '|', 'b', 'e', 'g', T_IN, '_', 'o', 'f', '_', 't', 'e', 'x', 't', '|', '>'}, 16},
    {"nothing", "", 0, {0}, 0},
};

static const tcase gpt2_cases[] = {
    {"digits in one piece", "3312", 0, {'3', '3', T_12}, 3},
    {"a contraction in capitals", "DON'T", 0, {'D', 'O', 'N', '\'', 'T'}, 5},
    {"three spaces", "a   b", 0, {'a', T_GG, ' ', 'b'}, 4},
    {"space newline space", "a \n b", 0, {'a', ' ', '\n', ' ', 'b'}, 5},
    {"a word after a space", " the", 0, {T_GTHE}, 1},
    {"invalid UTF-8", "a\xff" "b", 0, {'a', 0xff, 'b'}, 3},
};

static void expect_error(unsigned flags, const char *what, const char *needle)
{
    lkg_file *f = make_file(flags);
    bn_tokenizer *t = NULL;
    err[0] = 0;
    int rc = bn_tok_load(f, &t, err, sizeof err);
    ok(rc == -1 && strstr(err, needle), "%s is refused: \"%s\"", what, err);
    bn_tok_free(t);
    lkg_close(f);
}

int main(void)
{
    make_bytetoks();
    lkg_file *f = make_file(TF_OK), *g = make_file(TF_GPT2);
    bn_tokenizer *t = NULL, *tg = NULL;
    if (bn_tok_load(f, &t, err, sizeof err) || bn_tok_load(g, &tg, err, sizeof err))
        bail("cannot load the toy tokenizer: %s", err);
    ok(!strcmp(bn_tok_pre(t), "llama3") && !strcmp(bn_tok_pre(tg), "gpt2"),
       "llama-bpe and gpt2 name their pre-tokenizers");

    for (size_t i = 0; i < sizeof llama3_cases / sizeof *llama3_cases; i++)
        check(t, f, &llama3_cases[i]);
    for (size_t i = 0; i < sizeof gpt2_cases / sizeof *gpt2_cases; i++)
        check(tg, g, &gpt2_cases[i]);

    /* BOS: llama-bpe adds it unless the file says not to, gpt2 does not. */
    int32_t *ids = NULL;
    int64_t n = 0;
    ok(!bn_tok_encode(t, " the", 4, -1, &ids, &n, err, sizeof err) && n == 2 && ids[0] == T_BOS &&
           ids[1] == T_GTHE, "llama-bpe puts BOS first");
    free(ids);
    ids = NULL;
    ok(!bn_tok_encode(tg, " the", 4, -1, &ids, &n, err, sizeof err) && n == 1 && ids[0] == T_GTHE,
       "gpt2 adds no BOS by default");
    free(ids);
    ids = NULL;
    {
        lkg_file *nb = make_file(TF_NO_BOS);
        bn_tokenizer *tn = NULL;
        int rc = bn_tok_load(nb, &tn, err, sizeof err);
        ok(!rc && bn_tok_encode(tn, "a", 1, 1, &ids, &n, err, sizeof err) == -1 && strstr(err, "BOS"),
           "a BOS asked of a file without one is an error: \"%s\"", err);
        free(ids);
        ids = NULL;
        bn_tok_free(tn);
        lkg_close(nb);
    }

    /* A long piece (one run of spaces) merges pairwise, left first. */
    {
        size_t len = 20000;
        char *s = malloc(len);
        memset(s, ' ', len);
        int good = !bn_tok_encode(t, s, len, 0, &ids, &n, err, sizeof err) && n == (int64_t)len / 2;
        for (int64_t i = 0; good && i < n; i++)
            good = ids[i] == T_GG;
        ok(good, "20000 spaces give 10000 double-space tokens");
        free(ids);
        ids = NULL;
        free(s);
    }

    /* A user-defined token (token_type 4) is found in the raw text first,
     * as llama.cpp does: "xyz" merges x y first (and spells "xy" in bytes)
     * as a normal token, but gives x and the token yz as a user-defined one. */
    {
        lkg_file *u = make_file(TF_USER), *p = make_file(TF_OK);
        bn_tokenizer *tu = NULL, *tp = NULL;
        int32_t *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        int good = !bn_tok_load(u, &tu, err, sizeof err) && !bn_tok_load(p, &tp, err, sizeof err) &&
                   !bn_tok_encode(tu, "yzxyz", 5, 0, &a, &na, err, sizeof err) &&
                   !bn_tok_encode(tp, "yzxyz", 5, 0, &b, &nb, err, sizeof err);
        ok(good && na == 3 && a[0] == T_YZ && a[1] == 'x' && a[2] == T_YZ,
           "a user-defined token is split out of the text before the pre-tokenizer");
        ok(good && nb == 4 && b[0] == T_YZ && b[1] == 'x' && b[2] == 'y' && b[3] == 'z',
           "the same token as a normal one is left to the merges");
        free(a), free(b);
        bn_tok_free(tu), bn_tok_free(tp);
        lkg_close(u), lkg_close(p);
    }

    /* StarCoder's pre-tokenizer (llama.cpp: \p{N} first, then GPT-2's):
     * every digit alone, so "12" never merges as it does under GPT-2's. */
    {
        lkg_file *sc = make_file(TF_STARCODER), *g2 = make_file(TF_GPT2);
        bn_tokenizer *ts = NULL, *tg2 = NULL;
        int32_t *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        int good = !bn_tok_load(sc, &ts, err, sizeof err) && !bn_tok_load(g2, &tg2, err, sizeof err) &&
                   !bn_tok_encode(ts, "x12", 3, 0, &a, &na, err, sizeof err) &&
                   !bn_tok_encode(tg2, "x12", 3, 0, &b, &nb, err, sizeof err);
        ok(good && !strcmp(bn_tok_pre(ts), "starcoder") && na == 3 && a[0] == 'x' && a[1] == '1' &&
               a[2] == '2',
           "starcoder: x12 is x, 1, 2 (%s)", good ? "ok" : err);
        ok(good && nb == 2 && b[0] == 'x' && b[1] == T_12, "gpt2: x12 is x, 12");
        free(a), free(b);
        bn_tok_free(ts), bn_tok_free(tg2);
        lkg_close(sc), lkg_close(g2);
    }

    /* An unknown pre-tokenizer is refused with its name, never replaced. */
    {
        lkg_file *u = make_file(TF_UNKNOWN_PRE);
        bn_tokenizer *tu = NULL;
        ok(bn_tok_load(u, &tu, err, sizeof err) != 0 && tu == NULL && strstr(err, "\"mystery\""),
           "an unknown tokenizer.ggml.pre is refused with its name (%s)", err);
        bn_tok_free(tu);
        lkg_close(u);
        ok(bn_tok_pre_known("gpt-2") && bn_tok_pre_known("llama-bpe") && bn_tok_pre_known("qwen2") &&
               !bn_tok_pre_known("default") && !bn_tok_pre_known("mystery"),
           "llama.cpp's names gpt-2, llama-bpe, qwen2 are known; default and others are not");
    }

    expect_error(TF_SPM, "a SentencePiece vocabulary", "\"llama\"");
    expect_error(TF_NO_MODEL, "a file without tokenizer.ggml.model", "tokenizer.ggml.model");
    expect_error(TF_NO_TOKENS, "a file without tokens", "tokenizer.ggml.tokens");
    expect_error(TF_TOKENS_U32, "tokens that are not an array", "not an array of strings");
    expect_error(TF_BAD_MERGE, "a merge naming an unknown token", "unknown token");
    expect_error(TF_NO_SPACE, "a merge without a space", "is not \"left right\"");
    expect_error(TF_TT_COUNT, "token types of the wrong count", "token_type");
    expect_error(TF_BOS_U32, "add_bos_token that is not a bool", "add_bos_token");

    /* Fuzz: random bytes, biased to the characters the rules care about,
     * must encode to known, non-control tokens that decode to the input. */
    {
        uint64_t seed = tap_seed(), st = seed;
        static const char alphabet[] = " \n\r\t'sStdRE0123abxyzhe!.(\xc3\xa9\xf0\x9f\x91\x8b\xff\xce\xb1";
        int bad = 0;
        for (int it = 0; it < 3000 && !bad; it++) {
            char s[64], back[256];
            size_t len = (size_t)(tap_rand(&st) % sizeof s);
            for (size_t i = 0; i < len; i++) {
                uint64_t r = tap_rand(&st);
                s[i] = r & 1 ? (char)(r >> 8) : alphabet[(r >> 8) % (sizeof alphabet - 1)];
            }
            const bn_tokenizer *tt = it & 1 ? tg : t;
            const lkg_file *ff = it & 1 ? g : f;
            if (bn_tok_encode(tt, s, len, 0, &ids, &n, err, sizeof err)) {
                diag("iteration %d: %s", it, err);
                bad = 1;
                break;
            }
            for (int64_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= NTOK || ids[i] == T_BOS || ids[i] == T_AB)
                    bad = 1;
            int k = bad ? -1 : decode(ff, ids, n, back, sizeof back);
            if (k != (int)len || memcmp(back, s, len)) {
                diag("iteration %d (seed %llu) does not round-trip", it, (unsigned long long)seed);
                bad = 1;
            }
            free(ids);
            ids = NULL;
        }
        ok(!bad, "3000 random strings encode and decode back");
    }

    bn_tok_free(t);
    bn_tok_free(tg);
    lkg_close(f);
    lkg_close(g);
    return done_testing();
}
