/* Lockstep CPU driver, AVX-512 F/BW/VL/VNNI (with FMA and F16C): the
 * vector vocabulary of backends/cpu/kernels/ on 512-bit registers, with
 * opmask registers for lane masks and vpdpbusd for the integer dots.  The
 * names and their meaning are those of backends/cpu/avx2/vec.h.
 *
 * Nothing here needs AVX-512 DQ (the 256-bit halves are taken through the
 * F instructions), so the variant runs wherever F, BW, VL and VNNI do. */
#ifndef LK_CPU_VEC_H
#define LK_CPU_VEC_H

#include "backends/cpu/simd.h"

#define LK_VEC_ISA avx512
#define LK_VEC_VNNI 1

#define VW 16        /* f32 lanes */
/* 12 x 32: 24 accumulators + 2 B + 1 A of 32 registers.  Measured on a
 * Xeon against 14 x 32, 6 x 64 and 8 x 48: the fastest (docs/internals/cpu-kernels.md). */
#define GEMM_MR 12
#define GEMM_NR 32

typedef __m512 vf;
typedef __m512i vi;
typedef lk_mmask16 vm;

/* ---- f32 vectors ---- */
LK_INLINE vf vf_zero(void) { return _mm512_setzero_ps(); }
LK_INLINE vf vf_set1(float x) { return _mm512_set1_ps(x); }
LK_INLINE vf vf_bits(uint32_t u) { return _mm512_castsi512_ps(_mm512_set1_epi32((int)u)); }
LK_INLINE vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
LK_INLINE void vf_store(float *p, vf v) { _mm512_storeu_ps(p, v); }
LK_INLINE vf vf_bcast(const float *p) { return _mm512_set1_ps(*p); }

LK_INLINE vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
LK_INLINE vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
LK_INLINE vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
LK_INLINE vf vf_div(vf a, vf b) { return _mm512_div_ps(a, b); }
LK_INLINE vf vf_sqrt(vf a) { return _mm512_sqrt_ps(a); }
LK_INLINE vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
LK_INLINE vf vf_max_nn(vf a, vf b) { return _mm512_max_ps(a, b); }
LK_INLINE vf vf_min_nn(vf a, vf b) { return _mm512_min_ps(a, b); }

LK_INLINE vf vf_and(vf a, vf b)
{
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
LK_INLINE vf vf_or(vf a, vf b)
{
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
LK_INLINE vf vf_xor(vf a, vf b)
{
    return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

/* ---- masks ---- */
LK_INLINE vm vf_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
LK_INLINE vm vf_le(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
LK_INLINE vm vf_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
LK_INLINE vm vf_ge(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
LK_INLINE vm vf_eq(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
LK_INLINE vm vf_unord(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q); }
LK_INLINE vm vf_isnan(vf a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
LK_INLINE vm vm_or(vm a, vm b) { return (vm)(a | b); }
LK_INLINE vm vm_and(vm a, vm b) { return (vm)(a & b); }
LK_INLINE int vm_any(vm a) { return a != 0; }
LK_INLINE vm vm_first(int n) { return (vm)(n >= 16 ? 0xffffu : (1u << n) - 1u); }
LK_INLINE vf vf_select(vm m, vf t, vf f) { return _mm512_mask_blend_ps(m, f, t); }

LK_INLINE vf vf_load_part(const float *p, int n, vf fill)
{
    return _mm512_mask_loadu_ps(fill, vm_first(n), p);
}
LK_INLINE void vf_store_part(float *p, int n, vf v) { _mm512_mask_storeu_ps(p, vm_first(n), v); }

/* s = 8: the two 256-bit halves; then s = 4, 2, 1 as on AVX2. */
LK_INLINE float vf_butterfly(vf v)
{
    __m256 lo = _mm512_castps512_ps256(v);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    return lk_x86_butterfly8(_mm256_add_ps(lo, hi));
}

/* ---- 32-bit integer lanes ---- */
LK_INLINE vi vi_set1(int32_t x) { return _mm512_set1_epi32(x); }
LK_INLINE vi vf_as_vi(vf a) { return _mm512_castps_si512(a); }
LK_INLINE vf vi_as_vf(vi a) { return _mm512_castsi512_ps(a); }
LK_INLINE vi vi_add(vi a, vi b) { return _mm512_add_epi32(a, b); }
LK_INLINE vi vi_sub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
LK_INLINE vi vi_and(vi a, vi b) { return _mm512_and_si512(a, b); }
LK_INLINE vi vi_or(vi a, vi b) { return _mm512_or_si512(a, b); }
LK_INLINE vi vi_xor(vi a, vi b) { return _mm512_xor_si512(a, b); }
#define vi_slli(a, n) _mm512_slli_epi32((a), (n))
#define vi_srli(a, n) _mm512_srli_epi32((a), (n))
#define vi_srai(a, n) _mm512_srai_epi32((a), (n))
LK_INLINE vm vi_gt(vi a, vi b) { return _mm512_cmpgt_epi32_mask(a, b); }
LK_INLINE vm vi_eq(vi a, vi b) { return _mm512_cmpeq_epi32_mask(a, b); }
LK_INLINE vi vi_select(vm m, vi t, vi f) { return _mm512_mask_blend_epi32(m, f, t); }
LK_INLINE vf vi_to_vf(vi a) { return _mm512_cvtepi32_ps(a); }
LK_INLINE vi vf_to_vi(vf a) { return _mm512_cvtps_epi32(a); }
LK_INLINE int32_t vi_hsum(vi a)
{
    __m256i s = _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
    return _mm_cvtsi128_si32(t);
}

/* ---- element types in memory (numerics.md section 3) ---- */
LK_INLINE vf vf_load_bf16(const uint16_t *p)
{
    __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
LK_INLINE vf vf_load_f16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
LK_INLINE void vf_store_bf16(uint16_t *p, vf v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    u = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
}
LK_INLINE void vf_store_f16(uint16_t *p, vf v)
{
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtps_ph(v, 0));
}

/* ---- 8-bit integer dot products (numerics.md section 9) ---- */
LK_INLINE vi vi_load(const void *p) { return _mm512_loadu_si512(p); }
LK_INLINE vi vi_set1_8(int8_t x) { return _mm512_set1_epi8(x); }
LK_INLINE vi vi_zero(void) { return _mm512_setzero_si512(); }
#define vi_srli16(a, n) _mm512_srli_epi16((a), (n))
LK_INLINE void vi_store(void *p, vi v) { _mm512_storeu_si512(p, v); }
LK_INLINE vi vi_add8(vi a, vi b) { return _mm512_add_epi8(a, b); }
LK_INLINE vi vi_sub8(vi a, vi b) { return _mm512_sub_epi8(a, b); }
LK_INLINE vi vi_load_u8(const void *p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)); }
LK_INLINE void vi_store_u8(void *p, vi v) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8(v)); }
LK_INLINE int vi_bytes_le(vi v, uint8_t lim)
{
    return _mm512_cmpgt_epu8_mask(v, _mm512_set1_epi8((char)lim)) == 0;
}

LK_INLINE void vi_dot4_codes(vi *a0, vi *a1, vi c0, vi x0, vi c1, vi x1, vi c2, vi x2, vi c3,
                             vi x3)
{
    *a0 = _mm512_dpbusd_epi32(*a0, c0, x0);
    *a1 = _mm512_dpbusd_epi32(*a1, c1, x1);
    *a0 = _mm512_dpbusd_epi32(*a0, c2, x2);
    *a1 = _mm512_dpbusd_epi32(*a1, c3, x3);
}
LK_INLINE vi vi_dot_u8s8(vi acc, vi u, vi s) { return _mm512_dpbusd_epi32(acc, u, s); }

#endif
