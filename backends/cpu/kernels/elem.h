/* Lockstep CPU kernels: float elements in memory and the contract's
 * building blocks on vectors (numerics.md sections 1 and 3), written in the
 * vocabulary of the including ISA's vec.h.
 *
 * Loads widen f32/bf16/f16 exactly; stores canonicalise NaN and round once
 * (bf16 by integer RNE, f16 by vcvtps2ph with imm 0).  The scalar
 * functions of numerics/scalar.h serve the tails of rows. */
#ifndef LK_CPU_KERNELS_ELEM_H
#define LK_CPU_KERNELS_ELEM_H

#include <string.h>

#include <lockstep/driver.h>

#include "numerics/contract.h"
#include "numerics/scalar.h"

/* Part of the kernel's table in variants.c: prototypes for
 * -Wmissing-prototypes. */
#define LK_CPU_DEFINE(op, type) \
    lk_status LK_CPU_KERNEL(op)(void *queue, const type *args); \
    lk_status LK_CPU_KERNEL(op)(void *queue, const type *args)

LK_INLINE vf vf_canon(vf v) { return vf_select(vf_isnan(v), vf_bits(LK_NAN_F32_BITS), v); }

/* IEEE 754-2019 maximum/minimum (lk_maximum/lk_minimum of scalar.h):
 * NaN wins and comes out canonical, -0 < +0.  From compares and selects
 * only, so neither operand order nor the ISA's maxps rules matter. */
LK_INLINE vf vf_maximum(vf a, vf b)
{
    vf r = vf_select(vf_gt(a, b), a, b);
    r = vf_select(vf_eq(a, b), vf_and(a, b), r);
    return vf_select(vf_unord(a, b), vf_bits(LK_NAN_F32_BITS), r);
}

LK_INLINE vf vf_minimum(vf a, vf b)
{
    vf r = vf_select(vf_lt(a, b), a, b);
    r = vf_select(vf_eq(a, b), vf_or(a, b), r);
    return vf_select(vf_unord(a, b), vf_bits(LK_NAN_F32_BITS), r);
}

LK_INLINE vf vf_abs(vf v) { return vf_and(v, vf_bits(0x7fffffffu)); }
LK_INLINE vf vf_neg(vf v) { return vf_xor(v, vf_bits(0x80000000u)); }

/* maximum (is_max) or minimum over x[0 .. n), n >= 1, in any order,
 * exactly: compares and selects per element. */
LK_INLINE float row_extreme_exact(const int is_max, const float *x, int64_t n)
{
#define EXT(a, b) (is_max ? vf_maximum(a, b) : vf_minimum(a, b))
    const vf first = vf_set1(x[0]); /* maximum(v, v) = v: a neutral fill */
    vf a0 = first, a1 = first;
    int64_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        a0 = EXT(a0, vf_load(x + i));
        a1 = EXT(a1, vf_load(x + i + VW));
    }
    for (; i < n; i += VW)
        a0 = EXT(a0, vf_load_part(x + i, n - i < VW ? (int)(n - i) : VW, first));
    a0 = EXT(a0, a1);
#undef EXT
    float l[VW];
    vf_store(l, a0);
    float v = l[0];
    for (int j = 1; j < VW; j++)
        v = is_max ? lk_maximum(v, l[j]) : lk_minimum(v, l[j]);
    return v;
}

/* The same, faster: maxps/minps with NaN noted apart.  Their only
 * departures from the contract's maximum are NaN (noted, and then the
 * answer) and which of +0 and -0 wins, which matters only when the answer
 * is a zero: that rare row is done again exactly. */
LK_INLINE float row_extreme(const int is_max, const float *x, int64_t n)
{
#define EXT(a, b) (is_max ? vf_max_nn(a, b) : vf_min_nn(a, b))
    const vf first = vf_set1(x[0]);
    vf a0 = first, a1 = first, a2 = first, a3 = first;
    vm nan = vm_first(0);
    int64_t i = 0;
    for (; i + 4 * VW <= n; i += 4 * VW) {
        const vf v0 = vf_load(x + i), v1 = vf_load(x + i + VW);
        const vf v2 = vf_load(x + i + 2 * VW), v3 = vf_load(x + i + 3 * VW);
        nan = vm_or(nan, vm_or(vf_unord(v0, v1), vf_unord(v2, v3)));
        a0 = EXT(a0, v0);
        a1 = EXT(a1, v1);
        a2 = EXT(a2, v2);
        a3 = EXT(a3, v3);
    }
    for (; i < n; i += VW) {
        const vf v = vf_load_part(x + i, n - i < VW ? (int)(n - i) : VW, first);
        nan = vm_or(nan, vf_isnan(v));
        a0 = EXT(a0, v);
    }
    nan = vm_or(nan, vf_isnan(first));
    a0 = EXT(EXT(a0, a1), EXT(a2, a3));
#undef EXT
    if (vm_any(nan))
        return lk_bits_f32(LK_NAN_F32_BITS);
    float l[VW];
    vf_store(l, a0);
    float v = l[0];
    for (int j = 1; j < VW; j++)
        v = is_max ? (l[j] > v ? l[j] : v) : (l[j] < v ? l[j] : v);
    return v == 0.0f ? row_extreme_exact(is_max, x, n) : v;
}


/* VW elements of a float tensor from element index i, widened to f32. */
LK_INLINE vf ld_dt(const void *base, lk_dtype dt, int64_t i)
{
    switch (dt) {
    case LK_BF16:
        return vf_load_bf16((const uint16_t *)base + i);
    case LK_F16:
        return vf_load_f16((const uint16_t *)base + i);
    default:
        return vf_load((const float *)base + i);
    }
}

/* The first n < VW elements from index i, the other lanes `fill`. */
LK_INLINE vf ld_dt_part(const void *base, lk_dtype dt, int64_t i, int n, vf fill)
{
    if (dt == LK_F32)
        return vf_load_part((const float *)base + i, n, fill);
    uint16_t h[VW];
    memset(h, 0, sizeof h);
    memcpy(h, (const uint16_t *)base + i, (size_t)n * sizeof h[0]);
    vf v = dt == LK_BF16 ? vf_load_bf16(h) : vf_load_f16(h);
    return vf_select(vm_first(n), v, fill);
}

/* Store VW values rounded to dt (canonical NaN) at element index i. */
LK_INLINE void st_dt(void *base, lk_dtype dt, int64_t i, vf v)
{
    v = vf_canon(v);
    switch (dt) {
    case LK_BF16:
        vf_store_bf16((uint16_t *)base + i, v);
        break;
    case LK_F16:
        vf_store_f16((uint16_t *)base + i, v);
        break;
    default:
        vf_store((float *)base + i, v);
        break;
    }
}

LK_INLINE void st_dt_part(void *base, lk_dtype dt, int64_t i, int n, vf v)
{
    v = vf_canon(v);
    if (dt == LK_F32) {
        vf_store_part((float *)base + i, n, v);
        return;
    }
    uint16_t h[VW];
    if (dt == LK_BF16)
        vf_store_bf16(h, v);
    else
        vf_store_f16(h, v);
    memcpy((uint16_t *)base + i, h, (size_t)n * sizeof h[0]);
}

/* One element, as lk_ref_load / lk_ref_store do it. */
static inline float ld1(const void *base, lk_dtype dt, int64_t i)
{
    switch (dt) {
    case LK_BF16:
        return lk_from_bf16(((const uint16_t *)base)[i]);
    case LK_F16:
        return lk_from_f16(((const uint16_t *)base)[i]);
    default:
        return ((const float *)base)[i];
    }
}

static inline void st1(void *base, lk_dtype dt, int64_t i, float v)
{
    switch (dt) {
    case LK_BF16:
        ((uint16_t *)base)[i] = lk_to_bf16(v);
        break;
    case LK_F16:
        ((uint16_t *)base)[i] = lk_to_f16(v);
        break;
    default:
        ((float *)base)[i] = lk_canon_f32(v);
        break;
    }
}

/* Widen n elements from index i into f32 dst. */
static inline void widen_span(const void *base, lk_dtype dt, int64_t i, int64_t n, float *dst)
{
    if (dt == LK_F32) {
        memcpy(dst, (const float *)base + i, (size_t)n * sizeof *dst);
        return;
    }
    int64_t j = 0;
    for (; j + VW <= n; j += VW)
        vf_store(dst + j, ld_dt(base, dt, i + j));
    if (j < n)
        vf_store_part(dst + j, (int)(n - j), ld_dt_part(base, dt, i + j, (int)(n - j), vf_zero()));
}

/* Store n f32 values src rounded to dt (canonical NaN) from index i. */
static inline void narrow_span(void *base, lk_dtype dt, int64_t i, int64_t n, const float *src)
{
    int64_t j = 0;
    for (; j + VW <= n; j += VW)
        st_dt(base, dt, i + j, vf_load(src + j));
    if (j < n)
        st_dt_part(base, dt, i + j, (int)(n - j), vf_load_part(src + j, (int)(n - j), vf_zero()));
}

/* Element size in bytes of a float dtype. */
static inline int64_t dt_size(lk_dtype dt) { return dt == LK_F32 ? 4 : 2; }

/* Row r of a float tensor as f32: in place for f32, else widened into buf
 * (t->cols floats). */
static inline const float *row_f32(const lk_tensor *t, int64_t r, float *buf)
{
    if (t->dtype == LK_F32)
        return (const float *)t->data + r * t->ld;
    widen_span(t->data, t->dtype, r * t->ld, t->cols, buf);
    return buf;
}

#endif
