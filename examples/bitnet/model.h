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
 * devices), activations and KV caches for up to max_batch sequences of
 * max_tokens tokens per call and cfg.max_ctx positions. */
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
int bn_model_create(lk_device *dev, int threads, const bn_weights *w, int64_t max_batch,
                    int64_t max_tokens, unsigned flags, bn_model **out, char *err,
                    size_t errlen);
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

#endif
