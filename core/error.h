/* Lockstep core: the per-thread error message (internal). */
#ifndef LK_CORE_ERROR_H
#define LK_CORE_ERROR_H

#include <lockstep/status.h>

/* Record the message of a failure on this thread and return st, so that
 * callers can write `return lk_error(LK_ERR_BAD_SHAPE, "...", ...)`. */
lk_status lk_error(lk_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* printf-style message without a status (for the lk_host service). */
void lk_error_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Clear this thread's message (at the start of every public call). */
void lk_error_clear(void);

#endif
