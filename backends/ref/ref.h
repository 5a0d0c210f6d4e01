/* Lockstep reference backend (internal): the executable contract.
 *
 * Each kernel follows docs/numerics.md literally, one file per section.
 * The args are validated and normalised by the core (include/lockstep/
 * driver.h).  Kernels are pure functions of their arguments and never
 * depend on threads, so the CPU driver uses them for any slot it does not
 * override, on any row slice of the arguments. */
#ifndef LK_BACKENDS_REF_H
#define LK_BACKENDS_REF_H

#include <lockstep/driver.h>

/* The reference kernels, without a queue. */
lk_status lk_ref_gemm(const lk_gemm_args *a);
lk_status lk_ref_reduce(const lk_reduce_args *a);
lk_status lk_ref_rmsnorm(const lk_norm_args *a);
lk_status lk_ref_layernorm(const lk_norm_args *a);
lk_status lk_ref_softmax(const lk_softmax_args *a);
lk_status lk_ref_log_softmax(const lk_softmax_args *a);
lk_status lk_ref_unary(const lk_unary_args *a);
lk_status lk_ref_binary(const lk_binary_args *a);
lk_status lk_ref_quantize_act(const lk_quant_args *a);
/* lk_rmsnorm then lk_quantize_act, row by row through an f32 row. */
lk_status lk_ref_rmsnorm_quantize(const lk_norm_quant_args *a);
lk_status lk_ref_quantize_ternary(const lk_quant_args *a);
lk_status lk_ref_ternary_pack(const lk_pack_args *a);
lk_status lk_ref_ternary_unpack(const lk_pack_args *a);
lk_status lk_ref_ternary_gemm(const lk_qgemm_args *a);
lk_status lk_ref_int8_gemm(const lk_qgemm_args *a);

/* The tensor-core tier (mma_model.c, numerics.md "Tensor-core tier"):
 * lk_gemm with LK_GEMM_TC_SM80 or LK_GEMM_TC_SM90 in a->flags. */
lk_status lk_ref_gemm_tc(const lk_gemm_args *a);
#define LK_MMA_K 16        /* k of one instruction step (m16n8k16, m64nNk16) */
#define LK_MMA_F_SM80 24   /* fractional bits the terms are truncated to */
#define LK_MMA_F_SM90 25
#define LK_MMA_MAX_TERMS 16
/* One fused dot-add of the model: c + sum_{i<n} a[i]*b[i] (n <= 16, a and b
 * raw bf16 or f16 bits), terms aligned to the largest exponent, truncated
 * to frac_bits fractional bits, summed exactly, rounded toward zero. */
float lk_mma_fdpa(lk_dtype dt, const uint16_t *a, const uint16_t *b, int n, float c,
                  int frac_bits);
/* One k = 16 instruction step of a tier (LK_GEMM_TC_SM80: two halves of 8). */
float lk_mma_step(unsigned tier, lk_dtype dt, const uint16_t *a, const uint16_t *b, float c);

/* The transformer ops (numerics.md section 12). */
lk_status lk_ref_rope(const lk_rope_args *a);
lk_status lk_ref_attention(const lk_attention_args *a);
lk_status lk_ref_attention_paged(const lk_attention_paged_args *a);
lk_status lk_ref_attention_paged_rows(const lk_attention_paged_args *a, int64_t r0, int64_t r1);
lk_status lk_ref_kv_write_paged(const lk_kv_write_paged_args *a);
lk_status lk_ref_embedding(const lk_embedding_args *a);
lk_status lk_ref_set_rows(const lk_set_rows_args *a);
lk_status lk_ref_glu(const lk_glu_args *a);

/* The training ops (numerics.md section 13). */
lk_status lk_ref_unary_backward(const lk_unary_backward_args *a);
lk_status lk_ref_softmax_backward(const lk_softmax_backward_args *a);
lk_status lk_ref_norm_backward(const lk_norm_backward_args *a);
lk_status lk_ref_embedding_backward(const lk_embedding_backward_args *a);
lk_status lk_ref_optim_step(const lk_optim_args *a);

#endif
