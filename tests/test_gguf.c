/* The GGUF reader of the BitNet example (examples/bitnet/gguf.h): small
 * files of every metadata type and every tensor type written and read back
 * bit for bit; the ternary layouts against literal transcriptions of the
 * decoders of their authors (llama.cpp dequantize_row_tq1_0/tq2_0,
 * bitnet.cpp quantize_i2_s); malformed files (truncated at every byte, bad
 * magic and versions, absurd counts and sizes, wrong offsets, unknown
 * types) refused with a message; and a seeded fuzz loop that must never
 * crash (CI runs it under ASan+UBSan too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "examples/bitnet/gguf.h"
#include "tests/tap.h"

static char err[256];

/* ------------------------------------------------- reference decoders */

/* llama.cpp ggml/src/ggml-quants.c dequantize_row_tq1_0, one block, as
 * codes (xi) instead of (xi - 1) * d. */
static void ref_tq1(const uint8_t *blk, int *xi)
{
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    const uint8_t *qs = blk, *qh = blk + 48;
    int *y = xi;
    for (size_t j = 0; j < 48 - 48 % 32; j += 32)
        for (size_t n = 0; n < 5; ++n)
            for (size_t m = 0; m < 32; ++m) {
                uint8_t q = (uint8_t)(qs[j + m] * pow3[n]);
                *y++ = ((uint16_t)q * 3) >> 8;
            }
    for (size_t j = 48 - 48 % 32; j < 48; j += 16)
        for (size_t n = 0; n < 5; ++n)
            for (size_t m = 0; m < 16; ++m) {
                uint8_t q = (uint8_t)(qs[j + m] * pow3[n]);
                *y++ = ((uint16_t)q * 3) >> 8;
            }
    for (size_t n = 0; n < 4; ++n)
        for (size_t j = 0; j < 4; ++j) {
            uint8_t q = (uint8_t)(qh[j] * pow3[n]);
            *y++ = ((uint16_t)q * 3) >> 8;
        }
}

/* dequantize_row_tq2_0, one block. */
static void ref_tq2(const uint8_t *blk, int *xi)
{
    int *y = xi;
    for (size_t j = 0; j < 64; j += 32)
        for (size_t l = 0; l < 4; ++l)
            for (size_t m = 0; m < 32; ++m)
                *y++ = (blk[j + m] >> (l * 2)) & 3;
}

static unsigned t2_get(const uint8_t *codes, int64_t ld, int64_t r, int64_t k)
{
    return (codes[r * (ld / 4) + k / 4] >> 2 * (k % 4)) & 3u;
}

/* ------------------------------------------------- a valid sample file */

#define TQ_ROWS 3
#define TQ_COLS 512

typedef struct sample {
    float f32[12];
    uint16_t f16[10], bf16[10];
    uint8_t tq1_blocks[TQ_ROWS * 2 * 54], tq2_blocks[TQ_ROWS * 2 * 66];
    uint8_t i2_codes[128 * 2]; /* 128 x 5 (cols % 4 != 0), as LK_T2 */
    float i2_scale;
    uint8_t *i2_data;
    uint64_t i2_bytes;
    uint8_t *i2a_data; /* same codes, ARM block size 64 */
} sample;

static uint8_t rand_code(uint64_t *s, unsigned max)
{
    return (uint8_t)(tap_rand(s) % (max + 1));
}

static void make_sample(sample *sm, uint64_t *s)
{
    for (int i = 0; i < 12; i++) {
        uint32_t b = (uint32_t)tap_rand(s);
        memcpy(&sm->f32[i], &b, 4);
    }
    for (int i = 0; i < 10; i++) {
        sm->f16[i] = (uint16_t)tap_rand(s);
        sm->bf16[i] = (uint16_t)tap_rand(s);
    }
    /* TQ blocks: random bytes (every byte decodes), one d per row. */
    for (int r = 0; r < TQ_ROWS; r++) {
        uint16_t d = (uint16_t)(0x2c00 + r);
        for (int b = 0; b < 2; b++) {
            uint8_t *b1 = sm->tq1_blocks + (r * 2 + b) * 54, *b2 = sm->tq2_blocks + (r * 2 + b) * 66;
            for (int i = 0; i < 52; i++)
                b1[i] = (uint8_t)tap_rand(s);
            for (int i = 0; i < 64; i++)
                b2[i] = (uint8_t)tap_rand(s);
            b1[52] = b2[64] = (uint8_t)d;
            b1[53] = b2[65] = (uint8_t)(d >> 8);
        }
    }
    /* I2_S: 128 x 5 codes 0..3 (code 3 is kept: LK_T2 decodes it as 2). */
    memset(sm->i2_codes, 0x55, sizeof sm->i2_codes);
    for (int r = 0; r < 128; r++)
        for (int k = 0; k < 5; k++) {
            uint8_t *p = &sm->i2_codes[r * 2 + k / 4];
            *p = (uint8_t)((*p & ~(3u << 2 * (k % 4))) | (unsigned)rand_code(s, 3) << 2 * (k % 4));
        }
    sm->i2_scale = 0.0421875f;
    sm->i2_bytes = lkg_ternary_bytes(LKG_T_I2_S, 128, 5, 128);
    sm->i2_data = malloc(sm->i2_bytes);
    sm->i2a_data = malloc(sm->i2_bytes);
    lkg_encode_ternary(LKG_T_I2_S, sm->i2_codes, 128, 5, &sm->i2_scale, 128, sm->i2_data);
    lkg_encode_ternary(LKG_T_I2_S, sm->i2_codes, 128, 5, &sm->i2_scale, 64, sm->i2a_data);
}

static void w_scalar(lkg_writer *w, const char *key, uint32_t type, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> 8 * i);
    lkg_w_raw(w, key, type, t, (size_t)n);
}

static int write_sample(const sample *sm, uint32_t align, uint8_t **data, size_t *size)
{
    lkg_writer *w = lkg_writer_new(align);
    w_scalar(w, "t.u8", LKG_U8, 200, 1);
    w_scalar(w, "t.i8", LKG_I8, (uint64_t)-5, 1);
    w_scalar(w, "t.u16", LKG_U16, 60000, 2);
    w_scalar(w, "t.i16", LKG_I16, (uint64_t)-30000, 2);
    w_scalar(w, "t.u32", LKG_U32, 4000000000u, 4);
    w_scalar(w, "t.i32", LKG_I32, (uint64_t)-2000000000, 4);
    w_scalar(w, "t.u64", LKG_U64, 0x123456789abcdef0ull, 8);
    w_scalar(w, "t.i64", LKG_I64, (uint64_t)-1234567890123ll, 8);
    w_scalar(w, "t.bool", LKG_BOOL, 1, 1);
    double dv = -2.5e300;
    uint64_t db;
    memcpy(&db, &dv, 8);
    w_scalar(w, "t.f64", LKG_F64, db, 8);
    lkg_w_f32(w, "t.f32", 0.15625f);
    lkg_w_str(w, "general.architecture", "bitnet-b1.58");
    const char *toks[] = {"a", "", "hello", "\xc4\xa0world"};
    lkg_w_str_array(w, "t.strs", toks, 4);
    /* An array of 2 arrays of 3 u16. */
    uint8_t nested[4 + 8 + 2 * (4 + 8 + 6)], *p = nested;
    memcpy(p, (uint8_t[]){9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}, 12);
    p += 12;
    for (int a = 0; a < 2; a++) {
        memcpy(p, (uint8_t[]){2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0}, 12);
        p += 12;
        for (int i = 0; i < 3; i++) {
            p[0] = (uint8_t)(a * 10 + i);
            p[1] = 0;
            p += 2;
        }
    }
    lkg_w_raw(w, "t.nested", LKG_ARRAY, nested, sizeof nested);
    lkg_w_u32(w, "bitnet-b1.58.block_count", 2);
    lkg_w_f32(w, "bitnet-b1.58.rope.freq_base", 500000.0f);

    uint64_t ne_f32[2] = {4, 3}, ne_h[1] = {10}, ne_tq[2] = {TQ_COLS, TQ_ROWS},
             ne_i2[2] = {5, 128};
    lkg_w_tensor(w, "f32", LKG_T_F32, 2, ne_f32, sm->f32, sizeof sm->f32);
    lkg_w_tensor(w, "f16", LKG_T_F16, 1, ne_h, sm->f16, sizeof sm->f16);
    lkg_w_tensor(w, "bf16", LKG_T_BF16, 1, ne_h, sm->bf16, sizeof sm->bf16);
    lkg_w_tensor(w, "tq1", LKG_T_TQ1_0, 2, ne_tq, sm->tq1_blocks, sizeof sm->tq1_blocks);
    lkg_w_tensor(w, "tq2", LKG_T_TQ2_0, 2, ne_tq, sm->tq2_blocks, sizeof sm->tq2_blocks);
    lkg_w_tensor(w, "i2", LKG_T_I2_S, 2, ne_i2, sm->i2_data, sm->i2_bytes);
    lkg_w_tensor(w, "i2arm", LKG_T_I2_S, 2, ne_i2, sm->i2a_data, sm->i2_bytes);
    int rc = lkg_writer_finish(w, data, size);
    lkg_writer_free(w);
    return rc;
}

static int kv_int(const lkg_file *f, const char *k, int64_t want)
{
    const lkg_kv *kv = lkg_find_kv(f, k);
    if (!kv)
        return 0;
    switch (kv->value.type) {
    case LKG_I8: case LKG_I16: case LKG_I32: case LKG_I64:
        return kv->value.v.i == want;
    default:
        return kv->value.v.u == (uint64_t)want;
    }
}

static void check_roundtrip(const sample *sm, const uint8_t *data, size_t size, uint32_t align)
{
    lkg_file *f = NULL;
    int rc = lkg_parse(data, size, &f, err, sizeof err);
    if (!ok(rc == 0, "align %u: the sample file parses (%s)", align, rc ? err : "ok")) {
        skip(12, "no file");
        return;
    }
    ok(f->version == 3 && f->n_kv == 16 + (align != 32) && f->n_tensors == 7 &&
           f->alignment == align && f->data_offset % align == 0,
       "align %u: header, counts, alignment and data offset", align);
    int kvs = kv_int(f, "t.u8", 200) && kv_int(f, "t.i8", -5) && kv_int(f, "t.u16", 60000) &&
              kv_int(f, "t.i16", -30000) && kv_int(f, "t.u32", 4000000000ll) &&
              kv_int(f, "t.i32", -2000000000) &&
              kv_int(f, "t.u64", (int64_t)0x123456789abcdef0ll) &&
              kv_int(f, "t.i64", -1234567890123ll) && kv_int(f, "t.bool", 1);
    const lkg_kv *kf = lkg_find_kv(f, "t.f64"), *kg = lkg_find_kv(f, "t.f32");
    kvs = kvs && kf && kf->value.v.f == -2.5e300 && kg && kg->value.v.f == 0.15625;
    char arch[32];
    uint64_t bc = 0;
    float theta = 0;
    kvs = kvs && lkg_get_str(f, "general.architecture", arch, sizeof arch, err, sizeof err) == 0 &&
          !strcmp(arch, "bitnet-b1.58") &&
          lkg_get_u64(f, "bitnet-b1.58.block_count", &bc, err, sizeof err) == 0 && bc == 2 &&
          lkg_get_f32(f, "bitnet-b1.58.rope.freq_base", &theta, err, sizeof err) == 0 &&
          theta == 500000.0f;
    ok(kvs, "align %u: every scalar metadata type reads back", align);
    const lkg_kv *ks = lkg_find_kv(f, "t.strs");
    lkg_str s0, s1, s2, s3;
    ok(ks && ks->value.v.arr.count == 4 && lkg_array_str(&ks->value, 0, &s0) == 0 &&
           lkg_array_str(&ks->value, 1, &s1) == 0 && lkg_array_str(&ks->value, 2, &s2) == 0 &&
           lkg_array_str(&ks->value, 3, &s3) == 0 && lkg_str_eq(s0, "a") && lkg_str_eq(s1, "") &&
           lkg_str_eq(s2, "hello") && lkg_str_eq(s3, "\xc4\xa0world") &&
           lkg_array_str(&ks->value, 4, &s0) != 0,
       "align %u: string array", align);
    const lkg_kv *kn = lkg_find_kv(f, "t.nested");
    ok(kn && kn->value.v.arr.type == LKG_ARRAY && kn->value.v.arr.count == 2 &&
           kn->value.v.arr.bytes == 2 * (4 + 8 + 6),
       "align %u: nested array", align);

    float f32[12];
    const lkg_tensor *t = lkg_find_tensor(f, "f32");
    ok(t && t->n_dims == 2 && t->ne[0] == 4 && t->ne[1] == 3 &&
           lkg_tensor_to_f32(t, f32, err, sizeof err) == 0 && !memcmp(f32, sm->f32, sizeof f32),
       "align %u: F32 tensor bit for bit", align);
    float h[10], want[10];
    uint16_t hb[10], wantb[10];
    t = lkg_find_tensor(f, "f16");
    for (int i = 0; i < 10; i++) {
        want[i] = lk_f16_to_f32(sm->f16[i]);
        wantb[i] = lk_f32_to_bf16(want[i]);
    }
    ok(t && lkg_tensor_to_f32(t, h, err, sizeof err) == 0 && !memcmp(h, want, sizeof h) &&
           lkg_tensor_to_bf16(t, hb, err, sizeof err) == 0 && !memcmp(hb, wantb, sizeof hb),
       "align %u: F16 tensor to f32 (exact) and bf16 (rounded) as lk_f16_to_f32 gives",
       align);
    t = lkg_find_tensor(f, "bf16");
    for (int i = 0; i < 10; i++)
        want[i] = lk_bf16_to_f32(sm->bf16[i]);
    ok(t && lkg_tensor_to_f32(t, h, err, sizeof err) == 0 && !memcmp(h, want, sizeof h) &&
           lkg_tensor_to_bf16(t, hb, err, sizeof err) == 0 && !memcmp(hb, sm->bf16, sizeof hb),
       "align %u: BF16 tensor bit for bit", align);

    /* TQ1_0 and TQ2_0 against llama.cpp's decoders, and back. */
    for (int which = 0; which < 2; which++) {
        const char *nm = which ? "tq2" : "tq1";
        const uint8_t *blocks = which ? sm->tq2_blocks : sm->tq1_blocks;
        const int bsz = which ? 66 : 54;
        lkg_ternary tt;
        int good = (t = lkg_find_tensor(f, nm)) && lkg_tensor_to_t2(t, 0, &tt, err, sizeof err) == 0;
        good = good && tt.rows == TQ_ROWS && tt.cols == TQ_COLS && tt.nscale == TQ_ROWS;
        for (int r = 0; good && r < TQ_ROWS; r++) {
            good = tt.scale[r] == lk_f16_to_f32((uint16_t)(0x2c00 + r));
            for (int b = 0; good && b < 2; b++) {
                int xi[256];
                (which ? ref_tq2 : ref_tq1)(blocks + (r * 2 + b) * bsz, xi);
                for (int w = 0; good && w < 256; w++)
                    good = (int)t2_get(tt.codes, tt.ld, r, b * 256 + w) == xi[w];
            }
        }
        if (good) {
            /* Encode the decoded codes again: TQ2_0 gives the same bytes;
             * TQ1_0's ceiling division is not unique per byte, so compare
             * its decoding. */
            uint64_t nb = lkg_ternary_bytes(which ? LKG_T_TQ2_0 : LKG_T_TQ1_0, TQ_ROWS, TQ_COLS, 0);
            uint8_t *enc = malloc(nb);
            good = lkg_encode_ternary(which ? LKG_T_TQ2_0 : LKG_T_TQ1_0, tt.codes, TQ_ROWS,
                                      TQ_COLS, tt.scale, 0, enc) == 0;
            if (which)
                good = good && !memcmp(enc, blocks, nb);
            for (int i = 0; good && !which && i < TQ_ROWS * 2; i++) {
                int a[256], b[256];
                ref_tq1(enc + i * 54, a);
                ref_tq1(blocks + i * 54, b);
                good = !memcmp(a, b, sizeof a) && !memcmp(enc + i * 54 + 52, blocks + i * 54 + 52, 2);
            }
            free(enc);
        }
        ok(good, "align %u: %s decodes as llama.cpp's dequantize_row_%s, per-row scale, and "
           "encodes back", align, which ? "TQ2_0" : "TQ1_0", which ? "tq2_0" : "tq1_0");
        lkg_ternary_free(&tt);
    }

    /* I2_S: x86 block (128) and ARM block (64), codes 0..3 kept. */
    for (int arm = 0; arm < 2; arm++) {
        lkg_ternary tt;
        t = lkg_find_tensor(f, arm ? "i2arm" : "i2");
        int good = t && lkg_tensor_to_t2(t, arm ? 64 : 128, &tt, err, sizeof err) == 0;
        good = good && tt.rows == 128 && tt.cols == 5 && tt.ld == 8 && tt.nscale == 1 &&
               !memcmp(&tt.scale[0], &sm->i2_scale, 4) &&
               !memcmp(tt.codes, sm->i2_codes, sizeof sm->i2_codes);
        /* And against quantize_i2_s's layout, spelled out once more. */
        for (int i = 0; good && i < 640; i++) {
            int bs = arm ? 64 : 128, gb = bs / 4, blk = i / bs, j = i % bs;
            unsigned c = (t->data[blk * gb + j % gb] >> (6 - 2 * (j / gb))) & 3u;
            good = c == t2_get(tt.codes, 8, i / 5, i % 5);
        }
        ok(good, "align %u: I2_S (block %d) unpacks to the codes and the per-tensor scale",
           align, arm ? 64 : 128);
        lkg_ternary_free(&tt);
    }
    lkg_close(f);
}

/* ------------------------------------------------- malformed files */

static int refused(const uint8_t *d, size_t n, const char *needle)
{
    lkg_file *f = NULL;
    err[0] = 0;
    if (lkg_parse(d, n, &f, err, sizeof err) == 0) {
        lkg_close(f);
        diag("accepted, expected an error with \"%s\"", needle);
        return 0;
    }
    if (!strstr(err, needle)) {
        diag("message \"%s\" lacks \"%s\"", err, needle);
        return 0;
    }
    return 1;
}

/* A minimal file: one KV, one F32 tensor of 2 values. */
static void tiny(uint8_t **d, size_t *n, uint32_t type, uint64_t ne0, uint64_t off)
{
    lkg_writer *w = lkg_writer_new(32);
    float v[2] = {1.0f, 2.0f};
    uint64_t ne[1] = {ne0};
    lkg_w_u32(w, "k", 7);
    lkg_w_tensor(w, "t", LKG_T_F32, 1, ne, v, sizeof v);
    lkg_writer_finish(w, d, n);
    lkg_writer_free(w);
    /* Patch type and offset in place: the info ends 12 bytes before the
     * padding; its layout is name(8+1) ndims(4) ne(8) type(4) off(8). */
    size_t info = 24 + (8 + 1 + 4 + 4) + 0; /* header + KV "k" u32 */
    uint8_t *p = *d + info + 8 + 1 + 4;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(ne0 >> 8 * i);
    for (int i = 0; i < 4; i++)
        p[8 + i] = (uint8_t)(type >> 8 * i);
    for (int i = 0; i < 8; i++)
        p[12 + i] = (uint8_t)(off >> 8 * i);
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> 8 * i);
}

static void check_malformed(const uint8_t *good, size_t size)
{
    /* Every proper prefix of the sample is refused. */
    int all = 1;
    for (size_t n = 0; n < size; n++) {
        lkg_file *f = NULL;
        if (lkg_parse(good, n, &f, err, sizeof err) == 0) {
            lkg_close(f);
            diag("prefix of %zu bytes accepted", n);
            all = 0;
        } else if (!err[0]) {
            diag("prefix of %zu bytes: empty message", n);
            all = 0;
        }
    }
    ok(all, "every one of the %zu truncations of the sample is refused with a message", size);

    uint8_t *d = malloc(size);
    memcpy(d, good, size);
    d[0] = 'X';
    ok(refused(d, size, "bad magic"), "bad magic");
    memcpy(d, good, size);
    d[4] = 1;
    ok(refused(d, size, "version 1"), "version 1 refused");
    d[4] = 4;
    ok(refused(d, size, "unknown GGUF version 4"), "version 4 refused");
    d[4] = 0;
    d[7] = 3;
    ok(refused(d, size, "big-endian"), "big-endian file refused");
    memcpy(d, good, size);
    put64(d + 8, (uint64_t)1 << 40);
    ok(refused(d, size, "tensor count"), "absurd tensor count");
    memcpy(d, good, size);
    put64(d + 16, UINT64_MAX);
    ok(refused(d, size, "metadata count"), "absurd metadata count");
    memcpy(d, good, size);
    put64(d + 24, UINT64_MAX - 3); /* first key's length */
    ok(refused(d, size, "absurd"), "absurd string length");
    free(d);

    uint8_t *t;
    size_t n;
    tiny(&t, &n, LKG_T_F32, 2, 0);
    lkg_file *tf = NULL;
    ok(lkg_parse(t, n, &tf, err, sizeof err) == 0, "the tiny file itself parses");
    lkg_close(tf);
    free(t);
    tiny(&t, &n, 12, 2, 0);
    ok(refused(t, n, "ggml type 12 is not supported"), "unknown tensor type (Q4_K) refused");
    free(t);
    tiny(&t, &n, LKG_T_F32, 2, 32);
    ok(refused(t, n, "outside the data section"), "offset past the end");
    free(t);
    tiny(&t, &n, LKG_T_F32, 2, 4);
    ok(refused(t, n, "not a multiple of the alignment"), "misaligned offset");
    free(t);
    tiny(&t, &n, LKG_T_F32, 3, 0);
    ok(refused(t, n, "outside the data section"), "tensor larger than its data");
    free(t);
    tiny(&t, &n, LKG_T_F32, 0, 0);
    ok(refused(t, n, "is absurd"), "zero dimension");
    free(t);
    tiny(&t, &n, LKG_T_F32, (uint64_t)1 << 62, 0);
    ok(refused(t, n, "size overflows"), "element count times size overflows");
    free(t);
    tiny(&t, &n, LKG_T_F32, UINT64_MAX - 8, UINT64_MAX - 7);
    ok(refused(t, n, "absurd"), "dimension beyond int64");
    free(t);
    tiny(&t, &n, LKG_T_F32, 2, UINT64_MAX - 31);
    ok(refused(t, n, "outside the data section"), "offset + size overflows");
    free(t);
    tiny(&t, &n, LKG_T_TQ2_0, 255, 0);
    ok(refused(t, n, "multiple of 256"), "TQ2_0 with ne[0] not a multiple of 256");
    free(t);
    tiny(&t, &n, LKG_T_F32, 2, 0);
    t[24 + 8 + 1 + 4] = 5; /* KV "k" type u32 -> something else */
    t[24 + 8 + 1] = 77;
    ok(refused(t, n, "unknown value type 77"), "unknown metadata value type");
    free(t);
    tiny(&t, &n, LKG_T_F32, 2, 0);
    t[24 + 17 + 8 + 1] = 0; /* n_dims = 0 */
    ok(refused(t, n, "0 dimensions"), "n_dims 0 refused");
    t[24 + 17 + 8 + 1] = 5;
    ok(refused(t, n, "5 dimensions"), "n_dims 5 refused");
    free(t);

    /* Alignment not a power of two; duplicate names; absurd array count. */
    lkg_writer *w = lkg_writer_new(32);
    lkg_w_u32(w, "general.alignment", 48);
    uint8_t *d2;
    size_t n2;
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    ok(refused(d2, n2, "power of two"), "alignment 48 refused");
    free(d2);
    w = lkg_writer_new(32);
    float v = 1;
    uint64_t ne = 1;
    lkg_w_tensor(w, "same", LKG_T_F32, 1, &ne, &v, 4);
    lkg_w_tensor(w, "same", LKG_T_F32, 1, &ne, &v, 4);
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    ok(refused(d2, n2, "appears twice"), "duplicate tensor name refused");
    free(d2);
    w = lkg_writer_new(32);
    uint8_t arr[12] = {4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0}; /* u32 x 2^40 */
    lkg_w_raw(w, "a", LKG_ARRAY, arr, sizeof arr);
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    ok(refused(d2, n2, "absurd"), "array of 2^40 elements refused");
    free(d2);
    w = lkg_writer_new(32);
    uint8_t arr2[12] = {4, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0}; /* u32 x 2^24, no data */
    lkg_w_raw(w, "a", LKG_ARRAY, arr2, sizeof arr2);
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    ok(refused(d2, n2, "does not fit"), "array longer than the file refused");
    free(d2);
    /* Arrays nested too deep. */
    w = lkg_writer_new(32);
    uint8_t deep[12 * 6];
    for (int i = 0; i < 6; i++)
        memcpy(deep + 12 * i, (uint8_t[]){9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, 12);
    lkg_w_raw(w, "a", LKG_ARRAY, deep, sizeof deep);
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    ok(refused(d2, n2, "nested deeper"), "arrays nested 6 deep refused");
    free(d2);

    /* Converter-level refusals. */
    uint8_t blocks[2 * 66];
    memset(blocks, 0x66, sizeof blocks); /* codes 2,1,2,1: nonzero */
    blocks[64] = 0x00, blocks[65] = 0x3c;
    blocks[66 + 64] = 0x00, blocks[66 + 65] = 0x38;
    w = lkg_writer_new(32);
    uint64_t ne2[2] = {512, 1};
    lkg_w_tensor(w, "mixed", LKG_T_TQ2_0, 2, ne2, blocks, sizeof blocks);
    memset(blocks + 66, 0x55, 64); /* second block all zero: its d does not matter */
    lkg_w_tensor(w, "zeroblk", LKG_T_TQ2_0, 2, ne2, blocks, sizeof blocks);
    lkg_writer_finish(w, &d2, &n2);
    lkg_writer_free(w);
    lkg_file *f = NULL;
    lkg_ternary tt;
    int rc = lkg_parse(d2, n2, &f, err, sizeof err);
    ok(rc == 0 && lkg_tensor_to_t2(lkg_find_tensor(f, "mixed"), 0, &tt, err, sizeof err) != 0 &&
           strstr(err, "different scales"),
       "TQ2_0 row with two block scales refused (%s)", err);
    ok(rc == 0 && lkg_tensor_to_t2(lkg_find_tensor(f, "zeroblk"), 0, &tt, err, sizeof err) == 0 &&
           tt.scale[0] == 1.0f,
       "an all-zero block's scale is ignored");
    lkg_ternary_free(&tt);
    float fl[512];
    ok(rc == 0 && lkg_tensor_to_f32(lkg_find_tensor(f, "mixed"), fl, err, sizeof err) != 0 &&
           strstr(err, "not a float type"),
       "a ternary tensor is not read as floats");
    lkg_close(f);
    free(d2);
}

/* ------------------------------------------------- fuzz */

static void fuzz(const uint8_t *good, size_t size, uint64_t seed, int iters)
{
    uint8_t *d = malloc(size + 64);
    uint64_t s = seed;
    int parsed = 0, converted = 0;
    for (int it = 0; it < iters; it++) {
        size_t n = size;
        memcpy(d, good, size);
        int edits = 1 + (int)(tap_rand(&s) % 8);
        for (int e = 0; e < edits; e++) {
            uint64_t r = tap_rand(&s);
            size_t at = (size_t)(r >> 8) % n;
            switch (r % 6) {
            case 0: d[at] ^= (uint8_t)(1u << (r >> 40) % 8); break;
            case 1: d[at] = (uint8_t)(r >> 48); break;
            case 2: d[at] = 0xff; break;
            case 3: /* a little-endian 64-bit field set to something large */
                if (at + 8 <= n)
                    put64(d + at, (r >> 16) | (uint64_t)1 << (32 + (r >> 59)));
                break;
            case 4: n = at + 1; break;
            default: d[at] = (uint8_t)((r >> 48) % 40); break; /* small values: types */
            }
        }
        lkg_file *f = NULL;
        if (lkg_parse(d, n, &f, err, sizeof err) != 0)
            continue;
        parsed++;
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const lkg_tensor *t = &f->tensors[i];
            int64_t rows, cols;
            if (lkg_tensor_shape(t, &rows, &cols, err, sizeof err))
                continue;
            if (t->type == LKG_T_F32 || t->type == LKG_T_F16 || t->type == LKG_T_BF16) {
                float *x = malloc((size_t)(rows * cols) * 4);
                uint16_t *y = malloc((size_t)(rows * cols) * 2);
                converted += x && y && lkg_tensor_to_f32(t, x, err, sizeof err) == 0 &&
                             lkg_tensor_to_bf16(t, y, err, sizeof err) == 0;
                free(x);
                free(y);
            } else {
                lkg_ternary tt;
                for (int bs = 64; bs <= 128; bs += 64)
                    if (lkg_tensor_to_t2(t, bs, &tt, err, sizeof err) == 0) {
                        converted++;
                        lkg_ternary_free(&tt);
                    }
            }
        }
        for (uint64_t i = 0; i < f->n_kv; i++) {
            lkg_str s1;
            if (f->kv[i].value.type == LKG_ARRAY && f->kv[i].value.v.arr.count)
                lkg_array_str(&f->kv[i].value, f->kv[i].value.v.arr.count - 1, &s1);
        }
        lkg_close(f);
    }
    free(d);
    ok(1, "fuzz: %d mutations, %d still parsed, %d tensors converted, no crash", iters, parsed,
       converted);
}

/* A file without tensors (llama.cpp's vocabulary-only files) ends with its
 * metadata, without the padding a data section would start after: read
 * with and without that padding; cut inside the metadata, refused. */
static void check_vocab_only(void)
{
    lkg_writer *w = lkg_writer_new(32);
    const char *toks[3] = {"a", "b", "ab"};
    uint8_t *d = NULL;
    size_t n = 0;
    lkg_w_str(w, "general.architecture", "llama");
    lkg_w_str_array(w, "tokenizer.ggml.tokens", toks, 3);
    lkg_w_str(w, "tokenizer.ggml.pre", "gpt-2"); /* ends with a non-zero byte */
    if (lkg_writer_finish(w, &d, &n))
        bail("writer out of memory");
    lkg_writer_free(w);
    size_t end = n;
    while (end > 0 && d[end - 1] == 0)
        end--;
    lkg_file *f = NULL;
    char pre[16] = "";
    ok(lkg_parse(d, n, &f, err, sizeof err) == 0 && f->n_tensors == 0 && f->n_kv == 3,
       "a file without tensors, padded: read (%s)", f ? "ok" : err);
    lkg_close(f);
    f = NULL;
    ok(end < n && end % 32 != 0, "the sample's metadata ends at %zu, not at an alignment", end);
    ok(lkg_parse(d, end, &f, err, sizeof err) == 0 && f->n_tensors == 0 &&
           lkg_get_str(f, "tokenizer.ggml.pre", pre, sizeof pre, err, sizeof err) == 0 &&
           !strcmp(pre, "gpt-2"),
       "a file without tensors that ends with its metadata (no padding): read (%s)",
       f ? pre : err);
    lkg_close(f);
    int all = 1;
    for (size_t k = 0; k < end; k++) {
        f = NULL;
        if (lkg_parse(d, k, &f, err, sizeof err) == 0) {
            lkg_close(f);
            diag("prefix of %zu bytes accepted", k);
            all = 0;
        }
    }
    ok(all, "every one of its %zu cuts inside the metadata is refused", end);
    free(d);
}

int main(void)
{
    uint64_t seed = tap_seed(), s = seed;
    sample sm;
    make_sample(&sm, &s);
    uint8_t *data[2];
    size_t size[2];
    const uint32_t aligns[2] = {32, 64};
    for (int a = 0; a < 2; a++) {
        if (write_sample(&sm, aligns[a], &data[a], &size[a]) != 0)
            bail("writer out of memory");
        check_roundtrip(&sm, data[a], size[a], aligns[a]);
    }
    check_malformed(data[0], size[0]);
    check_vocab_only();

    /* Through a real file too. */
    char path[] = "test_gguf.tmp.gguf";
    FILE *fp = fopen(path, "wb");
    lkg_file *f = NULL;
    int wrote = fp && fwrite(data[0], 1, size[0], fp) == size[0];
    if (fp)
        fclose(fp);
    ok(wrote && lkg_open(path, &f, err, sizeof err) == 0 && f->n_tensors == 7 &&
           lkg_find_tensor(f, "tq2") != NULL,
       "lkg_open reads the sample from disk");
    lkg_close(f);
    remove(path);
    ok(lkg_open("/nonexistent/x.gguf", &f, err, sizeof err) != 0 && strstr(err, "x.gguf"),
       "a missing file is a clear error (%s)", err);

    fuzz(data[0], size[0], seed, getenv("LOCKSTEP_FUZZ_ITERS") ? atoi(getenv("LOCKSTEP_FUZZ_ITERS")) : 3000);
    free(data[0]);
    free(data[1]);
    free(sm.i2_data);
    free(sm.i2a_data);
    return done_testing();
}
