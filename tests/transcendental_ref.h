/* Lockstep tests: double-precision references for the transcendental
 * functions of docs/numerics.md section 7, the error measure in ulps, and
 * the bounds section 10 states.  Shared by tests/test_transcendental.c
 * (sampled) and tests/exhaustive.c (every f32 input). */
#ifndef LK_TESTS_TRANSCENDENTAL_REF_H
#define LK_TESTS_TRANSCENDENTAL_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/ref/transcendental.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef M_SQRT1_2
#define M_SQRT1_2 0.70710678118654752440
#endif

static inline float lk_t_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- references in double: identities that have no cancellation ---- */

static inline double ref_exp(double x)
{
    return exp(x);
}

static inline double ref_log(double x)
{
    return log(x);
}

static inline double ref_tanh(double x)
{
    return tanh(x);
}

static inline double ref_erf(double x)
{
    return erf(x);
}

static inline double ref_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static inline double ref_silu(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    return x / (1.0 + exp(-x));
}

/* 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
static inline double ref_gelu_tanh(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    double v = 2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-v));
}

/* 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2) */
static inline double ref_gelu_erf(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    return 0.5 * x * erfc(-x * M_SQRT1_2);
}

typedef struct lk_t_fn {
    const char *name;
    float (*f)(float);
    double (*ref)(double);
    double bound; /* ulps, as docs/numerics.md section 10 states it */
} lk_t_fn;

static const lk_t_fn lk_t_fns[] = {
    {"exp", lk_ref_expf, ref_exp, 1.0},
    {"log", lk_ref_logf, ref_log, 1.0},
    {"tanh", lk_ref_tanhf, ref_tanh, 1.0},
    {"erf", lk_ref_erff, ref_erf, 1.0},
    {"sigmoid", lk_ref_sigmoidf, ref_sigmoid, 2.0},
    {"silu", lk_ref_siluf, ref_silu, 3.0},
    {"gelu_tanh", lk_ref_gelu_tanhf, ref_gelu_tanh, 4.0},
    {"gelu_erf", lk_ref_gelu_erff, ref_gelu_erf, 5.0},
};

/* Error of y in ulps of the exact result r; HUGE_VAL for a NaN mismatch. */
static inline double lk_t_ulp_error(float y, double r)
{
    if (isnan(r) || isnan(y))
        return isnan(r) && isnan(y) ? 0.0 : HUGE_VAL;
    if (isinf(r))
        return (double)y == r ? 0.0 : HUGE_VAL;
    double ar = fabs(r);
    if (ar >= 0x1.ffffffp+127) /* rounds to Inf (halfway to 2^128 and up) */
        return isinf(y) && !signbit(y) == !signbit(r) ? 0.0 : (ar - fabs((double)y)) * 0x1p-104;
    int e;
    frexp(ar, &e); /* ar = m 2^e, m in [0.5, 1) */
    int ue = e - 24 < -149 ? -149 : e - 24;
    double yy = isinf(y) ? copysign(0x1p128, (double)y) : (double)y;
    return fabs(yy - r) / ldexp(1.0, ue);
}

#endif
