/* Lockstep core: argument validation shared by the op entry points
 * (internal).
 *
 * An entry point opens a validator on its queue, passes every tensor
 * through lk_v_tensor (which checks it on its own and writes the
 * normalised copy into the driver's args struct), checks the shapes
 * against each other, then lk_v_finish checks aliasing and devices and
 * LK_V_RUN asks the device and calls the kernel inside the FP guard.
 * Nothing is written to any output before the kernel runs. */
#ifndef LK_CORE_VALIDATE_H
#define LK_CORE_VALIDATE_H

#include <stdint.h>

#include <lockstep.h>
#include <lockstep/driver.h>

#include "core/capture.h"
#include "core/core.h"
#include "core/dtype.h"
#include "core/error.h"
#include "numerics/fpenv.h"

/* lk_v_tensor flags */
#define LK_V_IN 0u          /* read by the op */
#define LK_V_OUT 1u         /* written by the op */
#define LK_V_OPTIONAL 2u    /* may be NULL: normalised to all zeros */
#define LK_V_BATCHED 4u     /* batch_stride is read (GEMM) */
#define LK_V_INPLACE 8u     /* output that may be exactly one of the inputs */

#define LK_V_MAX 8

typedef struct lk_vtensor {
    const char *name;
    unsigned flags;
    const lk_tensor *t;  /* the normalised copy */
    uintptr_t lo, hi;    /* bytes touched over the whole batch; lo == hi: none */
} lk_vtensor;

typedef struct lk_validator {
    const char *fn;
    lk_queue *q;
    lk_device *dev;
    int n;
    lk_vtensor t[LK_V_MAX];
} lk_validator;

/* Clears this thread's message; q must not be NULL. */
lk_status lk_v_begin(lk_validator *v, const char *fn, lk_queue *q);

/* Checks one tensor on its own (NULL, dtype in the `dtypes` mask of
 * LK_DT() bits, sizes, ld, batch stride, int64 and address overflow, data
 * NULL only when nothing is touched) and writes its normalised copy to
 * *dst.  batch is the number of matrices (1 for unbatched ops). */
lk_status lk_v_tensor(lk_validator *v, const char *name, const lk_tensor *src,
                      lk_tensor *dst, unsigned dtypes, unsigned flags, int64_t batch);

/* rows/cols of a normalised tensor must equal the given values (< 0: not
 * checked); what_* name them in the message ("K"), NULL to print the
 * number alone. */
lk_status lk_v_dims(lk_validator *v, const char *name, const lk_tensor *t, int64_t rows,
                    const char *what_rows, int64_t cols, const char *what_cols);

/* cols >= 1 for ops that reduce along a row. */
lk_status lk_v_nonempty_rows(lk_validator *v, const char *name, const lk_tensor *t);

/* Aliasing between the recorded tensors, then the device of each. */
lk_status lk_v_finish(lk_validator *v);

/* The device implements the op (kernel non-NULL) and takes this call. */
lk_status lk_v_supported(lk_validator *v, lk_op op, const char *opname, int has_kernel,
                         const void *args);

/* A kernel's status, with a message when it failed without one. */
lk_status lk_v_result(lk_validator *v, lk_status st);

/* weights.c: lk_bitnet_decode's check of one projection's handle (given,
 * LK_T2, prepared on the validator's device, exactly n x k) and the
 * kernel's view of it (the prepared object, or the core's copy). */
lk_status lk_weights_bitnet(lk_validator *v, const char *name, const lk_weights *w, int64_t n,
                            int64_t k, lk_bitnet_weight_args *out);

/* Common tail of every op: ask the device, skip an empty call, run the
 * kernel with the canonical FP environment -- or, on a queue that records
 * a graph on the host, record the call (core/capture.h). */
#define LK_V_RUN(v, op, slot, args, empty)                                          \
    do {                                                                            \
        const lk_device_iface *iface_ = (v)->dev->iface;                            \
        lk_status st_ = lk_v_supported((v), (op), #slot,                            \
                                       iface_->kernels.slot != NULL, &(args));      \
        if (st_ != LK_OK)                                                           \
            return st_;                                                             \
        if (empty)                                                                  \
            return LK_OK;                                                           \
        if (lk_capture_hosted((v)->q))                                              \
            return lk_capture_record((v)->q, (v)->fn, LK_KSLOT_##slot, &(args),     \
                                     sizeof(args));                                 \
        lk_fpenv fe_;                                                               \
        lk_fpenv_enter(&fe_);                                                       \
        st_ = iface_->kernels.slot((v)->q->state, &(args));                         \
        lk_fpenv_leave(&fe_);                                                       \
        st_ = lk_v_result((v), st_);                                                \
        if (st_ == LK_OK && (v)->q->cap)                                            \
            lk_capture_count((v)->q);                                               \
        return st_;                                                                 \
    } while (0)

#define LK_V_TRY(expr)                                                              \
    do {                                                                            \
        lk_status st_try_ = (expr);                                                 \
        if (st_try_ != LK_OK)                                                       \
            return st_try_;                                                         \
    } while (0)

#endif
