/* Lockstep command: `lockstep info` — what this build and this machine
 * offer, and why "auto" picks what it picks. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>
#include <lockstep/driver.h>

#include "tools/cmd.h"

static const char *kind_name(lk_device_kind k)
{
    switch (k) {
    case LK_DEVICE_REFERENCE: return "reference";
    case LK_DEVICE_CPU: return "cpu";
    case LK_DEVICE_GPU: return "gpu";
    default: return "other";
    }
}

/* "32 KiB", "1.5 MiB", "?" */
static const char *bytes_str(uint64_t b, char *buf, size_t size)
{
    if (b == 0)
        snprintf(buf, size, "?");
    else if (b >= ((uint64_t)1 << 30))
        snprintf(buf, size, "%.1f GiB", (double)b / (double)((uint64_t)1 << 30));
    else if (b >= ((uint64_t)1 << 20))
        snprintf(buf, size, "%.1f MiB", (double)b / (double)((uint64_t)1 << 20));
    else
        snprintf(buf, size, "%" PRIu64 " KiB", b >> 10);
    return buf;
}

static void print_topology(lk_context *ctx)
{
    lk_topology_info t;
    char l1[32], l2[32], l3[32];
    if (lk_context_topology(ctx, &t) != LK_OK) {
        printf("Topology: unavailable (%s)\n", lk_last_error());
        return;
    }
    printf("Topology (%s):\n", t.source);
    printf("  %d core%s, %d logical processor%s, %d NUMA node%s; this thread on node %d\n",
           t.cores, t.cores == 1 ? "" : "s", t.pus, t.pus == 1 ? "" : "s", t.numa_nodes,
           t.numa_nodes == 1 ? "" : "s", t.thread_numa_node);
    printf("  caches: L1d %s, L2 %s, L3 %s\n", bytes_str(t.l1d_bytes, l1, sizeof l1),
           bytes_str(t.l2_bytes, l2, sizeof l2), bytes_str(t.l3_bytes, l3, sizeof l3));
}

static void print_drivers(lk_context *ctx)
{
    int n = lk_context_driver_count(ctx);
    printf("Drivers (%d tried):\n", n);
    for (int i = 0; i < n; i++) {
        lk_driver_info d;
        if (lk_context_driver_info(ctx, i, &d) != LK_OK)
            continue;
        const char *from = d.builtin ? "built-in" : d.path;
        if (d.status == LK_OK)
            printf("  %-8s %s: %d device%s%s%s\n", d.name[0] ? d.name : "?", from,
                   d.device_count, d.device_count == 1 ? "" : "s", d.message[0] ? "; " : "",
                   d.message);
        else
            printf("  %-8s %s: not used, %s: %s\n", d.name[0] ? d.name : "?", from,
                   lk_status_string(d.status), d.message[0] ? d.message : "(no reason given)");
    }
}

static void print_devices(lk_context *ctx)
{
    int n = lk_device_count(ctx);
    printf("Devices (%d):\n", n);
    for (int i = 0; i < n; i++) {
        lk_device *dev;
        lk_device_props p;
        if (lk_device_get(ctx, i, &dev) != LK_OK || lk_device_props_get(dev, &p) != LK_OK)
            continue;
        /* a description's "; " clauses (a GPU's tensor-core kernels) get
         * lines of their own */
        const char *d = p.description, *semi = strstr(d, "; ");
        printf("  %-24s %.*s\n", p.name, semi ? (int)(semi - d) : (int)strlen(d), d);
        while (semi) {
            d = semi + 2;
            semi = strstr(d, "; ");
            printf("  %-24s %.*s\n", "", semi ? (int)(semi - d) : (int)strlen(d), d);
        }
        printf("  %-24s driver %s, %s, %s%s", "", p.driver, kind_name(p.kind),
               p.host_memory ? "host memory" : "device memory",
               p.emulated ? ", emulated (SIMDe)" : "");
        if (p.memory_bytes) {
            char mb[32];
            printf(", %s", bytes_str(p.memory_bytes, mb, sizeof mb));
        }
        if (p.max_threads)
            printf(", %d thread%s", p.max_threads, p.max_threads == 1 ? "" : "s");
        printf(", NUMA node %d, priority %d", p.numa_node, p.priority);
        if (p.pci_bus_id[0])
            printf(", PCI %s", p.pci_bus_id);
        printf("\n");
    }
}

int lk_cmd_info(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("Usage: lockstep info\n\nPrints the library and contract versions, the "
                   "drivers tried (and why any was\nrefused), every device with its "
                   "properties, the topology, and which device\n\"auto\" picks and why.\n");
            return 0;
        }
        fprintf(stderr, "lockstep info: unknown option '%s'\n", argv[i]);
        return 2;
    }

    printf("Lockstep %s (headers %s), numerical contract %d, driver ABI %u\n",
           lk_version_string(), LK_VERSION_STRING, lk_contract_version(),
           (unsigned)LK_DRIVER_ABI_VERSION);
    const char *env[] = {"LOCKSTEP_DEVICE", "LOCKSTEP_DRIVER_PATH", "LOCKSTEP_CPU_ISA",
                         "LOCKSTEP_NUM_THREADS", "LOCKSTEP_DEBUG"};
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
        const char *v = getenv(env[i]);
        if (v)
            printf("  %s=%s\n", env[i], v);
    }

    lk_context *ctx;
    lk_status st = lk_context_create(&ctx);
    if (st != LK_OK) {
        fprintf(stderr, "lockstep info: no context: %s: %s\n", lk_status_string(st),
                lk_last_error());
        return 1;
    }
    print_drivers(ctx);
    print_devices(ctx);
    print_topology(ctx);

    lk_device *dev;
    st = lk_device_find(ctx, "auto", &dev);
    if (st == LK_OK)
        printf("auto: %s\n  %s\n", lk_device_name(dev), lk_context_auto_reason(ctx));
    else {
        char why[256];
        snprintf(why, sizeof why, "%s", lk_last_error());
        printf("auto: none (%s: %s)\n", lk_status_string(st), why);
        printf("  %s\n", lk_context_auto_reason(ctx));
    }
    lk_context_destroy(ctx);
    return st == LK_OK ? 0 : 1;
}
