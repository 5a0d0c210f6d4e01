/* Lockstep: what a context found (drivers, modules, topology), for
 * `lockstep info` and for programs that want to explain their setup. */
#ifndef LOCKSTEP_INFO_H
#define LOCKSTEP_INFO_H

#include <stdint.h>
#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/status.h>

LK_BEGIN_DECLS

/* One driver the context tried: a built-in one, a module it loaded, or a
 * module it refused.  status is LK_OK for a driver that provides devices;
 * otherwise it says why not:
 *   LK_ERR_NO_DEVICE       the driver has nothing to offer here (no GPU, ...)
 *   LK_ERR_ABI_MISMATCH    the module was built for another driver ABI
 *   LK_ERR_INVALID_ARGUMENT a duplicate driver name (the first one wins),
 *                          or a directory entry that is not searched
 *   LK_ERR_DRIVER          dlopen/dlsym failed or the driver misbehaved
 * message is one human line (for LK_OK it may list refused devices). */
typedef struct lk_driver_info {
    char name[32];        /* driver name, "" when the module gave none */
    char path[1024];      /* module path, "" for a built-in driver */
    int builtin;          /* 1: compiled into liblockstep */
    lk_status status;
    int device_count;     /* devices it added to the context */
    char message[512];
} lk_driver_info;

/* Drivers are listed in the order they were tried: built-ins, then the
 * modules of each LOCKSTEP_DRIVER_PATH directory, then the compiled-in
 * driver directory.  The current directory is never searched. */
LK_API int lk_context_driver_count(const lk_context *ctx);
LK_API lk_status lk_context_driver_info(const lk_context *ctx, int index,
                                        lk_driver_info *info);

/* The machine as the library sees it (process-wide, read once). */
typedef struct lk_topology_info {
    int hwloc;              /* 1: from hwloc, 0: sysconf fallback */
    int cores;              /* physical cores the process may run on (>= 1) */
    int pus;                /* logical processors the process may run on */
    int numa_nodes;         /* >= 1 */
    int thread_numa_node;   /* NUMA node of the calling thread, -1 unknown */
    uint64_t l1d_bytes;     /* per-core data cache sizes, 0 unknown */
    uint64_t l2_bytes;
    uint64_t l3_bytes;
    char source[64];        /* "hwloc 2.9.0" or "sysconf" */
} lk_topology_info;

LK_API lk_status lk_context_topology(const lk_context *ctx, lk_topology_info *info);

LK_END_DECLS

#endif
