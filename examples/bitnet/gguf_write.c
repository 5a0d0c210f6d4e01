/* BitNet example: a small GGUF v3 writer (gguf.h), for the tests and for
 * writing the demo's model to a file.  Metadata and tensor infos go to one
 * growing buffer, tensor data to another; finish() joins them with the
 * alignment padding the format asks for. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

struct lkg_writer {
    uint32_t alignment;
    uint64_t n_kv, n_tensors;
    buf kv, info, data;
    int oom;
};

static int put(lkg_writer *w, buf *b, const void *src, size_t n)
{
    if (w->oom)
        return -1;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            w->oom = 1;
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

static int put_le(lkg_writer *w, buf *b, uint64_t v, int n)
{
    uint8_t t[8];
    for (int i = 0; i < n; i++)
        t[i] = (uint8_t)(v >> 8 * i);
    return put(w, b, t, (size_t)n);
}

static int put_str(lkg_writer *w, buf *b, const char *s)
{
    size_t n = strlen(s);
    return put_le(w, b, n, 8) || put(w, b, s, n) ? -1 : 0;
}

lkg_writer *lkg_writer_new(uint32_t alignment)
{
    lkg_writer *w = calloc(1, sizeof *w);
    if (w)
        w->alignment = alignment ? alignment : 32;
    if (w && alignment && alignment != 32)
        lkg_w_u32(w, "general.alignment", alignment);
    return w;
}

void lkg_writer_free(lkg_writer *w)
{
    if (!w)
        return;
    free(w->kv.p);
    free(w->info.p);
    free(w->data.p);
    free(w);
}

int lkg_w_raw(lkg_writer *w, const char *key, uint32_t type, const void *enc, size_t n)
{
    if (put_str(w, &w->kv, key) || put_le(w, &w->kv, type, 4) || put(w, &w->kv, enc, n))
        return -1;
    w->n_kv++;
    return 0;
}

int lkg_w_u32(lkg_writer *w, const char *key, uint32_t v)
{
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return lkg_w_raw(w, key, LKG_U32, t, 4);
}

int lkg_w_f32(lkg_writer *w, const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    uint8_t t[4] = {(uint8_t)b, (uint8_t)(b >> 8), (uint8_t)(b >> 16), (uint8_t)(b >> 24)};
    return lkg_w_raw(w, key, LKG_F32, t, 4);
}

int lkg_w_str(lkg_writer *w, const char *key, const char *v)
{
    if (put_str(w, &w->kv, key) || put_le(w, &w->kv, LKG_STRING, 4) || put_str(w, &w->kv, v))
        return -1;
    w->n_kv++;
    return 0;
}

int lkg_w_str_array(lkg_writer *w, const char *key, const char *const *v, uint64_t n)
{
    if (put_str(w, &w->kv, key) || put_le(w, &w->kv, LKG_ARRAY, 4) ||
        put_le(w, &w->kv, LKG_STRING, 4) || put_le(w, &w->kv, n, 8))
        return -1;
    for (uint64_t i = 0; i < n; i++)
        if (put_str(w, &w->kv, v[i]))
            return -1;
    w->n_kv++;
    return 0;
}

int lkg_w_tensor(lkg_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                 const uint64_t *ne, const void *data, uint64_t nbytes)
{
    static const uint8_t zero[64];
    size_t pad = (w->alignment - w->data.n % w->alignment) % w->alignment;
    while (pad) {
        size_t k = pad < sizeof zero ? pad : sizeof zero;
        if (put(w, &w->data, zero, k))
            return -1;
        pad -= k;
    }
    if (put_str(w, &w->info, name) || put_le(w, &w->info, n_dims, 4))
        return -1;
    for (uint32_t d = 0; d < n_dims; d++)
        if (put_le(w, &w->info, ne[d], 8))
            return -1;
    if (put_le(w, &w->info, type, 4) || put_le(w, &w->info, w->data.n, 8) ||
        put(w, &w->data, data, (size_t)nbytes))
        return -1;
    w->n_tensors++;
    return 0;
}

int lkg_writer_finish(lkg_writer *w, uint8_t **data, size_t *size)
{
    buf out = {0, 0, 0};
    static const uint8_t zero[64];
    if (w->oom || put(w, &out, "GGUF", 4) || put_le(w, &out, 3, 4) ||
        put_le(w, &out, w->n_tensors, 8) || put_le(w, &out, w->n_kv, 8) ||
        put(w, &out, w->kv.p, w->kv.n) || put(w, &out, w->info.p, w->info.n))
        goto oom;
    size_t pad = (w->alignment - out.n % w->alignment) % w->alignment;
    while (pad) {
        size_t k = pad < sizeof zero ? pad : sizeof zero;
        if (put(w, &out, zero, k))
            goto oom;
        pad -= k;
    }
    if (put(w, &out, w->data.p, w->data.n))
        goto oom;
    *data = out.p;
    *size = out.n;
    return 0;
oom:
    free(out.p);
    return -1;
}
