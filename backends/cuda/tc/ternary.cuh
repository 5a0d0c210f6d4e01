/* Lockstep CUDA driver (internal): the integer GEMMs on tensor cores
 * (backends/cuda/tc/ternary.cu), called by ternary.cu and int8_gemm.cu. */
#ifndef LK_CUDA_TC_TERNARY_CUH
#define LK_CUDA_TC_TERNARY_CUH

#include "backends/cuda/driver.h"

/* Enqueue lk_ternary_gemm (t2) or lk_int8_gemm (!t2) on the int8 tensor
 * cores (mma.sync m16n8k32, exact int32 accumulation, so section 9's bits)
 * and return true; false, having enqueued nothing, when it does not apply
 * (M <= 8, a GPU before sm_80, too little shared memory, or
 * LOCKSTEP_CUDA_TC_INT_KERNEL=simt): the caller then runs its own kernel.
 * pre: NULL, or prepared weights' copy in tc/wgmma_int8.cu's layout
 * (lk_cuda_tc_t2_pre_make), which the weights-as-A kernel reads instead
 * of a->w's canonical codes (the other kernels read a->w). */
bool lk_cuda_tc_qgemm(lk_cuda_queue *q, const lk_qgemm_args *a, bool t2, const void *pre);

#endif
