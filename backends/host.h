/* Lockstep backends (internal): the lk_host services as the built-in
 * drivers' kernels reach them.
 *
 * The reference and CPU kernels are plain functions of their arguments,
 * run by the built-in drivers, by test modules that link the reference
 * (tests/drivers/testdrv.c) and by tests that call them directly.  They
 * report through the lk_host table the driver's init received, exactly
 * as a module does, rather than through the core's internals.  The table
 * is stable for the life of the process (include/lockstep/driver.h), so
 * one process-wide pointer serves every context. */
#ifndef LK_BACKENDS_HOST_H
#define LK_BACKENDS_HOST_H

#include <lockstep/driver.h>

/* Every driver that runs these kernels calls it from its init (a test
 * calling the kernels directly passes a table of its own). */
void lk_backend_host_set(const lk_host *host);

/* The table, NULL before any lk_backend_host_set. */
const lk_host *lk_backend_host(void);

/* Set this thread's lk_last_error() message through the host and return
 * st, so that a kernel can `return lk_kernel_error(LK_ERR_..., "...")`. */
lk_status lk_kernel_error(lk_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The host's num_cores(), 1 without a host. */
int lk_backend_num_cores(void);

#endif
