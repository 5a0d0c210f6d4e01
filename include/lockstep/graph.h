/* Lockstep: capturing a sequence of ops once and replaying it.
 *
 * A decode step of a model is the same few hundred small ops every token,
 * with only the contents of a few buffers changing (the token id, the
 * position).  Launching them one by one leaves the GPU idle between
 * kernels; a captured graph replays the whole sequence with one launch.
 *
 *     lk_queue_capture_begin(q);
 *     lk_rmsnorm(q, ...); lk_ternary_gemm(q, ...); ...   // recorded, not run
 *     lk_queue_capture_end(q, &g);
 *     for each token: write the inputs' contents; lk_graph_launch(g, q);
 *
 * What a graph freezes: every pointer, shape, stride, dtype, flag and
 * scalar of every call.  What it reads at launch: the contents of the
 * buffers.  A launch gives the bits the same calls give when run eagerly
 * (it runs the same kernels).
 *
 * On CUDA a capture is a CUDA graph (stream capture of the queue's stream,
 * then one cudaGraphLaunch per launch).  On devices without native graphs
 * the core records the validated calls on the host and replays them in
 * order, so the same code runs everywhere.  docs/api.md ("Graphs") has the
 * rules in full. */
#ifndef LOCKSTEP_GRAPH_H
#define LOCKSTEP_GRAPH_H

#include <stdint.h>

#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/status.h>

LK_BEGIN_DECLS

typedef struct lk_graph lk_graph;

/* From now on the ops enqueued on q are validated as usual and captured
 * instead of run.  Work enqueued before still runs as usual and is not
 * part of the graph.  Fails with LK_ERR_INVALID_ARGUMENT when q is already
 * capturing (captures do not nest). */
LK_API lk_status lk_queue_capture_begin(lk_queue *q);

/* Ends the capture and returns the graph of the ops captured since
 * lk_queue_capture_begin.  The queue leaves capture mode whether this
 * succeeds or not (a capture broken by a device error is discarded). */
LK_API lk_status lk_queue_capture_end(lk_queue *q, lk_graph **g);

/* 1 while q is capturing, 0 otherwise (and for NULL). */
LK_API int lk_queue_capturing(const lk_queue *q);

/* Runs the captured ops on q, a queue of the graph's device, in order
 * after the work already on q (asynchronous on GPUs, as the ops are). */
LK_API lk_status lk_graph_launch(lk_graph *g, lk_queue *q);

/* native: 1 when the device replays the graph as one native graph (a CUDA
 * graph), 0 when the core replays the recorded calls; ops: the number of
 * calls captured (empty calls are not).  Either pointer may be NULL. */
LK_API lk_status lk_graph_info(const lk_graph *g, int *native, int64_t *ops);

/* Frees the graph (NULL is a no-op).  Its launches must have completed
 * (lk_queue_sync on GPUs). */
LK_API void lk_graph_destroy(lk_graph *g);

LK_END_DECLS

#endif
