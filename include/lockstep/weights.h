/* Lockstep: prepared weights.
 *
 * A linear layer multiplies many activations by the same weights.  lk_gemm
 * and lk_ternary_gemm read the weights in their interchange layout on every
 * call, and a device may have to rearrange them each time (the CPU packs
 * panels for its micro-kernel).  lk_weights_prepare does that once: the
 * handle holds the weights in whatever private layout the device's kernels
 * read fastest, and lk_linear / lk_ternary_linear use it.
 *
 * The results are the bits of the unprepared ops (docs/numerics.md sections
 * 4 and 9): preparing changes the speed, never a value.  The handle keeps
 * its own copy: the tensors given to lk_weights_prepare may be changed or
 * freed afterwards.  The canonical LK_T2 layout (docs/formats.md) stays the
 * interchange format; a prepared layout is never exposed. */
#ifndef LOCKSTEP_WEIGHTS_H
#define LOCKSTEP_WEIGHTS_H

#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/ops.h>
#include <lockstep/status.h>
#include <lockstep/types.h>

LK_BEGIN_DECLS

typedef struct lk_weights lk_weights;

/* Prepare the weights w (N x K, the layout of a linear layer: y = x . w^T)
 * for the queue's device.  w is LK_F32, LK_BF16 or LK_F16, with w_scale
 * NULL; or LK_T2 (packed ternary), with w_scale the f32 scale of
 * lk_ternary_gemm (1 x 1 or 1 x N).  w and w_scale must live on the
 * queue's device.  On a GPU the copy is made on the queue: lk_queue_sync
 * before changing w.  *out is set on success only.  The handle's device
 * memory is about the weights' size; LK_T2 weights on an sm_90 GPU take
 * twice that (a second copy for the tensor-core kernels of M > 8; the
 * environment variable LOCKSTEP_CUDA_T2_TC_LAYOUT=0 leaves it out,
 * docs/api.md). */
LK_API lk_status lk_weights_prepare(lk_queue *q, const lk_tensor *w, const lk_tensor *w_scale,
                                    lk_weights **out);

/* Free the handle (NULL is a no-op).  Calls that use it must have
 * completed (lk_queue_sync on GPUs). */
LK_API void lk_weights_destroy(lk_weights *w);

/* What was prepared: dtype (LK_F32, LK_BF16, LK_F16 or LK_T2), N and K;
 * any pointer may be NULL.  The device is lk_weights_device's. */
LK_API lk_status lk_weights_info(const lk_weights *w, lk_dtype *dtype, int64_t *n,
                                 int64_t *k);
LK_API lk_device *lk_weights_device(const lk_weights *w);

/* y = x . W^T (+ bias) (+ y with LK_GEMM_ACCUMULATE): the bits of
 * lk_gemm(q, LK_NO_TRANS, LK_TRANS, x, w, bias, y, 1, flags) on the
 * weights that were prepared.  x: float M x K; bias NULL or 1 x N; y: float
 * M x N.  W must be float weights prepared on the queue's device. */
LK_API lk_status lk_linear(lk_queue *q, const lk_tensor *x, const lk_weights *w,
                           const lk_tensor *bias, const lk_tensor *y, unsigned flags);

/* y = ((float)acc / x_scale[m]) * w_scale[n or 0]: the bits of
 * lk_ternary_gemm(q, xq, x_scale, w, w_scale, y) on the ternary weights
 * and scale that were prepared.  xq: LK_I8 M x K; x_scale: f32 M x 1;
 * y: float M x N.  flags: 0 or LK_GEMM_ACCUMULATE, which adds that result
 * r to y instead (y = y + r, one f32 add, y's old value first: the bits of
 * the plain call into a temporary and lk_binary(q, LK_BINARY_ADD, y, r,
 * y)); y must then be LK_F32.  Other bits: LK_ERR_INVALID_ARGUMENT. */
LK_API lk_status lk_ternary_linear(lk_queue *q, const lk_tensor *xq, const lk_tensor *x_scale,
                                   const lk_weights *w, const lk_tensor *y, unsigned flags);

/* lk_rmsnorm_quantize(q, x, norm_weight, eps, xq, xs) then
 * lk_ternary_linear(q, xq, xs, w, y, flags), bit for bit, xq and xs
 * included: they are outputs too, written as lk_rmsnorm_quantize writes
 * them.  x: float M x K (K >= 1); norm_weight: float 1 x K or NULL; xq:
 * LK_I8 M x K; xs: f32 M x 1; y: float M x N (LK_F32 with
 * LK_GEMM_ACCUMULATE).  Everything is checked before anything is written;
 * xq, xs and y may not overlap each other, x or norm_weight
 * (LK_ERR_ALIASING).  A device may run it as one kernel. */
LK_API lk_status lk_rmsnorm_ternary_linear(lk_queue *q, const lk_tensor *x,
                                           const lk_tensor *norm_weight, float eps,
                                           const lk_tensor *xq, const lk_tensor *xs,
                                           const lk_weights *w, const lk_tensor *y,
                                           unsigned flags);

LK_END_DECLS

#endif
