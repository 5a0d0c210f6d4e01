/* Lockstep tests: softmax and log-softmax on every device against the
 * reference, bit for bit, where the kernels' short exp (the exponent
 * scaling by an integer add when every lane has k >= -125, numerics.md
 * 7.1 and backends/cpu/kernels/softmax.c) hands over to the full one:
 *
 * - every f32 t in [-88.8, -86.0] (k = -125, -126, -127 and exp's
 *   results on both sides of 2^-126) as rows [0, t, t', ...], so that
 *   x_i - mx = t exactly;
 * - random t in [-120, 0] and rows with a huge spread (-1e30, -FLT_MAX),
 *   -Inf entries, NaN and +Inf rows, a row of -Inf only, rows of every
 *   length up to 70 and one of two chunks, with a maximum that is not 0;
 * - f32 rows to f32, bf16 and f16 outputs.
 * The random inputs are seeded (LOCKSTEP_TEST_SEED), the seed printed. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

static uint64_t rng = 0x5eed50f7u;

static uint64_t next(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    uint64_t x = rng;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float unit(void) /* in [0, 1) */
{
    return (float)((double)(next() >> 40) / (double)(1ull << 24));
}

static float f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct dev {
    lk_device *d;
    lk_queue *q;
    lk_device_props p;
} dev;

/* softmax (log = 0) or log-softmax of the rows x x n on v, y of dtype yd
 * returned to host memory ybytes long. */
static lk_status run(dev *v, int log, const float *x, int64_t rows, int64_t n, lk_dtype yd,
                     void *y)
{
    const size_t xb = (size_t)(rows * n) * 4, yb = (size_t)(rows * n) * (yd == LK_F32 ? 4 : 2);
    void *dx = NULL, *dy = NULL;
    lk_status st = lk_malloc(v->d, xb, &dx);
    if (st == LK_OK)
        st = lk_malloc(v->d, yb, &dy);
    if (st == LK_OK)
        st = lk_memcpy(v->q, dx, x, xb, LK_COPY_HOST_TO_DEVICE);
    if (st == LK_OK) {
        lk_tensor tx = lk_mat(dx, LK_F32, rows, n), ty = lk_mat(dy, yd, rows, n);
        st = log ? lk_log_softmax(v->q, &tx, &ty) : lk_softmax(v->q, &tx, &ty);
    }
    if (st == LK_OK)
        st = lk_memcpy(v->q, y, dy, yb, LK_COPY_DEVICE_TO_HOST);
    if (st == LK_OK)
        st = lk_queue_sync(v->q);
    lk_free(v->d, dx);
    lk_free(v->d, dy);
    return st;
}

/* The test rows, each of n elements. */
typedef struct rows {
    float *x;
    int64_t rows, n;
    const char *what;
} rows;

/* Every f32 in [-88.8, -86.0] after a leading 0, 4096 per row. */
static rows band(void)
{
    const uint32_t lo = 0xc2ac0000u /* -86.0 */, hi = 0xc2b1999au /* -88.8 */;
    const int64_t n = 4096, count = hi - lo + 1, per = n - 1;
    rows r = {NULL, (count + per - 1) / per, n, "every t in [-88.8, -86.0]"};
    r.x = malloc((size_t)(r.rows * n) * sizeof *r.x);
    if (r.x == NULL)
        return r;
    uint32_t u = lo;
    for (int64_t i = 0; i < r.rows; i++) {
        r.x[i * n] = 0.0f;
        for (int64_t j = 1; j < n; j++)
            r.x[i * n + j] = u <= hi ? f32(u++) : -87.0f;
    }
    return r;
}

/* Random rows with edges: a maximum that is not 0, t spread over
 * [-120, 0] or concentrated near the boundary, special entries. */
static rows edges(int64_t n, int64_t count)
{
    rows r = {malloc((size_t)(count * n) * sizeof(float)), count, n, "random rows with edges"};
    if (r.x == NULL)
        return r;
    for (int64_t i = 0; i < count; i++) {
        float *x = r.x + i * n;
        const float mx = i % 3 == 0 ? 0.0f : (unit() - 0.5f) * 64.0f;
        const int kind = (int)(i % 9);
        for (int64_t j = 0; j < n; j++) {
            float t = kind < 3 ? -120.0f * unit() : -86.0f - 2.8f * unit();
            if (kind == 3 && unit() < 0.3f)
                t = -30.0f * unit(); /* mostly normal results, a few vectors near 2^-126 */
            x[j] = mx + t;
            const float e = unit();
            if (kind == 4 && e < 0.05f)
                x[j] = -INFINITY;
            if (kind == 5 && e < 0.05f)
                x[j] = e < 0.025f ? -1e30f : -FLT_MAX;
        }
        x[next() % (uint64_t)n] = mx;
        if (kind == 6)
            x[next() % (uint64_t)n] = NAN;
        if (kind == 7)
            x[next() % (uint64_t)n] = INFINITY;
        if (kind == 8 && i % 2)
            for (int64_t j = 0; j < n; j++)
                x[j] = -INFINITY;
    }
    return r;
}

static int compare(dev *ref, dev *v, const rows *r)
{
    static const lk_dtype yds[] = {LK_F32, LK_BF16, LK_F16};
    const size_t bytes = (size_t)(r->rows * r->n) * 4;
    void *a = malloc(bytes), *b = malloc(bytes);
    int bad = a == NULL || b == NULL || r->x == NULL;
    for (int log = 0; log < 2 && !bad; log++)
        for (size_t k = 0; k < sizeof yds / sizeof *yds && !bad; k++) {
            const size_t yb = (size_t)(r->rows * r->n) * (yds[k] == LK_F32 ? 4 : 2);
            lk_status s1 = run(ref, log, r->x, r->rows, r->n, yds[k], a);
            lk_status s2 = run(v, log, r->x, r->rows, r->n, yds[k], b);
            if (s1 != LK_OK || s2 != LK_OK || memcmp(a, b, yb) != 0) {
                diag("%s: %s to %s differs (status %d, %d)", v->p.name,
                     log ? "log_softmax" : "softmax",
                     yds[k] == LK_F32 ? "f32" : yds[k] == LK_BF16 ? "bf16" : "f16", (int)s1,
                     (int)s2);
                bad = 1;
            }
        }
    free(a);
    free(b);
    return !bad;
}

int main(void)
{
    const char *s = getenv("LOCKSTEP_TEST_SEED");
    if (s)
        rng = strtoull(s, NULL, 0);
    diag("seed %" PRIu64 " (LOCKSTEP_TEST_SEED)", rng);

    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK) {
        plan(1);
        ok(0, "lk_context_create: %s", lk_last_error());
        return 1;
    }
    int n = lk_device_count(ctx);
    dev *devs = calloc((size_t)(n > 0 ? n : 1), sizeof *devs);
    int nd = 0, iref = -1;
    for (int i = 0; i < n; i++) {
        dev *v = &devs[nd];
        if (lk_device_get(ctx, i, &v->d) != LK_OK || lk_device_props_get(v->d, &v->p) != LK_OK ||
            lk_queue_create(v->d, NULL, &v->q) != LK_OK)
            continue;
        if (strcmp(v->p.name, "ref") == 0)
            iref = nd;
        nd++;
    }
    rows set[3 + 70];
    int ns = 0;
    set[ns++] = band();
    set[ns++] = edges(4096, 36);
    set[ns++] = edges(4096 + 77, 9);
    for (int64_t len = 1; len <= 70; len++)
        set[ns++] = edges(len, 9);

    plan(nd > 1 ? (nd - 1) * 3 : 1);
    if (iref < 0) {
        skip(nd > 1 ? (nd - 1) * 3 : 1, "no ref device");
    } else if (nd == 1) {
        skip(1, "the reference is the only device");
    } else {
        for (int i = 0; i < nd; i++) {
            if (i == iref)
                continue;
            ok(compare(&devs[iref], &devs[i], &set[0]), "%s: %s, bits of ref", devs[i].p.name,
               set[0].what);
            ok(compare(&devs[iref], &devs[i], &set[1]) &&
                   compare(&devs[iref], &devs[i], &set[2]),
               "%s: %s (rows of 4096 and 4173), bits of ref", devs[i].p.name, set[1].what);
            int good = 1;
            for (int k = 3; k < ns && good; k++)
                good = compare(&devs[iref], &devs[i], &set[k]);
            ok(good, "%s: rows of 1 to 70 elements with edges, bits of ref", devs[i].p.name);
        }
    }
    for (int k = 0; k < ns; k++)
        free(set[k].x);
    for (int i = 0; i < nd; i++)
        lk_queue_destroy(devs[i].q);
    free(devs);
    lk_context_destroy(ctx);
    return 0;
}
