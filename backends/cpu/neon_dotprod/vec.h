/* Lockstep CPU driver, NEON with the dot product extension (Armv8.2-A
 * DotProd, sdot/udot): the NEON vocabulary (backends/cpu/neon/vec.h) with
 * the integer dot products on sdot.  Only the integer GEMMs differ from
 * NEON, so only they are compiled for this variant (variants.c). */
#ifndef LK_CPU_NEON_DOTPROD_VEC_H
#define LK_CPU_NEON_DOTPROD_VEC_H

#define LK_VEC_ISA neon_dotprod
#define LK_VEC_DOTPROD 1
#include "backends/cpu/neon/vec.h"

#endif
