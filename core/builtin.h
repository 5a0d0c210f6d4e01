/* Lockstep core (internal): the built-in drivers, where the core and
 * backends/ meet.
 *
 * The core never includes a backend's header: what it takes from backends/
 * is declared here, and backends/ defines it (the linker joins them in
 * liblockstep).  The other way round, a built-in driver uses the core only
 * as a module does, through the lk_host table its init receives
 * (backends/host.h), with one exception, declared here too: the CPU
 * driver binds its worker threads with the hwloc topology the core has
 * loaded for the process.  A second topology would cost each context
 * milliseconds and memory to discover the same machine, and a handle of
 * hwloc's own types cannot be part of the driver ABI, which a module built
 * against another hwloc would have to read.  hwloc's own components,
 * compiled into libhwloc, use its private headers for the same reason
 * (docs/drivers.md, "Built-in drivers"). */
#ifndef LK_CORE_BUILTIN_H
#define LK_CORE_BUILTIN_H

#include <lockstep/driver.h>

/* The built-in drivers' entry points, in registration order (core/
 * registry.c): "ref" (backends/ref/driver.c) and, when configured,
 * "cpu" (backends/cpu/driver.c).  NULL: compiled out. */
const lk_driver *lk_ref_driver_entry(void);
const lk_driver *lk_cpu_driver_entry(void);

/* lk_host's bitnet_compose (backends/bitnet.c). */
lk_status lk_bitnet_compose(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                            int idx_ready);

/* The core's hwloc_topology_t (read-only, loaded once per process), NULL
 * without hwloc (core/topology.c). */
void *lk_topo_hwloc(void);

#endif
