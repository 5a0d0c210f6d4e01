/* The fuzz targets' seed corpus, written into DIR/gguf, DIR/tokenizer and
 * DIR/ops (scripts/fuzz.sh runs it; nothing binary is kept in the tree):
 *
 *   gguf:      small demo models (I2_S, TQ2_0) and a file with a tensor of
 *              every type and a key of every value type
 *   tokenizer: texts (ASCII, UTF-8, invalid UTF-8, digits, spaces,
 *              contractions) and a small model file with the demo's
 *              vocabulary behind an odd byte
 *   ops:       for every op of fuzz_ops.c a few well-formed inputs
 *
 *   make_corpus DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/model.h"

static const char *dir;
static int count;

static void put(const char *sub, const char *name, const void *p, size_t n, int prefix)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    if (prefix >= 0)
        fputc(prefix, f);
    if (fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    count++;
}

static void model_seed(bn_config c, uint32_t type, const char *sub, const char *name, int prefix)
{
    char err[256];
    bn_weights w;
    uint8_t *d;
    size_t n;
    if (bn_weights_generate(&w, &c, 3, err, sizeof err) ||
        bn_weights_to_gguf(&w, type, &d, &n, err, sizeof err)) {
        fprintf(stderr, "make_corpus: %s: %s\n", name, err);
        exit(1);
    }
    put(sub, name, d, n, prefix);
    bn_weights_free(&w);
    free(d);
}

static void types_seed(void)
{
    lkg_writer *w = lkg_writer_new(32);
    uint8_t blk[256 * 4], *d;
    size_t n;
    for (size_t i = 0; i < sizeof blk; i++)
        blk[i] = (uint8_t)(i * 77 + 1);
    uint64_t ne[2] = {256, 1};
    const uint8_t u8 = 7, i64[8] = {0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    const uint8_t f64[8] = {0, 0, 0, 0, 0, 0x88, 0xc3, 0x40};
    const char *const strs[3] = {"a", "bc", ""};
    int rc = !w;
    rc |= lkg_w_str(w, "general.architecture", "bitnet-b1.58");
    rc |= lkg_w_u32(w, "u32", 42);
    rc |= lkg_w_f32(w, "f32", 1.5f);
    rc |= lkg_w_raw(w, "u8", LKG_U8, &u8, 1);
    rc |= lkg_w_raw(w, "i64", LKG_I64, i64, 8);
    rc |= lkg_w_raw(w, "f64", LKG_F64, f64, 8);
    rc |= lkg_w_raw(w, "bool", LKG_BOOL, &u8, 1);
    rc |= lkg_w_str_array(w, "strs", strs, 3);
    rc |= lkg_w_tensor(w, "f32", LKG_T_F32, 2, ne, blk, 256 * 4);
    rc |= lkg_w_tensor(w, "f16", LKG_T_F16, 2, ne, blk, 256 * 2);
    rc |= lkg_w_tensor(w, "bf16", LKG_T_BF16, 2, ne, blk, 256 * 2);
    rc |= lkg_w_tensor(w, "tq1", LKG_T_TQ1_0, 2, ne, blk, lkg_ternary_bytes(LKG_T_TQ1_0, 1, 256, 128));
    rc |= lkg_w_tensor(w, "tq2", LKG_T_TQ2_0, 2, ne, blk, lkg_ternary_bytes(LKG_T_TQ2_0, 1, 256, 128));
    rc |= lkg_w_tensor(w, "i2s", LKG_T_I2_S, 2, ne, blk, lkg_ternary_bytes(LKG_T_I2_S, 1, 256, 128));
    if (rc || lkg_writer_finish(w, &d, &n)) {
        fprintf(stderr, "make_corpus: out of memory\n");
        exit(1);
    }
    lkg_writer_free(w);
    put("gguf", "types.gguf", d, n, -1);
    free(d);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_corpus DIR\n");
        return 2;
    }
    dir = argv[1];
    /* small models (the smaller the seed, the faster each run): one layer,
     * dim 64 for I2_S, 256 for TQ2_0 (K % 256), a vocabulary of 16 */
    bn_config small = {1, 64, 2, 1, 32, 64, 16, 16, 10000.0f, 1e-5f, LK_ROPE_NEOX};
    model_seed(small, LKG_T_I2_S, "gguf", "model-i2s.gguf", -1);
    bn_config tq = {1, 256, 4, 2, 64, 256, 16, 16, 500000.0f, 1e-6f, LK_ROPE_INTERLEAVED};
    model_seed(tq, LKG_T_TQ2_0, "gguf", "model-tq2.gguf", -1);
    /* the tokenizer's: a full demo vocabulary (300 tokens, merges, BOS) */
    bn_config voc = {1, 64, 2, 1, 32, 64, 300, 16, 10000.0f, 1e-5f, LK_ROPE_NEOX};
    model_seed(voc, LKG_T_I2_S, "tokenizer", "model-i2s.gguf", 1);
    types_seed();

    static const char *const texts[] = {
        "Hello, world!", "The quick brown fox jumps over the lazy dog. It's 12345 o'clock.",
        "caf\xc3\xa9 na\xc3\xafve \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", "  \n\n\t x  y ",
        "\xff\xfe\x80 broken \xc3", "'s 'll 've 're I'M", "1234567890 3.14159 -42",
        "<|begin_of_text|>hi"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        char name[32];
        snprintf(name, sizeof name, "text-%zu", i);
        put("tokenizer", name, texts[i], strlen(texts[i]), 0);
    }

    /* ops: op, device, batch, e1, e2, flags, two floats, two ints, then
     * eight tensors (kind, dtype, rows, cols, ...) of matching shapes */
    for (int op = 0; op < 27; op++)
        for (int v = 0; v < 3; v++) {
            uint8_t s[96];
            size_t k = 0;
            s[k++] = (uint8_t)op;
            s[k++] = (uint8_t)v;
            s[k++] = 1;
            s[k++] = (uint8_t)(1 + v);
            s[k++] = (uint8_t)v;
            s[k++] = 0;
            s[k++] = 0, s[k++] = 3; /* eps 1e-5, theta 10000 */
            s[k++] = 8, s[k++] = 4; /* head_dim / n_head 8, n_kv 4 */
            for (int t = 0; t < 8; t++) {
                static const uint8_t dts[3] = {LK_F32, LK_BF16, LK_I8};
                s[k++] = 0;                   /* dense, ld = cols */
                s[k++] = t == 1 && v == 2 ? LK_T2 : dts[(t + v) % 3];
                s[k++] = (uint8_t)(t == 1 ? 8 : 4); /* rows */
                s[k++] = 8;                   /* cols */
            }
            for (int t = 0; t < 8; t++)
                s[k++] = 0x11; /* no NULL arguments */
            char name[32];
            snprintf(name, sizeof name, "op-%02d-%d", op, v);
            put("ops", name, s, k, -1);
        }
    printf("make_corpus: %d seeds in %s\n", count, dir);
    return 0;
}
