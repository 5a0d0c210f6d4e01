/* Lockstep CUDA: embedding lookup (docs/numerics.md section 12.4).
 *
 * Eagerly the core has checked every id before this runs; under graph
 * capture lk_index_check (model.cuh) checks them when the graph runs. */
#include "backends/cuda/model.cuh"

namespace {

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
    const long long *verdict = lk_index_check(op, a->ids, a->table.rows, 1);
    lk_launch(embedding_kernel, (unsigned)a->ids.rows, 256, 0, op.stream(), *a, verdict);
    return op.launched();
}
