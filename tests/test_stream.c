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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tests/devices.h"

#define ROWS 2048
#define COLS 4096

enum { OP_RMS, OP_LAYER, OP_SOFTMAX, OP_LOGSOFTMAX, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"RMSNorm", "LayerNorm", "softmax", "log-softmax"};

/* op on ROWS x COLS of x at row stride ld (in and out), y back in host
 * memory (ROWS * ld floats; the gaps stay as they were: zero). */
static lk_status run(lk_device *d, lk_queue *q, int op, const float *x, int64_t ld, float *y)
{
    const size_t bytes = (size_t)(ROWS * ld) * 4;
    dbuf dx = {0}, dy = {0}, dw = {0};
    float w[COLS];
    for (int i = 0; i < COLS; i++)
        w[i] = 0.5f + (float)(i % 7) * 0.25f;
    lk_status st = dbuf_up(d, q, &dx, x, bytes) && dbuf_up(d, q, &dy, y, bytes) &&
                           dbuf_up(d, q, &dw, w, sizeof w)
                       ? LK_OK
                       : LK_ERR_OUT_OF_MEMORY;
    if (st == LK_OK) {
        lk_tensor tx = lk_mat_ld(dx.p, LK_F32, ROWS, COLS, ld);
        lk_tensor ty = lk_mat_ld(dy.p, LK_F32, ROWS, COLS, ld);
        lk_tensor tw = lk_mat(dw.p, LK_F32, 1, COLS);
        switch (op) {
        case OP_RMS: st = lk_rmsnorm(q, &tx, &tw, 1e-5f, &ty); break;
        case OP_LAYER: st = lk_layernorm(q, &tx, &tw, NULL, 1e-5f, &ty); break;
        case OP_SOFTMAX: st = lk_softmax(q, &tx, &ty); break;
        default: st = lk_log_softmax(q, &tx, &ty); break;
        }
    }
    if (st == LK_OK && !dbuf_down(q, y, &dy))
        st = LK_ERR_INTERNAL;
    dbuf_free(d, &dx);
    dbuf_free(d, &dy);
    dbuf_free(d, &dw);
    return st;
}

/* emulated devices: too slow at this size */
static int emulated(lk_device *d)
{
    return strstr(lk_device_name(d), "@simde") != NULL;
}

int main(void)
{
    uint64_t rng = tap_seed();
    test_devices t;
    test_devices_open(&t);
    const int64_t lds[2] = {COLS, COLS + 1};
    /* quick runs (emulated CPUs under qemu): the aligned stride only */
    const int nl = getenv("LOCKSTEP_TEST_QUICK") ? 1 : 2;
    const size_t cap = (size_t)ROWS * (COLS + 1);
    float *x = malloc(cap * 4), *want = malloc(cap * 4), *got = malloc(cap * 4);
    lk_device *ref = NULL;
    int others = 0;
    for (int i = 0; i < t.n; i++) {
        if (t.q[i] == t.ref_q)
            ref = t.dev[i];
        else if (!emulated(t.dev[i]))
            others++;
    }
    plan(others > 0 ? others * OP_COUNT * nl : 1);
    if (!x || !want || !got) {
        skip(others > 0 ? others * OP_COUNT * nl : 1, "no memory");
        return 0;
    }
    if (others == 0)
        skip(1, "the reference is the only device (emulated ones are left out at this size)");
    for (size_t i = 0; i < cap; i++) {
        const uint64_t r = tap_rand(&rng);
        x[i] = (float)((double)(r >> 40) / (double)(1u << 24)) * 8.0f - 4.0f;
        if (r % 100003 == 0)
            x[i] = (r >> 20) % 3 == 0 ? NAN : (r >> 20) % 3 == 1 ? INFINITY : -0.0f;
    }
    for (int op = 0; op < OP_COUNT; op++) {
        for (int l = 0; l < nl; l++) {
            memset(want, 0, cap * 4);
            const lk_status rs = run(ref, t.ref_q, op, x, lds[l], want);
            for (int i = 0; i < t.n; i++) {
                if (t.q[i] == t.ref_q || emulated(t.dev[i]))
                    continue;
                const char *name = lk_device_name(t.dev[i]);
                memset(got, 0, cap * 4);
                lk_status st = run(t.dev[i], t.q[i], op, x, lds[l], got);
                if (st == LK_ERR_UNSUPPORTED) {
                    skip(1, "%s: %s not supported", name, op_name[op]);
                    continue;
                }
                ok(rs == LK_OK && st == LK_OK && memcmp(want, got, (size_t)(ROWS * lds[l]) * 4) == 0,
                   "%s: %s of %d x %d f32 at row stride %lld (%s rows), bits of ref", name,
                   op_name[op], ROWS, COLS, (long long)lds[l], l == 0 ? "aligned" : "misaligned");
            }
        }
    }
    free(x);
    free(want);
    free(got);
    test_devices_close(&t);
    return 0;
}
