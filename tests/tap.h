/* Lockstep tests: a tiny header-only TAP emitter for automake's
 * tap-driver.sh.
 *
 *   plan(n) or done_testing() at the end (which prints the plan);
 *   ok(cond, "what %d", i) returns cond; skip(n, "why") for checks that
 *   cannot run (an absent device is a SKIP, never a pass); diag("...") for
 *   comments; bail("...") stops everything; skip_all("...") when nothing
 *   here can run.  done_testing() exits with the number of failures
 *   (capped at 255).  tap_seed() picks and prints a random seed
 *   (LOCKSTEP_TEST_SEED repeats one), tap_rand() is a splitmix64 step. */
#ifndef LK_TESTS_TAP_H
#define LK_TESTS_TAP_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TAP_UNUSED_ __attribute__((unused))

static int tap_planned_ TAP_UNUSED_ = -1;
static int tap_run_ TAP_UNUSED_;
static int tap_failed_ TAP_UNUSED_;

static inline void plan(int n)
{
    tap_planned_ = n;
    printf("1..%d\n", n);
    fflush(stdout);
}

static inline void tap_vline_(const char *prefix, const char *fmt, va_list ap)
{
    fputs(prefix, stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    fflush(stdout);
}

static inline void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vline_("# ", fmt, ap);
    va_end(ap);
}

static inline int ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int ok(int cond, const char *fmt, ...)
{
    char prefix[48];
    va_list ap;
    tap_run_++;
    if (!cond)
        tap_failed_++;
    snprintf(prefix, sizeof prefix, "%sok %d - ", cond ? "" : "not ", tap_run_);
    va_start(ap, fmt);
    tap_vline_(prefix, fmt, ap);
    va_end(ap);
    return cond;
}

/* n checks that cannot run here, with the reason. */
static inline void skip(int n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void skip(int n, const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n; i++) {
        tap_run_++;
        printf("ok %d # SKIP %s\n", tap_run_, why);
    }
    fflush(stdout);
}

/* Nothing in this program can run here: the whole test is a SKIP. */
static inline void skip_all(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void skip_all(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vline_("1..0 # SKIP ", fmt, ap);
    va_end(ap);
    exit(0);
}

static inline void bail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void bail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tap_vline_("Bail out! ", fmt, ap);
    va_end(ap);
    exit(255);
}

static inline int tap_failures(void)
{
    return tap_failed_;
}

/* Prints the plan if none was given, and exits: status = failures. */
static inline int done_testing(void)
{
    if (tap_planned_ < 0)
        plan(tap_run_);
    else if (tap_planned_ != tap_run_)
        diag("planned %d tests but ran %d", tap_planned_, tap_run_);
    fflush(stdout);
    exit(tap_failed_ > 255 ? 255 : tap_failed_);
    return 0;
}

/* The seed of this run: LOCKSTEP_TEST_SEED, or the clock and pid. */
static inline uint64_t tap_seed(void)
{
    const char *env = getenv("LOCKSTEP_TEST_SEED");
    uint64_t seed;
    if (env && *env)
        seed = strtoull(env, NULL, 0);
    else
        seed = (uint64_t)time(NULL) * 1000003u ^ (uint64_t)getpid();
    diag("seed %llu (set LOCKSTEP_TEST_SEED=%llu to repeat this run)",
         (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* splitmix64: a good 64-bit stream from any state, zero included. */
static inline uint64_t tap_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
