/* Lockstep CUDA driver (internal): the mbarrier wrappers of the sm_90
 * kernels that stream with bulk copies (the tc/wgmma_*.cu TMA rings, bitnet.cu's
 * weight ring), and the bounded wait they share: a pipeline wait that lasts
 * longer than LK_STALL_NS traps, so a hang becomes a launch failure the
 * next call reports instead of a process that never returns.  Builds for
 * compute-sanitizer, whose instrumentation can slow a wait past it, raise
 * it (-DWG_STALL_NS=..., scripts/gpu-check.sh's ARCH). */
#ifndef LK_CUDA_MBARRIER_CUH
#define LK_CUDA_MBARRIER_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef WG_STALL_NS
#define LK_STALL_NS WG_STALL_NS
#else
#define LK_STALL_NS 4000000000ull /* 4 s */
#endif

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
static __device__ __forceinline__ void lk_mbar_init(uint32_t bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
}

/* One arrival that also expects `bytes` of bulk copies to complete on it. */
static __device__ __forceinline__ void lk_mbar_expect_tx(uint32_t bar, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

static __device__ __forceinline__ void lk_mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

static __device__ __forceinline__ uint64_t lk_global_ns()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
    return t;
}

/* Called now and then by a polling loop (t0 starts at 0): traps once the
 * wait has lasted LK_STALL_NS. */
static __device__ __forceinline__ void lk_stall_check(uint64_t &t0)
{
    const uint64_t t = lk_global_ns();
    if (t0 == 0)
        t0 = t;
    else if (t - t0 > LK_STALL_NS)
        __trap();
}

/* Wait for the completion of the phase of the given parity; a wait of
 * more than LK_STALL_NS traps. */
static __device__ __forceinline__ void lk_mbar_wait(uint32_t bar, unsigned parity)
{
    uint64_t t0 = 0;
    for (unsigned i = 1;; i++) {
        unsigned done;
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
        if (done)
            return;
        if (i % 256 == 0)
            lk_stall_check(t0);
    }
}
#endif

#endif
