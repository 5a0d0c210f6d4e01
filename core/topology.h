/* Lockstep core: the machine's topology (internal), read once per
 * process: hwloc when built with it, sysconf otherwise. */
#ifndef LK_CORE_TOPOLOGY_H
#define LK_CORE_TOPOLOGY_H

#include <stdint.h>

typedef struct lk_topo {
    int hwloc;          /* 1: the numbers come from hwloc */
    int cores;          /* physical cores the process may run on, >= 1 */
    int pus;            /* logical processors the process may run on, >= 1 */
    int numa_nodes;     /* >= 1 */
    uint64_t l1d, l2, l3; /* bytes, 0 unknown */
    char source[64];
} lk_topo;

/* Never NULL; the first call loads the topology. */
const lk_topo *lk_topo_get(void);

/* NUMA node (os index) of the calling thread's current CPU, -1 unknown. */
int lk_topo_thread_numa_node(void);

/* NUMA node (os index) of a PCI device "dddd:bb:dd.f" (or "bb:dd.f"),
 * -1 unknown. */
int lk_topo_pci_numa_node(const char *pci_bus_id);

#endif
