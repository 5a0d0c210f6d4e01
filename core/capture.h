/* Lockstep core: graph capture (internal; include/lockstep/graph.h).
 *
 * A queue in capture mode has q->cap.  With a driver that has native
 * graphs (capture_begin non-NULL) the ops run their kernels as usual and
 * the driver captures them; otherwise the op entry points hand their
 * validated args to lk_capture_record instead of calling the kernel, and
 * lk_graph_launch calls the same kernels with the same args later. */
#ifndef LK_CORE_CAPTURE_H
#define LK_CORE_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep.h>
#include <lockstep/driver.h>

#include "core/core.h"

/* Every kernel slot an op entry point may call: X(slot, args type). */
#define LK_KSLOTS(X)                                                                    \
    X(gemm, lk_gemm_args)                                                               \
    X(reduce, lk_reduce_args)                                                           \
    X(rmsnorm, lk_norm_args)                                                            \
    X(layernorm, lk_norm_args)                                                          \
    X(softmax, lk_softmax_args)                                                         \
    X(log_softmax, lk_softmax_args)                                                     \
    X(unary, lk_unary_args)                                                             \
    X(binary, lk_binary_args)                                                           \
    X(quantize_act, lk_quant_args)                                                      \
    X(quantize_ternary, lk_quant_args)                                                  \
    X(ternary_pack, lk_pack_args)                                                       \
    X(ternary_unpack, lk_pack_args)                                                     \
    X(ternary_gemm, lk_qgemm_args)                                                      \
    X(int8_gemm, lk_qgemm_args)                                                         \
    X(gemm_tc, lk_gemm_args)                                                            \
    X(rope, lk_rope_args)                                                               \
    X(attention, lk_attention_args)                                                     \
    X(embedding, lk_embedding_args)                                                     \
    X(linear, lk_linear_args)                                                           \
    X(ternary_linear, lk_linear_args)                                                   \
    X(rmsnorm_quantize, lk_norm_quant_args)                                             \
    X(set_rows, lk_set_rows_args)                                                       \
    X(glu, lk_glu_args)                                                                 \
    X(rmsnorm_ternary_linear, lk_norm_linear_args)                                     \
    X(bitnet_decode, lk_bitnet_args)                                                    \
    X(unary_backward, lk_unary_backward_args)                                           \
    X(softmax_backward, lk_softmax_backward_args)                                       \
    X(norm_backward, lk_norm_backward_args)                                             \
    X(embedding_backward, lk_embedding_backward_args)                                   \
    X(optim_step, lk_optim_args)

#define LK_KSLOT_ENUM_(slot, type) LK_KSLOT_##slot,
typedef enum lk_kslot {
    LK_KSLOTS(LK_KSLOT_ENUM_)
    LK_KSLOT_MEMCPY_, /* lk_memcpy */
    LK_KSLOT_COUNT_
} lk_kslot;
#undef LK_KSLOT_ENUM_

typedef struct lk_rec lk_rec; /* one recorded call (graph.c) */
typedef struct lk_capture lk_capture;

struct lk_capture {
    int native;       /* the driver captures (capture_begin) */
    int64_t nops;     /* calls captured */
    lk_rec *recs;     /* hosted: the calls, in order */
    size_t n, size;
};

/* q records its ops on the host (a capture without native graphs). */
static inline int lk_capture_hosted(const lk_queue *q)
{
    return q->cap != NULL && !q->cap->native;
}

/* The queue's stream is being captured, natively by the core or by the
 * caller on an adopted stream: nothing may read device data back. */
int lk_capture_on_device(const lk_queue *q);

/* Record one validated kernel call (args of `size` bytes) on a hosted
 * capture; fn names the op in messages. */
lk_status lk_capture_record(lk_queue *q, const char *fn, lk_kslot slot, const void *args,
                            size_t size);
/* lk_capture_record for args that point to host memory of their own
 * (lk_bitnet_args' layers): the record owns `owned` from this call on and
 * frees it with the capture or the graph; on failure it is freed here. */
lk_status lk_capture_record_owned(lk_queue *q, const char *fn, lk_kslot slot, const void *args,
                                  size_t size, void *owned);
lk_status lk_capture_memcpy(lk_queue *q, void *dst, const void *src, size_t bytes,
                            lk_copy_kind kind);
/* A call ran its kernel inside a native capture: count it. */
void lk_capture_count(lk_queue *q);

/* ops_model.c: every id in [0, vocab) (reads device memory back through
 * a copy and a sync where the ids are not host memory). */
lk_status lk_embedding_ids_check(const char *fn, lk_queue *q, const lk_tensor *ids,
                                 int64_t vocab);
/* The same for any index tensor (lk_set_rows' idx), named in the message. */
/* The elements an LK_I32 tensor spans, on the host (core/ops_model.c):
 * t's own data on host-memory devices, else a copy read after a queue
 * sync (*own, to free; NULL otherwise).  name goes into the messages. */
lk_status lk_i32_host(const char *fn, const char *name, lk_queue *q, const lk_tensor *t,
                      const int32_t **h, int32_t **own);
lk_status lk_index_check(const char *fn, const char *name, lk_queue *q, const lk_tensor *ids,
                         int64_t vocab);

/* queue.c and graph.c: the queue's end of graphs (a capture in progress
 * is discarded; fails while graphs captured on it exist). */
lk_status lk_capture_queue_release(lk_queue *q);
/* The error a replayed lk_embedding met, for the next lk_queue_sync. */
lk_status lk_capture_take_pending(lk_queue *q);

#endif
