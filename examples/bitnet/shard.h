/* BitNet example: the decoder of model.h split across the ranks of a
 * communicator (include/lockstep/comm.h), with the same logits as one
 * device, bit for bit, at any number of ranks.
 *
 * Tensor parallelism (BN_SHARD_TP): rank r of N holds
 *   - the KV heads n_kv * r / N .. n_kv * (r + 1) / N and their query
 *     heads (q, k, v projections split by output rows: exact, every output
 *     element is the one-device dot product), its part of the KV cache and
 *     the attention of those heads;
 *   - the rows dim * r / N .. of the output and down projections, the rows
 *     ffn * r / N .. of gate and up, and the vocabulary rows
 *     vocab * r / N .. of the LM head.
 * The activations that feed a norm are all-gathered first (exact: a copy),
 * so every norm, every activation quantisation and every residual add is
 * the one-device arithmetic on the whole vector: BitNet's sub-norms need
 * the sum of squares of the whole attention output and FFN activation in
 * the contract's lane order, which no sum of per-rank partials gives.  The
 * next token is lk_comm_argmax over the vocabulary shards: the one-device
 * argmax, ties to the lowest index.
 *
 * Pipeline parallelism (BN_SHARD_PP): rank r holds the layers
 * n_layer * r / N .. n_layer * (r + 1) / N; the activations of a
 * micro-batch go to the next rank as soon as its layers are done, so
 * micro-batches are in flight on several ranks at once.  Rank 0 embeds the
 * tokens, the last rank runs the head and broadcasts the next tokens.
 *
 * Every rank calls every function with the same arguments (collective). */
#ifndef LK_EXAMPLES_BITNET_SHARD_H
#define LK_EXAMPLES_BITNET_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep.h>

#include "model.h"

typedef struct bn_shard bn_shard;

#define BN_SHARD_TP 1
#define BN_SHARD_PP 2

/* The shard of w this rank holds, on dev (the device attached to comm).
 * micro: PP micro-batches per call (1 .. max_batch; TP ignores it).
 * flags: BN_PREPARED as bn_model_create; BN_GRAPH: with the NCCL transport
 * (TP), each batch size's decode layers run as one captured graph from its
 * second decode step on (the same bits; the head runs eagerly after).
 * Elsewhere the steps run eagerly: MPI's collectives are host calls that
 * a graph cannot replay. */
int bn_shard_create(lk_comm *comm, lk_device *dev, int threads, const bn_weights *w, int mode,
                    int64_t max_batch, int64_t max_tokens, int64_t micro, unsigned flags,
                    bn_shard **out, char *err, size_t errlen);
void bn_shard_destroy(bn_shard *s);
/* 1 when decode steps run as graphs (BN_GRAPH took effect). */
int bn_shard_graphs(const bn_shard *s);
/* What this rank holds, one line. */
void bn_shard_describe(const bn_shard *s, char *buf, size_t len);
/* bn_model_forward across the ranks: ids (B x T) matter on rank 0 (TP: on
 * every rank, the same); next[b] lands on every rank. */
int bn_shard_forward(bn_shard *s, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                     int32_t *next, char *err, size_t errlen);
/* PP decode of steps steps of B sequences at positions pos0 .. from the
 * tokens ids (on rank 0), with the micro-batches of successive steps in
 * flight: while the last rank finishes micro-batch k of a step, rank 0
 * starts micro-batch k + 1 or the next step's k.  No rank waits on the
 * host inside; with BN_GRAPH each micro-batch's work on a rank is a graph.
 * tokens (rank 0): steps x B, each step's next tokens, bn_shard_forward's
 * bits.  The cache rows of the B sequences are written as
 * bn_shard_forward's steps would. */
int bn_shard_decode_pipelined(bn_shard *s, int64_t B, int64_t steps, int64_t pos0,
                              const int32_t *ids, int32_t *tokens, char *err, size_t errlen);
/* The logits of the last forward call's B sequences (B x vocab) into
 * logits on rank 0 (others pass NULL or anything: ignored). */
int bn_shard_logits(bn_shard *s, int64_t B, float *logits, char *err, size_t errlen);
/* The built-in weights (bn_weights_generate's, from seed) in the rows
 * this rank's shard reads (mode, rank, size as bn_shard_create will
 * see them); the other rows stay zero pages, never drawn nor touched, so
 * a rank holds about its share of a large model.  Drawn on
 * LOCKSTEP_NUM_THREADS threads (default: every core). */
int bn_shard_weights(bn_weights *w, const bn_config *cfg, uint64_t seed, int mode, int rank,
                     int size, char *err, size_t errlen);
/* Bytes of weights this rank holds (ternary at 2 bits, the bf16 head). */
double bn_shard_weight_bytes(const bn_shard *s);

#endif
