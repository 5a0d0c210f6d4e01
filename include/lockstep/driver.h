/* Lockstep: the driver ABI.
 *
 * A driver provides devices; a device provides memory, queues and kernels.
 * Each level is an interface struct plus an opaque context pointer.  Built-in
 * drivers register through a static table; a module driver is a shared
 * object exporting one function,
 *
 *     LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
 *
 * whose lk_driver.abi_version must equal LK_DRIVER_ABI_VERSION: a module
 * built for another ABI is refused with a message naming both numbers.
 *
 * The core validates every argument before a kernel runs (shapes, strides,
 * dtypes, overflow, devices, aliasing) and normalises every lk_tensor
 * (ld != 0, absent optional tensors have data == NULL), so kernels may
 * assume valid input.  The only check left to kernels is one that needs the
 * data itself (lk_ternary_pack's values): it must complete before any
 * output is written.
 *
 * Kernels must follow docs/numerics.md to the bit.  A NULL kernel means the
 * device does not implement the op; supports() may refine that per call. */
#ifndef LOCKSTEP_DRIVER_H
#define LOCKSTEP_DRIVER_H

#include <stdarg.h>
#include <lockstep.h>

LK_BEGIN_DECLS

#define LK_DRIVER_ABI_VERSION 2u
#define LK_DRIVER_ENTRY_SYMBOL "lockstep_driver_entry"

#if defined(__GNUC__)
#define LK_DRIVER_EXPORT __attribute__((visibility("default")))
#else
#define LK_DRIVER_EXPORT
#endif

typedef enum lk_op {
    LK_OP_GEMM = 1,
    LK_OP_REDUCE,
    LK_OP_RMSNORM,
    LK_OP_LAYERNORM,
    LK_OP_SOFTMAX,
    LK_OP_LOG_SOFTMAX,
    LK_OP_UNARY,
    LK_OP_BINARY,
    LK_OP_QUANTIZE_ACT,
    LK_OP_QUANTIZE_TERNARY,
    LK_OP_TERNARY_PACK,
    LK_OP_TERNARY_UNPACK,
    LK_OP_TERNARY_GEMM,
    LK_OP_INT8_GEMM,
    LK_OP_ROPE,
    LK_OP_ATTENTION,
    LK_OP_EMBEDDING,
    LK_OP_RMSNORM_QUANTIZE,
    LK_OP_SET_ROWS,
    LK_OP_GLU,
    LK_OP_RMSNORM_TERNARY_LINEAR,
    LK_OP_BITNET_DECODE,
    LK_OP_ATTENTION_PAGED,
    LK_OP_KV_WRITE_PAGED,
    LK_OP_UNARY_BACKWARD,
    LK_OP_SOFTMAX_BACKWARD,
    LK_OP_NORM_BACKWARD,
    LK_OP_EMBEDDING_BACKWARD,
    LK_OP_OPTIM_STEP,
    LK_OP_COUNT_ /* not an op */
} lk_op;

/* Per-op arguments, validated and normalised by the core. */
typedef struct lk_gemm_args {
    lk_transpose ta, tb;
    int64_t m, n, k, batch;
    unsigned flags;      /* LK_GEMM_* */
    lk_tensor a, b, c;
    lk_tensor bias;      /* data == NULL: none */
} lk_gemm_args;

typedef struct lk_reduce_args {
    lk_reduce_op op;
    lk_tensor x, y;
} lk_reduce_args;

typedef struct lk_norm_args {   /* rmsnorm (bias unused) and layernorm */
    lk_tensor x, weight, bias, y; /* weight/bias data == NULL: none */
    float eps;
} lk_norm_args;

typedef struct lk_softmax_args { /* softmax and log-softmax */
    lk_tensor x, y;
} lk_softmax_args;

typedef struct lk_unary_args {
    lk_unary_op op;
    lk_tensor x, y;
} lk_unary_args;

typedef struct lk_binary_args {
    lk_binary_op op;
    lk_tensor a, b, y;   /* b.rows == 1 < a.rows: broadcast */
} lk_binary_args;

typedef struct lk_quant_args {   /* quantize_act and quantize_ternary */
    lk_tensor x, q, scale;
} lk_quant_args;

typedef struct lk_norm_quant_args { /* rmsnorm_quantize */
    lk_tensor x, weight, q, scale;  /* weight data == NULL: none */
    float eps;
} lk_norm_quant_args;

typedef struct lk_pack_args {    /* ternary pack and unpack */
    lk_tensor src, dst;
} lk_pack_args;

typedef struct lk_qgemm_args {   /* ternary_gemm and int8_gemm */
    int64_t m, n, k;
    lk_tensor x, x_scale, w, w_scale, y; /* scales data == NULL: int32 out */
    /* LK_GEMM_ACCUMULATE (lk_ternary_linear only; y f32, scales given):
     * y = y + the value stored without it, one f32 add; else 0 */
    unsigned flags;
} lk_qgemm_args;

typedef struct lk_rope_args {
    lk_tensor x, pos, y;   /* y.data == x.data: in place */
    int64_t head_dim;
    float theta;
    unsigned flags;        /* LK_ROPE_* */
} lk_rope_args;

typedef struct lk_attention_args {
    int64_t batch, tokens, n_head, n_kv, head_dim, cache_len;
    float scale;
    lk_tensor q, k, v, pos, y; /* batched: batch_stride read (0 = shared) */
} lk_attention_args;

/* attention_paged (include/lockstep/ops.h): row r reads keys 0 .. pos[r]
 * of sequence seq[r] through the block table.  The core has read table,
 * seq and pos: every page a row reads is in [0, n_pages), and max_keys is
 * the largest pos[r] + 1 (0 when every position is negative). */
typedef struct lk_attention_paged_args {
    int64_t rows, n_head, n_kv, head_dim, page_size, n_pages, max_keys;
    float scale;
    lk_tensor q, k, v, table, seq, pos, y; /* table: n_seq x max_pages */
} lk_attention_paged_args;

/* kv_write_paged: k[pool row of (seq[r], pos[r])] = k_new[r], v likewise;
 * checked by the core as for attention_paged, the pages written each named
 * once in the table. */
typedef struct lk_kv_write_paged_args {
    int64_t rows, page_size, n_pages;
    lk_tensor k_new, v_new, k, v, table, seq, pos;
} lk_kv_write_paged_args;

typedef struct lk_embedding_args { /* ids checked in [0, vocab), except under
                                     capture (see queue_capturing) */
    lk_tensor table, ids, y;
} lk_embedding_args;

typedef struct lk_set_rows_args { /* dst.dtype == src.dtype, not LK_T2; idx
                                     checked in [0, dst.rows) like
                                     lk_embedding's ids */
    lk_tensor src, idx, dst;
} lk_set_rows_args;

typedef struct lk_glu_args {  /* y = unary(op, gate) * up, all one shape;
                                 y may be gate or up itself */
    lk_unary_op op;
    lk_tensor gate, up, y;
} lk_glu_args;

/* Training (docs/numerics.md section 13). */
typedef struct lk_unary_backward_args {
    lk_unary_op op;
    lk_tensor x, dy, dx;  /* dx may be dy itself */
} lk_unary_backward_args;

typedef struct lk_softmax_backward_args {
    int log;              /* 1: log-softmax */
    lk_tensor y, dy, dx;  /* dx may be dy itself */
} lk_softmax_backward_args;

typedef struct lk_norm_backward_args {
    int layer;            /* 1: layernorm, 0: rmsnorm */
    float eps;
    lk_tensor x, weight, dy, dx, dwt; /* weight, dwt data == NULL: none */
} lk_norm_backward_args;

typedef struct lk_embedding_backward_args { /* ids checked in [0, dtable rows) */
    lk_tensor dy, ids, dtable;
} lk_embedding_backward_args;

typedef enum lk_optim_kind { LK_OPTIM_SGD = 1, LK_OPTIM_ADAMW = 2 } lk_optim_kind;

/* The scalars of one step, computed by the core (section 13.5). */
typedef struct lk_optim_args {
    lk_optim_kind kind;
    lk_tensor param, grad, s1, s2; /* SGD: s1 the momentum buffer (data NULL:
                                      none); AdamW: s1 = m, s2 = v */
    unsigned flags;                /* LK_SGD_* */
    /* SGD: lr, momentum, dampening' = 1 - dampening, weight_decay.
     * AdamW: lr' = lr / bc1 (the step size), beta1' = 1 - beta1, beta2,
     * 1 - beta2, eps, decay = 1 - lr * weight_decay, sqrt(bc2). */
    float c[8];
} lk_optim_args;

/* Prepared weights (include/lockstep/weights.h). */
typedef struct lk_weights_args {
    lk_tensor w;         /* N x K: f32/bf16/f16, or LK_T2 */
    lk_tensor w_scale;   /* LK_T2: f32 1 x 1 or 1 x N; otherwise data == NULL */
} lk_weights_args;

typedef struct lk_linear_args {  /* linear and ternary_linear */
    int64_t m, n, k;
    unsigned flags;            /* LK_GEMM_ACCUMULATE or 0 (ternary_linear: y f32) */
    const void *prepared;      /* what weights_prepare made */
    lk_dtype w_dtype;          /* the dtype that was prepared */
    lk_tensor x, x_scale, bias, y; /* x_scale: ternary only; bias: linear only
                                      (data == NULL: none) */
} lk_linear_args;

/* rmsnorm_ternary_linear: norm as lk_rmsnorm_quantize fills it; lin as
 * lk_ternary_linear fills it, with lin.x = norm.q and lin.x_scale =
 * norm.scale (the kernel writes both, then reads them back). */
typedef struct lk_norm_linear_args {
    lk_norm_quant_args norm;
    lk_linear_args lin;
} lk_norm_linear_args;

/* bitnet_decode (include/lockstep/bitnet.h).  One ternary projection:
 * the device's prepared object, or (prepared NULL) the core's copy of the
 * weights in the interchange layout with its scale, for ternary_gemm. */
typedef struct lk_bitnet_weight_args {
    const void *prepared;
    lk_tensor w, w_scale;
} lk_bitnet_weight_args;

typedef struct lk_bitnet_layer_args {
    lk_bitnet_weight_args qkv, o, gate_up, down;
    lk_tensor attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm; /* f32; data NULL: none */
    lk_tensor kv;        /* f32, >= batch ctx rows x 2 n_kv head_dim */
} lk_bitnet_layer_args;

typedef struct lk_bitnet_args {
    int64_t batch, dim, n_head, n_kv, head_dim, ffn, ctx, n_layers;
    float eps, theta, attn_scale;
    unsigned rope_flags;
    const lk_bitnet_layer_args *layers; /* n_layers of them; the core owns them */
    lk_tensor x, pos;    /* f32 batch x dim (in and out); LK_I32 batch x 1 */
    /* lk_bitnet_decode_scratch() bytes of the queue's device, laid out as
     * lk_bitnet_layout_of says (below); positions are checked in [0, ctx) by the
     * core before the kernel runs, except under capture (queue_capturing):
     * then the kernel checks them, writes nothing when one is outside, and
     * queue_sync reports it (LK_ERR_RANGE) */
    void *scratch;
    size_t scratch_bytes;
} lk_bitnet_args;

/* lk_bitnet_args.scratch, in this order, each region starting on a
 * 256-byte boundary (the core sizes it with this function, so a driver
 * reads the same offsets):
 *   sync  256 bytes        free for a driver's own use (the CUDA kernel's
 *                          grid barrier; the composition leaves it alone)
 *   idx   int32 batch      the cache row of each sequence: b ctx + pos[b]
 *   xs    f32 batch        the activation scales
 *   xq    int8 batch x kq  (kq = the widest K: max(dim, qd, ffn), rounded
 *                          up to 16)
 *   qkv   f32 batch x (qd + 2 kvd)
 *   att   f32 batch x qd
 *   gu    f32 batch x 2 ffn
 *   g     f32 batch x ffn
 * with qd = n_head head_dim, kvd = n_kv head_dim. */
typedef struct lk_bitnet_layout {
    size_t sync, idx, xs, xq, qkv, att, gu, g; /* byte offsets */
    size_t total;                              /* bytes in all */
    int64_t kq;                                /* xq's row pitch */
} lk_bitnet_layout;

/* A module is loaded with RTLD_LOCAL and need not link liblockstep, so it
 * cannot call lk_dtype_size: the element sizes, as lk_dtype_size gives
 * them (0 for LK_T2, whose rows are packed). */
static inline size_t lk_driver_dtype_size(lk_dtype dtype)
{
    switch (dtype) {
    case LK_F32: case LK_I32: return 4;
    case LK_BF16: case LK_F16: return 2;
    case LK_I8: return 1;
    case LK_I64: return 8;
    case LK_T2: return 0;
    }
    return 0;
}

/* a * b into *r, 0 on overflow (both >= 0) */
static inline int lk_bitnet_mul(size_t a, size_t b, size_t *r)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *r = a * b;
    return 1;
}

/* The layout for this shape; 0 when a size overflows or a dimension is
 * not positive. */
static inline int lk_bitnet_layout_of(int64_t batch, int64_t dim, int64_t n_head, int64_t n_kv,
                                      int64_t head_dim, int64_t ffn, lk_bitnet_layout *L)
{
    const int64_t lim = (int64_t)1 << 40;
    if (batch <= 0 || dim <= 0 || n_head <= 0 || n_kv <= 0 || head_dim <= 0 || ffn <= 0 ||
        batch > lim || dim > lim || n_head > lim || n_kv > lim || head_dim > lim || ffn > lim)
        return 0;
    size_t qd, kvd, kq, sz[8];
    if (!lk_bitnet_mul((size_t)n_head, (size_t)head_dim, &qd) ||
        !lk_bitnet_mul((size_t)n_kv, (size_t)head_dim, &kvd) || qd > (size_t)lim ||
        kvd > (size_t)lim)
        return 0;
    kq = (size_t)dim > qd ? (size_t)dim : qd;
    kq = kq > (size_t)ffn ? kq : (size_t)ffn;
    kq = (kq + 15) / 16 * 16;
    const size_t b = (size_t)batch;
    sz[0] = 256;
    if (!lk_bitnet_mul(b, 4, &sz[1]) || !lk_bitnet_mul(b, 4, &sz[2]) ||
        !lk_bitnet_mul(b, kq, &sz[3]) || !lk_bitnet_mul(b, 4 * (qd + 2 * kvd), &sz[4]) ||
        !lk_bitnet_mul(b, 4 * qd, &sz[5]) || !lk_bitnet_mul(b, 8 * (size_t)ffn, &sz[6]) ||
        !lk_bitnet_mul(b, 4 * (size_t)ffn, &sz[7]))
        return 0;
    size_t off[8], at = 0;
    for (int i = 0; i < 8; i++) {
        off[i] = at;
        if (sz[i] > SIZE_MAX - at - 255)
            return 0;
        at = (at + sz[i] + 255) / 256 * 256;
    }
    L->sync = off[0], L->idx = off[1], L->xs = off[2], L->xq = off[3], L->qkv = off[4];
    L->att = off[5], L->gu = off[6], L->g = off[7];
    L->total = at;
    L->kq = (int64_t)kq;
    return 1;
}

typedef struct lk_kernels {
    lk_status (*gemm)(void *queue, const lk_gemm_args *args);
    lk_status (*reduce)(void *queue, const lk_reduce_args *args);
    lk_status (*rmsnorm)(void *queue, const lk_norm_args *args);
    lk_status (*layernorm)(void *queue, const lk_norm_args *args);
    lk_status (*softmax)(void *queue, const lk_softmax_args *args);
    lk_status (*log_softmax)(void *queue, const lk_softmax_args *args);
    lk_status (*unary)(void *queue, const lk_unary_args *args);
    lk_status (*binary)(void *queue, const lk_binary_args *args);
    lk_status (*quantize_act)(void *queue, const lk_quant_args *args);
    lk_status (*quantize_ternary)(void *queue, const lk_quant_args *args);
    lk_status (*ternary_pack)(void *queue, const lk_pack_args *args);
    lk_status (*ternary_unpack)(void *queue, const lk_pack_args *args);
    lk_status (*ternary_gemm)(void *queue, const lk_qgemm_args *args);
    lk_status (*int8_gemm)(void *queue, const lk_qgemm_args *args);
    /* lk_gemm in a tensor-core tier (flags has LK_GEMM_TC_SM80 or
     * LK_GEMM_TC_SM90; numerics.md, "Tensor-core tier"); supports() sees LK_OP_GEMM. */
    lk_status (*gemm_tc)(void *queue, const lk_gemm_args *args);
    lk_status (*rope)(void *queue, const lk_rope_args *args);
    lk_status (*attention)(void *queue, const lk_attention_args *args);
    lk_status (*embedding)(void *queue, const lk_embedding_args *args);
    /* Prepared weights, all optional: with weights_prepare NULL, or
     * returning LK_ERR_UNSUPPORTED, the core keeps a copy of the weights in
     * their interchange layout and runs gemm / ternary_gemm on it.
     * weights_prepare receives validated weights of the queue's device;
     * the kernels receive a prepared object of their own device. */
    lk_status (*weights_prepare)(void *queue, const lk_weights_args *args, void **prepared);
    void (*weights_destroy)(void *dev, void *prepared);
    lk_status (*linear)(void *queue, const lk_linear_args *args);
    lk_status (*ternary_linear)(void *queue, const lk_linear_args *args);
    /* lk_rmsnorm_quantize: NULL means LK_ERR_UNSUPPORTED (no fallback). */
    lk_status (*rmsnorm_quantize)(void *queue, const lk_norm_quant_args *args);
    /* lk_set_rows: NULL means LK_ERR_UNSUPPORTED. */
    lk_status (*set_rows)(void *queue, const lk_set_rows_args *args);
    /* lk_glu: NULL means LK_ERR_UNSUPPORTED. */
    lk_status (*glu)(void *queue, const lk_glu_args *args);
    /* lk_rmsnorm_ternary_linear: NULL means the core runs rmsnorm_quantize
     * then ternary_linear (or its own fallback without ternary_linear). */
    lk_status (*rmsnorm_ternary_linear)(void *queue, const lk_norm_linear_args *args);
    /* lk_bitnet_decode: NULL means LK_ERR_UNSUPPORTED.  lk_host's
     * bitnet_compose runs the composition on any kernel table. */
    lk_status (*bitnet_decode)(void *queue, const lk_bitnet_args *args);
    /* Training (ops.h, docs/numerics.md section 13): NULL means
     * LK_ERR_UNSUPPORTED. */
    lk_status (*unary_backward)(void *queue, const lk_unary_backward_args *args);
    lk_status (*softmax_backward)(void *queue, const lk_softmax_backward_args *args);
    lk_status (*norm_backward)(void *queue, const lk_norm_backward_args *args);
    lk_status (*embedding_backward)(void *queue, const lk_embedding_backward_args *args);
    lk_status (*optim_step)(void *queue, const lk_optim_args *args);
} lk_kernels;

typedef struct lk_device_iface {
    uint32_t struct_size; /* sizeof(lk_device_iface) the driver was built with */
    void (*props)(void *dev, lk_device_props *props);
    /* NULL: every non-NULL kernel takes every valid call. */
    int (*supports)(void *dev, lk_op op, const void *args);
    /* NULL on host-memory devices: the core allocates host memory. */
    lk_status (*mem_alloc)(void *dev, size_t bytes, void **ptr);
    void (*mem_free)(void *dev, void *ptr);
    lk_status (*queue_create)(void *dev, const lk_queue_opts *opts, void **queue);
    void (*queue_destroy)(void *queue);
    lk_status (*queue_sync)(void *queue);
    /* NULL on host-memory devices: the core copies with memcpy. */
    lk_status (*memcpy)(void *queue, void *dst, const void *src, size_t bytes,
                        lk_copy_kind kind);
    lk_kernels kernels;
    /* Native graphs (include/lockstep/graph.h), all optional: with
     * capture_begin NULL the core records the validated calls on the host
     * and replays them itself.  Between capture_begin and capture_end the
     * core calls the kernels and memcpy as usual and they must enqueue
     * into the graph instead of running (CUDA: stream capture); a kernel
     * that cannot be captured returns LK_ERR_UNSUPPORTED before enqueuing
     * anything.  capture_end always leaves capture mode; *graph is the
     * driver's launchable graph.  graph_launch runs it on any queue of the
     * device, graph_destroy frees it (its launches have completed). */
    lk_status (*capture_begin)(void *queue);
    lk_status (*capture_end)(void *queue, void **graph);
    lk_status (*graph_launch)(void *queue, void *graph);
    void (*graph_destroy)(void *dev, void *graph);
    /* 1 while the queue's stream is being captured, by the core or by the
     * caller on an adopted stream.  The core then cannot read lk_embedding's
     * ids (nor lk_set_rows' idx) before the kernel runs: the kernel checks
     * them on the device, writes nothing when one is outside [0, vocab)
     * ([0, dst rows)), and queue_sync reports it (LK_ERR_RANGE).  NULL:
     * never. */
    int (*queue_capturing)(void *queue);
    /* Memory of this device that the core did not allocate (a caller's
     * cudaMalloc, a DLPack import from another framework): 1 when every
     * byte of [ptr, ptr + bytes) is memory of this device that its kernels
     * may read and write, 0 otherwise.  The core asks only about ranges
     * that no lk_malloc'd block overlaps, and refuses the call with
     * LK_ERR_WRONG_DEVICE on 0.  NULL: only lk_malloc'd memory is this
     * device's. */
    int (*mem_reachable)(void *dev, const void *ptr, size_t bytes);
    /* The paged KV cache (lk_attention_paged, lk_kv_write_paged): NULL, or
     * a struct_size that ends before them, means LK_ERR_UNSUPPORTED.  Never
     * called under capture. */
    lk_status (*attention_paged)(void *queue, const lk_attention_paged_args *args);
    lk_status (*kv_write_paged)(void *queue, const lk_kv_write_paged_args *args);
} lk_device_iface;

/* Services the core offers drivers. */
typedef struct lk_host {
    uint32_t abi_version;
    uint32_t struct_size;
    /* Set this thread's lk_last_error() message (printf format). */
    void (*set_error)(const char *fmt, ...);
    /* Print to stderr when LOCKSTEP_DEBUG is set. */
    void (*debug)(const char *fmt, ...);
    /* hwloc NUMA node (os index) of a PCI device "dddd:bb:dd.f", -1 unknown. */
    int (*pci_numa_node)(const char *pci_bus_id);
    /* Physical cores the process may run on (>= 1). */
    int (*num_cores)(void);
    /* lk_bitnet_decode as the composition of its ops (include/lockstep/
     * bitnet.h) on the kernel table k, each step one call to a kernel of k
     * with the args the core would give it: a bitnet_decode kernel for a
     * device without a fused one.  k must have rmsnorm_quantize, rope,
     * set_rows, attention and glu, and ternary_linear for prepared weights
     * or ternary_gemm and binary for the core's copies.  idx_ready = 0:
     * a->pos and a->scratch are host memory and the cache rows are written
     * into the scratch's idx region here; 1: the driver has written them
     * (on its queue, before). */
    lk_status (*bitnet_compose)(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                                int idx_ready);
} lk_host;

typedef struct lk_driver {
    uint32_t abi_version; /* LK_DRIVER_ABI_VERSION */
    uint32_t struct_size; /* sizeof(lk_driver) */
    const char *name;     /* "cuda" */
    const char *description;
    /* Discover devices.  A driver with nothing to offer (no GPU, runtime
     * too old) returns LK_ERR_NO_DEVICE after host->set_error(reason):
     * `lockstep info` shows that reason. */
    lk_status (*init)(const lk_host *host, void **drv);
    void (*fini)(void *drv);
    int (*device_count)(void *drv);
    lk_status (*device_open)(void *drv, int index, const lk_device_iface **iface,
                             void **dev);
    void (*device_close)(void *drv, void *dev);
} lk_driver;

typedef const lk_driver *(*lk_driver_entry_fn)(void);

LK_END_DECLS

#endif
