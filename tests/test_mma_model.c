/* The CPU model of the tensor-core tier (backends/ref/mma_model.c,
 * docs/numerics.md "Tensor-core tier"): hand-computed steps (truncation,
 * round toward zero, cancellation, terms shifted out, subnormals, Inf, NaN,
 * signed zeros, the two halves of sm_80), a second implementation written
 * the way MMA-Sim writes it (floating significands, frexp/ldexp/trunc in
 * double, all exact) on random bits, and the whole GEMM against float64
 * within the bound the docs state.  Links the reference kernels alone. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "numerics/scalar.h"
#include "tests/tap.h"

/* (The kernels report errors through backends/host.h: without a host
 * they only return the status, all this test looks at.) */

static uint64_t rng;

static uint16_t bf(float x)
{
    return lk_to_bf16(x);
}

static uint16_t hf(float x)
{
    return lk_to_f16(x);
}

static uint32_t bits(float x)
{
    return lk_f32_bits(x);
}

/* One step of n terms: a[i] * b[i] given as floats, converted exactly. */
static float step(lk_dtype dt, int n, const float *a, const float *b, float c, int f)
{
    uint16_t ra[16], rb[16];
    for (int i = 0; i < n; i++) {
        ra[i] = dt == LK_BF16 ? bf(a[i]) : hf(a[i]);
        rb[i] = dt == LK_BF16 ? bf(b[i]) : hf(b[i]);
    }
    return lk_mma_fdpa(dt, ra, rb, n, c, f);
}

static void is_bits(float got, uint32_t want, const char *what)
{
    if (!ok(bits(got) == want, "%s", what))
        diag("got 0x%08x (%a), want 0x%08x (%a)", bits(got), got, want, lk_bits_f32(want));
}

static void test_hand(void)
{
    const float inf = INFINITY;
    diag("hand-computed steps (F = 25 unless said)");
    {
        float a[16], b[16];
        for (int i = 0; i < 16; i++)
            a[i] = (float)(i + 1), b[i] = 1.0f;
        is_bits(step(LK_BF16, 16, a, b, 0.0f, 25), bits(136.0f), "exact integer sum 1..16");
    }
    {
        /* 1 + 3*2^-25: the 3*2^-25 term survives alignment (F = 25) but
         * the f32 result is rounded toward zero: 1.0 (RNE would give
         * 1 + 2^-23). */
        float a[2] = {1.0f, 0x1.8p-13f}, b[2] = {1.0f, 0x1p-12f};
        is_bits(step(LK_BF16, 2, a, b, 0.0f, 25), 0x3f800000u, "sum rounded toward zero");
        float an[2] = {-1.0f, -0x1.8p-13f};
        is_bits(step(LK_BF16, 2, an, b, 0.0f, 25), 0xbf800000u,
                "negative sum rounded toward zero");
        /* with F = 24 the term is truncated from 1.5 to 1 unit: still 1.0 */
        is_bits(step(LK_BF16, 2, a, b, 0.0f, 24), 0x3f800000u, "F = 24: same");
    }
    {
        /* c = 1, product -2^-26: aligned to 2^0 with 25 fractional bits
         * the product is -0.5 units, truncated to 0: the result is 1.0,
         * where an exact sum rounded toward zero would be 1 - 2^-24. */
        float a[1] = {-0x1p-13f}, b[1] = {0x1p-13f};
        is_bits(step(LK_BF16, 1, a, b, 1.0f, 25), 0x3f800000u,
                "a term below 2^-F of the largest is truncated away");
        /* -2^-24 is 2 units: 1 - 2^-24 exactly (0x3f7fffff) */
        float a2[1] = {-0x1p-12f}, b2[1] = {0x1p-12f};
        is_bits(step(LK_BF16, 1, a2, b2, 1.0f, 25), 0x3f7fffffu, "two units survive");
        /* with F = 24 it is 1 unit: 1 - 2^-24 still */
        is_bits(step(LK_BF16, 1, a2, b2, 1.0f, 24), 0x3f7fffffu, "F = 24: one unit");
        /* -3*2^-26 is 1.5 units at F = 25 -> 1 unit -> 1 - 2^-25, rounded
         * toward zero to f32: 1 - 2^-24 */
        float a3[1] = {-0x1.8p-13f};
        is_bits(step(LK_BF16, 1, a3, b2 /* 2^-12 */, 1.0f, 25), 0x3f7fffffu,
                "1 - 2^-25 rounds toward zero to 1 - 2^-24");
    }
    {
        /* cancellation: 2^10 - 2^10 + 2^-20: the small product is aligned
         * to 2^10 and lost; the exact answer would be 2^-20 */
        float a[3] = {0x1p5f, -0x1p5f, 0x1p-10f}, b[3] = {0x1p5f, 0x1p5f, 0x1p-10f};
        is_bits(step(LK_BF16, 3, a, b, 0.0f, 25), 0u, "cancellation loses the small term: +0");
        /* exact cancellation gives +0, also from -0 terms and c = -0 */
        float z[2] = {-1.0f, 1.0f}, o[2] = {1.0f, 1.0f};
        is_bits(step(LK_BF16, 2, z, o, -0.0f, 25), 0u, "x - x + (-0) = +0");
        float nz[1] = {-0.0f}, one[1] = {1.0f};
        is_bits(step(LK_BF16, 1, nz, one, -0.0f, 25), 0u, "(-0)(1) + (-0) = +0");
    }
    {
        /* wide exponents: c = 2^100 swallows 1.0; a product 2^100 swallows c */
        float a[1] = {1.0f}, b[1] = {1.0f};
        is_bits(step(LK_BF16, 1, a, b, 0x1p100f, 25), bits(0x1p100f), "2^100 + 1 = 2^100");
        float a2[1] = {0x1p50f}, b2[1] = {0x1p50f};
        is_bits(step(LK_BF16, 1, a2, b2, 1.0f, 25), bits(0x1p100f), "1 + 2^100 = 2^100");
        /* -1 against 2^24 with F = 25: 2^24 - 1 exactly (the term is 2 units) */
        float a3[1] = {-1.0f};
        is_bits(step(LK_BF16, 1, a3, b, 0x1p24f, 25), bits(0x1p24f - 1.0f), "2^24 - 1");
        /* and 2^25 - 1: 1 is exactly 1 unit; 2^25 - 1 rounded toward zero is 2^25 - 2 */
        is_bits(step(LK_BF16, 1, a3, b, 0x1p25f, 25), bits(0x1p25f - 2.0f),
                "2^25 - 1 rounded toward zero");
        /* 2^26 - 1: the 1 is half a unit, truncated: 2^26 */
        is_bits(step(LK_BF16, 1, a3, b, 0x1p26f, 25), bits(0x1p26f), "2^26 - 1 = 2^26");
    }
    {
        /* products align by the sum of their factors' exponents: 1.5 * 1.5
         * = 2.25 has exponent 0 and significand 2.25, so against a term
         * 2^-25 (exponent -25) nothing is lost: 2.25 + 2^-25 exact,
         * rounded toward zero to f32 (ulp 2^-22): 2.25 */
        float a[2] = {1.5f, 0x1p-13f}, b[2] = {1.5f, 0x1p-12f};
        is_bits(step(LK_BF16, 2, a, b, 0.0f, 25), bits(2.25f), "significand in [2, 4)");
        /* -(2.25) + 2^-23 * 3: 3 units of 2^-25... -> -2.25 + 3*2^-23?
         * simpler: 2.25 - 2.25 + 2^-25 = 2^-25 exactly (kept: 1 unit) */
        float a2[3] = {1.5f, -1.5f, 0x1p-13f}, b2[3] = {1.5f, 1.5f, 0x1p-12f};
        is_bits(step(LK_BF16, 3, a2, b2, 0.0f, 25), bits(0x1p-25f), "one unit left");
        /* same at F = 24: the unit is truncated away */
        is_bits(step(LK_BF16, 3, a2, b2, 0.0f, 24), 0u, "F = 24: truncated away");
    }
    {
        /* subnormals: bf16 2^-130 (0x0008) times 1: f32 subnormal 2^-130 */
        uint16_t a[1] = {0x0008}, b[1] = {0x3f80};
        is_bits(lk_mma_fdpa(LK_BF16, a, b, 1, 0.0f, 25), 0x00080000u, "bf16 subnormal input");
        /* 2^-100 * 2^-60 = 2^-160: below every f32, toward zero: +0, -0 */
        float x[1] = {0x1p-100f}, y[1] = {0x1p-60f}, ny[1] = {-0x1p-60f};
        is_bits(step(LK_BF16, 1, x, y, 0.0f, 25), 0u, "2^-160 underflows to +0");
        is_bits(step(LK_BF16, 1, x, ny, 0.0f, 25), 0x80000000u, "-2^-160 underflows to -0");
        /* 3*2^-150 (a subnormal halfway value) truncates to 2^-149 */
        float x3[1] = {0x1.8p-75f}, y3[1] = {0x1p-74f};
        is_bits(step(LK_BF16, 1, x3, y3, 0.0f, 25), 0x00000001u,
                "1.5 * 2^-149 truncated to 2^-149");
        /* f16 subnormals: 2^-24 * 2^-24 = 2^-48 exactly */
        uint16_t h[1] = {0x0001};
        is_bits(lk_mma_fdpa(LK_F16, h, h, 1, 0.0f, 25), bits(0x1p-48f), "f16 subnormal inputs");
        /* f32 subnormal accumulator kept: 2^-149 + 0 products */
        uint16_t z[1] = {0};
        is_bits(lk_mma_fdpa(LK_BF16, z, z, 1, lk_bits_f32(1u), 25), 1u,
                "f32 subnormal accumulator kept");
        /* a subnormal c aligned against a product of exponent -126: c =
         * 2^-149 is 2^-23 of 2^-126, 4 units at F = 25: kept */
        float p[1] = {0x1p-63f}, q[1] = {0x1p-63f};
        is_bits(step(LK_BF16, 1, p, q, lk_bits_f32(1u), 25), bits(0x1p-126f) + 1u,
                "2^-126 + 2^-149");
    }
    {
        float a[2] = {inf, 1.0f}, b[2] = {1.0f, 1.0f};
        is_bits(step(LK_BF16, 2, a, b, 0.0f, 25), 0x7f800000u, "Inf * 1 = Inf");
        float a2[2] = {inf, 1.0f}, b2[2] = {-2.0f, 1.0f};
        is_bits(step(LK_BF16, 2, a2, b2, 0.0f, 25), 0xff800000u, "Inf * -2 = -Inf");
        float a3[1] = {inf}, b3[1] = {0.0f};
        ok(lk_isnan(step(LK_BF16, 1, a3, b3, 0.0f, 25)), "Inf * 0 = NaN");
        float a4[2] = {inf, inf}, b4[2] = {1.0f, -1.0f};
        ok(lk_isnan(step(LK_BF16, 2, a4, b4, 0.0f, 25)), "Inf - Inf = NaN");
        ok(lk_isnan(step(LK_BF16, 2, a, b, -inf, 25)), "Inf + (-Inf c) = NaN");
        float a5[1] = {1.0f}, b5[1] = {1.0f};
        is_bits(step(LK_BF16, 1, a5, b5, -inf, 25), 0xff800000u, "c = -Inf stays");
        uint16_t n[1] = {0x7fc1}, o[1] = {0x3f80};
        ok(lk_isnan(lk_mma_fdpa(LK_BF16, n, o, 1, 0.0f, 25)), "NaN input = NaN");
        ok(lk_isnan(step(LK_BF16, 1, a5, b5, NAN, 25)), "NaN c = NaN");
        /* overflow of finite terms: 2^127 * 2 = 2^128 -> Inf (MMA-Sim) */
        float a6[1] = {0x1p127f}, b6[1] = {2.0f};
        is_bits(step(LK_BF16, 1, a6, b6, 0.0f, 25), 0x7f800000u, "2^128 -> Inf");
        /* but a sum that comes back into range never overflows */
        float a7[2] = {0x1p127f, -0x1p127f}, b7[2] = {2.0f, 2.0f};
        is_bits(step(LK_BF16, 2, a7, b7, 1.0f, 25), 0u,
                "2^128 - 2^128 + 1: 1 shifted out, +0");
    }
    {
        /* sm_80 runs 16 as two halves of 8, sm_90 fuses them: 2^10 - 2^10
         * in the first half and 2^-20 in the second survive on sm_80 only */
        uint16_t a[16] = {0}, b[16] = {0};
        a[0] = bf(0x1p5f), b[0] = bf(0x1p5f);
        a[1] = bf(-0x1p5f), b[1] = bf(0x1p5f);
        a[8] = bf(0x1p-10f), b[8] = bf(0x1p-10f);
        is_bits(lk_mma_step(LK_GEMM_TC_SM80, LK_BF16, a, b, 0.0f), bits(0x1p-20f),
                "sm_80: two halves keep 2^-20");
        is_bits(lk_mma_step(LK_GEMM_TC_SM90, LK_BF16, a, b, 0.0f), 0u,
                "sm_90: one fused step loses it");
    }
}

/* MMA-Sim's nv_fused_dot_add written with floating significands in double
 * (every operation exact for these sizes), independently of the model. */
static void sig_exp(double x, int emin, double *s, int *e)
{
    if (x == 0.0) {
        *s = 0.0;
        *e = -100000;
        return;
    }
    int ex;
    double m = frexp(x, &ex);
    m *= 2.0;
    ex -= 1;
    if (ex < emin) {
        m = ldexp(m, ex - emin);
        ex = emin;
    }
    *s = m;
    *e = ex;
}

static float mmasim(lk_dtype dt, const uint16_t *a, const uint16_t *b, int n, float c, int f)
{
    double fa[16], fb[16], total = (double)c;
    int emin = dt == LK_BF16 ? -126 : -14;
    for (int i = 0; i < n; i++) {
        fa[i] = dt == LK_BF16 ? (double)lk_from_bf16(a[i]) : (double)lk_from_f16(a[i]);
        fb[i] = dt == LK_BF16 ? (double)lk_from_bf16(b[i]) : (double)lk_from_f16(b[i]);
        total += fa[i] * fb[i];
    }
    if (isnan(total))
        return NAN;
    if (isinf(total))
        return (float)total;
    double s[17];
    int e[17], emax = -100000;
    sig_exp((double)c, -126, &s[0], &e[0]);
    for (int i = 0; i < n; i++) {
        double sa, sb;
        int ea, eb;
        sig_exp(fa[i], emin, &sa, &ea);
        sig_exp(fb[i], emin, &sb, &eb);
        s[i + 1] = sa * sb;
        e[i + 1] = (sa == 0.0 || sb == 0.0) ? -100000 : ea + eb;
    }
    for (int i = 0; i <= n; i++)
        if (e[i] > emax)
            emax = e[i];
    double sum = 0.0;
    for (int i = 0; i <= n; i++)
        if (s[i] != 0.0)
            sum += ldexp(trunc(ldexp(s[i], f + e[i] - emax)), -f);
    if (sum == 0.0)
        return 0.0f;
    double v = ldexp(sum, emax), rs;
    int re;
    sig_exp(v, -126, &rs, &re);
    if (re > 127)
        return v > 0 ? INFINITY : -INFINITY;
    rs = ldexp(trunc(ldexp(rs, 23)), -23);
    return (float)ldexp(rs, re);
}

/* A random finite 16-bit value: exponents within `spread` binades of the
 * middle, some zeros and subnormals. */
static uint16_t rnd16(lk_dtype dt, int spread)
{
    uint64_t r = tap_rand(&rng);
    int ebits = dt == LK_BF16 ? 8 : 5, frac = dt == LK_BF16 ? 7 : 10;
    int emaxf = (1 << ebits) - 2, mid = (1 << (ebits - 1)) - 1;
    uint32_t m = (uint32_t)(r & ((1u << frac) - 1u));
    uint32_t s = (uint32_t)((r >> 20) & 1u);
    int pick = (int)((r >> 24) % 16);
    int e;
    if (pick == 0)
        return (uint16_t)(s << 15); /* zero */
    if (pick == 1)
        e = 0; /* subnormal */
    else
        e = mid + (int)((r >> 32) % (uint64_t)(2 * spread + 1)) - spread;
    if (e < 0)
        e = 0;
    if (e > emaxf)
        e = emaxf;
    return (uint16_t)((s << 15) | ((uint32_t)e << frac) | m);
}

static void test_vs_mmasim(uint64_t seed)
{
    (void)seed;
    static const lk_dtype dts[2] = {LK_BF16, LK_F16};
    static const int spreads[3] = {2, 12, 60};
    for (int di = 0; di < 2; di++) {
        for (int si = 0; si < 3; si++) {
            for (int f = 24; f <= 25; f++) {
                lk_dtype dt = dts[di];
                int spread = dt == LK_F16 && spreads[si] > 14 ? 14 : spreads[si];
                long bad = 0, trials = 20000;
                uint16_t a[16], b[16];
                for (long t = 0; t < trials; t++) {
                    int n = f == 24 ? 8 : 16;
                    for (int i = 0; i < n; i++) {
                        a[i] = rnd16(dt, spread);
                        b[i] = rnd16(dt, spread);
                    }
                    /* c: a previous step's result, or a random f32 */
                    float c = t % 3 == 0 ? 0.0f
                                         : lk_mma_fdpa(dt, a, b, n, 0.0f, f) *
                                               (float)((int)(tap_rand(&rng) % 7) - 3);
                    if (t % 5 == 1)
                        c = lk_bits_f32((uint32_t)tap_rand(&rng) & 0x8fffffffu);
                    for (int i = 0; i < n; i++)
                        b[i] = rnd16(dt, spread);
                    float got = lk_mma_fdpa(dt, a, b, n, c, f);
                    float want = mmasim(dt, a, b, n, c, f);
                    int same = (lk_isnan(got) && lk_isnan(want)) || bits(got) == bits(want);
                    if (!same && bad++ < 3) {
                        diag("mismatch %s F=%d: got %a want %a, c=%a", dt == LK_BF16 ? "bf16" : "f16", f,
                             got, want, c);
                        for (int i = 0; i < n; i++)
                            diag("  a[%d]=0x%04x b[%d]=0x%04x", i, a[i], i, b[i]);
                    }
                }
                ok(bad == 0, "model = MMA-Sim's algorithm, %s, spread %d, F = %d (%ld trials, %ld differ)",
                   dt == LK_BF16 ? "bf16" : "f16", spread, f, trials, bad);
            }
        }
    }
}

/* The whole GEMM against float64: numerics.md's bound
 * |C - exact| <= s ((n + 1) 2^-F + 2^-23) (1 + 2^-20) sum|a b| + s 2^-149,
 * s the fused steps (ceil(K/16), twice that on sm_80), n their terms. */
static void test_accuracy(void)
{
    static const int64_t ks[] = {1, 7, 16, 17, 100, 1000, 4096};
    for (int tier = 0; tier < 2; tier++) {
        unsigned flag = tier ? LK_GEMM_TC_SM90 : LK_GEMM_TC_SM80;
        for (int di = 0; di < 2; di++) {
            lk_dtype dt = di ? LK_F16 : LK_BF16;
            double worst = 0.0;
            int fails = 0;
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t m = 3, n = 5, k = ks[ki];
                uint16_t *a = malloc((size_t)(m * k) * 2), *b = malloc((size_t)(n * k) * 2);
                float *c = malloc((size_t)(m * n) * 4);
                for (int64_t i = 0; i < m * k; i++) {
                    float v = (float)((double)(tap_rand(&rng) >> 11) * 0x1p-53 * 2.0 - 1.0);
                    a[i] = dt == LK_BF16 ? bf(v) : hf(v);
                }
                for (int64_t i = 0; i < n * k; i++) {
                    float v = (float)((double)(tap_rand(&rng) >> 11) * 0x1p-53 * 2.0 - 1.0);
                    b[i] = dt == LK_BF16 ? bf(v) : hf(v);
                }
                lk_gemm_args g;
                memset(&g, 0, sizeof g);
                g.ta = LK_NO_TRANS;
                g.tb = LK_TRANS;
                g.m = m, g.n = n, g.k = k, g.batch = 1, g.flags = flag;
                g.a = lk_mat(a, dt, m, k);
                g.b = lk_mat(b, dt, n, k);
                g.c = lk_mat(c, LK_F32, m, n);
                lk_ref_gemm_tc(&g);
                double steps = (double)((k + 15) / 16) * (tier ? 1 : 2);
                double per = tier ? (17.0 * 0x1p-25 + 0x1p-23) : (9.0 * 0x1p-24 + 0x1p-23);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double exact = 0.0, mag = 0.0;
                        for (int64_t l = 0; l < k; l++) {
                            double x = dt == LK_BF16 ? lk_from_bf16(a[i * k + l]) : lk_from_f16(a[i * k + l]);
                            double y = dt == LK_BF16 ? lk_from_bf16(b[j * k + l]) : lk_from_f16(b[j * k + l]);
                            exact += x * y;
                            mag += fabs(x * y);
                        }
                        double err = fabs((double)c[i * n + j] - exact);
                        double bound = steps * per * (1.0 + 0x1p-20) * mag + steps * 0x1p-149;
                        if (mag > 0 && err / mag > worst)
                            worst = err / mag;
                        if (!(err <= bound))
                            fails++;
                    }
                free(a);
                free(b);
                free(c);
            }
            ok(fails == 0, "%s %s: |C - exact| within the stated bound (worst err/sum|ab| %.3g)",
               tier ? "sm90" : "sm80", dt == LK_BF16 ? "bf16" : "f16", worst);
        }
    }
}

int main(void)
{
    uint64_t seed = tap_seed();
    rng = seed;
    test_hand();
    test_vs_mmasim(seed);
    test_accuracy();
    return done_testing();
}
