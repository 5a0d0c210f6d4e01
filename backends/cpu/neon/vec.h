/* Lockstep CPU driver, AArch64 Advanced SIMD (NEON): the vector vocabulary
 * the shared kernels of backends/cpu/kernels/ are written in, on 128-bit
 * registers.  The names and their meaning are those of
 * backends/cpu/avx2/vec.h; backends/cpu/neon_dotprod/vec.h is this file
 * with sdot for the integer dot products.
 *
 * NEON's own traps, and what this file does about them:
 * - fmax/fmin (vmaxq_f32) propagate NaN and order -0 < +0, fmaxnm ignores
 *   a quiet NaN: neither is the contract's maximum on its own.  The
 *   kernels build that from compares and selects (kernels/elem.h); the
 *   only maximum here is vf_max_nn, which is asked for nothing beyond
 *   "the larger of two non-NaN values" (NaN is noted apart, and a zero
 *   answer is done again exactly).
 * - vcvtq_s32_f32 truncates and vcvtaq_s32_f32 rounds ties away: f32 ->
 *   int32 is vcvtnq_s32_f32 (fcvtns, ties to even, whatever FPCR says).
 * - FPCR: FZ flushes f32 subnormals, FZ16 f16 ones, AH/FIZ change what is
 *   flushed and how, RMode the rounding of fadd/fmla/fcvtn/scvtf...: the
 *   entry points and workers run under FPCR = 0 (numerics/fpenv.h), which is
 *   RNE with none of these set; tests/test_hostile.c sets FZ, FZ16 and RZ
 *   around calls.
 * - frecpe/frsqrte are estimates that differ between cores: not used;
 *   division and square root are fdiv and fsqrt, correctly rounded.
 * - fmla is a fused multiply-add (one rounding): vf_fma only; vf_mul and
 *   vf_add stay two instructions (-ffp-contract=off keeps gcc from fusing
 *   them). */
#ifndef LK_CPU_VEC_H
#define LK_CPU_VEC_H

#define LK_VEC_ARM 1
#include "backends/cpu/simd.h"

#include <string.h>

#ifndef LK_VEC_ISA
#define LK_VEC_ISA neon
#define LK_VEC_DOTPROD 0
#endif
/* the VNNI paths of the kernels multiply unsigned by signed bytes, which
 * neither NEON nor sdot does: both variants take the signed paths */
#define LK_VEC_VNNI 0

#define VW 4       /* f32 lanes */
#define GEMM_MR 6  /* micro-tile rows: 24 accumulators + 4 B + 1 A of 32 */
#define GEMM_NR 16 /* micro-tile columns: four vectors */

typedef float32x4_t vf;
typedef int32x4_t vi;
typedef uint32x4_t vm; /* lane mask: all ones or all zeros per 32-bit lane */

/* ---- f32 vectors ---- */
LK_INLINE vf vf_zero(void) { return vdupq_n_f32(0.0f); }
LK_INLINE vf vf_set1(float x) { return vdupq_n_f32(x); }
LK_INLINE vf vf_bits(uint32_t u) { return vreinterpretq_f32_u32(vdupq_n_u32(u)); }
LK_INLINE vf vf_load(const float *p) { return vld1q_f32(p); }
LK_INLINE void vf_store(float *p, vf v) { vst1q_f32(p, v); }
LK_INLINE vf vf_bcast(const float *p) { return vld1q_dup_f32(p); }

LK_INLINE vf vf_add(vf a, vf b) { return vaddq_f32(a, b); }
LK_INLINE vf vf_sub(vf a, vf b) { return vsubq_f32(a, b); }
LK_INLINE vf vf_mul(vf a, vf b) { return vmulq_f32(a, b); }
LK_INLINE vf vf_div(vf a, vf b) { return vdivq_f32(a, b); }
LK_INLINE vf vf_sqrt(vf a) { return vsqrtq_f32(a); }
/* fmax/fmin: the larger (smaller) of two vectors without NaN; which zero
 * of +0 and -0 comes out does not matter to the callers. */
LK_INLINE vf vf_max_nn(vf a, vf b) { return vmaxq_f32(a, b); }
LK_INLINE vf vf_min_nn(vf a, vf b) { return vminq_f32(a, b); }
/* a * b + c, one rounding (fmla) */
LK_INLINE vf vf_fma(vf a, vf b, vf c) { return vfmaq_f32(c, a, b); }

LK_INLINE vf vf_and(vf a, vf b)
{
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
LK_INLINE vf vf_or(vf a, vf b)
{
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}
LK_INLINE vf vf_xor(vf a, vf b)
{
    return vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)));
}

/* ---- masks: fcmgt/fcmge/fcmeq are ordered (false on NaN), as the
 * _OQ predicates of x86 ---- */
LK_INLINE vm vf_lt(vf a, vf b) { return vcltq_f32(a, b); }
LK_INLINE vm vf_le(vf a, vf b) { return vcleq_f32(a, b); }
LK_INLINE vm vf_gt(vf a, vf b) { return vcgtq_f32(a, b); }
LK_INLINE vm vf_ge(vf a, vf b) { return vcgeq_f32(a, b); }
LK_INLINE vm vf_eq(vf a, vf b) { return vceqq_f32(a, b); }
LK_INLINE vm vf_unord(vf a, vf b) { return vmvnq_u32(vandq_u32(vceqq_f32(a, a), vceqq_f32(b, b))); }
LK_INLINE vm vf_isnan(vf a) { return vmvnq_u32(vceqq_f32(a, a)); }
LK_INLINE vm vm_or(vm a, vm b) { return vorrq_u32(a, b); }
LK_INLINE vm vm_and(vm a, vm b) { return vandq_u32(a, b); }
LK_INLINE int vm_any(vm a) { return vmaxvq_u32(a) != 0; }
/* lanes l < n (0 <= n <= VW) */
LK_INLINE vm vm_first(int n)
{
    static const int32_t idx[4] = {0, 1, 2, 3};
    return vcltq_s32(vld1q_s32(idx), vdupq_n_s32(n));
}
/* m ? t : f, lane by lane */
LK_INLINE vf vf_select(vm m, vf t, vf f) { return vbslq_f32(m, t, f); }

/* The first n lanes from p, the others `fill`; nothing past p + n is read
 * (NEON has no masked loads: through a small buffer). */
LK_INLINE vf vf_load_part(const float *p, int n, vf fill)
{
    float t[4];
    vst1q_f32(t, fill);
    memcpy(t, p, (size_t)n * sizeof *t);
    return vld1q_f32(t);
}
LK_INLINE void vf_store_part(float *p, int n, vf v)
{
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, (size_t)n * sizeof *t);
}

/* The in-register steps of the contract's butterfly, s = 2, 1:
 * (l0 + l2) + (l1 + l3). */
LK_INLINE float vf_butterfly(vf v)
{
    float32x2_t s2 = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

/* ---- 32-bit integer lanes ---- */
LK_INLINE vi vi_set1(int32_t x) { return vdupq_n_s32(x); }
LK_INLINE vi vf_as_vi(vf a) { return vreinterpretq_s32_f32(a); }
LK_INLINE vf vi_as_vf(vi a) { return vreinterpretq_f32_s32(a); }
LK_INLINE vi vi_add(vi a, vi b) { return vaddq_s32(a, b); }
LK_INLINE vi vi_sub(vi a, vi b) { return vsubq_s32(a, b); }
LK_INLINE vi vi_and(vi a, vi b) { return vandq_s32(a, b); }
LK_INLINE vi vi_or(vi a, vi b) { return vorrq_s32(a, b); }
LK_INLINE vi vi_xor(vi a, vi b) { return veorq_s32(a, b); }
/* Shifts by a register count (sshl/ushl) take any n, as the x86 forms do
 * (n >= 32: zero, or the sign for srai); a constant n compiles to the
 * immediate form. */
LK_INLINE vi vi_slli_(vi a, int n) { return vshlq_s32(a, vdupq_n_s32(n > 32 ? 32 : n)); }
LK_INLINE vi vi_srli_(vi a, int n)
{
    return vreinterpretq_s32_u32(vshlq_u32(vreinterpretq_u32_s32(a), vdupq_n_s32(n > 32 ? -32 : -n)));
}
LK_INLINE vi vi_srai_(vi a, int n) { return vshlq_s32(a, vdupq_n_s32(n > 32 ? -32 : -n)); }
#define vi_slli(a, n) vi_slli_((a), (n))
#define vi_srli(a, n) vi_srli_((a), (n))
#define vi_srai(a, n) vi_srai_((a), (n))
LK_INLINE vm vi_gt(vi a, vi b) { return vcgtq_s32(a, b); }
LK_INLINE vm vi_eq(vi a, vi b) { return vceqq_s32(a, b); }
LK_INLINE vi vi_select(vm m, vi t, vi f) { return vbslq_s32(m, t, f); }
/* int32 -> f32 (scvtf), rounded to nearest even under FPCR = 0 */
LK_INLINE vf vi_to_vf(vi a) { return vcvtq_f32_s32(a); }
/* f32 -> int32, ties to even (fcvtns; not vcvtq_s32_f32, which
 * truncates); the caller has mapped NaN and clamped to the int32 range. */
LK_INLINE vi vf_to_vi(vf a) { return vcvtnq_s32_f32(a); }
LK_INLINE int32_t vi_hsum(vi a) { return vaddvq_s32(a); } /* any order: integers */

/* ---- element types in memory (numerics.md section 3) ---- */
LK_INLINE vf vf_load_bf16(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
/* fcvtl: exact (every f16 is an f32) */
LK_INLINE vf vf_load_f16(const uint16_t *p)
{
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
/* Round v (NaN already canonical) to bf16 by the contract's integer RNE:
 * u + 0x7fff + ((u >> 16) & 1), then the high half. */
LK_INLINE void vf_store_bf16(uint16_t *p, vf v)
{
    uint32x4_t u = vreinterpretq_u32_f32(v);
    uint32x4_t odd = vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1));
    u = vaddq_u32(u, vaddq_u32(odd, vdupq_n_u32(0x7fff)));
    vst1_u16(p, vshrn_n_u32(u, 16));
}
/* fcvtn under FPCR = 0 (RNE, AHP = 0, FZ = FZ16 = 0) is the contract's
 * f32 -> f16 on every non-NaN input; the canonical f32 NaN becomes 0x7e00. */
LK_INLINE void vf_store_f16(uint16_t *p, vf v)
{
    vst1_u16(p, vreinterpret_u16_f16(vcvt_f16_f32(v)));
}

/* ---- 8-bit integer dot products (numerics.md section 9) ---- */
LK_INLINE vi vi_load(const void *p) { return vreinterpretq_s32_u8(vld1q_u8((const uint8_t *)p)); }
LK_INLINE vi vi_set1_8(int8_t x) { return vreinterpretq_s32_s8(vdupq_n_s8(x)); }
LK_INLINE vi vi_zero(void) { return vdupq_n_s32(0); }
#define vi_srli16(a, n) vreinterpretq_s32_u16(vshrq_n_u16(vreinterpretq_u16_s32(a), (n)))
LK_INLINE void vi_store(void *p, vi v) { vst1q_u8((uint8_t *)p, vreinterpretq_u8_s32(v)); }
LK_INLINE vi vi_add8(vi a, vi b)
{
    return vreinterpretq_s32_s8(vaddq_s8(vreinterpretq_s8_s32(a), vreinterpretq_s8_s32(b)));
}
LK_INLINE vi vi_sub8(vi a, vi b)
{
    return vreinterpretq_s32_s8(vsubq_s8(vreinterpretq_s8_s32(a), vreinterpretq_s8_s32(b)));
}
/* VW bytes, each zero-extended into its 32-bit lane */
LK_INLINE vi vi_load_u8(const void *p)
{
    uint32_t w;
    memcpy(&w, p, sizeof w);
    uint16x8_t h = vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(w)));
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(h)));
}
/* the low byte of each 32-bit lane, VW bytes */
LK_INLINE void vi_store_u8(void *p, vi v)
{
    uint16x4_t h = vmovn_u32(vreinterpretq_u32_s32(v));
    uint8x8_t b = vmovn_u16(vcombine_u16(h, h));
    uint32_t w = vget_lane_u32(vreinterpret_u32_u8(b), 0);
    memcpy(p, &w, sizeof w);
}
/* 1 when every byte of v is at most lim, as an unsigned number */
LK_INLINE int vi_bytes_le(vi v, uint8_t lim) { return vmaxvq_u8(vreinterpretq_u8_s32(v)) <= lim; }

/* acc + in each 32-bit lane l the sum of u_j * s_j over its four bytes
 * j = 4l .. 4l + 3, u unsigned and s signed (vpdpbusd's meaning; the
 * kernels use it only where LK_VEC_VNNI, never here, but the vocabulary is
 * whole).  Exact: the bytes are widened to int16 (u <= 255 stays
 * positive), smull gives int32 products, two pairwise adds sum the fours. */
LK_INLINE vi vi_dot_u8s8(vi acc, vi u, vi s)
{
    uint8x16_t ub = vreinterpretq_u8_s32(u);
    int8x16_t sb = vreinterpretq_s8_s32(s);
    int16x8_t u0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(ub)));
    int16x8_t u1 = vreinterpretq_s16_u16(vmovl_high_u8(ub));
    int16x8_t s0 = vmovl_s8(vget_low_s8(sb)), s1 = vmovl_high_s8(sb);
    int32x4_t q0 = vpaddq_s32(vmull_s16(vget_low_s16(u0), vget_low_s16(s0)), vmull_high_s16(u0, s0));
    int32x4_t q1 = vpaddq_s32(vmull_s16(vget_low_s16(u1), vget_low_s16(s1)), vmull_high_s16(u1, s1));
    return vaddq_s32(acc, vpaddq_s32(q0, q1));
}

#if LK_VEC_DOTPROD
/* *a0 + *a1 gain sum c_j * x_j over the bytes of the four pairs, exact:
 * sdot adds four int8 x int8 products into each int32 lane without any
 * narrower step, and the codes 0..3 are non-negative int8 as they are.
 * Two accumulators (they may be the same) halve the dependent chain. */
LK_INLINE void vi_dot4_codes(vi *a0, vi *a1, vi c0, vi x0, vi c1, vi x1, vi c2, vi x2, vi c3,
                             vi x3)
{
    *a0 = vdotq_s32(*a0, vreinterpretq_s8_s32(c0), vreinterpretq_s8_s32(x0));
    *a1 = vdotq_s32(*a1, vreinterpretq_s8_s32(c1), vreinterpretq_s8_s32(x1));
    *a0 = vdotq_s32(*a0, vreinterpretq_s8_s32(c2), vreinterpretq_s8_s32(x2));
    *a1 = vdotq_s32(*a1, vreinterpretq_s8_s32(c3), vreinterpretq_s8_s32(x3));
}

/* acc + sum of a_j * b_j over 16 int8 pairs, exact (one sdot). */
LK_INLINE vi vi_dot16_s8s8(vi acc, const int8_t *a, const int8_t *b)
{
    return vdotq_s32(acc, vld1q_s8(a), vld1q_s8(b));
}
#else
/* *a0 (low bytes) and *a1 (high bytes) gain sum c_j * x_j over the bytes
 * of the four pairs, exact, for ternary codes 0 <= c <= 3 and int8 x:
 * smull/smlal multiply bytes into int16 lanes, each product at most
 * 3 * 128 = 384 in magnitude, four of them added per lane at most 1536
 * < 2^15, so no int16 lane wraps before sadalp widens pairs into int32
 * (docs/numerics.md section 9). */
LK_INLINE void vi_dot4_codes(vi *a0, vi *a1, vi c0, vi x0, vi c1, vi x1, vi c2, vi x2, vi c3,
                             vi x3)
{
    const int8x16_t cb0 = vreinterpretq_s8_s32(c0), xb0 = vreinterpretq_s8_s32(x0);
    const int8x16_t cb1 = vreinterpretq_s8_s32(c1), xb1 = vreinterpretq_s8_s32(x1);
    const int8x16_t cb2 = vreinterpretq_s8_s32(c2), xb2 = vreinterpretq_s8_s32(x2);
    const int8x16_t cb3 = vreinterpretq_s8_s32(c3), xb3 = vreinterpretq_s8_s32(x3);
    int16x8_t lo = vmull_s8(vget_low_s8(cb0), vget_low_s8(xb0));
    int16x8_t hi = vmull_high_s8(cb0, xb0);
    lo = vmlal_s8(lo, vget_low_s8(cb1), vget_low_s8(xb1));
    hi = vmlal_high_s8(hi, cb1, xb1);
    lo = vmlal_s8(lo, vget_low_s8(cb2), vget_low_s8(xb2));
    hi = vmlal_high_s8(hi, cb2, xb2);
    lo = vmlal_s8(lo, vget_low_s8(cb3), vget_low_s8(xb3));
    hi = vmlal_high_s8(hi, cb3, xb3);
    *a0 = vpadalq_s16(*a0, lo);
    *a1 = vpadalq_s16(*a1, hi);
}

/* acc + sum of a_j * b_j over 16 int8 pairs, exact: each smull product is
 * at most 128 * 128 = 2^14 in magnitude, an int16 as it is, and sadalp
 * adds pairs of them straight into int32 (two products could reach 2^15,
 * one past int16: they are never added in 16 bits). */
LK_INLINE vi vi_dot16_s8s8(vi acc, const int8_t *a, const int8_t *b)
{
    const int8x16_t av = vld1q_s8(a), bv = vld1q_s8(b);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(av), vget_low_s8(bv)));
    return vpadalq_s16(acc, vmull_high_s8(av, bv));
}
#endif

#include "backends/cpu/neon/m256.h"

#endif
