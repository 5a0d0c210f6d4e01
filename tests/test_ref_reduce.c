/* Lockstep: the reference row reductions, norms and softmax against the
 * contract (docs/numerics.md sections 3, 5 and 6).
 *
 * 1. Bits: lk_ref_reduce, lk_ref_rmsnorm, lk_ref_layernorm, lk_ref_softmax
 *    and lk_ref_log_softmax are compared with memcmp against a literal
 *    re-implementation written here from the contract's text alone (a
 *    recursive lane sum, conversions by frexp/nearbyint), for random rows
 *    of many lengths, every float dtype pair, strided rows and results.
 *    Padding between rows and results must be left untouched.
 * 2. Edge values: NaN (first NaN wins ARGMAX, canonical NaN stored), +-Inf,
 *    +-0 (a sum of -0 is -0, max{-0, +0} = +0), subnormals (kept), values
 *    near overflow, unbiased variance of one element (NaN).
 * 3. Accuracy of the f32 results against float64 computed here, within
 *    the bounds derived next to each check (h = roundings on the deepest
 *    path of the lane sum, u = 2^-24, gamma_k = k u / (1 - k u)).
 *
 * The kernels are called directly with hand-built args structs (the test
 * links backends/ref/libref.la, not the core).  The seed is printed;
 * LOCKSTEP_TEST_SEED repeats a run. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#include "tests/ref_host.h"
#include "tests/tap.h"

#define U 0x1p-24 /* unit roundoff of binary32 */

/* The kernels report failures (no memory) through the host
 * tests/ref_host.h gives them; the core is not linked. */
#define last_error ref_last_error

/* ------------------------------------------------------------ random */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    return tap_rand(&rng_state);
}

static double rng_unit(void) /* [0, 1) */
{
    return (double)(rng_next() >> 11) * 0x1p-53;
}

static float rng_uniform(float lo, float hi)
{
    return (float)(lo + (hi - lo) * rng_unit());
}

/* A float of any sign and a wide exponent range, zeros and subnormals
 * included, no NaN or Inf. */
static float rng_wide(void)
{
    uint64_t r = rng_next();
    float v;
    switch (r & 15) {
    case 0:
        v = 0.0f;
        break;
    case 1: /* subnormal */
        v = ldexpf((float)((r >> 8) & 0x7fffff), -149);
        break;
    default:
        v = ldexpf((float)(1.0 + rng_unit()), (int)((r >> 8) % 61) - 30);
        break;
    }
    return (r >> 4) & 1 ? -v : v;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---------------------------------------- conversions, from section 3 */

static size_t dsize(lk_dtype dt)
{
    return dt == LK_F32 ? 4 : dt == LK_I64 ? 8 : 2;
}

static const char *dname(lk_dtype dt)
{
    return dt == LK_F32 ? "f32" : dt == LK_BF16 ? "bf16" : dt == LK_F16 ? "f16" : "i64";
}

static float t_f16_to_f32(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -(float)v : (float)v;
}

/* Round |v| to p significant bits (p counts the implicit one) with the
 * smallest normal 2^emin; RNE through nearbyint on an exact scaling. */
static uint16_t t_round16(float v, int p, int emin, int ebias, int emax_field,
                          uint16_t nan)
{
    if (isnan(v))
        return nan;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs((double)v);
    uint16_t inf = (uint16_t)(sign | (emax_field << (p - 1)));
    if (isinf(a))
        return inf;
    if (a < ldexp(1.0, emin)) /* subnormal grid 2^(emin - p + 1) */
        return (uint16_t)(sign | (uint16_t)nearbyint(ldexp(a, p - 1 - emin)));
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    double q = nearbyint(ldexp(a, p - e)); /* in [2^(p-1), 2^p] */
    int be = e - 1 + ebias;
    if (q == ldexp(1.0, p)) {
        q = ldexp(1.0, p - 1);
        be++;
    }
    if (be >= emax_field)
        return inf;
    return (uint16_t)(sign | (be << (p - 1)) | (int)(q - ldexp(1.0, p - 1)));
}

static uint16_t t_to_bf16(float v) { return t_round16(v, 8, -126, 127, 255, 0x7fc0); }
static uint16_t t_to_f16(float v) { return t_round16(v, 11, -14, 15, 31, 0x7e00); }

static float t_load(const void *base, lk_dtype dt, int64_t i)
{
    if (dt == LK_F32) {
        float f;
        memcpy(&f, (const char *)base + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)base + 2 * i, 2);
    return dt == LK_BF16 ? bits_f32((uint32_t)h << 16) : t_f16_to_f32(h);
}

static void t_store(void *base, lk_dtype dt, int64_t i, float v)
{
    if (dt == LK_F32) {
        uint32_t u = isnan(v) ? 0x7fc00000u : f32_bits(v);
        memcpy((char *)base + 4 * i, &u, 4);
        return;
    }
    uint16_t h = dt == LK_BF16 ? t_to_bf16(v) : t_to_f16(v);
    memcpy((char *)base + 2 * i, &h, 2);
}

/* The stored bits of one float element. */
static uint32_t t_bits(const void *p, lk_dtype dt)
{
    if (dt == LK_F32) {
        uint32_t u;
        memcpy(&u, p, 4);
        return u;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* --------------------------------------------- the contract, literally */

/* Section 5: chunks of 4096, 64 lanes from -0, butterfly, then the chunk
 * partials summed by the same rules (written recursively here). */
static float t_sum(const float *t, int64_t n, int squares)
{
    if (n <= 4096) {
        float lane[64];
        for (int l = 0; l < 64; l++)
            lane[l] = -0.0f;
        for (int64_t i = 0; i < n; i++)
            lane[i % 64] = squares ? fmaf(t[i], t[i], lane[i % 64]) : lane[i % 64] + t[i];
        for (int s = 32; s >= 1; s /= 2)
            for (int l = 0; l < s; l++)
                lane[l] = lane[l] + lane[l + s];
        return lane[0];
    }
    int64_t nc = (n + 4095) / 4096;
    float *p = malloc((size_t)nc * sizeof *p);
    if (p == NULL)
        bail("out of memory");
    for (int64_t c = 0; c < nc; c++)
        p[c] = t_sum(t + c * 4096, c == nc - 1 ? n - c * 4096 : 4096, squares);
    float r = t_sum(p, nc, 0);
    free(p);
    return r;
}

/* NaN > +Inf > ... > +0 > -0 > ... > -Inf, as a signed integer. */
static int64_t t_rank(float x)
{
    if (isnan(x))
        return INT64_MAX;
    uint32_t u = f32_bits(x);
    return (u >> 31) ? -1 - (int64_t)(u & 0x7fffffffu) : (int64_t)u;
}

static int64_t t_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (t_rank(x[i]) > t_rank(x[best]))
            best = i;
    return best;
}

/* maximum/minimum over the row: NaN if any, else the extreme by rank. */
static float t_extreme(const float *x, int64_t n, int want_max)
{
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            return NAN;
        if (want_max ? t_rank(x[i]) > t_rank(x[best]) : t_rank(x[i]) < t_rank(x[best]))
            best = i;
    }
    return x[best];
}

static float t_reduce(lk_reduce_op op, const float *x, int64_t n)
{
    if (op == LK_REDUCE_SUM)
        return t_sum(x, n, 0);
    if (op == LK_REDUCE_MEAN)
        return t_sum(x, n, 0) / (float)n;
    if (op == LK_REDUCE_MAX || op == LK_REDUCE_MIN)
        return t_extreme(x, n, op == LK_REDUCE_MAX);
    float m = t_sum(x, n, 0) / (float)n;
    float *d = malloc((size_t)n * sizeof *d);
    if (d == NULL)
        bail("out of memory");
    for (int64_t i = 0; i < n; i++)
        d[i] = x[i] - m;
    float ss = t_sum(d, n, 1);
    free(d);
    return op == LK_REDUCE_VAR ? ss / (float)n : ss / (float)(n - 1);
}

/* Section 6, one row; w and b may be NULL. */
static void t_rmsnorm(const float *x, const float *w, int64_t n, float eps, float *y)
{
    float ss = t_sum(x, n, 1);
    float ms = ss / (float)n;
    float r = 1.0f / sqrtf(ms + eps);
    for (int64_t i = 0; i < n; i++) {
        y[i] = x[i] * r;
        if (w)
            y[i] = y[i] * w[i];
    }
}

static void t_layernorm(const float *x, const float *w, const float *b, int64_t n,
                        float eps, float *y)
{
    float m = t_sum(x, n, 0) / (float)n;
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] - m;
    float v = t_sum(y, n, 1) / (float)n;
    float r = 1.0f / sqrtf(v + eps);
    for (int64_t i = 0; i < n; i++) {
        y[i] = (x[i] - m) * r;
        if (w)
            y[i] = y[i] * w[i];
        if (b)
            y[i] = y[i] + b[i];
    }
}

static void t_softmax(const float *x, int64_t n, int log_form, float *y)
{
    float mx = t_extreme(x, n, 1);
    float *e = malloc((size_t)n * sizeof *e);
    if (e == NULL)
        bail("out of memory");
    for (int64_t i = 0; i < n; i++)
        e[i] = lk_ref_expf(x[i] - mx);
    float s = t_sum(e, n, 0);
    float ls = lk_ref_logf(s), rs = 1.0f / s;
    for (int64_t i = 0; i < n; i++)
        y[i] = log_form ? (x[i] - mx) - ls : e[i] * rs;
    free(e);
}

/* ------------------------------------------------------- test harness */

enum kind {
    K_SUM = LK_REDUCE_SUM,
    K_MEAN,
    K_MAX,
    K_MIN,
    K_VAR,
    K_VAR_UNBIASED,
    K_ARGMAX,
    K_RMSNORM,
    K_RMSNORM_W,
    K_LAYERNORM,
    K_LAYERNORM_WB,
    K_SOFTMAX,
    K_LOG_SOFTMAX,
    K_COUNT_
};

static const char *kind_name[K_COUNT_] = {
    [K_SUM] = "SUM", [K_MEAN] = "MEAN", [K_MAX] = "MAX", [K_MIN] = "MIN", [K_VAR] = "VAR",
    [K_VAR_UNBIASED] = "VAR_UNBIASED", [K_ARGMAX] = "ARGMAX", [K_RMSNORM] = "rmsnorm",
    [K_RMSNORM_W] = "rmsnorm+w", [K_LAYERNORM] = "layernorm", [K_LAYERNORM_WB] = "layernorm+w+b",
    [K_SOFTMAX] = "softmax", [K_LOG_SOFTMAX] = "log_softmax",
};

static int is_reduce(enum kind k) { return k <= K_ARGMAX; }

#define PAD_BYTE 0xa5 /* fills every output buffer: untouched bytes must stay */

/* One case: x is rows x n with leading dimension ldx; the result is
 * rows x 1 (ld ldy) for reductions, rows x n (ld ldy) otherwise. */
typedef struct tcase {
    enum kind kind;
    lk_dtype xdt, ydt, wdt;
    int64_t rows, n, ldx, ldy;
    void *x, *w, *b; /* w, b: 1 x n of wdt, for the kinds that use them */
    float eps;
} tcase;

static size_t out_bytes(const tcase *c)
{
    int64_t cols = is_reduce(c->kind) ? 1 : c->n;
    return (size_t)((c->rows - 1) * c->ldy + cols) * dsize(c->ydt);
}

/* Run the kernel under test into out (pre-filled with PAD_BYTE). */
static lk_status run_ref(const tcase *c, void *out)
{
    lk_tensor x = lk_mat_ld(c->x, c->xdt, c->rows, c->n, c->ldx);
    lk_tensor none = lk_mat(NULL, LK_F32, 0, 0);
    if (is_reduce(c->kind)) {
        lk_reduce_args a = {(lk_reduce_op)c->kind, x, lk_mat_ld(out, c->ydt, c->rows, 1, c->ldy)};
        return lk_ref_reduce(&a);
    }
    lk_tensor y = lk_mat_ld(out, c->ydt, c->rows, c->n, c->ldy);
    if (c->kind == K_SOFTMAX || c->kind == K_LOG_SOFTMAX) {
        lk_softmax_args a = {x, y};
        return c->kind == K_SOFTMAX ? lk_ref_softmax(&a) : lk_ref_log_softmax(&a);
    }
    lk_norm_args a = {x, none, none, y, c->eps};
    if (c->kind == K_RMSNORM_W || c->kind == K_LAYERNORM_WB)
        a.weight = lk_mat(c->w, c->wdt, 1, c->n);
    if (c->kind == K_LAYERNORM_WB)
        a.bias = lk_mat(c->b, c->wdt, 1, c->n);
    return c->kind == K_RMSNORM || c->kind == K_RMSNORM_W ? lk_ref_rmsnorm(&a)
                                                         : lk_ref_layernorm(&a);
}

static float *load_row(const void *base, lk_dtype dt, int64_t off, int64_t n)
{
    float *r = malloc((size_t)n * sizeof *r);
    if (r == NULL)
        bail("out of memory");
    for (int64_t i = 0; i < n; i++)
        r[i] = t_load(base, dt, off + i);
    return r;
}

/* The expected output bytes, from the literal version above. */
static void run_literal(const tcase *c, void *out)
{
    int64_t n = c->n;
    float *w = NULL, *b = NULL;
    if (c->kind == K_RMSNORM_W || c->kind == K_LAYERNORM_WB)
        w = load_row(c->w, c->wdt, 0, n);
    if (c->kind == K_LAYERNORM_WB)
        b = load_row(c->b, c->wdt, 0, n);
    float *y = malloc((size_t)n * sizeof *y);
    if (y == NULL)
        bail("out of memory");
    for (int64_t r = 0; r < c->rows; r++) {
        float *x = load_row(c->x, c->xdt, r * c->ldx, n);
        if (c->kind == K_ARGMAX) {
            int64_t i = t_argmax(x, n);
            memcpy((char *)out + 8 * r * c->ldy, &i, 8);
        } else if (is_reduce(c->kind)) {
            t_store(out, c->ydt, r * c->ldy, t_reduce((lk_reduce_op)c->kind, x, n));
        } else {
            switch (c->kind) {
            case K_RMSNORM: case K_RMSNORM_W: t_rmsnorm(x, w, n, c->eps, y); break;
            case K_LAYERNORM: case K_LAYERNORM_WB: t_layernorm(x, w, b, n, c->eps, y); break;
            default: t_softmax(x, n, c->kind == K_LOG_SOFTMAX, y); break;
            }
            for (int64_t i = 0; i < n; i++)
                t_store(out, c->ydt, r * c->ldy + i, y[i]);
        }
        free(x);
    }
    free(y);
    free(w);
    free(b);
}

static void describe(const tcase *c, char *buf, size_t size)
{
    snprintf(buf, size, "%s x %s[%" PRId64 " x %" PRId64 ", ld %" PRId64 "] -> %s (ld %" PRId64 ")",
             kind_name[c->kind], dname(c->xdt), c->rows, c->n, c->ldx, dname(c->ydt), c->ldy);
}

/* Run both and compare every output byte; on a difference, say where.
 * Returns 1 when identical. */
static int same_bits(const tcase *c)
{
    size_t bytes = out_bytes(c);
    unsigned char *got = malloc(bytes), *want = malloc(bytes);
    if (got == NULL || want == NULL)
        bail("out of memory");
    memset(got, PAD_BYTE, bytes);
    memset(want, PAD_BYTE, bytes);
    lk_status st = run_ref(c, got);
    run_literal(c, want);
    int same = st == LK_OK && memcmp(got, want, bytes) == 0;
    if (!same) {
        char what[160];
        describe(c, what, sizeof what);
        diag("%s: status %d %s", what, (int)st, st == LK_OK ? "" : last_error);
        size_t es = dsize(c->ydt);
        for (size_t i = 0; i < bytes; i += es)
            if (memcmp(got + i, want + i, es) != 0) {
                uint64_t g = 0, w = 0;
                memcpy(&g, got + i, es);
                memcpy(&w, want + i, es);
                diag("  first difference at element %zu: got 0x%" PRIx64 ", want 0x%" PRIx64,
                     i / es, g, w);
                break;
            }
    }
    free(got);
    free(want);
    return same;
}

/* A 1 x n (or rows x ld) buffer of dt holding the values gen gives, stored
 * as dt (so that an f32 generator feeds a bf16 tensor). */
static void *make_buf(lk_dtype dt, int64_t elems)
{
    void *p = malloc((size_t)elems * dsize(dt));
    if (p == NULL)
        bail("out of memory");
    return p;
}

/* Row r of the random tensors: 0 uniform in a random range, 1 wide
 * exponents with zeros and subnormals, 2 random bit patterns (NaNs and
 * infinities of every kind). */
static void fill_row(void *x, lk_dtype dt, int64_t off, int64_t n, int style)
{
    float lo = -1.0f, hi = 1.0f;
    if (style == 0) {
        float scale = ldexpf(1.0f, (int)(rng_next() % 17) - 8);
        float shift = (rng_next() & 1) ? 0.0f : rng_uniform(-4.0f, 4.0f) * scale;
        lo = shift - scale;
        hi = shift + scale;
    }
    for (int64_t i = 0; i < n; i++) {
        if (style == 2) {
            uint64_t r = rng_next();
            if (dt == LK_F32) {
                float f = bits_f32((uint32_t)r);
                memcpy((char *)x + 4 * (off + i), &f, 4);
            } else {
                uint16_t h = (uint16_t)r;
                memcpy((char *)x + 2 * (off + i), &h, 2);
            }
            continue;
        }
        float v = style == 0 ? rng_uniform(lo, hi) : rng_wide();
        if (dt == LK_F32)
            memcpy((char *)x + 4 * (off + i), &v, 4);
        else
            t_store(x, dt, off + i, v);
    }
}

/* Padding between rows gets random bits too: it must not be read. */
static void *make_x(lk_dtype dt, int64_t rows, int64_t n, int64_t ld, int first_style)
{
    void *x = make_buf(dt, (rows - 1) * ld + n);
    for (int64_t r = 0; r < rows; r++) {
        fill_row(x, dt, r * ld, n, (first_style + (int)r) % 3);
        if (r + 1 < rows)
            fill_row(x, dt, r * ld + n, ld - n, 2);
    }
    return x;
}

static const lk_dtype float_types[3] = {LK_F32, LK_BF16, LK_F16};

/* ---------------------------------------------------- 1. random bits */

static void test_random_bits(void)
{
    static const int64_t lengths[] = {1,    2,    63,   64,   65,
                                      4095, 4096, 4097, 3 * 4096 + 17, 64 * 4096 + 5};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        int64_t n = lengths[li];
        int big = n > 4097;
        int64_t rows = big ? 2 : 3;
        for (int k = K_SUM; k < K_COUNT_; k++) {
            int all = 1, cases = 0;
            /* every dtype pair for short rows; three pairs for long ones */
            for (int xi = 0; xi < 3; xi++)
                for (int yi = 0; yi < 3; yi++) {
                    if (big && yi != (xi + (int)li) % 3)
                        continue;
                    tcase c = {0};
                    c.kind = (enum kind)k;
                    c.xdt = float_types[xi];
                    c.ydt = k == K_ARGMAX ? LK_I64 : float_types[yi];
                    c.wdt = float_types[rng_next() % 3];
                    c.rows = rows;
                    c.n = n;
                    c.ldx = n + (int64_t)(rng_next() % 3);
                    c.ldy = (is_reduce(c.kind) ? 1 : n) + (int64_t)(rng_next() % 3);
                    c.eps = (rng_next() & 1) ? 1e-5f : 1e-6f;
                    c.x = make_x(c.xdt, rows, n, c.ldx, (int)(rng_next() % 3));
                    c.w = make_buf(c.wdt, n);
                    c.b = make_buf(c.wdt, n);
                    for (int64_t i = 0; i < n; i++) {
                        t_store(c.w, c.wdt, i, rng_uniform(0.5f, 1.5f));
                        t_store(c.b, c.wdt, i, rng_uniform(-1.0f, 1.0f));
                    }
                    all &= same_bits(&c);
                    cases++;
                    free(c.x);
                    free(c.w);
                    free(c.b);
                }
            ok(all, "bits: %s, n = %" PRId64 ", %d dtype pairs x %" PRId64 " rows",
               kind_name[k], n, cases, rows);
        }
    }
}

/* ----------------------------------------------------- 2. edge values */

/* Reduce one f32 row; the f32 result's bits, or the index for ARGMAX. */
static uint32_t reduce_f32(lk_reduce_op op, const float *x, int64_t n, int64_t *index)
{
    unsigned char out[8];
    memset(out, PAD_BYTE, sizeof out);
    lk_reduce_args a = {op, lk_mat(x, LK_F32, 1, n),
                        lk_mat(out, op == LK_REDUCE_ARGMAX ? LK_I64 : LK_F32, 1, 1)};
    if (lk_ref_reduce(&a) != LK_OK)
        return 0xdeadbeefu;
    if (op == LK_REDUCE_ARGMAX) {
        memcpy(index, out, 8);
        return 0;
    }
    return t_bits(out, LK_F32);
}

/* The same row through every op and output dtype, against the literal
 * version (the row is the weight and the bias too). */
static int edge_matches_literal(const float *vals, int64_t n)
{
    int all = 1;
    for (int k = K_SUM; k < K_COUNT_; k++)
        for (int yi = 0; yi < 3; yi++) {
            tcase c = {0};
            c.kind = (enum kind)k;
            c.xdt = LK_F32;
            c.ydt = k == K_ARGMAX ? LK_I64 : float_types[yi];
            c.wdt = LK_F32;
            c.rows = 1;
            c.n = c.ldx = n;
            c.ldy = is_reduce(c.kind) ? 1 : n;
            c.eps = 1e-5f;
            c.x = c.w = c.b = (void *)(uintptr_t)vals;
            all &= same_bits(&c);
        }
    return all;
}

/* SUM, MAX, MIN and ARGMAX of an f32 row against stated values. */
static void check_edge_row(const char *what, const float *x, int64_t n, uint32_t sum,
                           uint32_t mx, uint32_t mn, int64_t amax)
{
    int64_t got_i = -1;
    uint32_t s = reduce_f32(LK_REDUCE_SUM, x, n, NULL);
    uint32_t m1 = reduce_f32(LK_REDUCE_MAX, x, n, NULL);
    uint32_t m2 = reduce_f32(LK_REDUCE_MIN, x, n, NULL);
    reduce_f32(LK_REDUCE_ARGMAX, x, n, &got_i);
    ok(s == sum, "%s: SUM bits 0x%08" PRIx32 " (want 0x%08" PRIx32 ")", what, s, sum);
    ok(m1 == mx, "%s: MAX bits 0x%08" PRIx32 " (want 0x%08" PRIx32 ")", what, m1, mx);
    ok(m2 == mn, "%s: MIN bits 0x%08" PRIx32 " (want 0x%08" PRIx32 ")", what, m2, mn);
    ok(got_i == amax, "%s: ARGMAX %" PRId64 " (want %" PRId64 ")", what, got_i, amax);
    ok(edge_matches_literal(x, n), "%s: every op and output dtype matches the literal version",
       what);
}

static void edge_zeros(void)
{
    static const int64_t lengths[] = {1, 64, 65, 4097};
    float x[4097];
    for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
        int64_t n = lengths[i];
        char what[64];
        for (int64_t j = 0; j < n; j++)
            x[j] = -0.0f;
        snprintf(what, sizeof what, "all -0, n = %" PRId64, n);
        check_edge_row(what, x, n, 0x80000000u, 0x80000000u, 0x80000000u, 0);
        uint32_t mean = reduce_f32(LK_REDUCE_MEAN, x, n, NULL);
        ok(mean == 0x80000000u, "%s: MEAN is -0 (0x%08" PRIx32 ")", what, mean);
    }
    x[0] = -0.0f;
    x[1] = 0.0f;
    check_edge_row("{-0, +0}", x, 2, 0x00000000u, 0x00000000u, 0x80000000u, 1);
    x[0] = 0.0f;
    x[1] = -0.0f;
    check_edge_row("{+0, -0}", x, 2, 0x00000000u, 0x00000000u, 0x80000000u, 0);
    for (int j = 0; j < 70; j++)
        x[j] = (float)(j % 7);
    check_edge_row("ties of 6", x, 70, f32_bits(t_sum(x, 70, 0)), f32_bits(6.0f), 0u, 6);
}

static void edge_nan_inf(void)
{
    float x[100];
    for (int j = 0; j < 100; j++)
        x[j] = rng_uniform(-1.0f, 1.0f);
    x[40] = INFINITY;
    x[17] = bits_f32(0x7f800001u); /* signalling, payload 1 */
    x[60] = bits_f32(0xffc12345u); /* negative, quiet, payload */
    check_edge_row("NaNs at 17 and 60, +Inf at 40", x, 100, 0x7fc00000u, 0x7fc00000u,
                   0x7fc00000u, 17);
    x[17] = x[60] = 0.5f;
    x[70] = -INFINITY;
    check_edge_row("+Inf at 40, -Inf at 70", x, 100, 0x7fc00000u, 0x7f800000u, 0xff800000u,
                   40);
    x[70] = 0.25f;
    check_edge_row("+Inf at 40", x, 100, 0x7f800000u, 0x7f800000u,
                   f32_bits(t_extreme(x, 100, 0)), 40);

    /* NaNs in bf16 and f16 inputs: the first NaN wins ARGMAX, and a NaN
     * result is stored canonical in every output dtype */
    static const uint16_t hb[6] = {0x3f80, 0x7f80, 0xffc1, 0x7f81, 0x0000, 0x8000};
    static const uint16_t hh[6] = {0x3c00, 0x7c00, 0xfe01, 0x7c01, 0x0000, 0x8000};
    for (int which = 0; which < 2; which++) {
        lk_dtype xdt = which ? LK_F16 : LK_BF16;
        const uint16_t *h = which ? hh : hb;
        int64_t i = -1;
        lk_reduce_args a = {LK_REDUCE_ARGMAX, lk_mat(h, xdt, 1, 6), lk_mat(&i, LK_I64, 1, 1)};
        lk_status st = lk_ref_reduce(&a);
        ok(st == LK_OK && i == 2, "%s NaNs: ARGMAX is the first NaN (%" PRId64 ")",
           dname(xdt), i);
        for (int di = 0; di < 3; di++) {
            unsigned char out[4];
            uint32_t want = di == 0 ? 0x7fc00000u : di == 1 ? 0x7fc0u : 0x7e00u;
            a.op = LK_REDUCE_MAX;
            a.y = lk_mat(out, float_types[di], 1, 1);
            st = lk_ref_reduce(&a);
            uint32_t got = t_bits(out, float_types[di]);
            ok(st == LK_OK && got == want, "%s NaNs: MAX stored as the canonical %s NaN (0x%" PRIx32 ")",
               dname(xdt), dname(float_types[di]), got);
        }
        a.op = LK_REDUCE_ARGMAX; /* {+0, -0}: the first, +0 */
        a.x = lk_mat(h + 4, xdt, 1, 2);
        a.y = lk_mat(&i, LK_I64, 1, 1);
        st = lk_ref_reduce(&a);
        ok(st == LK_OK && i == 0, "%s {+0, -0}: ARGMAX 0 (%" PRId64 ")", dname(xdt), i);
    }
}

static void edge_subnormals(void)
{
    float x[4097];
    /* 100 x 2^-149 sums to 100 x 2^-149 exactly */
    for (int j = 0; j < 100; j++)
        x[j] = 0x1p-149f;
    check_edge_row("100 x 2^-149", x, 100, 100u, 1u, 1u, 0);
    ok(reduce_f32(LK_REDUCE_MEAN, x, 100, NULL) == 1u, "100 x 2^-149: MEAN is 2^-149");
    ok(reduce_f32(LK_REDUCE_VAR, x, 100, NULL) == 0u, "100 x 2^-149: VAR is +0");
    /* 4097 terms, two levels, every partial a small multiple of 2^-149:
     * exact, so 2049 x 3 - 2048 x 2 = 2051 units of 2^-149 */
    for (int j = 0; j < 4097; j++)
        x[j] = (j & 1) ? -0x1p-148f : 0x1.8p-148f;
    check_edge_row("alternating 3 and -2 times 2^-149", x, 4097, 2051u, 3u, 0x80000002u, 0);

    /* bf16 subnormal inputs widen exactly: 64 x 2^-133 = 2^-127 */
    uint16_t h[64];
    for (int j = 0; j < 64; j++)
        h[j] = 0x0001;
    float y = -1.0f;
    lk_reduce_args a = {LK_REDUCE_SUM, lk_mat(h, LK_BF16, 1, 64), lk_mat(&y, LK_F32, 1, 1)};
    lk_status st = lk_ref_reduce(&a);
    ok(st == LK_OK && f32_bits(y) == 0x00400000u,
       "64 bf16 subnormals 2^-133 sum to 2^-127 (0x%08" PRIx32 ")", f32_bits(y));
}

static void edge_overflow(void)
{
    float x[64];
    x[0] = FLT_MAX;
    x[1] = FLT_MAX;
    check_edge_row("{FLT_MAX, FLT_MAX}", x, 2, 0x7f800000u, f32_bits(FLT_MAX), f32_bits(FLT_MAX),
                   0);
    x[1] = -FLT_MAX;
    check_edge_row("{FLT_MAX, -FLT_MAX}", x, 2, 0u, f32_bits(FLT_MAX), f32_bits(-FLT_MAX), 0);
    ok(reduce_f32(LK_REDUCE_VAR, x, 2, NULL) == 0x7f800000u,
       "{FLT_MAX, -FLT_MAX}: VAR overflows to +Inf (squares of d = +-FLT_MAX)");
    for (int j = 0; j < 64; j++)
        x[j] = 0x1p121f; /* 64 x 2^121 = 2^127 < FLT_MAX */
    check_edge_row("64 x 2^121", x, 64, f32_bits(0x1p127f), f32_bits(0x1p121f),
                   f32_bits(0x1p121f), 0);

    /* f16 output: 2 x 40000 = 80000 rounds to Inf in binary16 */
    float v[2] = {40000.0f, 40000.0f};
    uint16_t y = 0;
    lk_reduce_args a = {LK_REDUCE_SUM, lk_mat(v, LK_F32, 1, 2), lk_mat(&y, LK_F16, 1, 1)};
    lk_status st = lk_ref_reduce(&a);
    ok(st == LK_OK && y == 0x7c00, "sum 80000 stored as f16 is +Inf (0x%04x)", y);
}

/* Variance of one element: 0 / 1 = +0, and the unbiased 0 / 0 = NaN. */
static void edge_one_element_variance(void)
{
    for (int di = 0; di < 3; di++) {
        lk_dtype dt = float_types[di];
        float v = 3.0f;
        unsigned char out[4];
        lk_reduce_args a = {LK_REDUCE_VAR_UNBIASED, lk_mat(&v, LK_F32, 1, 1),
                            lk_mat(out, dt, 1, 1)};
        uint32_t want = dt == LK_F32 ? 0x7fc00000u : dt == LK_BF16 ? 0x7fc0u : 0x7e00u;
        lk_status st = lk_ref_reduce(&a);
        uint32_t got = t_bits(out, dt);
        ok(st == LK_OK && got == want, "VAR_UNBIASED with n = 1 is NaN (%s 0x%" PRIx32 ")",
           dname(dt), got);
        a.op = LK_REDUCE_VAR;
        st = lk_ref_reduce(&a);
        got = t_bits(out, dt);
        ok(st == LK_OK && got == 0, "VAR with n = 1 is +0 (%s 0x%" PRIx32 ")", dname(dt), got);
    }
}

static void edge_softmax(void)
{
    /* one element: exp(0) / exp(0) = 1 and 0 - log(1) = +0 */
    float v = -7.5f, y = 0.0f;
    lk_softmax_args a = {lk_mat(&v, LK_F32, 1, 1), lk_mat(&y, LK_F32, 1, 1)};
    lk_status st = lk_ref_softmax(&a);
    ok(st == LK_OK && y == 1.0f, "softmax of one element is 1 (%a)", (double)y);
    st = lk_ref_log_softmax(&a);
    ok(st == LK_OK && f32_bits(y) == 0u, "log-softmax of one element is +0 (%a)", (double)y);

    /* -Inf entries of a finite row get exactly +0 */
    float x[5] = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f}, ys[5];
    lk_softmax_args b = {lk_mat(x, LK_F32, 1, 5), lk_mat(ys, LK_F32, 1, 5)};
    st = lk_ref_softmax(&b);
    ok(st == LK_OK && f32_bits(ys[1]) == 0u && f32_bits(ys[3]) == 0u,
       "softmax gives -Inf entries +0");
    ok(edge_matches_literal(x, 5), "row with -Inf: every op and output dtype matches");
}

static void test_edges(void)
{
    edge_zeros();
    edge_nan_inf();
    edge_subnormals();
    edge_overflow();
    edge_one_element_variance();
    edge_softmax();
}

/* --------------------------------------------------- 3. accuracy */

/* Roundings on the deepest path of the lane sum of n terms: per level at
 * most 63 lane additions (the first lands on -0, exactly) and 6 in the
 * butterfly. */
static double depth(int64_t n)
{
    int l = 1;
    while (n > 4096) {
        n = (n + 4095) / 4096;
        l++;
    }
    return 69.0 * l;
}

static double gam(double k) { return k * U / (1.0 - k * U); }

/* One f32 row with its float64 facts, and the worst error / bound ratio
 * seen per check. */
enum { A_SUM, A_MEAN, A_VAR, A_VARU, A_RMS, A_LN, A_SM, A_LSM, A_COUNT_ };
static const char *acc_name[A_COUNT_] = {"SUM", "MEAN", "VAR", "VAR_UNBIASED",
                                         "rmsnorm", "layernorm", "softmax", "log_softmax"};

typedef struct acc_row {
    int64_t n;
    double h;            /* depth(n) */
    const float *x, *w, *b;
    float *y;            /* n results */
    double S, A, Q, M, V; /* sum, sum |x|, sum x^2, mean, population variance */
    double dm, ev;        /* bounds on |MEAN - M| and |VAR - V| */
    double worst[A_COUNT_];
} acc_row;

static void note(acc_row *r, int check, double err, double bound)
{
    double q = isnan(err) ? INFINITY : err == 0 ? 0.0 : err / bound; /* bound 0: Inf */
    if (q > r->worst[check])
        r->worst[check] = q;
}

static void acc_facts(acc_row *r)
{
    r->S = r->A = r->Q = r->V = 0;
    for (int64_t i = 0; i < r->n; i++) {
        r->S += r->x[i];
        r->A += fabs((double)r->x[i]);
        r->Q += (double)r->x[i] * r->x[i];
    }
    r->M = r->S / r->n;
    for (int64_t i = 0; i < r->n; i++)
        r->V += ((double)r->x[i] - r->M) * ((double)r->x[i] - r->M);
    r->V /= r->n;
}

static double reduce1(lk_reduce_op op, const acc_row *r)
{
    lk_reduce_args a = {op, lk_mat(r->x, LK_F32, 1, r->n), lk_mat(r->y, LK_F32, 1, 1)};
    if (lk_ref_reduce(&a) != LK_OK)
        return NAN;
    return r->y[0];
}

static void acc_reduce(acc_row *r)
{
    double h = r->h, n = (double)r->n;
    /* SUM: each term through at most h roundings: |s - S| <= gamma_h sum|x| */
    note(r, A_SUM, fabs(reduce1(LK_REDUCE_SUM, r) - r->S), gam(h) * r->A);
    /* MEAN: one more rounding ((float)n is exact for n < 2^24) */
    r->dm = 1.01 * (gam(h) * r->A / n * (1 + U) + U * fabs(r->M));
    note(r, A_MEAN, fabs(reduce1(LK_REDUCE_MEAN, r) - r->M), r->dm);
    /* VAR: sum (x_i - m)^2 = n V + n (M - m)^2 exactly; d_i and the square
     * inside fma add two roundings, the division one:
     * |v - V| <= gamma_{h+3} (V + dm^2) + dm^2 */
    double dm2 = r->dm * r->dm;
    r->ev = 1.01 * (gam(h + 3) * (r->V + dm2) + dm2);
    note(r, A_VAR, fabs(reduce1(LK_REDUCE_VAR, r) - r->V), r->ev);
    if (r->n > 1) {
        double c = n / (n - 1), Vu = r->V * c;
        note(r, A_VARU, fabs(reduce1(LK_REDUCE_VAR_UNBIASED, r) - Vu),
             1.01 * (gam(h + 3) * (Vu + c * dm2) + c * dm2));
    }
}

static void acc_norms(acc_row *r, float eps)
{
    lk_tensor none = lk_mat(NULL, LK_F32, 0, 0);
    lk_norm_args a = {lk_mat(r->x, LK_F32, 1, r->n), lk_mat(r->w, LK_F32, 1, r->n), none,
                      lk_mat(r->y, LK_F32, 1, r->n), eps};
    /* RMSNorm: ss has relative error gamma_h (positive terms); ms and
     * ms + eps one rounding each; sqrt halves that and adds one; 1/ one;
     * x * r and * w one each: |y - Y| <= (gamma_{h+2} / 2 + 4u) |Y| */
    int ok_run = lk_ref_rmsnorm(&a) == LK_OK;
    double R = 1.0 / sqrt(r->Q / r->n + (double)eps);
    for (int64_t i = 0; i < r->n; i++) {
        double Y = (double)r->x[i] * R * r->w[i];
        double err = ok_run ? fabs(r->y[i] - Y) : NAN;
        note(r, A_RMS, err, 1.01 * (gam(r->h + 2) / 2 + 4 * U) * fabs(Y) + 0x1p-149);
    }
    /* LayerNorm: r has relative error rho <= a/2 + 2u, a = ev / (V + eps)
     * + u; x_i - m is x_i - M off by at most dm before its rounding; then
     * * r, * w, + b.  e1 = |w| (|x_i - M| R (rho + 3u) + dm R (1 + rho + 3u)),
     * |y - Y| <= e1 + u (|Y| + e1) */
    a.bias = lk_mat(r->b, LK_F32, 1, r->n);
    ok_run = lk_ref_layernorm(&a) == LK_OK;
    double Rl = 1.0 / sqrt(r->V + (double)eps);
    double rho = (r->ev / (r->V + (double)eps) + U) / 2 + 2 * U;
    for (int64_t i = 0; i < r->n; i++) {
        double d = (double)r->x[i] - r->M, Y = d * Rl * r->w[i] + r->b[i];
        double e1 = fabs((double)r->w[i]) *
                    (fabs(d) * Rl * (rho + 3 * U) + r->dm * Rl * (1 + rho + 3 * U));
        double err = ok_run ? fabs(r->y[i] - Y) : NAN;
        note(r, A_LN, err, 1.01 * (e1 + U * (fabs(Y) + e1)) + 0x1p-149);
    }
}

/* Softmax: t_i = x_i - mx (error u |t_i|); E_i the measured relative error
 * of the library's exp at t_i (section 7 bounds it); the sum then has
 * relative error sigma <= max (E_j + u |t_j|) + gamma_h, and
 * |y_i / Y_i - 1| <= E_i + u |t_i| + sigma + 2u (r = 1 / s and e_i * r
 * round once each).  Log-softmax:
 * |y_i - Y_i| <= u |t_i| + sigma + |ls - log(s)| + u |Y_i|, with the
 * measured error of the library's log at the kernel's s. */
static void acc_softmax(acc_row *r, double *exp_err, double *log_err)
{
    int64_t n = r->n;
    float mx = t_extreme(r->x, n, 1);
    float *e = malloc((size_t)n * sizeof *e);
    double *E = malloc((size_t)n * sizeof *E);
    if (e == NULL || E == NULL)
        bail("out of memory");
    double sig = 0, Se = 0;
    for (int64_t i = 0; i < n; i++) {
        float t = r->x[i] - mx;
        e[i] = lk_ref_expf(t);
        E[i] = fabs(e[i] / exp((double)t) - 1);
        *exp_err = fmax(*exp_err, E[i]);
        sig = fmax(sig, E[i] + U * fabs(t));
        Se += exp((double)r->x[i] - mx);
    }
    sig += gam(r->h);
    float s = t_sum(e, n, 0); /* the kernel's s, as the bits tests show */
    double le = fabs(lk_ref_logf(s) - log((double)s));
    *log_err = fmax(*log_err, le);

    lk_softmax_args a = {lk_mat(r->x, LK_F32, 1, n), lk_mat(r->y, LK_F32, 1, n)};
    int ok_run = lk_ref_softmax(&a) == LK_OK;
    for (int64_t i = 0; i < n; i++) {
        double t = (double)r->x[i] - mx, Y = exp(t) / Se;
        double err = ok_run ? fabs(r->y[i] - Y) : NAN;
        note(r, A_SM, err, 1.01 * (E[i] + U * fabs(t) + sig + 2 * U) * Y + 0x1p-149);
    }
    ok_run = lk_ref_log_softmax(&a) == LK_OK;
    for (int64_t i = 0; i < n; i++) {
        double t = (double)r->x[i] - mx, Y = t - log(Se);
        double err = ok_run ? fabs(r->y[i] - Y) : NAN;
        note(r, A_LSM, err, 1.01 * (U * fabs(t) + sig + le + U * fabs(Y)) + 0x1p-149);
    }
    free(e);
    free(E);
}

static void test_accuracy(void)
{
    static const int64_t lengths[] = {1,    2,    63,   64,   65,
                                      4095, 4096, 4097, 3 * 4096 + 17, 64 * 4096 + 5};
    for (size_t li = 0; li < sizeof lengths / sizeof *lengths; li++) {
        int64_t n = lengths[li];
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        float *w = malloc((size_t)n * sizeof *w), *b = malloc((size_t)n * sizeof *b);
        if (!x || !y || !w || !b)
            bail("out of memory");
        acc_row r = {.n = n, .h = depth(n), .x = x, .w = w, .b = b, .y = y};
        double exp_err = 0, log_err = 0;
        /* uniform around 0, then around an offset (the two-pass variance
         * has something to cancel), then a wider spread for softmax */
        for (int trial = 0; trial < 3; trial++) {
            float off = trial == 0 ? 0.0f : rng_uniform(-8.0f, 8.0f);
            float scale = trial == 2 ? 8.0f : 1.0f;
            for (int64_t i = 0; i < n; i++) {
                x[i] = off + scale * rng_uniform(-1.0f, 1.0f);
                w[i] = rng_uniform(0.5f, 1.5f);
                b[i] = rng_uniform(-1.0f, 1.0f);
            }
            acc_facts(&r);
            acc_reduce(&r);
            acc_norms(&r, 1e-5f);
            acc_softmax(&r, &exp_err, &log_err);
        }
        for (int k = 0; k < A_COUNT_; k++)
            if (k != A_VARU || n > 1)
                ok(r.worst[k] <= 1, "accuracy n = %" PRId64 ": %s within its bound (worst %.3g of it)",
                   n, acc_name[k], r.worst[k]);
        diag("n = %" PRId64 ": largest relative error of exp seen %.3g, absolute error of log %.3g",
             n, exp_err, log_err);
        free(x);
        free(y);
        free(w);
        free(b);
    }
}

/* ------------------------------------- 4. three levels (SUM only) */

static void test_three_levels(void)
{
    const int64_t n = 4096 * 4096 + 3;
    if (getenv("LOCKSTEP_TEST_QUICK") != NULL) {
        skip(2, "LOCKSTEP_TEST_QUICK is set: no 16M-element sum");
        return;
    }
    float *x = malloc((size_t)n * sizeof *x);
    if (x == NULL) {
        skip(2, "no memory for a 16M-element row");
        return;
    }
    double S = 0, A = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_uniform(-1.0f, 1.0f) + 0.25f;
        S += x[i];
        A += fabs((double)x[i]);
    }
    float y = 0;
    lk_reduce_args a = {LK_REDUCE_SUM, lk_mat(x, LK_F32, 1, n), lk_mat(&y, LK_F32, 1, 1)};
    lk_status st = lk_ref_reduce(&a);
    float want = t_sum(x, n, 0);
    ok(st == LK_OK && f32_bits(y) == f32_bits(want),
       "bits: SUM, n = 4096^2 + 3 (three levels): 0x%08" PRIx32 " vs literal 0x%08" PRIx32,
       f32_bits(y), f32_bits(want));
    double h = depth(n);
    ok(fabs(y - S) <= gam(h) * A, "accuracy n = 4096^2 + 3: SUM error %.3g <= gamma_%g sum|x| = %.3g",
       fabs(y - S), h, gam(h) * A);
    free(x);
}

/* ------------------------------------------------- 5. no row buffer */

/* A row too long for any row buffer (its size overflows size_t, so no
 * allocator is even asked): every kernel returns LK_ERR_OUT_OF_MEMORY
 * with a message and writes nothing.  The data is never read. */
static void test_out_of_memory(void)
{
    const int64_t n = INT64_C(1) << 62;
    float xs[4] = {1, 2, 3, 4}, ys[4];
    lk_tensor x = lk_mat(xs, LK_F32, 1, n), y = lk_mat(ys, LK_F32, 1, n);
    lk_tensor none = lk_mat(NULL, LK_F32, 0, 0);
    for (int k = K_SUM; k <= K_LOG_SOFTMAX; k++) {
        lk_status st;
        memset(ys, PAD_BYTE, sizeof ys);
        last_error[0] = '\0';
        if (is_reduce((enum kind)k)) {
            lk_reduce_args a = {(lk_reduce_op)k, x,
                                lk_mat(ys, k == K_ARGMAX ? LK_I64 : LK_F32, 1, 1)};
            st = lk_ref_reduce(&a);
        } else if (k == K_SOFTMAX || k == K_LOG_SOFTMAX) {
            lk_softmax_args a = {x, y};
            st = k == K_SOFTMAX ? lk_ref_softmax(&a) : lk_ref_log_softmax(&a);
        } else {
            lk_norm_args a = {x, none, none, y, 1e-5f};
            if (k == K_RMSNORM_W || k == K_LAYERNORM_WB)
                a.weight = lk_mat(xs, LK_F32, 1, n);
            if (k == K_LAYERNORM_WB)
                a.bias = lk_mat(xs, LK_F32, 1, n);
            st = k <= K_RMSNORM_W ? lk_ref_rmsnorm(&a) : lk_ref_layernorm(&a);
        }
        int untouched = 1;
        for (size_t i = 0; i < sizeof ys; i++)
            untouched &= ((unsigned char *)ys)[i] == PAD_BYTE;
        ok(st == LK_ERR_OUT_OF_MEMORY && untouched && last_error[0] != '\0',
           "%s: a row of 2^62 elements is LK_ERR_OUT_OF_MEMORY, nothing written (\"%s\")",
           kind_name[k], last_error);
    }
}

int main(void)
{
    ref_host_install();
    rng_state = tap_seed();

    test_random_bits();
    test_edges();
    test_accuracy();
    test_three_levels();
    test_out_of_memory();
    done_testing();
}
