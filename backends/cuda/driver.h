/* Lockstep CUDA driver (internal): the driver, device and queue objects
 * shared by the host glue (driver.c) and the kernels' launchers (*.cu).
 *
 * Plain C, so that driver.c is compiled by the C compiler and the .cu files
 * include it inside extern "C".
 *
 * Rules every launcher follows (documented in docs for users as the
 * "workspace rule"):
 * - An op only enqueues work on the queue's stream and returns; it never
 *   allocates, frees, synchronises or copies synchronously, so a sequence
 *   of ops can be captured into a CUDA graph.  The one exception is
 *   lk_ternary_pack, which must read the values back to refuse a bad one
 *   before writing anything (it refuses to run under capture).
 * - Scratch memory comes from the queue's workspace, allocated once when
 *   the queue is created: LOCKSTEP_CUDA_WORKSPACE bytes (suffixes K, M, G;
 *   default LK_CUDA_WORKSPACE_DEFAULT).  Every op has a path that needs no
 *   workspace; a larger workspace only lets more of them take a faster
 *   multi-block path.  The ops that need it say so: lk_quantize_ternary of
 *   a tensor with more than (workspace / 4 - 1) rows, and attention (both
 *   lk_attention and lk_attention_paged keep their chunks' partial states
 *   there: (n_head / n_kv) ceil(keys / 64) (head_dim + 2) floats per row
 *   and KV head at least; attention.cu). */
#ifndef LK_CUDA_DRIVER_H
#define LK_CUDA_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include <lockstep/driver.h>

#define LK_CUDA_WORKSPACE_DEFAULT ((size_t)16 << 20)
/* pinned host bytes per queue (lk_ternary_pack's verdict) */
#define LK_CUDA_HOST_SCRATCH 64
/* where in them an lk_embedding run inside a graph records the first bad
 * id (four int64: set, row, id, vocab; embedding.cu), for queue_sync; an
 * lk_set_rows records its bad index there too, with set = 2 (set_rows.cu),
 * and lk_bitnet_decode its bad position with set = 3 (bitnet.cu) */
#define LK_CUDA_EMB_ERR_OFFSET 32

typedef struct lk_cuda_driver {
    const lk_host *host;
    int count;          /* usable devices */
    int *ordinals;      /* their CUDA ordinals */
} lk_cuda_driver;

typedef struct lk_cuda_device {
    lk_cuda_driver *drv;
    const lk_host *host;
    int ordinal;
    int sm_count;
    int cc_major, cc_minor;
    size_t smem_optin;  /* largest dynamic shared memory a block may opt in to */
    int pdl;            /* 1: launch with programmatic dependent launch (launch.cuh):
                         * cc >= 9.0 and LOCKSTEP_CUDA_PDL not "0" */
    lk_device_props props;
} lk_cuda_device;

typedef struct lk_cuda_queue {
    lk_cuda_device *dev;
    cudaStream_t stream;
    int owns_stream;    /* 0: adopted from lk_queue_opts.native_stream */
    void *ws;           /* device workspace */
    size_t ws_bytes;
    void *host_ws;      /* LK_CUDA_HOST_SCRATCH pinned bytes */
} lk_cuda_queue;

/* The current device of the calling thread is switched to the queue's for
 * the duration of a call and restored after it. */
typedef struct lk_cuda_scope {
    int prev;
    int switched;
} lk_cuda_scope;

#ifdef __cplusplus
extern "C" {
#endif

/* Map a CUDA error to a status and set the message "what: name (text)". */
lk_status lk_cuda_fail(const lk_host *host, cudaError_t err, const char *what);

/* Enter/leave the device's context; enter fails only when the device is gone. */
lk_status lk_cuda_enter(const lk_cuda_device *dev, lk_cuda_scope *scope);
void lk_cuda_leave(const lk_cuda_scope *scope);

/* After the launches of an op: the launch status (invalid configuration,
 * no kernel image for this GPU, a sticky error from earlier work). */
lk_status lk_cuda_launched(lk_cuda_queue *q, const char *what);

/* Per-device kernel attributes (dynamic shared memory opt-in), set when a
 * device is opened so that no op needs to set them under graph capture. */
lk_status lk_cuda_setup_kernels(lk_cuda_device *dev);

/* The kernels (backends/cuda/<op>.cu); queue is an lk_cuda_queue. */
lk_status lk_cuda_gemm(void *queue, const lk_gemm_args *a);
lk_status lk_cuda_reduce(void *queue, const lk_reduce_args *a);
lk_status lk_cuda_rmsnorm(void *queue, const lk_norm_args *a);
lk_status lk_cuda_layernorm(void *queue, const lk_norm_args *a);
lk_status lk_cuda_softmax(void *queue, const lk_softmax_args *a);
lk_status lk_cuda_log_softmax(void *queue, const lk_softmax_args *a);
lk_status lk_cuda_unary(void *queue, const lk_unary_args *a);
lk_status lk_cuda_binary(void *queue, const lk_binary_args *a);
lk_status lk_cuda_glu(void *queue, const lk_glu_args *a); /* unary.cu */
/* the training ops (train.cu) */
lk_status lk_cuda_unary_backward(void *queue, const lk_unary_backward_args *a);
lk_status lk_cuda_softmax_backward(void *queue, const lk_softmax_backward_args *a);
lk_status lk_cuda_norm_backward(void *queue, const lk_norm_backward_args *a);
lk_status lk_cuda_embedding_backward(void *queue, const lk_embedding_backward_args *a);
lk_status lk_cuda_optim_step(void *queue, const lk_optim_args *a);
lk_status lk_cuda_quantize_act(void *queue, const lk_quant_args *a);
lk_status lk_cuda_rmsnorm_quantize(void *queue, const lk_norm_quant_args *a);
lk_status lk_cuda_quantize_ternary(void *queue, const lk_quant_args *a);
lk_status lk_cuda_ternary_pack(void *queue, const lk_pack_args *a);
lk_status lk_cuda_ternary_unpack(void *queue, const lk_pack_args *a);
lk_status lk_cuda_ternary_gemm(void *queue, const lk_qgemm_args *a);
lk_status lk_cuda_int8_gemm(void *queue, const lk_qgemm_args *a);
/* the tensor-core tier (tc/gemm.cu) */
lk_status lk_cuda_gemm_tc(void *queue, const lk_gemm_args *a);
/* 1 where the image of this module loaded for dev holds the wgmma kernels
 * (sm_90a code on a compute capability 9.0 GPU), else 0 (tc/wgmma_gemm.cu;
 * dev's device current) */
int lk_cuda_tc_wgmma_loaded(const lk_cuda_device *dev);
/* the transformer ops (rope.cu, attention.cu, embedding.cu) */
lk_status lk_cuda_rope(void *queue, const lk_rope_args *a);
lk_status lk_cuda_attention(void *queue, const lk_attention_args *a);
lk_status lk_cuda_attention_paged(void *queue, const lk_attention_paged_args *a);
lk_status lk_cuda_kv_write_paged(void *queue, const lk_kv_write_paged_args *a);
lk_status lk_cuda_embedding(void *queue, const lk_embedding_args *a);
/* lk_set_rows (set_rows.cu) */
lk_status lk_cuda_set_rows(void *queue, const lk_set_rows_args *a);
/* prepared weights (weights.cu, linear.cu) */
lk_status lk_cuda_weights_prepare(void *queue, const lk_weights_args *a, void **prepared);
void lk_cuda_weights_destroy(void *dev, void *prepared);
lk_status lk_cuda_linear(void *queue, const lk_linear_args *a);
lk_status lk_cuda_ternary_linear(void *queue, const lk_linear_args *a); /* ternary.cu */
/* at device open: the linear kernels' shared memory opt-in */
lk_status lk_cuda_linear_setup(lk_cuda_device *dev);
/* lk_bitnet_decode (bitnet.cu): the fused kernel, or the composition of
 * the kernels below (lk_cuda_kernel_table, driver.c); its setup at device
 * open finds whether this build and GPU have the fused kernel */
lk_status lk_cuda_bitnet_decode(void *queue, const lk_bitnet_args *a);
lk_status lk_cuda_bitnet_setup(lk_cuda_device *dev);
const lk_kernels *lk_cuda_kernel_table(void);

#ifdef __cplusplus
}
#endif

#endif
