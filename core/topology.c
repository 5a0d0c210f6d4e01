/* Lockstep core: topology.  hwloc gives cores, NUMA nodes, caches and PCI
 * locality; without it (--without-hwloc) sysconf and sysfs give what they
 * can.  Loaded once per process: a topology with PCI discovery costs
 * milliseconds, and it does not change while we run. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef LK_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "core/builtin.h"
#include "core/topology.h"

static lk_topo lk_topo_data;
static pthread_once_t lk_topo_once = PTHREAD_ONCE_INIT;
#ifdef LK_HAVE_HWLOC
static hwloc_topology_t lk_hwloc;
#endif

static int lk_sys_cpus(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static uint64_t lk_sys_cache(int name)
{
    long v = sysconf(name);
    return v > 0 ? (uint64_t)v : 0;
}

/* The size of cpu0's cache of `level` (data or unified) from sysfs, 0
 * when unknown: glibc's sysconf answers 0 for the caches on AArch64 (it
 * has no CPUID to ask), while Linux lists them under
 * /sys/devices/system/cpu/cpu0/cache/indexN/{level,type,size}. */
static uint64_t lk_sysfs_cache(int level)
{
    for (int i = 0; i < 8; i++) {
        char path[96], type[32] = "";
        int lv = 0;
        unsigned long kb = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            return 0;
        int got = fscanf(f, "%d", &lv);
        fclose(f);
        if (got != 1 || lv != level)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        got = fscanf(f, "%31s", type);
        fclose(f);
        if (got != 1 || strcmp(type, "Instruction") == 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        got = fscanf(f, "%luK", &kb);
        fclose(f);
        if (got == 1)
            return (uint64_t)kb * 1024;
    }
    return 0;
}

static void lk_topo_sysconf(lk_topo *t)
{
    t->hwloc = 0;
    t->pus = lk_sys_cpus();
    t->cores = t->pus;
    t->numa_nodes = 1;
#ifdef _SC_LEVEL1_DCACHE_SIZE
    t->l1d = lk_sys_cache(_SC_LEVEL1_DCACHE_SIZE);
    t->l2 = lk_sys_cache(_SC_LEVEL2_CACHE_SIZE);
    t->l3 = lk_sys_cache(_SC_LEVEL3_CACHE_SIZE);
#else
    (void)lk_sys_cache;
#endif
    if (t->l1d == 0)
        t->l1d = lk_sysfs_cache(1);
    if (t->l2 == 0)
        t->l2 = lk_sysfs_cache(2);
    if (t->l3 == 0)
        t->l3 = lk_sysfs_cache(3);
    snprintf(t->source, sizeof t->source, "sysconf");
}

#ifdef LK_HAVE_HWLOC
static uint64_t lk_hwloc_cache(hwloc_obj_type_t type)
{
    hwloc_obj_t o = hwloc_get_obj_by_type(lk_hwloc, type, 0);
    return (o && o->attr) ? (uint64_t)o->attr->cache.size : 0;
}

static int lk_topo_hwloc_load(lk_topo *t)
{
    if (hwloc_topology_init(&lk_hwloc) != 0)
        return 0;
    /* GPUs and NICs, not every bridge: enough for PCI locality. */
    hwloc_topology_set_io_types_filter(lk_hwloc, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(lk_hwloc) != 0) {
        hwloc_topology_destroy(lk_hwloc);
        lk_hwloc = NULL;
        return 0;
    }
    int pus = hwloc_get_nbobjs_by_type(lk_hwloc, HWLOC_OBJ_PU);
    int cores = hwloc_get_nbobjs_by_type(lk_hwloc, HWLOC_OBJ_CORE);
    int nodes = hwloc_get_nbobjs_by_type(lk_hwloc, HWLOC_OBJ_NUMANODE);
    t->hwloc = 1;
    t->pus = pus > 0 ? pus : lk_sys_cpus();
    t->cores = cores > 0 ? cores : t->pus;
    t->numa_nodes = nodes > 0 ? nodes : 1;
    t->l1d = lk_hwloc_cache(HWLOC_OBJ_L1CACHE);
    t->l2 = lk_hwloc_cache(HWLOC_OBJ_L2CACHE);
    t->l3 = lk_hwloc_cache(HWLOC_OBJ_L3CACHE);
#ifdef HWLOC_VERSION
    snprintf(t->source, sizeof t->source, "hwloc %s", HWLOC_VERSION);
#else
    unsigned v = hwloc_get_api_version();
    snprintf(t->source, sizeof t->source, "hwloc (API %u.%u)", v >> 16, (v >> 8) & 0xffu);
#endif
    return 1;
}
#endif

static void lk_topo_load(void)
{
    memset(&lk_topo_data, 0, sizeof lk_topo_data);
#ifdef LK_HAVE_HWLOC
    if (lk_topo_hwloc_load(&lk_topo_data))
        return;
#endif
    lk_topo_sysconf(&lk_topo_data);
}

const lk_topo *lk_topo_get(void)
{
    pthread_once(&lk_topo_once, lk_topo_load);
    return &lk_topo_data;
}

void *lk_topo_hwloc(void)
{
    lk_topo_get();
#ifdef LK_HAVE_HWLOC
    return lk_hwloc;
#else
    return NULL;
#endif
}

int lk_topo_thread_numa_node(void)
{
    lk_topo_get();
#ifdef LK_HAVE_HWLOC
    if (!lk_hwloc)
        return -1;
    if (lk_topo_data.numa_nodes == 1) {
        hwloc_obj_t n = hwloc_get_obj_by_type(lk_hwloc, HWLOC_OBJ_NUMANODE, 0);
        return n ? (int)n->os_index : -1;
    }
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    int node = -1;
    if (set && hwloc_get_last_cpu_location(lk_hwloc, set, HWLOC_CPUBIND_THREAD) == 0) {
        hwloc_obj_t n = NULL;
        while ((n = hwloc_get_next_obj_by_type(lk_hwloc, HWLOC_OBJ_NUMANODE, n)) != NULL) {
            if (n->cpuset && hwloc_bitmap_intersects(n->cpuset, set)) {
                node = (int)n->os_index;
                break;
            }
        }
    }
    hwloc_bitmap_free(set);
    return node;
#else
    return -1;
#endif
}

static int lk_parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev,
                           unsigned *fn)
{
    if (!s)
        return 0;
    if (sscanf(s, "%x:%x:%x.%x", dom, bus, dev, fn) == 4)
        return 1;
    *dom = 0;
    return sscanf(s, "%x:%x.%x", bus, dev, fn) == 3;
}

/* Linux knows a PCI device's node too: the fallback without hwloc, and
 * for devices hwloc's filter dropped. */
static int lk_sysfs_pci_node(unsigned dom, unsigned bus, unsigned dev, unsigned fn)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/bus/pci/devices/%04x:%02x:%02x.%x/numa_node", dom,
             bus, dev, fn);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int node = -1;
    if (fscanf(f, "%d", &node) != 1)
        node = -1;
    fclose(f);
    return node >= 0 ? node : -1;
}

int lk_topo_pci_numa_node(const char *pci_bus_id)
{
    unsigned dom, bus, dev, fn;
    if (!lk_parse_bus_id(pci_bus_id, &dom, &bus, &dev, &fn))
        return -1;
    lk_topo_get();
#ifdef LK_HAVE_HWLOC
    if (lk_hwloc) {
        hwloc_obj_t p = hwloc_get_pcidev_by_busid(lk_hwloc, dom, bus, dev, fn);
        hwloc_obj_t a = p ? hwloc_get_non_io_ancestor_obj(lk_hwloc, p) : NULL;
        if (a && a->nodeset && hwloc_bitmap_weight(a->nodeset) == 1)
            return hwloc_bitmap_first(a->nodeset);
    }
#endif
    return lk_sysfs_pci_node(dom, bus, dev, fn);
}
