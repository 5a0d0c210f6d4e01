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
 * Runs on every thread OpenMP offers: 2^32 inputs take about two minutes
 * per function on two idle cores (17 s on sixteen). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tests/transcendental_ref.h"

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

static void check_one(const lk_t_fn *f, uint32_t u, result *res)
{
    float x = lk_t_bits_f32(u);
    float y = f->f(x);
    double r = f->ref((double)x);
    double err = lk_t_ulp_error(y, r);
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

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run(const lk_t_fn *f)
{
    result total = {0, 0, 0, 0, 0, 0};
    double t0 = now();
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
    float x = lk_t_bits_f32(total.max_at);
    float y = f->f(x);
    printf("%-9s max %.4f ulp at x = %a (0x%08x): got %a, want %.17a\n", f->name,
           total.max_err, (double)x, (unsigned)total.max_at, (double)y, f->ref((double)x));
    printf("%-9s not correctly rounded: %lld of 2^32; over the bound %g ulp: %lld; "
           "NaN mistakes: %lld; zero-sign mistakes: %lld (%.0f s)\n",
           f->name, total.not_rounded, f->bound, total.over, total.bad_nan, total.bad_sign,
           now() - t0);
    fflush(stdout);
    return total.over == 0 && total.bad_nan == 0 && total.bad_sign == 0;
}

int main(int argc, char **argv)
{
    size_t n = sizeof lk_t_fns / sizeof lk_t_fns[0];
    int good = 1, ran = 0;
    for (size_t i = 0; i < n; i++) {
        int want = argc < 2;
        for (int a = 1; a < argc; a++)
            if (strcmp(argv[a], lk_t_fns[i].name) == 0)
                want = 1;
        if (!want)
            continue;
        ran++;
        if (!run(&lk_t_fns[i]))
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
