/* Lockstep CUDA driver (internal): element access by a run-time dtype, for
 * the transformer ops (rope.cu, attention.cu, embedding.cu), whose inner
 * loops are dominated by other work than the dtype switch. */
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

#endif
