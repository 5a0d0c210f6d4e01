/* Lockstep tests: lk_rmsnorm_ternary_linear is lk_rmsnorm_quantize then
 * lk_ternary_linear, bit for bit (y, xq and xs), on every device: decode
 * and prefill row counts, BitNet widths and odd K, norm weight present and
 * absent, with and without LK_GEMM_ACCUMULATE, NaN and Inf rows, inside a
 * captured graph, many calls back to back; its argument errors leave every
 * output untouched. */
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
    int64_t m, k, n;
    lk_dtype xd, yd;
    int per_n; /* w_scale 1 x N, else 1 x 1 */
} tcase;

static const tcase cases[] = {
    {1, 2560, 640, LK_F32, LK_F32, 1},   {2, 4096, 640, LK_F32, LK_F32, 0},
    {3, 4097, 640, LK_BF16, LK_F32, 1},  {8, 6912, 640, LK_F32, LK_F32, 1},
    {9, 100, 2560, LK_F32, LK_F32, 0},   {33, 2560, 640, LK_F32, LK_F32, 1},
    {1, 6912, 2560, LK_F32, LK_F32, 1},  {3, 100, 640, LK_F32, LK_BF16, 1},
    {1, 4096, 2560, LK_BF16, LK_F32, 0}, {2, 4097, 2560, LK_F32, LK_F32, 1},
    /* one row (decode): K on both sides of 1024, odd K and N, K = 1, the
     * FFN's gate and up (13824 rows) */
    {1, 1, 9, LK_F32, LK_F32, 1},        {1, 100, 333, LK_F16, LK_F32, 0},
    {1, 1024, 70, LK_F32, LK_BF16, 1},   {1, 1025, 2000, LK_BF16, LK_F32, 1},
    {1, 3001, 17, LK_F32, LK_F32, 0},    {1, 2560, 13824, LK_F32, LK_F32, 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define NVAR 4 /* norm weight present/absent x accumulate or not */

static uint64_t rng;

static float rnd(void) /* [-4, 4) */
{
    return (float)((double)(tap_rand(&rng) >> 40) / (double)(1ull << 21) - 4.0);
}

/* LK_T2 rows of n x k random codes 0..2, padding code 1, ld a multiple of 4 */
static uint8_t *t2_rand(int64_t n, int64_t k, int64_t *ld)
{
    *ld = (k + 3) / 4 * 4;
    const int64_t rb = *ld / 4;
    uint8_t *w = malloc((size_t)(n * rb));
    if (!w)
        bail("out of memory");
    for (int64_t r = 0; r < n; r++)
        for (int64_t b = 0; b < rb; b++) {
            uint8_t v = 0;
            for (int j = 0; j < 4; j++) {
                int64_t c = b * 4 + j;
                unsigned code = c < k ? (unsigned)(tap_rand(&rng) % 3) : 1u;
                v |= (uint8_t)(code << (2 * j));
            }
            w[r * rb + b] = v;
        }
    return w;
}

typedef struct outs {
    dbuf q, s, y;
} outs;

/* fused into o1, composition into o2; 1 when both ran */
static int run_pair(lk_queue *q, const lk_tensor *x, const lk_tensor *nw, const lk_weights *pw,
                    const tcase *c, unsigned flags, outs *o1, outs *o2, lk_status *sf,
                    int graph)
{
    lk_tensor q1 = lk_mat(o1->q.p, LK_I8, c->m, c->k), q2 = lk_mat(o2->q.p, LK_I8, c->m, c->k);
    lk_tensor s1 = lk_mat(o1->s.p, LK_F32, c->m, 1), s2 = lk_mat(o2->s.p, LK_F32, c->m, 1);
    lk_tensor y1 = lk_mat(o1->y.p, c->yd, c->m, c->n), y2 = lk_mat(o2->y.p, c->yd, c->m, c->n);
    if (graph) {
        lk_graph *g = NULL;
        if (lk_queue_capture_begin(q) != LK_OK)
            return 0;
        *sf = lk_rmsnorm_ternary_linear(q, x, nw, 1e-5f, &q1, &s1, pw, &y1, flags);
        lk_status se = lk_queue_capture_end(q, &g);
        if (*sf != LK_OK || se != LK_OK) {
            lk_graph_destroy(g); /* NULL: nothing */
            return 0;
        }
        *sf = lk_graph_launch(g, q);
        lk_status ss = lk_queue_sync(q);
        lk_graph_destroy(g);
        if (*sf != LK_OK || ss != LK_OK)
            return 0;
    } else {
        *sf = lk_rmsnorm_ternary_linear(q, x, nw, 1e-5f, &q1, &s1, pw, &y1, flags);
        if (*sf != LK_OK)
            return 0;
    }
    return lk_rmsnorm_quantize(q, x, nw, 1e-5f, &q2, &s2) == LK_OK &&
           lk_ternary_linear(q, &q2, &s2, pw, &y2, flags) == LK_OK;
}

static void run_case(lk_device *d, lk_queue *q, const tcase *c, int ci, int graph)
{
    const int64_t M = c->m, K = c->k, N = c->n;
    const size_t nx = (size_t)(M * K);
    float *v = malloc(nx * 4), *wv = malloc((size_t)K * 4), *yv = malloc((size_t)(M * N) * 4);
    float *sv = malloc((size_t)N * 4);
    void *xh = malloc(nx * 4), *wh = malloc((size_t)K * 4), *yh = malloc((size_t)(M * N) * 4);
    const size_t yb = (size_t)(M * N) * test_esize(c->yd);
    unsigned char *h1 = malloc(nx + yb), *h2 = malloc(nx + yb);
    if (!v || !wv || !yv || !sv || !xh || !wh || !yh || !h1 || !h2)
        bail("out of memory");
    for (size_t i = 0; i < nx; i++)
        v[i] = rnd();
    if (M > 1) /* a NaN row and an Inf row */
        v[K + K / 3] = __builtin_nanf("");
    if (M > 2)
        v[2 * K + 1] = -__builtin_inff();
    for (int64_t i = 0; i < K; i++)
        wv[i] = rnd();
    for (int64_t i = 0; i < M * N; i++)
        yv[i] = rnd();
    for (int64_t i = 0; i < N; i++)
        sv[i] = 0.25f + (float)(tap_rand(&rng) % 1000) / 997.0f;
    test_fill(xh, c->xd, v, nx);
    test_fill(wh, LK_F32, wv, (size_t)K);
    test_fill(yh, c->yd, yv, (size_t)(M * N));
    int64_t ld;
    uint8_t *codes = t2_rand(N, K, &ld);

    dbuf xb = {0}, nwb = {0}, wb = {0}, wsb = {0};
    outs o1 = {{0}, {0}, {0}}, o2 = {{0}, {0}, {0}};
    int okb = dbuf_up(d, q, &xb, xh, nx * test_esize(c->xd)) &&
              dbuf_up(d, q, &nwb, wh, (size_t)K * 4) &&
              dbuf_up(d, q, &wb, codes, (size_t)(N * ld / 4)) &&
              dbuf_up(d, q, &wsb, sv, (size_t)(c->per_n ? N : 1) * 4) &&
              dbuf_up(d, q, &o1.q, NULL, nx) &&
              dbuf_up(d, q, &o2.q, NULL, nx) && dbuf_up(d, q, &o1.s, NULL, (size_t)M * 4) &&
              dbuf_up(d, q, &o2.s, NULL, (size_t)M * 4) && dbuf_up(d, q, &o1.y, NULL, yb) &&
              dbuf_up(d, q, &o2.y, NULL, yb);
    if (!okb)
        bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
    lk_tensor x = lk_mat(xb.p, c->xd, M, K), nw = lk_mat(nwb.p, LK_F32, 1, K);
    lk_tensor wt = lk_mat(wb.p, LK_T2, N, K), ws = lk_mat(wsb.p, LK_F32, 1, c->per_n ? N : 1);
    wt.ld = ld;
    lk_weights *pw = NULL;
    if (lk_weights_prepare(q, &wt, &ws, &pw) != LK_OK)
        bail("%s: prepare: %s", lk_device_name(d), lk_last_error());
    for (int var = 0; var < NVAR; var++) {
        if (graph && var != 3)
            continue;
        const int has_nw = !(var & 1);
        const unsigned flags = (var & 2) && c->yd == LK_F32 ? LK_GEMM_ACCUMULATE : 0;
        /* fresh outputs: y the same old values for both, xq and xs junk */
        memset(h1, 0x5a, nx);
        int good = lk_memcpy(q, o1.q.p, h1, nx, LK_COPY_HOST_TO_DEVICE) == LK_OK &&
                   lk_memcpy(q, o1.y.p, yh, yb, LK_COPY_HOST_TO_DEVICE) == LK_OK &&
                   lk_memcpy(q, o2.y.p, yh, yb, LK_COPY_HOST_TO_DEVICE) == LK_OK;
        lk_status sf = LK_OK;
        good = good && run_pair(q, &x, has_nw ? &nw : NULL, pw, c, flags, &o1, &o2, &sf, graph);
        if (!good && sf == LK_ERR_UNSUPPORTED) {
            skip(1, "[%d.%d] on %s: unsupported (%s)", ci, var, lk_device_name(d),
                 lk_last_error());
            continue;
        }
        int same = 0;
        const char *what = "status";
        if (good) {
            float s1[64], s2[64];
            good = dbuf_down(q, h1, &o1.q) && dbuf_down(q, h2, &o2.q) &&
                   dbuf_down(q, s1, &o1.s) && dbuf_down(q, s2, &o2.s) &&
                   dbuf_down(q, h1 + nx, &o1.y) && dbuf_down(q, h2 + nx, &o2.y);
            same = good;
            if (same && memcmp(h1, h2, nx))
                same = 0, what = "xq";
            if (same && memcmp(s1, s2, (size_t)M * 4))
                same = 0, what = "xs";
            if (same && memcmp(h1 + nx, h2 + nx, yb))
                same = 0, what = "y";
        }
        ok(same, "[%d.%d]%s M=%lld K=%lld N=%lld x %s y %s norm %s%s on %s: == composition", ci,
           var, graph ? " graph" : "", (long long)M, (long long)K, (long long)N,
           lk_dtype_name(c->xd), lk_dtype_name(c->yd),
           has_nw ? "f32" : "none", flags ? " accumulate" : "", lk_device_name(d));
        if (!same)
            diag("  %s differs (status %s: %s)", what, lk_status_string(sf), lk_last_error());
    }
    lk_weights_destroy(pw);
    dbuf *all[] = {&xb, &nwb, &wb, &wsb, &o1.q, &o2.q, &o1.s, &o2.s, &o1.y, &o2.y};
    for (int i = 0; i < 10; i++)
        dbuf_free(d, all[i]);
    free(v), free(wv), free(yv), free(sv), free(xh), free(wh), free(yh), free(h1), free(h2);
    free(codes);
}

/* Calls back to back with one xq / xs pair and y accumulating, x
 * alternating between two inputs: CHAIN eager calls, then a graph of
 * GCALLS calls replayed GREPS times, against as many composition calls.
 * A driver whose fused op let the projection read xq or xs before the
 * norm of the same call had stored them (a flag between two kernels, one
 * kernel's blocks running ahead) would read the other input's and change
 * y; so would one that kept state from call to call wrongly. */
#define CHAIN 16
#define GCALLS 4
#define GREPS 4
static void test_chain(lk_device *d, lk_queue *q, int64_t M)
{
    const int64_t K = 2560, N = 640;
    const size_t nx = (size_t)(M * K), ny = (size_t)(M * N) * 4;
    float *xv = malloc(2 * nx * 4), *yv = malloc(ny), *sv = malloc((size_t)N * 4);
    unsigned char *h1 = malloc(ny), *h2 = malloc(ny);
    if (!xv || !yv || !sv || !h1 || !h2)
        bail("out of memory");
    for (size_t i = 0; i < 2 * nx; i++)
        xv[i] = rnd();
    for (size_t i = 0; i < ny / 4; i++)
        yv[i] = rnd();
    for (int64_t i = 0; i < N; i++)
        sv[i] = 0.25f + (float)(tap_rand(&rng) % 1000) / 997.0f;
    int64_t ld;
    uint8_t *codes = t2_rand(N, K, &ld);
    dbuf xb = {0}, wb = {0}, wsb = {0}, qb = {0}, sb = {0}, y1b = {0}, y2b = {0};
    if (!(dbuf_up(d, q, &xb, xv, 2 * nx * 4) && dbuf_up(d, q, &wb, codes, (size_t)(N * ld / 4)) &&
          dbuf_up(d, q, &wsb, sv, (size_t)N * 4) && dbuf_up(d, q, &qb, NULL, nx) &&
          dbuf_up(d, q, &sb, NULL, (size_t)M * 4) && dbuf_up(d, q, &y1b, yv, ny) &&
          dbuf_up(d, q, &y2b, yv, ny)))
        bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
    lk_tensor x[2] = {lk_mat(xb.p, LK_F32, M, K), lk_mat((float *)xb.p + nx, LK_F32, M, K)};
    lk_tensor wt = lk_mat(wb.p, LK_T2, N, K), ws = lk_mat(wsb.p, LK_F32, 1, N);
    lk_tensor xq = lk_mat(qb.p, LK_I8, M, K), xs = lk_mat(sb.p, LK_F32, M, 1);
    lk_tensor y1 = lk_mat(y1b.p, LK_F32, M, N), y2 = lk_mat(y2b.p, LK_F32, M, N);
    wt.ld = ld;
    lk_weights *pw = NULL;
    if (lk_weights_prepare(q, &wt, &ws, &pw) != LK_OK)
        bail("%s: prepare: %s", lk_device_name(d), lk_last_error());
    lk_status st = LK_OK;
    for (int i = 0; i < CHAIN && st == LK_OK; i++)
        st = lk_rmsnorm_ternary_linear(q, &x[i & 1], NULL, 1e-5f, &xq, &xs, pw, &y1,
                                       LK_GEMM_ACCUMULATE);
    lk_graph *g = NULL;
    int graphs = 0;
    if (st == LK_OK) {
        st = lk_queue_capture_begin(q);
        graphs = st == LK_OK;
        if (st == LK_ERR_UNSUPPORTED) /* a device without capture: eagerly */
            st = LK_OK;
    }
    if (st == LK_OK) {
        for (int i = 0; i < (graphs ? GCALLS : GCALLS * GREPS) && st == LK_OK; i++)
            st = lk_rmsnorm_ternary_linear(q, &x[i & 1], NULL, 1e-5f, &xq, &xs, pw, &y1,
                                           LK_GEMM_ACCUMULATE);
        if (graphs) {
            lk_status se = lk_queue_capture_end(q, &g);
            st = st != LK_OK ? st : se;
        }
    }
    for (int r = 0; r < GREPS && st == LK_OK && graphs; r++)
        st = lk_graph_launch(g, q);
    lk_graph_destroy(g);
    for (int i = 0; i < CHAIN + GCALLS * GREPS && st == LK_OK; i++) {
        st = lk_rmsnorm_quantize(q, &x[i & 1], NULL, 1e-5f, &xq, &xs);
        if (st == LK_OK)
            st = lk_ternary_linear(q, &xq, &xs, pw, &y2, LK_GEMM_ACCUMULATE);
    }
    const int good = st == LK_OK && dbuf_down(q, h1, &y1b) && dbuf_down(q, h2, &y2b);
    if (st == LK_ERR_UNSUPPORTED)
        skip(1, "chain M=%lld on %s: unsupported (%s)", (long long)M, lk_device_name(d),
             lk_last_error());
    else
        ok(good && memcmp(h1, h2, ny) == 0,
       "chain M=%lld: %d calls back to back (%d eager, %s of %d replayed %d times), x "
       "alternating, == composition on %s",
       (long long)M, CHAIN + GCALLS * GREPS, CHAIN, graphs ? "a graph" : "no capture: eager runs",
       GCALLS, GREPS, lk_device_name(d));
    if (!good && st != LK_ERR_UNSUPPORTED)
        diag("  status %s: %s", lk_status_string(st), lk_last_error());
    lk_weights_destroy(pw);
    dbuf *all[] = {&xb, &wb, &wsb, &qb, &sb, &y1b, &y2b};
    for (int i = 0; i < 7; i++)
        dbuf_free(d, all[i]);
    free(xv), free(yv), free(sv), free(h1), free(h2), free(codes);
}

/* Argument errors (host memory: the reference device). */
static void test_errors(lk_queue *q)
{
    enum { M = 3, K = 8, N = 4 };
    float x[M * K], nw[K], s[M], y[M * N], ws[1] = {1.0f}, fv[N * K];
    int8_t xq[M * K];
    uint8_t codes[N * K / 4];
    uint16_t yb[M * N];
    for (int i = 0; i < M * K; i++)
        x[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < K; i++)
        nw[i] = 1.0f;
    memset(codes, 0x55, sizeof codes);
    memset(fv, 0, sizeof fv);
    lk_tensor tw = lk_mat(codes, LK_T2, N, K), tws = lk_mat(ws, LK_F32, 1, 1);
    lk_tensor fw = lk_mat(fv, LK_F32, N, K);
    lk_weights *pw = NULL, *pf = NULL;
    if (lk_weights_prepare(q, &tw, &tws, &pw) != LK_OK ||
        lk_weights_prepare(q, &fw, NULL, &pf) != LK_OK)
        bail("prepare on ref: %s", lk_last_error());
    lk_tensor tx = lk_mat(x, LK_F32, M, K), tn = lk_mat(nw, LK_F32, 1, K);
    lk_tensor tq = lk_mat(xq, LK_I8, M, K), ts = lk_mat(s, LK_F32, M, 1);
    lk_tensor ty = lk_mat(y, LK_F32, M, N), bad;

#define RESET() (memset(xq, 0x5a, sizeof xq), memset(s, 0xff, sizeof s), memset(y, 0xee, sizeof y))
#define UNTOUCHED()                                                                          \
    (xq[0] == 0x5a && xq[M * K - 1] == 0x5a && ((uint8_t *)s)[0] == 0xff &&                  \
     ((uint8_t *)s)[sizeof s - 1] == 0xff && ((uint8_t *)y)[0] == 0xee &&                    \
     ((uint8_t *)y)[sizeof y - 1] == 0xee)
#define EXPECT(call, want, what)                                                             \
    do {                                                                                     \
        RESET();                                                                             \
        lk_status st_ = (call);                                                              \
        ok(st_ == (want) && UNTOUCHED(), "%s: %s, nothing written", what,                   \
           lk_status_string(want));                                                          \
        if (st_ != (want))                                                                   \
            diag("  got %s: %s", lk_status_string(st_), lk_last_error());                    \
    } while (0)

    bad = lk_mat(xq, LK_I8, M, K - 1);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &bad, &ts, pw, &ty, 0), LK_ERR_BAD_SHAPE,
           "xq cols != K");
    bad = lk_mat(s, LK_F32, M - 1, 1);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &bad, pw, &ty, 0), LK_ERR_BAD_SHAPE,
           "xs rows != M");
    bad = lk_mat(y, LK_F32, M, N - 1);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pw, &bad, 0), LK_ERR_BAD_SHAPE,
           "y cols != N");
    bad = lk_mat(x, LK_F32, M, K - 4);
    EXPECT(lk_rmsnorm_ternary_linear(q, &bad, &tn, 1e-5f, &tq, &ts, pw, &ty, 0), LK_ERR_BAD_SHAPE,
           "x cols != K");
    bad = lk_mat(nw, LK_F32, 1, K - 1);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &bad, 1e-5f, &tq, &ts, pw, &ty, 0), LK_ERR_BAD_SHAPE,
           "norm_weight cols != K");
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pw, &ty, 0x80),
           LK_ERR_INVALID_ARGUMENT, "unknown flag bits");
    bad = lk_mat(yb, LK_BF16, M, N);
    memset(yb, 0xee, sizeof yb);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pw, &bad, LK_GEMM_ACCUMULATE),
           LK_ERR_BAD_DTYPE, "accumulate into bf16 y");
    bad = lk_mat(x, LK_I8, M, K);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &bad, &ts, pw, &ty, 0), LK_ERR_ALIASING,
           "xq overlapping x");
    bad = lk_mat(y, LK_F32, M, 1);
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &bad, pw, &ty, 0), LK_ERR_ALIASING,
           "xs overlapping y");
    bad = lk_mat(x, LK_F32, M, N);
    RESET();
    float x0 = x[0];
    lk_status st = lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pw, &bad, 0);
    ok(st == LK_ERR_ALIASING && x[0] == x0 && UNTOUCHED(), "y overlapping x: LK_ERR_ALIASING");
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, NULL, &ty, 0),
           LK_ERR_NULL_POINTER, "w NULL");
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pf, &ty, 0), LK_ERR_BAD_DTYPE,
           "float weights");
    EXPECT(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, NULL, &ts, pw, &ty, 0),
           LK_ERR_NULL_POINTER, "xq NULL");
    bad = lk_mat(x, LK_F32, 0, K);
    lk_tensor q0 = lk_mat(xq, LK_I8, 0, K), s0 = lk_mat(s, LK_F32, 0, 1);
    lk_tensor y0 = lk_mat(y, LK_F32, 0, N);
    EXPECT(lk_rmsnorm_ternary_linear(q, &bad, &tn, 1e-5f, &q0, &s0, pw, &y0, 0), LK_OK,
           "M = 0 is a no-op");
    RESET();
    ok(lk_rmsnorm_ternary_linear(q, &tx, &tn, 1e-5f, &tq, &ts, pw, &ty, 0) == LK_OK && !UNTOUCHED(),
       "a valid call writes");
#undef EXPECT
#undef UNTOUCHED
#undef RESET
    lk_weights_destroy(pw);
    lk_weights_destroy(pf);
}
#define NERRORS 15

int main(void)
{
    uint64_t seed = tap_seed();
    test_devices t;
    test_devices_open(&t);
    lk_device **devs = t.dev;
    lk_queue **qs = t.q, *ref_q = t.ref_q;
    const int nd = t.n;
    plan(nd * (NCASES * NVAR + 4) + NERRORS);
    for (int d = 0; d < nd; d++) {
        rng = seed;
        for (int c = 0; c < NCASES; c++)
            run_case(devs[d], qs[d], &cases[c], c, 0);
        /* inside a captured graph: a decode row and a prefill block */
        run_case(devs[d], qs[d], &cases[0], 0, 1);
        run_case(devs[d], qs[d], &cases[5], 5, 1);
        test_chain(devs[d], qs[d], 1);
        test_chain(devs[d], qs[d], 3);
    }
    test_errors(ref_q);
    test_devices_close(&t);
    return done_testing();
}
