/* Lockstep CUDA driver (internal): what the GEMM (gemm.cu) and the GEMV
 * (gemv.cu) kernels share: the epilogue of docs/numerics.md section 4 and
 * the GEMV entry that lk_cuda_gemm hands small-M (or small-N) calls to. */
#ifndef LK_CUDA_GEMM_CUH
#define LK_CUDA_GEMM_CUH

#include "backends/cuda/device.cuh"

/* The part of lk_gemm_args the epilogue reads. */
struct lk_gemm_epi {
    void *c;
    lk_dtype cdt;
    int64_t ldc, c_bs;
    const void *bias; /* NULL: none */
    lk_dtype bdt;
    int64_t bias_bs;
    int accumulate;
};

static inline lk_gemm_epi lk_gemm_epi_make(const lk_gemm_args *g)
{
    lk_gemm_epi e;
    e.c = g->c.data;
    e.cdt = g->c.dtype;
    e.ldc = g->c.ld;
    e.c_bs = g->c.batch_stride;
    e.bias = g->bias.data;
    e.bdt = g->bias.dtype;
    e.bias_bs = g->bias.batch_stride;
    e.accumulate = (g->flags & LK_GEMM_ACCUMULATE) != 0;
    return e;
}

/* t = total; t = t + bias[b][n]; t = t + C[b][m, n]; C[b][m, n] = store(t):
 * each step rounded, in this order (numerics.md section 4). */
static __device__ __forceinline__ void lk_gemm_store(const lk_gemm_epi &e, int64_t b, int64_t m,
                                                     int64_t n, float total)
{
    float t = total;
    if (e.bias)
        t = __fadd_rn(t, lk_load_any(e.bias, e.bdt, b * e.bias_bs + n));
    const int64_t ci = b * e.c_bs + m * e.ldc + n;
    if (e.accumulate)
        t = __fadd_rn(t, lk_load_any(e.c, e.cdt, ci));
    lk_store_any(e.c, e.cdt, ci, t);
}

/* Every 4-element group a GEMM loader reads as one access is aligned:
 * data, ld and (for batches) the batch stride in whole 4-element groups. */
static inline bool lk_gemm_vec_ok(const lk_tensor &t, int64_t batch)
{
    const size_t es = lk_dtype_bytes(t.dtype), al = 4 * es;
    return (uintptr_t)t.data % al == 0 && ((size_t)t.ld * es) % al == 0 &&
           (batch == 1 || ((size_t)t.batch_stride * es) % al == 0);
}

/* Tile pid of a tiles_m x tiles_n grid, in groups of `group` tile rows
 * (column by column within a group), so that neighbouring blocks share
 * rows of A and columns of B in L2. */
static __device__ __forceinline__ void lk_gemm_tile(int64_t pid, int64_t tiles_m, int64_t tiles_n,
                                                    int64_t group, int64_t *tm, int64_t *tn)
{
    const int64_t in_group = group * tiles_n;
    const int64_t first_m = pid / in_group * group;
    const int64_t group_m = tiles_m - first_m < group ? tiles_m - first_m : group;
    *tm = first_m + (pid % in_group) % group_m;
    *tn = (pid % in_group) / group_m;
}

/* Largest min(M, N) that goes to the GEMV kernels. */
#define LK_GEMV_MAX_S 8

/* GEMV for min(M, N) <= LK_GEMV_MAX_S: enqueues and returns true, or
 * returns false to leave the call to the tiled GEMM. */
bool lk_cuda_gemv(const lk_gemm_args *g, cudaStream_t stream, const lk_cuda_queue *q);

/* At device open: the GEMV kernels' shared memory opt-in. */
cudaError_t lk_cuda_gemv_setup();

/* f32 x f32 with 16-byte aligned rows (sgemm.cu): enqueues and returns
 * true, or returns false to leave the call to gemm.cu's kernel. */
bool lk_cuda_sgemm(const lk_gemm_args *g, cudaStream_t stream);

/* At device open: sgemm.cu's shared memory opt-in. */
cudaError_t lk_cuda_sgemm_setup();

#endif
