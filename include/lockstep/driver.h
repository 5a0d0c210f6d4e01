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

#define LK_DRIVER_ABI_VERSION 1u
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

typedef struct lk_pack_args {    /* ternary pack and unpack */
    lk_tensor src, dst;
} lk_pack_args;

typedef struct lk_qgemm_args {   /* ternary_gemm and int8_gemm */
    int64_t m, n, k;
    lk_tensor x, x_scale, w, w_scale, y; /* scales data == NULL: int32 out */
} lk_qgemm_args;

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
