/* Lockstep: status codes and the per-thread error message. */
#ifndef LOCKSTEP_STATUS_H
#define LOCKSTEP_STATUS_H

#include <lockstep/export.h>

LK_BEGIN_DECLS

/* Every public function that can fail returns an lk_status.  On failure
 * nothing was written to any output and lk_last_error() names the argument
 * and the reason. */
typedef enum lk_status {
    LK_OK = 0,
    LK_ERR_NULL_POINTER = 1,     /* a required pointer is NULL */
    LK_ERR_INVALID_ARGUMENT = 2, /* unknown enum value, bad flag, bad name */
    LK_ERR_BAD_SHAPE = 3,        /* negative or mismatched dimensions */
    LK_ERR_BAD_LEADING_DIM = 4,  /* ld < cols, or a bad batch stride */
    LK_ERR_OVERFLOW = 5,         /* a size computation overflows 64 bits */
    LK_ERR_BAD_DTYPE = 6,        /* dtype or dtype combination not defined */
    LK_ERR_WRONG_DEVICE = 7,     /* a buffer does not live on the queue's device */
    LK_ERR_ALIASING = 8,         /* an output overlaps an input it may not overlap */
    LK_ERR_UNSUPPORTED = 9,      /* the device does not implement this op/dtype */
    LK_ERR_RANGE = 10,           /* outside what the contract defines (e.g. K too
                                    large for exact int32 accumulation) */
    LK_ERR_INVALID_VALUE = 11,   /* input data invalid (e.g. ternary value 2) */
    LK_ERR_NO_DEVICE = 12,       /* no device of that name or kind */
    LK_ERR_OUT_OF_MEMORY = 13,
    LK_ERR_DRIVER = 14,          /* the driver or its runtime failed */
    LK_ERR_ABI_MISMATCH = 15,    /* a driver module was built for another ABI */
    LK_ERR_INTERNAL = 16
} lk_status;

/* Short constant name of a status ("LK_ERR_BAD_SHAPE"); never NULL. */
LK_API const char *lk_status_string(lk_status status);

/* Message of the last failed call made by this thread, "" if none.  The
 * pointer stays valid until the next Lockstep call on this thread. */
LK_API const char *lk_last_error(void);

LK_END_DECLS

#endif
