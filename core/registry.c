/* Lockstep core: the driver registry.
 *
 * Built-in drivers come from a static table; modules come from loader.c.
 * Either way a driver goes through lk_registry_add, which checks its ABI
 * and name, runs init, opens its devices and records the outcome in a
 * slot that `lockstep info` lists, loaded or not. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/builtin.h"
#include "core/core.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/topology.h"

typedef const lk_driver *(*lk_builtin_fn)(void);

static const lk_builtin_fn lk_builtins[] = {
    lk_ref_driver_entry,
#ifdef LK_HAVE_CPU_DRIVER
    lk_cpu_driver_entry,
#endif
};

void lk_debug(const char *fmt, ...)
{
    const char *e = getenv("LOCKSTEP_DEBUG");
    if (!e || !*e || strcmp(e, "0") == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("lockstep: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int lk_host_num_cores(void)
{
    return lk_topo_get()->cores;
}

static const lk_host lk_host_table = {
    LK_DRIVER_ABI_VERSION,
    (uint32_t)sizeof(lk_host),
    lk_error_message,
    lk_debug,
    lk_topo_pci_numa_node,
    lk_host_num_cores,
    lk_bitnet_compose,
};

const lk_host *lk_host_services(void)
{
    return &lk_host_table;
}

static void lk_copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* Append "; text" to a slot's message. */
static void lk_slot_note(lk_driver_slot *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void lk_slot_note(lk_driver_slot *s, const char *fmt, ...)
{
    char *m = s->info.message;
    size_t used = strlen(m), cap = sizeof s->info.message;
    if (used && used + 2 < cap) {
        memcpy(m + used, "; ", 3);
        used += 2;
    }
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m + used, cap - used, fmt, ap);
    va_end(ap);
}

static lk_driver_slot *lk_slot_new(lk_context *ctx, const char *path)
{
    lk_driver_slot **t = realloc(ctx->slots, (size_t)(ctx->nslots + 1) * sizeof *t);
    if (!t)
        return NULL;
    ctx->slots = t;
    lk_driver_slot *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->info.builtin = path == NULL;
    lk_copy_str(s->info.path, sizeof s->info.path, path);
    ctx->slots[ctx->nslots++] = s;
    return s;
}

lk_status lk_registry_refuse(lk_context *ctx, const char *path, const char *name,
                             lk_status why, const char *fmt, ...)
{
    lk_driver_slot *s = lk_slot_new(ctx, path);
    if (!s)
        return LK_ERR_OUT_OF_MEMORY;
    lk_copy_str(s->info.name, sizeof s->info.name, name);
    s->info.status = why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->info.message, sizeof s->info.message, fmt, ap);
    va_end(ap);
    lk_debug("%s: %s", path ? path : (name ? name : "?"), s->info.message);
    return LK_OK;
}

lk_driver_slot *lk_registry_find_driver(lk_context *ctx, const char *name)
{
    for (int i = 0; i < ctx->nslots; i++) {
        lk_driver_slot *s = ctx->slots[i];
        if (s->drv && s->initialised && strcmp(s->info.name, name) == 0)
            return s;
    }
    return NULL;
}

/* Open device i of a driver; a device that breaks a rule is closed again
 * and noted in the slot's message, the others go on. */
static lk_status lk_open_device(lk_context *ctx, lk_driver_slot *s, int i)
{
    const lk_driver *drv = s->drv;
    const lk_device_iface *iface = NULL;
    void *state = NULL;
    lk_error_clear();
    lk_status st = drv->device_open(s->state, i, &iface, &state);
    if (st != LK_OK) {
        lk_slot_note(s, "device %d not opened: %s", i,
                     lk_last_error()[0] ? lk_last_error() : lk_status_string(st));
        return LK_OK;
    }
    const char *why = NULL;
    lk_device_props p;
    memset(&p, 0, sizeof p);
    /* members from attention_paged on are optional: a smaller struct_size
     * reads as NULL there (core/ops_paged.c) */
    if (!iface || iface->struct_size < offsetof(lk_device_iface, attention_paged)) {
        why = "its lk_device_iface is older than this driver ABI";
    } else if (!iface->props) {
        why = "it has no props function";
    } else {
        iface->props(state, &p);
        p.name[sizeof p.name - 1] = '\0';
        p.description[sizeof p.description - 1] = '\0';
        p.driver[sizeof p.driver - 1] = '\0';
        p.pci_bus_id[sizeof p.pci_bus_id - 1] = '\0';
        if (!p.driver[0])
            lk_copy_str(p.driver, sizeof p.driver, s->info.name);
        if (!p.name[0])
            why = "it has no name";
        else if (strcmp(p.name, "auto") == 0)
            why = "\"auto\" is not a device name";
        else if (p.kind < LK_DEVICE_REFERENCE || p.kind > LK_DEVICE_OTHER)
            why = "its kind is not an lk_device_kind";
        else if (!p.host_memory && (!iface->mem_alloc || !iface->mem_free ||
                                    !iface->memcpy || !iface->queue_create ||
                                    !iface->queue_destroy))
            why = "it has no host memory but lacks memory or queue functions";
        else if (iface->mem_alloc && !iface->mem_free)
            why = "it has mem_alloc but no mem_free";
        else if (iface->queue_create && !iface->queue_destroy)
            why = "it has queue_create but no queue_destroy";
    }
    if (!why && lk_find_exact(ctx, p.name)) {
        lk_slot_note(s, "device %s refused: the name is taken by driver %s", p.name,
                     lk_find_exact(ctx, p.name)->slot->info.name);
        why = "";
    }
    if (why) {
        if (why[0])
            lk_slot_note(s, "device %d refused: %s", i, why);
        if (drv->device_close)
            drv->device_close(s->state, state);
        return LK_OK;
    }
    lk_device **t = realloc(ctx->devs, (size_t)(ctx->ndevs + 1) * sizeof *t);
    lk_device *d = t ? calloc(1, sizeof *d) : NULL;
    if (t)
        ctx->devs = t;
    if (!d) {
        if (drv->device_close)
            drv->device_close(s->state, state);
        return LK_ERR_OUT_OF_MEMORY;
    }
    d->ctx = ctx;
    d->slot = s;
    d->iface = iface;
    d->state = state;
    d->props = p;
    ctx->devs[ctx->ndevs++] = d;
    s->info.device_count++;
    lk_debug("driver %s: device %s (%s)", s->info.name, p.name, p.description);
    return LK_OK;
}

lk_status lk_registry_add(lk_context *ctx, const lk_driver *drv, void *dl, const char *path)
{
    const char *what = path ? "driver module" : "built-in driver";
    const char *who = path ? path : (drv && drv->name ? drv->name : "?");
    lk_driver_slot *s = lk_slot_new(ctx, path);
    if (!s) {
        if (dl)
            dlclose(dl);
        return LK_ERR_OUT_OF_MEMORY;
    }
    s->info.status = LK_ERR_DRIVER;
    /* abi_version and struct_size lead every ABI's lk_driver, so they can
     * be read whatever the module was built for */
    if (!drv) {
        lk_slot_note(s, "%s %s: its entry point returned NULL", what, who);
    } else if (drv->abi_version != LK_DRIVER_ABI_VERSION) {
        s->info.status = LK_ERR_ABI_MISMATCH;
        lk_slot_note(s, "%s %s was built for driver ABI %u; this liblockstep speaks ABI %u",
                     what, who, (unsigned)drv->abi_version, (unsigned)LK_DRIVER_ABI_VERSION);
    } else if (drv->struct_size < sizeof(lk_driver)) {
        s->info.status = LK_ERR_ABI_MISMATCH;
        lk_slot_note(s, "%s %s has a %u-byte lk_driver; driver ABI %u needs %zu bytes", what,
                     who, (unsigned)drv->struct_size, (unsigned)LK_DRIVER_ABI_VERSION,
                     sizeof(lk_driver));
    } else if (!drv->name || !drv->name[0]) {
        lk_slot_note(s, "%s %s has no name", what, who);
    } else if (!drv->init || !drv->device_count || !drv->device_open) {
        lk_copy_str(s->info.name, sizeof s->info.name, drv->name);
        lk_slot_note(s, "%s %s lacks init, device_count or device_open", what, who);
    } else if (lk_registry_find_driver(ctx, drv->name)) {
        lk_driver_slot *first = lk_registry_find_driver(ctx, drv->name);
        lk_copy_str(s->info.name, sizeof s->info.name, drv->name);
        s->info.status = LK_ERR_INVALID_ARGUMENT;
        lk_slot_note(s, "driver \"%s\" is already loaded from %s; the first one wins",
                     drv->name, first->info.builtin ? "liblockstep" : first->info.path);
    } else {
        lk_copy_str(s->info.name, sizeof s->info.name, drv->name);
        s->drv = drv;
        s->dl = dl;
        lk_error_clear();
        lk_status st = drv->init(lk_host_services(), &s->state);
        if (st != LK_OK) {
            s->info.status = st;
            lk_slot_note(s, "%s", lk_last_error()[0] ? lk_last_error()
                                                     : lk_status_string(st));
            s->drv = NULL;
            s->dl = NULL;
        } else {
            s->initialised = 1;
            s->info.status = LK_OK;
            int n = drv->device_count(s->state);
            for (int i = 0; i < n; i++) {
                if (lk_open_device(ctx, s, i) != LK_OK)
                    return LK_ERR_OUT_OF_MEMORY;
            }
            if (s->info.device_count == 0) {
                s->info.status = LK_ERR_NO_DEVICE;
                lk_slot_note(s, "no usable device");
            }
        }
    }
    lk_error_clear();
    if (s->info.status != LK_OK)
        lk_debug("%s %s: %s (%s)", what, who, lk_status_string(s->info.status),
                 s->info.message);
    /* a driver that added nothing is let go at once */
    if (s->info.device_count == 0) {
        if (s->initialised && drv->fini)
            drv->fini(s->state);
        s->initialised = 0;
        s->drv = NULL;
        s->state = NULL;
        if (dl)
            dlclose(dl);
        s->dl = NULL;
    }
    return LK_OK;
}

lk_status lk_registry_builtins(lk_context *ctx)
{
    for (size_t i = 0; i < sizeof lk_builtins / sizeof lk_builtins[0]; i++) {
        const lk_driver *drv = lk_builtins[i]();
        if (!drv) /* configured in but not built: nothing to list */
            continue;
        lk_status st = lk_registry_add(ctx, drv, NULL, NULL);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}

void lk_registry_unload(lk_context *ctx)
{
    for (int i = ctx->ndevs - 1; i >= 0; i--) {
        lk_device *d = ctx->devs[i];
        lk_mem_release_device(d);
        if (d->slot->drv && d->slot->drv->device_close)
            d->slot->drv->device_close(d->slot->state, d->state);
        free(d);
    }
    free(ctx->devs);
    ctx->devs = NULL;
    ctx->ndevs = 0;
    for (int i = ctx->nslots - 1; i >= 0; i--) {
        lk_driver_slot *s = ctx->slots[i];
        if (s->initialised && s->drv->fini)
            s->drv->fini(s->state);
        if (s->dl)
            dlclose(s->dl);
        free(s);
    }
    free(ctx->slots);
    ctx->slots = NULL;
    ctx->nslots = 0;
}
