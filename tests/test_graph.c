/* Graph capture (include/lockstep/graph.h) on every device present: a
 * sequence of ops captured once and launched with changing buffer contents
 * gives, every time, the bits of the same ops run eagerly (memcmp); the
 * capture writes nothing; and the errors: end without begin, nested begin,
 * sync / lk_ternary_pack / lk_weights_prepare / a launch during a capture
 * (refused, the capture goes on), a bad call during a capture, a launch on
 * another device's queue, a queue destroyed under its graphs, a bad id read
 * by lk_embedding inside a graph (reported by the next lk_queue_sync,
 * nothing written).  GPUs capture CUDA graphs; other devices replay the
 * calls recorded by the core. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

#define M 3    /* tokens */
#define V 50   /* vocabulary */
#define D 256  /* model width (K of the ternary GEMM) */
#define N 40   /* ternary GEMM outputs */
#define NO 24  /* logits */
#define LAUNCHES 3

static uint64_t rng;

/* The buffers of one device (all lk_malloc'd on it). */
typedef struct bufs {
    lk_device *dev;
    lk_queue *q;
    int host;
    void *table, *ids, *normw, *x, *xn, *xq, *xs, *w, *ws, *y, *b, *z, *p, *am, *am2;
} bufs;

/* Host inputs of one run. */
typedef struct inputs {
    uint16_t table[V * D];
    int32_t ids[M];
    float normw[D];
    uint8_t w[N * D / 4];
    float ws[1];
    float b[NO * N];
} inputs;

/* Host outputs of one run. */
typedef struct outputs {
    float x[M * D], y[M * N], p[M * NO];
    int64_t am[M], am2[M];
} outputs;

static float urand(void)
{
    return (float)(int32_t)(tap_rand(&rng) >> 40 & 0xffff) / 32768.0f - 1.0f;
}

static void make_inputs(inputs *in, int full)
{
    if (full) {
        for (int i = 0; i < V * D; i++)
            in->table[i] = lk_f32_to_bf16(urand());
        for (int i = 0; i < N * D / 4; i++) {
            uint8_t v = 0;
            for (int j = 0; j < 4; j++)
                v |= (uint8_t)((tap_rand(&rng) % 3u) << 2 * j);
            in->w[i] = v;
        }
        in->ws[0] = 0.0625f;
        for (int i = 0; i < NO * N; i++)
            in->b[i] = urand() * 0.25f;
    }
    /* what changes between launches: the ids and the norm's weight */
    for (int i = 0; i < M; i++)
        in->ids[i] = (int32_t)(tap_rand(&rng) % V);
    for (int i = 0; i < D; i++)
        in->normw[i] = 1.0f + urand() * 0.5f;
}

static int balloc(bufs *B, void **p, size_t bytes)
{
    return lk_malloc(B->dev, bytes, p) == LK_OK;
}

static int bufs_make(bufs *B, lk_device *dev)
{
    memset(B, 0, sizeof *B);
    B->dev = dev;
    lk_device_props pr;
    if (lk_device_props_get(dev, &pr) != LK_OK || lk_queue_create(dev, NULL, &B->q) != LK_OK)
        return 0;
    B->host = pr.host_memory;
    return balloc(B, &B->table, sizeof(uint16_t) * V * D) && balloc(B, &B->ids, 4 * M) &&
           balloc(B, &B->normw, 4 * D) && balloc(B, &B->x, 4 * M * D) &&
           balloc(B, &B->xn, 4 * M * D) && balloc(B, &B->xq, M * D) && balloc(B, &B->xs, 4 * M) &&
           balloc(B, &B->w, N * D / 4) && balloc(B, &B->ws, 4) && balloc(B, &B->y, 4 * M * N) &&
           balloc(B, &B->b, 4 * NO * N) && balloc(B, &B->z, 4 * M * NO) &&
           balloc(B, &B->p, 4 * M * NO) && balloc(B, &B->am, 8 * M) && balloc(B, &B->am2, 8 * M);
}

static void bufs_free(bufs *B)
{
    void *all[] = {B->table, B->ids, B->normw, B->x, B->xn, B->xq, B->xs, B->w,
                   B->ws, B->y, B->b, B->z, B->p, B->am, B->am2};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i])
            lk_free(B->dev, all[i]);
    if (B->q)
        lk_queue_destroy(B->q);
}

static lk_status upload(bufs *B, const inputs *in, int full)
{
    lk_status st = LK_OK;
#define UP(dst, src, n)                                                                 \
    if (st == LK_OK)                                                                    \
    st = lk_memcpy(B->q, B->dst, src, n, LK_COPY_HOST_TO_DEVICE)
    if (full) {
        UP(table, in->table, sizeof in->table);
        UP(w, in->w, sizeof in->w);
        UP(ws, in->ws, sizeof in->ws);
        UP(b, in->b, sizeof in->b);
    }
    UP(ids, in->ids, sizeof in->ids);
    UP(normw, in->normw, sizeof in->normw);
#undef UP
    if (st == LK_OK)
        st = lk_queue_sync(B->q);
    return st;
}

static lk_status download(bufs *B, outputs *out)
{
    lk_status st = LK_OK;
#define DOWN(dst, src, n)                                                               \
    if (st == LK_OK)                                                                    \
    st = lk_memcpy(B->q, dst, B->src, n, LK_COPY_DEVICE_TO_HOST)
    DOWN(out->x, x, sizeof out->x);
    DOWN(out->y, y, sizeof out->y);
    DOWN(out->p, p, sizeof out->p);
    DOWN(out->am, am, sizeof out->am);
    DOWN(out->am2, am2, sizeof out->am2);
#undef DOWN
    if (st == LK_OK)
        st = lk_queue_sync(B->q);
    return st;
}

/* Fill the outputs with a pattern (to see that a capture writes nothing). */
static lk_status poison(bufs *B)
{
    static unsigned char pat[4 * M * D];
    memset(pat, 0xa5, sizeof pat);
    lk_status st = LK_OK;
    void *o[] = {B->x, B->y, B->p, B->am, B->am2};
    size_t n[] = {4 * M * D, 4 * M * N, 4 * M * NO, 8 * M, 8 * M};
    for (int i = 0; i < 5 && st == LK_OK; i++)
        st = lk_memcpy(B->q, o[i], pat, n[i], LK_COPY_HOST_TO_DEVICE);
    return st == LK_OK ? lk_queue_sync(B->q) : st;
}

static int poisoned(const outputs *o)
{
    const unsigned char *c = (const unsigned char *)o;
    for (size_t i = 0; i < sizeof *o; i++)
        if (c[i] != 0xa5)
            return 0;
    return 1;
}

/* The sequence: embedding, rmsnorm, quantize_act, ternary_gemm, gemm,
 * softmax, argmax, a device-to-device copy.  Returns the number of calls
 * made, or -1 (with the failing call in *what). */
static int sequence(bufs *B, const char **what)
{
    lk_queue *q = B->q;
    lk_tensor table = lk_mat(B->table, LK_BF16, V, D), ids = lk_mat(B->ids, LK_I32, M, 1);
    lk_tensor x = lk_mat(B->x, LK_F32, M, D), xn = lk_mat(B->xn, LK_F32, M, D);
    lk_tensor nw = lk_mat(B->normw, LK_F32, 1, D);
    lk_tensor xq = lk_mat(B->xq, LK_I8, M, D), xs = lk_mat(B->xs, LK_F32, M, 1);
    lk_tensor w = lk_mat(B->w, LK_T2, N, D), ws = lk_mat(B->ws, LK_F32, 1, 1);
    lk_tensor y = lk_mat(B->y, LK_F32, M, N), b = lk_mat(B->b, LK_F32, NO, N);
    lk_tensor z = lk_mat(B->z, LK_F32, M, NO), p = lk_mat(B->p, LK_F32, M, NO);
    lk_tensor am = lk_mat(B->am, LK_I64, M, 1);
#define STEP(call)                                                                      \
    do {                                                                                \
        if ((call) != LK_OK) {                                                          \
            *what = #call;                                                              \
            return -1;                                                                  \
        }                                                                               \
    } while (0)
    STEP(lk_embedding(q, &table, &ids, &x));
    STEP(lk_rmsnorm(q, &x, &nw, 1e-5f, &xn));
    STEP(lk_quantize_act(q, &xn, &xq, &xs));
    STEP(lk_ternary_gemm(q, &xq, &xs, &w, &ws, &y));
    STEP(lk_gemm(q, LK_NO_TRANS, LK_TRANS, &y, &b, NULL, &z, 1, 0));
    STEP(lk_softmax(q, &z, &p));
    STEP(lk_reduce(q, LK_REDUCE_ARGMAX, &p, &am));
    STEP(lk_memcpy(q, B->am2, B->am, 8 * M, LK_COPY_DEVICE_TO_DEVICE));
#undef STEP
    return 8;
}

static void test_device(lk_device *dev)
{
    const char *name = lk_device_name(dev);
    bufs B;
    inputs *in = calloc(1, sizeof *in);
    outputs *want = calloc(1, sizeof *want), *got = calloc(1, sizeof *got);
    const char *what = "";
    if (!in || !want || !got || !bufs_make(&B, dev)) {
        ok(0, "%s: buffers and a queue (%s)", name, lk_last_error());
        skip(8, "%s: no buffers", name);
        bufs_free(&B);
        free(in), free(want), free(got);
        return;
    }
    make_inputs(in, 1);
    int good = upload(&B, in, 1) == LK_OK && poison(&B) == LK_OK;
    if (good && sequence(&B, &what) < 0) {
        if (strstr(lk_last_error(), "LK_ERR_UNSUPPORTED") ||
            strstr(lk_last_error(), "does not implement") || strstr(lk_last_error(), "support")) {
            skip(9, "%s does not run the sequence: %s: %s", name, what, lk_last_error());
            bufs_free(&B);
            free(in), free(want), free(got);
            return;
        }
        good = 0;
    }
    ok(good && lk_queue_sync(B.q) == LK_OK, "%s: the sequence runs eagerly%s%s", name,
       good ? "" : ": ", good ? "" : lk_last_error());

    /* Capture: nothing runs, nothing is written. */
    lk_graph *g = NULL;
    int ncalls = -1;
    good = poison(&B) == LK_OK && lk_queue_capture_begin(B.q) == LK_OK;
    int capt = good && lk_queue_capturing(B.q) == 1;
    if (good && (ncalls = sequence(&B, &what)) < 0)
        diag("%s: %s during capture: %s", name, what, lk_last_error());
    good = good && lk_queue_capture_end(B.q, &g) == LK_OK && ncalls > 0;
    ok(good && capt && !lk_queue_capturing(B.q), "%s: the sequence is captured%s%s", name,
       good ? "" : ": ", good ? "" : lk_last_error());
    int native = -1;
    int64_t nops = -1;
    int info = g && lk_graph_info(g, &native, &nops) == LK_OK;
    ok(info && nops == ncalls, "%s: the graph holds the %d calls (%lld)", name, ncalls,
       (long long)nops);
    diag("%s: %s graph", name, native == 1 ? "a native (CUDA)" : "a host-recorded");
    ok(download(&B, got) == LK_OK && poisoned(got), "%s: the capture wrote nothing", name);

    /* Launches with new contents, against the eager run of the same inputs. */
    int same = g != NULL, ran = g != NULL;
    for (int l = 0; l < LAUNCHES && g; l++) {
        make_inputs(in, 0);
        int e = upload(&B, in, 0) == LK_OK && sequence(&B, &what) == 8 &&
                lk_queue_sync(B.q) == LK_OK && download(&B, want) == LK_OK;
        int r = poison(&B) == LK_OK && upload(&B, in, 0) == LK_OK &&
                lk_graph_launch(g, B.q) == LK_OK && lk_queue_sync(B.q) == LK_OK &&
                download(&B, got) == LK_OK;
        if (!e || !r)
            diag("%s: launch %d: %s", name, l, lk_last_error());
        ran &= e && r;
        same &= e && r && !memcmp(want, got, sizeof *want);
    }
    ok(ran, "%s: %d launches with changing ids and weights run", name, LAUNCHES);
    ok(same, "%s: every launch gives the eager run's bits (memcmp)", name);
    /* Launched twice in a row without a sync: the same bits again. */
    int twice = g && lk_graph_launch(g, B.q) == LK_OK && lk_graph_launch(g, B.q) == LK_OK &&
                lk_queue_sync(B.q) == LK_OK && download(&B, got) == LK_OK &&
                !memcmp(want, got, sizeof *want);
    ok(twice, "%s: two launches back to back: the same bits", name);

    /* A bad id inside the graph: reported by the next sync, nothing written
     * by that lookup, the queue usable after. */
    if (g) {
        static float pat[M * D];
        memset(pat, 0xa5, sizeof pat);
        int32_t bad[M] = {1, V + 5, 2};
        lk_status s1 = lk_memcpy(B.q, B.x, pat, sizeof pat, LK_COPY_HOST_TO_DEVICE);
        if (s1 == LK_OK)
            s1 = lk_memcpy(B.q, B.ids, bad, sizeof bad, LK_COPY_HOST_TO_DEVICE);
        if (s1 == LK_OK)
            s1 = lk_queue_sync(B.q);
        lk_status sl = s1 == LK_OK ? lk_graph_launch(g, B.q) : s1;
        lk_status ss = sl == LK_OK ? lk_queue_sync(B.q) : sl;
        char msg[400];
        snprintf(msg, sizeof msg, "%s", lk_last_error());
        float xb[M * D];
        int untouched = lk_memcpy(B.q, xb, B.x, sizeof xb, LK_COPY_DEVICE_TO_HOST) == LK_OK &&
                        lk_queue_sync(B.q) == LK_OK && !memcmp(xb, pat, sizeof xb);
        ok(sl == LK_OK && ss == LK_ERR_RANGE && strstr(msg, "ids[1]") && untouched &&
               lk_queue_sync(B.q) == LK_OK,
           "%s: a bad id in a launched graph: the next sync says LK_ERR_RANGE (%s), the "
           "lookup wrote nothing, the next sync is clean",
           name, msg);
    } else {
        skip(1, "%s: no graph", name);
    }

    /* The queue cannot go while its graph exists. */
    lk_status sd = lk_queue_destroy(B.q);
    ok(g && sd == LK_ERR_INVALID_ARGUMENT, "%s: lk_queue_destroy with a live graph is refused (%s)",
       name, lk_last_error());
    lk_graph_destroy(g);
    bufs_free(&B);
    free(in), free(want), free(got);
}

/* The errors, on one device. */
static void test_errors(lk_device *dev, lk_device *other)
{
    const char *name = lk_device_name(dev);
    lk_queue *q = NULL;
    lk_graph *g = NULL;
    void *a = NULL, *c = NULL;
    if (lk_queue_create(dev, NULL, &q) != LK_OK || lk_malloc(dev, 64 * 4, &a) != LK_OK ||
        lk_malloc(dev, 64 * 4, &c) != LK_OK)
        bail("%s: %s", name, lk_last_error());
    lk_tensor x = lk_mat(a, LK_F32, 4, 16), y = lk_mat(c, LK_F32, 4, 16);
    lk_tensor bad = lk_mat(c, LK_F32, 5, 16);

    ok(lk_queue_capture_end(q, &g) == LK_ERR_INVALID_ARGUMENT && !g,
       "%s: capture_end without begin: LK_ERR_INVALID_ARGUMENT (%s)", name, lk_last_error());
    ok(lk_queue_capture_begin(NULL) == LK_ERR_NULL_POINTER && lk_graph_launch(NULL, q) ==
           LK_ERR_NULL_POINTER && lk_queue_capturing(NULL) == 0,
       "%s: NULL queue or graph: LK_ERR_NULL_POINTER", name);

    ok(lk_queue_capture_begin(q) == LK_OK, "%s: capture_begin", name);
    ok(lk_queue_capture_begin(q) == LK_ERR_INVALID_ARGUMENT,
       "%s: a nested capture_begin: LK_ERR_INVALID_ARGUMENT (%s)", name, lk_last_error());
    ok(lk_queue_sync(q) == LK_ERR_UNSUPPORTED,
       "%s: lk_queue_sync while capturing: LK_ERR_UNSUPPORTED (%s)", name, lk_last_error());
    lk_tensor w8 = lk_mat(a, LK_I8, 4, 16), w2 = lk_mat(c, LK_T2, 4, 16);
    ok(lk_ternary_pack(q, &w8, &w2) == LK_ERR_UNSUPPORTED,
       "%s: lk_ternary_pack while capturing: LK_ERR_UNSUPPORTED (%s)", name, lk_last_error());
    lk_weights *wh = NULL;
    ok(lk_weights_prepare(q, &x, NULL, &wh) == LK_ERR_UNSUPPORTED && !wh,
       "%s: lk_weights_prepare while capturing: LK_ERR_UNSUPPORTED (%s)", name, lk_last_error());
    ok(lk_softmax(q, &x, &bad) == LK_ERR_BAD_SHAPE,
       "%s: a bad call while capturing fails as usual (%s)", name, lk_last_error());
    /* The capture goes on: one good call, then end. */
    ok(lk_softmax(q, &x, &y) == LK_OK && lk_queue_capture_end(q, &g) == LK_OK && g,
       "%s: after the refusals the capture goes on and ends", name);
    int64_t nops = -1;
    int info = g && lk_graph_info(g, NULL, &nops) == LK_OK;
    ok(info && nops == 1, "%s: the graph holds only the good call (%lld)", name,
       (long long)nops);

    ok(lk_queue_capture_begin(q) == LK_OK && lk_graph_launch(g, q) == LK_ERR_UNSUPPORTED,
       "%s: launching a graph into a capture: LK_ERR_UNSUPPORTED (%s)", name, lk_last_error());
    lk_graph *empty = NULL;
    int64_t n0 = -1;
    ok(lk_queue_capture_end(q, &empty) == LK_OK && lk_graph_info(empty, NULL, &n0) == LK_OK &&
           n0 == 0 && lk_graph_launch(empty, q) == LK_OK && lk_queue_sync(q) == LK_OK,
       "%s: an empty capture gives a graph that launches (%s)", name, lk_last_error());
    lk_graph_destroy(empty);

    if (other) {
        lk_queue *q2 = NULL;
        if (lk_queue_create(other, NULL, &q2) != LK_OK)
            bail("%s: %s", lk_device_name(other), lk_last_error());
        ok(lk_graph_launch(g, q2) == LK_ERR_WRONG_DEVICE,
           "%s: launching its graph on a queue of %s: LK_ERR_WRONG_DEVICE (%s)", name,
           lk_device_name(other), lk_last_error());
        lk_queue_destroy(q2);
    } else {
        skip(1, "%s: no other device to launch on", name);
    }
    /* A second queue of the same device may launch it. */
    lk_queue *q3 = NULL;
    ok(lk_queue_create(dev, NULL, &q3) == LK_OK && lk_graph_launch(g, q3) == LK_OK &&
           lk_queue_sync(q3) == LK_OK,
       "%s: another queue of the device launches the graph", name);
    lk_queue_destroy(q3);

    /* A queue destroyed while capturing: the capture is discarded. */
    lk_queue *q4 = NULL;
    ok(lk_queue_create(dev, NULL, &q4) == LK_OK && lk_queue_capture_begin(q4) == LK_OK &&
           lk_softmax(q4, &x, &y) == LK_OK && lk_queue_destroy(q4) == LK_OK,
       "%s: a queue destroyed while capturing", name);

    ok(lk_queue_destroy(q) == LK_ERR_INVALID_ARGUMENT,
       "%s: lk_queue_destroy before lk_graph_destroy: refused (%s)", name, lk_last_error());
    lk_graph_destroy(g);
    lk_graph_destroy(NULL);
    ok(lk_queue_destroy(q) == LK_OK, "%s: lk_queue_destroy after lk_graph_destroy", name);
    lk_free(dev, a);
    lk_free(dev, c);
}

int main(void)
{
    rng = tap_seed();
    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("lk_context_create: %s", lk_last_error());
    lk_device *ref = NULL, *cpu = NULL;
    if (lk_device_find(ctx, "ref", &ref) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    if (lk_device_find(ctx, "cpu", &cpu) != LK_OK)
        cpu = NULL;
    test_errors(ref, cpu);

    int n = lk_device_count(ctx), gpus = 0;
    for (int i = 0; i < n; i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK)
            continue;
        /* "cpu" is one of the cpu:<isa> devices under another name */
        if (!strcmp(p.name, "cpu") && n > 2)
            continue;
        test_device(d);
        if (p.kind == LK_DEVICE_GPU) {
            gpus++;
            test_errors(d, ref);
        }
    }
    if (!gpus)
        skip(1, "no GPU: CUDA graphs are not tested here (%s)",
             lk_context_auto_reason(ctx));
    lk_context_destroy(ctx);
    return done_testing();
}
