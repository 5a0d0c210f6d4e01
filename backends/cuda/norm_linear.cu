/* Lockstep CUDA driver: lk_rmsnorm_ternary_linear.
 *
 * The op is defined as lk_rmsnorm_quantize then lk_ternary_linear
 * (docs/numerics.md), and by default runs as exactly those two kernels.
 * ternary.cu also has a fused GEMV whose blocks each compute the RMSNorm
 * and quantisation of x themselves (one kernel instead of two, decode
 * shapes: M <= 8, K <= 4096), chosen with LOCKSTEP_CUDA_NORM_LINEAR=fused.
 * It gives the same bits but is slower on the H200 (Nsight, clocks
 * locked, BitNet-2B decode: 22-34 us per fused GEMV against 5.5 us of
 * norm + 7-9.5 us of GEMV; the demo's decode 674 -> 515 tok/s): every
 * one of its 160-864 blocks repeats the norm's barriers before its first
 * dot product.  It stays for the next attempt (the norm once per SM, or
 * shared through the L2), off until it wins. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/linear.cuh"

static bool nl_fused(void)
{
    static const bool on = [] {
        const char *e = getenv("LOCKSTEP_CUDA_NORM_LINEAR");
        return e != NULL && strcmp(e, "fused") == 0;
    }();
    return on;
}

extern "C" lk_status lk_cuda_rmsnorm_ternary_linear(void *queue, const lk_norm_linear_args *a)
{
    lk_status st = LK_OK;
    if (nl_fused() && lk_cuda_norm_t2_gemv(queue, a, &st))
        return st;
    st = lk_cuda_rmsnorm_quantize(queue, &a->norm);
    if (st != LK_OK)
        return st;
    return lk_cuda_ternary_linear(queue, &a->lin);
}
