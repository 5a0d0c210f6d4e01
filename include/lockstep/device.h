/* Lockstep: contexts, devices, queues and memory. */
#ifndef LOCKSTEP_DEVICE_H
#define LOCKSTEP_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <lockstep/export.h>
#include <lockstep/status.h>

LK_BEGIN_DECLS

typedef struct lk_context lk_context;
typedef struct lk_device lk_device;
typedef struct lk_queue lk_queue;

typedef enum lk_device_kind {
    LK_DEVICE_REFERENCE = 1, /* the portable reference ("ref") */
    LK_DEVICE_CPU = 2,       /* a CPU driver variant ("cpu", "cpu:avx2", ...) */
    LK_DEVICE_GPU = 3,       /* "cuda:0", ... */
    LK_DEVICE_OTHER = 4      /* e.g. the test-only driver */
} lk_device_kind;

typedef struct lk_device_props {
    char name[64];          /* what lk_device_find() accepts: "cpu:avx2" */
    char description[160];  /* one human line: "NVIDIA H200, sm_90, 132 SMs" */
    char driver[32];        /* driver that provides it: "ref", "cpu", "cuda" */
    lk_device_kind kind;
    int host_memory;        /* 1: tensors are ordinary host memory */
    int emulated;           /* 1: an ISA emulated through SIMDe (slow, exact) */
    int numa_node;          /* hwloc NUMA node nearest the device, -1 unknown */
    int priority;           /* larger is preferred by "auto" within a kind */
    int max_threads;        /* CPU worker threads it would use, 0 if n/a */
    uint64_t memory_bytes;  /* device memory, 0 when host memory */
    char pci_bus_id[32];    /* "0000:17:00.0" or "" */
} lk_device_props;

/* A context loads the built-in and module drivers, reads the topology and
 * enumerates devices.  Several contexts may coexist; a context and its
 * objects may be used from several threads, a queue from one at a time. */
LK_API lk_status lk_context_create(lk_context **ctx);
LK_API void lk_context_destroy(lk_context *ctx);

LK_API int lk_device_count(const lk_context *ctx);
LK_API lk_status lk_device_get(lk_context *ctx, int index, lk_device **dev);

/* name: "auto" (LOCKSTEP_DEVICE overrides it), "ref", "cpu" (the best CPU
 * variant), "cpu:avx2", "cpu:avx512-vnni@simde", "cuda" (first GPU),
 * "cuda:0", ... */
LK_API lk_status lk_device_find(lk_context *ctx, const char *name, lk_device **dev);
LK_API lk_status lk_device_props_get(const lk_device *dev, lk_device_props *props);
LK_API const char *lk_device_name(const lk_device *dev);

/* Why "auto" chooses what it chooses, one line (for `lockstep info`). */
LK_API const char *lk_context_auto_reason(lk_context *ctx);

/* --- queues: in-order work on one device --- */

typedef struct lk_queue_opts {
    int num_threads;      /* CPU devices: 0 = LOCKSTEP_NUM_THREADS or all cores */
    void *native_stream;  /* GPU devices: adopt this cudaStream_t (not owned) */
} lk_queue_opts;

/* opts may be NULL for defaults.  On host-memory devices ops run to
 * completion inside the call; on GPUs they are enqueued and lk_queue_sync
 * waits for them. */
LK_API lk_status lk_queue_create(lk_device *dev, const lk_queue_opts *opts, lk_queue **q);
LK_API lk_status lk_queue_destroy(lk_queue *q);
LK_API lk_status lk_queue_sync(lk_queue *q);
LK_API lk_device *lk_queue_device(const lk_queue *q);

/* --- memory --- */

/* Allocate bytes on the device (64-byte aligned).  On host-memory devices
 * this is host memory; any host pointer may also be used there. */
LK_API lk_status lk_malloc(lk_device *dev, size_t bytes, void **ptr);
LK_API lk_status lk_free(lk_device *dev, void *ptr);

typedef enum lk_copy_kind {
    LK_COPY_HOST_TO_DEVICE = 1,
    LK_COPY_DEVICE_TO_HOST = 2,
    LK_COPY_DEVICE_TO_DEVICE = 3
} lk_copy_kind;

/* Copy on the queue (asynchronous on GPUs: host memory must stay valid
 * until lk_queue_sync). */
LK_API lk_status lk_memcpy(lk_queue *q, void *dst, const void *src, size_t bytes,
                           lk_copy_kind kind);

LK_END_DECLS

#endif
