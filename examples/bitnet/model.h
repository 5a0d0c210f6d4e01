/* BitNet example: a BitNet b1.58 decoder built from Lockstep's ops.
 *
 * Per layer (the BitNet b1.58 2B4T architecture, HF modeling_bitnet.py):
 *   h = x;  x = rmsnorm(x, attn_norm)
 *   q, k, v = BitLinear(x)              int8 per-token activations
 *   q, k = rope(q, k);  k, v -> KV cache
 *   a = attention(q, cache)             causal, grouped KV heads
 *   x = h + BitLinear_o(rmsnorm(a, attn_sub_norm))
 *   h = x;  x = rmsnorm(x, ffn_norm)
 *   f = relu(gate(x))^2 * up(x)         (silu(gate(x)) * up(x): bn_weights.ffn_act)
 *   x = h + BitLinear_down(rmsnorm(f, ffn_sub_norm))
 * then rmsnorm(x, output_norm), logits = x . E^T with the bf16 token
 * embedding E (tied LM head) and greedy argmax.  BitLinear(x) is
 * lk_quantize_act (s = 127 / absmax per token) then lk_ternary_gemm with the
 * LK_T2 weights and their scale.
 *
 * Every op is one Lockstep call, so the logits are the same bits on every
 * device; a batch of B sequences runs as one call per op with the rows of
 * sequence b at b * T .. b * T + T - 1, and since every op's row r depends
 * on row r alone (attention on its own sequence's cache), a sequence's
 * logits do not depend on the others in the batch. */
#ifndef LK_EXAMPLES_BITNET_MODEL_H
#define LK_EXAMPLES_BITNET_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep.h>

#include "gguf.h"

typedef struct bn_config {
    int64_t n_layer, dim, n_head, n_kv, head_dim, ffn, vocab, max_ctx;
    float theta, eps;
    unsigned rope_flags; /* LK_ROPE_NEOX or LK_ROPE_INTERLEAVED */
} bn_config;

/* BitNet-2B-4T's shapes (hidden 2560, 20 heads, 5 KV heads of 128, FFN
 * 6912, vocab 128256, theta 500000, eps 1e-5) with n_layer layers. */
bn_config bn_config_2b4t(int64_t n_layer);
/* A tiny model for tests (every K a multiple of 256, so that every GGUF
 * ternary type can hold it). */
bn_config bn_config_tiny(int64_t n_layer);

typedef struct bn_layer_w {
    float *attn_norm, *attn_sub_norm, *ffn_norm, *ffn_sub_norm;
    lkg_ternary wq, wk, wv, wo, wgate, wup, wdown;
} bn_layer_w;

/* The weights in host memory, in Lockstep's formats. */
typedef struct bn_weights {
    bn_config cfg;
    uint16_t *embd;    /* vocab x dim bf16 */
    uint16_t *lm_head; /* vocab x dim bf16, or NULL: tied to embd */
    float *out_norm;
    bn_layer_w *layers;
    /* how the file's architecture runs them (arch.h); 0 and NULL for
     * generated weights: relu^2 and "bitnet-b1.58" */
    int ffn_act;      /* the FFN gate's lk_unary_op: LK_UNARY_RELU2 or LK_UNARY_SILU */
    const char *arch; /* general.architecture bn_weights_to_gguf writes */
} bn_weights;

/* Weights drawn from a fixed seed (ternary codes uniform over -1, 0, +1,
 * one f16-exact scale per tensor; norms near 1; embedding uniform). */
int bn_weights_generate(bn_weights *w, const bn_config *cfg, uint64_t seed, char *err,
                        size_t errlen);
/* Weights from a GGUF file (llama.cpp / bitnet.cpp tensor names); the RoPE
 * pairing and FFN activation are those of the file's architecture (arch.h).  Ternary
 * projections may be TQ1_0, TQ2_0, I2_S (i2s_block 128 or 64), or float
 * tensors holding exactly {-s, 0, +s}. */
int bn_weights_from_gguf(bn_weights *w, const lkg_file *f, int i2s_block, int64_t max_ctx,
                         char *err, size_t errlen);
/* The weights as a GGUF file with the ternary projections in ttype
 * (LKG_T_TQ1_0, LKG_T_TQ2_0 or LKG_T_I2_S). */
int bn_weights_to_gguf(const bn_weights *w, uint32_t ttype, uint8_t **data, size_t *size,
                       char *err, size_t errlen);
void bn_weights_free(bn_weights *w);

/* The model on one device: weights (shared with the host on host-memory
 * devices), activations for a number of tokens per call, and a paged KV
 * cache (kvpages.h: one pool of pages per layer, a table of pages per
 * sequence) for a number of sequences of up to cfg.max_ctx positions each.
 * Sequences may share a prefix's pages (bn_seq_share); a call may mix
 * sequences of different lengths, prefill chunks and decode tokens
 * (bn_model_step).  A sequence's logits are the same bits however its
 * prompt was chunked, whatever else is in the call, and whether its prefix
 * came from shared pages: every op works row by row, and attention reads a
 * token's own sequence's keys 0 .. its position, in an order fixed by the
 * position alone (docs/numerics.md, attention). */
typedef struct bn_model bn_model;

/* flags: BN_PREPARED keeps the projections and the LM head as prepared
 * weights (include/lockstep/weights.h: the same bits, the device's fastest
 * layout; a copy per device), falling back to the plain ops where a device
 * cannot prepare them. */
#define BN_PREPARED 1u
/* flags: BN_GRAPH runs each decode step (one token per sequence) as one
 * captured graph (include/lockstep/graph.h), captured at the first decode
 * step of a batch size and launched for every token after; the KV-cache
 * stores inside it are lk_set_rows with the destination rows uploaded
 * before each launch.  The same bits as the eager calls. */
#define BN_GRAPH 2u
/* flags: BN_LAYERS_OP runs the layers of a decode step as one
 * lk_bitnet_decode call (include/lockstep/bitnet.h) where every projection
 * is prepared (with BN_PREPARED): a GPU runs them as one kernel.  The same
 * bits as the ops one by one. */
#define BN_LAYERS_OP 4u
/* bn_model_create_ex's sizes; 0 in a field: its default. */
typedef struct bn_model_opts {
    int64_t max_seqs;  /* sequences (ids 0 .. max_seqs - 1) and entries per call */
    int64_t max_rows;  /* tokens per call, all entries together */
    int64_t page_size; /* cache rows per page (default 64) */
    int64_t n_pages;   /* pages per layer (default: max_seqs * ceil(max_ctx / page_size),
                        * every sequence its full context) */
    unsigned flags;    /* BN_* */
} bn_model_opts;
int bn_model_create_ex(lk_device *dev, int threads, const bn_weights *w, const bn_model_opts *o,
                       bn_model **out, char *err, size_t errlen);
/* bn_model_create_ex with max_batch sequences and max_batch * max_tokens
 * rows per call. */
int bn_model_create(lk_device *dev, int threads, const bn_weights *w, int64_t max_batch,
                    int64_t max_tokens, unsigned flags, bn_model **out, char *err,
                    size_t errlen);
/* Bytes of KV cache the model holds (every layer's pool). */
uint64_t bn_model_kv_bytes(const bn_model *m);
/* Bytes of KV cache a decode token at context n (positions 0 .. n - 1
 * cached) reads over every layer. */
uint64_t bn_kv_bytes_read(const bn_config *c, int64_t n);
/* How many weight tensors are prepared (0 without BN_PREPARED). */
int bn_model_prepared(const bn_model *m);
/* 1 when decode steps run their layers as one lk_bitnet_decode call. */
int bn_model_layers_op(const bn_model *m);
/* How the last decode step ran: 0 eagerly, 1 as graphs the core replays,
 * 2 as native (CUDA) graphs. */
int bn_model_graph_mode(const bn_model *m);
void bn_model_destroy(bn_model *m);

/* Runs T tokens of each of B sequences (ids[b * T + t]) at positions
 * pos0 .. pos0 + T - 1 (the caches hold the positions before), and gives
 * the logits of each sequence's last token (logits[b * vocab + j], host
 * memory) and their argmax (next[b]). */
int bn_model_forward(bn_model *m, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                     float *logits, int32_t *next, char *err, size_t errlen);

/* Room on the device for the logits of `slots` forward calls of up to
 * max_batch sequences each (allocated once; a later call may only ask for
 * as many or fewer).  bn_model_forward_kept then leaves the logits in slot
 * s instead of copying them to the host: a timed decode loop reads back
 * only the next tokens, as generating text does, and bn_model_kept copies
 * the logits out afterwards.  0, or -1 with err (no device memory left). */
int bn_model_keep(bn_model *m, int64_t slots, char *err, size_t errlen);
/* bn_model_forward with the logits kept in slot s (bn_model_keep). */
int bn_model_forward_kept(bn_model *m, int64_t B, int64_t T, int64_t pos0, const int32_t *ids,
                          int64_t slot, int32_t *next, char *err, size_t errlen);
/* The logits kept in slot s, B sequences, into host memory. */
int bn_model_kept(bn_model *m, int64_t slot, int64_t B, float *logits, char *err, size_t errlen);

/* One entry of bn_model_step: n tokens appended to sequence seq at its
 * positions len .. len + n - 1 (len: bn_seq_len). */
typedef struct bn_entry {
    int64_t seq, n;
    const int32_t *ids;
} bn_entry;
/* Runs the entries (each sequence at most once, up to max_seqs entries and
 * max_rows tokens in all) as one forward call, and gives the logits of each
 * entry's last token (logits[e * vocab + j], host memory; NULL: none) and
 * their argmax (next[e]).  Bad input (a sequence out of range or twice,
 * a length past the context, an id outside the vocabulary, more pages than
 * the pool has free): -1 with err, and nothing written, no sequence
 * changed. */
int bn_model_step(bn_model *m, int64_t n, const bn_entry *e, float *logits, int32_t *next,
                  char *err, size_t errlen);
/* bn_model_step with the logits kept in slot s (bn_model_keep; read them
 * with bn_model_kept, n entries). */
int bn_model_step_kept(bn_model *m, int64_t n, const bn_entry *e, int64_t slot, int32_t *next,
                       char *err, size_t errlen);
/* Positions sequence s holds (0 for a new one). */
int64_t bn_seq_len(const bn_model *m, int64_t s);
/* Sequence s forgets everything from position n on (0: all), giving back
 * the pages it no longer needs. */
int bn_seq_truncate(bn_model *m, int64_t s, int64_t n, char *err, size_t errlen);
/* Sequence dst (emptied first) takes sequence src's first n positions:
 * their full pages shared, held by both; a last partial page is copied, so
 * that neither ever writes into a page the other reads. */
int bn_seq_share(bn_model *m, int64_t dst, int64_t src, int64_t n, char *err, size_t errlen);
/* Pages free in the pool, and in all. */
int64_t bn_model_free_pages(const bn_model *m);
int64_t bn_model_pages(const bn_model *m);
/* How the last call's attention ran: 0 batched over contiguous caches, 1
 * as the paged op, 2 one sequence at a time (caches gathered). */
int bn_model_attention_mode(const bn_model *m);

#endif
