/* Lockstep CPU driver, AVX2 (with FMA and F16C): the vector vocabulary the
 * shared kernels of backends/cpu/kernels/ are written in, on 256-bit
 * registers.  backends/cpu/avx512/vec.h gives the same names on 512-bit
 * registers; backends/cpu/avx_vnni/vec.h is this file with vpdpbusd.
 *
 * Only IEEE operations with one rounding, comparisons, selects and integer
 * operations appear here: nothing approximate (no rcp/rsqrt), no
 * instruction whose NaN or signed-zero behaviour depends on the operand
 * order (maxps/minps: kernels build the contract's maximum from compares). */
#ifndef LK_CPU_VEC_H
#define LK_CPU_VEC_H

#include "backends/cpu/simd.h"

#ifndef LK_VEC_ISA
#define LK_VEC_ISA avx2
#define LK_VEC_VNNI 0
#endif

#define VW 8         /* f32 lanes */
#define GEMM_MR 6    /* micro-tile rows: 12 accumulators + 2 B + 1 A of 16 */
#define GEMM_NR 16   /* micro-tile columns: two vectors */

typedef __m256 vf;
typedef __m256i vi;
typedef __m256 vm; /* lane mask: all ones or all zeros per 32-bit lane */

/* ---- f32 vectors ---- */
LK_INLINE vf vf_zero(void) { return _mm256_setzero_ps(); }
LK_INLINE vf vf_set1(float x) { return _mm256_set1_ps(x); }
LK_INLINE vf vf_bits(uint32_t u) { return _mm256_castsi256_ps(_mm256_set1_epi32((int)u)); }
LK_INLINE vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
LK_INLINE void vf_store(float *p, vf v) { _mm256_storeu_ps(p, v); }
LK_INLINE vf vf_bcast(const float *p) { return _mm256_broadcast_ss(p); }

LK_INLINE vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
LK_INLINE vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
LK_INLINE vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
LK_INLINE vf vf_div(vf a, vf b) { return _mm256_div_ps(a, b); }
LK_INLINE vf vf_sqrt(vf a) { return _mm256_sqrt_ps(a); }
/* maxps/minps: the larger (smaller) of two vectors without NaN, either
 * one where they are equal; the contract's maximum is built on top. */
LK_INLINE vf vf_max_nn(vf a, vf b) { return _mm256_max_ps(a, b); }
LK_INLINE vf vf_min_nn(vf a, vf b) { return _mm256_min_ps(a, b); }
/* a * b + c, one rounding */
LK_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }

LK_INLINE vf vf_and(vf a, vf b) { return _mm256_and_ps(a, b); }
LK_INLINE vf vf_or(vf a, vf b) { return _mm256_or_ps(a, b); }
LK_INLINE vf vf_xor(vf a, vf b) { return _mm256_xor_ps(a, b); }

/* ---- masks ---- */
LK_INLINE vm vf_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
LK_INLINE vm vf_le(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
LK_INLINE vm vf_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
LK_INLINE vm vf_ge(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
LK_INLINE vm vf_eq(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
LK_INLINE vm vf_unord(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_UNORD_Q); }
LK_INLINE vm vf_isnan(vf a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
LK_INLINE vm vm_or(vm a, vm b) { return _mm256_or_ps(a, b); }
LK_INLINE vm vm_and(vm a, vm b) { return _mm256_and_ps(a, b); }
LK_INLINE int vm_any(vm a) { return _mm256_movemask_ps(a) != 0; }
/* lanes l < n (0 <= n <= VW) */
LK_INLINE vm vm_first(int n)
{
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(
        _mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}
/* m ? t : f, lane by lane */
LK_INLINE vf vf_select(vm m, vf t, vf f) { return _mm256_blendv_ps(f, t, m); }

/* The first n lanes from p, the others `fill`; nothing past p + n is read. */
LK_INLINE vf vf_load_part(const float *p, int n, vf fill)
{
    vm m = vm_first(n);
    return vf_select(m, _mm256_maskload_ps(p, _mm256_castps_si256(m)), fill);
}
LK_INLINE void vf_store_part(float *p, int n, vf v)
{
    _mm256_maskstore_ps(p, _mm256_castps_si256(vm_first(n)), v);
}

/* The in-register steps of the contract's butterfly, s = VW/2 ... 1. */
LK_INLINE float vf_butterfly(vf v) { return lk_x86_butterfly8(v); }

/* ---- 32-bit integer lanes ---- */
LK_INLINE vi vi_set1(int32_t x) { return _mm256_set1_epi32(x); }
LK_INLINE vi vf_as_vi(vf a) { return _mm256_castps_si256(a); }
LK_INLINE vf vi_as_vf(vi a) { return _mm256_castsi256_ps(a); }
LK_INLINE vi vi_add(vi a, vi b) { return _mm256_add_epi32(a, b); }
LK_INLINE vi vi_sub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
LK_INLINE vi vi_and(vi a, vi b) { return _mm256_and_si256(a, b); }
LK_INLINE vi vi_or(vi a, vi b) { return _mm256_or_si256(a, b); }
LK_INLINE vi vi_xor(vi a, vi b) { return _mm256_xor_si256(a, b); }
#define vi_slli(a, n) _mm256_slli_epi32((a), (n))
#define vi_srli(a, n) _mm256_srli_epi32((a), (n))
#define vi_srai(a, n) _mm256_srai_epi32((a), (n))
LK_INLINE vm vi_gt(vi a, vi b) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(a, b)); }
LK_INLINE vm vi_eq(vi a, vi b) { return _mm256_castsi256_ps(_mm256_cmpeq_epi32(a, b)); }
LK_INLINE vi vi_select(vm m, vi t, vi f)
{
    return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(f),
                                                _mm256_castsi256_ps(t), m));
}
/* int32 -> f32, rounded to nearest even */
LK_INLINE vf vi_to_vf(vi a) { return _mm256_cvtepi32_ps(a); }
/* f32 -> int32 under the canonical MXCSR (round to nearest even); the
 * caller has mapped NaN and clamped to the int32 range (numerics.md 1). */
LK_INLINE vi vf_to_vi(vf a) { return _mm256_cvtps_epi32(a); }
LK_INLINE int32_t vi_hsum(vi a) /* any order: integer addition */
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---- element types in memory (numerics.md section 3) ---- */
LK_INLINE vf vf_load_bf16(const uint16_t *p)
{
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
LK_INLINE vf vf_load_f16(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
/* Round v (NaN already canonical) to bf16 by the contract's integer RNE:
 * u + 0x7fff + ((u >> 16) & 1), then the high half. */
LK_INLINE void vf_store_bf16(uint16_t *p, vf v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    u = _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    u = _mm256_srli_epi32(u, 16);
    __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(u), _mm256_extracti128_si256(u, 1));
    _mm_storeu_si128((__m128i *)p, h);
}
/* vcvtps2ph with imm 0 (round to nearest even) is the contract's f32 ->
 * f16 on every non-NaN input; the canonical f32 NaN becomes 0x7e00. */
LK_INLINE void vf_store_f16(uint16_t *p, vf v)
{
    _mm_storeu_si128((__m128i *)p, _mm256_cvtps_ph(v, 0));
}

/* ---- 8-bit integer dot products (numerics.md section 9) ---- */
LK_INLINE vi vi_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
LK_INLINE vi vi_set1_8(int8_t x) { return _mm256_set1_epi8(x); }
LK_INLINE vi vi_zero(void) { return _mm256_setzero_si256(); }
#define vi_srli16(a, n) _mm256_srli_epi16((a), (n))
LK_INLINE void vi_store(void *p, vi v) { _mm256_storeu_si256((__m256i *)p, v); }
LK_INLINE vi vi_add8(vi a, vi b) { return _mm256_add_epi8(a, b); }
LK_INLINE vi vi_sub8(vi a, vi b) { return _mm256_sub_epi8(a, b); }
/* VW bytes, each zero-extended into its 32-bit lane */
LK_INLINE vi vi_load_u8(const void *p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
/* the low byte of each 32-bit lane, VW bytes */
LK_INLINE void vi_store_u8(void *p, vi v)
{
    const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1,
                                          -1, -1, -1, -1);
    __m256i b = _mm256_shuffle_epi8(v, pick);
    _mm_storel_epi64((__m128i *)p, _mm_unpacklo_epi32(_mm256_castsi256_si128(b),
                                                      _mm256_extracti128_si256(b, 1)));
}
/* 1 when every byte of v is at most lim, as an unsigned number */
LK_INLINE int vi_bytes_le(vi v, uint8_t lim)
{
    const __m256i l = _mm256_set1_epi8((char)lim);
    return _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_max_epu8(v, l), l)) == -1;
}

#if LK_VEC_VNNI
/* *a0 + *a1 gain sum c_j * x_j over the bytes of the four pairs, exact
 * (vpdpbusd adds the u8 * s8 products in int32 without saturation); two
 * accumulators (they may be the same) halve the dependent chain. */
LK_INLINE void vi_dot4_codes(vi *a0, vi *a1, vi c0, vi x0, vi c1, vi x1, vi c2, vi x2, vi c3,
                             vi x3)
{
    *a0 = _mm256_dpbusd_avx_epi32(*a0, c0, x0);
    *a1 = _mm256_dpbusd_avx_epi32(*a1, c1, x1);
    *a0 = _mm256_dpbusd_avx_epi32(*a0, c2, x2);
    *a1 = _mm256_dpbusd_avx_epi32(*a1, c3, x3);
}
LK_INLINE vi vi_dot_u8s8(vi acc, vi u, vi s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#else
/* *a0 gains sum c_j * x_j over the bytes of the four pairs, exact, for
 * ternary codes 0 <= c <= 3 and int8 x (*a1 is not needed: one int32 add
 * per call).  vpmaddubsw saturates at 16 bits: each of its pair sums is at
 * most 2 * 3 * 128 = 768 in magnitude, the four pair sums added in int16
 * below at most 4 * 768 = 3072 < 2^15, so nothing saturates or wraps
 * before vpmaddwd widens to int32 (docs/numerics.md section 9). */
LK_INLINE void vi_dot4_codes(vi *a0, vi *a1, vi c0, vi x0, vi c1, vi x1, vi c2, vi x2, vi c3,
                             vi x3)
{
    (void)a1;
    __m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(c0, x0), _mm256_maddubs_epi16(c1, x1));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(c2, x2));
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(c3, x3));
    *a0 = _mm256_add_epi32(*a0, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
}

/* int16 lanes for the ternary GEMV without VNNI (kernels/ternary.c proves
 * its bounds): the u8 * s8 pair sums of vpmaddubsw, int16 adds, and the
 * widening to int32 pairs. */
#define LK_VEC_MADDUBS16 1
#define vi_maddubs16(u, s) _mm256_maddubs_epi16((u), (s))
#define vi_add16(a, b) _mm256_add_epi16((a), (b))
#define vi_srai16(a, n) _mm256_srai_epi16((a), (n))
LK_INLINE vi vi_widen16(vi acc, vi s)
{
    return _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
}
#endif

/* acc + sum of a_j * b_j over 16 int8 pairs, exact: the bytes are widened
 * to int16 and vpmaddwd adds two products of at most 2^14 each into int32
 * (no 16-bit step that could saturate). */
LK_INLINE vi vi_dot16_s8s8(vi acc, const int8_t *a, const int8_t *b)
{
    __m256i a16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)a));
    __m256i b16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a16, b16));
}

#endif
