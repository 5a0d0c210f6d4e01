/* Lockstep: the ops.  docs/numerics.md gives, for each one, the exact order
 * of operations every device follows; docs/api.md the argument rules.
 *
 * Common rules
 * - Every op runs on a queue; its tensors must be reachable by the queue's
 *   device (host memory for "ref"/"cpu*", lk_malloc'd memory for GPUs).
 * - Floating tensors may be LK_F32, LK_BF16 or LK_F16 unless stated; inputs
 *   are widened exactly to f32, arithmetic is f32, outputs are rounded to
 *   nearest even once at the store, NaN stored canonical.
 * - A tensor with 0 rows (or a GEMM with M or N = 0) is a valid no-op.
 * - Outputs may not overlap inputs, except that element-wise ops may run in
 *   place (output identical to an input: same data, dtype size and ld).
 * - On any error nothing is written. */
#ifndef LOCKSTEP_OPS_H
#define LOCKSTEP_OPS_H

#include <lockstep/device.h>
#include <lockstep/export.h>
#include <lockstep/status.h>
#include <lockstep/types.h>

LK_BEGIN_DECLS

/* ---------------------------------------------------------------- GEMM */

typedef enum lk_transpose { LK_NO_TRANS = 0, LK_TRANS = 1 } lk_transpose;

enum lk_gemm_flags {
    LK_GEMM_ACCUMULATE = 1u << 0, /* C = A.B (+ bias) + C */
    /* Tensor-core tier (docs/numerics.md, "Tensor-core tier": its own contract):
     * A and B both bf16 or both f16, the product computed with the MMA
     * arithmetic of that GPU generation -- bit for bit on such a GPU and,
     * through the exact CPU model, on every CPU device.  At most one. */
    LK_GEMM_TC_SM80 = 1u << 1, /* Ampere/Ada (sm_80, sm_86, sm_89) mma */
    LK_GEMM_TC_SM90 = 1u << 2  /* Hopper (sm_90) mma/wgmma */
};

/* C[b] = op(A[b]) . op(B[b]) (+ bias) (+ C[b]) for b in [0, batch).
 * op(A) is M x K: a is M x K, or K x M with ta = LK_TRANS.
 * op(B) is K x N: b is K x N, or N x K with tb = LK_TRANS.
 * c is M x N (f32, bf16 or f16); bias is NULL or 1 x N; batch >= 1, with
 * each tensor's batch_stride (0 = shared, inputs only).  A and B have one
 * dtype among f32/bf16/f16 each, freely mixed. */
LK_API lk_status lk_gemm(lk_queue *q, lk_transpose ta, lk_transpose tb,
                         const lk_tensor *a, const lk_tensor *b,
                         const lk_tensor *bias, const lk_tensor *c,
                         int64_t batch, unsigned flags);

/* ----------------------------------------------------- row reductions */

typedef enum lk_reduce_op {
    LK_REDUCE_SUM = 1,
    LK_REDUCE_MEAN = 2,
    LK_REDUCE_MAX = 3,          /* IEEE 754-2019 maximum: NaN wins, -0 < +0 */
    LK_REDUCE_MIN = 4,          /* IEEE 754-2019 minimum */
    LK_REDUCE_VAR = 5,          /* population variance (divide by n) */
    LK_REDUCE_VAR_UNBIASED = 6, /* divide by n - 1 */
    LK_REDUCE_ARGMAX = 7        /* lowest index wins ties; NaN is largest */
} lk_reduce_op;

/* y[r] = op(x[r, 0..cols)).  x has cols >= 1; y is rows x 1 (its ld is the
 * stride between results), float, or LK_I64 for ARGMAX. */
LK_API lk_status lk_reduce(lk_queue *q, lk_reduce_op op, const lk_tensor *x,
                           const lk_tensor *y);

/* -------------------------------------------------- norms and softmax */

/* y = x / sqrt(mean(x^2) + eps) * weight; weight NULL or 1 x cols. */
LK_API lk_status lk_rmsnorm(lk_queue *q, const lk_tensor *x, const lk_tensor *weight,
                            float eps, const lk_tensor *y);

/* y = (x - mean) / sqrt(var + eps) * weight + bias; weight, bias NULL or
 * 1 x cols. */
LK_API lk_status lk_layernorm(lk_queue *q, const lk_tensor *x, const lk_tensor *weight,
                              const lk_tensor *bias, float eps, const lk_tensor *y);

LK_API lk_status lk_softmax(lk_queue *q, const lk_tensor *x, const lk_tensor *y);
LK_API lk_status lk_log_softmax(lk_queue *q, const lk_tensor *x, const lk_tensor *y);

/* --------------------------------------------------------- element-wise */

typedef enum lk_unary_op {
    LK_UNARY_COPY = 1,      /* conversion between float dtypes */
    LK_UNARY_RELU = 2,
    LK_UNARY_RELU2 = 3,     /* relu(x)^2 */
    LK_UNARY_SIGMOID = 4,
    LK_UNARY_SILU = 5,
    LK_UNARY_GELU_TANH = 6,
    LK_UNARY_GELU_ERF = 7,
    LK_UNARY_EXP = 8,
    LK_UNARY_LOG = 9,
    LK_UNARY_TANH = 10,
    LK_UNARY_ERF = 11
} lk_unary_op;

/* y = f(x), same shape. */
LK_API lk_status lk_unary(lk_queue *q, lk_unary_op op, const lk_tensor *x,
                          const lk_tensor *y);

/* y = x converted to y's dtype (lk_unary with LK_UNARY_COPY). */
LK_API lk_status lk_convert(lk_queue *q, const lk_tensor *x, const lk_tensor *y);

typedef enum lk_binary_op {
    LK_BINARY_ADD = 1,
    LK_BINARY_MUL = 2
} lk_binary_op;

/* y = a op b; b has a's shape, or is 1 x cols and broadcast over rows. */
LK_API lk_status lk_binary(lk_queue *q, lk_binary_op op, const lk_tensor *a,
                           const lk_tensor *b, const lk_tensor *y);

/* Gated linear unit: y = unary(op, gate) * up, element by element, gate, up
 * and y one shape (any ld); the bits of lk_unary(op, gate -> f32) then
 * lk_binary(LK_BINARY_MUL, that, up -> y) in one pass (ReLU^2, SwiGLU,
 * GeGLU gating).  y may be gate or up itself. */
LK_API lk_status lk_glu(lk_queue *q, lk_unary_op op, const lk_tensor *gate,
                        const lk_tensor *up, const lk_tensor *y);

/* --------------------------------------------------------- quantisation */

/* BitNet b1.58 activations, per row: s = 127 / max(absmax, 1e-5),
 * q = clamp(rne(x * s), -128, 127).  q is LK_I8 with x's shape, scale is
 * rows x 1 f32 and receives s (x ~ q / s). */
LK_API lk_status lk_quantize_act(lk_queue *q, const lk_tensor *x, const lk_tensor *xq,
                                 const lk_tensor *scale);

/* The bits of lk_rmsnorm(q, x, weight, eps, y) with y f32 rows x cols,
 * then lk_quantize_act(q, y, xq, scale), without y: the input of a
 * ternary projection in one pass.  x and weight as for lk_rmsnorm, x has
 * cols >= 1; xq LK_I8 with x's shape, scale rows x 1 f32. */
LK_API lk_status lk_rmsnorm_quantize(lk_queue *q, const lk_tensor *x, const lk_tensor *weight,
                                     float eps, const lk_tensor *xq, const lk_tensor *scale);

/* BitNet b1.58 weights, whole tensor: m = max(mean(|w|), 1e-5),
 * t = clamp(rne(w / m), -1, 1), packed into wq (LK_T2, w's shape); scale
 * is 1 x 1 f32 and receives m (w ~ t * m). */
LK_API lk_status lk_quantize_ternary(lk_queue *q, const lk_tensor *w, const lk_tensor *wq,
                                     const lk_tensor *scale);

/* LK_I8 values in {-1, 0, 1} <-> LK_T2, same shape.  pack refuses any other
 * value with LK_ERR_INVALID_VALUE (writing nothing); unpack of the reserved
 * code 3 gives 2 (docs/formats.md). */
LK_API lk_status lk_ternary_pack(lk_queue *q, const lk_tensor *w, const lk_tensor *wq);
LK_API lk_status lk_ternary_unpack(lk_queue *q, const lk_tensor *wq, const lk_tensor *w);

/* --------------------------------------------------------- integer GEMM */

/* y[m, n] = ((float)acc / x_scale[m]) * w_scale[n or 0],
 * acc = sum_k xq[m, k] * w[n, k] exactly in int32.
 * xq: LK_I8 M x K; x_scale: f32 M x 1 (the s of lk_quantize_act);
 * w: LK_T2 N x K; w_scale: f32 1 x 1 or 1 x N; y: float M x N.
 * K <= 8388608 so that int32 cannot overflow. */
LK_API lk_status lk_ternary_gemm(lk_queue *q, const lk_tensor *xq, const lk_tensor *x_scale,
                                 const lk_tensor *w, const lk_tensor *w_scale,
                                 const lk_tensor *y);

/* acc[m, n] = sum_k a[m, k] * b[n, k] exactly in int32 (a: LK_I8 M x K,
 * b: LK_I8 N x K, K <= 131071 since (-128)(-128) = 2^14 per term).  With
 * a_scale and b_scale NULL, c is LK_I32 and receives acc; with both given (as for lk_ternary_gemm),
 * c is float and receives ((float)acc / a_scale[m]) * b_scale[n or 0]. */
LK_API lk_status lk_int8_gemm(lk_queue *q, const lk_tensor *a, const lk_tensor *b,
                              const lk_tensor *a_scale, const lk_tensor *b_scale,
                              const lk_tensor *c);

/* The limits above, as constants. */
#define LK_TERNARY_MAX_K 8388608
#define LK_INT8_MAX_K 131071

/* ----------------------------------------------------- transformer ops
 * RoPE, causal GQA attention over a KV cache, embedding lookup
 * (docs/numerics.md section 12). */

enum lk_rope_flags {
    LK_ROPE_NEOX = 0,              /* pairs (i, i + head_dim/2): HF rotate_half,
                                      Llama, BitNet b1.58 */
    LK_ROPE_INTERLEAVED = 1u << 0  /* pairs (2i, 2i + 1): GPT-J, Meta's original */
};

/* Rotary position embedding of every head of every token.
 * x, y: tokens x (n_heads * head_dim), float; y may be x (in place: same
 * data, dtype size and ld).  pos: LK_I32 tokens x 1, the position of each
 * token (any int32; angles beyond LK_ROPE_MAX_ANGLE give NaN).  head_dim is
 * even, >= 2 and divides x's cols; theta > 0 and finite (10000 for Llama 2,
 * 500000 for Llama 3 and BitNet-2B-4T).  Pair i of a head
 * (0 <= i < head_dim/2) turns by angle (float)pos * theta^(-2i/head_dim):
 * y0 = x0 cos - x1 sin, y1 = x1 cos + x0 sin. */
LK_API lk_status lk_rope(lk_queue *q, const lk_tensor *x, const lk_tensor *pos,
                         int64_t head_dim, float theta, unsigned flags,
                         const lk_tensor *y);

/* Causal attention with grouped KV heads over a KV cache, for a batch of
 * independent sequences (b in [0, batch), each tensor advanced by its
 * batch_stride; 0 shares it across the batch, inputs only).
 * qry: tokens x (n_head * head_dim), float.
 * k, v: the sequence's cache, cache_len x (n_kv * head_dim), float (rows are
 *   cache positions; rows beyond a token's position are never read).
 * pos: LK_I32 tokens x 1: token t attends to the cache rows
 *   0 .. min(pos[t], cache_len - 1) (a negative position: none, output +0).
 * out: tokens x (n_head * head_dim), float; it may not overlap an input.
 * n_kv >= 1 divides n_head; query head h reads kv head h / (n_head / n_kv).
 * scale multiplies each score (1/sqrt(head_dim) usually).
 * Prefill: write the new rows of k and v first (e.g. lk_convert into the
 * cache), then call with the prompt's tokens and positions; decode is the
 * same call with one token per sequence.  A sequence's result depends on
 * its own tensors only. */
LK_API lk_status lk_attention(lk_queue *q, const lk_tensor *qry, const lk_tensor *k,
                              const lk_tensor *v, const lk_tensor *pos, int64_t n_head,
                              int64_t n_kv, float scale, const lk_tensor *out,
                              int64_t batch);

/* y[r] = table[ids[r]] converted to y's dtype (f32, bf16 or f16; table
 * f32, bf16 or f16, vocab x dim; ids LK_I32 n x 1; y n x dim).  An id
 * outside [0, vocab) fails with LK_ERR_RANGE before anything is written. */
LK_API lk_status lk_embedding(lk_queue *q, const lk_tensor *table, const lk_tensor *ids,
                              const lk_tensor *y);

/* dst[idx[r]] = src[r] for every row r of src: the scatter counterpart of
 * lk_embedding (ggml's SET_ROWS), e.g. new rows into a KV cache at
 * positions held on the device.  src n x C and dst R x C of the same
 * dtype (any but LK_T2; any ld); idx LK_I32 n x 1.  Every element's bits
 * are copied unchanged (NaN payloads too, as lk_memcpy); dst rows no index
 * names are left as they were.  Two rows with the same index: the last
 * one (largest r) wins, on every device.  An index outside [0, R) fails
 * with LK_ERR_RANGE before anything is written (inside a captured graph:
 * nothing written, reported by the next lk_queue_sync, as lk_embedding).
 * src and idx may not overlap dst (docs/numerics.md section 12.4.1). */
LK_API lk_status lk_set_rows(lk_queue *q, const lk_tensor *src, const lk_tensor *idx,
                             const lk_tensor *dst);

/* Paged KV cache.  The keys and values of many sequences live in pools of
 * fixed-size pages: k_pool and v_pool are (n_pages * page_size) x
 * (n_kv * head_dim), float (any ld; k and v may be column slices of one
 * tensor).  block_table is LK_I32 n_seq x max_pages: row s lists the page
 * ids of sequence s in order, so its key j lives in pool row
 * block_table[s][j / page_size] * page_size + j % page_size; an entry < 0
 * is "no page" (never read, shared by nobody).  seq and pos are LK_I32
 * rows x 1: row r of a call belongs to sequence seq[r] at position pos[r].
 *
 * lk_attention_paged: query row r attends to keys 0 .. pos[r] of sequence
 * seq[r] (a negative position: none, output +0) with the bits lk_attention
 * gives over the same keys (page_size changes no bit).  qry and out are
 * rows x (n_head * head_dim), float; rows may mix sequences and lengths
 * (decode rows, chunks of prefills).  Before anything is written the core
 * reads block_table, seq and pos (a copy and a queue sync on GPUs) and
 * refuses with LK_ERR_RANGE a seq outside [0, n_seq), a position whose page
 * is beyond the table (pos[r] / page_size >= max_pages), or a page the row
 * reads that is outside [0, n_pages); page_size < 1 is
 * LK_ERR_INVALID_ARGUMENT.  Not inside a captured graph
 * (LK_ERR_UNSUPPORTED): the table is checked on the host. */
LK_API lk_status lk_attention_paged(lk_queue *q, const lk_tensor *qry, const lk_tensor *k_pool,
                                    const lk_tensor *v_pool, const lk_tensor *block_table,
                                    const lk_tensor *seq, const lk_tensor *pos,
                                    int64_t page_size, int64_t n_head, int64_t n_kv,
                                    float scale, const lk_tensor *out);

/* The paged KV write: row r of k_new and v_new (rows x (n_kv * head_dim),
 * the pools' dtype) is copied bit for bit into the pool row of key pos[r]
 * of sequence seq[r] (as lk_set_rows; two rows naming one slot: the last
 * wins).  Refused with LK_ERR_RANGE before anything is written: a seq
 * outside the table, a position < 0 or beyond the table's pages, a page id
 * outside [0, n_pages), and a page that appears more than once in the
 * whole table (a page shared with another sequence, such as a common
 * prefix, is read-only: copy it to a page of its own first). */
LK_API lk_status lk_kv_write_paged(lk_queue *q, const lk_tensor *k_new, const lk_tensor *v_new,
                                   const lk_tensor *k_pool, const lk_tensor *v_pool,
                                   const lk_tensor *block_table, const lk_tensor *seq,
                                   const lk_tensor *pos, int64_t page_size);

/* Keys per chunk of attention's order (docs/numerics.md section 12.3). */
#define LK_ATTENTION_CHUNK 64

/* |angle| above which lk_rope's sin and cos give NaN (2^22). */
#define LK_ROPE_MAX_ANGLE 4194304.0f

/* ------------------------------------------------------------ training
 * Backward ops and optimizer steps (docs/numerics.md section 13).  Column
 * sums over rows (a weight's or a bias's gradient) are lk_gemm with a
 * 1 x rows row of ones as A: section 4 fixes their order. */

/* dx = dy * f'(x), element by element, f being lk_unary's op (COPY:
 * dx = dy).  x, dy, dx one shape; dx may be dy itself (in place). */
LK_API lk_status lk_unary_backward(lk_queue *q, lk_unary_op op, const lk_tensor *x,
                                   const lk_tensor *dy, const lk_tensor *dx);

/* The gradient of lk_softmax (log = 0) or lk_log_softmax (log = 1) with
 * respect to its input, row by row, from the forward's output y and the
 * output's gradient dy: dx = (dy - sum(dy * y)) * y, or
 * dx = dy - exp(y) * sum(dy).  y, dy, dx one shape with cols >= 1; dx may
 * be dy itself. */
LK_API lk_status lk_softmax_backward(lk_queue *q, const lk_tensor *y, const lk_tensor *dy,
                                     int log, const lk_tensor *dx);

/* The gradients of lk_rmsnorm (layer = 0) or lk_layernorm (layer = 1)
 * from the forward's input x, weight (NULL or 1 x cols) and eps and the
 * output's gradient dy: dx (x's shape), and, when dwt is not NULL, the
 * weight gradient's terms dwt[r, i] = dy[r, i] * xhat[r, i] (rows x cols;
 * the weight's gradient is their column sum, the bias's that of dy). */
LK_API lk_status lk_norm_backward(lk_queue *q, int layer, const lk_tensor *x,
                                  const lk_tensor *weight, const lk_tensor *dy, float eps,
                                  const lk_tensor *dx, const lk_tensor *dwt);

/* The gradient of lk_embedding: dtable[ids[r]] += dy[r] for r = 0, 1, ...
 * in ascending order (no atomics: every device adds the rows in the same
 * order).  dtable f32 vocab x dim, accumulated into (zero it first for a
 * plain gradient); dy float n x dim; ids LK_I32 n x 1, each in [0, vocab)
 * or LK_ERR_RANGE before anything is written.  Not inside a captured
 * graph (the ids are checked on the host). */
LK_API lk_status lk_embedding_backward(lk_queue *q, const lk_tensor *dy, const lk_tensor *ids,
                                       const lk_tensor *dtable);

enum lk_sgd_flags {
    LK_SGD_NESTEROV = 1u << 0,
    LK_SGD_FIRST = 1u << 1 /* the momentum buffer is set to the gradient */
};

/* One step of SGD (PyTorch's torch.optim.SGD, foreach=False) on every
 * element: param f32; grad float, param's shape; buf f32, param's shape,
 * the momentum buffer (NULL when momentum is 0). */
LK_API lk_status lk_sgd_step(lk_queue *q, const lk_tensor *param, const lk_tensor *grad,
                             const lk_tensor *buf, float lr, float momentum, float dampening,
                             float weight_decay, unsigned flags);

/* One step of AdamW (torch.optim.AdamW, amsgrad=False) on every element:
 * param f32; grad float; m and v f32 (the moments, zero before step 1),
 * all one shape; step >= 1 counts the steps including this one. */
LK_API lk_status lk_adamw_step(lk_queue *q, const lk_tensor *param, const lk_tensor *grad,
                               const lk_tensor *m, const lk_tensor *v, float lr, float beta1,
                               float beta2, float eps, float weight_decay, int64_t step);

LK_END_DECLS

#endif
