/* Lockstep CUDA: RoPE (docs/numerics.md section 12.2), the sequences of
 * backends/rope.h.  One thread per (token, head, pair): a decode step has
 * one token, so a block per token with a loop over the heads left a few
 * dozen threads walking the heads one global round trip at a time.  Each
 * thread computes its pair's frequency, sine and cosine itself (a few
 * dozen fp32 operations, far cheaper than sharing them through memory and
 * a barrier) and reads both elements before writing either (y may be x). */
#include "backends/cuda/model.cuh"
#include "backends/rope.h"

#define LK_ROPE_THREADS 256

namespace {

template <lk_dtype DX, lk_dtype DY>
__global__ void __launch_bounds__(LK_ROPE_THREADS) rope_kernel(lk_rope_args a)
{
    typedef typename lk_elem<DX>::T TX;
    typedef typename lk_elem<DY>::T TY;
    const int64_t hd = a.head_dim, half = hd / 2, per_row = a.x.cols / 2;
    const int il = (a.flags & LK_ROPE_INTERLEAVED) != 0;
    /* log(theta) and the frequency of this thread's first pair depend on
     * the arguments only: computed before the wait, they overlap the end of
     * the previous kernel under PDL */
    const float lt = lk_logf(a.theta); /* once per thread: cheaper than a broadcast */
    const int64_t k0 = (int64_t)blockIdx.x * LK_ROPE_THREADS + threadIdx.x;
    const int64_t h0 = k0 / half; /* a 64-bit division: before the wait too */
    const float f0 = lk_rope_inv_freq(k0 - h0 * half, hd, lt);
    lk_pdl_wait(); /* x and pos are written by earlier ops */
    lk_pdl_trigger();
    for (int64_t r = blockIdx.y; r < a.x.rows; r += gridDim.y) {
        const int32_t pos = ((const int32_t *)a.pos.data)[r * a.pos.ld];
        for (int64_t k = k0; k < per_row; k += (int64_t)gridDim.x * LK_ROPE_THREADS) {
            const int64_t h = k == k0 ? h0 : k / half, i = k - h * half;
            const int64_t j0 = h * hd + lk_rope_i0(i, il), j1 = h * hd + lk_rope_i1(i, hd, il);
            const TX *xr = (const TX *)a.x.data + r * a.x.ld;
            const float x0 = lk_elem<DX>::load(xr, j0), x1 = lk_elem<DX>::load(xr, j1);
            float s, c, y0, y1;
            lk_rope_sincos(pos, k == k0 ? f0 : lk_rope_inv_freq(i, hd, lt), &s, &c);
            lk_rope_rotate(x0, x1, s, c, &y0, &y1);
            TY *yr = (TY *)a.y.data + r * a.y.ld;
            lk_elem<DY>::store(yr, j0, y0);
            lk_elem<DY>::store(yr, j1, y1);
        }
    }
}

} // namespace

extern "C" lk_status lk_cuda_rope(void *queue, const lk_rope_args *a)
{
    lk_op_scope op(queue, "lk_rope");
    if (!op.ok())
        return op.status();
    if (a->x.rows <= 0 || a->x.cols <= 0)
        return LK_OK;
    const int64_t pairs = a->x.cols / 2;
    const dim3 grid(lk_grid_cap((pairs + LK_ROPE_THREADS - 1) / LK_ROPE_THREADS, 1024),
                    lk_grid_cap(a->x.rows, 65535));
    LK_FLOAT_SWITCH(a->x.dtype, DX, LK_FLOAT_SWITCH(a->y.dtype, DY, {
        lk_launch(rope_kernel<DX, DY>, grid, LK_ROPE_THREADS, 0, op.stream(), *a);
    }));
    return op.launched();
}
