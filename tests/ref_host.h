/* Lockstep tests: the lk_host a test gives the reference kernels when it
 * calls them directly, without the core (backends/host.h).  Their
 * messages land in ref_last_error. */
#ifndef LK_TESTS_REF_HOST_H
#define LK_TESTS_REF_HOST_H

#include <stdarg.h>
#include <stdio.h>

#include "backends/host.h"

static char ref_last_error[512];

static void ref_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ref_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ref_last_error, sizeof ref_last_error, fmt, ap);
    va_end(ap);
}

static int ref_num_cores(void) { return 1; }

static const lk_host ref_host = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = (uint32_t)sizeof(lk_host),
    .set_error = ref_set_error,
    .num_cores = ref_num_cores,
};

/* First thing in main. */
static void ref_host_install(void) { lk_backend_host_set(&ref_host); }

#endif
