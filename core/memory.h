/* Lockstep core: the registry of lk_malloc'd ranges (internal), so that
 * validation can tell which device a pointer belongs to. */
#ifndef LK_CORE_MEMORY_H
#define LK_CORE_MEMORY_H

#include <stdint.h>

#include "core/core.h"

typedef struct lk_mem_hit {
    lk_device *inside;          /* owner of an allocation holding all of [lo, hi) */
    lk_device *overlap;         /* owner of some allocation overlapping [lo, hi) */
    lk_device *overlap_nonhost; /* same, restricted to devices without host memory */
} lk_mem_hit;

/* What the registry knows about the bytes [lo, hi), lo < hi. */
void lk_mem_lookup(uintptr_t lo, uintptr_t hi, lk_mem_hit *hit);

/* Where [lo, hi) may be used by dev: LK_OK or LK_ERR_WRONG_DEVICE with
 * "fn: what: ..." as the message. */
lk_status lk_mem_check(lk_device *dev, const char *fn, const char *what, uintptr_t lo,
                       uintptr_t hi);

/* Free whatever dev still owns (at lk_context_destroy). */
void lk_mem_release_device(lk_device *dev);

#endif
