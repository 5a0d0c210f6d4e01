/* Lockstep core: the objects behind the public handles (internal). */
#ifndef LK_CORE_CORE_H
#define LK_CORE_CORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <lockstep.h>
#include <lockstep/driver.h>

/* One driver the context tried; `info` is what lk_context_driver_info
 * reports.  drv is NULL when the driver never got as far as init. */
typedef struct lk_driver_slot {
    const lk_driver *drv;
    void *state;      /* from drv->init */
    void *dl;         /* dlopen handle, NULL for built-ins */
    int initialised;  /* init succeeded: fini is owed */
    lk_driver_info info;
} lk_driver_slot;

struct lk_device {
    lk_context *ctx;
    lk_driver_slot *slot;
    const lk_device_iface *iface;
    void *state;      /* the driver's device pointer */
    lk_device_props props;
};

struct lk_queue {
    lk_device *dev;
    void *state;      /* the driver's queue; NULL for a core queue */
    void *native_stream; /* the adopted stream (lk_queue_opts), or NULL */
    /* graphs (core/graph.c, core/capture.h) */
    struct lk_capture *cap; /* non-NULL while capturing */
    int ngraphs;            /* live graphs captured on this queue */
    lk_status pending;      /* a replayed op's error, for lk_queue_sync */
    char pending_msg[320];
};

struct lk_context {
    lk_driver_slot **slots;
    int nslots;
    lk_device **devs;
    int ndevs;
};

/* registry.c */
const lk_host *lk_host_services(void);
void lk_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Try one driver: checks its ABI and name, runs init, opens its devices.
 * The slot is recorded whatever happens (for lockstep info); path is
 * NULL for a built-in driver.  Returns LK_ERR_OUT_OF_MEMORY only when the
 * context could not record anything. */
lk_status lk_registry_add(lk_context *ctx, const lk_driver *drv, void *dl,
                          const char *path);
/* Record a module that was refused before it could be tried. */
lk_status lk_registry_refuse(lk_context *ctx, const char *path, const char *name,
                             lk_status why, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
lk_status lk_registry_builtins(lk_context *ctx);
void lk_registry_unload(lk_context *ctx);
/* The loaded driver of that name, or NULL (the first one of a name wins). */
lk_driver_slot *lk_registry_find_driver(lk_context *ctx, const char *name);

/* loader.c */
lk_status lk_loader_modules(lk_context *ctx);

/* device.c */
lk_device *lk_find_exact(lk_context *ctx, const char *name);
lk_status lk_device_select_auto(lk_context *ctx, lk_device **dev, char *why, size_t whylen);

#endif
