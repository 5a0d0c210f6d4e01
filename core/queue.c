/* Lockstep core: queues.  A host-memory device whose driver has no queues
 * (queue_create NULL, as "ref") gets a core queue: its ops run to
 * completion inside the call, and its kernels see a NULL queue. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "core/capture.h"
#include "core/core.h"
#include "core/error.h"
#include "numerics/fpenv.h"

/* num_threads above this is refused on every device (the CPU driver's
 * limit, LOCKSTEP_NUM_THREADS's too) */
#define LK_QUEUE_MAX_THREADS 1024

static lk_status lk_queue_create_unguarded(lk_device *dev, const lk_queue_opts *opts, lk_queue **out)
{
    lk_error_clear();
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_create: dev is NULL");
    if (!out)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_create: q is NULL");
    lk_queue_opts o;
    memset(&o, 0, sizeof o);
    if (opts)
        o = *opts;
    /* The options as docs/api.md states them, for every device: drivers
     * see only options that are valid. */
    if (o.num_threads < 0 || o.num_threads > LK_QUEUE_MAX_THREADS)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_create: opts->num_threads = %d (expected 0 for the default, "
                        "or 1 to %d)", o.num_threads, LK_QUEUE_MAX_THREADS);
    const lk_device_iface *iface = dev->iface;
    /* a host-memory device runs every op inside the call: it has no streams */
    if (o.native_stream && (!iface->queue_create || dev->props.host_memory))
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_create: opts->native_stream: device %s has no streams",
                        dev->props.name);
    lk_queue *q = calloc(1, sizeof *q);
    if (!q)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_queue_create: out of memory");
    q->dev = dev;
    q->native_stream = o.native_stream;
    if (iface->queue_create) {
        lk_status st = iface->queue_create(dev->state, &o, &q->state);
        if (st != LK_OK) {
            free(q);
            if (lk_last_error()[0])
                return lk_error(st, "lk_queue_create: %s: %s", dev->props.name,
                                lk_last_error());
            return lk_error(st, "lk_queue_create: device %s failed (%s)", dev->props.name,
                            lk_status_string(st));
        }
    }
    lk_error_clear();
    *out = q;
    return LK_OK;
}

static lk_status lk_queue_destroy_unguarded(lk_queue *q)
{
    lk_error_clear();
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_destroy: q is NULL");
    lk_status gst = lk_capture_queue_release(q);
    if (gst != LK_OK)
        return gst;
    if (q->dev->iface->queue_create)
        q->dev->iface->queue_destroy(q->state);
    free(q);
    lk_error_clear();
    return LK_OK;
}

static lk_status lk_queue_sync_unguarded(lk_queue *q)
{
    lk_error_clear();
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_sync: q is NULL");
    if (q->cap)
        return lk_error(LK_ERR_UNSUPPORTED,
                        "lk_queue_sync: the queue is capturing a graph (lk_queue_capture_end "
                        "first; the capture goes on)");
    const lk_device_iface *iface = q->dev->iface;
    if (!iface->queue_create || !iface->queue_sync)
        return lk_capture_take_pending(q);
    lk_status st = iface->queue_sync(q->state);
    if (st == LK_OK) {
        lk_error_clear();
        return lk_capture_take_pending(q);
    }
    q->pending = LK_OK; /* the device's own error comes first */
    if (lk_last_error()[0])
        return lk_error(st, "lk_queue_sync: %s: %s", q->dev->props.name, lk_last_error());
    return lk_error(st, "lk_queue_sync: device %s failed (%s)", q->dev->props.name,
                    lk_status_string(st));
}

LK_API lk_device *lk_queue_device(const lk_queue *q)
{
    lk_error_clear();
    return q ? q->dev : NULL;
}

/* The public entry points: the body inside the FP guard (numerics.md
 * section 2), so that neither a driver's runtime nor our own arithmetic
 * sees the caller's FTZ/DAZ or leaves status flags in the caller's
 * register. */

LK_API lk_status lk_queue_create(lk_device *dev, const lk_queue_opts *opts, lk_queue **out)
{
    LK_FP_GUARDED_RETURN(lk_queue_create_unguarded(dev, opts, out));
}

LK_API lk_status lk_queue_destroy(lk_queue *q)
{
    LK_FP_GUARDED_RETURN(lk_queue_destroy_unguarded(q));
}

LK_API lk_status lk_queue_sync(lk_queue *q)
{
    LK_FP_GUARDED_RETURN(lk_queue_sync_unguarded(q));
}
