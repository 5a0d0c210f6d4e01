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
    lk_status p##int8_gemm(void *, const lk_qgemm_args *);              \
    lk_status p##attention(void *, const lk_attention_args *);             \
    lk_status p##attention_paged(void *, const lk_attention_paged_args *); \
    lk_status p##rmsnorm_quantize(void *, const lk_norm_quant_args *);     \
    lk_status p##glu(void *, const lk_glu_args *);

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
        (k)->attention = p##attention;             \
        (k)->rmsnorm_quantize = p##rmsnorm_quantize; \
        (k)->glu = p##glu;                         \
    } while (0)

/* AVX-VNNI is AVX2 with vpdpbusd, NEON dotprod NEON with sdot: only the
 * integer dot products differ. */
#define LK_CPU_FILL_VNNI(k, p)                     \
    do {                                           \
        (k)->ternary_gemm = p##ternary_gemm;       \
        (k)->int8_gemm = p##int8_gemm;             \
    } while (0)

/* Prepared weights (include/lockstep/weights.h): every variant. */
#define LK_CPU_DECLARE_WEIGHTS(p)                                                   \
    lk_status p##weights_prepare(void *, const lk_weights_args *, void **);         \
    void p##weights_destroy(void *, void *);                                        \
    lk_status p##linear(void *, const lk_linear_args *);                            \
    lk_status p##ternary_linear(void *, const lk_linear_args *);

#define LK_CPU_FILL_WEIGHTS(k, p)                      \
    do {                                               \
        (k)->weights_prepare = p##weights_prepare;     \
        (k)->weights_destroy = p##weights_destroy;     \
        (k)->linear = p##linear;                       \
        (k)->ternary_linear = p##ternary_linear;       \
    } while (0)

#ifdef LK_HAVE_ISA_AVX2
LK_CPU_DECLARE(lk_cpu_avx2_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx2_)
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
LK_CPU_DECLARE(lk_cpu_avx_vnni_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx_vnni_)
#endif
#ifdef LK_HAVE_ISA_AVX512
LK_CPU_DECLARE(lk_cpu_avx512_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx512_)
#endif
#ifdef LK_HAVE_ISA_NEON
LK_CPU_DECLARE(lk_cpu_neon_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_neon_)
#endif
#ifdef LK_HAVE_ISA_NEON_DOTPROD
LK_CPU_DECLARE(lk_cpu_neon_dotprod_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_neon_dotprod_)
#endif
#ifdef LK_EMULATED_ISA
LK_CPU_DECLARE(lk_cpu_neon_simde_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_neon_simde_)
LK_CPU_DECLARE(lk_cpu_neon_dotprod_simde_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_neon_dotprod_simde_)
LK_CPU_DECLARE(lk_cpu_avx2_simde_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx2_simde_)
LK_CPU_DECLARE(lk_cpu_avx_vnni_simde_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx_vnni_simde_)
LK_CPU_DECLARE(lk_cpu_avx512_simde_)
LK_CPU_DECLARE_WEIGHTS(lk_cpu_avx512_simde_)
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
#ifdef LK_HAVE_ISA_NEON
    case LK_CPU_ISA_NEON:
        return 1;
#endif
#ifdef LK_HAVE_ISA_NEON_DOTPROD
    case LK_CPU_ISA_NEON_DOTPROD:
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
            LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx2_simde_);
            break;
        case LK_CPU_ISA_AVX_VNNI:
            LK_CPU_FILL(k, lk_cpu_avx2_simde_);
            LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx2_simde_);
            LK_CPU_FILL_VNNI(k, lk_cpu_avx_vnni_simde_);
            k->ternary_linear = lk_cpu_avx_vnni_simde_ternary_linear;
            break;
        case LK_CPU_ISA_AVX512_VNNI:
            LK_CPU_FILL(k, lk_cpu_avx512_simde_);
            LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx512_simde_);
            break;
        case LK_CPU_ISA_NEON:
            LK_CPU_FILL(k, lk_cpu_neon_simde_);
            LK_CPU_FILL_WEIGHTS(k, lk_cpu_neon_simde_);
            break;
        case LK_CPU_ISA_NEON_DOTPROD:
            LK_CPU_FILL(k, lk_cpu_neon_simde_);
            LK_CPU_FILL_WEIGHTS(k, lk_cpu_neon_simde_);
            LK_CPU_FILL_VNNI(k, lk_cpu_neon_dotprod_simde_);
            k->ternary_linear = lk_cpu_neon_dotprod_simde_ternary_linear;
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
        LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx2_);
        break;
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
    case LK_CPU_ISA_AVX_VNNI:
        LK_CPU_FILL(k, lk_cpu_avx2_);
        LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx2_);
        LK_CPU_FILL_VNNI(k, lk_cpu_avx_vnni_);
        k->ternary_linear = lk_cpu_avx_vnni_ternary_linear;
        break;
#endif
#ifdef LK_HAVE_ISA_AVX512
    case LK_CPU_ISA_AVX512_VNNI:
        LK_CPU_FILL(k, lk_cpu_avx512_);
        LK_CPU_FILL_WEIGHTS(k, lk_cpu_avx512_);
        break;
#endif
#ifdef LK_HAVE_ISA_NEON
    case LK_CPU_ISA_NEON:
        LK_CPU_FILL(k, lk_cpu_neon_);
        LK_CPU_FILL_WEIGHTS(k, lk_cpu_neon_);
        break;
#endif
#ifdef LK_HAVE_ISA_NEON_DOTPROD
    case LK_CPU_ISA_NEON_DOTPROD:
        LK_CPU_FILL(k, lk_cpu_neon_);
        LK_CPU_FILL_WEIGHTS(k, lk_cpu_neon_);
        LK_CPU_FILL_VNNI(k, lk_cpu_neon_dotprod_);
        k->ternary_linear = lk_cpu_neon_dotprod_ternary_linear;
        break;
#endif
    default:
        break;
    }
}

void lk_cpu_variant_paged(lk_cpu_isa isa, int emulated, lk_device_iface *iface)
{
    iface->attention_paged = lk_cpu_ref_attention_paged;
    iface->kv_write_paged = lk_cpu_ref_kv_write_paged;
    if (emulated) {
#ifdef LK_EMULATED_ISA
        switch (isa) {
        case LK_CPU_ISA_AVX2:
        case LK_CPU_ISA_AVX_VNNI:
            iface->attention_paged = lk_cpu_avx2_simde_attention_paged;
            break;
        case LK_CPU_ISA_AVX512_VNNI:
            iface->attention_paged = lk_cpu_avx512_simde_attention_paged;
            break;
        case LK_CPU_ISA_NEON:
        case LK_CPU_ISA_NEON_DOTPROD:
            iface->attention_paged = lk_cpu_neon_simde_attention_paged;
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
        iface->attention_paged = lk_cpu_avx2_attention_paged;
        break;
#endif
#ifdef LK_HAVE_ISA_AVX_VNNI
    case LK_CPU_ISA_AVX_VNNI:
        iface->attention_paged = lk_cpu_avx2_attention_paged;
        break;
#endif
#ifdef LK_HAVE_ISA_AVX512
    case LK_CPU_ISA_AVX512_VNNI:
        iface->attention_paged = lk_cpu_avx512_attention_paged;
        break;
#endif
#ifdef LK_HAVE_ISA_NEON
    case LK_CPU_ISA_NEON:
        iface->attention_paged = lk_cpu_neon_attention_paged;
        break;
#endif
#ifdef LK_HAVE_ISA_NEON_DOTPROD
    case LK_CPU_ISA_NEON_DOTPROD:
        iface->attention_paged = lk_cpu_neon_attention_paged;
        break;
#endif
    default:
        break;
    }
}
