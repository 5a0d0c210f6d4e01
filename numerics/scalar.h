/* Lockstep: the scalar building blocks of the contract (docs/numerics.md,
 * sections 1 and 3), as inline C shared by the reference and by the scalar
 * tails of every CPU kernel.  Bit manipulation goes through memcpy so that
 * no aliasing rule is bent. */
#ifndef LK_NUMERICS_SCALAR_H
#define LK_NUMERICS_SCALAR_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "numerics/contract.h"

/* Scalar helpers compile as host code and, under nvcc, as device code too,
 * so the CUDA kernels use the very same sequences. */
#if defined(__CUDACC__)
#define LK_SCALAR static inline __host__ __device__
#else
#define LK_SCALAR static inline
#endif

LK_SCALAR uint32_t lk_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

LK_SCALAR float lk_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

LK_SCALAR int lk_isnan(float x)
{
    return (lk_f32_bits(x) & 0x7fffffffu) > 0x7f800000u;
}

LK_SCALAR float lk_fabs(float x)
{
    return lk_bits_f32(lk_f32_bits(x) & 0x7fffffffu);
}

/* IEEE 754-2019 maximum/minimum: NaN wins, -0 < +0. */
LK_SCALAR float lk_maximum(float a, float b)
{
    if (lk_isnan(a) || lk_isnan(b))
        return lk_bits_f32(LK_NAN_F32_BITS);
    if (a == b) /* equal, or +0 vs -0: +0 is larger */
        return lk_bits_f32(lk_f32_bits(a) & lk_f32_bits(b));
    return a > b ? a : b;
}

LK_SCALAR float lk_minimum(float a, float b)
{
    if (lk_isnan(a) || lk_isnan(b))
        return lk_bits_f32(LK_NAN_F32_BITS);
    if (a == b) /* -0 is smaller */
        return lk_bits_f32(lk_f32_bits(a) | lk_f32_bits(b));
    return a < b ? a : b;
}

/* Round half to even to an integer value, for |x| < 2^23 or any x already
 * integral (the clamps of the contract guarantee it).  The 1.5 * 2^23 shift
 * trick, exact under round-to-nearest-even. */
LK_SCALAR float lk_rne(float x)
{
    const float shift = 0x1.8p23f;
    if (!(lk_fabs(x) < 0x1p23f))
        return x;
    float r = (x + shift) - shift;
    /* keep the sign of zero: -0.4 rounds to -0 */
    return lk_bits_f32(lk_f32_bits(r) | (lk_f32_bits(x) & 0x80000000u));
}

/* ---- conversions (numerics.md section 3) ---- */

LK_SCALAR float lk_canon_f32(float x)
{
    return lk_isnan(x) ? lk_bits_f32(LK_NAN_F32_BITS) : x;
}

LK_SCALAR uint16_t lk_to_bf16(float x)
{
    uint32_t u = lk_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)LK_NAN_BF16_BITS;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

LK_SCALAR float lk_from_bf16(uint16_t h)
{
    return lk_bits_f32((uint32_t)h << 16);
}

LK_SCALAR uint16_t lk_to_f16(float x)
{
    uint32_t u = lk_f32_bits(x);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return (uint16_t)LK_NAN_F16_BITS;
    if (a >= 0x477ff000u) /* >= 65520: rounds to Inf */
        return (uint16_t)(sign | 0x7c00u);
    if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
        /* The f16 subnormal grid is 2^-24: round |x| * 2^24 to an integer,
         * ties to even, in integers (f32 arithmetic here would follow the
         * caller's rounding mode and FTZ/DAZ in host code that calls the
         * public helper outside the FP guard).  |x| = mant * 2^(e - 150)
         * (2^-149 for f32 subnormals), so |x| * 2^24 = mant >> sh. */
        uint32_t e = a >> 23;
        uint32_t mant = e ? (a & 0x7fffffu) | 0x800000u : a;
        uint32_t sh = e ? 126u - e : 125u; /* >= 14 */
        if (sh > 24u) /* mant < 2^24 <= half an ulp of the grid: 0 */
            return (uint16_t)sign;
        uint32_t m = mant >> sh, rem = mant & ((1u << sh) - 1u), half = 1u << (sh - 1u);
        m += rem > half || (rem == half && (m & 1u));
        return (uint16_t)(sign | m); /* m == 0x400 becomes the smallest normal */
    }
    /* normal: rebias exponent, round 13 low bits to nearest even */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 */
    r += 0x0fffu + ((r >> 13) & 1u);
    return (uint16_t)(sign | (r >> 13));
}

LK_SCALAR float lk_from_f16(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) /* Inf or NaN */
        return lk_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact */
        float f = (float)m * 0x1p-24f;
        return lk_bits_f32(lk_f32_bits(f) | sign);
    }
    return lk_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
