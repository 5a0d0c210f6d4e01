/* Lockstep: the constants of the numerical contract (docs/numerics.md).
 *
 * Every backend includes this file, so a constant lives in one place.  A
 * change here changes bits: it is a contract change (bump
 * LK_CONTRACT_VERSION, update docs/numerics.md, the reference, every
 * backend and the tests together). */
#ifndef LK_NUMERICS_CONTRACT_H
#define LK_NUMERICS_CONTRACT_H

#if defined(__FAST_MATH__) || defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__
#error "Lockstep must not be compiled with -ffast-math (or -ffinite-math-only): it would break the bit-exact contract of docs/numerics.md"
#endif

/* Dot products and GEMM: K is cut into blocks of LK_KB (numerics.md, GEMM). */
#define LK_KB 128

/* Row reductions: element i of a chunk goes to lane i mod LK_LANES; a row
 * is cut into chunks of LK_CHUNK elements (numerics.md, Reductions). */
#define LK_LANES 64
#define LK_CHUNK 4096

/* Floors of the BitNet b1.58 recipe. */
#define LK_QUANT_EPS 0x1.4f8b58p-17f /* 1e-5f */

/* Canonical NaNs stored by every op. */
#define LK_NAN_F32_BITS 0x7fc00000u
#define LK_NAN_BF16_BITS 0x7fc0u
#define LK_NAN_F16_BITS 0x7e00u

#endif
