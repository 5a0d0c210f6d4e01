/* Lockstep core: finding devices by name, and the choice behind "auto". */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "core/error.h"
#include "core/topology.h"

#define LK_REASON_BYTES 256

lk_device *lk_find_exact(lk_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->ndevs; i++)
        if (strcmp(ctx->devs[i]->props.name, name) == 0)
            return ctx->devs[i];
    return NULL;
}

/* The best CPU variant: highest priority, native before emulated (an
 * emulated ISA is exact but slow), the first one on ties. */
static lk_device *lk_best_cpu(lk_context *ctx, int allow_emulated)
{
    lk_device *best = NULL;
    for (int i = 0; i < ctx->ndevs; i++) {
        lk_device *d = ctx->devs[i];
        if (d->props.kind != LK_DEVICE_CPU || (d->props.emulated && !allow_emulated))
            continue;
        if (!best || d->props.priority > best->props.priority)
            best = d;
    }
    return best;
}

static lk_device *lk_first_of(lk_context *ctx, lk_device_kind kind, const char *driver)
{
    for (int i = 0; i < ctx->ndevs; i++) {
        lk_device *d = ctx->devs[i];
        if (d->props.kind == kind && (!driver || strcmp(d->props.driver, driver) == 0))
            return d;
    }
    return NULL;
}

/* Exact names first, then the aliases "cpu" and "cuda". */
static lk_device *lk_lookup(lk_context *ctx, const char *name)
{
    lk_device *d = lk_find_exact(ctx, name);
    if (d)
        return d;
    if (strcmp(name, "cpu") == 0) {
        d = lk_best_cpu(ctx, 0);
        return d ? d : lk_best_cpu(ctx, 1);
    }
    if (strcmp(name, "cuda") == 0)
        return lk_first_of(ctx, LK_DEVICE_GPU, "cuda");
    return NULL;
}

/* "auto, ref, cpu, cpu:avx2, ..." for messages; truncated to fit. */
static void lk_available(lk_context *ctx, char *buf, size_t n)
{
    size_t used = 0;
    const char *alias[3] = {"auto", NULL, NULL};
    if (lk_lookup(ctx, "cpu") && !lk_find_exact(ctx, "cpu"))
        alias[1] = "cpu";
    if (lk_lookup(ctx, "cuda") && !lk_find_exact(ctx, "cuda"))
        alias[2] = "cuda";
    buf[0] = '\0';
    for (int i = -3; i < ctx->ndevs; i++) {
        const char *s = i < 0 ? alias[i + 3] : ctx->devs[i]->props.name;
        if (!s)
            continue;
        int k = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", s);
        if (k < 0 || (size_t)k >= n - used) {
            buf[used] = '\0';
            return;
        }
        used += (size_t)k;
    }
}

lk_status lk_device_select_auto(lk_context *ctx, lk_device **dev, char *why, size_t whylen)
{
    char avail[320];
    const char *env = getenv("LOCKSTEP_DEVICE");
    if (env && env[0] && strcmp(env, "auto") != 0) {
        lk_device *d = lk_lookup(ctx, env);
        if (!d) {
            lk_available(ctx, avail, sizeof avail);
            snprintf(why, whylen, "LOCKSTEP_DEVICE=\"%s\" names no device (available: %s)",
                     env, avail);
            return LK_ERR_NO_DEVICE;
        }
        *dev = d;
        snprintf(why, whylen, "%s: chosen by LOCKSTEP_DEVICE=%s", d->props.name, env);
        return LK_OK;
    }
    int node = lk_topo_thread_numa_node();
    lk_device *first_gpu = NULL;
    for (int i = 0; i < ctx->ndevs; i++) {
        lk_device *d = ctx->devs[i];
        if (d->props.kind != LK_DEVICE_GPU)
            continue;
        if (node >= 0 && d->props.numa_node == node) {
            *dev = d;
            snprintf(why, whylen, "%s: a GPU on this thread's NUMA node (%d)", d->props.name,
                     node);
            return LK_OK;
        }
        if (!first_gpu)
            first_gpu = d;
    }
    if (first_gpu) {
        *dev = first_gpu;
        if (node >= 0)
            snprintf(why, whylen, "%s: the first GPU (none is on this thread's NUMA node %d)",
                     first_gpu->props.name, node);
        else
            snprintf(why, whylen, "%s: the first GPU (this thread's NUMA node is unknown)",
                     first_gpu->props.name);
        return LK_OK;
    }
    lk_device *cpu = lk_best_cpu(ctx, 0);
    if (cpu) {
        *dev = cpu;
        snprintf(why, whylen, "%s: no GPU; the native CPU variant of highest priority (%d)",
                 cpu->props.name, cpu->props.priority);
        return LK_OK;
    }
    lk_device *ref = lk_find_exact(ctx, "ref");
    if (ref) {
        *dev = ref;
        snprintf(why, whylen, "ref: no GPU and no native CPU variant");
        return LK_OK;
    }
    snprintf(why, whylen, "no GPU, no native CPU variant and no \"ref\"");
    return LK_ERR_NO_DEVICE;
}

LK_API int lk_device_count(const lk_context *ctx)
{
    lk_error_clear();
    return ctx ? ctx->ndevs : 0;
}

LK_API lk_status lk_device_get(lk_context *ctx, int index, lk_device **dev)
{
    lk_error_clear();
    if (!ctx)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_get: ctx is NULL");
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_get: dev is NULL");
    if (index < 0 || index >= ctx->ndevs)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_device_get: index (%d) out of range [0, %d)",
                        index, ctx->ndevs);
    *dev = ctx->devs[index];
    return LK_OK;
}

LK_API lk_status lk_device_find(lk_context *ctx, const char *name, lk_device **dev)
{
    lk_error_clear();
    if (!ctx)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_find: ctx is NULL");
    if (!name)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_find: name is NULL");
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_find: dev is NULL");
    lk_device *d = NULL;
    if (strcmp(name, "auto") == 0) {
        char why[LK_REASON_BYTES];
        lk_status st = lk_device_select_auto(ctx, &d, why, sizeof why);
        if (st != LK_OK)
            return lk_error(st, "lk_device_find: name: \"auto\": %s", why);
    } else {
        d = lk_lookup(ctx, name);
        if (!d) {
            char avail[320];
            lk_available(ctx, avail, sizeof avail);
            return lk_error(LK_ERR_NO_DEVICE,
                            "lk_device_find: name: no device \"%.64s\" (available: %s)", name,
                            avail);
        }
    }
    *dev = d;
    return LK_OK;
}

LK_API lk_status lk_device_props_get(const lk_device *dev, lk_device_props *props)
{
    lk_error_clear();
    if (!dev)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_props_get: dev is NULL");
    if (!props)
        return lk_error(LK_ERR_NULL_POINTER, "lk_device_props_get: props is NULL");
    *props = dev->props;
    return LK_OK;
}

LK_API const char *lk_device_name(const lk_device *dev)
{
    lk_error_clear();
    return dev ? dev->props.name : "";
}

/* Per thread: the answer depends on the calling thread's NUMA node, and a
 * caller on another thread must not see it rewritten under its feet. */
static _Thread_local char lk_auto_reason[LK_REASON_BYTES];

LK_API const char *lk_context_auto_reason(lk_context *ctx)
{
    lk_error_clear();
    if (!ctx)
        return "";
    lk_device *d = NULL;
    lk_device_select_auto(ctx, &d, lk_auto_reason, sizeof lk_auto_reason);
    return lk_auto_reason;
}
