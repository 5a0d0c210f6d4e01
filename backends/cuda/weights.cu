/* Lockstep CUDA: prepared weights (include/lockstep/weights.h), the
 * rearrangement into the layouts of linear.cuh.  Preparing is one kernel
 * per handle on the queue, then a wait for it, so that the caller may
 * change or free the source as soon as this returns (as with the core's
 * fallback copy). */
#include <stdlib.h>

#include "backends/cuda/linear.cuh"

namespace {

/* One thread per 16-byte piece of the float layout. */
template <lk_dtype DW>
__global__ void __launch_bounds__(256) prep_float_kernel(lk_tensor w, int64_t nkb, int64_t total,
                                                         uint4 *dst)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DW>::T T;
    constexpr int EPP = 16 / (int)sizeof(T);      /* elements per piece */
    constexpr int PPC = LK_KB / EPP;              /* pieces per chain */
    /* -0: a padding product fma(+0, -0, acc) leaves acc as it was */
    const uint32_t negz = sizeof(T) == 4 ? 0x80000000u : 0x8000u;
    const T *src = (const T *)w.data;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int r = (int)(i % LK_LIN_G);
        const int64_t j = (i / LK_LIN_G) % PPC, unit = i / (LK_LIN_G * PPC);
        const int64_t g = unit / nkb, kb = unit % nkb;
        const int64_t n = g * LK_LIN_G + r, k0 = kb * LK_KB + j * EPP;
        uint32_t bits[EPP];
#pragma unroll
        for (int e = 0; e < EPP; e++) {
            const int64_t k = k0 + e;
            uint32_t b = 0;
            if (k >= w.cols)
                b = negz;
            else if (n < w.rows) {
                if (sizeof(T) == 4)
                    b = __float_as_uint(((const float *)src)[n * w.ld + k]);
                else
                    b = ((const uint16_t *)src)[n * w.ld + k];
            }
            bits[e] = b;
        }
        uint4 v;
        if constexpr (EPP == 4)
            v = make_uint4(bits[0], bits[1], bits[2], bits[3]);
        else
            v = make_uint4(bits[0] | bits[1] << 16, bits[2] | bits[3] << 16,
                           bits[4] | bits[5] << 16, bits[6] | bits[7] << 16);
        dst[i] = v;
    }
}

lk_status fail(lk_cuda_queue *q, cudaError_t e, const char *what)
{
    return lk_cuda_fail(q->dev->host, e, what);
}

} // namespace

extern "C" void lk_cuda_weights_destroy(void *dev, void *prepared)
{
    lk_cuda_weights *h = (lk_cuda_weights *)prepared;
    if (!h)
        return;
    lk_cuda_scope sc;
    if (lk_cuda_enter((const lk_cuda_device *)dev, &sc) == LK_OK) {
        (void)cudaFree(h->w);
        (void)cudaFree(h->tc);
        lk_cuda_leave(&sc);
    }
    free(h);
}

extern "C" lk_status lk_cuda_weights_prepare(void *queue, const lk_weights_args *a, void **out)
{
    lk_op_scope op(queue, "lk_weights_prepare");
    if (!op.ok())
        return op.status();
    lk_cuda_queue *q = op.q;
    const lk_tensor &w = a->w;
    /* Ternary weights: the GEMV reads a canonical copy (ternary.cu's
     * t2_gemv read it faster than a rearranged layout did; the driver's
     * own copy tells it that no op writes them, so it requests them
     * before lk_pdl_wait()), and on sm_90 the tensor-core kernel its own
     * layout (lk_cuda_t2_prepare). */
    if (w.dtype == LK_T2)
        return lk_cuda_t2_prepare(op, a, out);
    const int64_t groups = (w.rows + LK_LIN_G - 1) / LK_LIN_G;
    const int64_t nkb = (w.cols + LK_KB - 1) / LK_KB;
    /* the float kernel keeps x and the block partials of its rows in
     * shared memory: beyond that K the core's copy and lk_gemm serve */
    if (nkb > lk_lin_max_nkb(lk_lin_smem_limit(q->dev)))
        return LK_ERR_UNSUPPORTED;
    lk_cuda_weights *h = (lk_cuda_weights *)calloc(1, sizeof *h);
    if (!h)
        return op.fail(LK_ERR_OUT_OF_MEMORY, "lk_weights_prepare: out of host memory");
    h->dt = w.dtype;
    h->n = w.rows;
    h->k = w.cols;
    h->groups = groups;
    h->nkb = nkb;
    h->bytes = (size_t)(groups * nkb) * LK_LIN_G * LK_KB * lk_dtype_bytes(w.dtype);
    (void)cudaGetLastError();
    cudaError_t e = cudaMalloc(&h->w, h->bytes);
    if (e != cudaSuccess) {
        free(h);
        return fail(q, e, "lk_weights_prepare: cudaMalloc");
    }
    {
        const int64_t total = (int64_t)(h->bytes / 16);
        const unsigned blocks = lk_grid_cap((total + 255) / 256, (int64_t)1 << 20);
        LK_FLOAT_SWITCH(w.dtype, DW,
                        lk_launch(prep_float_kernel<DW>, blocks, 256, 0, op.stream(), w, nkb,
                                  total, (uint4 *)h->w));
        /* the linear kernels read prepared weights before their
         * lk_pdl_wait(): none may start before these writes are done
         * (launch.cuh; the synchronisation below also ensures it) */
        (void)lk_pdl_fence(op.stream());
    }
    e = cudaGetLastError();
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(op.stream());
    if (e != cudaSuccess) {
        lk_cuda_weights_destroy(q->dev, h);
        return fail(q, e, "lk_weights_prepare");
    }
    *out = h;
    return LK_OK;
}
