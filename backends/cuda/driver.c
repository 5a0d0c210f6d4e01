/* Lockstep CUDA driver module: devices from the CUDA runtime, memory,
 * queues on CUDA streams, and the kernel table (backends/cuda/<op>.cu).
 *
 * Built as lockstep-cuda.so, loaded by the core with dlopen; the only
 * exported symbol is lockstep_driver_entry.  Every CUDA failure becomes an
 * lk_status with a message through host->set_error; nothing here aborts. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backends/cuda/driver.h"

/* Compute capability 8.0 is the oldest the fat binary has code for (the
 * PTX is compute_90, which older GPUs cannot run either). */
#define LK_CUDA_MIN_CC 80

static void lk_cuda_copy(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src);
}

lk_status lk_cuda_fail(const lk_host *host, cudaError_t err, const char *what)
{
    lk_status st;
    switch (err) {
    case cudaSuccess:
        return LK_OK;
    case cudaErrorMemoryAllocation:
        st = LK_ERR_OUT_OF_MEMORY;
        break;
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
        st = LK_ERR_NO_DEVICE;
        break;
    default:
        st = LK_ERR_DRIVER;
        break;
    }
    if (host && host->set_error)
        host->set_error("%s: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
    return st;
}

lk_status lk_cuda_enter(const lk_cuda_device *dev, lk_cuda_scope *scope)
{
    scope->prev = -1;
    scope->switched = 0;
    cudaError_t e = cudaGetDevice(&scope->prev);
    if (e != cudaSuccess)
        scope->prev = -1;
    if (scope->prev != dev->ordinal) {
        e = cudaSetDevice(dev->ordinal);
        if (e != cudaSuccess)
            return lk_cuda_fail(dev->host, e, dev->props.name);
        scope->switched = 1;
    }
    return LK_OK;
}

void lk_cuda_leave(const lk_cuda_scope *scope)
{
    if (scope->switched && scope->prev >= 0)
        (void)cudaSetDevice(scope->prev);
}

lk_status lk_cuda_launched(lk_cuda_queue *q, const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess)
        return LK_OK;
    return lk_cuda_fail(q->dev->host, e, what);
}

/* ------------------------------------------------------------ driver */

static lk_status lk_cuda_init(const lk_host *host, void **state)
{
    int rt = 0, drv_version = 0, n = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv_version);
    if (drv_version == 0) {
        host->set_error("no NVIDIA driver is installed (CUDA runtime %d.%d)", rt / 1000,
                        rt % 1000 / 10);
        return LK_ERR_NO_DEVICE;
    }
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver) {
        host->set_error("the NVIDIA driver supports CUDA %d.%d, older than the CUDA runtime "
                        "%d.%d this module was built with: update the driver",
                        drv_version / 1000, drv_version % 1000 / 10, rt / 1000,
                        rt % 1000 / 10);
        return LK_ERR_NO_DEVICE;
    }
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        host->set_error("no CUDA device found (driver CUDA %d.%d, runtime %d.%d)",
                        drv_version / 1000, drv_version % 1000 / 10, rt / 1000,
                        rt % 1000 / 10);
        return LK_ERR_NO_DEVICE;
    }
    if (e != cudaSuccess) {
        host->set_error("CUDA could not be initialised: %s (%s)", cudaGetErrorName(e),
                        cudaGetErrorString(e));
        return LK_ERR_NO_DEVICE;
    }

    lk_cuda_driver *d = calloc(1, sizeof *d);
    int *ord = calloc((size_t)n, sizeof *ord);
    if (!d || !ord) {
        free(d);
        free(ord);
        host->set_error("out of memory");
        return LK_ERR_OUT_OF_MEMORY;
    }
    d->host = host;
    d->ordinals = ord;
    char skipped[256] = "";
    for (int i = 0; i < n; i++) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, i) != cudaSuccess)
            continue;
        if (major * 10 + minor < LK_CUDA_MIN_CC) {
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len, "%sdevice %d is sm_%d%d",
                     len ? ", " : "", i, major, minor);
            host->debug("cuda: device %d (sm_%d%d) is older than sm_80: skipped", i, major,
                        minor);
            continue;
        }
        ord[d->count++] = i;
    }
    if (d->count == 0) {
        host->set_error("no CUDA device of compute capability 8.0 or newer (%s)", skipped);
        free(ord);
        free(d);
        return LK_ERR_NO_DEVICE;
    }
    *state = d;
    return LK_OK;
}

static void lk_cuda_fini(void *state)
{
    lk_cuda_driver *d = state;
    if (!d)
        return;
    free(d->ordinals);
    free(d);
}

static int lk_cuda_device_count(void *state)
{
    return ((lk_cuda_driver *)state)->count;
}

/* "0000:17:00.0" in lower case, as hwloc prints PCI addresses. */
static void lk_cuda_pci_id(int ordinal, char *out, size_t size)
{
    char raw[64] = "";
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    out[0] = '\0';
    if (cudaDeviceGetPCIBusId(raw, (int)sizeof raw, ordinal) != cudaSuccess)
        return;
    if (sscanf(raw, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
        snprintf(out, size, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
        return;
    }
    size_t i = 0;
    for (; raw[i] && i + 1 < size; i++)
        out[i] = (char)tolower((unsigned char)raw[i]);
    out[i] = '\0';
}

static void lk_cuda_props(void *state, lk_device_props *p)
{
    *p = ((lk_cuda_device *)state)->props;
}

static lk_status lk_cuda_mem_alloc(void *state, size_t bytes, void **ptr)
{
    lk_cuda_device *dev = state;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(dev, &sc);
    if (st != LK_OK)
        return st;
    cudaError_t e = cudaMalloc(ptr, bytes);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess) {
        *ptr = NULL;
        (void)cudaGetLastError(); /* an allocation failure is not sticky */
        return lk_cuda_fail(dev->host, e, "cudaMalloc");
    }
    return LK_OK;
}

/* Another allocator's memory (PyTorch's caching allocator, CuPy, a
 * caller's cudaMalloc): device or managed memory of this GPU at both ends
 * of the range.  A range between two such allocations of this GPU passes
 * too; every byte of it is still this device's memory. */
static int lk_cuda_mem_reachable(void *state, const void *ptr, size_t bytes)
{
    lk_cuda_device *dev = state;
    const char *ends[2] = {(const char *)ptr, (const char *)ptr + (bytes - 1)};
    for (int i = 0; i < 2; i++) {
        struct cudaPointerAttributes a;
        if (cudaPointerGetAttributes(&a, ends[i]) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: a plain "no" */
            return 0;
        }
        if ((a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) ||
            a.device != dev->ordinal)
            return 0;
    }
    return 1;
}

static void lk_cuda_mem_free(void *state, void *ptr)
{
    lk_cuda_device *dev = state;
    lk_cuda_scope sc;
    if (lk_cuda_enter(dev, &sc) != LK_OK)
        return;
    (void)cudaFree(ptr);
    lk_cuda_leave(&sc);
}

/* LOCKSTEP_CUDA_WORKSPACE: bytes, with an optional K, M or G suffix. */
static size_t lk_cuda_workspace_bytes(const lk_host *host)
{
    const char *s = getenv("LOCKSTEP_CUDA_WORKSPACE");
    if (!s || !*s)
        return LK_CUDA_WORKSPACE_DEFAULT;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (end && (*end == 'K' || *end == 'k'))
        shift = 10;
    else if (end && (*end == 'M' || *end == 'm'))
        shift = 20;
    else if (end && (*end == 'G' || *end == 'g'))
        shift = 30;
    if (shift)
        end++;
    if (errno || end == s || (end && *end) || v > (SIZE_MAX >> shift) >> 1) {
        host->debug("cuda: LOCKSTEP_CUDA_WORKSPACE=%s is not a size: using %zu bytes", s,
                    (size_t)LK_CUDA_WORKSPACE_DEFAULT);
        return LK_CUDA_WORKSPACE_DEFAULT;
    }
    size_t bytes = (size_t)v << shift;
    return bytes < 4096 ? 4096 : bytes;
}

static void lk_cuda_queue_destroy(void *queue);

static lk_status lk_cuda_queue_create(void *state, const lk_queue_opts *opts, void **queue)
{
    lk_cuda_device *dev = state;
    lk_cuda_queue *q = calloc(1, sizeof *q);
    if (!q) {
        dev->host->set_error("out of memory");
        return LK_ERR_OUT_OF_MEMORY;
    }
    q->dev = dev;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(dev, &sc);
    if (st != LK_OK) {
        free(q);
        return st;
    }
    cudaError_t e = cudaSuccess;
    const char *what = "";
    if (opts && opts->native_stream) {
        q->stream = (cudaStream_t)opts->native_stream;
        q->owns_stream = 0;
#if CUDART_VERSION >= 12080
        int sdev = -1;
        if (cudaStreamGetDevice(q->stream, &sdev) == cudaSuccess && sdev >= 0 &&
            sdev != dev->ordinal) {
            lk_cuda_leave(&sc);
            free(q);
            dev->host->set_error("native_stream belongs to CUDA device %d, not to %s (device %d)",
                                 sdev, dev->props.name, dev->ordinal);
            return LK_ERR_WRONG_DEVICE;
        }
        (void)cudaGetLastError();
#endif
    } else {
        what = "cudaStreamCreateWithFlags";
        e = cudaStreamCreateWithFlags(&q->stream, cudaStreamNonBlocking);
        q->owns_stream = e == cudaSuccess;
    }
    if (e == cudaSuccess) {
        q->ws_bytes = lk_cuda_workspace_bytes(dev->host);
        what = "cudaMalloc (queue workspace; see LOCKSTEP_CUDA_WORKSPACE)";
        e = cudaMalloc(&q->ws, q->ws_bytes);
        if (e != cudaSuccess)
            q->ws = NULL;
    }
    if (e == cudaSuccess) {
        what = "cudaMallocHost";
        e = cudaMallocHost(&q->host_ws, LK_CUDA_HOST_SCRATCH);
        if (e != cudaSuccess)
            q->host_ws = NULL;
        else
            memset(q->host_ws, 0, LK_CUDA_HOST_SCRATCH);
    }
    lk_cuda_leave(&sc);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        st = lk_cuda_fail(dev->host, e, what);
        lk_cuda_queue_destroy(q);
        return st;
    }
    *queue = q;
    return LK_OK;
}

static void lk_cuda_queue_destroy(void *queue)
{
    lk_cuda_queue *q = queue;
    if (!q)
        return;
    lk_cuda_scope sc;
    if (lk_cuda_enter(q->dev, &sc) == LK_OK) {
        /* the workspace may still be in use by enqueued work */
        if (q->stream)
            (void)cudaStreamSynchronize(q->stream);
        if (q->ws)
            (void)cudaFree(q->ws);
        if (q->host_ws)
            (void)cudaFreeHost(q->host_ws);
        if (q->owns_stream)
            (void)cudaStreamDestroy(q->stream);
        (void)cudaGetLastError();
        lk_cuda_leave(&sc);
    }
    free(q);
}

static lk_status lk_cuda_queue_sync(void *queue)
{
    lk_cuda_queue *q = queue;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(q->dev, &sc);
    if (st != LK_OK)
        return st;
    cudaError_t e = cudaStreamSynchronize(q->stream);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess)
        return lk_cuda_fail(q->dev->host, e, "cudaStreamSynchronize");
    /* a bad id met by lk_embedding (rec[0] 1, embedding.cu) or a bad index
     * met by lk_set_rows (2, set_rows.cu) inside a graph */
    volatile long long *rec = (volatile long long *)((char *)q->host_ws + LK_CUDA_EMB_ERR_OFFSET);
    if (rec[0]) {
        long long kind = rec[0], row = rec[1], id = rec[2], vocab = rec[3];
        rec[0] = 0;
        if (kind == 3)
            q->dev->host->set_error("lk_bitnet_decode (in a graph): pos[%lld] = %lld is outside "
                                    "[0, %lld): that call wrote nothing",
                                    row, id, vocab);
        else if (kind == 2)
            q->dev->host->set_error("lk_set_rows (in a graph): idx[%lld] = %lld is outside "
                                    "[0, %lld): that scatter wrote nothing",
                                    row, id, vocab);
        else
            q->dev->host->set_error("lk_embedding (in a graph): ids[%lld] = %lld is outside "
                                    "[0, %lld): that lookup wrote nothing",
                                    row, id, vocab);
        return LK_ERR_RANGE;
    }
    return LK_OK;
}

/* ------------------------------------------------------------ graphs
 *
 * Stream capture of the queue's stream in thread-local mode: the ops
 * enqueue as usual (they never allocate or synchronise) and the capture
 * becomes one instantiated graph. */

static lk_status lk_cuda_capture_begin(void *queue)
{
    lk_cuda_queue *q = queue;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(q->dev, &sc);
    if (st != LK_OK)
        return st;
    cudaError_t e = cudaStreamBeginCapture(q->stream, cudaStreamCaptureModeThreadLocal);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return lk_cuda_fail(q->dev->host, e, "cudaStreamBeginCapture");
    }
    return LK_OK;
}

static lk_status lk_cuda_capture_end(void *queue, void **graph)
{
    lk_cuda_queue *q = queue;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(q->dev, &sc);
    if (st != LK_OK)
        return st;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    const char *what = "cudaStreamEndCapture";
    cudaError_t e = cudaStreamEndCapture(q->stream, &g);
    if (e == cudaSuccess) {
        what = "cudaGraphInstantiate";
        e = cudaGraphInstantiate(&x, g, 0);
    }
    if (g)
        (void)cudaGraphDestroy(g);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return lk_cuda_fail(q->dev->host, e, what);
    }
    *graph = x;
    return LK_OK;
}

static lk_status lk_cuda_graph_launch(void *queue, void *graph)
{
    lk_cuda_queue *q = queue;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(q->dev, &sc);
    if (st != LK_OK)
        return st;
    cudaError_t e = cudaGraphLaunch((cudaGraphExec_t)graph, q->stream);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess)
        return lk_cuda_fail(q->dev->host, e, "cudaGraphLaunch");
    return LK_OK;
}

static void lk_cuda_graph_destroy(void *state, void *graph)
{
    lk_cuda_device *dev = state;
    lk_cuda_scope sc;
    if (lk_cuda_enter(dev, &sc) != LK_OK)
        return;
    (void)cudaGraphExecDestroy((cudaGraphExec_t)graph);
    lk_cuda_leave(&sc);
}

static int lk_cuda_queue_capturing(void *queue)
{
    lk_cuda_queue *q = queue;
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(q->stream, &cs) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

static lk_status lk_cuda_memcpy(void *queue, void *dst, const void *src, size_t bytes,
                                lk_copy_kind kind)
{
    lk_cuda_queue *q = queue;
    enum cudaMemcpyKind k = kind == LK_COPY_HOST_TO_DEVICE   ? cudaMemcpyHostToDevice
                            : kind == LK_COPY_DEVICE_TO_HOST ? cudaMemcpyDeviceToHost
                                                             : cudaMemcpyDeviceToDevice;
    if (bytes == 0)
        return LK_OK;
    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(q->dev, &sc);
    if (st != LK_OK)
        return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, q->stream);
    lk_cuda_leave(&sc);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return lk_cuda_fail(q->dev->host, e, "cudaMemcpyAsync");
    }
    return LK_OK;
}

static const lk_device_iface lk_cuda_iface = {
    .struct_size = sizeof(lk_device_iface),
    .props = lk_cuda_props,
    .supports = NULL,
    .mem_alloc = lk_cuda_mem_alloc,
    .mem_free = lk_cuda_mem_free,
    .queue_create = lk_cuda_queue_create,
    .queue_destroy = lk_cuda_queue_destroy,
    .queue_sync = lk_cuda_queue_sync,
    .memcpy = lk_cuda_memcpy,
    .kernels = {
        .gemm = lk_cuda_gemm,
        .reduce = lk_cuda_reduce,
        .rmsnorm = lk_cuda_rmsnorm,
        .layernorm = lk_cuda_layernorm,
        .softmax = lk_cuda_softmax,
        .log_softmax = lk_cuda_log_softmax,
        .unary = lk_cuda_unary,
        .binary = lk_cuda_binary,
        .quantize_act = lk_cuda_quantize_act,
        .quantize_ternary = lk_cuda_quantize_ternary,
        .ternary_pack = lk_cuda_ternary_pack,
        .ternary_unpack = lk_cuda_ternary_unpack,
        .ternary_gemm = lk_cuda_ternary_gemm,
        .int8_gemm = lk_cuda_int8_gemm,
        .gemm_tc = lk_cuda_gemm_tc,
        .rope = lk_cuda_rope,
        .attention = lk_cuda_attention,
        .embedding = lk_cuda_embedding,
        .weights_prepare = lk_cuda_weights_prepare,
        .weights_destroy = lk_cuda_weights_destroy,
        .linear = lk_cuda_linear,
        .ternary_linear = lk_cuda_ternary_linear,
        .rmsnorm_quantize = lk_cuda_rmsnorm_quantize,
        .set_rows = lk_cuda_set_rows,
        .glu = lk_cuda_glu,
        .bitnet_decode = lk_cuda_bitnet_decode,
        .unary_backward = lk_cuda_unary_backward,
        .softmax_backward = lk_cuda_softmax_backward,
        .norm_backward = lk_cuda_norm_backward,
        .embedding_backward = lk_cuda_embedding_backward,
        .optim_step = lk_cuda_optim_step,
    },
    .capture_begin = lk_cuda_capture_begin,
    .capture_end = lk_cuda_capture_end,
    .graph_launch = lk_cuda_graph_launch,
    .graph_destroy = lk_cuda_graph_destroy,
    .queue_capturing = lk_cuda_queue_capturing,
    .mem_reachable = lk_cuda_mem_reachable,
    .attention_paged = lk_cuda_attention_paged,
    .kv_write_paged = lk_cuda_kv_write_paged,
};

/* The kernel table, for lk_bitnet_decode's composition (bitnet.cu). */
const lk_kernels *lk_cuda_kernel_table(void)
{
    return &lk_cuda_iface.kernels;
}

/* The tensor-core kernels the module has for the device, after the
 * description: a Hopper build without sm_90a code runs the tensor-core tier
 * and the integer GEMMs on mma.sync, several times slower, so `lockstep
 * info` says how to get wgmma. */
static void lk_cuda_describe_tc(lk_cuda_device *dev, int wgmma)
{
    char *d = dev->props.description;
    const size_t used = strlen(d), cap = sizeof dev->props.description;
    const char *tc;
    if (wgmma)
        tc = "tensor cores: wgmma (sm_90a)";
    else if (dev->cc_major == 9 && dev->cc_minor == 0)
        tc = "tensor cores: mma.sync only (no sm_90a code in this module: build with "
             "-gencode arch=compute_90a,code=sm_90a)";
    else if (dev->cc_major >= 8)
        tc = "tensor cores: mma.sync";
    else
        return;
    if (used + 3 < cap)
        snprintf(d + used, cap - used, "; %s", tc);
}

static lk_status lk_cuda_device_open(void *state, int index, const lk_device_iface **iface,
                                     void **out)
{
    lk_cuda_driver *d = state;
    if (index < 0 || index >= d->count) {
        d->host->set_error("no CUDA device %d", index);
        return LK_ERR_NO_DEVICE;
    }
    lk_cuda_device *dev = calloc(1, sizeof *dev);
    if (!dev) {
        d->host->set_error("out of memory");
        return LK_ERR_OUT_OF_MEMORY;
    }
    dev->drv = d;
    dev->host = d->host;
    dev->ordinal = d->ordinals[index];

    struct cudaDeviceProp cp;
    cudaError_t e = cudaGetDeviceProperties(&cp, dev->ordinal);
    if (e != cudaSuccess) {
        free(dev);
        return lk_cuda_fail(d->host, e, "cudaGetDeviceProperties");
    }
    dev->sm_count = cp.multiProcessorCount;
    dev->cc_major = cp.major;
    dev->cc_minor = cp.minor;
    dev->smem_optin = cp.sharedMemPerBlockOptin;
    /* Programmatic dependent launch (launch.cuh) needs Hopper; decided here
     * once so that a launch reads one int.  LOCKSTEP_CUDA_PDL=0 turns it off
     * (to compare, or to rule it out when bits differ). */
    {
        const char *pdl = getenv("LOCKSTEP_CUDA_PDL");
        dev->pdl = cp.major >= 9 && !(pdl && strcmp(pdl, "0") == 0);
    }

    lk_device_props *p = &dev->props;
    memset(p, 0, sizeof *p);
    /* "cuda:N" counts the usable devices; CUDA_VISIBLE_DEVICES renumbers
     * them as it does for every CUDA program */
    snprintf(p->name, sizeof p->name, "cuda:%d", index);
    snprintf(p->description, sizeof p->description, "%.96s, sm_%d%d, %d SMs, %.1f GiB", cp.name,
             cp.major, cp.minor, cp.multiProcessorCount,
             (double)cp.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    lk_cuda_copy(p->driver, sizeof p->driver, "cuda");
    p->kind = LK_DEVICE_GPU;
    p->host_memory = 0;
    p->emulated = 0;
    p->priority = 10;
    p->max_threads = 0;
    p->memory_bytes = (uint64_t)cp.totalGlobalMem;
    lk_cuda_pci_id(dev->ordinal, p->pci_bus_id, sizeof p->pci_bus_id);
    p->numa_node = p->pci_bus_id[0] && d->host->pci_numa_node
                       ? d->host->pci_numa_node(p->pci_bus_id)
                       : -1;

    lk_cuda_scope sc;
    lk_status st = lk_cuda_enter(dev, &sc);
    if (st == LK_OK) {
        st = lk_cuda_setup_kernels(dev);
        if (st == LK_OK)
            st = lk_cuda_linear_setup(dev);
        if (st == LK_OK)
            st = lk_cuda_bitnet_setup(dev);
        if (st == LK_OK)
            lk_cuda_describe_tc(dev, lk_cuda_tc_wgmma_loaded(dev));
        lk_cuda_leave(&sc);
    }
    if (st != LK_OK) {
        free(dev);
        return st;
    }
    *iface = &lk_cuda_iface;
    *out = dev;
    return LK_OK;
}

static void lk_cuda_device_close(void *state, void *device)
{
    (void)state;
    free(device);
}

static const lk_driver lk_cuda_driver_def = {
    .abi_version = LK_DRIVER_ABI_VERSION,
    .struct_size = sizeof(lk_driver),
    .name = "cuda",
    .description = "NVIDIA GPUs through the CUDA runtime (bit-exact SIMT kernels)",
    .init = lk_cuda_init,
    .fini = lk_cuda_fini,
    .device_count = lk_cuda_device_count,
    .device_open = lk_cuda_device_open,
    .device_close = lk_cuda_device_close,
};

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void);

LK_DRIVER_EXPORT const lk_driver *lockstep_driver_entry(void)
{
    return &lk_cuda_driver_def;
}
