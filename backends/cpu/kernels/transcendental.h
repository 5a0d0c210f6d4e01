/* Lockstep CPU kernels: the library's transcendental functions on vectors,
 * line for line the scalar sequences of backends/transcendental.h
 * (docs/numerics.md section 7): the same operations in the same order,
 * every `c ? a : b` a compare and a select with the same NaN behaviour (an
 * ordered compare is false on NaN, as the scalar `<` is), every integer
 * step on the same bits.  A change there is a change here.  Two places in
 * v_exp_parts take fewer instructions for the same values (the clamps and
 * the exponent scaling, explained there); every f32 input was checked
 * against the scalar sequence for exp, SiLU, sigmoid, tanh and erf-GELU. */
#ifndef LK_CPU_KERNELS_TRANSCENDENTAL_H
#define LK_CPU_KERNELS_TRANSCENDENTAL_H

#include "backends/transcendental.h"

#define C(x) vf_set1(x)

/* lk_exp_parts: e^x = (p * s1) * s2 (x not NaN). */
LK_INLINE vf v_exp_parts(vf x, vf *s1, vf *s2)
{
    /* x < HI ? x : HI and xc > LO ? xc : LO: for x not NaN, the bounds
     * being nonzero, these are exactly min(x, HI) and max(xc, LO), one
     * instruction each (a NaN x gives garbage here that every caller
     * replaces). */
    vf xc = vf_max_nn(vf_min_nn(x, C(LK_EXP_HI)), C(LK_EXP_LO));
    vf t = vf_fma(xc, C(LK_LOG2E), C(LK_EXP_SHIFT));
    vf kf = vf_sub(t, C(LK_EXP_SHIFT));
    /* ku = k + 256, k = bits(t) - SHIFT_BITS, in one subtraction */
    vi ku = vi_sub(vf_as_vi(t), vi_set1(LK_EXP_SHIFT_BITS - 256));
    vf rh = vf_fma(kf, C(-LK_LN2_HI), xc);
    vf d = vf_mul(kf, C(-LK_LN2_LO));
    vf r = vf_add(rh, d);
    vf q = vf_fma(C(LK_EXP_Q4), r, C(LK_EXP_Q3));
    q = vf_fma(q, r, C(LK_EXP_Q2));
    q = vf_fma(q, r, C(LK_EXP_Q1));
    q = vf_fma(q, r, C(LK_EXP_Q0));
    vf r2 = vf_mul(r, r);
    vf u = vf_fma(r2, q, d);
    vf a = vf_add(C(1.0f), rh);
    vf ae = vf_add(vf_sub(C(1.0f), a), rh);
    vf p = vf_add(a, vf_add(ae, u));
    /* k1 = (k + 256) / 2 - 128 with k + 256 >= 0 (the arithmetic shift is
     * the division), k2 = k - k1; the biased exponents k1 + 127 = h - 1 and
     * k2 + 127 = ku - h - 1 with h = ku >> 1, the same int32 values in two
     * operations fewer. */
    vi h = vi_srai(ku, 1);
    *s1 = vi_as_vf(vi_slli(vi_sub(h, vi_set1(1)), 23));
    *s2 = vi_as_vf(vi_slli(vi_sub(vi_sub(ku, h), vi_set1(1)), 23));
    return p;
}

LK_INLINE vf v_expf(vf x)
{
    vf s1, s2;
    vf p = v_exp_parts(x, &s1, &s2);
    vf y = vf_mul(vf_mul(p, s1), s2);
    return vf_select(vf_isnan(x), x, y);
}

/* exp(t) (numerics.md 7.1) for t <= 0 in every lane, none NaN (softmax's
 * and attention's):
 * t_i = x_i - mx when mx is finite (x_i <= mx, and a subtraction rounds a
 * non-positive difference to a non-positive float).
 *
 * Why the short path gives the full sequence's bits.  With tt =
 * fma(t, LOG2E, SHIFT) and kf = tt - SHIFT = k, suppose k >= -125 in
 * every lane.  Then t * LOG2E >= -125.5, so t > -87 > LO, and t <= 0 < HI:
 * both clamps return t, so xc = t and tt, kf, k, rh, d, r, q, u, a, ae, p
 * below are the full sequence's values, operation for operation.  p lies
 * in [0.70, 1.42] (numerics.md 7.1), i.e. its biased exponent is 126 or
 * 127, and -125 <= k <= 0.  The full sequence returns (p * 2^k1) * 2^k2,
 * k1 + k2 = k, k1 = floor(k / 2) >= -63: p * 2^k1 is exact (normal), and
 * p * 2^k has a biased exponent in [1, 127], so it is a normal float and
 * the second product is exact too: the result is p * 2^k, whose bits are
 * bits(p) + (k << 23) (the exponent field moves by k and stays in
 * [1, 254]).  Finally k = bits(tt) - 0x4b400000 and 0x4b400000 << 23 is 0
 * modulo 2^32 (its lowest set bit is bit 22), so k << 23 = bits(tt) << 23:
 * two integer operations instead of the clamps, the two scale factors,
 * two multiplications and the NaN select.  A vector with any lane below
 * k = -125 (where p * 2^k may be subnormal and round) takes the full
 * sequence, v_expf, whose bits are the contract's by construction. */
LK_INLINE vf sm_exp(vf t)
{
    const vf tt = vf_fma(t, C(LK_LOG2E), C(LK_EXP_SHIFT));
    const vf kf = vf_sub(tt, C(LK_EXP_SHIFT));
    if (__builtin_expect(vm_any(vf_lt(kf, C(-125.0f))), 0))
        return v_expf(t);
    const vf rh = vf_fma(kf, C(-LK_LN2_HI), t);
    const vf d = vf_mul(kf, C(-LK_LN2_LO));
    const vf r = vf_add(rh, d);
    vf q = vf_fma(C(LK_EXP_Q4), r, C(LK_EXP_Q3));
    q = vf_fma(q, r, C(LK_EXP_Q2));
    q = vf_fma(q, r, C(LK_EXP_Q1));
    q = vf_fma(q, r, C(LK_EXP_Q0));
    const vf u = vf_fma(vf_mul(r, r), q, d);
    const vf a = vf_add(C(1.0f), rh);
    const vf ae = vf_add(vf_sub(C(1.0f), a), rh);
    const vf p = vf_add(a, vf_add(ae, u));
    return vi_as_vf(vi_add(vf_as_vi(p), vi_slli(vf_as_vi(tt), 23)));
}

LK_INLINE vf v_logf(vf x)
{
    vi ux = vf_as_vi(x);
    /* ux < 0x00800000 as unsigned: a non-negative int32 below it */
    vm sub = vm_and(vi_gt(vi_set1(0x00800000), ux), vi_gt(ux, vi_set1(-1)));
    vf xs = vf_select(sub, vf_mul(x, C(0x1p23f)), x);
    vi kadj = vi_select(sub, vi_set1(23), vi_set1(0));
    vi us = vf_as_vi(xs);
    vi k = vi_sub(vi_sub(vi_srli(vi_add(us, vi_set1((int32_t)(0x3f800000u - LK_LOG_SQRT_HALF_BITS))), 23),
                         vi_set1(127)),
                  kadj);
    vf m = vi_as_vf(vi_add(vi_and(vi_sub(us, vi_set1((int32_t)LK_LOG_SQRT_HALF_BITS)),
                                  vi_set1(0x007fffff)),
                           vi_set1((int32_t)LK_LOG_SQRT_HALF_BITS)));
    vf f = vf_sub(m, C(1.0f));
    vf kf = vi_to_vf(k);
    vf q = vf_fma(C(LK_LOG_Q8), f, C(LK_LOG_Q7));
    q = vf_fma(q, f, C(LK_LOG_Q6));
    q = vf_fma(q, f, C(LK_LOG_Q5));
    q = vf_fma(q, f, C(LK_LOG_Q4));
    q = vf_fma(q, f, C(LK_LOG_Q3));
    q = vf_fma(q, f, C(LK_LOG_Q2));
    q = vf_fma(q, f, C(LK_LOG_Q1));
    q = vf_fma(q, f, C(LK_LOG_Q0));
    vf f2 = vf_mul(f, f);
    vf f2e = vf_fma(f, f, vf_neg(f2));
    vf lo = vf_fma(f2, q, vf_fma(f2e, q, vf_mul(kf, C(LK_LOG_LN2_LO))));
    vf P = vf_mul(kf, C(LK_LOG_LN2_HI));
    vf hi = vf_add(P, f);
    vf he = vf_add(vf_sub(P, hi), f);
    vf y = vf_add(hi, vf_add(he, lo));
    y = vf_select(vf_eq(x, vf_zero()), vf_bits(0xff800000u), y);
    y = vf_select(vf_lt(x, vf_zero()), vf_bits(LK_NAN_F32_BITS), y);
    y = vf_select(vf_eq(x, vf_bits(0x7f800000u)), x, y);
    return vf_select(vf_isnan(x), x, y);
}

/* The sign of s on v (v's sign bit is clear). */
LK_INLINE vf v_copysign_or(vf v, vf s)
{
    return vf_or(v, vf_and(s, vf_bits(0x80000000u)));
}

LK_INLINE vf v_tanhf(vf x)
{
    vf ax = vf_abs(x);
    vf z = vf_mul(x, x);
    vf p = vf_fma(C(LK_TANH_P7), z, C(LK_TANH_P6));
    p = vf_fma(p, z, C(LK_TANH_P5));
    p = vf_fma(p, z, C(LK_TANH_P4));
    p = vf_fma(p, z, C(LK_TANH_P3));
    p = vf_fma(p, z, C(LK_TANH_P2));
    p = vf_fma(p, z, C(LK_TANH_P1));
    p = vf_fma(p, z, C(LK_TANH_P0));
    vf ys = vf_fma(x, vf_mul(z, p), x);
    vf e = v_expf(vf_add(ax, ax));
    vf yl = vf_sub(C(1.0f), vf_div(C(2.0f), vf_add(e, C(1.0f))));
    yl = v_copysign_or(yl, x);
    vf y = vf_select(vf_lt(ax, C(LK_TANH_SPLIT)), ys, yl);
    return vf_select(vm_or(vf_isnan(x), vf_eq(x, vf_zero())), x, y);
}

LK_INLINE vf v_erff(vf x)
{
    vf ax = vf_abs(x);
    vf z = vf_mul(x, x);
    vf p = vf_fma(C(LK_ERF_P6), z, C(LK_ERF_P5));
    p = vf_fma(p, z, C(LK_ERF_P4));
    p = vf_fma(p, z, C(LK_ERF_P3));
    p = vf_fma(p, z, C(LK_ERF_P2));
    p = vf_fma(p, z, C(LK_ERF_P1));
    p = vf_fma(p, z, C(LK_ERF_P0));
    vf ys = vf_fma(x, p, x);
    vf t = vf_select(vf_lt(ax, C(LK_ERF_TMAX)), ax, C(LK_ERF_TMAX));
    vf g = vf_fma(C(LK_ERF_G6), t, C(LK_ERF_G5));
    g = vf_fma(g, t, C(LK_ERF_G4));
    g = vf_fma(g, t, C(LK_ERF_G3));
    g = vf_fma(g, t, C(LK_ERF_G2));
    g = vf_fma(g, t, C(LK_ERF_G1));
    g = vf_fma(g, t, C(LK_ERF_G0));
    vf gh = vf_fma(g, t, vf_neg(t));
    vf ge = vf_fma(g, t, vf_sub(vf_neg(t), gh));
    vf eh = v_expf(gh);
    vf e = vf_fma(eh, ge, eh);
    vf yl = vf_sub(C(1.0f), e);
    yl = v_copysign_or(yl, x);
    vf y = vf_select(vf_lt(ax, C(LK_ERF_SPLIT)), ys, yl);
    return vf_select(vf_isnan(x), x, y);
}

LK_INLINE vf v_mul_sigmoidf(vf m, vf v, vf ve)
{
    vf s1, s2;
    vf p = v_exp_parts(vf_neg(vf_abs(v)), &s1, &s2);
    const vm pos = vf_ge(v, vf_zero());
    p = vf_fma(p, vf_select(pos, vf_neg(ve), ve), p);
    vf e = vf_mul(vf_mul(p, s1), s2);
    vf n = vf_select(pos, m, vf_mul(vf_mul(vf_mul(m, p), s1), s2));
    vf d = vf_add(C(1.0f), e);
    vf de = vf_add(vf_sub(C(1.0f), d), e);
    vf rd = vf_div(C(1.0f), d);
    vf y0 = vf_mul(n, rd);
    vf rho = vf_fma(vf_neg(y0), de, vf_fma(vf_neg(y0), d, n));
    vf y = vf_fma(rho, rd, y0);
    return vf_select(vm_or(vf_eq(y0, vf_zero()), vf_eq(vf_abs(y0), vf_bits(0x7f800000u))), y0,
                     y);
}

LK_INLINE vf v_sigmoidf(vf x)
{
    vf y = v_mul_sigmoidf(C(1.0f), x, vf_zero());
    return vf_select(vf_isnan(x), x, y);
}

LK_INLINE vf v_siluf(vf x)
{
    vf xc = vf_select(vf_gt(x, C(LK_SILU_LO)), x, C(LK_SILU_LO));
    vf y = v_mul_sigmoidf(xc, xc, vf_zero());
    return vf_select(vf_isnan(x), x, y);
}

LK_INLINE vf v_gelu_tanhf(vf x)
{
    vf xc = vf_select(vf_gt(x, C(LK_SILU_LO)), x, C(LK_SILU_LO));
    vf xv = vf_select(vf_lt(xc, C(LK_GELU_VMAX)), xc, C(LK_GELU_VMAX));
    vf z = vf_mul(xv, xv);
    vf ze = vf_fma(xv, xv, vf_neg(z));
    vf pz = vf_mul(C(LK_GELU_K1), z);
    vf pze = vf_fma(C(LK_GELU_K1), z, vf_neg(pz));
    vf m = vf_add(C(LK_GELU_K0), pz);
    vf mb = vf_sub(m, C(LK_GELU_K0));
    vf me = vf_add(vf_sub(C(LK_GELU_K0), vf_sub(m, mb)), vf_sub(pz, mb));
    vf ml = vf_add(me, vf_add(pze, vf_fma(C(LK_GELU_K1), ze,
                                          vf_fma(C(LK_GELU_K1_LO), z, C(LK_GELU_K0_LO)))));
    vf v = vf_mul(xv, m);
    vf ve = vf_fma(xv, ml, vf_fma(xv, m, vf_neg(v)));
    vf y = v_mul_sigmoidf(xc, v, ve);
    return vf_select(vf_isnan(x), x, y);
}

LK_INLINE vf v_gelu_erff(vf x)
{
    vf ax = vf_abs(x);
    vf t = vf_select(vf_lt(ax, C(LK_GELU_TMAX)), ax, C(LK_GELU_TMAX));
    vf r = vf_div(C(1.0f), vf_add(t, C(LK_GELU_C)));
    vf s = vf_mul(t, r);
    vf c = vf_sub(s, C(LK_GELU_S0));
    vf w = vf_fma(C(LK_GELU_W10), c, C(LK_GELU_W9));
    w = vf_fma(w, c, C(LK_GELU_W8));
    w = vf_fma(w, c, C(LK_GELU_W7));
    w = vf_fma(w, c, C(LK_GELU_W6));
    w = vf_fma(w, c, C(LK_GELU_W5));
    w = vf_fma(w, c, C(LK_GELU_W4));
    w = vf_fma(w, c, C(LK_GELU_W3));
    w = vf_fma(w, c, C(LK_GELU_W2));
    w = vf_fma(w, c, C(LK_GELU_W1));
    w = vf_fma(w, c, C(LK_GELU_W0));
    vf a = vf_mul(vf_mul(w, r), t);
    vf sq = vf_mul(t, t);
    vf sqe = vf_fma(t, t, vf_neg(sq));
    vf s1, s2;
    vf p = v_exp_parts(vf_mul(C(-0.5f), sq), &s1, &s2);
    p = vf_fma(p, vf_mul(C(-0.5f), sqe), p);
    vf u = vf_mul(a, p);
    vf tail = vf_mul(vf_mul(u, s1), s2);
    vf y = vf_select(vf_lt(x, vf_zero()), vf_neg(tail), vf_fma(vf_neg(u), vf_mul(s1, s2), x));
    return vf_select(vf_isnan(x), x, y);
}

#undef C

#endif
