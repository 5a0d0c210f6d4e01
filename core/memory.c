/* Lockstep core: device memory and the allocation registry.
 *
 * Every lk_malloc records [ptr, ptr + bytes) -> device in one sorted array
 * under a mutex.  Live allocations never overlap, so a binary search on
 * the start address answers "which allocation holds this tensor", which is
 * how validation refuses a host pointer on a GPU queue (and a GPU pointer
 * on a CPU queue) before any driver sees it. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/capture.h"
#include "core/core.h"
#include "core/error.h"
#include "core/memory.h"
#include "numerics/fpenv.h"

#define LK_ALIGN 64

typedef struct lk_alloc {
    uintptr_t lo, hi;
    lk_device *dev;
} lk_alloc;

static pthread_mutex_t lk_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static lk_alloc *lk_mem_tab;
static size_t lk_mem_n, lk_mem_cap;
/* Live blocks of devices without host memory: while there are none, a
 * host-memory device's tensors need no lookup (the common CPU-only case
 * pays no lock per tensor). */
static atomic_size_t lk_mem_nonhost;

/* Number of entries with lo <= key (the caller holds the lock). */
static size_t lk_mem_upper(uintptr_t key)
{
    size_t a = 0, b = lk_mem_n;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (lk_mem_tab[m].lo <= key)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

static int lk_mem_insert(void *p, size_t bytes, lk_device *dev)
{
    uintptr_t lo = (uintptr_t)p;
    int ok = 0;
    pthread_mutex_lock(&lk_mem_mu);
    if (lk_mem_n == lk_mem_cap) {
        size_t cap = lk_mem_cap ? 2 * lk_mem_cap : 64;
        lk_alloc *t = realloc(lk_mem_tab, cap * sizeof *t);
        if (!t)
            goto out;
        lk_mem_tab = t;
        lk_mem_cap = cap;
    }
    size_t i = lk_mem_upper(lo);
    memmove(lk_mem_tab + i + 1, lk_mem_tab + i, (lk_mem_n - i) * sizeof *lk_mem_tab);
    lk_mem_tab[i].lo = lo;
    lk_mem_tab[i].hi = lo + bytes;
    lk_mem_tab[i].dev = dev;
    lk_mem_n++;
    if (!dev->props.host_memory)
        atomic_fetch_add(&lk_mem_nonhost, 1);
    ok = 1;
out:
    pthread_mutex_unlock(&lk_mem_mu);
    return ok;
}

static void lk_mem_erase(size_t i)
{
    if (!lk_mem_tab[i].dev->props.host_memory)
        atomic_fetch_sub(&lk_mem_nonhost, 1);
    memmove(lk_mem_tab + i, lk_mem_tab + i + 1, (lk_mem_n - i - 1) * sizeof *lk_mem_tab);
    lk_mem_n--;
}

void lk_mem_lookup(uintptr_t lo, uintptr_t hi, lk_mem_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    pthread_mutex_lock(&lk_mem_mu);
    size_t i = lk_mem_upper(lo);
    if (i > 0 && lo < lk_mem_tab[i - 1].hi && hi <= lk_mem_tab[i - 1].hi)
        hit->inside = lk_mem_tab[i - 1].dev;
    /* entries are disjoint and sorted: the ones overlapping [lo, hi) are
     * a run ending at the last one starting below hi */
    for (size_t k = lk_mem_upper(hi - 1); k > 0 && lk_mem_tab[k - 1].hi > lo; k--) {
        lk_device *d = lk_mem_tab[k - 1].dev;
        if (!hit->overlap)
            hit->overlap = d;
        if (!d->props.host_memory && !hit->overlap_nonhost)
            hit->overlap_nonhost = d;
    }
    pthread_mutex_unlock(&lk_mem_mu);
}

lk_status lk_mem_check(lk_device *dev, const char *fn, const char *what, uintptr_t lo,
                       uintptr_t hi)
{
    lk_mem_hit h;
    if (lo >= hi)
        return LK_OK;
    if (dev->props.host_memory && atomic_load(&lk_mem_nonhost) == 0)
        return LK_OK;
    lk_mem_lookup(lo, hi, &h);
    if (dev->props.host_memory) {
        if (h.overlap_nonhost)
            return lk_error(LK_ERR_WRONG_DEVICE,
                            "%s: %s: memory of device %s, not reachable from %s", fn,
                            what, h.overlap_nonhost->props.name, dev->props.name);
        return LK_OK;
    }
    if (h.inside == dev)
        return LK_OK;
    if (h.inside || (h.overlap && h.overlap != dev))
        return lk_error(LK_ERR_WRONG_DEVICE, "%s: %s: memory of device %s, not of %s", fn,
                        what, (h.inside ? h.inside : h.overlap)->props.name,
                        dev->props.name);
    if (h.overlap)
        return lk_error(LK_ERR_WRONG_DEVICE,
                        "%s: %s: extends past the end of its lk_malloc'd block on %s", fn,
                        what, dev->props.name);
    /* memory another allocator made on this device, if the driver can
     * tell (driver.h, mem_reachable) */
    if (dev->iface->mem_reachable &&
        dev->iface->mem_reachable(dev->state, (const void *)lo, (size_t)(hi - lo)))
        return LK_OK;
    return lk_error(LK_ERR_WRONG_DEVICE,
                    "%s: %s: not memory of device %s (use lk_malloc on it and lk_memcpy)",
                    fn, what, dev->props.name);
}

static void lk_dev_free(lk_device *dev, void *p)
{
    if (dev->iface->mem_alloc)
        dev->iface->mem_free(dev->state, p);
    else
        free(p);
}

void lk_mem_release_device(lk_device *dev)
{
    for (;;) {
        void *p = NULL;
        pthread_mutex_lock(&lk_mem_mu);
        for (size_t i = 0; i < lk_mem_n; i++) {
            if (lk_mem_tab[i].dev == dev) {
                p = (void *)lk_mem_tab[i].lo;
                lk_mem_erase(i);
                break;
            }
        }
        if (lk_mem_n == 0) {
            free(lk_mem_tab);
            lk_mem_tab = NULL;
            lk_mem_cap = 0;
        }
        pthread_mutex_unlock(&lk_mem_mu);
        if (!p)
            return;
        lk_dev_free(dev, p);
    }
}

static lk_status lk_malloc_unguarded(lk_device *dev, size_t bytes, void **ptr)
{
    lk_error_clear();
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_malloc: dev is NULL");
    if (!ptr)
        return lk_error(LK_ERR_NULL_POINTER, "lk_malloc: ptr is NULL");
    /* a zero-byte block still gets an address of its own */
    size_t want = bytes ? bytes : 1;
    void *p = NULL;
    if (!dev->iface->mem_alloc) {
        if (want > SIZE_MAX - (LK_ALIGN - 1))
            return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_malloc: bytes (%zu) too large", bytes);
        p = aligned_alloc(LK_ALIGN, (want + LK_ALIGN - 1) / LK_ALIGN * LK_ALIGN);
        if (!p)
            return lk_error(LK_ERR_OUT_OF_MEMORY,
                            "lk_malloc: %zu bytes of host memory not available", bytes);
    } else {
        lk_status st = dev->iface->mem_alloc(dev->state, want, &p);
        if (st != LK_OK || !p) {
            if (st == LK_OK)
                st = LK_ERR_DRIVER;
            if (lk_last_error()[0])
                return lk_error(st, "lk_malloc: %s: %s", dev->props.name, lk_last_error());
            return lk_error(st, "lk_malloc: device %s could not allocate %zu bytes (%s)",
                            dev->props.name, bytes, lk_status_string(st));
        }
    }
    if (!lk_mem_insert(p, want, dev)) {
        lk_dev_free(dev, p);
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_malloc: out of memory for the registry");
    }
    lk_error_clear();
    *ptr = p;
    return LK_OK;
}

static lk_status lk_free_unguarded(lk_device *dev, void *ptr)
{
    lk_error_clear();
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_free: dev is NULL");
    if (!ptr)
        return LK_OK;
    lk_device *owner = NULL;
    int found = 0;
    pthread_mutex_lock(&lk_mem_mu);
    size_t i = lk_mem_upper((uintptr_t)ptr);
    if (i > 0 && lk_mem_tab[i - 1].lo == (uintptr_t)ptr) {
        found = 1;
        owner = lk_mem_tab[i - 1].dev;
        if (owner == dev)
            lk_mem_erase(i - 1);
    }
    pthread_mutex_unlock(&lk_mem_mu);
    if (!found)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_free: ptr %p was not returned by lk_malloc (or is freed already)",
                        ptr);
    if (owner != dev)
        return lk_error(LK_ERR_WRONG_DEVICE, "lk_free: ptr belongs to device %s, not %s",
                        owner->props.name, dev->props.name);
    lk_dev_free(dev, ptr);
    return LK_OK;
}

static int lk_ranges_overlap(uintptr_t a, uintptr_t b, size_t n)
{
    return a < b + n && b < a + n;
}

static lk_status lk_memcpy_unguarded(lk_queue *q, void *dst, const void *src, size_t bytes,
                           lk_copy_kind kind)
{
    static const char fn[] = "lk_memcpy";
    lk_error_clear();
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "%s: q is NULL", fn);
    if (kind != LK_COPY_HOST_TO_DEVICE && kind != LK_COPY_DEVICE_TO_HOST &&
        kind != LK_COPY_DEVICE_TO_DEVICE)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: kind: %d is not an lk_copy_kind", fn,
                        (int)kind);
    if (bytes == 0)
        return LK_OK;
    if (!dst)
        return lk_error(LK_ERR_NULL_POINTER, "%s: dst is NULL", fn);
    if (!src)
        return lk_error(LK_ERR_NULL_POINTER, "%s: src is NULL", fn);
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (bytes > UINTPTR_MAX - d || bytes > UINTPTR_MAX - s)
        return lk_error(LK_ERR_OVERFLOW, "%s: bytes (%zu) wrap the address space", fn, bytes);
    if (lk_ranges_overlap(d, s, bytes))
        return lk_error(LK_ERR_ALIASING, "%s: dst overlaps src", fn);
    lk_device *dev = q->dev;
    lk_status st;
    if (dev->props.host_memory) {
        if ((st = lk_mem_check(dev, fn, "dst", d, d + bytes)) != LK_OK)
            return st;
        if ((st = lk_mem_check(dev, fn, "src", s, s + bytes)) != LK_OK)
            return st;
    } else {
        /* the host side of a copy must not be another device's memory */
        lk_mem_hit h;
        int dst_dev = kind != LK_COPY_DEVICE_TO_HOST;
        int src_dev = kind != LK_COPY_HOST_TO_DEVICE;
        if (dst_dev) {
            if ((st = lk_mem_check(dev, fn, "dst", d, d + bytes)) != LK_OK)
                return st;
        } else {
            lk_mem_lookup(d, d + bytes, &h);
            if (h.overlap_nonhost)
                return lk_error(LK_ERR_WRONG_DEVICE,
                                "%s: dst: memory of device %s, but kind says host memory",
                                fn, h.overlap_nonhost->props.name);
        }
        if (src_dev) {
            if ((st = lk_mem_check(dev, fn, "src", s, s + bytes)) != LK_OK)
                return st;
        } else {
            lk_mem_lookup(s, s + bytes, &h);
            if (h.overlap_nonhost)
                return lk_error(LK_ERR_WRONG_DEVICE,
                                "%s: src: memory of device %s, but kind says host memory",
                                fn, h.overlap_nonhost->props.name);
        }
    }
    if (lk_capture_hosted(q))
        return lk_capture_memcpy(q, dst, src, bytes, kind);
    if (!dev->iface->memcpy) {
        memcpy(dst, src, bytes);
        return LK_OK;
    }
    st = dev->iface->memcpy(q->state, dst, src, bytes, kind);
    if (st == LK_OK) {
        lk_error_clear();
        lk_capture_count(q);
        return LK_OK;
    }
    if (lk_last_error()[0])
        return lk_error(st, "%s: %s: %s", fn, dev->props.name, lk_last_error());
    return lk_error(st, "%s: device %s failed (%s)", fn, dev->props.name,
                    lk_status_string(st));
}

/* The public entry points: the body inside the FP guard (numerics.md
 * section 2), so that neither a driver's runtime nor our own arithmetic
 * sees the caller's FTZ/DAZ or leaves status flags in the caller's
 * register. */

LK_API lk_status lk_malloc(lk_device *dev, size_t bytes, void **ptr)
{
    LK_FP_GUARDED_RETURN(lk_malloc_unguarded(dev, bytes, ptr));
}

LK_API lk_status lk_free(lk_device *dev, void *ptr)
{
    LK_FP_GUARDED_RETURN(lk_free_unguarded(dev, ptr));
}

LK_API lk_status lk_memcpy(lk_queue *q, void *dst, const void *src, size_t bytes, lk_copy_kind kind)
{
    LK_FP_GUARDED_RETURN(lk_memcpy_unguarded(q, dst, src, bytes, kind));
}
