/* Lockstep tests: the public conversion helpers (lk_f32_to_bf16,
 * lk_f32_to_f16, lk_bf16_to_f32, lk_f16_to_f32) ignore the caller's
 * floating-point environment.
 *
 * Under each rounding mode (and, on x86, with FTZ and DAZ set) every
 * narrowing helper must give the bits lk_convert gives on the reference
 * device, every widening one its own bits in the default environment
 * (lk_convert's but for NaN payloads, which widening keeps and a store
 * makes canonical), and each must hand the caller's environment back,
 * status flags included.
 * f16/bf16 to f32: all 65536 inputs.  f32 to f16/bf16: every 97th input,
 * plus, for every sign and exponent, the mantissas around each possible
 * rounding position (the f16 subnormal range drops 13 to 24 bits); with
 * LOCKSTEP_TEST_FULL=1 (`make check-exhaustive`) all 2^32 inputs. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <fenv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define HAVE_MXCSR 1
#endif

#include <lockstep.h>

#include "tests/tap.h"

/* The environments a caller may leave behind: the four rounding modes,
 * and on x86 each with FTZ and DAZ as well. */
typedef struct fpmode {
    const char *name;
    int round;
    int ftz_daz;
} fpmode;

static const fpmode modes[] = {
    {"FE_TONEAREST", FE_TONEAREST, 0},   {"FE_DOWNWARD", FE_DOWNWARD, 0},
    {"FE_UPWARD", FE_UPWARD, 0},         {"FE_TOWARDZERO", FE_TOWARDZERO, 0},
#ifdef HAVE_MXCSR
    {"FE_TONEAREST+FTZ/DAZ", FE_TONEAREST, 1}, {"FE_DOWNWARD+FTZ/DAZ", FE_DOWNWARD, 1},
    {"FE_UPWARD+FTZ/DAZ", FE_UPWARD, 1},       {"FE_TOWARDZERO+FTZ/DAZ", FE_TOWARDZERO, 1},
#endif
};
#define NMODES (sizeof modes / sizeof modes[0])

/* Sets mode m; the state set, read back, for checking it is returned. */
static unsigned long set_mode(const fpmode *m)
{
    fesetround(m->round);
#ifdef HAVE_MXCSR
    if (m->ftz_daz)
        _mm_setcsr(_mm_getcsr() | 0x8040u);
    return _mm_getcsr();
#else
    return (unsigned long)fegetround();
#endif
}

/* back to the default, with no exception flag raised */
static void clear_mode(void)
{
    fesetround(FE_TONEAREST);
    feclearexcept(FE_ALL_EXCEPT);
#ifdef HAVE_MXCSR
    _mm_setcsr(_mm_getcsr() & ~0x8040u);
#endif
}

static unsigned long get_mode(void)
{
#ifdef HAVE_MXCSR
    return _mm_getcsr();
#else
    return (unsigned long)fegetround();
#endif
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static lk_queue *ref_q;

/* want16[i] = lk_convert of in[i] into dtype d on the reference device. */
static void ref_narrow(const uint32_t *in, uint16_t *want16, size_t n, lk_dtype d)
{
    lk_tensor x = lk_mat(in, LK_F32, 1, (int64_t)n), y = lk_mat(want16, d, 1, (int64_t)n);
    if (lk_convert(ref_q, &x, &y) != LK_OK)
        bail("lk_convert: %s", lk_last_error());
}

/* per helper and mode: mismatches, the first one, and whether the caller's
 * environment came back */
typedef struct tally {
    uint64_t bad;
    uint32_t first_in, first_got, first_want;
    int env_lost;
} tally;

static void note(tally *t, uint32_t in, uint32_t got, uint32_t want)
{
    if (t->bad++ == 0) {
        t->first_in = in;
        t->first_got = got;
        t->first_want = want;
    }
}

static tally narrow_tally[2][NMODES];

/* checks a block of f32 inputs against lk_convert under every mode */
static void check_block(const uint32_t *in, size_t n, uint16_t *w_bf, uint16_t *w_f16)
{
    ref_narrow(in, w_bf, n, LK_BF16);
    ref_narrow(in, w_f16, n, LK_F16);
    for (size_t m = 0; m < NMODES; m++) {
        unsigned long set = set_mode(&modes[m]);
        for (size_t i = 0; i < n; i++) {
            float x = bits_f32(in[i]);
            uint16_t b = lk_f32_to_bf16(x), h = lk_f32_to_f16(x);
            if (b != w_bf[i])
                note(&narrow_tally[0][m], in[i], b, w_bf[i]);
            if (h != w_f16[i])
                note(&narrow_tally[1][m], in[i], h, w_f16[i]);
        }
        if (get_mode() != set)
            narrow_tally[0][m].env_lost = narrow_tally[1][m].env_lost = 1;
        clear_mode();
    }
}

#define BLOCK 65536

int main(void)
{
    uint64_t rng = tap_seed();
    const char *full_env = getenv("LOCKSTEP_TEST_FULL");
    int full = full_env && *full_env && strcmp(full_env, "0") != 0;

    clear_mode();
    lk_context *ctx;
    lk_device *ref;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "ref", &ref) != LK_OK ||
        lk_queue_create(ref, NULL, &ref_q) != LK_OK)
        bail("no reference device: %s", lk_last_error());

    /* ---- widening: every 16-bit input ---- */
    static uint16_t all16[65536];
    static uint32_t want_bf[65536], want_f16[65536];
    for (uint32_t i = 0; i < 65536; i++)
        all16[i] = (uint16_t)i;
    lk_tensor x16 = lk_mat(all16, LK_BF16, 1, 65536), y32 = lk_mat(want_bf, LK_F32, 1, 65536);
    if (lk_convert(ref_q, &x16, &y32) != LK_OK)
        bail("lk_convert: %s", lk_last_error());
    x16.dtype = LK_F16;
    y32.data = want_f16;
    if (lk_convert(ref_q, &x16, &y32) != LK_OK)
        bail("lk_convert: %s", lk_last_error());
    /* Widening is exact: a NaN keeps its payload here, where lk_convert's
     * store makes it canonical; every other value must be lk_convert's.
     * The bits in the default environment are then the reference. */
    int64_t bad_bf = 0, bad_f16 = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t b = f32_bits(lk_bf16_to_f32((uint16_t)i));
        uint32_t h = f32_bits(lk_f16_to_f32((uint16_t)i));
        int bnan = (b & 0x7fffffffu) > 0x7f800000u, hnan = (h & 0x7fffffffu) > 0x7f800000u;
        bad_bf += bnan ? want_bf[i] != 0x7fc00000u : b != want_bf[i];
        bad_f16 += hnan ? want_f16[i] != 0x7fc00000u : h != want_f16[i];
        want_bf[i] = b;
        want_f16[i] = h;
    }
    ok(bad_bf == 0, "lk_bf16_to_f32: every input as lk_convert, NaN payloads apart (%lld differ)",
       (long long)bad_bf);
    ok(bad_f16 == 0, "lk_f16_to_f32: every input as lk_convert, NaN payloads apart (%lld differ)",
       (long long)bad_f16);
    for (size_t m = 0; m < NMODES; m++) {
        tally tb = {0, 0, 0, 0, 0}, th = {0, 0, 0, 0, 0};
        unsigned long set = set_mode(&modes[m]);
        for (uint32_t i = 0; i < 65536; i++) {
            uint32_t b = f32_bits(lk_bf16_to_f32((uint16_t)i));
            uint32_t h = f32_bits(lk_f16_to_f32((uint16_t)i));
            if (b != want_bf[i])
                note(&tb, i, b, want_bf[i]);
            if (h != want_f16[i])
                note(&th, i, h, want_f16[i]);
        }
        int lost = get_mode() != set;
        clear_mode();
        ok(tb.bad == 0 && !lost, "lk_bf16_to_f32 under %s: every input as by default%s (%llu differ; "
           "first 0x%04x: 0x%08x, want 0x%08x)", modes[m].name, lost ? "; caller's state lost" : "",
           (unsigned long long)tb.bad, tb.first_in, tb.first_got, tb.first_want);
        ok(th.bad == 0 && !lost, "lk_f16_to_f32 under %s: every input as by default%s (%llu differ; "
           "first 0x%04x: 0x%08x, want 0x%08x)", modes[m].name, lost ? "; caller's state lost" : "",
           (unsigned long long)th.bad, th.first_in, th.first_got, th.first_want);
    }

    /* ---- narrowing ---- */
    uint32_t *in = malloc(sizeof(uint32_t) * BLOCK);
    uint16_t *w_bf = malloc(2 * BLOCK), *w_f16 = malloc(2 * BLOCK);
    if (!in || !w_bf || !w_f16)
        bail("out of memory");
    size_t n = 0;
    uint64_t total = 0;
#define PUSH(u)                                                                                    \
    do {                                                                                           \
        in[n++] = (u);                                                                             \
        if (n == BLOCK) {                                                                          \
            check_block(in, n, w_bf, w_f16);                                                       \
            total += n;                                                                            \
            n = 0;                                                                                 \
        }                                                                                          \
    } while (0)
    if (full) {
        diag("LOCKSTEP_TEST_FULL: all 2^32 f32 inputs");
        for (uint64_t u = 0; u < (1ull << 32); u++)
            PUSH((uint32_t)u);
    } else {
        /* two known cases first: f16 subnormal results */
        PUSH(0x33000001u);
        PUSH(0x8089c35au);
        for (uint64_t u = 0; u < (1ull << 32); u += 97)
            PUSH((uint32_t)u);
        /* around every rounding position k (bits dropped) of every sign and
         * exponent: low k bits 0, 1, half - 1, half, half + 1, all ones,
         * under random kept bits */
        for (uint32_t se = 0; se < 512; se++)
            for (int k = 1; k <= 24; k++) {
                uint32_t lowmask = k >= 23 ? 0x7fffffu : (1u << k) - 1;
                uint32_t half = k >= 24 ? 0x800000u : 1u << (k - 1);
                const uint32_t pats[6] = {0, 1, half - 1, half, half + 1, lowmask};
                for (int r = 0; r < 16; r++) {
                    uint32_t hi = (uint32_t)tap_rand(&rng) & 0x7fffffu & ~lowmask;
                    for (int p = 0; p < 6; p++)
                        PUSH(se << 23 | hi | (pats[p] & 0x7fffffu));
                }
            }
    }
    if (n) {
        check_block(in, n, w_bf, w_f16);
        total += n;
    }
    diag("%llu f32 inputs narrowed", (unsigned long long)total);
    for (size_t m = 0; m < NMODES; m++)
        for (int h = 0; h < 2; h++) {
            const tally *t = &narrow_tally[h][m];
            ok(t->bad == 0 && !t->env_lost,
               "%s under %s: as lk_convert%s (%llu differ; first 0x%08x: 0x%04x, want 0x%04x)",
               h ? "lk_f32_to_f16" : "lk_f32_to_bf16", modes[m].name,
               t->env_lost ? "; caller's state lost" : "", (unsigned long long)t->bad,
               t->first_in, t->first_got, t->first_want);
        }
    free(in);
    free(w_bf);
    free(w_f16);
    lk_queue_destroy(ref_q);
    lk_context_destroy(ctx);
    return done_testing();
}
