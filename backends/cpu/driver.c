/* Lockstep CPU driver: the built-in "cpu" driver; devices, queues and the
 * kernel tables.
 *
 * Devices: "cpu" (the best variant this machine runs natively, or the one
 * LOCKSTEP_CPU_ISA names), one device per native variant ("cpu:avx2",
 * "cpu:avx-vnni", "cpu:avx512-vnni") so that they can be compared, and with
 * --enable-emulated-isa every x86 variant compiled against SIMDe
 * ("cpu:avx2@simde", ...; emulated, never chosen by "auto").
 *
 * The variant of "cpu" is chosen once, at init, from CPUID+XGETBV
 * (isa.c), or from LOCKSTEP_CPU_ISA; the other devices expose every
 * variant this machine can run, native and emulated, under their own
 * names.  Tensors are host memory: the core allocates and copies. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/isa.h"
#include "backends/cpu/threads.h"
#include "backends/cpu/variants.h"
#include "backends/host.h"
#include "core/builtin.h"

#define LK_CPU_MAX_DEVICES (1 + 2 * LK_CPU_ISA_COUNT_)

typedef struct lk_cpu_device {
    lk_device_iface iface; /* the common functions and this variant's kernels */
    lk_cpu_isa isa;
    int emulated;
    int priority;
    char name[64];
} lk_cpu_device;

typedef struct lk_cpu_state {
    const lk_host *host;
    int ndevs;
    lk_cpu_device devs[LK_CPU_MAX_DEVICES];
} lk_cpu_state;

static void lk_cpu_props(void *dev, lk_device_props *p)
{
    const lk_cpu_device *d = (const lk_cpu_device *)dev;
    const char *brand = lk_cpu_brand();
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", d->name);
    if (d->emulated)
        snprintf(p->description, sizeof p->description,
                 "%s kernels emulated through SIMDe (exact, slow)", lk_cpu_isa_name(d->isa));
    else
        snprintf(p->description, sizeof p->description, "%s, %s kernels",
                 brand[0] ? brand : "CPU",
                 d->isa == LK_CPU_ISA_REF ? "threaded reference" : lk_cpu_isa_name(d->isa));
    snprintf(p->driver, sizeof p->driver, "cpu");
    p->kind = LK_DEVICE_CPU;
    p->host_memory = 1;
    p->emulated = d->emulated;
    p->numa_node = -1;
    p->priority = d->priority;
    p->max_threads = lk_cpu_threads_default();
}

static lk_status lk_cpu_queue_create(void *dev, const lk_queue_opts *opts, void **queue)
{
    int nt;
    lk_status st = lk_cpu_threads_resolve(opts, &nt);
    if (st != LK_OK)
        return st;
    lk_cpu_queue *q = calloc(1, sizeof *q);
    if (q == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    q->dev = (const lk_cpu_device *)dev;
    q->nthreads = nt;
    *queue = q;
    return LK_OK;
}

static void lk_cpu_queue_destroy(void *queue)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    free(q->scratch);
    free(q);
}

/* Ops run to completion inside each call. */
static lk_status lk_cpu_queue_sync(void *queue)
{
    (void)queue;
    return LK_OK;
}

/* lk_bitnet_decode: the host's composition on this variant's own kernels
 * (host memory: the cache rows are computed there), each on the queue's
 * threads. */
static lk_status lk_cpu_bitnet_decode(void *queue, const lk_bitnet_args *a)
{
    return lk_backend_host()->bitnet_compose(&((lk_cpu_queue *)queue)->dev->iface.kernels, queue, a, 0);
}

static void lk_cpu_add(lk_cpu_state *s, const char *name, lk_cpu_isa isa, int emulated,
                       int priority)
{
    lk_cpu_device *d = &s->devs[s->ndevs++];
    memset(d, 0, sizeof *d);
    d->iface.struct_size = sizeof(lk_device_iface);
    d->iface.props = lk_cpu_props;
    d->iface.queue_create = lk_cpu_queue_create;
    d->iface.queue_destroy = lk_cpu_queue_destroy;
    d->iface.queue_sync = lk_cpu_queue_sync;
    lk_cpu_variant_kernels(isa, emulated, &d->iface.kernels);
    lk_cpu_variant_paged(isa, emulated, &d->iface);
    d->iface.kernels.bitnet_decode = lk_cpu_bitnet_decode;
    d->isa = isa;
    d->emulated = emulated;
    d->priority = priority;
    snprintf(d->name, sizeof d->name, "%s", name);
}

static int lk_cpu_runs(lk_cpu_isa isa, int emulated)
{
    return lk_cpu_variant_built(isa, emulated) &&
           (emulated || (lk_cpu_isa_supported() >> isa) & 1u);
}

/* "avx2", "avx2@simde", ... for the variants this build and CPU run. */
static void lk_cpu_list(char *buf, size_t n)
{
    buf[0] = '\0';
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < LK_CPU_ISA_COUNT_; i++)
            if (lk_cpu_runs((lk_cpu_isa)i, e) && !(e && i == LK_CPU_ISA_REF)) {
                size_t used = strlen(buf);
                snprintf(buf + used, n - used, "%s%s%s", used ? ", " : "",
                         lk_cpu_isa_name((lk_cpu_isa)i), e ? "@simde" : "");
            }
}

/* LOCKSTEP_CPU_ISA, or the best native variant. */
static lk_status lk_cpu_choose(const lk_host *host, lk_cpu_isa *isa, int *emulated)
{
    const char *force = getenv("LOCKSTEP_CPU_ISA");
    char list[160];
    *emulated = 0;
    if (force == NULL || *force == '\0') {
        *isa = LK_CPU_ISA_REF;
        for (int i = LK_CPU_ISA_COUNT_ - 1; i > LK_CPU_ISA_REF; i--)
            if (lk_cpu_runs((lk_cpu_isa)i, 0)) {
                *isa = (lk_cpu_isa)i;
                break;
            }
        return LK_OK;
    }
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < LK_CPU_ISA_COUNT_; i++) {
            char name[32];
            snprintf(name, sizeof name, "%s%s", lk_cpu_isa_name((lk_cpu_isa)i),
                     e ? "@simde" : "");
            if (strcmp(force, name) != 0)
                continue;
            if (!lk_cpu_variant_built((lk_cpu_isa)i, e)) {
                lk_cpu_list(list, sizeof list);
                host->set_error("LOCKSTEP_CPU_ISA=%s: this build has no %s kernels (it runs: %s)",
                                force, name, list);
                return LK_ERR_NO_DEVICE;
            }
            if (!lk_cpu_runs((lk_cpu_isa)i, e)) {
                lk_cpu_list(list, sizeof list);
                host->set_error("LOCKSTEP_CPU_ISA=%s: this CPU (or its OS) lacks %s (it runs: %s)",
                                force, name, list);
                return LK_ERR_NO_DEVICE;
            }
            *isa = (lk_cpu_isa)i;
            *emulated = e;
            return LK_OK;
        }
    lk_cpu_list(list, sizeof list);
    host->set_error("LOCKSTEP_CPU_ISA=%s: unknown variant (expected one of: %s)", force,
                    list);
    return LK_ERR_NO_DEVICE;
}

static lk_status lk_cpu_init(const lk_host *host, void **drv)
{
    lk_cpu_isa best;
    int best_emulated;
    lk_backend_host_set(host); /* the kernels' error messages, the core count */
    lk_status st = lk_cpu_choose(host, &best, &best_emulated);
    if (st != LK_OK)
        return st;
    lk_cpu_state *s = calloc(1, sizeof *s);
    if (s == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    s->host = host;
    lk_cpu_add(s, "cpu", best, best_emulated, 100);
    host->debug("cpu: variant %s%s", lk_cpu_isa_name(best), best_emulated ? "@simde" : "");
    for (int i = LK_CPU_ISA_REF + 1; i < LK_CPU_ISA_COUNT_; i++) {
        char name[64];
        if (lk_cpu_runs((lk_cpu_isa)i, 0)) {
            snprintf(name, sizeof name, "cpu:%s", lk_cpu_isa_name((lk_cpu_isa)i));
            lk_cpu_add(s, name, (lk_cpu_isa)i, 0, 10 * i);
        }
    }
    for (int i = LK_CPU_ISA_REF + 1; i < LK_CPU_ISA_COUNT_; i++) {
        char name[64];
        if (lk_cpu_runs((lk_cpu_isa)i, 1)) {
            snprintf(name, sizeof name, "cpu:%s@simde", lk_cpu_isa_name((lk_cpu_isa)i));
            lk_cpu_add(s, name, (lk_cpu_isa)i, 1, 0);
        }
    }
    *drv = s;
    return LK_OK;
}

static void lk_cpu_fini(void *drv) { free(drv); }

static int lk_cpu_device_count(void *drv) { return ((lk_cpu_state *)drv)->ndevs; }

static lk_status lk_cpu_device_open(void *drv, int index, const lk_device_iface **iface,
                                    void **dev)
{
    lk_cpu_state *s = (lk_cpu_state *)drv;
    if (index < 0 || index >= s->ndevs)
        return LK_ERR_NO_DEVICE;
    *iface = &s->devs[index].iface;
    *dev = &s->devs[index];
    return LK_OK;
}

static const lk_driver lk_cpu_drv = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "cpu",
    .description = "CPU kernels (AVX2, AVX-VNNI, AVX-512 VNNI; NEON, NEON dotprod), POSIX threads",
    .init = lk_cpu_init,
    .fini = lk_cpu_fini,
    .device_count = lk_cpu_device_count,
    .device_open = lk_cpu_device_open,
    .device_close = NULL,
};

const lk_driver *lk_cpu_driver_entry(void) { return &lk_cpu_drv; }
