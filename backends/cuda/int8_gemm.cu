/* Lockstep CUDA: int8 x int8 GEMM (docs/numerics.md section 9):
 * acc[m, n] = sum_k a[m, k] * b[n, k] exactly in int32 with dp4a
 * (backends/cuda/qgemm.cuh), stored as int32 or dequantised as
 * ((float)acc / a_scale[m]) * b_scale[n or 0]. */
#include "backends/cuda/qgemm.cuh"
#include "backends/cuda/tc/ternary.cuh"

extern "C" lk_status lk_cuda_int8_gemm(void *queue, const lk_qgemm_args *q)
{
    lk_op_scope op(queue, "lk_int8_gemm");
    if (!op.ok())
        return op.status();
    if (!lk_cuda_tc_qgemm(op.q, q, false, nullptr)) /* M > 8 on sm_80+: tc/ternary.cu */
        lk_qgemm_tiled<false>(*q, op.stream());
    return op.launched();
}
