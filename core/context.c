/* Lockstep core: contexts, and what they report for `lockstep info`. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/error.h"
#include "core/topology.h"
#include "numerics/fpenv.h"

static lk_status lk_context_create_unguarded(lk_context **out)
{
    lk_error_clear();
    if (!out)
        return lk_error(LK_ERR_NULL_POINTER, "lk_context_create: ctx is NULL");
    lk_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_context_create: out of memory");
    lk_topo_get();
    lk_status st = lk_registry_builtins(ctx);
    if (st == LK_OK)
        st = lk_loader_modules(ctx);
    if (st != LK_OK) {
        lk_registry_unload(ctx);
        free(ctx);
        return lk_error(st, "lk_context_create: out of memory while loading drivers");
    }
    if (ctx->ndevs == 0) { /* "ref" is built in: only a broken build gets here */
        lk_registry_unload(ctx);
        free(ctx);
        return lk_error(LK_ERR_NO_DEVICE, "lk_context_create: no device at all");
    }
    /* drivers' reasons live in the slots now, not in this thread's message */
    lk_error_clear();
    *out = ctx;
    return LK_OK;
}

static void lk_context_destroy_unguarded(lk_context *ctx)
{
    lk_error_clear();
    if (!ctx)
        return;
    lk_registry_unload(ctx);
    free(ctx);
}

LK_API int lk_context_driver_count(const lk_context *ctx)
{
    lk_error_clear();
    return ctx ? ctx->nslots : 0;
}

LK_API lk_status lk_context_driver_info(const lk_context *ctx, int index, lk_driver_info *info)
{
    lk_error_clear();
    if (!ctx)
        return lk_error(LK_ERR_NULL_POINTER, "lk_context_driver_info: ctx is NULL");
    if (!info)
        return lk_error(LK_ERR_NULL_POINTER, "lk_context_driver_info: info is NULL");
    if (index < 0 || index >= ctx->nslots)
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "lk_context_driver_info: index (%d) out of range [0, %d)", index,
                        ctx->nslots);
    *info = ctx->slots[index]->info;
    return LK_OK;
}

LK_API lk_status lk_context_topology(const lk_context *ctx, lk_topology_info *info)
{
    lk_error_clear();
    if (!ctx)
        return lk_error(LK_ERR_NULL_POINTER, "lk_context_topology: ctx is NULL");
    if (!info)
        return lk_error(LK_ERR_NULL_POINTER, "lk_context_topology: info is NULL");
    const lk_topo *t = lk_topo_get();
    lk_topology_info r;
    memset(&r, 0, sizeof r);
    r.hwloc = t->hwloc;
    r.cores = t->cores;
    r.pus = t->pus;
    r.numa_nodes = t->numa_nodes;
    r.thread_numa_node = lk_topo_thread_numa_node();
    r.l1d_bytes = t->l1d;
    r.l2_bytes = t->l2;
    r.l3_bytes = t->l3;
    memcpy(r.source, t->source, sizeof r.source);
    *info = r;
    return LK_OK;
}

/* The public entry points: the body inside the FP guard (numerics.md
 * section 2), so that neither a driver's runtime nor our own arithmetic
 * sees the caller's FTZ/DAZ or leaves status flags in the caller's
 * register. */

LK_API lk_status lk_context_create(lk_context **out)
{
    LK_FP_GUARDED_RETURN(lk_context_create_unguarded(out));
}

LK_API void lk_context_destroy(lk_context *ctx)
{
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    lk_context_destroy_unguarded(ctx);
    lk_fpenv_leave(&fe);
}
