/* Lockstep core: the communicator's NCCL transport (configure --with-nccl)
 * for tensors in GPU memory, when every rank attached a CUDA device.
 *
 * MPI starts the ranks and hands NCCL's unique id from rank 0 to the
 * others; the agreement on the arguments stays on MPI (core/comm.c), and
 * the data moves here, on one stream per communicator.  A queue that runs
 * on that stream (lk_comm_queue_create) needs no synchronisation: the
 * collective is enqueued behind its ops, and a graph captured on it holds
 * the NCCL kernels too.  Any other queue is synchronised before and the
 * stream after.  Only data movement runs on NCCL (all-gather, broadcast,
 * send / recv): the reductions compute on the host from every rank's
 * values (core/comm.c), which keeps their arithmetic the contract's. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include "core/comm_impl.h"
#include "core/core.h"
#include "core/error.h"

typedef struct lk_nccl {
    ncclComm_t nc;
    cudaStream_t stream;
    int ordinal;
    void *tmp;        /* device scratch: packed blocks */
    size_t tmp_cap;
} lk_nccl;

static int ordinal_of(lk_device *dev)
{
    int ord = -1;
    if (!dev || dev->props.kind != LK_DEVICE_GPU || strncmp(dev->props.driver, "cuda", 4) ||
        dev->props.host_memory)
        return -1;
    if (dev->props.pci_bus_id[0] &&
        cudaDeviceGetByPCIBusId(&ord, dev->props.pci_bus_id) == cudaSuccess)
        return ord;
    if (sscanf(dev->props.name, "cuda:%d", &ord) == 1)
        return ord;
    return -1;
}

int lk_comm_nccl_possible(lk_device *dev)
{
    int v = 0;
    return ordinal_of(dev) >= 0 && ncclGetVersion(&v) == ncclSuccess;
}

void *lk_comm_nccl_stream(lk_comm *c)
{
    return c && c->nccl ? (void *)((lk_nccl *)c->nccl)->stream : NULL;
}

lk_status lk_comm_nccl_create(lk_comm *c)
{
    const char *fn = "lk_comm_attach";
    lk_nccl *n = calloc(1, sizeof *n);
    if (!n)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    n->ordinal = ordinal_of(c->dev);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t nr = c->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    /* the id (or rank 0's failure: an all-zero id) to every rank */
    int rc = MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, *(MPI_Comm *)c->mpi);
    if (rc != MPI_SUCCESS || nr != ncclSuccess) {
        free(n);
        return lk_error(LK_ERR_DRIVER, "%s: NCCL's id did not reach every rank (%s)", fn,
                        nr != ncclSuccess ? ncclGetErrorString(nr) : "MPI_Bcast failed");
    }
    int prev = 0;
    cudaGetDevice(&prev);
    cudaError_t ce = cudaSetDevice(n->ordinal);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (ce == cudaSuccess)
        nr = ncclCommInitRank(&n->nc, c->size, id, c->rank);
    cudaSetDevice(prev);
    if (ce != cudaSuccess || nr != ncclSuccess) {
        const int ord = n->ordinal;
        if (n->stream)
            cudaStreamDestroy(n->stream);
        free(n);
        return lk_error(LK_ERR_DRIVER, "%s: NCCL on %s (CUDA device %d): %s", fn,
                        lk_device_name(c->dev), ord,
                        ce != cudaSuccess ? cudaGetErrorString(ce) : ncclGetErrorString(nr));
    }
    c->nccl = n;
    return LK_OK;
}

void lk_comm_nccl_destroy(lk_comm *c)
{
    lk_nccl *n = c ? c->nccl : NULL;
    if (!n)
        return;
    int prev = 0;
    cudaGetDevice(&prev);
    cudaSetDevice(n->ordinal);
    cudaStreamSynchronize(n->stream);
    ncclCommDestroy(n->nc);
    cudaStreamDestroy(n->stream);
    if (n->tmp)
        cudaFree(n->tmp);
    cudaSetDevice(prev);
    free(n);
    c->nccl = NULL;
}

/* The stream to enqueue on: the queue's own when it is NCCL's, else NCCL's
 * after the queue's work is done (*sync = 1: wait for the stream after). */
static lk_status begin(lk_comm *c, lk_queue *q, int *sync, int *prev)
{
    lk_nccl *n = c->nccl;
    cudaGetDevice(prev);
    *sync = q->native_stream != (void *)n->stream;
    if (*sync) {
        lk_status st = lk_queue_sync(q);
        if (st != LK_OK)
            return st;
    }
    if (cudaSetDevice(n->ordinal) != cudaSuccess)
        return lk_error(LK_ERR_DRIVER, "lk_comm: cudaSetDevice(%d) failed", n->ordinal);
    return LK_OK;
}

static lk_status end(lk_comm *c, const char *fn, ncclResult_t nr, cudaError_t ce, int sync,
                     int prev)
{
    lk_nccl *n = c->nccl;
    if (nr == ncclSuccess && ce == cudaSuccess && sync)
        ce = cudaStreamSynchronize(n->stream);
    cudaSetDevice(prev);
    if (nr != ncclSuccess)
        return lk_error(LK_ERR_DRIVER, "%s: NCCL: %s", fn, ncclGetErrorString(nr));
    if (ce != cudaSuccess)
        return lk_error(LK_ERR_DRIVER, "%s: CUDA: %s", fn, cudaGetErrorString(ce));
    return LK_OK;
}

static void *scratch(lk_nccl *n, size_t bytes)
{
    if (bytes > n->tmp_cap) {
        if (n->tmp) {
            /* the stream may still read the old scratch */
            cudaStreamSynchronize(n->stream);
            cudaFree(n->tmp);
        }
        n->tmp = NULL;
        n->tmp_cap = 0;
        if (cudaMalloc(&n->tmp, bytes) != cudaSuccess)
            return NULL;
        n->tmp_cap = bytes;
    }
    return n->tmp;
}

static size_t ldb_of(const lk_tensor *t)
{
    return (size_t)(t->ld ? t->ld : t->cols) * lk_dtype_size(t->dtype);
}

static int packed(const lk_tensor *t)
{
    return t->rows <= 1 || t->ld == 0 || t->ld == t->cols;
}

lk_status lk_comm_nccl_all_gather(lk_comm *c, lk_queue *q, const lk_tensor *x,
                                  const lk_tensor *y, const lk_hdr *all, int64_t off)
{
    const char *fn = "lk_comm_all_gather";
    lk_nccl *n = c->nccl;
    const size_t es = lk_dtype_size(x->dtype), rows = (size_t)x->rows;
    int64_t total = 0;
    for (int r = 0; r < c->size; r++)
        total += all[r].cols;
    int sync, prev;
    lk_status st = begin(c, q, &sync, &prev);
    if (st)
        return st;
    ncclResult_t nr = ncclSuccess;
    cudaError_t ce = cudaSuccess;
    const size_t myb = rows * (size_t)x->cols * es, tb = rows * (size_t)total * es;
    if (rows == 1 && packed(y) && !(x->data >= y->data && (char *)x->data < (char *)y->data + tb &&
                                    x->data != (char *)y->data + off * (int64_t)es)) {
        /* one row: every rank's block straight into y */
        nr = ncclGroupStart();
        int64_t c0 = 0;
        for (int r = 0; r < c->size && nr == ncclSuccess; r++) {
            const size_t w = (size_t)all[r].cols * es;
            if (w)
                nr = ncclBroadcast(r == c->rank ? x->data : NULL, (char *)y->data + c0 * (int64_t)es,
                                   w, ncclUint8, r, n->nc, n->stream);
            c0 += all[r].cols;
        }
        ncclResult_t ne = ncclGroupEnd();
        return end(c, fn, nr != ncclSuccess ? nr : ne, ce, sync, prev);
    }
    /* rank-major packed blocks in scratch (this rank's packed first into
     * the spot after them), then a 2-D copy per block into y's columns */
    char *tmp = scratch(n, tb + myb + 1);
    if (!tmp) {
        cudaSetDevice(prev);
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: no device memory for %zu bytes", fn, tb + myb);
    }
    char *mine = tmp + tb;
    if (myb)
        ce = cudaMemcpy2DAsync(mine, (size_t)x->cols * es, x->data, ldb_of(x), (size_t)x->cols * es,
                               rows, cudaMemcpyDeviceToDevice, n->stream);
    nr = ce == cudaSuccess ? ncclGroupStart() : ncclSuccess;
    size_t o = 0;
    for (int r = 0; r < c->size && ce == cudaSuccess && nr == ncclSuccess; r++) {
        const size_t b = rows * (size_t)all[r].cols * es;
        if (b)
            nr = ncclBroadcast(r == c->rank ? mine : NULL, tmp + o, b, ncclUint8, r, n->nc,
                               n->stream);
        o += b;
    }
    if (ce == cudaSuccess) {
        ncclResult_t ne = ncclGroupEnd();
        if (nr == ncclSuccess)
            nr = ne;
    }
    int64_t c0 = 0;
    o = 0;
    for (int r = 0; r < c->size && ce == cudaSuccess && nr == ncclSuccess; r++) {
        const size_t w = (size_t)all[r].cols * es;
        if (w)
            ce = cudaMemcpy2DAsync((char *)y->data + c0 * (int64_t)es, ldb_of(y), tmp + o, w, w,
                                   rows, cudaMemcpyDeviceToDevice, n->stream);
        o += rows * w;
        c0 += all[r].cols;
    }
    return end(c, fn, nr, ce, sync, prev);
}

lk_status lk_comm_nccl_broadcast(lk_comm *c, lk_queue *q, const lk_tensor *x, int root)
{
    const char *fn = "lk_comm_broadcast";
    lk_nccl *n = c->nccl;
    const size_t es = lk_dtype_size(x->dtype), rb = (size_t)x->cols * es, bytes = rb * (size_t)x->rows;
    int sync, prev;
    lk_status st = begin(c, q, &sync, &prev);
    if (st)
        return st;
    ncclResult_t nr = ncclSuccess;
    cudaError_t ce = cudaSuccess;
    if (!bytes)
        return end(c, fn, nr, ce, sync, prev);
    if (packed(x)) {
        nr = ncclBroadcast(x->data, x->data, bytes, ncclUint8, root, n->nc, n->stream);
        return end(c, fn, nr, ce, sync, prev);
    }
    char *tmp = scratch(n, bytes);
    if (!tmp) {
        cudaSetDevice(prev);
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: no device memory for %zu bytes", fn, bytes);
    }
    if (c->rank == root)
        ce = cudaMemcpy2DAsync(tmp, rb, x->data, ldb_of(x), rb, (size_t)x->rows,
                               cudaMemcpyDeviceToDevice, n->stream);
    if (ce == cudaSuccess)
        nr = ncclBroadcast(tmp, tmp, bytes, ncclUint8, root, n->nc, n->stream);
    if (ce == cudaSuccess && nr == ncclSuccess && c->rank != root)
        ce = cudaMemcpy2DAsync(x->data, ldb_of(x), tmp, rb, rb, (size_t)x->rows,
                               cudaMemcpyDeviceToDevice, n->stream);
    return end(c, fn, nr, ce, sync, prev);
}

lk_status lk_comm_nccl_p2p(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer, int sending)
{
    const char *fn = sending ? "lk_comm_send" : "lk_comm_recv";
    lk_nccl *n = c->nccl;
    const size_t es = lk_dtype_size(x->dtype), rb = (size_t)x->cols * es, bytes = rb * (size_t)x->rows;
    int sync, prev;
    lk_status st = begin(c, q, &sync, &prev);
    if (st)
        return st;
    ncclResult_t nr = ncclSuccess;
    cudaError_t ce = cudaSuccess;
    if (!bytes)
        return end(c, fn, nr, ce, sync, prev);
    void *buf = x->data;
    if (!packed(x)) {
        if (!(buf = scratch(n, bytes))) {
            cudaSetDevice(prev);
            return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: no device memory for %zu bytes", fn, bytes);
        }
        if (sending)
            ce = cudaMemcpy2DAsync(buf, rb, x->data, ldb_of(x), rb, (size_t)x->rows,
                                   cudaMemcpyDeviceToDevice, n->stream);
    }
    if (ce == cudaSuccess)
        nr = sending ? ncclSend(buf, bytes, ncclUint8, peer, n->nc, n->stream)
                     : ncclRecv(buf, bytes, ncclUint8, peer, n->nc, n->stream);
    if (ce == cudaSuccess && nr == ncclSuccess && !sending && buf != x->data)
        ce = cudaMemcpy2DAsync(x->data, ldb_of(x), buf, rb, rb, (size_t)x->rows,
                               cudaMemcpyDeviceToDevice, n->stream);
    return end(c, fn, nr, ce, sync, prev);
}
