/* Lockstep CUDA driver (internal): the LK_GEMM_TC_SM90 tier on wgmma
 * (tc/wgmma_gemm.cu), called by tc/gemm.cu, and the integer GEMMs on int8
 * wgmma (tc/wgmma_int8.cu: the weights as B in shared memory, or ternary
 * weights as the register operand A), called by tc/ternary.cu. */
#ifndef LK_CUDA_TC_WGMMA_CUH
#define LK_CUDA_TC_WGMMA_CUH

#include "backends/cuda/driver.h"

/* Enqueue the tier's GEMM on wgmma with a bm x bn tile (one of
 * tc/wgmma_gemm.cu's wg_tiles: bm 128, bn 256, 192, 160, 128, 80 or 64; bm 64,
 * bn 256, 128, 64 or 48; any other pair, bn 0 among them: tile and cl
 * chosen from the shape), in clusters of cl (1 or 2: two blocks share the
 * loads of one operand; 1 where the device holds no such cluster), ks
 * (1, 2 or 4) 64-k slices a pipeline stage (the same bits whatever cl and
 * ks); a tile chosen from the shape may be split into two launches by
 * columns (split 1: where the cost model gains from it, 2: whenever the
 * last wave of tiles is partial, 0: never) and return true; false, having enqueued nothing, when it does
 * not apply: not an sm_90 GPU, a module without sm_90a code, a layout
 * other than A M x K and B N x K with 16-byte aligned rows, or a tensor
 * map the driver refuses. */
bool lk_cuda_tc_wgmma(lk_cuda_queue *q, const lk_gemm_args *a, int bm, int bn, int cl, int ks,
                      int split);

/* Enqueue lk_ternary_gemm (t2) or lk_int8_gemm (!t2) on int8 wgmma with a
 * 128 x bn tile (bn 256, 128 or 64, 0: chosen from the shape; exact int32
 * sums, so section 9's bits) and return true; false, having enqueued
 * nothing, when it does not apply: not an sm_90 GPU, a module without
 * sm_90a code, x or w rows not 16-byte aligned, or a tensor map the driver
 * refuses.  The caller then runs tc/ternary.cu's mma.sync kernels. */
bool lk_cuda_tc_wgmma_qgemm(lk_cuda_queue *q, const lk_qgemm_args *a, bool t2, int bn);

/* Enqueue lk_ternary_gemm on int8 wgmma with the weights as the register
 * operand A (decoded in the consumers' registers, y^T = W x^T) with
 * 128 weight rows x bx rows of x per tile (bx 96, 128 or 256; 0: chosen
 * from the shape), K split over a cluster of split blocks per tile (1..8;
 * 0: chosen), and return true; false, having enqueued nothing, where it
 * does not apply (as lk_cuda_tc_wgmma_qgemm).  pre: NULL, or the same
 * codes in the prepared layout lk_cuda_tc_t2_pre_make wrote (a->w then
 * gives only N and K). */
bool lk_cuda_tc_wgmma_ternary_ra(lk_cuda_queue *q, const lk_qgemm_args *a, const void *pre,
                                 int bx, int split);

/* Prepared ternary weights for that kernel: the bytes of the layout for
 * N x K codes on dev, 0 where it would not be used (not an sm_90 GPU, a
 * module without sm_90a code, LOCKSTEP_CUDA_T2_TC_LAYOUT=0); and the
 * enqueueing of its rearrangement from canonical LK_T2 rows w (device
 * memory) into dst (that many bytes), false if the launch failed. */
size_t lk_cuda_tc_t2_pre_bytes(const lk_cuda_device *dev, int64_t n, int64_t k);
bool lk_cuda_tc_t2_pre_make(cudaStream_t st, const lk_tensor *w, void *dst);

#endif
