/* lockstep-cuda-bench's read probe: the floor of a GEMV whose weights
 * stay in L2 between calls.
 *
 * The decode shapes' weights (13-35 MB) fit in an H100's or H200's 50 MB
 * L2, so calls back to back read them from L2, not HBM, and the copy's
 * rate is not their floor.  This kernel does nothing but read the same
 * bytes the way the prepared-weights GEMV does (one wave of two 256-thread
 * blocks an SM, each an even contiguous share, 16 loads of 16 bytes in
 * flight a thread, the next one issued as each arrives, no L1 allocation),
 * launched the same way (programmatic dependent launch: the first loads
 * before griddepcontrol.wait): what it takes is the time of reading those
 * bytes with this kernel shape -- the cost of any launch included, no
 * arithmetic, no x.  Not part of the driver module. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/launch.cuh"
#include "backends/cuda/loads.cuh"

namespace {

#define RD_THREADS 256
#define RD_DEPTH 16

__global__ void __launch_bounds__(RD_THREADS, 2) rd_kernel(const uint4 *p, int64_t n16,
                                                           unsigned *sink)
{
    const int64_t per = (n16 + gridDim.x - 1) / gridDim.x;
    const int64_t b0 = (int64_t)blockIdx.x * per;
    const int64_t b1 = b0 + per < n16 ? b0 + per : n16;
    const int64_t step = (int64_t)RD_DEPTH * RD_THREADS;
    uint4 v[RD_DEPTH];
    int64_t i = b0 + threadIdx.x;
#pragma unroll
    for (int j = 0; j < RD_DEPTH; j++) {
        const int64_t k = i + (int64_t)j * RD_THREADS;
        v[j] = k < b1 ? lk_ld_stream(p + k) : make_uint4(0, 0, 0, 0);
    }
    lk_pdl_wait();
    lk_pdl_trigger();
    uint32_t x = 0;
    for (; i < b1; i += step) {
#pragma unroll
        for (int j = 0; j < RD_DEPTH; j++) {
            const uint4 c = v[j];
            const int64_t k = i + step + (int64_t)j * RD_THREADS;
            v[j] = k < b1 ? lk_ld_stream(p + k) : make_uint4(0, 0, 0, 0);
            x ^= c.x ^ c.y ^ c.z ^ c.w;
        }
    }
    if (x == 0x9e3779b9u) /* keeps the loads; (almost) never stores */
        *sink = x;
}

} // namespace

/* Enqueue one read of the first bytes / 16 * 16 bytes at p on st (sink: 4
 * writable device bytes), two blocks an SM, with programmatic dependent
 * launch where the driver would use it (sm_90 and LOCKSTEP_CUDA_PDL not
 * "0"); 0 or a cudaError_t. */
extern "C" int lk_bench_read(const void *p, size_t bytes, void *sink, cudaStream_t st)
{
    static int sms = 0, pdl_on = 0; /* the bench uses one device */
    if (sms == 0) {
        int dev = 0, major = 0;
        (void)cudaGetDevice(&dev);
        (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        (void)cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        const char *env = getenv("LOCKSTEP_CUDA_PDL");
        pdl_on = major >= 9 && !(env && strcmp(env, "0") == 0);
        if (sms <= 0)
            sms = 1;
    }
    lk_pdl_scope pdl(pdl_on);
    return (int)lk_launch(rd_kernel, dim3((unsigned)(2 * sms)), dim3(RD_THREADS),
                          0, st, (const uint4 *)p, (int64_t)(bytes / 16), (unsigned *)sink);
}
