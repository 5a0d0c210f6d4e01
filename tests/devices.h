/* Lockstep tests: what the per-op device tests share.  Every device of a
 * context with a queue each (the reference among them, or bail), device
 * buffers filled from and read back to host memory, and f32 values put
 * into an f32 or 16-bit dtype.  Header-only, like tap.h (include it
 * after tap.h). */
#ifndef LK_TESTS_DEVICES_H
#define LK_TESTS_DEVICES_H

#include <stdint.h>
#include <string.h>

#include <lockstep.h>

#define TEST_MAX_DEVICES 32

typedef struct test_devices {
    lk_context *ctx;
    lk_device *dev[TEST_MAX_DEVICES];
    lk_queue *q[TEST_MAX_DEVICES];
    int n;
    lk_queue *ref_q; /* the reference device's queue */
} test_devices;

static inline void test_devices_open(test_devices *t)
{
    memset(t, 0, sizeof *t);
    if (lk_context_create(&t->ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    for (int i = 0; i < lk_device_count(t->ctx) && t->n < TEST_MAX_DEVICES; i++) {
        if (lk_device_get(t->ctx, i, &t->dev[t->n]) != LK_OK)
            continue;
        if (lk_queue_create(t->dev[t->n], NULL, &t->q[t->n]) != LK_OK)
            bail("no queue on %s: %s", lk_device_name(t->dev[t->n]), lk_last_error());
        if (!strcmp(lk_device_name(t->dev[t->n]), "ref"))
            t->ref_q = t->q[t->n];
        t->n++;
    }
    if (!t->ref_q)
        bail("no reference device");
}

static inline void test_devices_close(test_devices *t)
{
    for (int d = 0; d < t->n; d++)
        lk_queue_destroy(t->q[d]);
    lk_context_destroy(t->ctx);
}

static inline size_t test_esize(lk_dtype d)
{
    return d == LK_F32 ? 4 : 2;
}

/* f32 values into dtype d (bf16: the high half, which is exact for the
 * tests' purpose: the same bits go to every call; f16: rounded by
 * lk_f32_to_f16, so an f16 case holds f16 values, not bf16 bit patterns). */
static inline void test_fill(void *dst, lk_dtype d, const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (d == LK_F32) {
            ((float *)dst)[i] = v[i];
        } else if (d == LK_F16) {
            ((uint16_t *)dst)[i] = lk_f32_to_f16(v[i]);
        } else {
            uint32_t b;
            memcpy(&b, &v[i], 4);
            ((uint16_t *)dst)[i] = (uint16_t)(b >> 16);
        }
    }
}

/* A device buffer and its size. */
typedef struct dbuf {
    void *p;
    size_t bytes;
} dbuf;

/* Allocate bytes (at least 1) on d and copy host there (NULL: nothing). */
static inline int dbuf_up(lk_device *d, lk_queue *q, dbuf *b, const void *host, size_t bytes)
{
    b->bytes = bytes;
    if (lk_malloc(d, bytes ? bytes : 1, &b->p) != LK_OK)
        return 0;
    return host == NULL || lk_memcpy(q, b->p, host, bytes, LK_COPY_HOST_TO_DEVICE) == LK_OK;
}

/* Copy the buffer back to host and wait for it. */
static inline int dbuf_down(lk_queue *q, void *host, const dbuf *b)
{
    return lk_memcpy(q, host, b->p, b->bytes, LK_COPY_DEVICE_TO_HOST) == LK_OK &&
           lk_queue_sync(q) == LK_OK;
}

static inline void dbuf_free(lk_device *d, dbuf *b)
{
    if (b->p)
        lk_free(d, b->p);
    b->p = NULL;
}

#endif
