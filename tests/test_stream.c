/* Lockstep tests: outputs large enough for the CPU kernels' non-temporal
 * stores (backends/cpu/kernels/stream.h: 32 MiB of f32 and more), on every
 * device against the reference, bit for bit: RMSNorm, LayerNorm, softmax
 * and log-softmax of 2048 x 4096 f32 rows (every row aligned: streamed)
 * and of 2048 x 4096 rows at a row stride of 4097 (most rows misaligned:
 * the kernels fall back to normal stores per row; left out when
 * LOCKSTEP_TEST_QUICK is set).  Random inputs with a
 * few NaN, infinities and signed zeros; seeded (LOCKSTEP_TEST_SEED), the
 * seed printed.  Below the threshold the other tests cover these ops. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

#define ROWS 2048
#define COLS 4096

static uint64_t rng = 0x57e4a3u;

static uint64_t next(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    uint64_t x = rng;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

enum { OP_RMS, OP_LAYER, OP_SOFTMAX, OP_LOGSOFTMAX, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"RMSNorm", "LayerNorm", "softmax", "log-softmax"};

/* op on ROWS x COLS of x at row stride ld (in and out), y back in host
 * memory (ROWS * ld floats; the gaps stay as they were: zero). */
static lk_status run(lk_device *d, lk_queue *q, int op, const float *x, int64_t ld, float *y)
{
    const size_t bytes = (size_t)(ROWS * ld) * 4;
    void *dx = NULL, *dy = NULL, *dw = NULL;
    float w[COLS];
    for (int i = 0; i < COLS; i++)
        w[i] = 0.5f + (float)(i % 7) * 0.25f;
    lk_status st = lk_malloc(d, bytes, &dx);
    if (st == LK_OK)
        st = lk_malloc(d, bytes, &dy);
    if (st == LK_OK)
        st = lk_malloc(d, sizeof w, &dw);
    if (st == LK_OK)
        st = lk_memcpy(q, dx, x, bytes, LK_COPY_HOST_TO_DEVICE);
    if (st == LK_OK)
        st = lk_memcpy(q, dy, y, bytes, LK_COPY_HOST_TO_DEVICE);
    if (st == LK_OK)
        st = lk_memcpy(q, dw, w, sizeof w, LK_COPY_HOST_TO_DEVICE);
    if (st == LK_OK) {
        lk_tensor tx = lk_mat_ld(dx, LK_F32, ROWS, COLS, ld), ty = lk_mat_ld(dy, LK_F32, ROWS, COLS, ld);
        lk_tensor tw = lk_mat(dw, LK_F32, 1, COLS);
        switch (op) {
        case OP_RMS: st = lk_rmsnorm(q, &tx, &tw, 1e-5f, &ty); break;
        case OP_LAYER: st = lk_layernorm(q, &tx, &tw, NULL, 1e-5f, &ty); break;
        case OP_SOFTMAX: st = lk_softmax(q, &tx, &ty); break;
        default: st = lk_log_softmax(q, &tx, &ty); break;
        }
    }
    if (st == LK_OK)
        st = lk_memcpy(q, y, dy, bytes, LK_COPY_DEVICE_TO_HOST);
    if (st == LK_OK)
        st = lk_queue_sync(q);
    lk_free(d, dx);
    lk_free(d, dy);
    lk_free(d, dw);
    return st;
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
    const int64_t lds[2] = {COLS, COLS + 1};
    /* quick runs (emulated CPUs under qemu): the aligned stride only */
    const int nl = getenv("LOCKSTEP_TEST_QUICK") ? 1 : 2;
    const size_t cap = (size_t)ROWS * (COLS + 1);
    float *x = malloc(cap * 4), *want = malloc(cap * 4), *got = malloc(cap * 4);
    lk_device *ref = NULL;
    lk_queue *rq = NULL;
    int n = lk_device_count(ctx), others = 0;
    for (int i = 0; i < n; i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK)
            continue;
        if (strcmp(p.name, "ref") == 0)
            ref = d;
        else if (strstr(p.name, "@simde") == NULL) /* emulated: too slow at this size */
            others++;
    }
    plan(others > 0 ? others * OP_COUNT * nl : 1);
    if (!x || !want || !got || !ref || lk_queue_create(ref, NULL, &rq) != LK_OK) {
        skip(others > 0 ? others * OP_COUNT * nl : 1, "no memory or no ref device");
        return 0;
    }
    if (others == 0)
        skip(1, "the reference is the only device (emulated ones are left out at this size)");
    for (size_t i = 0; i < cap; i++) {
        const uint64_t r = next();
        x[i] = (float)((double)(r >> 40) / (double)(1u << 24)) * 8.0f - 4.0f;
        if (r % 100003 == 0)
            x[i] = (r >> 20) % 3 == 0 ? NAN : (r >> 20) % 3 == 1 ? INFINITY : -0.0f;
    }
    for (int op = 0; op < OP_COUNT; op++) {
        for (int l = 0; l < nl; l++) {
            memset(want, 0, cap * 4);
            const lk_status rs = run(ref, rq, op, x, lds[l], want);
            for (int i = 0; i < n; i++) {
                lk_device *d;
                lk_device_props p;
                lk_queue *q = NULL;
                if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK ||
                    d == ref || strstr(p.name, "@simde") != NULL)
                    continue;
                memset(got, 0, cap * 4);
                lk_status st = lk_queue_create(d, NULL, &q);
                if (st == LK_OK)
                    st = run(d, q, op, x, lds[l], got);
                lk_queue_destroy(q);
                if (st == LK_ERR_UNSUPPORTED) {
                    skip(1, "%s: %s not supported", p.name, op_name[op]);
                    continue;
                }
                ok(rs == LK_OK && st == LK_OK && memcmp(want, got, (size_t)(ROWS * lds[l]) * 4) == 0,
                   "%s: %s of %d x %d f32 at row stride %lld (%s rows), bits of ref", p.name,
                   op_name[op], ROWS, COLS, (long long)lds[l], l == 0 ? "aligned" : "misaligned");
            }
        }
    }
    lk_queue_destroy(rq);
    free(x);
    free(want);
    free(got);
    lk_context_destroy(ctx);
    return 0;
}
