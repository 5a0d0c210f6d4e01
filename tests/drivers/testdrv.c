/* Lockstep tests: the test-only driver module lockstep-testdrv.so.
 *
 * One device, "test:0" (kind LK_DEVICE_OTHER, host memory), whose kernels
 * are the reference kernels run on row slices of uneven sizes, last slice
 * first.  Its results must equal "ref" bit for bit: that proves every op's
 * rows are computed independently of each other (batch invariance) and
 * that the core's row-slicing rules (ld, T2 byte offsets, transposed A)
 * hold.  quantize_ternary has a whole-tensor scale and runs unsliced.
 *
 * Knobs for tests of the core (read when the driver initialises):
 *   LOCKSTEP_TESTDRV_NODEVICE=1   init reports LK_ERR_NO_DEVICE with a reason
 *   LOCKSTEP_TESTDRV_DISABLE=op   that kernel slot is NULL (op: gemm, reduce, ...)
 *   LOCKSTEP_TESTDRV_REFUSE=op    supports() says no to that op
 *   LOCKSTEP_TESTDRV_FAIL=op      that kernel fails with LK_ERR_DRIVER
 *   LOCKSTEP_TESTDRV_DEVMEM=1     adds "test:1", a device without host memory
 *                                 (its "device memory" is malloc'd host memory
 *                                 behind mem_alloc/memcpy/queues), so the core's
 *                                 device-reachability checks can be tested
 *                                 without a GPU */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host.h"
#include "backends/ref/ref.h"

static const lk_host *host;

/* ------------------------------------------------------------ slicing */

/* Band sizes, repeated; their sum is LK_BAND_CYCLE. */
static const int64_t lk_band[] = {1, 3, 2, 7, 5, 16};
#define LK_NBAND ((int64_t)(sizeof lk_band / sizeof lk_band[0]))
#define LK_BAND_CYCLE 34

static int64_t band_start(int64_t i)
{
    int64_t s = (i / LK_NBAND) * LK_BAND_CYCLE;
    for (int64_t j = 0; j < i % LK_NBAND; j++)
        s += lk_band[j];
    return s;
}

static int64_t band_count(int64_t rows)
{
    int64_t n = (rows / LK_BAND_CYCLE) * LK_NBAND, s = (rows / LK_BAND_CYCLE) * LK_BAND_CYCLE;
    for (int64_t j = 0; s < rows; j++, n++)
        s += lk_band[j];
    return n;
}

/* Iterate the bands of [0, rows) from the last to the first. */
#define FOR_BANDS_REVERSED(rows, r0, nr)                                              \
    for (int64_t bi_ = band_count(rows) - 1, r0, nr; bi_ >= 0; bi_--)                 \
        if ((r0 = band_start(bi_)), (nr = band_start(bi_ + 1) < (rows)                \
                                              ? band_start(bi_ + 1) - r0              \
                                              : (rows) - r0),                         \
            1)

static size_t esize(lk_dtype d)
{
    switch (d) {
    case LK_F32: case LK_I32: return 4;
    case LK_BF16: case LK_F16: return 2;
    case LK_I8: return 1;
    case LK_I64: return 8;
    default: return 0;
    }
}

static lk_tensor rows_of(lk_tensor t, int64_t r0, int64_t n)
{
    if (t.data) {
        int64_t off = t.dtype == LK_T2 ? r0 * (t.ld / 4) : r0 * t.ld * (int64_t)esize(t.dtype);
        t.data = (char *)t.data + off;
    }
    t.rows = n;
    return t;
}

static lk_tensor cols_of(lk_tensor t, int64_t c0, int64_t n)
{
    if (t.data)
        t.data = (char *)t.data + c0 * (int64_t)esize(t.dtype);
    t.cols = n;
    return t;
}

/* ------------------------------------------------------------ state */

typedef struct testdrv testdrv;

typedef struct testdev {
    testdrv *drv;
    int index;
} testdev;

struct testdrv {
    lk_device_iface iface[2];
    testdev dev[2];
    int ndev;
    lk_op refuse;
};

/* The knob LOCKSTEP_TESTDRV_FAIL, for every context (a module is loaded
 * once per process however many contexts open it). */
static lk_op fail_op;

static lk_status failing(lk_op op)
{
    if (fail_op == op) {
        host->set_error("test driver: op %d fails on purpose (LOCKSTEP_TESTDRV_FAIL)", (int)op);
        return LK_ERR_DRIVER;
    }
    return LK_OK;
}

#define CHECK_FAIL(op)                                                                \
    do {                                                                              \
        lk_status f_ = failing(op);                                                   \
        if (f_ != LK_OK)                                                              \
            return f_;                                                                \
    } while (0)

#define TRY(expr)                                                                     \
    do {                                                                              \
        lk_status s_ = (expr);                                                        \
        if (s_ != LK_OK)                                                              \
            return s_;                                                                \
    } while (0)

/* ------------------------------------------------------------ kernels */

static lk_status t_gemm(void *q, const lk_gemm_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_GEMM);
    FOR_BANDS_REVERSED(a->m, r0, nr)
    {
        lk_gemm_args s = *a;
        s.m = nr;
        s.a = a->ta == LK_TRANS ? cols_of(a->a, r0, nr) : rows_of(a->a, r0, nr);
        s.c = rows_of(a->c, r0, nr);
        TRY(lk_ref_gemm(&s));
    }
    return LK_OK;
}

static lk_status t_reduce(void *q, const lk_reduce_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_REDUCE);
    FOR_BANDS_REVERSED(a->x.rows, r0, nr)
    {
        lk_reduce_args s = *a;
        s.x = rows_of(a->x, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(lk_ref_reduce(&s));
    }
    return LK_OK;
}

static lk_status norm_bands(const lk_norm_args *a, lk_status (*k)(const lk_norm_args *))
{
    FOR_BANDS_REVERSED(a->x.rows, r0, nr)
    {
        lk_norm_args s = *a;
        s.x = rows_of(a->x, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(k(&s));
    }
    return LK_OK;
}

static lk_status t_rmsnorm(void *q, const lk_norm_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_RMSNORM);
    return norm_bands(a, lk_ref_rmsnorm);
}

static lk_status t_layernorm(void *q, const lk_norm_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_LAYERNORM);
    return norm_bands(a, lk_ref_layernorm);
}

static lk_status softmax_bands(const lk_softmax_args *a,
                               lk_status (*k)(const lk_softmax_args *))
{
    FOR_BANDS_REVERSED(a->x.rows, r0, nr)
    {
        lk_softmax_args s = *a;
        s.x = rows_of(a->x, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(k(&s));
    }
    return LK_OK;
}

static lk_status t_softmax(void *q, const lk_softmax_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_SOFTMAX);
    return softmax_bands(a, lk_ref_softmax);
}

static lk_status t_log_softmax(void *q, const lk_softmax_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_LOG_SOFTMAX);
    return softmax_bands(a, lk_ref_log_softmax);
}

static lk_status t_unary(void *q, const lk_unary_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_UNARY);
    FOR_BANDS_REVERSED(a->x.rows, r0, nr)
    {
        lk_unary_args s = *a;
        s.x = rows_of(a->x, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(lk_ref_unary(&s));
    }
    return LK_OK;
}

static lk_status t_binary(void *q, const lk_binary_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_BINARY);
    FOR_BANDS_REVERSED(a->a.rows, r0, nr)
    {
        lk_binary_args s = *a;
        s.a = rows_of(a->a, r0, nr);
        if (a->b.rows == a->a.rows)
            s.b = rows_of(a->b, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(lk_ref_binary(&s));
    }
    return LK_OK;
}

static lk_status t_glu(void *q, const lk_glu_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_GLU);
    FOR_BANDS_REVERSED(a->gate.rows, r0, nr)
    {
        lk_glu_args s = *a;
        s.gate = rows_of(a->gate, r0, nr);
        s.up = rows_of(a->up, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(lk_ref_glu(&s));
    }
    return LK_OK;
}

static lk_status t_quantize_act(void *q, const lk_quant_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_QUANTIZE_ACT);
    FOR_BANDS_REVERSED(a->x.rows, r0, nr)
    {
        lk_quant_args s = *a;
        s.x = rows_of(a->x, r0, nr);
        s.q = rows_of(a->q, r0, nr);
        s.scale = rows_of(a->scale, r0, nr);
        TRY(lk_ref_quantize_act(&s));
    }
    return LK_OK;
}

static lk_status t_quantize_ternary(void *q, const lk_quant_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_QUANTIZE_TERNARY);
    return lk_ref_quantize_ternary(a);
}

/* Packing checks every value before it writes anything: so must the
 * slices, or a bad value in an early row would leave later rows written. */
static lk_status t_ternary_pack(void *q, const lk_pack_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_TERNARY_PACK);
    for (int64_t r = 0; r < a->src.rows; r++) {
        const int8_t *row = (const int8_t *)a->src.data + r * a->src.ld;
        for (int64_t c = 0; c < a->src.cols; c++)
            if (row[c] < -1 || row[c] > 1)
                return lk_ref_ternary_pack(a); /* the reference words the refusal */
    }
    FOR_BANDS_REVERSED(a->src.rows, r0, nr)
    {
        lk_pack_args s = *a;
        s.src = rows_of(a->src, r0, nr);
        s.dst = rows_of(a->dst, r0, nr);
        TRY(lk_ref_ternary_pack(&s));
    }
    return LK_OK;
}

static lk_status t_ternary_unpack(void *q, const lk_pack_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_TERNARY_UNPACK);
    FOR_BANDS_REVERSED(a->src.rows, r0, nr)
    {
        lk_pack_args s = *a;
        s.src = rows_of(a->src, r0, nr);
        s.dst = rows_of(a->dst, r0, nr);
        TRY(lk_ref_ternary_unpack(&s));
    }
    return LK_OK;
}

static lk_status qgemm_bands(const lk_qgemm_args *a, lk_status (*k)(const lk_qgemm_args *))
{
    FOR_BANDS_REVERSED(a->m, r0, nr)
    {
        lk_qgemm_args s = *a;
        s.m = nr;
        s.x = rows_of(a->x, r0, nr);
        s.x_scale = rows_of(a->x_scale, r0, nr);
        s.y = rows_of(a->y, r0, nr);
        TRY(k(&s));
    }
    return LK_OK;
}

static lk_status t_ternary_gemm(void *q, const lk_qgemm_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_TERNARY_GEMM);
    return qgemm_bands(a, lk_ref_ternary_gemm);
}

static lk_status t_int8_gemm(void *q, const lk_qgemm_args *a)
{
    (void)q;
    CHECK_FAIL(LK_OP_INT8_GEMM);
    return qgemm_bands(a, lk_ref_int8_gemm);
}

/* ------------------------------------------------------------ device */

static const char *const op_names[LK_OP_COUNT_] = {
    [LK_OP_GEMM] = "gemm",
    [LK_OP_REDUCE] = "reduce",
    [LK_OP_RMSNORM] = "rmsnorm",
    [LK_OP_LAYERNORM] = "layernorm",
    [LK_OP_SOFTMAX] = "softmax",
    [LK_OP_LOG_SOFTMAX] = "log_softmax",
    [LK_OP_UNARY] = "unary",
    [LK_OP_BINARY] = "binary",
    [LK_OP_QUANTIZE_ACT] = "quantize_act",
    [LK_OP_QUANTIZE_TERNARY] = "quantize_ternary",
    [LK_OP_TERNARY_PACK] = "ternary_pack",
    [LK_OP_TERNARY_UNPACK] = "ternary_unpack",
    [LK_OP_TERNARY_GEMM] = "ternary_gemm",
    [LK_OP_INT8_GEMM] = "int8_gemm",
    [LK_OP_ROPE] = "rope",
    [LK_OP_ATTENTION] = "attention",
    [LK_OP_EMBEDDING] = "embedding",
    [LK_OP_RMSNORM_QUANTIZE] = "rmsnorm_quantize",
    [LK_OP_SET_ROWS] = "set_rows",
    [LK_OP_GLU] = "glu",
    [LK_OP_RMSNORM_TERNARY_LINEAR] = "rmsnorm_ternary_linear",
    [LK_OP_BITNET_DECODE] = "bitnet_decode",
    [LK_OP_ATTENTION_PAGED] = "attention_paged",
    [LK_OP_KV_WRITE_PAGED] = "kv_write_paged",
};

static lk_op op_from_env(const char *var)
{
    const char *v = getenv(var);
    if (!v)
        return (lk_op)0;
    for (int i = 1; i < LK_OP_COUNT_; i++)
        if (strcmp(v, op_names[i]) == 0)
            return (lk_op)i;
    return (lk_op)0;
}

static void t_props(void *dev, lk_device_props *p)
{
    testdev *d = dev;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "test:%d", d->index);
    snprintf(p->description, sizeof p->description,
             "test-only: reference kernels on uneven row bands, last band first%s",
             d->index ? ", behind pretend device memory" : "");
    snprintf(p->driver, sizeof p->driver, "test");
    p->kind = LK_DEVICE_OTHER;
    p->host_memory = d->index == 0;
    p->numa_node = -1;
    p->priority = 0;
    p->max_threads = 1;
}

static int t_supports(void *dev, lk_op op, const void *args)
{
    testdrv *d = ((testdev *)dev)->drv;
    (void)args;
    if (d->refuse == op) {
        host->set_error("test driver refuses %s (LOCKSTEP_TESTDRV_REFUSE)", op_names[op]);
        return 0;
    }
    return 1;
}

/* test:1's pretend device memory and queues */
static lk_status t_mem_alloc(void *dev, size_t bytes, void **ptr)
{
    (void)dev;
    void *p = malloc(bytes);
    if (!p) {
        host->set_error("test:1: no memory for %zu bytes", bytes);
        return LK_ERR_OUT_OF_MEMORY;
    }
    *ptr = p;
    return LK_OK;
}

static void t_mem_free(void *dev, void *ptr)
{
    (void)dev;
    free(ptr);
}

static char t_queue_token;

static lk_status t_queue_create(void *dev, const lk_queue_opts *opts, void **queue)
{
    (void)dev;
    if (opts->native_stream) {
        host->set_error("test:1: native_stream is not a test stream");
        return LK_ERR_INVALID_ARGUMENT;
    }
    *queue = &t_queue_token;
    return LK_OK;
}

static void t_queue_destroy(void *queue)
{
    (void)queue;
}

static lk_status t_queue_sync(void *queue)
{
    (void)queue;
    return LK_OK;
}

static lk_status t_memcpy(void *queue, void *dst, const void *src, size_t bytes,
                          lk_copy_kind kind)
{
    (void)queue, (void)kind;
    memcpy(dst, src, bytes);
    return LK_OK;
}

static const lk_kernels t_kernels = {
    .gemm = t_gemm,
    .reduce = t_reduce,
    .rmsnorm = t_rmsnorm,
    .layernorm = t_layernorm,
    .softmax = t_softmax,
    .log_softmax = t_log_softmax,
    .unary = t_unary,
    .binary = t_binary,
    .quantize_act = t_quantize_act,
    .quantize_ternary = t_quantize_ternary,
    .ternary_pack = t_ternary_pack,
    .ternary_unpack = t_ternary_unpack,
    .ternary_gemm = t_ternary_gemm,
    .int8_gemm = t_int8_gemm,
    .glu = t_glu,
};

static lk_status t_init(const lk_host *h, void **drv)
{
    host = h;
    lk_backend_host_set(h); /* the reference kernels report through it */
    const char *nd = getenv("LOCKSTEP_TESTDRV_NODEVICE");
    if (nd && *nd && strcmp(nd, "0") != 0) {
        h->set_error("test driver: no device because LOCKSTEP_TESTDRV_NODEVICE is set");
        return LK_ERR_NO_DEVICE;
    }
    testdrv *d = calloc(1, sizeof *d);
    if (!d)
        return LK_ERR_OUT_OF_MEMORY;
    lk_device_iface *f = &d->iface[0];
    f->struct_size = sizeof(lk_device_iface);
    f->props = t_props;
    f->supports = t_supports;
    f->kernels = t_kernels;
    /* NULL the slot named by LOCKSTEP_TESTDRV_DISABLE */
    lk_op off = op_from_env("LOCKSTEP_TESTDRV_DISABLE");
    switch (off) {
    case LK_OP_GEMM: f->kernels.gemm = NULL; break;
    case LK_OP_REDUCE: f->kernels.reduce = NULL; break;
    case LK_OP_RMSNORM: f->kernels.rmsnorm = NULL; break;
    case LK_OP_LAYERNORM: f->kernels.layernorm = NULL; break;
    case LK_OP_SOFTMAX: f->kernels.softmax = NULL; break;
    case LK_OP_LOG_SOFTMAX: f->kernels.log_softmax = NULL; break;
    case LK_OP_UNARY: f->kernels.unary = NULL; break;
    case LK_OP_BINARY: f->kernels.binary = NULL; break;
    case LK_OP_QUANTIZE_ACT: f->kernels.quantize_act = NULL; break;
    case LK_OP_QUANTIZE_TERNARY: f->kernels.quantize_ternary = NULL; break;
    case LK_OP_TERNARY_PACK: f->kernels.ternary_pack = NULL; break;
    case LK_OP_TERNARY_UNPACK: f->kernels.ternary_unpack = NULL; break;
    case LK_OP_TERNARY_GEMM: f->kernels.ternary_gemm = NULL; break;
    case LK_OP_INT8_GEMM: f->kernels.int8_gemm = NULL; break;
    case LK_OP_GLU: f->kernels.glu = NULL; break;
    default: break;
    }
    d->iface[1] = d->iface[0];
    d->iface[1].mem_alloc = t_mem_alloc;
    d->iface[1].mem_free = t_mem_free;
    d->iface[1].queue_create = t_queue_create;
    d->iface[1].queue_destroy = t_queue_destroy;
    d->iface[1].queue_sync = t_queue_sync;
    d->iface[1].memcpy = t_memcpy;
    const char *dm = getenv("LOCKSTEP_TESTDRV_DEVMEM");
    d->ndev = dm && *dm && strcmp(dm, "0") != 0 ? 2 : 1;
    for (int i = 0; i < 2; i++) {
        d->dev[i].drv = d;
        d->dev[i].index = i;
    }
    d->refuse = op_from_env("LOCKSTEP_TESTDRV_REFUSE");
    fail_op = op_from_env("LOCKSTEP_TESTDRV_FAIL");
    *drv = d;
    return LK_OK;
}

static void t_fini(void *drv)
{
    free(drv);
}

static int t_device_count(void *drv)
{
    return ((testdrv *)drv)->ndev;
}

static lk_status t_device_open(void *drv, int index, const lk_device_iface **iface, void **dev)
{
    testdrv *d = drv;
    if (index < 0 || index >= d->ndev)
        return LK_ERR_NO_DEVICE;
    *iface = &d->iface[index];
    *dev = &d->dev[index];
    return LK_OK;
}

static const lk_driver t_driver = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "test",
    .description = "test-only driver: reference kernels on row bands",
    .init = t_init,
    .fini = t_fini,
    .device_count = t_device_count,
    .device_open = t_device_open,
    .device_close = NULL,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);
LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &t_driver;
}
