/* Lockstep tests: lockstep-testdup.so, a second driver named "test".  It
 * sorts after lockstep-testdrv.so, so the core must skip it (the first
 * driver of a name wins) and say so in its driver list. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <lockstep/driver.h>

static lk_status dup_init(const lk_host *host, void **drv)
{
    (void)drv;
    host->set_error("testdup: init must never run");
    return LK_ERR_INTERNAL;
}

static int no_devices(void *drv)
{
    (void)drv;
    return 0;
}

static lk_status no_open(void *drv, int index, const lk_device_iface **iface, void **dev)
{
    (void)drv, (void)index, (void)iface, (void)dev;
    return LK_ERR_NO_DEVICE;
}

static const lk_driver dup = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "test",
    .description = "test-only: a duplicate of the test driver's name",
    .init = dup_init,
    .device_count = no_devices,
    .device_open = no_open,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &dup;
}
