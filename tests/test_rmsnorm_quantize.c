/* Lockstep tests: lk_rmsnorm_quantize is lk_rmsnorm into f32 then
 * lk_quantize_act, bit for bit, on every device (the decode widths of
 * BitNet-2B, rows past the CUDA register kernel, NaN, Inf and zero rows,
 * eps 0), and its argument errors leave the outputs untouched.  The
 * comparison with the reference is in the contract matrix. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tests/devices.h"

typedef struct tcase {
    int64_t rows, cols;
    lk_dtype xd, wd; /* wd 0: no weight */
    float eps;
} tcase;

static const tcase cases[] = {
    {1, 2560, LK_F32, LK_F32, 1e-5f},  {3, 6912, LK_F32, LK_BF16, 1e-5f},
    {4, 2560, LK_BF16, LK_F32, 1e-6f}, {5, 1000, LK_F32, 0, 0.0f},
    {4, 4097, LK_F32, LK_F32, 1e-5f},  {2, 8192, LK_BF16, LK_BF16, 1e-5f},
    {3, 20000, LK_F32, LK_F32, 1e-5f}, {7, 33, LK_F32, LK_F32, 0.0f},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static uint64_t rng;

static float rnd(void) /* [-4, 4) */
{
    return (float)((double)(tap_rand(&rng) >> 40) / (double)(1ull << 21) - 4.0);
}

static void run_case(lk_device *d, lk_queue *q, const tcase *c, int ci)
{
    const int64_t R = c->rows, K = c->cols;
    const size_t n = (size_t)(R * K);
    float *v = malloc(n * sizeof(float));
    float *wv = malloc((size_t)K * sizeof(float));
    void *xh = malloc(n * 4), *wh = malloc((size_t)K * 4);
    int8_t *q1 = malloc(n), *q2 = malloc(n);
    float s1[8], s2[8];
    if (!v || !wv || !xh || !wh || !q1 || !q2)
        bail("out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = rnd();
    for (int64_t i = 0; i < K; i++)
        wv[i] = rnd();
    /* row 1: a NaN and an Inf; row 2: zeros (with eps 0: 0 * Inf = NaN);
     * row 3: one huge value (the rest quantise to 0) */
    if (R > 1) {
        v[K + K / 2] = __builtin_nanf("");
        v[K + 1] = __builtin_inff();
    }
    if (R > 2)
        for (int64_t i = 0; i < K; i++)
            v[2 * K + i] = i % 2 ? -0.0f : 0.0f;
    if (R > 3)
        v[3 * K + K - 1] = 3e38f;
    test_fill(xh, c->xd, v, n);
    test_fill(wh, c->wd ? c->wd : LK_F32, wv, (size_t)K);

    dbuf xb = {0}, wb = {0}, yb = {0}, q1b = {0}, q2b = {0}, s1b = {0}, s2b = {0};
    int okb = dbuf_up(d, q, &xb, xh, n * test_esize(c->xd)) &&
              (!c->wd || dbuf_up(d, q, &wb, wh, (size_t)K * test_esize(c->wd))) &&
              dbuf_up(d, q, &yb, NULL, n * 4) && dbuf_up(d, q, &q1b, NULL, n) &&
              dbuf_up(d, q, &q2b, NULL, n) &&
              dbuf_up(d, q, &s1b, NULL, (size_t)R * 4) && dbuf_up(d, q, &s2b, NULL, (size_t)R * 4);
    if (!okb)
        bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
    lk_tensor x = lk_mat(xb.p, c->xd, R, K), w = lk_mat(wb.p, c->wd, 1, K);
    lk_tensor y = lk_mat(yb.p, LK_F32, R, K);
    lk_tensor t1 = lk_mat(q1b.p, LK_I8, R, K), t2 = lk_mat(q2b.p, LK_I8, R, K);
    lk_tensor sc1 = lk_mat(s1b.p, LK_F32, R, 1), sc2 = lk_mat(s2b.p, LK_F32, R, 1);
    const lk_tensor *wp = c->wd ? &w : NULL;

    lk_status st = lk_rmsnorm_quantize(q, &x, wp, c->eps, &t1, &sc1);
    if (st == LK_ERR_UNSUPPORTED) {
        skip(1, "[%d] %lldx%lld on %s: unsupported (%s)", ci, (long long)R, (long long)K,
             lk_device_name(d), lk_last_error());
    } else {
        lk_status st2 = lk_rmsnorm(q, &x, wp, c->eps, &y);
        lk_status st3 = lk_quantize_act(q, &y, &t2, &sc2);
        int good = st == LK_OK && st2 == LK_OK && st3 == LK_OK && dbuf_down(q, q1, &q1b) &&
                   dbuf_down(q, q2, &q2b) && dbuf_down(q, s1, &s1b) && dbuf_down(q, s2, &s2b);
        int same = good && !memcmp(q1, q2, n) && !memcmp(s1, s2, (size_t)R * 4);
        ok(same, "[%d] %s w:%s eps=%g %lldx%lld on %s: fused == rmsnorm + quantize_act", ci,
           c->xd == LK_F32 ? "f32" : "bf16", !c->wd ? "none" : c->wd == LK_F32 ? "f32" : "bf16",
           (double)c->eps, (long long)R, (long long)K, lk_device_name(d));
        if (!good)
            diag("  status %s / %s / %s: %s", lk_status_string(st), lk_status_string(st2),
                 lk_status_string(st3), lk_last_error());
        else if (!same)
            for (int64_t r = 0; r < R; r++) {
                uint32_t a, b;
                memcpy(&a, &s1[r], 4);
                memcpy(&b, &s2[r], 4);
                if (a != b || memcmp(q1 + r * K, q2 + r * K, (size_t)K))
                    diag("  row %lld: scale %08x vs %08x%s", (long long)r, a, b,
                         memcmp(q1 + r * K, q2 + r * K, (size_t)K) ? ", q differs" : "");
            }
    }
    dbuf *all[] = {&xb, &wb, &yb, &q1b, &q2b, &s1b, &s2b};
    for (int i = 0; i < 7; i++)
        if (all[i]->p)
            lk_free(d, all[i]->p);
    free(v), free(wv), free(xh), free(wh), free(q1), free(q2);
}

/* Argument errors (host memory: the reference device). */
static void test_errors(lk_queue *q)
{
    float x[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, w[4] = {1, 1, 1, 1};
    float s[3] = {-1, -1, -1};
    int8_t xq[12];
    memset(xq, 0x5a, sizeof xq);
    lk_tensor tx = lk_mat(x, LK_F32, 3, 4), tw = lk_mat(w, LK_F32, 1, 4);
    lk_tensor tq = lk_mat(xq, LK_I8, 3, 4), ts = lk_mat(s, LK_F32, 3, 1);
    lk_tensor bad;
    int untouched;

#define UNTOUCHED() (xq[0] == 0x5a && xq[11] == 0x5a && s[0] == -1.0f && s[2] == -1.0f)
    bad = lk_mat(s, LK_F32, 2, 1);
    ok(lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &tq, &bad) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "scale rows != x rows: LK_ERR_BAD_SHAPE, nothing written");
    bad = lk_mat(xq, LK_I8, 3, 3);
    ok(lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &bad, &ts) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "xq cols != x cols: LK_ERR_BAD_SHAPE");
    bad = lk_mat(w, LK_F32, 1, 3);
    ok(lk_rmsnorm_quantize(q, &tx, &bad, 1e-5f, &tq, &ts) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "weight cols != x cols: LK_ERR_BAD_SHAPE");
    bad = lk_mat(xq, LK_I8, 3, 4);
    ok(lk_rmsnorm_quantize(q, &bad, &tw, 1e-5f, &tq, &ts) == LK_ERR_BAD_DTYPE && UNTOUCHED(),
       "x i8: LK_ERR_BAD_DTYPE");
    lk_tensor tq2 = lk_mat(x, LK_I8, 3, 4);
    ok(lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &tq2, &ts) == LK_ERR_ALIASING && UNTOUCHED(),
       "xq overlapping x: LK_ERR_ALIASING");
    int32_t i32[12];
    bad = lk_mat(i32, LK_I32, 3, 4);
    ok(lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &bad, &ts) == LK_ERR_BAD_DTYPE && UNTOUCHED(),
       "xq i32: LK_ERR_BAD_DTYPE");
    ok(lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &tq, NULL) == LK_ERR_NULL_POINTER && UNTOUCHED(),
       "scale NULL: LK_ERR_NULL_POINTER");
    bad = lk_mat(x, LK_F32, 3, 0);
    lk_tensor q0 = lk_mat(xq, LK_I8, 3, 0);
    ok(lk_rmsnorm_quantize(q, &bad, NULL, 1e-5f, &q0, &ts) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "x cols 0: LK_ERR_BAD_SHAPE (as lk_quantize_act)");
    bad = lk_mat(x, LK_F32, 0, 4);
    lk_tensor qe = lk_mat(xq, LK_I8, 0, 4), se = lk_mat(s, LK_F32, 0, 1);
    ok(lk_rmsnorm_quantize(q, &bad, &tw, 1e-5f, &qe, &se) == LK_OK && UNTOUCHED(),
       "0 rows: a no-op");
    untouched = lk_rmsnorm_quantize(q, &tx, &tw, 1e-5f, &tq, &ts) == LK_OK && !UNTOUCHED();
    ok(untouched, "valid call writes");
#undef UNTOUCHED
}

int main(void)
{
    uint64_t seed = tap_seed();
    test_devices t;
    test_devices_open(&t);
    lk_device **devs = t.dev;
    lk_queue **qs = t.q, *ref_q = t.ref_q;
    const int nd = t.n;
    plan(nd * NCASES + 10);
    for (int d = 0; d < nd; d++) {
        rng = seed;
        for (int c = 0; c < NCASES; c++)
            run_case(devs[d], qs[d], &cases[c], c);
    }
    test_errors(ref_q);
    test_devices_close(&t);
    return done_testing();
}
