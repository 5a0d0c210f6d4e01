/* Lockstep CUDA: row scatter, lk_set_rows (docs/numerics.md section 12.4.1).
 *
 * One block per source row.  Equal indices are settled without atomics or
 * ordering between blocks: a row that a later row (larger r) also names
 * writes nothing, so the last one wins, as in the reference's in-order
 * loop.  Eagerly the core has checked every index; under graph capture a
 * one-block check runs first (lk_index_check, model.cuh): its verdict in the
 * workspace stops the scatter (nothing written) and the first bad index
 * goes to the queue's pinned record (rec[0] = 2: set_rows), which the next
 * lk_queue_sync reports as LK_ERR_RANGE (driver.c).  Both kernels go
 * through lk_launch (launch.cuh: programmatic dependent launch), waiting
 * before their first global access.
 *
 * Under capture, up to SR_ONE_ROWS rows (a decode step's new k and v):
 * one block checks the indices and, if all are good, scatters the rows
 * itself, one kernel instead of two (every kernel of a decode step costs
 * about a microsecond before it does any work: docs/internals/cuda-kernels.md). */
#include "backends/cuda/model.cuh"

namespace {

template <typename E>
__device__ __forceinline__ void copy_row(const lk_set_rows_args &a, int64_t r, int64_t i)
{
    const E *s = (const E *)a.src.data + r * a.src.ld;
    E *d = (E *)a.dst.data + i * a.dst.ld;
    for (int64_t c = threadIdx.x; c < a.src.cols; c += blockDim.x)
        d[c] = s[c];
}

/* es: bytes per element */
__device__ __forceinline__ void copy_row_es(const lk_set_rows_args &a, int64_t r, int64_t i, int es)
{
    switch (es) {
    case 1: copy_row<uint8_t>(a, r, i); break;
    case 2: copy_row<uint16_t>(a, r, i); break;
    case 4: copy_row<uint32_t>(a, r, i); break;
    default: copy_row<unsigned long long>(a, r, i); break;
    }
}

__global__ void __launch_bounds__(256)
    set_rows_kernel(lk_set_rows_args a, const long long *verdict, int es)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    if (verdict && *verdict >= 0)
        return;
    const int64_t r = blockIdx.x;
    const int32_t *idx = (const int32_t *)a.idx.data;
    const int32_t i = idx[r * a.idx.ld];
    int later = 0;
    for (int64_t s = r + 1 + threadIdx.x; s < a.src.rows; s += blockDim.x)
        later |= idx[s * a.idx.ld] == i;
    if (__syncthreads_or(later))
        return;
    copy_row_es(a, r, i, es);
}

#define SR_ONE_ROWS 256 /* one thread a row for the later-equal test */

__global__ void __launch_bounds__(SR_ONE_ROWS)
    set_rows_one_kernel(lk_set_rows_args a, volatile long long *rec, int es)
{
    __shared__ unsigned char skip[SR_ONE_ROWS];
    lk_pdl_wait();
    lk_pdl_trigger();
    const int32_t *idx = (const int32_t *)a.idx.data;
    const int64_t rows = a.src.rows;
    if (lk_index_first_bad(idx, a.idx.ld, rows, a.dst.rows, 2, rec) >= 0)
        return; /* nothing written */
    /* a row that a later row also names writes nothing: the last one wins */
    const int r0 = threadIdx.x;
    if (r0 < rows) {
        const int32_t i = idx[r0 * a.idx.ld];
        int later = 0;
        for (int64_t s = r0 + 1; s < rows; s++)
            later |= idx[s * a.idx.ld] == i;
        skip[r0] = (unsigned char)later;
    }
    __syncthreads();
    for (int64_t r = 0; r < rows; r++)
        if (!skip[r])
            copy_row_es(a, r, idx[r * a.idx.ld], es);
}

} // namespace

extern "C" lk_status lk_cuda_set_rows(void *queue, const lk_set_rows_args *a)
{
    lk_op_scope op(queue, "lk_set_rows");
    if (!op.ok())
        return op.status();
    if (a->src.rows > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_set_rows: more than 2^31 - 1 rows on CUDA");
    const int es = (int)lk_driver_dtype_size(a->src.dtype);
    const long long *verdict = NULL; /* eagerly the core has checked */
    if (lk_capturing(op)) {
        if (a->src.rows <= SR_ONE_ROWS) {
            lk_launch(set_rows_one_kernel, 1, SR_ONE_ROWS, 0, op.stream(), *a,
                      lk_index_record(op), es);
            return op.launched();
        }
        verdict = lk_index_check(op, a->idx, a->dst.rows, 2);
    }
    lk_launch(set_rows_kernel, (unsigned)a->src.rows, 256, 0, op.stream(), *a, verdict, es);
    return op.launched();
}
