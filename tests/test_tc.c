/* The tensor-core tier (docs/numerics.md, "Tensor-core tier").
 *
 * Everywhere: the argument rules, and the CPU driver's threaded model equal
 * to the reference's bit for bit.  With a GPU (sm_80/86/89/90): which of
 * the two CPU models the GPU's MMA arithmetic matches (printed, so one run
 * tells), then the GPU bit for bit against the model of its tier for every
 * kernel variant (LOCKSTEP_CUDA_TC_KERNEL), dtype, layout and odd shapes,
 * on random data and on adversarial values (cancellation, wide exponents,
 * subnormals, Inf, NaN, -0); batch invariance over M = 1 ... 4096 and
 * run-to-run identity.  No GPU: those are a SKIP with the reason.
 * LOCKSTEP_CUDA_TEST_SMALL=1 (scripts/gpu-check.sh's sanitizer stages)
 * runs the small mode: fewer, smaller GPU cases that still launch every
 * kernel variant on the paths it has (edge tiles, K tails, ring wraps,
 * persistent blocks taking several tiles, the split launch). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

static lk_context *ctx;
static lk_device *ref, *cpu, *gpu;
static lk_queue *rq, *cq, *gq;
static uint64_t rng;

/* A random value: uniform-ish in [-1, 1), or (adversarial) drawn from the
 * edges: zeros, subnormals, huge and tiny binades, Inf, NaN, and pairs
 * that cancel. */
static uint16_t rnd_val(lk_dtype dt, int adversarial)
{
    uint64_t r = tap_rand(&rng);
    float v = (float)((double)(r >> 11) * 0x1p-52 - 1.0);
    if (adversarial) {
        switch ((r >> 3) % 16) {
        case 0: v = 0.0f; break;
        case 1: v = -0.0f; break;
        case 2: v = dt == LK_BF16 ? 0x1p-130f : 0x1p-20f; break; /* subnormal */
        case 3: v = dt == LK_BF16 ? -0x1p100f : -0x1p15f; break;
        case 4: v = dt == LK_BF16 ? 0x1p-60f : 0x1p-12f; break;
        case 5: v = dt == LK_BF16 ? 0x1p60f : 0x1p12f; break;
        case 6: if ((r >> 9) % 64 == 0) v = 1.0f / 0.0f; break; /* rare Inf */
        case 7: if ((r >> 9) % 128 == 0) v = 0.0f / 0.0f; break; /* rare NaN */
        case 8: v = 1.0f; break;
        case 9: v = -1.0f; break;
        default: v *= (float)(1u << ((r >> 40) % 16)); break;
        }
    }
    return dt == LK_BF16 ? lk_f32_to_bf16(v) : lk_f32_to_f16(v);
}

typedef struct {
    lk_dtype dt, cdt;
    lk_transpose ta, tb;
    int64_t m, n, k, batch;
    int bias, accumulate;
    int adversarial;
    uint16_t *a, *b, *bias_h; /* host inputs (batch_stride = rows * cols) */
    void *c0;                 /* C's initial value */
} tc_case;

static size_t esize(lk_dtype d)
{
    return lk_dtype_size(d);
}

static void case_fill(tc_case *t)
{
    size_t na = (size_t)(t->m * t->k * t->batch), nb = (size_t)(t->n * t->k * t->batch);
    t->a = malloc(na * 2 + 2);
    t->b = malloc(nb * 2 + 2);
    t->bias_h = malloc((size_t)t->n * 2 + 2);
    size_t nc = (size_t)(t->m * t->n * t->batch);
    t->c0 = malloc(nc * esize(t->cdt) + 4);
    for (size_t i = 0; i < na; i++)
        t->a[i] = rnd_val(t->dt, t->adversarial);
    for (size_t i = 0; i < nb; i++)
        t->b[i] = rnd_val(t->dt, t->adversarial);
    for (int64_t i = 0; i < t->n; i++)
        t->bias_h[i] = rnd_val(t->dt, 0);
    for (size_t i = 0; i < nc * esize(t->cdt); i++)
        ((unsigned char *)t->c0)[i] = (unsigned char)(tap_rand(&rng) & 0x3f); /* finite */
}

static void case_free(tc_case *t)
{
    free(t->a);
    free(t->b);
    free(t->bias_h);
    free(t->c0);
}

/* Runs the case on q (device d) with flags; result into out (host).  GPU
 * memory is staged with lk_memcpy. */
static lk_status run(lk_device *d, lk_queue *q, const tc_case *t, unsigned flags, void *out)
{
    size_t na = (size_t)(t->m * t->k * t->batch) * 2, nb = (size_t)(t->n * t->k * t->batch) * 2;
    size_t nc = (size_t)(t->m * t->n * t->batch) * esize(t->cdt), nbias = (size_t)t->n * 2;
    void *da, *db, *dc, *dbias;
    int host = d != gpu;
    if (host) {
        da = t->a, db = t->b, dbias = t->bias_h, dc = out;
        memcpy(out, t->c0, nc);
    } else {
        if (lk_malloc(d, na, &da) || lk_malloc(d, nb, &db) || lk_malloc(d, nc, &dc) ||
            lk_malloc(d, nbias, &dbias))
            bail("lk_malloc: %s", lk_last_error());
        lk_memcpy(q, da, t->a, na, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, db, t->b, nb, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, dc, t->c0, nc, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, dbias, t->bias_h, nbias, LK_COPY_HOST_TO_DEVICE);
    }
    lk_tensor a = t->ta == LK_TRANS ? lk_mat(da, t->dt, t->k, t->m) : lk_mat(da, t->dt, t->m, t->k);
    lk_tensor b = t->tb == LK_TRANS ? lk_mat(db, t->dt, t->n, t->k) : lk_mat(db, t->dt, t->k, t->n);
    lk_tensor c = lk_mat(dc, t->cdt, t->m, t->n);
    lk_tensor bias = lk_mat(dbias, t->dt, 1, t->n);
    a.batch_stride = t->m * t->k;
    b.batch_stride = t->n * t->k;
    c.batch_stride = t->m * t->n;
    lk_status st = lk_gemm(q, t->ta, t->tb, &a, &b, t->bias ? &bias : NULL, &c, t->batch,
                           flags | (t->accumulate ? LK_GEMM_ACCUMULATE : 0));
    if (!host) {
        if (st == LK_OK) {
            lk_memcpy(q, out, dc, nc, LK_COPY_DEVICE_TO_HOST);
            st = lk_queue_sync(q);
        }
        lk_free(d, da);
        lk_free(d, db);
        lk_free(d, dc);
        lk_free(d, dbias);
    }
    return st;
}

static size_t out_bytes(const tc_case *t)
{
    return (size_t)(t->m * t->n * t->batch) * esize(t->cdt);
}

/* first differing f32 element, for the diagnosis */
static void show_diff(const tc_case *t, const void *x, const void *y)
{
    size_t es = esize(t->cdt), n = out_bytes(t) / es;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)x + i * es, (const char *)y + i * es, es)) {
            uint32_t u = 0, v = 0;
            memcpy(&u, (const char *)x + i * es, es);
            memcpy(&v, (const char *)y + i * es, es);
            diag("  first difference at element %zu (m %lld, n %lld): 0x%08x vs 0x%08x", i,
                 (long long)((int64_t)i / t->n % t->m), (long long)((int64_t)i % t->n), u, v);
            return;
        }
}

/* ----------------------------------------------------------- CPU only */

static void test_api(void)
{
    uint16_t a[4] = {0}, b[4] = {0};
    float af[4] = {0}, c[4];
    lk_tensor ta = lk_mat(a, LK_BF16, 2, 2), tb = lk_mat(b, LK_BF16, 2, 2);
    lk_tensor tf = lk_mat(af, LK_F32, 2, 2), th = lk_mat(b, LK_F16, 2, 2);
    lk_tensor tc = lk_mat(c, LK_F32, 2, 2);
    lk_status st = lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &tf, &tb, NULL, &tc, 1, LK_GEMM_TC_SM90);
    ok(st == LK_ERR_BAD_DTYPE && strstr(lk_last_error(), "tensor-core tier"),
       "f32 A refused: %s", lk_last_error());
    st = lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &ta, &th, NULL, &tc, 1, LK_GEMM_TC_SM80);
    ok(st == LK_ERR_BAD_DTYPE, "bf16 x f16 refused: %s", lk_last_error());
    st = lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1,
                 LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90);
    ok(st == LK_ERR_INVALID_ARGUMENT, "both tiers refused: %s", lk_last_error());
    st = lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, 1u << 7);
    ok(st == LK_ERR_INVALID_ARGUMENT, "unknown flag refused: %s", lk_last_error());
    st = lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, LK_GEMM_TC_SM90);
    ok(st == LK_OK, "bf16 x bf16 on ref: %s", lk_status_string(st));
}

static void test_cpu_vs_ref(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {5, 7, 33}, {17, 9, 100}, {64, 3, 257}};
    for (int tier = 0; tier < 2; tier++) {
        unsigned flag = tier ? LK_GEMM_TC_SM90 : LK_GEMM_TC_SM80;
        int bad = 0, n = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int l = 0; l < 4; l++) {
                tc_case t = {l & 1 ? LK_F16 : LK_BF16, l & 2 ? LK_BF16 : LK_F32,
                             l & 1 ? LK_TRANS : LK_NO_TRANS, l & 2 ? LK_TRANS : LK_NO_TRANS,
                             shapes[s][0], shapes[s][1], shapes[s][2], 2, l == 3, l == 2, (int)s & 1,
                             NULL, NULL, NULL, NULL};
                case_fill(&t);
                void *x = malloc(out_bytes(&t)), *y = malloc(out_bytes(&t));
                lk_status s1 = run(ref, rq, &t, flag, x), s2 = run(cpu, cq, &t, flag, y);
                n++;
                if (s1 || s2 || memcmp(x, y, out_bytes(&t))) {
                    bad++;
                    diag("cpu != ref: %lldx%lldx%lld layout %d (%s / %s)", (long long)t.m,
                         (long long)t.n, (long long)t.k, l, lk_status_string(s1),
                         lk_status_string(s2));
                }
                free(x);
                free(y);
                case_free(&t);
            }
        ok(bad == 0, "%s: cpu (threaded model) = ref bit for bit (%d cases)",
           tier ? "LK_GEMM_TC_SM90" : "LK_GEMM_TC_SM80", n);
    }
}

/* ----------------------------------------------------------- GPU */

static unsigned gpu_tier;

/* Which CPU model the GPU's tensor cores follow: printed either way. */
static void test_identify(void)
{
    int match[2] = {1, 1}, any = 0;
    for (int adv = 0; adv < 2; adv++)
        for (int d = 0; d < 2; d++) {
            tc_case t = {d ? LK_F16 : LK_BF16, LK_F32, LK_NO_TRANS, LK_TRANS, 64, 64, 256, 1,
                         0, 0, adv, NULL, NULL, NULL, NULL};
            case_fill(&t);
            void *g = malloc(out_bytes(&t)), *m80 = malloc(out_bytes(&t)),
                 *m90 = malloc(out_bytes(&t));
            lk_status st = run(gpu, gq, &t, gpu_tier, g);
            run(cpu, cq, &t, LK_GEMM_TC_SM80, m80);
            run(cpu, cq, &t, LK_GEMM_TC_SM90, m90);
            if (st != LK_OK) {
                diag("GPU tier call failed: %s", lk_last_error());
                match[0] = match[1] = 0;
            } else {
                any = 1;
                match[0] &= memcmp(g, m80, out_bytes(&t)) == 0;
                match[1] &= memcmp(g, m90, out_bytes(&t)) == 0;
                diag("%s %s data: GPU = SM80 model: %s, GPU = SM90 model: %s",
                     d ? "f16" : "bf16", adv ? "adversarial" : "random",
                     memcmp(g, m80, out_bytes(&t)) ? "no" : "yes",
                     memcmp(g, m90, out_bytes(&t)) ? "no" : "yes");
            }
            free(g);
            free(m80);
            free(m90);
            case_free(&t);
        }
    diag("=> this GPU's MMA arithmetic matches: %s", !any ? "(no result)"
                                                        : match[1] && match[0] ? "both (data too tame)"
                                                        : match[1]             ? "the SM90 model"
                                                        : match[0]             ? "the SM80 model"
                                                                               : "NEITHER model");
    ok(match[gpu_tier == LK_GEMM_TC_SM90], "the GPU matches the model of its tier (%s)",
       gpu_tier == LK_GEMM_TC_SM90 ? "LK_GEMM_TC_SM90" : "LK_GEMM_TC_SM80");
}

/* LOCKSTEP_CUDA_TEST_SMALL=1 (compute-sanitizer's runs): the smallest
 * cases that still reach each kernel's paths (see test_variants) and a
 * shorter batch-invariance sweep. */
static int small;
static int64_t gpu_sms = 132; /* from the description ("..., 132 SMs") */

/* One case of test_variants: shape, batch (-b: b x SMs + 1 entries),
 * epilogue, C's dtype, the layouts and dtypes it runs
 * (bit l: dtype l & 4 ? f16 : bf16, A transposed l & 1, B transposed
 * l & 2) and which kernels take it (only: that one alone). */
enum { FOR_ALL, FOR_WGMMA, FOR_AUTO };
typedef struct {
    int64_t m, n, k, batch;
    int bias, accumulate, c_bf16;
    unsigned layouts;
    int who;
    const char *only;
} variant_case;

/* The full list: K tails inside a 16-k step, a 64-k slice and a 32-k
 * stage; M and N off every tile; a long K; batches; then (A M x K, B N x
 * K only) more tiles than an H200 runs blocks at once and odd tile
 * counts, the last with bias, accumulate and 2 batches. */
static const variant_case full_cases[] = {
    {77, 93, 200, 1, 0, 0, 0, 0xff, FOR_ALL, NULL},
    {128, 256, 512, 1, 0, 0, 0, 0xff, FOR_ALL, NULL},
    {3, 300, 17, 1, 0, 0, 1, 0xff, FOR_ALL, NULL},
    {130, 70, 1, 3, 0, 0, 0, 0xff, FOR_ALL, NULL},
    {33, 129, 15, 1, 1, 0, 0, 0xff, FOR_ALL, NULL},
    {200, 64, 48, 1, 0, 1, 0, 0xff, FOR_ALL, NULL},
    {260, 264, 1000, 1, 0, 1, 0, 0xff, FOR_ALL, NULL},
    {136, 264, 72, 2, 1, 0, 0, 0xff, FOR_ALL, NULL},
    {96, 136, 2056, 1, 0, 0, 0, 0xff, FOR_ALL, NULL},
    {2600, 2100, 16, 1, 0, 0, 0, 0x44, FOR_ALL, NULL},
    {1100, 2100, 200, 1, 0, 0, 0, 0x44, FOR_ALL, NULL},
    {1300, 1100, 72, 2, 1, 1, 0, 0x44, FOR_ALL, NULL}};

/* The small list.  Every mma.sync path: each layout and dtype on the
 * first shape, two on each other (fast and plain loads, K tails, edges,
 * bias, accumulate, bf16 C, batches).  The wgmma kernels (forced tiles
 * too) on their layout only (A M x K, B N x K: layout bits 2 and 6):
 * edges and K tails within a slice and past a stage's slices, bias and
 * accumulate with f32 and bf16 C, a batch, and K = 1096 (18 slices, more
 * than any ring holds: every ring wraps).  Persistent blocks that take
 * a second tile: SMs + 1 one-tile batch entries for 64 x 64 k4 (3
 * stages; K = 264 is 2 stages a tile, so the second tile reuses the
 * first's stages), SMs + 1 tile pairs for the clusters (sharing A: 64 x
 * 48 c2 k4; sharing B: 64 x 64 c2); the others' persistent loop is the
 * same code.
 * The automatic choice's split into two launches on the one shape that
 * makes it (2600 x 2100 x 16 on 132 SMs). */
static const variant_case small_cases[] = {
    {77, 93, 200, 1, 0, 0, 0, 0xff, FOR_ALL, NULL},
    {3, 300, 17, 1, 0, 0, 1, 0x81, FOR_ALL, NULL},
    {130, 70, 1, 3, 0, 0, 0, 0x42, FOR_ALL, NULL},
    {33, 129, 15, 1, 1, 0, 0, 0x18, FOR_ALL, NULL},
    {200, 64, 48, 1, 0, 1, 0, 0x24, FOR_ALL, NULL},
    {72, 264, 72, 2, 1, 0, 0, 0x42, FOR_ALL, NULL},
    {40, 40, 1096, 1, 0, 0, 0, 0x84, FOR_ALL, NULL},
    {128, 256, 136, 1, 0, 0, 0, 0x41, FOR_ALL, NULL},
    {260, 264, 200, 1, 0, 1, 0, 0x11, FOR_ALL, NULL},
    {65, 100, 136, 1, 1, 1, 1, 0x04, FOR_WGMMA, NULL},
    {50, 40, 264, -1, 0, 0, 0, 0x40, FOR_WGMMA, "wgmma-64x64k4"},
    {50, 90, 72, -1, 0, 0, 0, 0x04, FOR_WGMMA, "wgmma-64x48c2k4"},
    {120, 40, 72, -1, 0, 0, 0, 0x40, FOR_WGMMA, "wgmma-64x64c2"},
    {2600, 2100, 16, 1, 0, 0, 0, 0x04, FOR_AUTO, NULL}};

/* Every kernel variant against the model: the model is computed once per
 * case, then each variant that takes the case runs it.  The wgmma
 * variants (sm_90 with sm_90a code) take the cases with A as M x K and B
 * as N x K (ta 0, tb 1) and 8-element-aligned rows; mma.sync runs the
 * rest for them (in the small mode they get only their own cases). */
static void test_variants(void)
{
    static const char *const kernels[] = {"128x128",         "64x64",         "128x128-generic",
                                          "64x64-generic",   "wgmma",         "wgmma-128x256",
                                          "wgmma-128x128",   "wgmma-128x64",  "wgmma-64x256",
                                          "wgmma-64x128",    "wgmma-64x64",   "wgmma-128x192",
                                          "wgmma-128x160",   "wgmma-128x80",  "wgmma-64x48",
                                          /* clusters of two sharing one operand's loads */
                                          "wgmma-128x256c2", "wgmma-128x192c2", "wgmma-128x160c2",
                                          "wgmma-128x128c2", "wgmma-128x80c2", "wgmma-128x64c2",
                                          "wgmma-64x256c2",  "wgmma-64x128c2", "wgmma-64x64c2",
                                          "wgmma-64x48c2",
                                          /* 2 or 4 64-k slices a pipeline stage (K tails
                                           * inside a stage's second slice, stages past K) */
                                          "wgmma-128x256k2", "wgmma-128x80k2", "wgmma-64x48k2",
                                          "wgmma-128x128k4", "wgmma-64x64k4",  "wgmma-64x48c2k4",
                                          "wgmma-128x80c2k2",
                                          /* the chosen tile's columns in two launches */
                                          "wgmma-split", "wgmma-nosplit"};
    enum { NK = sizeof kernels / sizeof kernels[0] };
    const variant_case *cases = small ? small_cases : full_cases;
    const size_t ncases = small ? sizeof small_cases / sizeof small_cases[0]
                                : sizeof full_cases / sizeof full_cases[0];
    int bad[NK] = {0}, runs[NK] = {0}, n = 0;
    for (size_t s = 0; s < ncases; s++)
        for (int l = 0; l < 8; l++) {
            const variant_case *vc = &cases[s];
            if (!(vc->layouts >> l & 1))
                continue;
            int lay = l & 3;
            tc_case t = {l & 4 ? LK_F16 : LK_BF16, vc->c_bf16 ? LK_BF16 : LK_F32,
                         lay & 1 ? LK_TRANS : LK_NO_TRANS, lay & 2 ? LK_TRANS : LK_NO_TRANS,
                         vc->m, vc->n, vc->k, vc->batch > 0 ? vc->batch : -vc->batch * gpu_sms + 1,
                         vc->bias, vc->accumulate, (int)(s + (size_t)l) & 1,
                         NULL, NULL, NULL, NULL};
            /* the layout and rows the wgmma kernels take */
            const int wgmma_layout = lay == 2 && t.k % 8 == 0;
            case_fill(&t);
            void *g = malloc(out_bytes(&t)), *m = malloc(out_bytes(&t));
            run(cpu, cq, &t, gpu_tier, m);
            n++;
            for (int kv = 0; kv < NK; kv++) {
                const int is_wgmma = strncmp(kernels[kv], "wgmma", 5) == 0;
                const int is_auto = is_wgmma && !strchr(kernels[kv], 'x');
                if ((vc->who == FOR_WGMMA && !is_wgmma) || (vc->who == FOR_AUTO && !is_auto) ||
                    (vc->only && strcmp(vc->only, kernels[kv]) != 0) ||
                    (small && is_wgmma && !wgmma_layout))
                    continue;
                runs[kv]++;
                setenv("LOCKSTEP_CUDA_TC_KERNEL", kernels[kv], 1);
                lk_status st = run(gpu, gq, &t, gpu_tier, g);
                if (st != LK_OK || memcmp(g, m, out_bytes(&t))) {
                    if (bad[kv]++ < 4) {
                        diag("%s: %lldx%lldx%lld %s ta %d tb %d batch %lld%s: %s", kernels[kv],
                             (long long)t.m, (long long)t.n, (long long)t.k,
                             t.dt == LK_BF16 ? "bf16" : "f16", t.ta, t.tb, (long long)t.batch,
                             t.adversarial ? " adversarial" : "",
                             st ? lk_last_error() : "bits differ");
                        if (st == LK_OK)
                            show_diff(&t, g, m);
                    }
                }
            }
            free(g);
            free(m);
            case_free(&t);
        }
    unsetenv("LOCKSTEP_CUDA_TC_KERNEL");
    for (int kv = 0; kv < NK; kv++)
        ok(bad[kv] == 0 && runs[kv] > 0,
           "kernel %s = CPU model bit for bit (%d of %d cases: bf16/f16, layouts, odd "
           "shapes, bias, accumulate, batch, adversarial; %d differ)",
           kernels[kv], runs[kv], n, bad[kv]);
}

/* Row i of C is the same for every M; the full result is the same twice;
 * a few rows of it equal the model.  The small mode: M up to 520 and
 * K = 136 (the tile choices of the smaller M values, 64- and 128-row
 * tiles, edges). */
static void test_batch_invariance(void)
{
    const int64_t M = small ? 520 : 4096, N = 256, K = small ? 136 : 512;
    tc_case t = {LK_BF16, LK_F32, LK_NO_TRANS, LK_TRANS, M, N, K, 1, 0, 0, 0,
                 NULL, NULL, NULL, NULL};
    case_fill(&t);
    size_t rowb = (size_t)N * 4;
    float *full = malloc(out_bytes(&t)), *again = malloc(out_bytes(&t));
    lk_status st = run(gpu, gq, &t, gpu_tier, full);
    lk_status st2 = run(gpu, gq, &t, gpu_tier, again);
    ok(st == LK_OK && st2 == LK_OK && memcmp(full, again, out_bytes(&t)) == 0,
       "run to run: %lldx256x%lld twice, same bits", (long long)M, (long long)K);
    static const int64_t ms_full[] = {1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128,
                                      129, 255, 256, 257, 1000, 2047, 2048, 4095};
    static const int64_t ms_small[] = {1, 7, 17, 64, 65, 129, 257, 519};
    const int64_t *ms = small ? ms_small : ms_full;
    const size_t nms = small ? sizeof ms_small / sizeof ms_small[0]
                             : sizeof ms_full / sizeof ms_full[0];
    int bad = 0;
    /* the automatic choice (the tile, and on sm_90 wgmma, change with M),
     * then each M forced onto the other engine (mma.sync, or wgmma) */
    static const char *const kern[] = {"", "64x64", "wgmma"};
    for (size_t v = 0; v < 3; v++) {
        setenv("LOCKSTEP_CUDA_TC_KERNEL", kern[v], 1);
        for (size_t i = 0; i < nms; i++) {
            tc_case u = t;
            u.m = ms[i];
            float *part = malloc((size_t)u.m * rowb);
            st = run(gpu, gq, &u, gpu_tier, part);
            if (st != LK_OK || memcmp(part, full, (size_t)u.m * rowb)) {
                bad++;
                diag("kernel '%s', M = %lld: rows differ from M = %lld (%s)", kern[v],
                     (long long)u.m, (long long)M, st ? lk_last_error() : "bits");
            }
            free(part);
        }
    }
    unsetenv("LOCKSTEP_CUDA_TC_KERNEL");
    ok(bad == 0, "batch invariance: the first M rows equal M = %lld's for %zu values of M, "
                 "automatic kernel, 64x64 and wgmma forced", (long long)M, nms);
    /* rows 0..7 and the last 8 against the model */
    tc_case h = t;
    h.m = 8;
    float *model = malloc(8 * rowb);
    run(cpu, cq, &h, gpu_tier, model);
    int same = memcmp(model, full, 8 * rowb) == 0;
    h.a = t.a + (M - 8) * K;
    run(cpu, cq, &h, gpu_tier, model);
    same &= memcmp(model, full + (M - 8) * N, 8 * rowb) == 0;
    ok(same, "M = %lld: first and last 8 rows equal the CPU model", (long long)M);
    free(model);
    free(full);
    free(again);
    case_free(&t);
}

static void test_refusal(void)
{
    unsigned other = gpu_tier == LK_GEMM_TC_SM90 ? LK_GEMM_TC_SM80 : LK_GEMM_TC_SM90;
    tc_case t = {LK_BF16, LK_F32, LK_NO_TRANS, LK_TRANS, 4, 4, 16, 1, 0, 0, 0,
                 NULL, NULL, NULL, NULL};
    case_fill(&t);
    float out[16];
    lk_status st = run(gpu, gq, &t, other, out);
    ok(st == LK_ERR_UNSUPPORTED, "the other tier is refused on this GPU: %s", lk_last_error());
    case_free(&t);
}

int main(void)
{
#ifdef LK_CUDA_MODULE_DIR
    {
        const char *old = getenv("LOCKSTEP_DRIVER_PATH");
        size_t len = strlen(LK_CUDA_MODULE_DIR) + (old ? strlen(old) : 0) + 2;
        char *path = malloc(len);
        if (path) {
            snprintf(path, len, "%s%s%s", LK_CUDA_MODULE_DIR, old && *old ? ":" : "",
                     old ? old : "");
            setenv("LOCKSTEP_DRIVER_PATH", path, 1);
            free(path);
        }
    }
#endif
    rng = tap_seed();
    small = getenv("LOCKSTEP_CUDA_TEST_SMALL") && *getenv("LOCKSTEP_CUDA_TEST_SMALL") == '1';
    diag("mode: %s", small ? "small (LOCKSTEP_CUDA_TEST_SMALL=1): the fewest, smallest GPU "
                             "cases that reach every kernel variant's paths"
                           : "full (LOCKSTEP_CUDA_TEST_SMALL=1: the sanitizers' small mode)");
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    if (lk_device_find(ctx, "ref", &ref) || lk_queue_create(ref, NULL, &rq) ||
        lk_device_find(ctx, "cpu", &cpu) || lk_queue_create(cpu, NULL, &cq))
        bail("no ref or cpu device: %s", lk_last_error());
    test_api();
    test_cpu_vs_ref();

    const char *why = NULL;
    char buf[256];
    if (lk_device_find(ctx, "cuda:0", &gpu) != LK_OK) {
        why = "no CUDA device (or the CUDA driver is not built)";
    } else {
        lk_device_props p;
        lk_device_props_get(gpu, &p);
        const char *s = strstr(p.description, "sm_");
        int sm = s ? atoi(s + 3) : 0;
        /* "..., sm_90, 132 SMs, ...": the SMs the persistent kernels fill */
        const char *c = s ? strchr(s, ',') : NULL;
        if (c && atoi(c + 1) > 0 && strstr(c, " SMs"))
            gpu_sms = atoi(c + 1);
        diag("cuda:0 is %s", p.description);
        if (sm == 80 || sm == 86 || sm == 89)
            gpu_tier = LK_GEMM_TC_SM80;
        else if (sm == 90)
            gpu_tier = LK_GEMM_TC_SM90;
        snprintf(buf, sizeof buf, "cuda:0 (%s) has no tensor-core tier", p.description);
        if (!gpu_tier)
            why = buf;
        else if (lk_queue_create(gpu, NULL, &gq) != LK_OK)
            bail("no queue on cuda:0: %s", lk_last_error());
    }
    if (why) {
        skip(39, "%s", why); /* identify 1, variants 34, batch invariance 3, refusal 1 */
    } else {
        test_identify();
        test_variants();
        test_batch_invariance();
        test_refusal();
        lk_queue_destroy(gq);
    }
    lk_queue_destroy(cq);
    lk_queue_destroy(rq);
    lk_context_destroy(ctx);
    return done_testing();
}
