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
