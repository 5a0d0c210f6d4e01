/* Lockstep: the library's transcendental functions (docs/numerics.md
 * section 7), as inline f32 sequences (LK_SCALAR: host and, under nvcc,
 * device code) shared by the reference, the scalar tails of the CPU kernels
 * and the CUDA kernels.  The SIMD versions copy these lines one for one,
 * so:
 *
 * - only + - * / and fmaf, compares, selects and integer operations on the
 *   bits; no libm function other than fmaf (exact by IEEE 754), no table;
 * - every special case is a compare + select on values the main path has
 *   already computed (no early return), so a vector version computes every
 *   lane the same way and blends;
 * - every select whose condition can see a NaN is written `a < b ? a : b`
 *   with the NaN in `a`, so that it maps NaN to `b` exactly as x86
 *   minps/maxps(a, b) do; a NaN input is restored by the last select of
 *   each function.  The value of a NaN result is unspecified (any NaN): the
 *   store canonicalises it (section 3).
 *
 * Coefficients: fitted by backends/transcendental_fit.py (numpy + mpmath):
 * weighted minimax on 2000-3000 Chebyshev nodes of the reduced interval by
 * Lawson's iteratively reweighted least squares, the weight being the
 * error of the final result relative to the function (or to ulp for
 * absolute forms); the coefficients are then rounded to f32 one at a time,
 * lowest degree first, refitting the others after each rounding.  The
 * bounds in the comments are the weighted approximation errors of the
 * rounded polynomials; the measured end-to-end errors over all 2^32 inputs
 * are in docs/numerics.md section 10 (tests/exhaustive.c). */
#ifndef LK_BACKENDS_TRANSCENDENTAL_H
#define LK_BACKENDS_TRANSCENDENTAL_H

#include <stdint.h>

#include "numerics/scalar.h"

/* ---------------------------------------------------------------- exp
 * x is clamped to [LO, HI]; k = rne(x / ln 2) by the 1.5 * 2^23 shift;
 * r = x - k ln2 in two parts (rh is exact); e^r = 1 + r + r^2 q(r);
 * 2^k applied in two exact power-of-two steps so that a subnormal result
 * is rounded once. */
#define LK_EXP_HI 0x1.64p+6f          /* 89: e^89 overflows */
#define LK_EXP_LO (-0x1.cp+6f)        /* -112: 2^7 e^-112 < 2^-152 rounds to 0 */
#define LK_EXP_SHIFT 0x1.8p+23f       /* 1.5 * 2^23 */
#define LK_EXP_SHIFT_BITS 0x4b400000  /* its bits */
#define LK_LOG2E 0x1.715476p+0f       /* 1 / ln 2 */
#define LK_LN2_HI 0x1.62e43p-1f       /* ln 2 rounded to f32 */
#define LK_LN2_LO (-0x1.05c61p-29f)   /* ln 2 - LK_LN2_HI */
/* q(r) ~ (e^r - 1 - r) / r^2 on |r| <= 0.34675, relative error of
 * 1 + r + r^2 q(r) against e^r below 2^-28.2 */
#define LK_EXP_Q0 0x1.fffffcp-2f
#define LK_EXP_Q1 0x1.555492p-3f
#define LK_EXP_Q2 0x1.5558bp-5f
#define LK_EXP_Q3 0x1.12398ep-7f
#define LK_EXP_Q4 0x1.6a4d5ap-10f

/* The body of exp: returns p in [0.70, 1.42] and the two scales with
 * e^x = (p * s1) * s2, p * s1 exact (x not NaN). */
LK_SCALAR float lk_exp_parts(float x, float *s1, float *s2)
{
    float xc = x < LK_EXP_HI ? x : LK_EXP_HI; /* NaN -> HI */
    xc = xc > LK_EXP_LO ? xc : LK_EXP_LO;
    float t = fmaf(xc, LK_LOG2E, LK_EXP_SHIFT);
    float kf = t - LK_EXP_SHIFT;                  /* k in [-162, 128] */
    int32_t k = (int32_t)lk_f32_bits(t) - LK_EXP_SHIFT_BITS;
    float rh = fmaf(kf, -LK_LN2_HI, xc);          /* exact */
    float d = kf * -LK_LN2_LO;
    float r = rh + d;
    float q = fmaf(LK_EXP_Q4, r, LK_EXP_Q3);
    q = fmaf(q, r, LK_EXP_Q2);
    q = fmaf(q, r, LK_EXP_Q1);
    q = fmaf(q, r, LK_EXP_Q0);
    float r2 = r * r;
    float u = fmaf(r2, q, d);                     /* e^r - 1 - rh */
    /* 1 + rh with its rounding error (Fast2Sum, |rh| < 1), so that the
     * only large rounding is the last addition */
    float a = 1.0f + rh;
    float ae = (1.0f - a) + rh;
    float p = a + (ae + u);                       /* e^r */
    /* k = k1 + k2, k1 = floor(k / 2): both 2^k1 and 2^k2 are normal and
     * p * 2^k1 is exact, so the product rounds once.  (Every split with
     * both halves in [-126, 127] gives the same bits.) */
    int32_t k1 = (k + 256) / 2 - 128;
    int32_t k2 = k - k1;
    *s1 = lk_bits_f32((uint32_t)(k1 + 127) << 23);
    *s2 = lk_bits_f32((uint32_t)(k2 + 127) << 23);
    return p;
}

LK_SCALAR float lk_expf(float x)
{
    float s1, s2;
    float p = lk_exp_parts(x, &s1, &s2);
    float y = (p * s1) * s2;
    return lk_isnan(x) ? x : y;
}

/* ---------------------------------------------------------------- log
 * x = 2^k * m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23
 * first); f = m - 1 exactly; log(x) = k ln2 + f + f^2 q(f), with
 * k * LOG_LN2_HI exact and its sum with f split by Fast2Sum. */
#define LK_LOG_SQRT_HALF_BITS 0x3f3504f3u /* f32 sqrt(1/2) = 0x1.6a09e6p-1 */
#define LK_LOG_LN2_HI 0x1.62e4p-1f    /* 15 significant bits: k * it is exact */
#define LK_LOG_LN2_LO 0x1.7f7d1cp-20f /* ln 2 - LK_LOG_LN2_HI */
/* q(f) ~ (log1p(f) - f) / f^2 on f in [-0.29289, 0.41422]; error of
 * f + f^2 q(f) relative to log1p(f) below 2^-27.8 */
#define LK_LOG_Q0 (-0x1.fffff8p-2f)
#define LK_LOG_Q1 0x1.55554ep-2f
#define LK_LOG_Q2 (-0x1.000434p-2f)
#define LK_LOG_Q3 0x1.99a52ap-3f
#define LK_LOG_Q4 (-0x1.54265p-3f)
#define LK_LOG_Q5 0x1.225a9ap-3f
#define LK_LOG_Q6 (-0x1.0f27dp-3f)
#define LK_LOG_Q7 0x1.08cd68p-3f
#define LK_LOG_Q8 (-0x1.39bc2ap-4f)

LK_SCALAR float lk_logf(float x)
{
    uint32_t ux = lk_f32_bits(x);
    int sub = ux < 0x00800000u;                   /* +0 or positive subnormal */
    float xs = sub ? x * 0x1p23f : x;
    int32_t kadj = sub ? 23 : 0;
    uint32_t us = lk_f32_bits(xs);
    /* exponent of x / sqrt(1/2), and the mantissa moved into
     * [sqrt(1/2), sqrt(2)); unsigned so that no shift sees a sign */
    int32_t k = (int32_t)((us + (0x3f800000u - LK_LOG_SQRT_HALF_BITS)) >> 23) - 127 - kadj;
    float m = lk_bits_f32(((us - LK_LOG_SQRT_HALF_BITS) & 0x007fffffu) + LK_LOG_SQRT_HALF_BITS);
    float f = m - 1.0f;                           /* exact */
    float kf = (float)k;
    float q = fmaf(LK_LOG_Q8, f, LK_LOG_Q7);
    q = fmaf(q, f, LK_LOG_Q6);
    q = fmaf(q, f, LK_LOG_Q5);
    q = fmaf(q, f, LK_LOG_Q4);
    q = fmaf(q, f, LK_LOG_Q3);
    q = fmaf(q, f, LK_LOG_Q2);
    q = fmaf(q, f, LK_LOG_Q1);
    q = fmaf(q, f, LK_LOG_Q0);
    float f2 = f * f;
    float f2e = fmaf(f, f, -f2);                  /* f^2 = f2 + f2e exactly */
    float lo = fmaf(f2, q, fmaf(f2e, q, kf * LK_LOG_LN2_LO));
    float P = kf * LK_LOG_LN2_HI;                 /* exact */
    float hi = P + f;
    float he = (P - hi) + f;                      /* Fast2Sum: |P| >= |f| or P = 0 */
    float y = hi + (he + lo);
    y = x == 0.0f ? lk_bits_f32(0xff800000u) : y; /* log(+-0) = -Inf */
    y = x < 0.0f ? lk_bits_f32(LK_NAN_F32_BITS) : y;
    y = x == lk_bits_f32(0x7f800000u) ? x : y;    /* log(+Inf) = +Inf */
    return lk_isnan(x) ? x : y;
}

/* ---------------------------------------------------------------- tanh
 * |x| < 1: x + x * (z p(z)), z = x^2;
 * |x| >= 1: 1 - 2 / (e^(2|x|) + 1) with the sign of x (saturates to 1 when
 * e^(2|x|) overflows). */
#define LK_TANH_SPLIT 1.0f
/* p(z) ~ (tanh(x) / x - 1) / z on z in [0, 1]; error relative to tanh
 * below 2^-30.9 */
#define LK_TANH_P0 (-0x1.555552p-2f)
#define LK_TANH_P1 0x1.11103cp-3f
#define LK_TANH_P2 (-0x1.b9f6dap-5f)
#define LK_TANH_P3 0x1.64c044p-6f
#define LK_TANH_P4 (-0x1.18db64p-7f)
#define LK_TANH_P5 0x1.8f862cp-9f
#define LK_TANH_P6 (-0x1.ae8cbap-11f)
#define LK_TANH_P7 0x1.e76c16p-14f

LK_SCALAR float lk_tanhf(float x)
{
    float ax = lk_fabs(x);
    float z = x * x;
    float p = fmaf(LK_TANH_P7, z, LK_TANH_P6);
    p = fmaf(p, z, LK_TANH_P5);
    p = fmaf(p, z, LK_TANH_P4);
    p = fmaf(p, z, LK_TANH_P3);
    p = fmaf(p, z, LK_TANH_P2);
    p = fmaf(p, z, LK_TANH_P1);
    p = fmaf(p, z, LK_TANH_P0);
    float ys = fmaf(x, z * p, x);
    float e = lk_expf(ax + ax);
    float yl = 1.0f - 2.0f / (e + 1.0f);
    yl = lk_bits_f32(lk_f32_bits(yl) | (lk_f32_bits(x) & 0x80000000u));
    float y = ax < LK_TANH_SPLIT ? ys : yl;
    /* x (z p) is +0 for x = -0 (p < 0), and -0 + +0 is +0 */
    return lk_isnan(x) || x == 0.0f ? x : y;
}

/* ---------------------------------------------------------------- erf
 * |x| < 0.875: x + x p(x^2);
 * |x| >= 0.875: 1 - e^g with g = t (P(t) - 1) ~ log(erfc(t)), t = min(|x|, 4),
 * g carried as g + ge so that its rounding does not reach the result;
 * the sign of x copied. */
#define LK_ERF_SPLIT 0.875f
#define LK_ERF_TMAX 4.0f              /* erfc(4) < 2^-25: erf rounds to 1 */
/* p(z) ~ erf(x) / x - 1 on z = x^2 in [0, 0.765625]; error relative to
 * erf below 2^-30.1 */
#define LK_ERF_P0 0x1.06eba8p-3f
#define LK_ERF_P1 (-0x1.81274p-2f)
#define LK_ERF_P2 0x1.ce2d5cp-4f
#define LK_ERF_P3 (-0x1.b7ff8ap-6f)
#define LK_ERF_P4 0x1.5430c6p-8f
#define LK_ERF_P5 (-0x1.a4c29p-11f)
#define LK_ERF_P6 0x1.49af3ap-14f
/* P(t) ~ log(erfc(t)) / t + 1 on t in [0.875, 4]; the error it causes in
 * erf is below 2^-29.8 */
#define LK_ERF_G0 (-0x1.076b72p-3f)
#define LK_ERF_G1 (-0x1.454064p-1f)
#define LK_ERF_G2 (-0x1.b26b9ap-4f)
#define LK_ERF_G3 0x1.82c7f8p-6f
#define LK_ERF_G4 (-0x1.d3b416p-9f)
#define LK_ERF_G5 0x1.3f1fa4p-12f
#define LK_ERF_G6 (-0x1.3a427ep-17f)

LK_SCALAR float lk_erff(float x)
{
    float ax = lk_fabs(x);
    float z = x * x;
    float p = fmaf(LK_ERF_P6, z, LK_ERF_P5);
    p = fmaf(p, z, LK_ERF_P4);
    p = fmaf(p, z, LK_ERF_P3);
    p = fmaf(p, z, LK_ERF_P2);
    p = fmaf(p, z, LK_ERF_P1);
    p = fmaf(p, z, LK_ERF_P0);
    float ys = fmaf(x, p, x);
    float t = ax < LK_ERF_TMAX ? ax : LK_ERF_TMAX; /* NaN -> TMAX */
    float g = fmaf(LK_ERF_G6, t, LK_ERF_G5);
    g = fmaf(g, t, LK_ERF_G4);
    g = fmaf(g, t, LK_ERF_G3);
    g = fmaf(g, t, LK_ERF_G2);
    g = fmaf(g, t, LK_ERF_G1);
    g = fmaf(g, t, LK_ERF_G0);
    float gh = fmaf(g, t, -t);
    float ge = fmaf(g, t, -t - gh);               /* the rounding error of gh */
    float eh = lk_expf(gh);
    float e = fmaf(eh, ge, eh);                   /* e^(gh + ge) = erfc(t) */
    float yl = 1.0f - e;
    yl = lk_bits_f32(lk_f32_bits(yl) | (lk_f32_bits(x) & 0x80000000u));
    float y = ax < LK_ERF_SPLIT ? ys : yl;
    return lk_isnan(x) ? x : y;
}

/* ------------------------------------------- sigmoid, SiLU, tanh-GELU
 * m * sigmoid(v + ve) = n / (1 + e), e = e^-|v + ve|, n = m for v >= 0 and
 * m e for v < 0 (ve is a small correction of v, 0 but for tanh-GELU):
 * - e never overflows, and for v < 0 the result is formed from e^v
 *   directly, so it keeps its relative accuracy down to the subnormals
 *   (m e is scaled like e itself, rounding once);
 * - e^-|v + ve| = e^-|v| (1 - sign(v) ve), applied to the p of exp;
 * - the quotient is corrected by its remainder and by the rounding error
 *   of 1 + e, so that the result rounds about once.
 * Callers keep |m| >= 8 wherever |v| >= 87 (k < -125), so m p s1 stays
 * normal. */
LK_SCALAR float lk_mul_sigmoidf(float m, float v, float ve)
{
    float s1, s2;
    float p = lk_exp_parts(-lk_fabs(v), &s1, &s2);
    p = fmaf(p, v >= 0.0f ? -ve : ve, p);
    float e = (p * s1) * s2;
    float n = v >= 0.0f ? m : ((m * p) * s1) * s2;
    float d = 1.0f + e;
    float de = (1.0f - d) + e;                    /* 1 + e = d + de exactly */
    float rd = 1.0f / d;
    float y0 = n * rd;
    float rho = fmaf(-y0, de, fmaf(-y0, d, n));   /* n - y0 (d + de) */
    float y = fmaf(rho, rd, y0);
    /* the correction is 0 there, but would lose the sign of a zero and
     * turn an infinity into a NaN */
    return y0 == 0.0f || lk_fabs(y0) == lk_bits_f32(0x7f800000u) ? y0 : y;
}

LK_SCALAR float lk_sigmoidf(float x)
{
    float y = lk_mul_sigmoidf(1.0f, x, 0.0f);
    return lk_isnan(x) ? x : y;
}

/* Below -128 every result of SiLU and GELU is -0; clamping there keeps
 * -Inf out of m * e (-Inf * 0 would be a NaN). */
#define LK_SILU_LO (-0x1p7f)

LK_SCALAR float lk_siluf(float x)
{
    float xc = x > LK_SILU_LO ? x : LK_SILU_LO; /* NaN -> LO */
    float y = lk_mul_sigmoidf(xc, xc, 0.0f);
    return lk_isnan(x) ? x : y;
}

/* 0.5 x (1 + tanh(u)) = x sigmoid(2u): the form without the cancellation
 * of 1 + tanh(u) for u < 0.  v = 2u = x (K0 + K1 x^2) is carried as
 * v + ve (the constants and the square in two parts, the sums by 2Sum):
 * sigmoid(v) has the condition number |v| (1 - sigmoid(v)), up to 100
 * here, which would multiply every rounding of a plain f32 v. */
#define LK_GELU_K0 0x1.988454p+0f     /* 2 sqrt(2 / pi) ... */
#define LK_GELU_K0_LO (-0x1.857936p-25f) /* ... + this */
#define LK_GELU_K1 0x1.2444f2p-4f     /* 2 sqrt(2 / pi) * 0.044715 ... */
#define LK_GELU_K1_LO 0x1.49b16ap-29f /* ... + this */
/* Above 64, v > 2^14 and the result is x itself: v is formed from
 * min(x, 64) so that x^3 cannot overflow into Inf - Inf. */
#define LK_GELU_VMAX 0x1p6f

LK_SCALAR float lk_gelu_tanhf(float x)
{
    float xc = x > LK_SILU_LO ? x : LK_SILU_LO; /* NaN -> LO */
    float xv = xc < LK_GELU_VMAX ? xc : LK_GELU_VMAX;
    float z = xv * xv;
    float ze = fmaf(xv, xv, -z);                  /* x^2 = z + ze exactly */
    float pz = LK_GELU_K1 * z;
    float pze = fmaf(LK_GELU_K1, z, -pz);         /* K1 z = pz + pze exactly */
    float m = LK_GELU_K0 + pz;
    float mb = m - LK_GELU_K0;                    /* 2Sum: K0 + pz = m + me */
    float me = (LK_GELU_K0 - (m - mb)) + (pz - mb);
    float ml = me + (pze + fmaf(LK_GELU_K1, ze, fmaf(LK_GELU_K1_LO, z, LK_GELU_K0_LO)));
    float v = xv * m;
    float ve = fmaf(xv, ml, fmaf(xv, m, -v));     /* x (m + ml) = v + ve */
    float y = lk_mul_sigmoidf(xc, v, ve);
    return lk_isnan(x) ? x : y;
}

/* ------------------------------------------------------------ erf-GELU
 * 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x), Phi the normal CDF.  With
 * t = min(|x|, 16) and r = 1 / (t + 3):
 *     t Phi(-t) = (W(t r) r t) e^(-t^2 / 2),
 * W(s) a polynomial in s = t / (t + 3) in [0, 0.842), the square carried
 * exactly as sq + sqe and the power of two of the exponential applied last,
 * so that a subnormal result rounds once.  x < 0: -t Phi(-t);
 * x >= 0: x - t Phi(-t) in one rounding.  (No cancellation in either half:
 * the naive 1 + erf(z) loses all its digits for x below about -4.) */
#define LK_GELU_TMAX 16.0f            /* 16 Phi(-16) < 2^-150 */
#define LK_GELU_C 3.0f
#define LK_GELU_S0 0x1.bp-2f          /* 0.421875, the middle of s's range */
/* W(s) ~ Phi(-t) e^(t^2 / 2) (t + 3), t = 3 s / (1 - s), as a polynomial
 * in s - S0; error relative to W below 2^-25.1 (most of it the rounding
 * of W0) */
#define LK_GELU_W0 0x1.a1005ep-1f
#define LK_GELU_W1 (-0x1.2b42dap+0f)
#define LK_GELU_W2 0x1.00647ep+0f
#define LK_GELU_W3 (-0x1.4077fcp-2f)
#define LK_GELU_W4 (-0x1.f85e8ap-3f)
#define LK_GELU_W5 0x1.6ab174p-3f
#define LK_GELU_W6 0x1.f324fep-4f
#define LK_GELU_W7 (-0x1.4615e4p-4f)
#define LK_GELU_W8 (-0x1.3c84c4p-4f)
#define LK_GELU_W9 0x1.2acc2p-6f
#define LK_GELU_W10 0x1.59ed82p-6f

LK_SCALAR float lk_gelu_erff(float x)
{
    float ax = lk_fabs(x);
    float t = ax < LK_GELU_TMAX ? ax : LK_GELU_TMAX; /* NaN -> TMAX */
    float r = 1.0f / (t + LK_GELU_C);
    float s = t * r;
    float c = s - LK_GELU_S0;
    float w = fmaf(LK_GELU_W10, c, LK_GELU_W9);
    w = fmaf(w, c, LK_GELU_W8);
    w = fmaf(w, c, LK_GELU_W7);
    w = fmaf(w, c, LK_GELU_W6);
    w = fmaf(w, c, LK_GELU_W5);
    w = fmaf(w, c, LK_GELU_W4);
    w = fmaf(w, c, LK_GELU_W3);
    w = fmaf(w, c, LK_GELU_W2);
    w = fmaf(w, c, LK_GELU_W1);
    w = fmaf(w, c, LK_GELU_W0);
    float a = (w * r) * t;                        /* t Phi(-t) e^(t^2 / 2) */
    float sq = t * t;
    float sqe = fmaf(t, t, -sq);                  /* t^2 = sq + sqe exactly */
    float s1, s2;
    float p = lk_exp_parts(-0.5f * sq, &s1, &s2);
    p = fmaf(p, -0.5f * sqe, p);                  /* times e^(-sqe / 2) */
    float u = a * p;
    float tail = (u * s1) * s2;                   /* t Phi(-t) */
    float y = x < 0.0f ? -tail : fmaf(-u, s1 * s2, x);
    return lk_isnan(x) ? x : y;
}


/* ---------------------------------------------------------- sin and cos
 * Both at once (RoPE needs both).  k = rne(x * f32(2/pi)) by the 1.5 * 2^23
 * shift (|k| < 2^22 since |x| <= 2^22); r = x - k pi/2 with pi/2 in three
 * f32 parts by fma (the first step is exact); then sin(r) = r + r z S(z)
 * and cos(r) = 1 - z/2 + z^2 C(z), z = r^2, with 1 - z/2 and the rounding
 * of z carried exactly; the quadrant k mod 4 swaps and negates.  f32(2/pi)
 * makes k off by up to 0.08 at |x| = 2^22, so |r| <= 0.93, the fitted
 * interval.  |x| > 2^22, +-Inf and NaN give NaN. */
#define LK_SC_MAX 0x1p22f             /* LK_ROPE_MAX_ANGLE */
#define LK_SC_TWO_OVER_PI 0x1.45f306p-1f
#define LK_SC_PIO2_1 0x1.921fb6p+0f   /* pi/2 = P1 + P2 + P3 + O(2^-76) */
#define LK_SC_PIO2_2 (-0x1.777a5cp-25f)
#define LK_SC_PIO2_3 (-0x1.ee59dap-50f)
/* S(z) ~ (sin(r)/r - 1)/z on |r| <= 0.93, error relative to sin < 2^-31.9 */
#define LK_SIN_S0 (-0x1.555556p-3f)
#define LK_SIN_S1 0x1.11114ep-7f
#define LK_SIN_S2 (-0x1.a02de6p-13f)
#define LK_SIN_S3 0x1.70b3fp-19f
/* C(z) ~ (cos(r) - 1 + z/2)/z^2 on |r| <= 0.93, error relative to cos < 2^-35.8 */
#define LK_COS_C0 0x1.555556p-5f
#define LK_COS_C1 (-0x1.6c1728p-10f)
#define LK_COS_C2 0x1.a03ca8p-16f
#define LK_COS_C3 (-0x1.297e1ap-22f)

LK_SCALAR void lk_sincosf(float x, float *sn, float *cs)
{
    float xc = x < LK_SC_MAX ? x : LK_SC_MAX;    /* NaN -> MAX */
    xc = xc > -LK_SC_MAX ? xc : -LK_SC_MAX;
    float t = fmaf(xc, LK_SC_TWO_OVER_PI, LK_EXP_SHIFT);
    float kf = t - LK_EXP_SHIFT;
    int32_t k = (int32_t)lk_f32_bits(t) - LK_EXP_SHIFT_BITS;
    float r = fmaf(kf, -LK_SC_PIO2_1, xc);        /* exact */
    r = fmaf(kf, -LK_SC_PIO2_2, r);
    r = fmaf(kf, -LK_SC_PIO2_3, r);
    float z = r * r;
    float ze = fmaf(r, r, -z);                    /* r^2 = z + ze exactly */
    float sp = fmaf(LK_SIN_S3, z, LK_SIN_S2);
    sp = fmaf(sp, z, LK_SIN_S1);
    sp = fmaf(sp, z, LK_SIN_S0);
    float sr = fmaf(r, z * sp, r);
    float cp = fmaf(LK_COS_C3, z, LK_COS_C2);
    cp = fmaf(cp, z, LK_COS_C1);
    cp = fmaf(cp, z, LK_COS_C0);
    float hz = 0.5f * z;                          /* exact */
    float w = 1.0f - hz;
    float we = (1.0f - w) - hz;                   /* Fast2Sum: 1 - hz = w + we */
    float cr = w + (we + fmaf(z * z, cp, -0.5f * ze));
    int32_t odd = k & 1;
    float s = odd ? cr : sr;
    float c = odd ? sr : cr;
    s = (k & 2) ? -s : s;                         /* quadrants 2, 3 */
    c = ((k + 1) & 2) ? -c : c;                   /* quadrants 1, 2 */
    s = x == 0.0f ? x : s;                        /* sin(-0) = -0 */
    float ax = lk_fabs(x);
    float nan = lk_bits_f32(LK_NAN_F32_BITS);
    *sn = ax <= LK_SC_MAX ? s : nan;              /* NaN, Inf, out of range */
    *cs = ax <= LK_SC_MAX ? c : nan;
}

#endif
