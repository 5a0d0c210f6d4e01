/* Lockstep CUDA driver (internal): the host side the wgmma kernels'
 * launchers share: the driver's tensor-map encoder, 2-D byte tensor maps
 * (the int8 kernels' operands), and how many clusters of a kernel the
 * device holds at once. */
#ifndef LK_CUDA_TC_WGMMA_HOST_CUH
#define LK_CUDA_TC_WGMMA_HOST_CUH

#include "backends/cuda/tc/wgmma_ptx.cuh"

namespace {

/* cuTensorMapEncodeTiled from the driver, found once. */
typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                              const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                              const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

encode_fn get_encode()
{
    static encode_fn fn;
    static int tried;
    if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
        void *p = NULL;
        cudaDriverEntryPointQueryResult qr;
#if CUDART_VERSION >= 12050
        const cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p,
                                                               12000, cudaEnableDefault, &qr);
#else
        const cudaError_t e =
            cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &qr);
#endif
        if (e != cudaSuccess || qr != cudaDriverEntryPointSuccess)
            p = NULL;
        (void)cudaGetLastError();
        __atomic_store_n(&fn, (encode_fn)p, __ATOMIC_RELEASE);
        __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
}
/* Clusters of n blocks of kernel (WG_THREADS threads, smem bytes of
 * dynamic shared memory) the device holds at once, asked once and kept in
 * *slot (0: not asked, -1: none, else the count); 0 where none. */
template <typename... P>
int wg_max_clusters(void (*kernel)(P...), size_t smem, unsigned n, int *slot)
{
    int v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (v == 0) {
        cudaLaunchAttribute attr[1] = {lk_cluster_attr(n)};
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(n);
        cfg.blockDim = dim3(WG_THREADS);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        int c = 0;
        if (cudaOccupancyMaxActiveClusters(&c, kernel, &cfg) != cudaSuccess || c < 1)
            c = -1;
        (void)cudaGetLastError();
        __atomic_store_n(slot, c, __ATOMIC_RELEASE);
        v = c;
    }
    return v < 0 ? 0 : v;
}

/* A 2-D byte matrix: rows x cols bytes, ld bytes apart, boxes of
 * box_rows x box_cols; swizzled (128 bytes) or plain. */
bool make_map_u8(encode_fn enc, CUtensorMap *map, const void *base, int64_t rows, int64_t cols,
                 int64_t ld, int box_cols, int box_rows, bool swizzle)
{
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)ld};
    const cuuint32_t box[2] = {(cuuint32_t)box_cols, (cuuint32_t)box_rows};
    const cuuint32_t estr[2] = {1, 1};
    return enc(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE,
               swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
               CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

} // namespace

#endif
