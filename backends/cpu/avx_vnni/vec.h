/* Lockstep CPU driver, AVX-VNNI: the AVX2 vocabulary
 * (backends/cpu/avx2/vec.h) with the integer dot products on vpdpbusd
 * (VEX-encoded, 256-bit).  Only the integer GEMMs differ from AVX2, so
 * only they are compiled for this variant (variants.c). */
#ifndef LK_CPU_AVX_VNNI_VEC_H
#define LK_CPU_AVX_VNNI_VEC_H

#define LK_VEC_ISA avx_vnni
#define LK_VEC_VNNI 1
#include "backends/cpu/avx2/vec.h"

#endif
