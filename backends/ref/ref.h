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

/* The built-in "ref" driver (one device, host memory). */
const lk_driver *lk_ref_driver(void);

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
lk_status lk_ref_quantize_ternary(const lk_quant_args *a);
lk_status lk_ref_ternary_pack(const lk_pack_args *a);
lk_status lk_ref_ternary_unpack(const lk_pack_args *a);
lk_status lk_ref_ternary_gemm(const lk_qgemm_args *a);
lk_status lk_ref_int8_gemm(const lk_qgemm_args *a);

#endif
