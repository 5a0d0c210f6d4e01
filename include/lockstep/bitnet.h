/* Lockstep: the decoder layers of a BitNet b1.58 model as one op.
 *
 * A decode step of a transformer is a few dozen small ops per layer; on a
 * GPU each op is a kernel whose launch, ramp-up and wait for its
 * predecessor cost about as much as its work.  lk_bitnet_decode runs the
 * layers of one decode step (one new token per sequence) as one call, so
 * that a device can run them as one kernel, and is defined as the
 * composition of the ops below, bit for bit (docs/numerics.md section
 * 12.6): it gives what those calls give, on every device.
 *
 * For layer l in order, with B sequences (x: B x dim, one row each), the
 * f32 intermediates in the scratch memory the caller provides, and
 * qd = n_head head_dim, kvd = n_kv head_dim:
 *
 *   lk_rmsnorm_ternary_linear(x, attn_norm, eps, xq, xs, qkv, QKV, 0)
 *   lk_rope(QKV[:, 0 : qd + kvd], pos, head_dim, theta, rope_flags)  (q, k)
 *   lk_set_rows(QKV[:, qd : qd + 2 kvd], idx, kv)   idx[b] = b ctx + pos[b]
 *   lk_attention(QKV[:, 0 : qd], kv[:, 0 : kvd], kv[:, kvd : 2 kvd], pos,
 *                n_head, n_kv, attn_scale, ATT, B)   sequence b: the cache
 *                rows b ctx .. b ctx + ctx - 1 (cache_len = ctx)
 *   lk_rmsnorm_ternary_linear(ATT, attn_sub_norm, eps, xq, xs, o, x,
 *                             LK_GEMM_ACCUMULATE)
 *   lk_rmsnorm_ternary_linear(x, ffn_norm, eps, xq, xs, gate_up, GU, 0)
 *   lk_glu(LK_UNARY_RELU2, GU[:, 0 : ffn], GU[:, ffn : 2 ffn], G)
 *   lk_rmsnorm_ternary_linear(G, ffn_sub_norm, eps, xq, xs, down, x,
 *                             LK_GEMM_ACCUMULATE)
 *
 * Outputs: x (the residual stream, updated in place) and row b ctx +
 * pos[b] of every layer's cache.  The scratch memory's contents after the
 * call are unspecified (a device may keep other intermediates there). */
#ifndef LOCKSTEP_BITNET_H
#define LOCKSTEP_BITNET_H

#include <stddef.h>

#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/status.h>
#include <lockstep/types.h>
#include <lockstep/weights.h>

LK_BEGIN_DECLS

/* The shape of the model (BitNet-2B-4T: dim 2560, n_head 20, n_kv 5,
 * head_dim 128, ffn 6912, eps 1e-5, theta 500000, attn_scale
 * 1/sqrt(128), LK_ROPE_NEOX). */
typedef struct lk_bitnet_config {
    int64_t dim;       /* the residual stream's width */
    int64_t n_head;    /* query heads */
    int64_t n_kv;      /* key/value heads; divides n_head */
    int64_t head_dim;  /* even */
    int64_t ffn;       /* the FFN's hidden width */
    float eps;         /* every RMSNorm's eps */
    float theta;       /* RoPE base, finite and > 0 */
    float attn_scale;  /* multiplies each attention score */
    unsigned rope_flags; /* LK_ROPE_NEOX or LK_ROPE_INTERLEAVED */
} lk_bitnet_config;

/* One layer: LK_T2 weights prepared on the queue's device
 * (lk_weights_prepare; N x K as y = x . W^T), f32 norm weights (1 x n, or
 * NULL for none) and the layer's f32 KV cache. */
typedef struct lk_bitnet_layer {
    const lk_weights *qkv;       /* (n_head + 2 n_kv) head_dim x dim: q, k, v rows */
    const lk_weights *o;         /* dim x n_head head_dim */
    const lk_weights *gate_up;   /* 2 ffn x dim: the gate rows, then the up rows */
    const lk_weights *down;      /* dim x ffn */
    const lk_tensor *attn_norm;     /* 1 x dim */
    const lk_tensor *attn_sub_norm; /* 1 x n_head head_dim */
    const lk_tensor *ffn_norm;      /* 1 x dim */
    const lk_tensor *ffn_sub_norm;  /* 1 x ffn */
    /* at least B ctx rows x 2 n_kv head_dim: row b ctx + j holds sequence
     * b's key (the first n_kv head_dim columns) and value at position j */
    const lk_tensor *kv;
} lk_bitnet_layer;

/* Bytes of scratch memory lk_bitnet_decode needs for `batch` sequences
 * (0 when the configuration's sizes overflow). */
LK_API size_t lk_bitnet_decode_scratch(const lk_bitnet_config *c, int64_t batch);

/* The n_layers layers, in order, for one new token of each of the B
 * sequences: x (f32 B x dim, updated in place), pos (LK_I32 B x 1, each
 * in [0, ctx): the token's position), ctx (1 .. 2^24: cache rows per
 * sequence), scratch (device memory of at least
 * lk_bitnet_decode_scratch(c, B) bytes, 16-byte aligned).  Everything is
 * checked before anything is written; a position outside [0, ctx) is
 * LK_ERR_RANGE (inside a captured graph: nothing written, reported by the
 * next lk_queue_sync, as lk_set_rows).  x, the caches and the scratch
 * may not overlap each other or the norm weights (LK_ERR_ALIASING).
 * Every device takes the call (the reference and CPU devices run the
 * composition above); a CUDA GPU of compute capability 9.0 runs the
 * layers as one kernel for B <= 4 and ctx <= 4096, other shapes as the
 * composition (which it cannot capture in a graph: LK_ERR_UNSUPPORTED
 * under capture).  docs/api.md, "BitNet decode". */
LK_API lk_status lk_bitnet_decode(lk_queue *q, const lk_bitnet_config *c,
                                  const lk_bitnet_layer *layers, int64_t n_layers,
                                  const lk_tensor *x, const lk_tensor *pos, int64_t ctx,
                                  void *scratch, size_t scratch_bytes);

LK_END_DECLS

#endif
