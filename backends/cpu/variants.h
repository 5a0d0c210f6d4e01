/* Lockstep CPU driver: the kernel table of each variant (internal).
 *
 * As in BLIS, a table starts as the threaded reference and each variant
 * overrides the slots it accelerates. */
#ifndef LK_CPU_VARIANTS_H
#define LK_CPU_VARIANTS_H

#include <lockstep/driver.h>

#include "backends/cpu/isa.h"

/* 1 when this build holds the kernels of isa, native (emulated = 0) or
 * compiled against SIMDe (emulated = 1).  LK_CPU_ISA_REF: always. */
int lk_cpu_variant_built(lk_cpu_isa isa, int emulated);

/* The table of a built variant. */
void lk_cpu_variant_kernels(lk_cpu_isa isa, int emulated, lk_kernels *k);

/* The threaded reference (ref_kernels.c). */
void lk_cpu_ref_kernels(lk_kernels *k);

/* The threaded reference attention: the vector kernels' fallback. */
lk_status lk_cpu_ref_attention(void *q, const lk_attention_args *a);
lk_status lk_cpu_ref_attention_paged(void *q, const lk_attention_paged_args *a);
lk_status lk_cpu_ref_kv_write_paged(void *q, const lk_kv_write_paged_args *a);

/* The paged KV cache's slots of a built variant's lk_device_iface. */
void lk_cpu_variant_paged(lk_cpu_isa isa, int emulated, lk_device_iface *iface);

#endif
