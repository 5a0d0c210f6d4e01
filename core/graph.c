/* Lockstep core: graph capture and replay (include/lockstep/graph.h).
 *
 * Native graphs belong to the driver (the lk_device_iface capture slots);
 * for every other device the core keeps the validated args of each call
 * and replays them through the same kernel slots, so a launch gives the
 * bits of the eager calls on every device. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/capture.h"
#include "core/core.h"
#include "core/error.h"
#include "numerics/fpenv.h"

#define LK_KSLOT_MEMBER_(slot, type) type slot;

struct lk_rec {
    lk_kslot slot;
    const char *fn; /* the op's name, for messages */
    void *owned;    /* host memory the args point to (lk_bitnet_args' layers: the
                       caller's are gone when the graph runs), freed with the record */
    union {
        LK_KSLOTS(LK_KSLOT_MEMBER_)
        struct {
            void *dst;
            const void *src;
            size_t bytes;
            lk_copy_kind kind;
        } copy;
    } u;
};

struct lk_graph {
    lk_device *dev;
    lk_queue *origin;  /* the capturing queue (its scratch memory on GPUs) */
    void *native;      /* the driver's graph, or NULL: recs */
    lk_rec *recs;
    size_t n;
    int64_t nops;
};

static void lk_recs_free(lk_rec *recs, size_t n)
{
    for (size_t i = 0; recs && i < n; i++)
        free(recs[i].owned);
    free(recs);
}

static void lk_capture_free(lk_capture *c)
{
    if (!c)
        return;
    lk_recs_free(c->recs, c->n);
    free(c);
}

static lk_rec *lk_capture_push(lk_queue *q, const char *fn)
{
    lk_capture *c = q->cap;
    if (c->n == c->size) {
        size_t size = c->size ? 2 * c->size : 64;
        lk_rec *r = realloc(c->recs, size * sizeof *r);
        if (!r) {
            lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of host memory to record the call (the "
                     "capture goes on without it)", fn);
            return NULL;
        }
        c->recs = r;
        c->size = size;
    }
    lk_rec *r = &c->recs[c->n];
    memset(r, 0, sizeof *r);
    r->fn = fn;
    return r;
}

lk_status lk_capture_record_owned(lk_queue *q, const char *fn, lk_kslot slot, const void *args,
                                  size_t size, void *owned)
{
    /* Refused on every device alike: the check of the values has to
     * return before anything is written, which a graph cannot do. */
    if (slot == LK_KSLOT_ternary_pack) {
        free(owned);
        return lk_error(LK_ERR_UNSUPPORTED,
                        "%s: cannot be captured in a graph (it reads the values back to "
                        "refuse a bad one before writing); the capture goes on without it",
                        fn);
    }
    lk_rec *r = lk_capture_push(q, fn);
    if (!r) {
        free(owned);
        return LK_ERR_OUT_OF_MEMORY;
    }
    if (size > sizeof r->u) {
        free(owned);
        return lk_error(LK_ERR_INTERNAL, "%s: args of %zu bytes do not fit a record", fn, size);
    }
    r->slot = slot;
    r->owned = owned;
    memcpy(&r->u, args, size);
    q->cap->n++;
    q->cap->nops++;
    lk_error_clear();
    return LK_OK;
}

lk_status lk_capture_record(lk_queue *q, const char *fn, lk_kslot slot, const void *args,
                            size_t size)
{
    return lk_capture_record_owned(q, fn, slot, args, size, NULL);
}

lk_status lk_capture_memcpy(lk_queue *q, void *dst, const void *src, size_t bytes,
                            lk_copy_kind kind)
{
    lk_rec *r = lk_capture_push(q, "lk_memcpy");
    if (!r)
        return LK_ERR_OUT_OF_MEMORY;
    r->slot = LK_KSLOT_MEMCPY_;
    r->u.copy.dst = dst;
    r->u.copy.src = src;
    r->u.copy.bytes = bytes;
    r->u.copy.kind = kind;
    q->cap->n++;
    q->cap->nops++;
    lk_error_clear();
    return LK_OK;
}

void lk_capture_count(lk_queue *q)
{
    if (q->cap)
        q->cap->nops++;
}

int lk_capture_on_device(const lk_queue *q)
{
    if (q->cap && q->cap->native)
        return 1;
    const lk_device_iface *f = q->dev->iface;
    return f->queue_create && f->queue_capturing && f->queue_capturing(q->state);
}

/* A message for a driver failure that may have left none. */
static lk_status lk_driver_fail(const char *fn, const lk_device *dev, lk_status st)
{
    if (lk_last_error()[0])
        return lk_error(st, "%s: %s: %s", fn, dev->props.name, lk_last_error());
    return lk_error(st, "%s: device %s failed (%s)", fn, dev->props.name,
                    lk_status_string(st));
}

static lk_status lk_capture_begin_unguarded(lk_queue *q)
{
    lk_error_clear();
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_capture_begin: q is NULL");
    if (q->cap)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_capture_begin: the queue is already capturing (captures do "
                        "not nest; the capture in progress goes on)");
    const lk_device_iface *f = q->dev->iface;
    if (lk_capture_on_device(q))
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_capture_begin: the queue's stream is already being captured "
                        "by the caller");
    lk_capture *c = calloc(1, sizeof *c);
    if (!c)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_queue_capture_begin: out of host memory");
    if (f->queue_create && f->capture_begin) {
        lk_status st = f->capture_begin(q->state);
        if (st != LK_OK) {
            free(c);
            return lk_driver_fail("lk_queue_capture_begin", q->dev, st);
        }
        c->native = 1;
    }
    q->cap = c;
    lk_error_clear();
    return LK_OK;
}

/* Ends the driver's side of q's capture (q->cap stays for the caller to
 * free); *native: the driver's graph when it has one. */
static lk_status lk_capture_finish(lk_queue *q, void **native)
{
    lk_status st = LK_OK;
    *native = NULL;
    if (q->cap->native) {
        st = q->dev->iface->capture_end(q->state, native);
        if (st == LK_OK && !*native)
            st = LK_ERR_DRIVER;
        if (st != LK_OK)
            *native = NULL;
    }
    return st;
}

static lk_status lk_capture_end_unguarded(lk_queue *q, lk_graph **out)
{
    lk_error_clear();
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_queue_capture_end: q is NULL");
    if (!q->cap)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_capture_end: the queue is not capturing "
                        "(lk_queue_capture_begin first)");
    void *native = NULL;
    lk_status st = lk_capture_finish(q, &native);
    lk_capture *c = q->cap;
    q->cap = NULL;
    if (st != LK_OK) {
        lk_capture_free(c);
        lk_status r = lk_driver_fail("lk_queue_capture_end", q->dev, st);
        char msg[400];
        snprintf(msg, sizeof msg, "%s", lk_last_error());
        return lk_error(r, "%s (the capture is discarded)", msg);
    }
    lk_graph *g = out ? calloc(1, sizeof *g) : NULL;
    if (!g) {
        if (native)
            q->dev->iface->graph_destroy(q->dev->state, native);
        lk_capture_free(c);
        if (!out)
            return lk_error(LK_ERR_NULL_POINTER,
                            "lk_queue_capture_end: g is NULL (the capture is discarded)");
        return lk_error(LK_ERR_OUT_OF_MEMORY,
                        "lk_queue_capture_end: out of host memory (the capture is discarded)");
    }
    g->dev = q->dev;
    g->origin = q;
    g->native = native;
    g->recs = c->recs;
    g->n = c->n;
    g->nops = c->nops;
    c->recs = NULL;
    lk_capture_free(c);
    q->ngraphs++;
    *out = g;
    lk_error_clear();
    return LK_OK;
}

/* A replayed embedding with a bad id writes nothing and is reported by
 * the next lk_queue_sync, as on devices that check the ids inside the
 * graph; the first such error is kept. */
static void lk_set_pending(lk_queue *q, lk_status st)
{
    if (q->pending != LK_OK)
        return;
    q->pending = st;
    snprintf(q->pending_msg, sizeof q->pending_msg, "%s", lk_last_error());
}

lk_status lk_capture_take_pending(lk_queue *q)
{
    lk_status st = q->pending;
    if (st == LK_OK)
        return LK_OK;
    q->pending = LK_OK;
    return lk_error(st, "lk_queue_sync: %s", q->pending_msg);
}

#define LK_KSLOT_CALL_(slot, type)                                                      \
    case LK_KSLOT_##slot:                                                               \
        return k->slot(q->state, &r->u.slot);

static lk_status lk_replay_one(lk_queue *q, const lk_rec *r)
{
    const lk_kernels *k = &q->dev->iface->kernels;
    switch (r->slot) {
        LK_KSLOTS(LK_KSLOT_CALL_)
    case LK_KSLOT_MEMCPY_:
        if (!q->dev->iface->memcpy) {
            memcpy(r->u.copy.dst, r->u.copy.src, r->u.copy.bytes);
            return LK_OK;
        }
        return q->dev->iface->memcpy(q->state, r->u.copy.dst, r->u.copy.src, r->u.copy.bytes,
                                     r->u.copy.kind);
    case LK_KSLOT_COUNT_:
        break;
    }
    return lk_error(LK_ERR_INTERNAL, "%s: unknown record", r->fn);
}

static lk_status lk_replay(lk_graph *g, lk_queue *q)
{
    for (size_t i = 0; i < g->n; i++) {
        const lk_rec *r = &g->recs[i];
        lk_status st;
        if (r->slot == LK_KSLOT_embedding) {
            st = lk_embedding_ids_check("lk_embedding (in a graph)", q, &r->u.embedding.ids,
                                        r->u.embedding.table.rows);
            if (st == LK_ERR_RANGE) {
                lk_set_pending(q, st);
                continue;
            }
            if (st != LK_OK)
                return st;
        }
        if (r->slot == LK_KSLOT_set_rows) {
            st = lk_index_check("lk_set_rows (in a graph)", "idx", q, &r->u.set_rows.idx,
                                r->u.set_rows.dst.rows);
            if (st == LK_ERR_RANGE) {
                lk_set_pending(q, st);
                continue;
            }
            if (st != LK_OK)
                return st;
        }
        if (r->slot == LK_KSLOT_bitnet_decode && r->u.bitnet_decode.n_layers > 0) {
            st = lk_index_check("lk_bitnet_decode (in a graph)", "pos", q,
                                &r->u.bitnet_decode.pos, r->u.bitnet_decode.ctx);
            if (st == LK_ERR_RANGE) {
                lk_set_pending(q, st);
                continue;
            }
            if (st != LK_OK)
                return st;
        }
        lk_error_clear();
        st = lk_replay_one(q, r);
        if (st != LK_OK) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s", lk_last_error()[0] ? lk_last_error()
                                                                : lk_status_string(st));
            return lk_error(st, "lk_graph_launch: call %zu of %zu, %s on %s: %s (the calls "
                            "before it have run, the ones after it have not)",
                            i + 1, g->n, r->fn, q->dev->props.name, msg);
        }
    }
    return LK_OK;
}

static lk_status lk_graph_launch_unguarded(lk_graph *g, lk_queue *q)
{
    lk_error_clear();
    if (!g)
        return lk_error(LK_ERR_NULL_POINTER, "lk_graph_launch: g is NULL");
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_graph_launch: q is NULL");
    if (q->dev != g->dev)
        return lk_error(LK_ERR_WRONG_DEVICE,
                        "lk_graph_launch: the graph was captured on device %s, the queue runs "
                        "on %s", g->dev->props.name, q->dev->props.name);
    if (q->cap)
        return lk_error(LK_ERR_UNSUPPORTED,
                        "lk_graph_launch: the queue is capturing (a graph cannot be captured "
                        "into another; the capture goes on)");
    if (g->native) {
        lk_status st = q->dev->iface->graph_launch(q->state, g->native);
        if (st != LK_OK)
            return lk_driver_fail("lk_graph_launch", q->dev, st);
        lk_error_clear();
        return LK_OK;
    }
    lk_status st = lk_replay(g, q);
    if (st == LK_OK)
        lk_error_clear();
    return st;
}

lk_status lk_capture_queue_release(lk_queue *q)
{
    if (q->ngraphs > 0)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_queue_destroy: %d graph%s captured on this queue still exist%s "
                        "(they use its memory): lk_graph_destroy them first",
                        q->ngraphs, q->ngraphs == 1 ? "" : "s", q->ngraphs == 1 ? "s" : "");
    if (q->cap) {
        void *native = NULL;
        if (lk_capture_finish(q, &native) == LK_OK && native)
            q->dev->iface->graph_destroy(q->dev->state, native);
        lk_capture_free(q->cap);
        q->cap = NULL;
    }
    return LK_OK;
}

/* The public entry points, inside the FP guard (numerics.md section 2). */

LK_API lk_status lk_queue_capture_begin(lk_queue *q)
{
    LK_FP_GUARDED_RETURN(lk_capture_begin_unguarded(q));
}

LK_API lk_status lk_queue_capture_end(lk_queue *q, lk_graph **g)
{
    LK_FP_GUARDED_RETURN(lk_capture_end_unguarded(q, g));
}

LK_API int lk_queue_capturing(const lk_queue *q)
{
    lk_error_clear();
    return q && q->cap ? 1 : 0;
}

LK_API lk_status lk_graph_launch(lk_graph *g, lk_queue *q)
{
    LK_FP_GUARDED_RETURN(lk_graph_launch_unguarded(g, q));
}

LK_API lk_status lk_graph_info(const lk_graph *g, int *native, int64_t *ops)
{
    lk_error_clear();
    if (!g)
        return lk_error(LK_ERR_NULL_POINTER, "lk_graph_info: g is NULL");
    if (native)
        *native = g->native != NULL;
    if (ops)
        *ops = g->nops;
    return LK_OK;
}

LK_API void lk_graph_destroy(lk_graph *g)
{
    if (!g)
        return;
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    if (g->native)
        g->dev->iface->graph_destroy(g->dev->state, g->native);
    g->origin->ngraphs--;
    lk_recs_free(g->recs, g->n);
    free(g);
    lk_fpenv_leave(&fe);
}
