/* Lockstep CUDA driver (internal): programmatic dependent launch (PDL).
 *
 * Decode runs many small kernels back to back; on Hopper a kernel launched
 * with the programmatic-stream-serialization attribute may start while the
 * previous kernel of the stream is still running, and wait in hardware
 * (griddepcontrol.wait) until that kernel has completed and its memory is
 * visible.  The launch latency and the ramp-up of the next kernel then hide
 * behind the tail of the current one.
 *
 * Rules for every kernel launched through lk_launch:
 * - lk_pdl_wait() before the first global-memory read of anything an earlier
 *   op may have written, and before the first global-memory write.  Data no
 *   op writes (a prepared lk_weights handle's memory, constants) may be read
 *   or prefetched before it.  Shared-memory setup may come first.
 * - Every block executes lk_pdl_wait(): never return before it (an early
 *   return that skips it lets this grid complete while its predecessor is
 *   still running, and then the NEXT kernel's wait no longer covers that
 *   predecessor).
 * - lk_pdl_trigger() right after lk_pdl_wait(): the next kernel's blocks may
 *   then be scheduled (they wait in their own lk_pdl_wait for this grid to
 *   complete).  The trigger counts only when every block of this grid has
 *   executed it or exited, so all blocks of this grid are resident by then;
 *   a kernel may still not assume that it has the SMs to itself at launch
 *   (the previous grid may be finishing next to it).
 * - One exception: the second launch of a GEMM that tc/wgmma_gemm.cu splits in
 *   two by columns reads only what the first launch's predecessors wrote,
 *   so it waits at its end instead (wg_kargs.tail): once the first launch
 *   has triggered, every one of its blocks has passed its own wait, and by
 *   waiting before it completes the second keeps the next kernel's wait
 *   covering both.
 * - A kernel launched with <<<>>> needs neither call and stays correct; a
 *   kernel that calls them and is launched with <<<>>> is also correct (both
 *   are no-ops without the attribute).
 *
 * Hazard (prepared weights): a kernel may read prepared weights before its
 * lk_pdl_wait(), that is while the previous kernel still runs.  So every op
 * that WRITES memory of an lk_weights handle (lk_weights_prepare's kernels)
 * ends with lk_pdl_fence(stream): an empty kernel launched WITHOUT the
 * attribute, which starts only once the writers have completed, so the next
 * kernel's early reads cannot overlap the writes.
 *
 * Memcpy and memset (graph nodes or stream work) keep full dependencies
 * with the kernels around them; only kernel-to-kernel edges are relaxed.
 * Under stream capture (CUDA >= 12.3) the attribute becomes a programmatic
 * edge of the graph.
 *
 * Whether PDL is on is decided once per device when it is opened (compute
 * capability >= 9.0 and LOCKSTEP_CUDA_PDL not "0": lk_cuda_device.pdl); the
 * op scope (device.cuh) makes it the calling thread's current setting
 * (lk_pdl_now) for the duration of the op, so lk_launch reads one
 * thread-local int.  Outside an op scope lk_launch launches plainly. */
#ifndef LK_CUDA_LAUNCH_CUH
#define LK_CUDA_LAUNCH_CUH

#include <utility>

#include <cuda_runtime.h>

/* Wait until the previous grid of the stream has completed and its memory
 * is visible (no-op before sm_90 or without the launch attribute). */
static __device__ __forceinline__ void lk_pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Let the next grid of the stream be scheduled (no-op before sm_90). */
static __device__ __forceinline__ void lk_pdl_trigger()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The calling thread's PDL setting for the op being launched (1: launch
 * with the attribute); set by lk_op_scope from lk_cuda_device.pdl. */
inline thread_local int lk_pdl_now = 0;

/* Sets lk_pdl_now for a scope and restores the previous value after it
 * (ops may run other ops' launchers inside their own scope). */
struct lk_pdl_scope {
    int prev;
    explicit lk_pdl_scope(int on) : prev(lk_pdl_now) { lk_pdl_now = on; }
    ~lk_pdl_scope() { lk_pdl_now = prev; }
    lk_pdl_scope(const lk_pdl_scope &) = delete;
    lk_pdl_scope &operator=(const lk_pdl_scope &) = delete;
};

/* A cluster of n blocks along x (a launch attribute). */
static inline cudaLaunchAttribute lk_cluster_attr(unsigned n)
{
    cudaLaunchAttribute a = {};
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = n;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
    return a;
}

/* Launch kernel<<<grid, block, smem, st>>>(args...) in clusters of
 * `cluster` blocks along x (1: none), with programmatic stream
 * serialization when PDL is on for the op's device.  Returns the launch
 * error; like a <<<>>> launch it also stays the thread's last error, so
 * lk_op_scope::launched() still reports it. */
template <typename... P, typename... A>
static inline cudaError_t lk_launch_cluster(void (*kernel)(P...), dim3 grid, dim3 block,
                                            size_t smem, cudaStream_t st, unsigned cluster,
                                            A &&...args)
{
    cudaLaunchAttribute attr[2] = {};
    unsigned n = 0;
    if (cluster > 1)
        attr[n++] = lk_cluster_attr(cluster);
    if (lk_pdl_now) {
        attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (n == 0) {
        kernel<<<grid, block, smem, st>>>(std::forward<A>(args)...);
        return cudaPeekAtLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cfg.attrs = attr;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

/* The same without clusters. */
template <typename... P, typename... A>
static inline cudaError_t lk_launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                    cudaStream_t st, A &&...args)
{
    return lk_launch_cluster(kernel, grid, block, smem, st, 1, std::forward<A>(args)...);
}

template <int = 0> __global__ void lk_pdl_fence_kernel() {}

/* After the last kernel that writes prepared-weight memory: a plain launch,
 * so the next PDL kernel cannot start (and read weights early) before those
 * writes have completed.  Nothing to do when PDL is off. */
static inline cudaError_t lk_pdl_fence(cudaStream_t st)
{
    if (!lk_pdl_now)
        return cudaSuccess;
    lk_pdl_fence_kernel<<<1, 1, 0, st>>>();
    return cudaPeekAtLastError();
}

#endif
