/* The integer GEMMs on tensor cores (backends/cuda/tc/ternary.cu):
 * lk_ternary_gemm and lk_int8_gemm on cuda:0 equal the reference device
 * bit for bit (docs/numerics.md section 9) for every kernel variant
 * (LOCKSTEP_CUDA_TC_INT_KERNEL: the mma.sync tile shapes, the plain
 * loader, the int8 wgmma kernel's tiles on sm_90, and the dp4a kernels for
 * comparison), M = 9 ... 2048, odd N and K, K not a
 * multiple of 32 or 128, aligned and unaligned rows, every LK_T2 code
 * (the reserved 3 counts as 2), per-tensor and per-row weight scales, f32
 * and bf16 output, int32 output, the extreme sums at the K limits, scales
 * at and past the edges of the fast epilogue's division, and
 * lk_ternary_linear on prepared weights (plain and accumulating; on sm_90
 * the handle's copy in the tensor-core layout).  No GPU: a SKIP with the
 * reason.  LOCKSTEP_TC_TEST_ONLY (ops, extremes, scales, prepared) runs
 * only the parts it names; LOCKSTEP_CUDA_TEST_SMALL=1 (compute-sanitizer's
 * runs) the small mode: fewer and smaller shapes that still launch every
 * variant on the paths it has, the extreme sums at K = 1100. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

static lk_context *ctx;
static lk_device *ref, *gpu;
static lk_queue *rq, *gq;
static uint64_t rng;
/* LOCKSTEP_CUDA_TEST_SMALL=1 (compute-sanitizer's runs): fewer, smaller
 * shapes that still reach every variant's paths (test_op), extremes at
 * K = 1100 rather than the K limits, and fewer prepared shapes */
static int small;

enum { OP_TERNARY, OP_INT8_SCALED, OP_INT8_I32, OP_COUNT };
static const char *const op_name[OP_COUNT] = {"lk_ternary_gemm", "lk_int8_gemm (scaled)",
                                              "lk_int8_gemm (int32 out)"};

typedef struct {
    int op;
    int64_t m, n, k, xld, wld; /* wld in elements (LK_T2: a multiple of 4) */
    lk_dtype ydt;
    int per_row_scale;
    int extreme; /* x = -128 everywhere, w = 2 (code 3) or -128 */
    int8_t *x;
    uint8_t *w; /* LK_T2 bytes or int8 */
    float *xs, *ws;
} qcase;

static size_t w_bytes(const qcase *c)
{
    return (size_t)(c->n * (c->op == OP_TERNARY ? c->wld / 4 : c->wld));
}

static size_t y_bytes(const qcase *c)
{
    return (size_t)(c->m * c->n) * lk_dtype_size(c->ydt);
}

static void fill(qcase *c)
{
    size_t nx = (size_t)(c->m * c->xld), nw = w_bytes(c);
    c->x = malloc(nx + 1);
    c->w = malloc(nw + 1);
    c->xs = malloc((size_t)c->m * 4 + 4);
    c->ws = malloc((size_t)c->n * 4 + 4);
    if (!c->x || !c->w || !c->xs || !c->ws)
        bail("out of memory");
    for (size_t i = 0; i < nx; i++)
        c->x[i] = c->extreme ? -128 : (int8_t)(tap_rand(&rng) & 0xff);
    for (size_t i = 0; i < nw; i++)
        c->w[i] = c->extreme                ? (c->op == OP_TERNARY ? 0xff : 0x80)
                  : (uint8_t)(tap_rand(&rng) & 0xff);
    for (int64_t i = 0; i < c->m; i++) /* 1 keeps (float)acc visible; others test the epilogue */
        c->xs[i] = i % 3 == 0 ? 1.0f : (float)(1 + tap_rand(&rng) % 100000) / 997.0f;
    for (int64_t i = 0; i < c->n; i++)
        c->ws[i] = i % 2 == 0 ? 1.0f : (float)(1 + tap_rand(&rng) % 1000) / 311.0f;
}

static void unfill(qcase *c)
{
    free(c->x);
    free(c->w);
    free(c->xs);
    free(c->ws);
}

/* Runs the case on device d / queue q into out (host bytes). */
static lk_status run(lk_device *d, lk_queue *q, const qcase *c, void *out)
{
    size_t nx = (size_t)(c->m * c->xld), nw = w_bytes(c), ny = y_bytes(c);
    void *dx = c->x, *dw = c->w, *dxs = c->xs, *dws = c->ws, *dy = out;
    int dev = d == gpu;
    if (dev) {
        if (lk_malloc(d, nx ? nx : 1, &dx) || lk_malloc(d, nw ? nw : 1, &dw) ||
            lk_malloc(d, (size_t)c->m * 4, &dxs) || lk_malloc(d, (size_t)c->n * 4, &dws) ||
            lk_malloc(d, ny, &dy))
            bail("lk_malloc: %s", lk_last_error());
        lk_memcpy(q, dx, c->x, nx, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, dw, c->w, nw, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, dxs, c->xs, (size_t)c->m * 4, LK_COPY_HOST_TO_DEVICE);
        lk_memcpy(q, dws, c->ws, (size_t)c->n * 4, LK_COPY_HOST_TO_DEVICE);
        /* a pattern in y, so that an element left unwritten shows */
        memset(out, 0xa5, ny);
        lk_memcpy(q, dy, out, ny, LK_COPY_HOST_TO_DEVICE);
        if (lk_queue_sync(q) != LK_OK)
            bail("lk_queue_sync: %s", lk_last_error());
    }
    lk_tensor x = lk_mat_ld(dx, LK_I8, c->m, c->k, c->xld);
    lk_tensor xs = lk_mat(dxs, LK_F32, c->m, 1);
    lk_tensor ws = lk_mat(dws, LK_F32, 1, c->per_row_scale ? c->n : 1);
    lk_tensor y = lk_mat(dy, c->ydt, c->m, c->n);
    lk_status st;
    if (c->op == OP_TERNARY) {
        lk_tensor w = lk_mat_ld(dw, LK_T2, c->n, c->k, c->wld);
        st = lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
    } else {
        lk_tensor w = lk_mat_ld(dw, LK_I8, c->n, c->k, c->wld);
        int scaled = c->op == OP_INT8_SCALED;
        st = lk_int8_gemm(q, &x, &w, scaled ? &xs : NULL, scaled ? &ws : NULL, &y);
    }
    if (dev) {
        if (st == LK_OK) {
            lk_memcpy(q, out, dy, ny, LK_COPY_DEVICE_TO_HOST);
            st = lk_queue_sync(q);
        }
        lk_free(d, dx);
        lk_free(d, dw);
        lk_free(d, dxs);
        lk_free(d, dws);
        lk_free(d, dy);
    } else if (st == LK_OK) {
        st = lk_queue_sync(q);
    }
    return st;
}

static void show_diff(const qcase *c, const void *g, const void *r)
{
    size_t es = lk_dtype_size(c->ydt), n = y_bytes(c) / es;
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)g + i * es, (const char *)r + i * es, es)) {
            uint32_t u = 0, v = 0;
            memcpy(&u, (const char *)g + i * es, es);
            memcpy(&v, (const char *)r + i * es, es);
            diag("  first difference at m %lld, n %lld: GPU 0x%08x, ref 0x%08x",
                 (long long)((int64_t)i / c->n), (long long)((int64_t)i % c->n), u, v);
            return;
        }
}

static const char *const variants[] = {"",       "128x128",         "64x128",
                                       "64x64",  "128x128-generic", "64x128-generic",
                                       "64x64-generic", "simt", "mma.sync",
                                       "wgmma",  "wgmma-n128",      "wgmma-n256", "wgmma-n64",
                                       "wgmma-ra", "wgmma-ra-x96",   "wgmma-ra-x128",
                                       "wgmma-ra-x256",
                                       /* K split over clusters of blocks (-s1: none; more
                                        * blocks than slices leaves some with none) */
                                       "wgmma-ra-x128-s1", "wgmma-ra-x128-s3",
                                       "wgmma-ra-x256-s2", "wgmma-ra-x96-s8"};
#define NVAR (sizeof variants / sizeof variants[0])

static int64_t round_up(int64_t v, int64_t a)
{
    return (v + a - 1) / a * a;
}

/* One shape of test_op: rows of x 16-byte aligned or not, y's dtype
 * (bf16 or f32; int32 for int8's unscaled op), per-row or per-tensor
 * weight scales, the ops that take it (bit op; 0: all) and the variant
 * that takes it (NULL: all).  A dimension -w is w x SMs + w / 2: one
 * tile more than the SMs for a tile w wide. */
typedef struct {
    int64_t m, n, k;
    int aligned, y_bf16, per_row;
    unsigned ops;
    const char *only;
} op_shape;

/* The full list, its attributes from the position as they always were. */
static const int64_t full_shapes[][3] = {
    {9, 7, 33},    {16, 64, 128},  {17, 129, 257}, {40, 200, 100},  {64, 64, 64},
    {65, 33, 1000}, {128, 128, 128}, {129, 130, 383}, {300, 70, 130}, {513, 257, 64},
    {1024, 96, 200}, {2048, 64, 129}, {2048, 256, 512}, {100, 3, 5}, {33, 1, 1},
    /* more 128 x 256 tiles than an H200 has SMs: the wgmma kernel's
     * blocks take several tiles each (aligned: even index) */
    {300, 1000, 77}, {2048, 2304, 200},
    /* prefill-sized (H200: 20 x 5 tiles of 128 x 128, no split) */
    {600, 330, 65}, {520, 2560, 192},
    /* few tiles, long K: the automatic choice splits K over clusters */
    {33, 640, 2560}, {130, 300, 1536}};

/* The small list (LOCKSTEP_CUDA_TEST_SMALL): the smallest M the kernels
 * take, aligned and unaligned rows, M, N and K off every tile and slice,
 * bf16 and f32 y, both scales, few tiles with a long K (9 slices: the
 * split over clusters, rings that wrap); int32 out (the int8 kernels of
 * the scaled op with another epilogue) on two of them.  Persistent blocks
 * that take a second tile (SMs + 1 tiles, one slice each): the weights-as-B
 * kernel at its narrowest (64, LK_T2 and int8) and the weights-as-A one
 * at its narrowest (96); the wider tiles run the same loop. */
#define OPS_ALL 0u
#define OPS_T2 (1u << OP_TERNARY)
#define OPS_T2_INT8 (1u << OP_TERNARY | 1u << OP_INT8_SCALED)
static const op_shape small_shapes[] = {
    {9, 7, 33, 1, 0, 0, OPS_ALL, NULL},
    {17, 129, 257, 0, 0, 0, OPS_T2_INT8, NULL},
    {129, 130, 383, 1, 1, 1, OPS_ALL, NULL},
    {100, 3, 5, 0, 0, 1, OPS_T2_INT8, NULL},
    {33, 300, 1100, 1, 0, 1, OPS_T2_INT8, NULL},
    {65, 140, 200, 1, 1, 0, OPS_T2_INT8, NULL},
    {128, -64, 65, 1, 0, 1, OPS_T2_INT8, "wgmma-n64"},
    {-96, 128, 65, 1, 0, 1, OPS_T2, "wgmma-ra-x96"}};

static int64_t gpu_sms = 132; /* from the description ("..., 132 SMs") */

static int64_t sm_dim(int64_t v)
{
    return v >= 0 ? v : -v * gpu_sms - v / 2;
}

static void test_op(int op)
{
    const size_t ns = small ? sizeof small_shapes / sizeof small_shapes[0]
                            : sizeof full_shapes / sizeof full_shapes[0];
    int bad[NVAR] = {0}, runs[NVAR] = {0}, cases = 0;
    for (size_t s = 0; s < ns; s++) {
        const op_shape sh = small ? small_shapes[s]
                                  : (op_shape){full_shapes[s][0], full_shapes[s][1],
                                               full_shapes[s][2], s % 2 == 0, s % 3 == 2,
                                               s % 4 >= 2, OPS_ALL, NULL};
        if (sh.ops && !(sh.ops >> op & 1))
            continue;
        const int64_t k = sh.k;
        const int aligned = sh.aligned;
        qcase c = {op, sm_dim(sh.m), sm_dim(sh.n), k,
                   aligned ? round_up(k, 16) + 16 : k,
                   op == OP_TERNARY ? (aligned ? round_up(k, 64) : round_up(k, 4))
                                    : (aligned ? round_up(k, 16) : k),
                   op == OP_INT8_I32 ? LK_I32 : (sh.y_bf16 ? LK_BF16 : LK_F32),
                   sh.per_row, 0, NULL, NULL, NULL, NULL};
        fill(&c);
        void *r = malloc(y_bytes(&c)), *g = malloc(y_bytes(&c));
        if (!r || !g)
            bail("out of memory");
        lk_status st = run(ref, rq, &c, r);
        if (st != LK_OK)
            bail("ref %s %lldx%lldx%lld: %s", op_name[op], (long long)c.m, (long long)c.n,
                 (long long)c.k, lk_last_error());
        cases++;
        for (size_t v = 0; v < NVAR; v++) {
            if (sh.only && strcmp(sh.only, variants[v]) != 0)
                continue;
            /* unaligned rows: a wgmma variant is the automatic mma.sync
             * choice, which "mma.sync" runs already; int8: the wgmma-ra
             * variants are "wgmma" (weights-as-A is LK_T2's), once */
            if (small && strncmp(variants[v], "wgmma", 5) == 0 &&
                (!aligned || (op != OP_TERNARY && s > 0 && strncmp(variants[v], "wgmma-ra", 8) == 0)))
                continue;
            runs[v]++;
            setenv("LOCKSTEP_CUDA_TC_INT_KERNEL", variants[v], 1);
            st = run(gpu, gq, &c, g);
            if (st != LK_OK || memcmp(g, r, y_bytes(&c))) {
                if (bad[v]++ < 3) {
                    diag("%s, kernel '%s': M %lld N %lld K %lld, x ld %lld, w ld %lld, %s: %s",
                         op_name[op], variants[v], (long long)c.m, (long long)c.n,
                         (long long)c.k, (long long)c.xld, (long long)c.wld,
                         lk_dtype_name(c.ydt), st ? lk_last_error() : "bits differ");
                    if (st == LK_OK)
                        show_diff(&c, g, r);
                }
            }
        }
        free(r);
        free(g);
        unfill(&c);
    }
    unsetenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
    for (size_t v = 0; v < NVAR; v++)
        ok(bad[v] == 0, "%s, kernel '%s' = ref bit for bit (%d of %d shapes; %d differ)",
           op_name[op], *variants[v] ? variants[v] : "auto", runs[v], cases, bad[v]);
}

/* |acc| at its largest: ternary -128 * 2 * K, int8 (-128)^2 * 131071 =
 * 2^31 - 2^14 (int32 out shows it exactly).  The small mode takes
 * K = 1100 (9 slices, more than any ring holds) for all three. */
static void test_extremes(void)
{
    const struct {
        int op;
        int64_t k;
    } ex[] = {{OP_TERNARY, 70001}, {OP_INT8_I32, 131071}, {OP_INT8_SCALED, 131071}};
    for (size_t e = 0; e < sizeof ex / sizeof ex[0]; e++) {
        const int64_t k = small ? 1100 : ex[e].k;
        qcase c = {ex[e].op, 20, 16, k, round_up(k, 16),
                   ex[e].op == OP_TERNARY ? round_up(k, 64) : round_up(k, 16),
                   ex[e].op == OP_INT8_I32 ? LK_I32 : LK_F32, 1, 1, NULL, NULL, NULL, NULL};
        fill(&c);
        void *r = malloc(y_bytes(&c)), *g = malloc(y_bytes(&c));
        if (!r || !g)
            bail("out of memory");
        lk_status st = run(ref, rq, &c, r);
        int bad = 0;
        for (size_t v = 0; v < NVAR; v++) {
            setenv("LOCKSTEP_CUDA_TC_INT_KERNEL", variants[v], 1);
            lk_status sg = run(gpu, gq, &c, g);
            if (st != LK_OK || sg != LK_OK || memcmp(g, r, y_bytes(&c))) {
                bad++;
                diag("kernel '%s': %s", variants[v],
                     st || sg ? lk_last_error() : "bits differ");
            }
        }
        unsetenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
        if (ex[e].op == OP_INT8_I32 && st == LK_OK) {
            int32_t v0;
            memcpy(&v0, r, 4);
            /* 131071: 2^31 - 2^14 */
            diag("int8 acc at K = %lld with -128 everywhere: %ld (16384 K = %lld)",
                 (long long)k, (long)v0, 16384LL * (long long)k);
            bad += v0 != 16384LL * k;
        }
        ok(bad == 0, "%s at K = %lld with extreme values: every kernel = ref", op_name[ex[e].op],
           (long long)k);
        free(r);
        free(g);
        unfill(&c);
    }
}

/* Scales at and past the edges of the fast epilogue's division
 * (qgemm.cuh, lk_qdiv: 2^-40 <= |x_scale| <= 2^40, finite w_scale; the
 * rest divide with __fdiv_rn): x rows 0 .. 255 take values inside (the
 * bounds, the largest and smallest significands, negative), so that whole
 * tiles of them take the fast path; the rows after, and the w scales of
 * rows 200 and on, the values outside (just past the bounds, subnormal,
 * 0, huge, inf, NaN: NaN stored canonical).  Every variant, ternary and
 * scaled int8, against ref. */
static void test_scales(void)
{
    static const float inside[] = {1.0f,          3.0f,         0x1p-40f,      0x1p40f,
                                    0x1.fffffep39f, 0x1.000002p-40f, -2.5f,     0x1.fffffep-1f,
                                    1.0f / 3.0f,  7.0e-3f,      127.0f / 0.37f, -0x1p40f,
                                    0x1.7ffffep5f, 1.0e10f,     -1.0e-10f,     0x1.555556p-2f};
    static const float outside[] = {0x1.000002p40f, 0x1.fffffep-41f, 1.0e-39f, 0.0f,
                                    -0.0f,          3.0e38f,         0x1p100f, INFINITY,
                                    -INFINITY,      NAN,             1.0e-20f, 0x1p-126f};
    static const float wodd[] = {NAN, INFINITY, 0.0f, -1.0f, 1.0e30f, -INFINITY, 0x1p-149f};
    const int ops[2] = {OP_TERNARY, OP_INT8_SCALED};
    for (int o = 0; o < 2; o++) {
        /* the small mode: columns 200 .. 229 still take every odd w scale */
        const int64_t M = 300, N = small ? 230 : 300, K = 200;
        qcase c = {ops[o], M, N, K, round_up(K, 16), ops[o] == OP_TERNARY ? round_up(K, 64) : round_up(K, 16),
                   LK_F32, 1, 0, NULL, NULL, NULL, NULL};
        fill(&c);
        for (int64_t m = 0; m < M; m++)
            c.xs[m] = m < 256 ? inside[m % 16] : outside[m % 12];
        for (int64_t n = 200; n < N; n++)
            if (n % 3 == 0)
                c.ws[n] = wodd[(n / 3) % 7];
        void *r = malloc(y_bytes(&c)), *g = malloc(y_bytes(&c));
        if (!r || !g)
            bail("out of memory");
        if (run(ref, rq, &c, r) != LK_OK)
            bail("ref: %s", lk_last_error());
        int bad = 0;
        for (size_t v = 0; v < NVAR; v++) {
            setenv("LOCKSTEP_CUDA_TC_INT_KERNEL", variants[v], 1);
            lk_status st = run(gpu, gq, &c, g);
            if (st != LK_OK || memcmp(g, r, y_bytes(&c))) {
                if (bad++ < 3) {
                    diag("%s, kernel '%s', odd scales: %s", op_name[ops[o]], variants[v],
                         st ? lk_last_error() : "bits differ");
                    if (st == LK_OK)
                        show_diff(&c, g, r);
                }
            }
        }
        unsetenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
        ok(bad == 0, "%s with scales at and past the fast division's range: every kernel = ref "
                     "(%d differ)", op_name[ops[o]], bad);
        free(r);
        free(g);
        unfill(&c);
    }
}

/* lk_ternary_linear on prepared weights (on sm_90 the weights-as-A kernel
 * reads the handle's second copy in its own layout, tc/wgmma_int8.cu), plain
 * (f32 or bf16 y, per-row or per-tensor scales) and with
 * LK_GEMM_ACCUMULATE (y = y + r: the int8 kernels' epilogue reads y's old
 * values before it stores; random old y): every variant against ref.
 * Shapes: N and K off the 128-row tiles and 128-k slices, few tiles with
 * long K (split), more tiles than SMs, and rows of x not 16-byte aligned
 * (the weights-as-A kernel does not apply: the other kernels run). */
static void test_prepared(void)
{
    static const int64_t shapes[][4] = {/* M, N, K, x row pitch aligned */
                                        {33, 640, 256, 1},   {300, 257, 130, 1},
                                        {520, 2560, 128, 1}, {600, 330, 65, 1},
                                        {130, 300, 1536, 1}, {17, 129, 257, 1},
                                        {2048, 2304, 200, 1}, {40, 200, 101, 0}};
    /* the small mode: bf16 y and a per-tensor scale with edges, plain and
     * accumulating (1); the split over clusters, 33 x 300 x 1100,
     * accumulating (4); unaligned rows (7; not on the wgmma variants,
     * which are the automatic mma.sync choice there); the weights-as-A
     * kernel's persistent blocks taking a second tile, SMs + 1 tiles
     * 96 wide of one slice, plain (6) */
    const unsigned small_set = 1u << 1 | 1u << 4 | 1u << 6 | 1u << 7;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int acc = 0; acc < 2; acc++) {
            if (small && (!(small_set >> s & 1) || (s == 6 && acc) || (s == 4 && !acc)))
                continue;
            const int64_t M = !small ? shapes[s][0] : s == 4 ? 33 : s == 6 ? 96 * gpu_sms + 48
                                                                        : shapes[s][0];
            const int64_t N = !small ? shapes[s][1] : s == 4 ? 300 : s == 6 ? 128 : shapes[s][1];
            const int64_t K = !small ? shapes[s][2] : s == 4 ? 1100 : s == 6 ? 65 : shapes[s][2];
            const int64_t wld = round_up(K, 64);
            const lk_dtype ydt = acc || s % 2 == 0 ? LK_F32 : LK_BF16;
            const int per_row = acc || s % 3 != 1;
            const unsigned flags = acc ? LK_GEMM_ACCUMULATE : 0;
            qcase c = {OP_TERNARY, M, N, K, shapes[s][3] ? round_up(K, 16) : K, wld, ydt,
                       per_row, 0, NULL, NULL, NULL, NULL};
            fill(&c);
            const size_t nx = (size_t)(M * c.xld), nw = w_bytes(&c), ny = y_bytes(&c);
            const int64_t nws = per_row ? N : 1;
            unsigned char *y0 = malloc(ny), *r = malloc(ny), *g = malloc(ny);
            if (!y0 || !r || !g)
                bail("out of memory");
            for (int64_t i = 0; i < M * N; i++) {
                const float v = (float)((int64_t)(tap_rand(&rng) % 2001) - 1000) / 64.0f;
                if (ydt == LK_F32)
                    memcpy(y0 + 4 * i, &v, 4);
                else
                    memset(y0 + 2 * i, 0x55, 2); /* overwritten */
            }
            int bad = 0;
            for (int dev = 0; dev < 2; dev++) {
                lk_device *d = dev ? gpu : ref;
                lk_queue *q = dev ? gq : rq;
                void *dx = c.x, *dw = c.w, *dxs = c.xs, *dws = c.ws, *dy = r;
                if (dev) {
                    if (lk_malloc(d, nx, &dx) || lk_malloc(d, nw, &dw) ||
                        lk_malloc(d, (size_t)M * 4, &dxs) || lk_malloc(d, (size_t)N * 4, &dws) ||
                        lk_malloc(d, ny, &dy))
                        bail("lk_malloc: %s", lk_last_error());
                    lk_memcpy(q, dx, c.x, nx, LK_COPY_HOST_TO_DEVICE);
                    lk_memcpy(q, dw, c.w, nw, LK_COPY_HOST_TO_DEVICE);
                    lk_memcpy(q, dxs, c.xs, (size_t)M * 4, LK_COPY_HOST_TO_DEVICE);
                    lk_memcpy(q, dws, c.ws, (size_t)N * 4, LK_COPY_HOST_TO_DEVICE);
                }
                lk_tensor x = lk_mat_ld(dx, LK_I8, M, K, c.xld), xs = lk_mat(dxs, LK_F32, M, 1);
                lk_tensor w = lk_mat_ld(dw, LK_T2, N, K, wld), ws = lk_mat(dws, LK_F32, 1, nws);
                lk_tensor y = lk_mat(dy, ydt, M, N);
                lk_weights *pw = NULL;
                if (lk_weights_prepare(q, &w, &ws, &pw) != LK_OK)
                    bail("%s: prepare: %s", lk_device_name(d), lk_last_error());
                for (size_t v = 0; v < (dev ? NVAR : 1); v++) {
                    if (dev && small &&
                        ((s == 6 && strcmp(variants[v], "wgmma-ra-x96") != 0) ||
                         (!shapes[s][3] && strncmp(variants[v], "wgmma", 5) == 0)))
                        continue;
                    if (dev)
                        setenv("LOCKSTEP_CUDA_TC_INT_KERNEL", variants[v], 1);
                    if (dev)
                        lk_memcpy(q, dy, y0, ny, LK_COPY_HOST_TO_DEVICE);
                    else
                        memcpy(r, y0, ny);
                    lk_status st = lk_ternary_linear(q, &x, &xs, pw, &y, flags);
                    if (st == LK_OK && dev)
                        lk_memcpy(q, g, dy, ny, LK_COPY_DEVICE_TO_HOST);
                    if (st == LK_OK)
                        st = lk_queue_sync(q);
                    if (st != LK_OK)
                        bail("%s: lk_ternary_linear: %s", lk_device_name(d), lk_last_error());
                    if (dev && memcmp(g, r, ny)) {
                        if (bad++ < 3) {
                            diag("prepared%s, kernel '%s': M %lld N %lld K %lld: bits differ",
                                 acc ? " accumulate" : "", variants[v], (long long)M,
                                 (long long)N, (long long)K);
                            show_diff(&c, g, r);
                        }
                    }
                }
                unsetenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
                lk_queue_sync(q);
                lk_weights_destroy(pw);
                if (dev) {
                    lk_free(d, dx);
                    lk_free(d, dw);
                    lk_free(d, dxs);
                    lk_free(d, dws);
                    lk_free(d, dy);
                }
            }
            ok(bad == 0,
               "lk_ternary_linear M=%lld N=%lld K=%lld%s %s y, %s scale: every kernel = ref "
               "(%d differ)",
               (long long)M, (long long)N, (long long)K, acc ? " accumulate" : "",
               lk_dtype_name(ydt), per_row ? "per-row" : "per-tensor", bad);
            free(y0);
            free(r);
            free(g);
            unfill(&c);
        }
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
    diag("mode: %s", small ? "small (LOCKSTEP_CUDA_TEST_SMALL=1): fewer, smaller shapes that "
                             "reach every variant's paths; extremes at K = 1100"
                           : "full (LOCKSTEP_CUDA_TEST_SMALL=1: the sanitizers' small mode)");
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    if (lk_device_find(ctx, "ref", &ref) || lk_queue_create(ref, NULL, &rq))
        bail("no ref device: %s", lk_last_error());
    /* LOCKSTEP_TC_TEST_DEVICE=cpu runs the same checks on another device
     * (to try the test itself where there is no GPU) */
    const char *dev_name = getenv("LOCKSTEP_TC_TEST_DEVICE");
    if (!dev_name || !*dev_name)
        dev_name = "cuda:0";
    if (lk_device_find(ctx, dev_name, &gpu) != LK_OK) {
        lk_queue_destroy(rq);
        lk_context_destroy(ctx);
        skip_all("no CUDA device (or the CUDA driver is not built)");
    }
    lk_device_props p;
    lk_device_props_get(gpu, &p);
    diag("%s is %s (tensor-core kernels need sm_80 or later; older GPUs run the dp4a "
         "kernels for every variant)", dev_name, p.description);
    {
        /* "..., sm_90, 132 SMs, ...": the SMs the persistent kernels fill */
        const char *sm = strstr(p.description, "sm_");
        const char *c = sm ? strchr(sm, ',') : NULL;
        if (c && atoi(c + 1) > 0 && strstr(c, " SMs"))
            gpu_sms = atoi(c + 1);
    }
    if (lk_queue_create(gpu, NULL, &gq) != LK_OK)
        bail("no queue on %s: %s", dev_name, lk_last_error());
    /* LOCKSTEP_TC_TEST_ONLY=ops,extremes,scales,prepared (any of them):
     * only those parts, e.g. for compute-sanitizer's slow runs */
    const char *only = getenv("LOCKSTEP_TC_TEST_ONLY");
#define PART(name) (!only || !*only || strstr(only, name))
    if (PART("ops"))
        for (int op = 0; op < OP_COUNT; op++)
            test_op(op);
    if (PART("extremes"))
        test_extremes();
    if (PART("scales"))
        test_scales();
    if (PART("prepared"))
        test_prepared();
#undef PART
    lk_queue_destroy(gq);
    lk_queue_destroy(rq);
    lk_context_destroy(ctx);
    return done_testing();
}
