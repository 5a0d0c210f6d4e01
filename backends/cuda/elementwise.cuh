/* Lockstep CUDA driver (internal): the grid of element-wise kernels.
 *
 * Threads take one element, or four when every row of every tensor starts
 * 4-element aligned (VEC); blockIdx.y walks the rows.  Tensors whose rows
 * are contiguous (ld == cols) are treated as one long row, so a tall
 * narrow matrix still fills the GPU. */
#ifndef LK_CUDA_ELEMENTWISE_CUH
#define LK_CUDA_ELEMENTWISE_CUH

#include "backends/cuda/device.cuh"

struct lk_ew_shape {
    int64_t rows, cols; /* after flattening */
    int flat;           /* 1: the rows were merged into one */
    int vec;            /* 1: four elements per access */
    dim3 grid;
};

/* ts: the tensors of the op that have `rows` rows (a broadcast operand is
 * left out by the caller and disables flattening with allow_flat = 0). */
static inline lk_ew_shape lk_ew_plan(const lk_tensor *const *ts, int nt, int64_t rows,
                                     int64_t cols, bool allow_flat = true)
{
    lk_ew_shape s;
    bool flat = allow_flat && rows > 1;
    for (int i = 0; i < nt; i++)
        flat = flat && ts[i]->ld == cols;
    s.flat = flat;
    s.rows = flat ? 1 : rows;
    s.cols = flat ? rows * cols : cols;
    bool vec = true;
    for (int i = 0; i < nt; i++) {
        size_t a = 4 * lk_dtype_bytes(ts[i]->dtype);
        vec = vec && (uintptr_t)ts[i]->data % a == 0 &&
              (flat || (size_t)ts[i]->ld * lk_dtype_bytes(ts[i]->dtype) % a == 0);
    }
    s.vec = vec;
    const int64_t per = vec ? 4 : 1;
    const int64_t groups = (s.cols + per - 1) / per;
    s.grid = dim3(lk_grid_cap((groups + 255) / 256, (int64_t)1 << 30),
                  lk_grid_cap(s.rows, 65535), 1);
    return s;
}

/* for (row r, first element i of this thread's group of 1 or 4) */
#define LK_EW_FOR(s, VEC, r, i)                                                              \
    for (int64_t r = blockIdx.y; r < (s).rows; r += gridDim.y)                              \
        for (int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * ((VEC) ? 4 : 1); \
             i < (s).cols; i += (int64_t)gridDim.x * blockDim.x * ((VEC) ? 4 : 1))

#endif
