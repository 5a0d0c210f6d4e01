/* Lockstep CUDA: RoPE (docs/numerics.md section 12.2), the sequences of
 * backends/rope.h.  One block per token; its threads take the pairs i, each
 * computing its angle's sine and cosine once for every head. */
#include "backends/cuda/model.cuh"
#include "backends/rope.h"

namespace {

__global__ void __launch_bounds__(128) rope_kernel(lk_rope_args a)
{
    const int64_t r = blockIdx.x;
    const int64_t hd = a.head_dim, half = hd / 2, heads = a.x.cols / hd;
    const int il = (a.flags & LK_ROPE_INTERLEAVED) != 0;
    const float lt = lk_logf(a.theta);
    const int32_t pos = ((const int32_t *)a.pos.data)[r * a.pos.ld];
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
        float s, c;
        lk_rope_sincos(pos, lk_rope_inv_freq(i, hd, lt), &s, &c);
        const int64_t o0 = lk_rope_i0(i, il), o1 = lk_rope_i1(i, hd, il);
        for (int64_t h = 0; h < heads; h++) {
            const int64_t j0 = h * hd + o0, j1 = h * hd + o1;
            float x0 = lk_md_load(a.x.data, a.x.dtype, r * a.x.ld + j0);
            float x1 = lk_md_load(a.x.data, a.x.dtype, r * a.x.ld + j1);
            float y0, y1;
            lk_rope_rotate(x0, x1, s, c, &y0, &y1);
            lk_md_store(a.y.data, a.y.dtype, r * a.y.ld + j0, y0);
            lk_md_store(a.y.data, a.y.dtype, r * a.y.ld + j1, y1);
        }
    }
}

} // namespace

extern "C" lk_status lk_cuda_rope(void *queue, const lk_rope_args *a)
{
    lk_op_scope op(queue, "lk_rope");
    if (!op.ok())
        return op.status();
    if (a->x.rows > INT32_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "lk_rope: more than 2^31 - 1 rows on CUDA");
    rope_kernel<<<(unsigned)a->x.rows, 128, 0, op.stream()>>>(*a);
    return op.launched();
}
