/* Lockstep tests: an inert driver module whose init must never run, built
 * twice with different identities (per-target CPPFLAGS in tests/local.mk):
 *
 * - lockstep-badabi.so (INERT_ABI = LK_DRIVER_ABI_VERSION + 1): built for
 *   the next driver ABI; the core must refuse it before calling anything
 *   but the entry point, with a message naming both ABI numbers.
 * - lockstep-testdup.so (INERT_NAME "test"): a second driver named "test"
 *   that sorts after lockstep-testdrv.so, so the core must skip it (the
 *   first driver of a name wins) and say so in its driver list. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <lockstep/driver.h>

static lk_status never_init(const lk_host *host, void **drv)
{
    (void)drv;
    host->set_error("%s: init must never run", INERT_NAME);
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

static const lk_driver inert = {
    .abi_version = INERT_ABI,
    .struct_size = sizeof(lk_driver),
    .name = INERT_NAME,
    .description = INERT_DESCRIPTION,
    .init = never_init,
    .device_count = no_devices,
    .device_open = no_open,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &inert;
}
