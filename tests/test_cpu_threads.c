/* Lockstep tests: the CPU driver's own paths (backends/cpu), on every CPU
 * device (native and emulated variants) and several thread counts,
 * against the reference bit for bit.
 *
 * The contract matrix (test_contract, test_invariance) covers every op on
 * small awkward shapes; these cases are the larger ones that reach what
 * small shapes do not: GEMM with several k-panels and column blocks and its
 * workspace of totals, the GEMV path with packed transposed weights, a long
 * row summed by several threads at chunk boundaries, the ternary GEMV past
 * the K where it stops masking codes in place, and the environment
 * variables LOCKSTEP_NUM_THREADS and LOCKSTEP_CPU_ISA. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

static const int native_threads[] = {1, 2, 3, 5, 8};
static const int emulated_threads[] = {1, 3};

static uint64_t rng;

static float randf(void) /* in [-1, 1) */
{
    return (float)(int32_t)(uint32_t)tap_rand(&rng) * 0x1p-31f;
}

static void *xalloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (p == NULL)
        bail("out of memory");
    return p;
}

/* ---- the cases: inputs made once, outputs compared ---- */

typedef struct tcase {
    const char *name;
    size_t out_bytes;
    void *out;        /* filled with `init` before every run */
    const void *init; /* NULL: zeros */
    lk_status (*run)(lk_queue *q, const struct tcase *c);
    void *in[6];
    int64_t m, n, k;
    int variant;
} tcase;

static lk_status run_reduce(lk_queue *q, const tcase *c)
{
    static const lk_reduce_op ops[] = {LK_REDUCE_SUM, LK_REDUCE_VAR, LK_REDUCE_MAX,
                                       LK_REDUCE_ARGMAX};
    lk_dtype dt = c->variant == 1 ? LK_BF16 : LK_F32;
    lk_tensor x = lk_mat(c->in[c->variant], dt, 1, c->n);
    for (int i = 0; i < 4; i++) {
        char *o = (char *)c->out + 8 * i;
        lk_tensor y = lk_mat(o, ops[i] == LK_REDUCE_ARGMAX ? LK_I64 : LK_F32, 1, 1);
        lk_status st = lk_reduce(q, ops[i], &x, &y);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}

/* variant 0: NN, C bf16 (totals in a workspace); 1: TT, C f32 (totals in
 * C); 2: NT, C f32 with bias and ACCUMULATE (workspace again). */
static lk_status run_gemm(lk_queue *q, const tcase *c)
{
    const int64_t m = c->m, n = c->n, k = c->k;
    lk_transpose ta = c->variant == 1 ? LK_TRANS : LK_NO_TRANS;
    lk_transpose tb = c->variant >= 1 ? LK_TRANS : LK_NO_TRANS;
    lk_tensor a = ta ? lk_mat(c->in[0], LK_F32, k, m) : lk_mat(c->in[0], LK_F32, m, k);
    lk_tensor b = tb ? lk_mat(c->in[1], LK_BF16, n, k) : lk_mat(c->in[1], LK_BF16, k, n);
    lk_tensor bias = lk_mat(c->in[2], LK_F32, 1, n);
    lk_tensor y = lk_mat(c->out, c->variant == 0 ? LK_BF16 : LK_F32, m, n);
    return lk_gemm(q, ta, tb, &a, &b, c->variant == 2 ? &bias : NULL, &y, 1,
                   c->variant == 2 ? LK_GEMM_ACCUMULATE : 0);
}

static lk_status run_ternary(lk_queue *q, const tcase *c)
{
    lk_tensor x = lk_mat(c->in[0], LK_I8, c->m, c->k), xs = lk_mat(c->in[1], LK_F32, c->m, 1);
    lk_tensor w = lk_mat(c->in[2], LK_T2, c->n, c->k), ws = lk_mat(c->in[3], LK_F32, 1, c->n);
    lk_tensor y = lk_mat(c->out, LK_F32, c->m, c->n);
    return lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
}

static lk_status run_int8(lk_queue *q, const tcase *c)
{
    lk_tensor a = lk_mat(c->in[0], LK_I8, c->m, c->k), b = lk_mat(c->in[4], LK_I8, c->n, c->k);
    lk_tensor y = lk_mat(c->out, LK_I32, c->m, c->n);
    return lk_int8_gemm(q, &a, &b, NULL, NULL, &y);
}

static lk_status run_qternary(lk_queue *q, const tcase *c)
{
    lk_tensor w = lk_mat(c->in[0], LK_F32, c->m, c->n);
    lk_tensor wq = lk_mat(c->out, LK_T2, c->m, (c->n + 3) / 4 * 4);
    wq.cols = c->n;
    lk_tensor s = lk_mat((char *)c->out + c->out_bytes - 4, LK_F32, 1, 1);
    return lk_quantize_ternary(q, &w, &wq, &s);
}

static lk_status run_rows(lk_queue *q, const tcase *c)
{
    lk_tensor x = lk_mat(c->in[0], LK_BF16, c->m, c->n);
    lk_tensor y1 = lk_mat(c->out, LK_F16, c->m, c->n);
    lk_tensor y2 = lk_mat((uint16_t *)c->out + c->m * c->n, LK_F16, c->m, c->n);
    lk_status st = lk_softmax(q, &x, &y1);
    return st != LK_OK ? st : lk_rmsnorm(q, &x, NULL, 1e-5f, &y2);
}

#define NCASES 13
static tcase cases[NCASES];

static void make_cases(void)
{
    /* a row long enough that 8 threads share its chunks */
    const int64_t nr = 4096 * 40 + 17;
    float *rf = xalloc((size_t)nr * 4);
    uint16_t *rb = xalloc((size_t)nr * 2);
    for (int64_t i = 0; i < nr; i++) {
        rf[i] = randf() * 3.0f + 0.25f;
        rb[i] = lk_f32_to_bf16(rf[i]);
    }
    rf[nr / 3] = -0.0f;
    /* signed zeros only (the maximum is +0), and one NaN late in a row */
    const int64_t nz = 5000;
    float *rz = xalloc((size_t)nz * 4), *rn = xalloc((size_t)nz * 4);
    for (int64_t i = 0; i < nz; i++) {
        rz[i] = i % 3 ? -0.0f : 0.0f;
        rn[i] = randf();
    }
    rz[0] = -0.0f;
    memcpy(&rn[nz - 7], &(uint32_t){0x7fa00001u}, 4);
    for (int v = 0; v < 2; v++)
        cases[v] = (tcase){v ? "reduce, long bf16 row" : "reduce, long f32 row", 32, NULL, NULL,
                           run_reduce, {rf, rb}, 1, nr, 0, v};
    cases[NCASES - 2] = (tcase){"reduce, signed zeros", 32, NULL, NULL, run_reduce,
                                {NULL, NULL, rz}, 1, nz, 0, 2};
    cases[NCASES - 1] = (tcase){"reduce, a signalling NaN", 32, NULL, NULL, run_reduce,
                                {NULL, NULL, NULL, rn}, 1, nz, 0, 3};

    /* GEMM: two column blocks (N > 3072), two k-panels, edge tiles */
    const int64_t m = 70, n = 3100, k = 300;
    float *a = xalloc((size_t)(m * k) * 4), *bias = xalloc((size_t)n * 4);
    uint16_t *b = xalloc((size_t)(k * n) * 2);
    float *c0 = xalloc((size_t)(m * n) * 4);
    for (int64_t i = 0; i < m * k; i++)
        a[i] = randf();
    for (int64_t i = 0; i < k * n; i++)
        b[i] = lk_f32_to_bf16(randf());
    for (int64_t i = 0; i < n; i++)
        bias[i] = randf();
    for (int64_t i = 0; i < m * n; i++)
        c0[i] = randf();
    static const char *gn[3] = {"gemm NN, bf16 C (workspace)", "gemm TT, f32 C",
                                "gemm NT, bias + accumulate"};
    for (int v = 0; v < 3; v++)
        cases[2 + v] = (tcase){gn[v], (size_t)(m * n) * 4, NULL, v == 2 ? c0 : NULL, run_gemm,
                               {a, b, bias}, m, n, k, v};
    /* GEMV path: M <= the micro-tile, transposed bf16 weights */
    cases[5] = (tcase){"gemv M=3, NT, K=1000", (size_t)(3 * 100) * 4, NULL, NULL, run_gemm,
                       {a, b, bias}, 3, 100, 1000, 1};

    /* ternary GEMV past the K where codes stop being masked in place */
    const int64_t tk = (1 << 18) + 260, tn = 3, tm = 2;
    int8_t *x = xalloc((size_t)(tm * tk));
    float *xs = xalloc((size_t)tm * 4), *ws = xalloc((size_t)tn * 4);
    uint8_t *w = xalloc((size_t)(tn * tk / 4));
    int8_t *b8 = xalloc((size_t)(tn * tk));
    for (int64_t i = 0; i < tm * tk; i++)
        x[i] = (int8_t)(tap_rand(&rng) % 256 - 128);
    for (int64_t i = 0; i < tn * tk / 4; i++)
        w[i] = (uint8_t)tap_rand(&rng); /* every code, the reserved 3 too */
    for (int64_t i = 0; i < tn * tk; i++)
        b8[i] = (int8_t)(i % 7 == 0 ? -128 : (int)(tap_rand(&rng) % 256) - 128);
    for (int i = 0; i < tm; i++)
        xs[i] = 100.0f + (float)i;
    for (int i = 0; i < tn; i++)
        ws[i] = 0.5f + 0.25f * (float)i;
    cases[6] = (tcase){"ternary GEMV, K = 2^18 + 260", (size_t)(tm * tn) * 4, NULL, NULL,
                       run_ternary, {x, xs, w, ws}, 1, tn, tk, 0};
    cases[7] = (tcase){"ternary GEMM M=2, K = 2^18 + 260", (size_t)(tm * tn) * 4, NULL, NULL,
                       run_ternary, {x, xs, w, ws}, tm, tn, tk, 0};
    cases[8] = (tcase){"int8 GEMM, K = 5001", (size_t)(tm * tn) * 4, NULL, NULL, run_int8,
                       {x, xs, w, ws, b8}, tm, tn, 5001, 0};

    /* whole-tensor quantisation; row ops on rows longer than a chunk */
    const int64_t qm = 300, qn = 301;
    float *qw = xalloc((size_t)(qm * qn) * 4);
    for (int64_t i = 0; i < qm * qn; i++)
        qw[i] = randf() * 0.1f;
    cases[9] = (tcase){"quantize_ternary 300 x 301", (size_t)(qm * ((qn + 3) / 4)) + 4, NULL,
                       NULL, run_qternary, {qw}, qm, qn, 0, 0};
    const int64_t sm = 33, sn = 5000;
    uint16_t *sx = xalloc((size_t)(sm * sn) * 2);
    for (int64_t i = 0; i < sm * sn; i++)
        sx[i] = lk_f32_to_bf16(randf() * 8.0f);
    cases[10] = (tcase){"softmax + rmsnorm 33 x 5000, bf16 -> f16", (size_t)(sm * sn) * 4, NULL,
                        NULL, run_rows, {sx}, sm, sn, 0, 0};
}

static lk_status run_case(lk_queue *q, const tcase *c, void *out)
{
    tcase r = *c;
    r.out = out;
    if (c->init)
        memcpy(out, c->init, c->out_bytes);
    else
        memset(out, 0x5a, c->out_bytes);
    return c->run(q, &r);
}

/* ---- the environment variables ---- */

static void test_env(void)
{
    lk_context *ctx = NULL;
    lk_device *dev = NULL;
    lk_queue *q = NULL;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "cpu", &dev) != LK_OK)
        bail("no cpu device: %s", lk_last_error());
    setenv("LOCKSTEP_NUM_THREADS", "two", 1);
    lk_status st = lk_queue_create(dev, NULL, &q);
    ok(st == LK_ERR_INVALID_ARGUMENT && strstr(lk_last_error(), "LOCKSTEP_NUM_THREADS"),
       "LOCKSTEP_NUM_THREADS=two is refused (%s)", lk_last_error());
    lk_context_destroy(ctx);
    setenv("LOCKSTEP_NUM_THREADS", "3", 1); /* props are read when a context starts */
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "cpu", &dev) != LK_OK)
        bail("no cpu device: %s", lk_last_error());
    st = lk_queue_create(dev, NULL, &q);
    lk_device_props p;
    lk_device_props_get(dev, &p);
    ok(st == LK_OK && p.max_threads == 3, "LOCKSTEP_NUM_THREADS=3: a queue, max_threads %d",
       p.max_threads);
    if (st == LK_OK)
        lk_queue_destroy(q);
    unsetenv("LOCKSTEP_NUM_THREADS");
    lk_context_destroy(ctx);

    setenv("LOCKSTEP_CPU_ISA", "ref", 1);
    ctx = NULL;
    int found = lk_context_create(&ctx) == LK_OK && lk_device_find(ctx, "cpu", &dev) == LK_OK;
    if (found)
        lk_device_props_get(dev, &p);
    ok(found && strstr(p.description, "threaded reference"),
       "LOCKSTEP_CPU_ISA=ref: \"cpu\" runs the threaded reference (%s)",
       found ? p.description : lk_last_error());
    lk_context_destroy(ctx);

    setenv("LOCKSTEP_CPU_ISA", "avx9000", 1);
    ctx = NULL;
    int refused = 0;
    if (lk_context_create(&ctx) == LK_OK) {
        for (int i = 0; i < lk_context_driver_count(ctx); i++) {
            lk_driver_info di;
            if (lk_context_driver_info(ctx, i, &di) == LK_OK && !strcmp(di.name, "cpu"))
                refused = di.status != LK_OK && strstr(di.message, "LOCKSTEP_CPU_ISA=avx9000");
        }
    }
    ok(refused, "LOCKSTEP_CPU_ISA=avx9000: the cpu driver says why it offers nothing");
    lk_context_destroy(ctx);
    unsetenv("LOCKSTEP_CPU_ISA");
}

int main(void)
{
    rng = tap_seed();
    unsetenv("LOCKSTEP_NUM_THREADS");
    unsetenv("LOCKSTEP_CPU_ISA");
    test_env();
    make_cases();

    lk_context *ctx = NULL;
    lk_device *ref = NULL;
    lk_queue *rq = NULL;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "ref", &ref) != LK_OK ||
        lk_queue_create(ref, NULL, &rq) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    void *want[NCASES], *got = NULL;
    size_t most = 0;
    for (int i = 0; i < NCASES; i++) {
        want[i] = xalloc(cases[i].out_bytes);
        if (run_case(rq, &cases[i], want[i]) != LK_OK)
            bail("reference failed on %s: %s", cases[i].name, lk_last_error());
        most = cases[i].out_bytes > most ? cases[i].out_bytes : most;
    }
    got = xalloc(most);

    for (int d = 0; d < lk_device_count(ctx); d++) {
        lk_device *dev;
        lk_device_props p;
        if (lk_device_get(ctx, d, &dev) != LK_OK || lk_device_props_get(dev, &p) != LK_OK ||
            p.kind != LK_DEVICE_CPU)
            continue;
        const int *tc = p.emulated ? emulated_threads : native_threads;
        int ntc = p.emulated ? 2 : 5;
        if (getenv("LOCKSTEP_TEST_QUICK") != NULL) { /* under qemu: 1 and 3 threads only */
            tc = emulated_threads;
            ntc = 2;
        }
        for (int t = 0; t < ntc; t++) {
            lk_queue_opts o = {tc[t], NULL};
            lk_queue *q = NULL;
            if (lk_queue_create(dev, &o, &q) != LK_OK) {
                ok(0, "%s: queue with %d threads: %s", p.name, tc[t], lk_last_error());
                continue;
            }
            for (int i = 0; i < NCASES; i++) {
                lk_status st = run_case(q, &cases[i], got);
                size_t at = 0;
                while (st == LK_OK && at < cases[i].out_bytes &&
                       ((char *)got)[at] == ((char *)want[i])[at])
                    at++;
                ok(st == LK_OK && at == cases[i].out_bytes, "%s, %d threads: %s%s", p.name,
                   tc[t], cases[i].name, st != LK_OK ? " (failed)" : "");
                if (st == LK_OK && at != cases[i].out_bytes)
                    diag("first differing byte %zu of %zu", at, cases[i].out_bytes);
            }
            lk_queue_destroy(q);
        }
    }
    lk_queue_destroy(rq);
    lk_context_destroy(ctx);
    return done_testing();
}
