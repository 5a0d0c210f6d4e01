/* Lockstep: the transcendental functions of docs/numerics.md section 7 and
 * the reference unary op, fast.
 *
 * - special values, bit for bit: +-0, +-Inf, NaN, the overflow and
 *   underflow thresholds of exp, saturation of tanh/erf/sigmoid, the signs
 *   of zero results, subnormal results;
 * - 2 million inputs per function (half uniform over all bit patterns, half
 *   uniform in the interesting range) against double precision with the
 *   bounds of numerics.md section 10 (every input is checked by
 *   `make check-exhaustive`, tests/exhaustive.c);
 * - lk_ref_unary: each op is the function followed by the store of
 *   section 3, for every output dtype, strided and in place; relu's -0 and
 *   NaN; conversion with canonical NaNs.
 * Links backends/ref/libref.la alone.  Random inputs come from tap_seed(). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "numerics/scalar.h"
#include "tests/tap.h"
#include "tests/transcendental_ref.h"

#define INF_BITS 0x7f800000u
#define NINF_BITS 0xff800000u
#define NAN_ANY 0xffffffffu /* expected: any NaN */

static uint64_t rng;

static const lk_t_fn *find(const char *name)
{
    for (size_t i = 0; i < sizeof lk_t_fns / sizeof lk_t_fns[0]; i++)
        if (strcmp(lk_t_fns[i].name, name) == 0)
            return &lk_t_fns[i];
    bail("no function %s", name);
    return NULL;
}

/* ------------------------------------------------------ special values */

typedef struct special {
    const char *fn;
    uint32_t x, want; /* bits; want NAN_ANY: any NaN */
} special;

static const special specials[] = {
    /* exp: overflow above ln(2^128 - 2^103) = 88.7228391..., underflow below
     * ln(2^-150) = -103.9720770... (2^-150 itself is a tie to even: 0) */
    {"exp", 0x00000000u, 0x3f800000u},  {"exp", 0x80000000u, 0x3f800000u},
    {"exp", INF_BITS, INF_BITS},        {"exp", NINF_BITS, 0x00000000u},
    {"exp", 0x7fc00000u, NAN_ANY},      {"exp", 0xff812345u, NAN_ANY},
    {"exp", 0x3f800000u, 0x402df854u}, /* e */
    {"exp", 0x42b17216u, 0x7f7fff04u},
    {"exp", 0x42b17217u, 0x7f7fff84u}, /* 88.72283: 0x1.ffff08p127 */
    {"exp", 0x42b17218u, INF_BITS},     {"exp", 0x7f7fffffu, INF_BITS},
    {"exp", 0xc2cff1b4u, 0x00000001u}, /* -103.972076: 2^-149 */
    {"exp", 0xc2cff1b5u, 0x00000000u},  {"exp", 0xff7fffffu, 0x00000000u},
    {"exp", 0xc2aeac4fu, 0x00800026u}, /* around ln(2^-126) = -87.336545 */
    {"exp", 0xc2aeac50u, 0x007fffe6u},
    {"exp", 0x33000000u, 0x3f800000u}, /* 2^-25 */
    {"exp", 0xb3000000u, 0x3f800000u}, /* -2^-25: a tie, to even */
    {"exp", 0xb3000001u, 0x3f7fffffu},
    /* log */
    {"log", 0x3f800000u, 0x00000000u},  {"log", 0x00000000u, NINF_BITS},
    {"log", 0x80000000u, NINF_BITS},    {"log", INF_BITS, INF_BITS},
    {"log", NINF_BITS, NAN_ANY},        {"log", 0xbf800000u, NAN_ANY},
    {"log", 0x80000001u, NAN_ANY},      {"log", 0x7fc00000u, NAN_ANY},
    {"log", 0x40000000u, 0x3f317218u}, /* ln 2 */
    {"log", 0x00000001u, 0xc2ce8ed0u}, /* ln 2^-149 = -103.27893 */
    {"log", 0x7f7fffffu, 0x42b17218u}, /* ln FLT_MAX = 88.72284 */
    /* tanh */
    {"tanh", 0x00000000u, 0x00000000u}, {"tanh", 0x80000000u, 0x80000000u},
    {"tanh", INF_BITS, 0x3f800000u},    {"tanh", NINF_BITS, 0xbf800000u},
    {"tanh", 0x41200000u, 0x3f800000u}, {"tanh", 0xc1200000u, 0xbf800000u},
    {"tanh", 0x00000001u, 0x00000001u}, {"tanh", 0x80000001u, 0x80000001u},
    {"tanh", 0x7fc00000u, NAN_ANY},
    /* erf */
    {"erf", 0x00000000u, 0x00000000u},  {"erf", 0x80000000u, 0x80000000u},
    {"erf", INF_BITS, 0x3f800000u},     {"erf", NINF_BITS, 0xbf800000u},
    {"erf", 0x40800000u, 0x3f800000u},  {"erf", 0xc0800000u, 0xbf800000u},
    {"erf", 0x00000001u, 0x00000001u},  {"erf", 0x00000002u, 0x00000002u},
    {"erf", 0x7fc00000u, NAN_ANY},
    /* sigmoid */
    {"sigmoid", 0x00000000u, 0x3f000000u}, {"sigmoid", 0x80000000u, 0x3f000000u},
    {"sigmoid", INF_BITS, 0x3f800000u},    {"sigmoid", NINF_BITS, 0x00000000u},
    {"sigmoid", 0x42c80000u, 0x3f800000u}, /* 100 */
    {"sigmoid", 0xc2d00000u, 0x00000000u}, /* -104: e^-104 < 2^-150 */
    {"sigmoid", 0x7fc00000u, NAN_ANY},
    /* silu */
    {"silu", 0x00000000u, 0x00000000u}, {"silu", 0x80000000u, 0x80000000u},
    {"silu", INF_BITS, INF_BITS},       {"silu", NINF_BITS, 0x80000000u},
    {"silu", 0x7f7fffffu, 0x7f7fffffu}, {"silu", 0xff7fffffu, 0x80000000u},
    {"silu", 0xc3480000u, 0x80000000u}, /* -200 */
    {"silu", 0x00000001u, 0x00000000u}, /* 2^-149 / 2 is a tie, to even: 0 */
    {"silu", 0x80000001u, 0x80000000u},
    {"silu", 0x00000003u, 0x00000002u}, /* 1.5 ulp: to even */
    {"silu", 0x7fc00000u, NAN_ANY},
    /* GELUs */
    {"gelu_tanh", 0x00000000u, 0x00000000u}, {"gelu_tanh", 0x80000000u, 0x80000000u},
    {"gelu_tanh", INF_BITS, INF_BITS},       {"gelu_tanh", NINF_BITS, 0x80000000u},
    {"gelu_tanh", 0x42c80000u, 0x42c80000u}, {"gelu_tanh", 0xc2c80000u, 0x80000000u},
    {"gelu_tanh", 0x7f7fffffu, 0x7f7fffffu}, {"gelu_tanh", 0xff7fffffu, 0x80000000u},
    {"gelu_tanh", 0x7fc00000u, NAN_ANY},
    {"gelu_erf", 0x00000000u, 0x00000000u},  {"gelu_erf", 0x80000000u, 0x80000000u},
    {"gelu_erf", INF_BITS, INF_BITS},        {"gelu_erf", NINF_BITS, 0x80000000u},
    {"gelu_erf", 0x42c80000u, 0x42c80000u},  {"gelu_erf", 0xc2c80000u, 0x80000000u},
    {"gelu_erf", 0x7f7fffffu, 0x7f7fffffu},  {"gelu_erf", 0xff7fffffu, 0x80000000u},
    {"gelu_erf", 0x7fc00000u, NAN_ANY},
};

static void test_specials(void)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        const special *s = &specials[i];
        float y = find(s->fn)->f(lk_t_bits_f32(s->x));
        uint32_t got = lk_f32_bits(y);
        int good = s->want == NAN_ANY ? lk_isnan(y) : got == s->want;
        if (!good) {
            diag("%s(%a = 0x%08x) = %a (0x%08x), want 0x%08x", s->fn,
                 (double)lk_t_bits_f32(s->x), (unsigned)s->x, (double)y, (unsigned)got,
                 (unsigned)s->want);
            bad++;
        }
    }
    ok(bad == 0, "%zu special values, bit for bit", sizeof specials / sizeof specials[0]);
}

/* Subnormal results: nonzero, subnormal, and within the bound. */
static void test_subnormal_results(void)
{
    static const struct {
        const char *fn;
        float x;
    } cases[] = {
        {"exp", -88.0f},     {"exp", -100.0f},     {"exp", -103.5f},
        {"sigmoid", -90.0f}, {"sigmoid", -100.0f}, {"sigmoid", -103.0f},
        {"silu", -98.0f},    {"silu", -100.0f},    {"silu", -104.5f},
        {"gelu_tanh", -10.6f}, {"gelu_erf", -13.3f}, {"gelu_erf", -14.0f},
        {"tanh", 0x1p-130f}, {"erf", -0x1p-140f},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const lk_t_fn *f = find(cases[i].fn);
        float y = f->f(cases[i].x);
        double r = f->ref(cases[i].x);
        double e = lk_t_ulp_error(y, r);
        int sub = y != 0.0f && fabsf(y) < 0x1p-126f;
        if (!sub || e > f->bound) {
            diag("%s(%a) = %a, want %a (%.3f ulp)%s", f->name, (double)cases[i].x, (double)y, r,
                 e, sub ? "" : ": not a nonzero subnormal");
            bad++;
        }
    }
    ok(bad == 0, "%zu subnormal results", sizeof cases / sizeof cases[0]);
}

/* ------------------------------------------------------- random inputs */

static float random_input(const lk_t_fn *f, int i)
{
    if (i % 2 == 0) /* any bit pattern: every binade, NaNs and Infs */
        return lk_t_bits_f32((uint32_t)tap_rand(&rng));
    double u = (double)(tap_rand(&rng) >> 11) * 0x1p-53; /* [0, 1) */
    if (strcmp(f->name, "log") == 0)
        return (float)ldexp(1.0 + u, (int)(tap_rand(&rng) % 40) - 20);
    double span = strcmp(f->name, "exp") == 0 ? 110.0 : 20.0;
    return (float)((2.0 * u - 1.0) * span);
}

static void test_random(const lk_t_fn *f)
{
    const int n = getenv("LOCKSTEP_TEST_QUICK") != NULL ? 200000 : 2000000; /* qemu: 10x fewer */
    double max = 0.0;
    float at = 0.0f;
    long over = 0;
    for (int i = 0; i < n; i++) {
        float x = random_input(f, i);
        float y = f->f(x);
        double e = lk_t_ulp_error(y, f->ref((double)x));
        if (e > max) {
            max = e;
            at = x;
        }
        if (e > f->bound)
            over++;
    }
    diag("%s: max %.4f ulp at %a", f->name, max, (double)at);
    ok(over == 0, "%s: %d random inputs within %g ulp (%ld beyond)", f->name, n, f->bound, over);
}

/* Monotonic where the function is: 200000 increasing floats each. */
static void test_monotonic(void)
{
    static const char *const names[] = {"exp", "log", "tanh", "erf", "sigmoid", "silu"};
    int bad = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        const lk_t_fn *f = find(names[k]);
        int is_log = strcmp(names[k], "log") == 0, is_silu = strcmp(names[k], "silu") == 0;
        float prev = 0.0f;
        for (int i = 0; i <= 200000; i++) {
            double u = i / 200000.0;
            /* log: 2^-6 .. 2^6; silu: right of its minimum at -1.27846 */
            float x = is_log ? (float)exp2(12.0 * u - 6.0)
                             : is_silu ? (float)(-1.25 + 10.0 * u) : (float)(20.0 * u - 10.0);
            float y = f->f(x);
            if (i > 0 && y < prev) {
                diag("%s decreases at %a: %a < %a", f->name, (double)x, (double)y, (double)prev);
                bad++;
                break;
            }
            prev = y;
        }
    }
    ok(bad == 0, "exp, log, tanh, erf, sigmoid, silu do not decrease on a sweep");
}

/* ----------------------------------------------------------- the op */

static float get(const void *base, lk_dtype dt, int64_t i)
{
    if (dt == LK_F32) {
        float v;
        memcpy(&v, (const char *)base + 4 * i, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, (const char *)base + 2 * i, 2);
    return dt == LK_BF16 ? lk_from_bf16(h) : lk_from_f16(h);
}

/* The store of section 3, written independently of load_store.c. */
static void put(void *base, lk_dtype dt, int64_t i, float v)
{
    if (dt == LK_F32) {
        uint32_t u = lk_isnan(v) ? LK_NAN_F32_BITS : lk_f32_bits(v);
        memcpy((char *)base + 4 * i, &u, 4);
        return;
    }
    uint16_t h = dt == LK_BF16 ? lk_to_bf16(v) : lk_to_f16(v);
    memcpy((char *)base + 2 * i, &h, 2);
}

static float op_fn(lk_unary_op op, float x)
{
    switch (op) {
    case LK_UNARY_COPY:
        return x;
    case LK_UNARY_RELU:
        return lk_isnan(x) ? x : x > 0.0f ? x : 0.0f;
    case LK_UNARY_RELU2: {
        float r = lk_isnan(x) ? x : x > 0.0f ? x : 0.0f;
        return r * r;
    }
    case LK_UNARY_SIGMOID:
        return lk_ref_sigmoidf(x);
    case LK_UNARY_SILU:
        return lk_ref_siluf(x);
    case LK_UNARY_GELU_TANH:
        return lk_ref_gelu_tanhf(x);
    case LK_UNARY_GELU_ERF:
        return lk_ref_gelu_erff(x);
    case LK_UNARY_EXP:
        return lk_ref_expf(x);
    case LK_UNARY_LOG:
        return lk_ref_logf(x);
    case LK_UNARY_TANH:
        return lk_ref_tanhf(x);
    default:
        return lk_ref_erff(x);
    }
}

static lk_tensor tensor(void *data, lk_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
    lk_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.rows = rows;
    t.cols = cols;
    t.ld = ld;
    return t;
}

static float edge_value(int i)
{
    static const uint32_t edges[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
        0x7f800001u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x7f7fffffu, 0xff7fffffu,
        0x3f800000u, 0xbf800000u, 0x42b17218u, 0xc2cff1b4u,
    };
    return lk_t_bits_f32(edges[i % (int)(sizeof edges / sizeof edges[0])]);
}

static void test_unary_op(void)
{
    static const lk_dtype types[3] = {LK_F32, LK_BF16, LK_F16};
    const int64_t rows = 5, cols = 37, ldx = 41, ldy = 39;
    int bad = 0, cases = 0;
    float *src = malloc(sizeof(float) * rows * ldx);
    unsigned char *x = malloc(4 * rows * ldx), *y = malloc(4 * rows * ldy),
                  *want = malloc(4 * rows * ldy);
    if (!src || !x || !y || !want)
        bail("out of memory");
    for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++)
        for (int xi = 0; xi < 3; xi++)
            for (int yi = 0; yi < 3; yi++) {
                lk_dtype xt = types[xi], yt = types[yi];
                for (int64_t i = 0; i < rows * ldx; i++)
                    src[i] = i % 7 == 0 ? edge_value((int)(i / 7))
                                        : (float)(((double)(tap_rand(&rng) >> 11) * 0x1p-53 - 0.5) * 24.0);
                for (int64_t i = 0; i < rows * ldx; i++)
                    put(x, xt, i, src[i]);
                memset(y, 0xa5, 4 * rows * ldy);
                memcpy(want, y, 4 * rows * ldy);
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t c = 0; c < cols; c++)
                        put(want, yt, r * ldy + c, op_fn((lk_unary_op)op, get(x, xt, r * ldx + c)));
                lk_unary_args a;
                a.op = (lk_unary_op)op;
                a.x = tensor(x, xt, rows, cols, ldx);
                a.y = tensor(y, yt, rows, cols, ldy);
                cases++;
                if (lk_ref_unary(&a) != LK_OK || memcmp(y, want, 4 * rows * ldy) != 0) {
                    diag("unary op %d, %d -> %d: bits differ", op, (int)xt, (int)yt);
                    bad++;
                }
                /* in place: y is x (same dtype, same ld) */
                if (xi == yi) {
                    unsigned char *in = malloc(4 * rows * ldx), *expect = malloc(4 * rows * ldx);
                    if (!in || !expect)
                        bail("out of memory");
                    memcpy(in, x, 4 * rows * ldx);
                    memcpy(expect, x, 4 * rows * ldx);
                    for (int64_t r = 0; r < rows; r++)
                        for (int64_t c = 0; c < cols; c++)
                            put(expect, xt, r * ldx + c,
                                op_fn((lk_unary_op)op, get(x, xt, r * ldx + c)));
                    a.x = tensor(in, xt, rows, cols, ldx);
                    a.y = a.x;
                    cases++;
                    if (lk_ref_unary(&a) != LK_OK || memcmp(in, expect, 4 * rows * ldx) != 0) {
                        diag("unary op %d in place, dtype %d: bits differ", op, (int)xt);
                        bad++;
                    }
                    free(in);
                    free(expect);
                }
            }
    ok(bad == 0, "lk_ref_unary: %d cases (every op, dtype pair, strided, in place)", cases);
    free(src);
    free(x);
    free(y);
    free(want);
}

/* The rules the op adds to the functions: relu's zero, canonical NaNs. */
static void test_unary_rules(void)
{
    float in[6] = {-0.0f, -1.0f, 2.0f, lk_t_bits_f32(0xffc00001u), lk_t_bits_f32(0x7f800001u), -3.0f};
    float out[6];
    uint16_t h[6];
    lk_unary_args a;
    a.op = LK_UNARY_RELU;
    a.x = tensor(in, LK_F32, 1, 6, 6);
    a.y = tensor(out, LK_F32, 1, 6, 6);
    lk_ref_unary(&a);
    ok(lk_f32_bits(out[0]) == 0 && lk_f32_bits(out[1]) == 0 && out[2] == 2.0f &&
           lk_f32_bits(out[3]) == LK_NAN_F32_BITS && lk_f32_bits(out[4]) == LK_NAN_F32_BITS,
       "relu: -0 and negatives give +0, NaNs the canonical NaN");
    a.op = LK_UNARY_RELU2;
    lk_ref_unary(&a);
    ok(lk_f32_bits(out[5]) == 0 && out[2] == 4.0f && lk_f32_bits(out[3]) == LK_NAN_F32_BITS,
       "relu2: relu(x)^2");
    a.op = LK_UNARY_COPY;
    a.y = tensor(h, LK_BF16, 1, 6, 6);
    lk_ref_unary(&a);
    int good = h[3] == LK_NAN_BF16_BITS && h[4] == LK_NAN_BF16_BITS && h[0] == 0x8000u && h[2] == 0x4000u;
    a.y = tensor(h, LK_F16, 1, 6, 6);
    lk_ref_unary(&a);
    good = good && h[3] == LK_NAN_F16_BITS && h[4] == LK_NAN_F16_BITS && h[0] == 0x8000u && h[2] == 0x4000u;
    ok(good, "copy to bf16 and f16: canonical NaNs, signed zeros kept");
    a.op = LK_UNARY_LOG;
    a.y = tensor(out, LK_F32, 1, 6, 6);
    lk_ref_unary(&a);
    ok(lk_f32_bits(out[0]) == NINF_BITS && lk_f32_bits(out[1]) == LK_NAN_F32_BITS &&
           lk_f32_bits(out[3]) == LK_NAN_F32_BITS,
       "log: log(-0) = -Inf, log(-1) and NaN store the canonical NaN");
}

int main(void)
{
    rng = tap_seed();
    test_specials();
    test_subnormal_results();
    for (size_t i = 0; i < sizeof lk_t_fns / sizeof lk_t_fns[0]; i++)
        test_random(&lk_t_fns[i]);
    test_monotonic();
    test_unary_op();
    test_unary_rules();
    return done_testing();
}
