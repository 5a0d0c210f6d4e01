/* Lockstep backends: the lk_host services for the built-in kernels
 * (backends/host.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "backends/host.h"

/* Written by every driver's init (the same table each time), read on
 * error paths from any thread. */
static _Atomic(const lk_host *) lk_host_table;

void lk_backend_host_set(const lk_host *host)
{
    atomic_store_explicit(&lk_host_table, host, memory_order_release);
}

const lk_host *lk_backend_host(void)
{
    return atomic_load_explicit(&lk_host_table, memory_order_acquire);
}

lk_status lk_kernel_error(lk_status st, const char *fmt, ...)
{
    const lk_host *h = lk_backend_host();
    if (h == NULL)
        return st;
    /* format here: set_error takes a format of its own, and an argument may
     * be lk_last_error() itself */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        snprintf(msg, sizeof msg, "(unprintable error message)");
    va_end(ap);
    h->set_error("%s", msg);
    return st;
}

int lk_backend_num_cores(void)
{
    const lk_host *h = lk_backend_host();
    int n = h != NULL ? h->num_cores() : 1;
    return n >= 1 ? n : 1;
}
