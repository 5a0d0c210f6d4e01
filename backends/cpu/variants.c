/* Lockstep CPU driver: the kernel table of each variant (BLIS pattern:
 * start from the threaded reference, override what the ISA accelerates).
 *
 * Each ISA's kernels are the shared sources of backends/cpu/kernels/
 * compiled with that ISA's vector vocabulary (backends/cpu/<isa>/vec.h)
 * and flags, once natively and once against SIMDe; LK_CPU_KERNEL in
 * simd.h gives them the names declared here. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "backends/cpu/variants.h"

#define LK_CPU_DECLARE(p)                                                  \
    lk_status p##gemm(void *, const lk_gemm_args *);                       \
    lk_status p##reduce(void *, const lk_reduce_args *);                   \
    lk_status p##rmsnorm(void *, const lk_norm_args *);                    \
    lk_status p##layernorm(void *, const lk_norm_args *);                  \
    lk_status p##softmax(void *, const lk_softmax_args *);                 \
    lk_status p##log_softmax(void *, const lk_softmax_args *);             \
    lk_status p##unary(void *, const lk_unary_args *);                     \
    lk_status p##binary(void *, const lk_binary_args *);                   \
    lk_status p##quantize_act(void *, const lk_quant_args *);              \
    lk_status p##quantize_ternary(void *, const lk_quant_args *);          \
    lk_status p##ternary_pack(void *, const lk_pack_args *);               \
    lk_status p##ternary_unpack(void *, const lk_pack_args *);             \
    lk_status p##ternary_gemm(void *, const lk_qgemm_args *);              \
    lk_status p##int8_gemm(void *, const lk_qgemm_args *);

/* Every op the shared kernels accelerate. */
#define LK_CPU_FILL(k, p)                          \
    do {                                           \
        (k)->gemm = p##gemm;                       \
        (k)->reduce = p##reduce;                   \
        (k)->rmsnorm = p##rmsnorm;                 \
        (k)->layernorm = p##layernorm;             \
        (k)->softmax = p##softmax;                 \
        (k)->log_softmax = p##log_softmax;         \
        (k)->unary = p##unary;                     \
        (k)->binary = p##binary;                   \
        (k)->quantize_act = p##quantize_act;       \
        (k)->quantize_ternary = p##quantize_ternary; \
        (k)->ternary_pack = p##ternary_pack;       \
        (k)->ternary_unpack = p##ternary_unpack;   \
        (k)->ternary_gemm = p##ternary_gemm;       \
        (k)->int8_gemm = p##int8_gemm;             \
    } while (0)

/* AVX-VNNI is AVX2 with vpdpbusd: only the integer dot products differ. */
#define LK_CPU_FILL_VNNI(k, p)                     \
    do {                                           \
        (k)->ternary_gemm = p##ternary_gemm;       \
        (k)->int8_gemm = p##int8_gemm;             \
    } while (0)

#ifdef LK_HAVE_ISA_AVX2
LK_CPU_DECLARE(lk_cpu_avx2_)
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
LK_CPU_DECLARE(lk_cpu_avx_vnni_)
#endif
#ifdef LK_HAVE_ISA_AVX512
LK_CPU_DECLARE(lk_cpu_avx512_)
#endif
#ifdef LK_EMULATED_ISA
LK_CPU_DECLARE(lk_cpu_avx2_simde_)
LK_CPU_DECLARE(lk_cpu_avx_vnni_simde_)
LK_CPU_DECLARE(lk_cpu_avx512_simde_)
#endif

int lk_cpu_variant_built(lk_cpu_isa isa, int emulated)
{
    if (isa == LK_CPU_ISA_REF)
        return !emulated;
#ifdef LK_EMULATED_ISA
    if (emulated)
        return 1;
#else
    if (emulated)
        return 0;
#endif
    switch (isa) {
#ifdef LK_HAVE_ISA_AVX2
    case LK_CPU_ISA_AVX2:
        return 1;
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
    case LK_CPU_ISA_AVX_VNNI:
        return 1;
#endif
#ifdef LK_HAVE_ISA_AVX512
    case LK_CPU_ISA_AVX512_VNNI:
        return 1;
#endif
    default:
        return 0;
    }
}

void lk_cpu_variant_kernels(lk_cpu_isa isa, int emulated, lk_kernels *k)
{
    lk_cpu_ref_kernels(k);
    if (emulated) {
#ifdef LK_EMULATED_ISA
        switch (isa) {
        case LK_CPU_ISA_AVX2:
            LK_CPU_FILL(k, lk_cpu_avx2_simde_);
            break;
        case LK_CPU_ISA_AVX_VNNI:
            LK_CPU_FILL(k, lk_cpu_avx2_simde_);
            LK_CPU_FILL_VNNI(k, lk_cpu_avx_vnni_simde_);
            break;
        case LK_CPU_ISA_AVX512_VNNI:
            LK_CPU_FILL(k, lk_cpu_avx512_simde_);
            break;
        default:
            break;
        }
#endif
        return;
    }
    switch (isa) {
#ifdef LK_HAVE_ISA_AVX2
    case LK_CPU_ISA_AVX2:
        LK_CPU_FILL(k, lk_cpu_avx2_);
        break;
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
    case LK_CPU_ISA_AVX_VNNI:
        LK_CPU_FILL(k, lk_cpu_avx2_);
        LK_CPU_FILL_VNNI(k, lk_cpu_avx_vnni_);
        break;
#endif
#ifdef LK_HAVE_ISA_AVX512
    case LK_CPU_ISA_AVX512_VNNI:
        LK_CPU_FILL(k, lk_cpu_avx512_);
        break;
#endif
    default:
        break;
    }
}
