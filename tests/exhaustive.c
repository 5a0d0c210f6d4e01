/* Lockstep: every f32 input of each transcendental function against a
 * double-precision libm reference (docs/numerics.md section 10).
 *
 *   make check-exhaustive                   all eight functions
 *   tests/exhaustive exp tanh               some of them
 *
 * For each function: the largest error in ulps of the exact result (the
 * double reference, whose own error is ~2^-29 of an f32 ulp) and where it
 * occurs, the count of results that are not the correctly rounded one, the
 * count beyond the bound stated in numerics.md, and the count of NaN or
 * sign-of-zero mistakes.  Exits non-zero if any bound is exceeded.  An ulp
 * is that of the exact result's binade, 2^-149 below 2^-126; Inf counts as
 * 2^128 so that a late or early overflow is measured too.
 *
 * Runs on every thread OpenMP offers: 2^32 inputs take about a minute per
 * function on two cores. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backends/ref/transcendental.h"

static float bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* ---- references in double: identities that have no cancellation ---- */

static double ref_exp(double x)
{
    return exp(x);
}

static double ref_log(double x)
{
    return log(x);
}

static double ref_tanh(double x)
{
    return tanh(x);
}

static double ref_erf(double x)
{
    return erf(x);
}

static double ref_sigmoid(double x)
{
    return 1.0 / (1.0 + exp(-x));
}

static double ref_silu(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    return x / (1.0 + exp(-x));
}

/* 0.5 x (1 + tanh(u)) = x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3) */
static double ref_gelu_tanh(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    double v = 2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-v));
}

/* 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2) */
static double ref_gelu_erf(double x)
{
    if (isinf(x))
        return x > 0 ? x : -0.0;
    return 0.5 * x * erfc(-x * M_SQRT1_2);
}

typedef struct fn {
    const char *name;
    float (*f)(float);
    double (*ref)(double);
    double bound; /* ulps, as docs/numerics.md section 10 states it */
} fn;

static const fn fns[] = {
    {"exp", lk_ref_expf, ref_exp, 1.0},
    {"log", lk_ref_logf, ref_log, 1.0},
    {"tanh", lk_ref_tanhf, ref_tanh, 2.0},
    {"erf", lk_ref_erff, ref_erf, 2.0},
    {"sigmoid", lk_ref_sigmoidf, ref_sigmoid, 2.0},
    {"silu", lk_ref_siluf, ref_silu, 3.0},
    {"gelu_tanh", lk_ref_gelu_tanhf, ref_gelu_tanh, 1024.0},
    {"gelu_erf", lk_ref_gelu_erff, ref_gelu_erf, 4.0},
};

/* Error of y in ulps of the exact result r; HUGE_VAL for a NaN mismatch. */
static double ulp_error(float y, double r)
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

typedef struct result {
    double max_err;
    uint32_t max_at;
    long long not_rounded; /* error above 1/2 ulp */
    long long over;        /* error above the bound */
    long long bad_nan;     /* NaN where none belongs, or none where one does */
    long long bad_sign;    /* a zero of the wrong sign */
} result;

static void merge(result *into, const result *r)
{
    if (r->max_err > into->max_err || (r->max_err == into->max_err && r->max_at < into->max_at)) {
        into->max_err = r->max_err;
        into->max_at = r->max_at;
    }
    into->not_rounded += r->not_rounded;
    into->over += r->over;
    into->bad_nan += r->bad_nan;
    into->bad_sign += r->bad_sign;
}

static void check_one(const fn *f, uint32_t u, result *res)
{
    float x = bits_f32(u);
    float y = f->f(x);
    double r = f->ref((double)x);
    double err = ulp_error(y, r);
    if (err == HUGE_VAL) {
        res->bad_nan++;
        return;
    }
    if (y == 0.0f && (r == 0.0 || fabs(r) <= 0x1p-150) && !signbit(y) != !signbit(r))
        res->bad_sign++;
    if (err > res->max_err || (err == res->max_err && u < res->max_at)) {
        res->max_err = err;
        res->max_at = u;
    }
    if (err > 0.5)
        res->not_rounded++;
    if (err > f->bound)
        res->over++;
}

static int run(const fn *f)
{
    result total = {0, 0, 0, 0, 0, 0};
#ifdef _OPENMP
#pragma omp parallel
#endif
    {
        result mine = {0, 0, 0, 0, 0, 0};
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int64_t hi = 0; hi < 65536; hi++)
            for (uint32_t lo = 0; lo < 65536; lo++)
                check_one(f, (uint32_t)hi << 16 | lo, &mine);
#ifdef _OPENMP
#pragma omp critical
#endif
        merge(&total, &mine);
    }
    float x = bits_f32(total.max_at);
    float y = f->f(x);
    printf("%-9s max %.4f ulp at x = %a (0x%08x): got %a, want %.17a\n", f->name,
           total.max_err, (double)x, (unsigned)total.max_at, (double)y, f->ref((double)x));
    printf("%-9s not correctly rounded: %lld of 2^32; over the bound %g ulp: %lld; "
           "NaN mistakes: %lld; zero-sign mistakes: %lld\n",
           f->name, total.not_rounded, f->bound, total.over, total.bad_nan, total.bad_sign);
    fflush(stdout);
    return total.over == 0 && total.bad_nan == 0 && total.bad_sign == 0;
}

int main(int argc, char **argv)
{
    size_t n = sizeof fns / sizeof fns[0];
    int good = 1, ran = 0;
    for (size_t i = 0; i < n; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], fns[i].name) == 0)
                want = 1;
        if (!want)
            continue;
        ran++;
        if (!run(&fns[i]))
            good = 0;
    }
    if (ran == 0) {
        fprintf(stderr, "usage: %s [exp|log|tanh|erf|sigmoid|silu|gelu_tanh|gelu_erf ...]\n",
                argv[0]);
        return 2;
    }
    printf("%s\n", good ? "all within the stated bounds" : "FAILED: a stated bound is exceeded");
    return good ? 0 : 1;
}
