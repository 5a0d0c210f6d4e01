/* Lockstep tests: lockstep-badabi.so, a module built for the next driver
 * ABI.  The core must refuse it before calling anything but the entry
 * point, with a message naming both ABI numbers. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <lockstep/driver.h>

static lk_status never_init(const lk_host *host, void **drv)
{
    (void)drv;
    host->set_error("badabi: init must never run");
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

static const lk_driver bad = {
    .abi_version = LK_DRIVER_ABI_VERSION + 1,
    .struct_size = sizeof(lk_driver),
    .name = "badabi",
    .description = "test-only: built for the next driver ABI",
    .init = never_init,
    .device_count = no_devices,
    .device_open = no_open,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &bad;
}
