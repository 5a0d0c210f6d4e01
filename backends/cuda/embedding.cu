/* Lockstep CUDA: embedding lookup (docs/numerics.md section 12.4).
 *
 * Eagerly the core has checked every id before this runs.  Under graph
 * capture it cannot (the ids are read when the graph runs), so the launch
 * adds a one-block check in front: it finds the first id outside
 * [0, vocab), leaves the verdict in the workspace for the lookup (which
 * then writes nothing) and the record of the bad id in the queue's pinned
 * host scratch, which the next lk_queue_sync reports as LK_ERR_RANGE
 * (driver.c).  Host and device share that record through unified
 * addressing; the first bad id stays until it is reported. */
#include "backends/cuda/model.cuh"

namespace {

__global__ void __launch_bounds__(256)
    embedding_check_kernel(lk_embedding_args a, long long *verdict, volatile long long *rec)
{
    __shared__ long long first;
    lk_pdl_wait();
    lk_pdl_trigger();
    if (threadIdx.x == 0)
        first = LLONG_MAX;
    __syncthreads();
    const int32_t *ids = (const int32_t *)a.ids.data;
    for (int64_t r = threadIdx.x; r < a.ids.rows; r += blockDim.x) {
        const int32_t id = ids[r * a.ids.ld];
        if (id < 0 || (int64_t)id >= a.table.rows)
            atomicMin(&first, (long long)r);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const long long f = first == LLONG_MAX ? -1 : first;
        *verdict = f;
        if (f >= 0 && rec[0] == 0) {
            rec[1] = f;
            rec[2] = ids[f * a.ids.ld];
            rec[3] = a.table.rows;
            __threadfence_system();
            rec[0] = 1;
            __threadfence_system();
        }
    }
}

__global__ void __launch_bounds__(256)
    embedding_kernel(lk_embedding_args a, const long long *verdict)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    if (verdict && *verdict >= 0)
        return;
    const int64_t r = blockIdx.x;
    const int64_t id = ((const int32_t *)a.ids.data)[r * a.ids.ld];
    for (int64_t c = threadIdx.x; c < a.table.cols; c += blockDim.x)
        lk_md_store(a.y.data, a.y.dtype, r * a.y.ld + c,
                    lk_md_load(a.table.data, a.table.dtype, id * a.table.ld + c));
}

} // namespace

extern "C" lk_status lk_cuda_embedding(void *queue, const lk_embedding_args *a)
{
    lk_op_scope op(queue, "lk_embedding");
    if (!op.ok())
        return op.status();
    if (a->ids.rows > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_embedding: more than 2^31 - 1 ids on CUDA");
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    const bool capturing =
        cudaStreamIsCapturing(op.stream(), &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone;
    long long *verdict = NULL;
    if (capturing) {
        verdict = (long long *)op.q->ws;
        long long *rec = (long long *)((char *)op.q->host_ws + LK_CUDA_EMB_ERR_OFFSET);
        lk_launch(embedding_check_kernel, 1, 256, 0, op.stream(), *a, verdict, rec);
    }
    lk_launch(embedding_kernel, (unsigned)a->ids.rows, 256, 0, op.stream(), *a, verdict);
    return op.launched();
}
