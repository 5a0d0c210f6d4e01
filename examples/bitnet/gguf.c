/* BitNet example: the GGUF reader (gguf.h).
 *
 * Format: github.com/ggml-org/ggml docs/gguf.md.  Little-endian only (as
 * Lockstep itself); v1 (32-bit counts) is refused.  The parser never
 * dereferences a byte it has not first proved to lie inside the buffer:
 * every read goes through cur_need(), which compares against the bytes
 * left without forming an out-of-range pointer or an overflowing sum. */
#include <errno.h>
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "gguf.h"

#define LKG_TQ_BLOCK 256u
#define LKG_TQ1_BYTES 54u /* qs[48] qh[4] d (ggml-common.h block_tq1_0) */
#define LKG_TQ2_BYTES 66u /* qs[64] d (block_tq2_0) */

int lkg_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* a * b into *r; 0 when it would overflow uint64_t. */
static int mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *r = a * b;
    return 1;
}

static int add_ok(uint64_t a, uint64_t b, uint64_t *r)
{
    if (b > UINT64_MAX - a)
        return 0;
    *r = a + b;
    return 1;
}

/* ------------------------------------------------------------ cursor */

typedef struct cur {
    const uint8_t *p;
    uint64_t size, pos;
    char *err;
    size_t errlen;
} cur;

static int cur_need(cur *c, uint64_t n, const char *what)
{
    if (n > c->size - c->pos)
        return lkg_fail(c->err, c->errlen,
                    "truncated file: %s needs %llu bytes at offset %llu, %llu left", what,
                    (unsigned long long)n, (unsigned long long)c->pos,
                    (unsigned long long)(c->size - c->pos));
    return 0;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int rd(cur *c, int n, uint64_t *v, const char *what)
{
    if (cur_need(c, (uint64_t)n, what))
        return -1;
    *v = le(c->p + c->pos, n);
    c->pos += (uint64_t)n;
    return 0;
}

static int rd_str(cur *c, lkg_str *s, uint64_t max, const char *what)
{
    uint64_t n;
    if (rd(c, 8, &n, what))
        return -1;
    if (n > max)
        return lkg_fail(c->err, c->errlen, "%s at offset %llu: length %llu is absurd (limit %llu)",
                    what, (unsigned long long)(c->pos - 8), (unsigned long long)n,
                    (unsigned long long)max);
    if (cur_need(c, n, what))
        return -1;
    s->s = (const char *)(c->p + c->pos);
    s->len = n;
    c->pos += n;
    return 0;
}

/* Encoded size of one scalar of a fixed-size type, 0 for STRING/ARRAY. */
static int scalar_size(uint32_t t)
{
    switch (t) {
    case LKG_U8: case LKG_I8: case LKG_BOOL: return 1;
    case LKG_U16: case LKG_I16: return 2;
    case LKG_U32: case LKG_I32: case LKG_F32: return 4;
    case LKG_U64: case LKG_I64: case LKG_F64: return 8;
    default: return 0;
    }
}

static int rd_value(cur *c, uint32_t type, lkg_value *v, int depth, const char *what);

/* Skips (and so validates) count elements of type t. */
static int skip_elems(cur *c, uint32_t t, uint64_t count, int depth, const char *what)
{
    int sz = scalar_size(t);
    if (sz) {
        uint64_t bytes;
        if (!mul_ok(count, (uint64_t)sz, &bytes) || bytes > c->size - c->pos)
            return lkg_fail(c->err, c->errlen,
                        "truncated file: %s, an array of %llu elements, does not fit", what,
                        (unsigned long long)count);
        c->pos += bytes;
        return 0;
    }
    for (uint64_t i = 0; i < count; i++) {
        lkg_value tmp;
        if (rd_value(c, t, &tmp, depth, what))
            return -1;
    }
    return 0;
}

static int rd_value(cur *c, uint32_t type, lkg_value *v, int depth, const char *what)
{
    uint64_t x;
    memset(v, 0, sizeof *v);
    v->type = type;
    switch (type) {
    case LKG_U8: case LKG_U16: case LKG_U32: case LKG_U64: case LKG_BOOL:
        if (rd(c, scalar_size(type), &x, what))
            return -1;
        if (type == LKG_BOOL && x > 1)
            return lkg_fail(c->err, c->errlen, "%s: boolean value %llu is neither 0 nor 1", what,
                        (unsigned long long)x);
        v->v.u = x;
        return 0;
    case LKG_I8: case LKG_I16: case LKG_I32: case LKG_I64: {
        int n = scalar_size(type);
        if (rd(c, n, &x, what))
            return -1;
        if (n < 8 && (x >> (8 * n - 1)) & 1)
            x |= ~(uint64_t)0 << (8 * n); /* sign-extend */
        memcpy(&v->v.i, &x, sizeof x);
        return 0;
    }
    case LKG_F32: {
        float f;
        uint32_t b;
        if (rd(c, 4, &x, what))
            return -1;
        b = (uint32_t)x;
        memcpy(&f, &b, sizeof f);
        v->v.f = f;
        return 0;
    }
    case LKG_F64:
        if (rd(c, 8, &x, what))
            return -1;
        memcpy(&v->v.f, &x, sizeof x);
        return 0;
    case LKG_STRING:
        return rd_str(c, &v->v.str, LKG_MAX_STRING, what);
    case LKG_ARRAY: {
        uint64_t et, n;
        if (depth >= LKG_MAX_ARRAY_DEPTH)
            return lkg_fail(c->err, c->errlen, "%s: arrays nested deeper than %d", what,
                        LKG_MAX_ARRAY_DEPTH);
        if (rd(c, 4, &et, what) || rd(c, 8, &n, what))
            return -1;
        if (et >= LKG_VTYPE_COUNT_)
            return lkg_fail(c->err, c->errlen, "%s: unknown array element type %llu", what,
                        (unsigned long long)et);
        if (n > LKG_MAX_ARRAY)
            return lkg_fail(c->err, c->errlen, "%s: array of %llu elements is absurd (limit %llu)",
                        what, (unsigned long long)n, (unsigned long long)LKG_MAX_ARRAY);
        v->v.arr.type = (uint32_t)et;
        v->v.arr.count = n;
        v->v.arr.raw = c->p + c->pos;
        uint64_t start = c->pos;
        if (skip_elems(c, (uint32_t)et, n, depth + 1, what))
            return -1;
        v->v.arr.bytes = c->pos - start;
        return 0;
    }
    default:
        return lkg_fail(c->err, c->errlen, "%s: unknown value type %u", what, (unsigned)type);
    }
}

/* ------------------------------------------------------------ types */

const char *lkg_type_name(uint32_t type)
{
    switch (type) {
    case LKG_T_F32: return "F32";
    case LKG_T_F16: return "F16";
    case LKG_T_BF16: return "BF16";
    case LKG_T_TQ1_0: return "TQ1_0";
    case LKG_T_TQ2_0: return "TQ2_0";
    case LKG_T_I2_S: return "I2_S";
    default: return NULL;
    }
}

/* Bytes of a tensor's data, or -1 with a message. */
static int tensor_bytes(const lkg_tensor *t, uint64_t n, uint64_t *bytes, char *err,
                        size_t errlen)
{
    char nm[80];
    snprintf(nm, sizeof nm, "%.*s", (int)(t->name.len > 64 ? 64 : t->name.len), t->name.s);
    switch (t->type) {
    case LKG_T_F32:
        return mul_ok(n, 4, bytes) ? 0 : lkg_fail(err, errlen, "tensor '%s': size overflows", nm);
    case LKG_T_F16:
    case LKG_T_BF16:
        return mul_ok(n, 2, bytes) ? 0 : lkg_fail(err, errlen, "tensor '%s': size overflows", nm);
    case LKG_T_TQ1_0:
    case LKG_T_TQ2_0:
        if (t->ne[0] % LKG_TQ_BLOCK)
            return lkg_fail(err, errlen, "tensor '%s': %s needs ne[0] = %llu to be a multiple of 256",
                        nm, lkg_type_name(t->type), (unsigned long long)t->ne[0]);
        *bytes = n / LKG_TQ_BLOCK * (t->type == LKG_T_TQ1_0 ? LKG_TQ1_BYTES : LKG_TQ2_BYTES);
        return 0;
    case LKG_T_I2_S:
        /* bitnet.cpp's ggml.c sizes an I2_S tensor as n / 4 bytes of codes
         * plus a 32-byte tail whose first 4 bytes are the f32 scale
         * (src/ggml-bitnet-mad.cpp quantize_i2_s). */
        if (n % 4)
            return lkg_fail(err, errlen, "tensor '%s': I2_S needs a multiple of 4 elements", nm);
        *bytes = n / 4 + 32;
        return 0;
    default:
        return lkg_fail(err, errlen,
                    "tensor '%s': ggml type %u is not supported (F32, F16, BF16, TQ1_0, TQ2_0 "
                    "and I2_S are)",
                    nm, (unsigned)t->type);
    }
}

/* ------------------------------------------------------------ parse */

static int str_cmp(lkg_str a, lkg_str b)
{
    uint64_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.s, b.s, (size_t)n) : 0;
    return r ? r : (a.len < b.len ? -1 : a.len > b.len);
}

static int cmp_tensor_ptr(const void *x, const void *y)
{
    const lkg_tensor *a = *(const lkg_tensor *const *)x, *b = *(const lkg_tensor *const *)y;
    return str_cmp(a->name, b->name);
}

int lkg_str_eq(lkg_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.s, c, n) == 0);
}

static int parse(lkg_file *f, char *err, size_t errlen)
{
    cur c = {f->buf, f->size, 0, err, errlen};
    uint64_t version;
    if (f->size < 4 || memcmp(f->buf, "GGUF", 4) != 0)
        return lkg_fail(err, errlen, "not a GGUF file (bad magic)");
    c.pos = 4;
    if (rd(&c, 4, &version, "version"))
        return -1;
    if (version == 1)
        return lkg_fail(err, errlen, "GGUF version 1 is not supported (versions 2 and 3 are)");
    if (version == 0x02000000u || version == 0x03000000u)
        return lkg_fail(err, errlen, "big-endian GGUF files are not supported");
    if (version != 2 && version != 3)
        return lkg_fail(err, errlen, "unknown GGUF version %llu (versions 2 and 3 are supported)",
                    (unsigned long long)version);
    f->version = (uint32_t)version;
    uint64_t nt, nkv;
    if (rd(&c, 8, &nt, "tensor count") || rd(&c, 8, &nkv, "metadata count"))
        return -1;
    /* Each tensor info takes at least 8+4+8+4+8 bytes, each KV 8+4+1. */
    if (nt > LKG_MAX_TENSORS || nt * 32 > f->size)
        return lkg_fail(err, errlen, "tensor count %llu is absurd for a file of %zu bytes",
                    (unsigned long long)nt, f->size);
    if (nkv > LKG_MAX_KV || nkv * 13 > f->size)
        return lkg_fail(err, errlen, "metadata count %llu is absurd for a file of %zu bytes",
                    (unsigned long long)nkv, f->size);
    f->kv = calloc(nkv ? nkv : 1, sizeof *f->kv);
    f->tensors = calloc(nt ? nt : 1, sizeof *f->tensors);
    if (!f->kv || !f->tensors)
        return lkg_fail(err, errlen, "out of memory");

    f->alignment = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        char what[64];
        lkg_kv *kv = &f->kv[i];
        uint64_t t;
        snprintf(what, sizeof what, "metadata key %llu", (unsigned long long)i);
        if (rd_str(&c, &kv->key, 65535, what) || rd(&c, 4, &t, what))
            return -1;
        if (t >= LKG_VTYPE_COUNT_)
            return lkg_fail(err, errlen, "metadata '%.*s': unknown value type %llu",
                        (int)(kv->key.len > 64 ? 64 : kv->key.len), kv->key.s,
                        (unsigned long long)t);
        if (rd_value(&c, (uint32_t)t, &kv->value, 0, what))
            return -1;
        f->n_kv = i + 1;
        if (lkg_str_eq(kv->key, "general.alignment")) {
            if (kv->value.type != LKG_U32)
                return lkg_fail(err, errlen, "general.alignment must be a uint32");
            uint64_t a = kv->value.v.u;
            if (a == 0 || (a & (a - 1)) || a > 65536)
                return lkg_fail(err, errlen, "general.alignment %llu is not a power of two <= 65536",
                            (unsigned long long)a);
            f->alignment = a;
        }
    }

    for (uint64_t i = 0; i < nt; i++) {
        char what[64];
        lkg_tensor *tn = &f->tensors[i];
        uint64_t nd, ty, off;
        snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)i);
        if (rd_str(&c, &tn->name, 1024, what) || rd(&c, 4, &nd, what))
            return -1;
        if (nd == 0 || nd > LKG_MAX_DIMS)
            return lkg_fail(err, errlen, "tensor %llu: %llu dimensions (1 to %u supported)",
                        (unsigned long long)i, (unsigned long long)nd, LKG_MAX_DIMS);
        tn->n_dims = (uint32_t)nd;
        for (unsigned d = 0; d < LKG_MAX_DIMS; d++)
            tn->ne[d] = 1;
        uint64_t n = 1;
        for (unsigned d = 0; d < nd; d++) {
            if (rd(&c, 8, &tn->ne[d], what))
                return -1;
            if (tn->ne[d] == 0 || tn->ne[d] > (uint64_t)INT64_MAX || !mul_ok(n, tn->ne[d], &n) ||
                n > (uint64_t)INT64_MAX)
                return lkg_fail(err, errlen, "tensor %llu: dimension %u = %llu is absurd",
                            (unsigned long long)i, d, (unsigned long long)tn->ne[d]);
        }
        if (rd(&c, 4, &ty, what) || rd(&c, 8, &off, what))
            return -1;
        tn->type = (uint32_t)ty;
        tn->offset = off;
        f->n_tensors = i + 1;
        if (ty > UINT32_MAX || tensor_bytes(tn, n, &tn->nbytes, err, errlen))
            return -1;
    }

    /* The data section starts at the next multiple of the alignment.  A
     * file without tensors (llama.cpp's vocabulary-only files) has no data
     * section, and its writers leave the padding out: it ends with the
     * metadata, and llama.cpp reads it. */
    uint64_t pad = (f->alignment - c.pos % f->alignment) % f->alignment;
    if (nt == 0 && c.pos + pad > f->size)
        pad = 0;
    if (!add_ok(c.pos, pad, &f->data_offset) || f->data_offset > f->size)
        return lkg_fail(err, errlen, "truncated file: the data section would start at %llu, past "
                    "the end (%zu bytes)", (unsigned long long)(c.pos + pad), f->size);
    uint64_t avail = f->size - f->data_offset;
    for (uint64_t i = 0; i < nt; i++) {
        lkg_tensor *tn = &f->tensors[i];
        uint64_t end;
        int nl = (int)(tn->name.len > 64 ? 64 : tn->name.len);
        if (tn->offset % f->alignment)
            return lkg_fail(err, errlen, "tensor '%.*s': offset %llu is not a multiple of the "
                        "alignment %llu", nl, tn->name.s, (unsigned long long)tn->offset,
                        (unsigned long long)f->alignment);
        if (!add_ok(tn->offset, tn->nbytes, &end) || end > avail)
            return lkg_fail(err, errlen, "tensor '%.*s': data [%llu, +%llu) lies outside the data "
                        "section (%llu bytes)", nl, tn->name.s, (unsigned long long)tn->offset,
                        (unsigned long long)tn->nbytes, (unsigned long long)avail);
        tn->data = f->buf + f->data_offset + tn->offset;
    }

    if (nt > 1) {
        const lkg_tensor **p = malloc(nt * sizeof *p);
        if (!p)
            return lkg_fail(err, errlen, "out of memory");
        for (uint64_t i = 0; i < nt; i++)
            p[i] = &f->tensors[i];
        qsort(p, nt, sizeof *p, cmp_tensor_ptr);
        for (uint64_t i = 1; i < nt; i++)
            if (str_cmp(p[i - 1]->name, p[i]->name) == 0) {
                int nl = (int)(p[i]->name.len > 64 ? 64 : p[i]->name.len);
                char nm[72];
                snprintf(nm, sizeof nm, "%.*s", nl, p[i]->name.s);
                free(p);
                return lkg_fail(err, errlen, "tensor name '%s' appears twice", nm);
            }
        free(p);
    }
    return 0;
}

int lkg_parse(const void *data, size_t size, lkg_file **out, char *err, size_t errlen)
{
    if (!out || (!data && size))
        return lkg_fail(err, errlen, "lkg_parse: NULL argument");
    lkg_file *f = calloc(1, sizeof *f);
    if (!f)
        return lkg_fail(err, errlen, "out of memory");
    f->buf = malloc(size ? size : 1);
    if (!f->buf) {
        free(f);
        return lkg_fail(err, errlen, "out of memory (%zu bytes)", size);
    }
    if (size)
        memcpy(f->buf, data, size);
    f->size = size;
    if (parse(f, err, errlen)) {
        lkg_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

int lkg_open(const char *path, lkg_file **out, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return lkg_fail(err, errlen, "%s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t size = 0, cap = 0;
    for (;;) {
        if (size == cap) {
            size_t ncap = cap ? cap * 2 : (size_t)1 << 20;
            uint8_t *nb = ncap > cap ? realloc(buf, ncap) : NULL;
            if (!nb) {
                free(buf);
                fclose(fp);
                return lkg_fail(err, errlen, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + size, 1, cap - size, fp);
        size += got;
        if (got == 0)
            break;
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        free(buf);
        return lkg_fail(err, errlen, "%s: read error", path);
    }
    /* lkg_parse copies; parse in place instead to keep one copy. */
    lkg_file *f = calloc(1, sizeof *f);
    if (!f) {
        free(buf);
        return lkg_fail(err, errlen, "out of memory");
    }
    f->buf = buf;
    f->size = size;
    char e2[256];
    if (parse(f, e2, sizeof e2)) {
        lkg_close(f);
        return lkg_fail(err, errlen, "%s: %s", path, e2);
    }
    *out = f;
    return 0;
}

void lkg_close(lkg_file *f)
{
    if (!f)
        return;
    free(f->buf);
    free(f->kv);
    free(f->tensors);
    free(f);
}

/* ------------------------------------------------------------ lookups */

const lkg_kv *lkg_find_kv(const lkg_file *f, const char *key)
{
    for (uint64_t i = 0; f && i < f->n_kv; i++)
        if (lkg_str_eq(f->kv[i].key, key))
            return &f->kv[i];
    return NULL;
}

const lkg_tensor *lkg_find_tensor(const lkg_file *f, const char *name)
{
    for (uint64_t i = 0; f && i < f->n_tensors; i++)
        if (lkg_str_eq(f->tensors[i].name, name))
            return &f->tensors[i];
    return NULL;
}

int lkg_get_u64(const lkg_file *f, const char *key, uint64_t *v, char *err, size_t errlen)
{
    const lkg_kv *kv = lkg_find_kv(f, key);
    if (!kv)
        return lkg_fail(err, errlen, "metadata '%s' is missing", key);
    switch (kv->value.type) {
    case LKG_U8: case LKG_U16: case LKG_U32: case LKG_U64:
        *v = kv->value.v.u;
        return 0;
    case LKG_I8: case LKG_I16: case LKG_I32: case LKG_I64:
        if (kv->value.v.i < 0)
            return lkg_fail(err, errlen, "metadata '%s' is negative", key);
        *v = (uint64_t)kv->value.v.i;
        return 0;
    default:
        return lkg_fail(err, errlen, "metadata '%s' is not an integer", key);
    }
}

int lkg_get_f32(const lkg_file *f, const char *key, float *v, char *err, size_t errlen)
{
    const lkg_kv *kv = lkg_find_kv(f, key);
    if (!kv)
        return lkg_fail(err, errlen, "metadata '%s' is missing", key);
    switch (kv->value.type) {
    case LKG_F32: case LKG_F64:
        /* a finite value beyond f32's range is no f32 (and the cast would
         * be undefined behaviour) */
        if (kv->value.v.f - kv->value.v.f == 0.0 &&
            (kv->value.v.f > FLT_MAX || kv->value.v.f < -FLT_MAX))
            return lkg_fail(err, errlen, "metadata '%s' = %g is beyond the range of f32", key,
                            kv->value.v.f);
        *v = (float)kv->value.v.f;
        return 0;
    case LKG_U8: case LKG_U16: case LKG_U32: case LKG_U64:
        *v = (float)kv->value.v.u;
        return 0;
    case LKG_I8: case LKG_I16: case LKG_I32: case LKG_I64:
        *v = (float)kv->value.v.i;
        return 0;
    default:
        return lkg_fail(err, errlen, "metadata '%s' is not a number", key);
    }
}

int lkg_get_str(const lkg_file *f, const char *key, char *buf, size_t n, char *err,
                size_t errlen)
{
    const lkg_kv *kv = lkg_find_kv(f, key);
    if (!kv)
        return lkg_fail(err, errlen, "metadata '%s' is missing", key);
    if (kv->value.type != LKG_STRING)
        return lkg_fail(err, errlen, "metadata '%s' is not a string", key);
    if (n) {
        uint64_t len = kv->value.v.str.len < n - 1 ? kv->value.v.str.len : n - 1;
        memcpy(buf, kv->value.v.str.s, (size_t)len);
        buf[len] = 0;
    }
    return 0;
}

int lkg_array_str(const lkg_value *v, uint64_t i, lkg_str *out)
{
    if (v->type != LKG_ARRAY || v->v.arr.type != LKG_STRING || i >= v->v.arr.count)
        return -1;
    /* The array was validated at parse time, so each length is in bounds. */
    cur c = {v->v.arr.raw, v->v.arr.bytes, 0, NULL, 0};
    for (uint64_t k = 0;; k++) {
        if (rd_str(&c, out, LKG_MAX_STRING, "string"))
            return -1;
        if (k == i)
            return 0;
    }
}

int lkg_tensor_shape(const lkg_tensor *t, int64_t *rows, int64_t *cols, char *err, size_t errlen)
{
    uint64_t r = 1;
    for (unsigned d = 1; d < LKG_MAX_DIMS; d++)
        if (!mul_ok(r, t->ne[d], &r) || r > (uint64_t)INT64_MAX)
            return lkg_fail(err, errlen, "tensor shape overflows");
    *rows = (int64_t)r;
    *cols = (int64_t)t->ne[0];
    return 0;
}

/* ------------------------------------------------------------ floats */

static uint64_t elems(const lkg_tensor *t)
{
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; /* checked at parse */
}

int lkg_tensor_to_f32(const lkg_tensor *t, float *dst, char *err, size_t errlen)
{
    uint64_t n = elems(t);
    const uint8_t *p = t->data;
    switch (t->type) {
    case LKG_T_F32:
        memcpy(dst, p, (size_t)n * 4);
        return 0;
    case LKG_T_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = lk_f16_to_f32((uint16_t)le(p + 2 * i, 2));
        return 0;
    case LKG_T_BF16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = lk_bf16_to_f32((uint16_t)le(p + 2 * i, 2));
        return 0;
    default:
        return lkg_fail(err, errlen, "tensor '%.*s' is %s, not a float type",
                    (int)(t->name.len > 64 ? 64 : t->name.len), t->name.s,
                    lkg_type_name(t->type) ? lkg_type_name(t->type) : "?");
    }
}

int lkg_tensor_to_bf16(const lkg_tensor *t, uint16_t *dst, char *err, size_t errlen)
{
    uint64_t n = elems(t);
    const uint8_t *p = t->data;
    switch (t->type) {
    case LKG_T_BF16:
        memcpy(dst, p, (size_t)n * 2);
        return 0;
    case LKG_T_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = lk_f32_to_bf16(lk_f16_to_f32((uint16_t)le(p + 2 * i, 2)));
        return 0;
    case LKG_T_F32:
        for (uint64_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)le(p + 4 * i, 4);
            float x;
            memcpy(&x, &b, sizeof x);
            dst[i] = lk_f32_to_bf16(x);
        }
        return 0;
    default:
        return lkg_tensor_to_f32(t, NULL, err, errlen); /* the error message */
    }
}

/* ------------------------------------------------------------ ternary */

static void put_code(uint8_t *row, int64_t k, unsigned code)
{
    row[k / 4] = (uint8_t)((row[k / 4] & ~(3u << 2 * (k % 4))) | (code & 3u) << 2 * (k % 4));
}

static unsigned get_code(const uint8_t *row, int64_t k)
{
    return (row[k / 4] >> 2 * (k % 4)) & 3u;
}

/* Weight w (0..255) of a TQ1_0 / TQ2_0 block, as its code.  Follows
 * llama.cpp ggml/src/ggml-quants.c dequantize_row_tq1_0 / tq2_0. */
static unsigned tq1_code(const uint8_t *blk, unsigned w)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t q;
    if (w < 160)
        q = (uint8_t)(blk[w % 32] * pow3[w / 32]);
    else if (w < 240)
        q = (uint8_t)(blk[32 + (w - 160) % 16] * pow3[(w - 160) / 16]);
    else
        q = (uint8_t)(blk[48 + (w - 240) % 4] * pow3[(w - 240) / 4]);
    return ((unsigned)q * 3u) >> 8;
}

static unsigned tq2_code(const uint8_t *blk, unsigned w)
{
    unsigned h = w / 128, l = (w % 128) / 32, m = w % 32;
    return (blk[32 * h + m] >> 2 * l) & 3u;
}

int lkg_tensor_to_t2(const lkg_tensor *t, int i2s_block, lkg_ternary *out, char *err,
                     size_t errlen)
{
    int64_t rows = 0, cols = 0;
    int nl = (int)(t->name.len > 64 ? 64 : t->name.len);
    memset(out, 0, sizeof *out);
    if (t->type != LKG_T_TQ1_0 && t->type != LKG_T_TQ2_0 && t->type != LKG_T_I2_S)
        return lkg_fail(err, errlen, "tensor '%.*s' is %s, not a ternary type", nl, t->name.s,
                    lkg_type_name(t->type) ? lkg_type_name(t->type) : "?");
    if (lkg_tensor_shape(t, &rows, &cols, err, errlen))
        return -1;
    if (i2s_block == 0)
        i2s_block = 128;
    if (i2s_block != 128 && i2s_block != 64)
        return lkg_fail(err, errlen, "I2_S block size %d (64 or 128 exist)", i2s_block);
    int64_t ld = (cols + 3) / 4 * 4;
    uint64_t nbytes;
    if (!mul_ok((uint64_t)rows, (uint64_t)ld / 4, &nbytes) || nbytes > SIZE_MAX / 2)
        return lkg_fail(err, errlen, "tensor '%.*s' is too large", nl, t->name.s);
    out->rows = rows;
    out->cols = cols;
    out->ld = ld;
    out->nscale = t->type == LKG_T_I2_S ? 1 : rows;
    out->codes = malloc(nbytes ? (size_t)nbytes : 1);
    out->scale = malloc((size_t)out->nscale * sizeof(float));
    if (!out->codes || !out->scale) {
        lkg_ternary_free(out);
        return lkg_fail(err, errlen, "out of memory");
    }
    memset(out->codes, 0x55, (size_t)nbytes); /* code 1 (value 0) everywhere */

    if (t->type == LKG_T_I2_S) {
        uint64_t n = (uint64_t)rows * (uint64_t)cols;
        uint64_t bb = (uint64_t)i2s_block / 4; /* bytes per block = group size */
        if (n % (uint64_t)i2s_block) {
            lkg_ternary_free(out);
            return lkg_fail(err, errlen, "tensor '%.*s': I2_S with %llu weights is not a whole "
                        "number of %d-weight blocks", nl, t->name.s, (unsigned long long)n,
                        i2s_block);
        }
        /* quantize_i2_s (bitnet.cpp src/ggml-bitnet-mad.cpp): weight j of a
         * block sits in byte j % bb of the block, at shift 6 - 2 * (j / bb).
         * (Some forks also have a "1x4" variant that interleaves four rows
         * per byte; its files carry the same type number and are not read
         * correctly here: there is no field that tells them apart.) */
        for (uint64_t i = 0; i < n; i++) {
            uint64_t blk = i / (uint64_t)i2s_block, j = i % (uint64_t)i2s_block;
            unsigned code = (t->data[blk * bb + j % bb] >> (6 - 2 * (j / bb))) & 3u;
            put_code(out->codes + (i / (uint64_t)cols) * (uint64_t)(ld / 4),
                     (int64_t)(i % (uint64_t)cols), code);
        }
        uint32_t b = (uint32_t)le(t->data + n / 4, 4);
        memcpy(&out->scale[0], &b, sizeof b);
        return 0;
    }

    const int tq1 = t->type == LKG_T_TQ1_0;
    const uint64_t bsz = tq1 ? LKG_TQ1_BYTES : LKG_TQ2_BYTES;
    const int64_t nb = cols / LKG_TQ_BLOCK;
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = out->codes + r * (ld / 4);
        int have = 0;
        uint16_t d = 0, d_first = 0;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = t->data + ((uint64_t)r * (uint64_t)nb + (uint64_t)b) * bsz;
            uint16_t db = (uint16_t)le(blk + bsz - 2, 2);
            int nonzero = 0;
            for (unsigned w = 0; w < LKG_TQ_BLOCK; w++) {
                unsigned code = tq1 ? tq1_code(blk, w) : tq2_code(blk, w);
                nonzero |= code != 1;
                put_code(row, b * LKG_TQ_BLOCK + w, code);
            }
            if (b == 0)
                d_first = db;
            if (!nonzero)
                continue;
            if (have && db != d) {
                lkg_ternary_free(out);
                return lkg_fail(err, errlen, "tensor '%.*s' row %lld: blocks have different scales "
                            "(0x%04x, 0x%04x); Lockstep's ternary GEMM takes one scale per row",
                            nl, t->name.s, (long long)r, d, db);
            }
            have = 1;
            d = db;
        }
        out->scale[r] = lk_f16_to_f32(have ? d : d_first);
    }
    return 0;
}

void lkg_ternary_free(lkg_ternary *t)
{
    if (!t)
        return;
    free(t->codes);
    free(t->scale);
    t->codes = NULL;
    t->scale = NULL;
}

/* ------------------------------------------------------------ encoders */

uint64_t lkg_ternary_bytes(uint32_t type, int64_t rows, int64_t cols, int i2s_block)
{
    uint64_t n = (uint64_t)rows * (uint64_t)cols;
    (void)i2s_block;
    switch (type) {
    case LKG_T_TQ1_0: return n / LKG_TQ_BLOCK * LKG_TQ1_BYTES;
    case LKG_T_TQ2_0: return n / LKG_TQ_BLOCK * LKG_TQ2_BYTES;
    case LKG_T_I2_S: return n / 4 + 32;
    default: return 0;
    }
}

int lkg_encode_ternary(uint32_t type, const uint8_t *codes, int64_t rows, int64_t cols,
                       const float *scale, int i2s_block, uint8_t *dst)
{
    const int64_t ldb = (cols + 3) / 4;
    if (i2s_block == 0)
        i2s_block = 128;
    if (type == LKG_T_I2_S) {
        uint64_t n = (uint64_t)rows * (uint64_t)cols, bb = (uint64_t)i2s_block / 4;
        if (n % (uint64_t)i2s_block)
            return -1;
        memset(dst, 0, (size_t)(n / 4 + 32));
        for (uint64_t i = 0; i < n; i++) {
            uint64_t blk = i / (uint64_t)i2s_block, j = i % (uint64_t)i2s_block;
            unsigned code = get_code(codes + (i / (uint64_t)cols) * (uint64_t)ldb,
                                     (int64_t)(i % (uint64_t)cols));
            dst[blk * bb + j % bb] |= (uint8_t)(code << (6 - 2 * (j / bb)));
        }
        uint32_t b;
        memcpy(&b, &scale[0], sizeof b);
        for (int k = 0; k < 4; k++)
            dst[n / 4 + (uint64_t)k] = (uint8_t)(b >> 8 * k);
        return 0;
    }
    if ((type != LKG_T_TQ1_0 && type != LKG_T_TQ2_0) || cols % LKG_TQ_BLOCK)
        return -1;
    const int tq1 = type == LKG_T_TQ1_0;
    const uint64_t bsz = tq1 ? LKG_TQ1_BYTES : LKG_TQ2_BYTES;
    const int64_t nb = cols / LKG_TQ_BLOCK;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = codes + r * ldb;
        uint16_t d = lk_f32_to_f16(scale[r]);
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *blk = dst + ((uint64_t)r * (uint64_t)nb + (uint64_t)b) * bsz;
            const int64_t k0 = b * LKG_TQ_BLOCK;
            memset(blk, 0, (size_t)bsz);
            if (tq1) {
                /* quantize_row_tq1_0_ref: five trits per byte, the first
                 * the most significant, then a ceiling division by 243 so
                 * that decoding is a multiply and a shift.  Codes must be
                 * 0..2 here (TQ1_0 cannot hold code 3). */
                for (unsigned m = 0; m < 48; m++) {
                    unsigned q = 0;
                    for (unsigned nn = 0; nn < 5; nn++) {
                        unsigned w = m < 32 ? m + 32 * nn : 160 + (m - 32) + 16 * nn;
                        q = q * 3 + get_code(row, k0 + w);
                    }
                    blk[m] = (uint8_t)((q * 256 + 242) / 243);
                }
                for (unsigned j = 0; j < 4; j++) {
                    unsigned q = 0;
                    for (unsigned m = 0; m < 4; m++)
                        q = q * 3 + get_code(row, k0 + 240 + j + 4 * m);
                    q *= 3;
                    blk[48 + j] = (uint8_t)((q * 256 + 242) / 243);
                }
            } else {
                for (unsigned w = 0; w < LKG_TQ_BLOCK; w++) {
                    unsigned h = w / 128, l = (w % 128) / 32, m = w % 32;
                    blk[32 * h + m] |= (uint8_t)(get_code(row, k0 + w) << 2 * l);
                }
            }
            blk[bsz - 2] = (uint8_t)d;
            blk[bsz - 1] = (uint8_t)(d >> 8);
        }
    }
    return 0;
}
