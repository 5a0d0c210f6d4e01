/* Lockstep core: status names and the per-thread error message.
 *
 * One fixed buffer per thread, so that recording a failure can never fail
 * itself (no allocation on an error path). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <lockstep/status.h>

#include "core/error.h"

#define LK_ERROR_BYTES 512

static _Thread_local char lk_tls_message[LK_ERROR_BYTES];

/* Format into a scratch buffer first: callers may pass lk_last_error()
 * itself as an argument (to wrap a driver's message). */
static void lk_error_vset(const char *fmt, va_list ap)
{
    char tmp[LK_ERROR_BYTES];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0)
        snprintf(tmp, sizeof tmp, "(unprintable error message)");
    memcpy(lk_tls_message, tmp, sizeof tmp);
    lk_tls_message[LK_ERROR_BYTES - 1] = '\0';
}

lk_status lk_error(lk_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lk_error_vset(fmt, ap);
    va_end(ap);
    return st;
}

void lk_error_message(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lk_error_vset(fmt, ap);
    va_end(ap);
}

void lk_error_clear(void)
{
    lk_tls_message[0] = '\0';
}

LK_API const char *lk_last_error(void)
{
    return lk_tls_message;
}

LK_API const char *lk_status_string(lk_status status)
{
    switch (status) {
    case LK_OK: return "LK_OK";
    case LK_ERR_NULL_POINTER: return "LK_ERR_NULL_POINTER";
    case LK_ERR_INVALID_ARGUMENT: return "LK_ERR_INVALID_ARGUMENT";
    case LK_ERR_BAD_SHAPE: return "LK_ERR_BAD_SHAPE";
    case LK_ERR_BAD_LEADING_DIM: return "LK_ERR_BAD_LEADING_DIM";
    case LK_ERR_OVERFLOW: return "LK_ERR_OVERFLOW";
    case LK_ERR_BAD_DTYPE: return "LK_ERR_BAD_DTYPE";
    case LK_ERR_WRONG_DEVICE: return "LK_ERR_WRONG_DEVICE";
    case LK_ERR_ALIASING: return "LK_ERR_ALIASING";
    case LK_ERR_UNSUPPORTED: return "LK_ERR_UNSUPPORTED";
    case LK_ERR_RANGE: return "LK_ERR_RANGE";
    case LK_ERR_INVALID_VALUE: return "LK_ERR_INVALID_VALUE";
    case LK_ERR_NO_DEVICE: return "LK_ERR_NO_DEVICE";
    case LK_ERR_OUT_OF_MEMORY: return "LK_ERR_OUT_OF_MEMORY";
    case LK_ERR_DRIVER: return "LK_ERR_DRIVER";
    case LK_ERR_ABI_MISMATCH: return "LK_ERR_ABI_MISMATCH";
    case LK_ERR_INTERNAL: return "LK_ERR_INTERNAL";
    }
    return "LK_ERR_UNKNOWN";
}
