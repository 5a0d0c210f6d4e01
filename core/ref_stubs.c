/* TEMPORARY (core helper, issue 2): weak stand-ins for reference kernels
 * and drivers that other helpers are still writing, so that liblockstep
 * links meanwhile.  A real definition anywhere in the link replaces each
 * one.  The lead removes this file once backends/ref and backends/cpu are
 * complete. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>

#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#ifdef LK_HAVE_CPU_DRIVER
#include "backends/cpu/cpu.h"
#endif
#include "core/error.h"

#define LK_WEAK __attribute__((weak))

#define LK_STUB_KERNEL(op, type)                                                    \
    LK_WEAK lk_status lk_ref_##op(const type *a)                                    \
    {                                                                               \
        (void)a;                                                                    \
        return lk_error(LK_ERR_UNSUPPORTED, "lk_ref_" #op ": not written yet");      \
    }

LK_STUB_KERNEL(gemm, lk_gemm_args)
LK_STUB_KERNEL(reduce, lk_reduce_args)
LK_STUB_KERNEL(rmsnorm, lk_norm_args)
LK_STUB_KERNEL(layernorm, lk_norm_args)
LK_STUB_KERNEL(softmax, lk_softmax_args)
LK_STUB_KERNEL(log_softmax, lk_softmax_args)
LK_STUB_KERNEL(unary, lk_unary_args)
LK_STUB_KERNEL(binary, lk_binary_args)
LK_STUB_KERNEL(quantize_act, lk_quant_args)
LK_STUB_KERNEL(quantize_ternary, lk_quant_args)
LK_STUB_KERNEL(ternary_pack, lk_pack_args)
LK_STUB_KERNEL(ternary_unpack, lk_pack_args)
LK_STUB_KERNEL(ternary_gemm, lk_qgemm_args)
LK_STUB_KERNEL(int8_gemm, lk_qgemm_args)

#define LK_STUB_FN(name)                                                            \
    LK_WEAK float name(float x)                                                     \
    {                                                                               \
        (void)x;                                                                    \
        return NAN;                                                                 \
    }

LK_STUB_FN(lk_ref_expf)
LK_STUB_FN(lk_ref_logf)
LK_STUB_FN(lk_ref_tanhf)
LK_STUB_FN(lk_ref_erff)
LK_STUB_FN(lk_ref_sigmoidf)
LK_STUB_FN(lk_ref_siluf)
LK_STUB_FN(lk_ref_gelu_tanhf)
LK_STUB_FN(lk_ref_gelu_erff)

#ifdef LK_HAVE_CPU_DRIVER
/* NULL: the registry skips a built-in driver that is not there. */
LK_WEAK const lk_driver *lk_cpu_driver(void)
{
    return NULL;
}
#endif
