/* Lockstep CUDA driver (internal): for the transformer ops (rope.cu,
 * attention.cu, embedding.cu, set_rows.cu), element access by a run-time
 * dtype (their inner loops are dominated by other work than the dtype
 * switch) and the run-time check of the indices they are given. */
#ifndef LK_CUDA_MODEL_CUH
#define LK_CUDA_MODEL_CUH

#include "backends/cuda/device.cuh"

static __device__ __forceinline__ float lk_md_load(const void *p, lk_dtype dt, int64_t i)
{
    switch (dt) {
    case LK_BF16: return lk_elem<LK_BF16>::load((const uint16_t *)p, i);
    case LK_F16: return lk_elem<LK_F16>::load((const uint16_t *)p, i);
    default: return lk_elem<LK_F32>::load((const float *)p, i);
    }
}

static __device__ __forceinline__ void lk_md_store(void *p, lk_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case LK_BF16: lk_elem<LK_BF16>::store((uint16_t *)p, i, v); break;
    case LK_F16: lk_elem<LK_F16>::store((uint16_t *)p, i, v); break;
    default: lk_elem<LK_F32>::store((float *)p, i, v); break;
    }
}

/* Element e of matrix b of t, as a byte pointer plus element index. */
static __host__ __device__ __forceinline__ int64_t lk_md_at(const lk_tensor &t, int64_t b,
                                                            int64_t r, int64_t c)
{
    return b * t.batch_stride + r * t.ld + c;
}

/* The ids of lk_embedding and the rows of lk_set_rows are read when a
 * captured graph runs, so the core cannot check them: one block finds the
 * first of the n indices (stride ld) outside [0, limit) (-1: none; every
 * thread of the block calls this and gets it), and thread 0 leaves the
 * first bad index of the queue in the pinned host record rec (rec[0] =
 * kind: 1 embedding, 2 set_rows), which the next lk_queue_sync reports as
 * LK_ERR_RANGE (driver.c).  Host and device share the record through
 * unified addressing.  The op's kernel then writes nothing: the check
 * kernel below leaves its verdict in the workspace for it, or the op's
 * own block checks first (set_rows.cu). */
static __device__ long long lk_index_first_bad(const int32_t *idx, int64_t ld, int64_t n,
                                               int64_t limit, long long kind,
                                               volatile long long *rec)
{
    __shared__ long long first;
    if (threadIdx.x == 0)
        first = LLONG_MAX;
    __syncthreads();
    for (int64_t r = threadIdx.x; r < n; r += blockDim.x) {
        const int32_t i = idx[r * ld];
        if (i < 0 || (int64_t)i >= limit)
            atomicMin(&first, (long long)r);
    }
    __syncthreads();
    const long long f = first == LLONG_MAX ? -1 : first;
    if (threadIdx.x == 0 && f >= 0 && rec[0] == 0) {
        rec[1] = f;
        rec[2] = idx[f * ld];
        rec[3] = limit;
        __threadfence_system();
        rec[0] = kind;
        __threadfence_system();
    }
    return f;
}

static __global__ void __launch_bounds__(256)
    lk_index_check_kernel(const int32_t *idx, int64_t ld, int64_t n, int64_t limit, long long kind,
                          long long *verdict, volatile long long *rec)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    const long long f = lk_index_first_bad(idx, ld, n, limit, kind, rec);
    if (threadIdx.x == 0)
        *verdict = f;
}

/* The queue's pinned record of a bad index (driver.h) */
static inline long long *lk_index_record(lk_op_scope &op)
{
    return (long long *)((char *)op.q->host_ws + LK_CUDA_EMB_ERR_OFFSET);
}

/* Whether the queue's stream is capturing (ops then check indices on the
 * device: the values are read when the graph runs). */
static inline bool lk_capturing(lk_op_scope &op)
{
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(op.stream(), &cs) == cudaSuccess &&
           cs != cudaStreamCaptureStatusNone;
}

/* Under stream capture, the check above in front of the op (the verdict
 * in the queue's workspace); eagerly the core has checked: NULL. */
static inline long long *lk_index_check(lk_op_scope &op, const lk_tensor &idx, int64_t limit,
                                        long long kind)
{
    if (!lk_capturing(op))
        return NULL;
    long long *verdict = (long long *)op.q->ws;
    lk_launch(lk_index_check_kernel, 1, 256, 0, op.stream(), (const int32_t *)idx.data, idx.ld,
              idx.rows, limit, kind, verdict, lk_index_record(op));
    return verdict;
}

#endif
