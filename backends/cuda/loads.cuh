/* Lockstep CUDA driver (internal): the load that streams data read once
 * per call (weights of a GEMV) past L1, shared by gemv.cu, linear.cu and
 * the benchmark's read-only kernel (bench/cuda/bench_read.cu). */
#ifndef LK_CUDA_LOADS_CUH
#define LK_CUDA_LOADS_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* 16 bytes at p (16-byte aligned), read-only for the kernel's lifetime:
 * the non-coherent path, no L1 allocation (the bytes are not read again
 * by this block, and keeping them would evict what is) */
static __device__ __forceinline__ uint4 lk_ld_stream(const void *p)
{
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

#endif
