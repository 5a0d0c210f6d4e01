/* Lockstep benchmarks: the cases and how each one is timed.
 *
 * Shapes: square f32 GEMM; the linear layers of BitNet b1.58 2B (N x K =
 * 2560x2560, 640x2560, 6912x2560, 2560x6912) at M = 1, 8, 128, 512 with f32
 * and bf16 inputs, y = x . W^T (W row-major N x K, as a checkpoint stores
 * it); ternary GEMV/GEMM at the same shapes, in cache and cold (the
 * weights rotate through copies four times the last-level cache); norms
 * and softmax on 32 x 2560 and 4096 x 4096; a sum over 2^26; a conversion.
 * The ternary GEMV in cache once more against llama.cpp's TQ2_0 and
 * bitnet.cpp's I2_S kernels, where scripts/get-peers.sh has built them
 * (bench/peers/ternary_peers.h; a skipped case with the reason elsewhere),
 * after a check that they compute the same dot products as Lockstep.
 * Lockstep's runs come first, then the peer's, each after one warm-up run
 * (two thread pools spinning at once would slow both). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench_cases.h"
#include "bench/peers.h"
#include "bench/peers/ternary_peers.h"

#define MAX_CASES 160

static lk_bench_case cases[MAX_CASES + 1];
static char names[MAX_CASES][48];
static int ncases;

static void add_case(lk_bench_kind kind, lk_dtype dt, int64_t m, int64_t n, int64_t k, int cold,
                     int quick, int prepared)
{
    lk_bench_case *c = &cases[ncases];
    char *nm = names[ncases];
    const char *dn = dt == LK_BF16 ? "bf16" : "f32";
    ncases++;
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->dt = dt;
    c->m = m;
    c->n = n;
    c->k = k;
    c->cold = cold;
    c->quick = quick;
    c->prepared = prepared;
    c->name = nm;
    switch (kind) {
    case LK_BK_GEMM:
        snprintf(nm, 48, "gemm.f32.%lld", (long long)n);
        c->flops = 2.0 * (double)m * (double)n * (double)k;
        c->peer_name = "openblas sgemm";
        break;
    case LK_BK_LINEAR:
        snprintf(nm, 48, "linear.%s.%lldx%lld.m%lld%s", dn, (long long)n, (long long)k,
                 (long long)m, prepared ? ".prep" : "");
        c->flops = 2.0 * (double)m * (double)n * (double)k;
        c->bytes = (double)n * (double)k * (dt == LK_BF16 ? 2 : 4);
        c->peer_name = m == 1 ? (dt == LK_F32 ? "openblas sgemv" : "openblas sgemv f32")
                              : (dt == LK_F32 ? "openblas sgemm" : "openblas sgemm f32");
        break;
    case LK_BK_TERNARY:
        snprintf(nm, 48, "ternary.%lldx%lld.m%lld%s%s", (long long)n, (long long)k, (long long)m,
                 cold ? ".cold" : "", prepared ? ".prep" : "");
        c->flops = m > 1 ? 2.0 * (double)m * (double)n * (double)k : 0.0;
        c->bytes = (double)n * (double)k / 4.0;
        c->peer_name = cold ? "read floor (cold)" : "read floor (same bytes)";
        break;
    case LK_BK_ATTENTION: /* reads the KV cache once: the read loop of its bytes is the floor */
        snprintf(nm, 48, "attention.decode.%lld", (long long)n);
        c->bytes = (double)n * 2 * 640 * 4;
        c->peer_name = "read loop (KV bytes)";
        break;
    case LK_BK_SUM:
        snprintf(nm, 48, "sum.f32.%lld", (long long)n);
        c->bytes = 4.0 * (double)n;
        c->peer_name = "read loop";
        break;
    default: {
        const char *op = kind == LK_BK_RMSNORM ? "rmsnorm" : kind == LK_BK_LAYERNORM ? "layernorm"
                         : kind == LK_BK_SOFTMAX ? "softmax" : kind == LK_BK_SILU ? "silu"
                         : "convert";
        snprintf(nm, 48, "%s.%s%s.%lldx%lld", op, kind == LK_BK_CONVERT ? "f32-" : "",
                 kind == LK_BK_CONVERT ? dn : "f32", (long long)m, (long long)n);
        c->bytes = (double)m * (double)n * (4.0 + (kind == LK_BK_CONVERT && dt == LK_BF16 ? 2 : 4));
        c->peer_name = "copy loop";
        break;
    }
    }
}

static void add(lk_bench_kind kind, lk_dtype dt, int64_t m, int64_t n, int64_t k, int cold,
                int quick)
{
    add_case(kind, dt, m, n, k, cold, quick, 0);
}

/* The BitNet-shape layers twice: on the weights as given, then prepared
 * (include/lockstep/weights.h), as a model runs them. */
static void add_both(lk_bench_kind kind, lk_dtype dt, int64_t m, int64_t n, int64_t k, int cold,
                     int quick)
{
    add_case(kind, dt, m, n, k, cold, quick, 0);
    add_case(kind, dt, m, n, k, cold, quick, 1);
}

/* The GEMV in cache against a public kernel (bench/peers) instead of the
 * read floor. */
static void add_t2_peer(int peer, int64_t n, int64_t k, int quick)
{
    add_case(LK_BK_TERNARY, LK_T2, 1, n, k, 0, quick, 0);
    lk_bench_case *c = &cases[ncases - 1];
    c->t2_peer = peer;
    snprintf(names[ncases - 1], 48, "ternary.%lldx%lld.m1.%s", (long long)n, (long long)k,
             peer == LK_PEER_TQ2_0 ? "tq2_0" : "i2_s");
    c->peer_name = lk_peer_t2_name(peer);
}

const lk_bench_case *lk_bench_cases(void)
{
    if (ncases)
        return cases;
    static const int64_t shapes[4][2] = {{2560, 2560}, {640, 2560}, {6912, 2560}, {2560, 6912}};
    static const int64_t ms[4] = {1, 8, 128, 512};
    add(LK_BK_GEMM, LK_F32, 512, 512, 512, 0, 1);
    add(LK_BK_GEMM, LK_F32, 1024, 1024, 1024, 0, 0);
    add(LK_BK_GEMM, LK_F32, 2048, 2048, 2048, 0, 1);
    for (int d = 0; d < 2; d++)
        for (int s = 0; s < 4; s++)
            for (int i = 0; i < 4; i++)
                add_both(LK_BK_LINEAR, d ? LK_BF16 : LK_F32, ms[i], shapes[s][0], shapes[s][1], 0,
                    s == 2 && (i == 0 || (i == 2 && d == 0)));
    for (int s = 0; s < 4; s++) {
        for (int i = 0; i < 4; i++)
            add_both(LK_BK_TERNARY, LK_T2, ms[i], shapes[s][0], shapes[s][1], 0,
                i == 0 && (s == 0 || s == 2));
        add_both(LK_BK_TERNARY, LK_T2, 1, shapes[s][0], shapes[s][1], 1, s == 2);
    }
    for (int s = 0; s < 4; s++)
        for (int p = LK_PEER_TQ2_0; p <= LK_PEER_I2_S; p++)
            add_t2_peer(p, shapes[s][0], shapes[s][1], s == 2);
    add(LK_BK_RMSNORM, LK_F32, 32, 2560, 0, 0, 1);
    add(LK_BK_RMSNORM, LK_F32, 4096, 4096, 0, 0, 1);
    add(LK_BK_LAYERNORM, LK_F32, 32, 2560, 0, 0, 0);
    add(LK_BK_LAYERNORM, LK_F32, 4096, 4096, 0, 0, 0);
    add(LK_BK_SOFTMAX, LK_F32, 32, 2560, 0, 0, 0);
    add(LK_BK_SOFTMAX, LK_F32, 4096, 4096, 0, 0, 1);
    add(LK_BK_SILU, LK_F32, 4096, 4096, 0, 0, 0);
    add(LK_BK_SUM, LK_F32, 1, (int64_t)1 << 26, 0, 0, 1);
    add(LK_BK_ATTENTION, LK_F32, 1, 4096, 0, 0, 1);
    add(LK_BK_ATTENTION, LK_F32, 1, 32768, 0, 0, 0);
    add(LK_BK_CONVERT, LK_BF16, 4096, 4096, 0, 0, 0);
    return cases;
}

/* ---- data ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static void *alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes < 64 ? 64 : (bytes + 63) / 64 * 64) != 0)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

/* Uniform in [-1, 1). */
static float uniform(void) { return (float)(int32_t)next32() * 0x1p-31f; }

static void fill_f32(float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        p[i] = uniform();
}

static void fill_bytes(uint8_t *p, int64_t n, int ternary)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = next32();
        /* ternary: four codes in 0..2; int8: values in [-127, 127] */
        p[i] = ternary ? (uint8_t)((r % 3) | (r / 3 % 3) << 2 | (r / 9 % 3) << 4 | (r / 27 % 3) << 6)
                       : (uint8_t)(int8_t)(r % 255 - 127);
    }
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- the cases ---- */

typedef struct bench_data {
    void *x, *w, *y, *xs, *ws, *xf, *wf, *yp; /* xf, wf: f32 copies for the peer */
    void **pool;                              /* cold: weight copies */
    lk_weights **pw;                          /* prepared: one per weight copy */
    int npool, nw;
    size_t wbytes;
    void *t2p; /* the ternary peer (lk_peer_t2), when the case has one */
} bench_data;

static void data_free(bench_data *d)
{
    free(d->x), free(d->w), free(d->y), free(d->xs), free(d->ws), free(d->xf), free(d->wf);
    free(d->yp);
    for (int i = 0; i < d->npool; i++)
        free(d->pool[i]);
    free(d->pool);
    for (int i = 0; i < d->nw; i++)
        lk_weights_destroy(d->pw[i]);
    free(d->pw);
    lk_peer_t2_destroy((lk_peer_t2 *)d->t2p);
}

static size_t cold_pool_bytes(void)
{
    size_t b = (size_t)256 << 20;
    lk_context *ctx = NULL;
    lk_topology_info t;
    if (lk_context_create(&ctx) == LK_OK && lk_context_topology(ctx, &t) == LK_OK &&
        4 * t.l3_bytes > b)
        b = (size_t)(4 * t.l3_bytes);
    lk_context_destroy(ctx);
    return b;
}

static lk_status setup(const lk_bench_case *c, bench_data *d)
{
    const int64_t m = c->m, n = c->n, k = c->k;
    memset(d, 0, sizeof *d);
    switch (c->kind) {
    case LK_BK_GEMM:
    case LK_BK_LINEAR: {
        size_t es = c->dt == LK_BF16 ? 2 : 4;
        d->x = alloc((size_t)(m * k) * es);
        d->w = alloc((size_t)(n * k) * es);
        d->y = alloc((size_t)(m * n) * 4);
        d->xf = alloc((size_t)(m * k) * 4);
        d->wf = alloc((size_t)(n * k) * 4);
        d->yp = alloc((size_t)(m * n) * 4);
        if (!d->x || !d->w || !d->y || !d->xf || !d->wf || !d->yp)
            return LK_ERR_OUT_OF_MEMORY;
        fill_f32(d->xf, m * k);
        fill_f32(d->wf, n * k);
        if (c->dt == LK_BF16) { /* the peer gets the bf16 values widened */
            for (int64_t i = 0; i < m * k; i++)
                ((uint16_t *)d->x)[i] = lk_f32_to_bf16(((float *)d->xf)[i]);
            for (int64_t i = 0; i < n * k; i++)
                ((uint16_t *)d->w)[i] = lk_f32_to_bf16(((float *)d->wf)[i]);
            for (int64_t i = 0; i < m * k; i++)
                ((float *)d->xf)[i] = lk_bf16_to_f32(((uint16_t *)d->x)[i]);
            for (int64_t i = 0; i < n * k; i++)
                ((float *)d->wf)[i] = lk_bf16_to_f32(((uint16_t *)d->w)[i]);
        } else {
            memcpy(d->x, d->xf, (size_t)(m * k) * 4);
            memcpy(d->w, d->wf, (size_t)(n * k) * 4);
        }
        return LK_OK;
    }
    case LK_BK_TERNARY: {
        d->wbytes = (size_t)(n * k / 4);
        d->npool = c->cold ? (int)(cold_pool_bytes() / d->wbytes) + 1 : 1;
        d->pool = calloc((size_t)d->npool, sizeof *d->pool);
        d->x = alloc((size_t)(m * k));
        d->xs = alloc((size_t)m * 4);
        d->ws = alloc(4);
        d->y = alloc((size_t)(m * n) * 4);
        if (!d->pool || !d->x || !d->xs || !d->ws || !d->y)
            return LK_ERR_OUT_OF_MEMORY;
        for (int i = 0; i < d->npool; i++) {
            if ((d->pool[i] = alloc(d->wbytes)) == NULL)
                return LK_ERR_OUT_OF_MEMORY;
            fill_bytes(d->pool[i], (int64_t)d->wbytes, 1);
        }
        fill_bytes(d->x, m * k, 0);
        for (int64_t i = 0; i < m; i++)
            ((float *)d->xs)[i] = 127.0f;
        ((float *)d->ws)[0] = 0.5f;
        if (c->t2_peer) { /* the weights in the peer's layout, outside the timing */
            d->yp = alloc((size_t)(m * n) * 4);
            d->t2p = lk_peer_t2_create(c->t2_peer, d->pool[0], n, k);
            if (!d->yp || !d->t2p)
                return LK_ERR_OUT_OF_MEMORY;
        }
        return LK_OK;
    }
    case LK_BK_ATTENTION: { /* x: the kv cache (keys x 1280), w: q, ws: the position */
        d->x = alloc((size_t)n * 1280 * 4);
        d->w = alloc(2560 * 4);
        d->y = alloc(2560 * 4);
        d->ws = alloc(4);
        if (!d->x || !d->w || !d->y || !d->ws)
            return LK_ERR_OUT_OF_MEMORY;
        fill_f32(d->x, n * 1280);
        fill_f32(d->w, 2560);
        ((int32_t *)d->ws)[0] = (int32_t)(n - 1);
        return LK_OK;
    }
    default: {
        const int64_t len = c->kind == LK_BK_SUM ? n : m * n;
        d->x = alloc((size_t)len * 4);
        d->y = alloc((size_t)len * 4);
        d->yp = alloc((size_t)len * 4);
        if (!d->x || !d->y || !d->yp)
            return LK_ERR_OUT_OF_MEMORY;
        fill_f32(d->x, len);
        return LK_OK;
    }
    }
}

/* The weights (each cold copy) prepared on the queue, outside the timing. */
static lk_status prepare(const lk_bench_case *c, bench_data *d, lk_queue *q)
{
    const int t2 = c->kind == LK_BK_TERNARY, copies = t2 ? d->npool : 1;
    d->pw = calloc((size_t)copies, sizeof *d->pw);
    if (!d->pw)
        return LK_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < copies; i++) {
        lk_tensor w = lk_mat(t2 ? d->pool[i] : d->w, t2 ? LK_T2 : c->dt, c->n, c->k);
        lk_tensor ws = lk_mat(d->ws, LK_F32, 1, 1);
        lk_status st = lk_weights_prepare(q, &w, t2 ? &ws : NULL, &d->pw[i]);
        if (st != LK_OK)
            return st;
        d->nw = i + 1;
    }
    return LK_OK;
}

static lk_status run_lockstep(const lk_bench_case *c, bench_data *d, lk_queue *q, int rep)
{
    const int64_t m = c->m, n = c->n, k = c->k;
    switch (c->kind) {
    case LK_BK_GEMM: {
        lk_tensor a = lk_mat(d->x, LK_F32, m, k), b = lk_mat(d->w, LK_F32, k, n);
        lk_tensor y = lk_mat(d->y, LK_F32, m, n);
        return lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &a, &b, NULL, &y, 1, 0);
    }
    case LK_BK_LINEAR: {
        lk_tensor a = lk_mat(d->x, c->dt, m, k), b = lk_mat(d->w, c->dt, n, k);
        lk_tensor y = lk_mat(d->y, LK_F32, m, n);
        if (c->prepared)
            return lk_linear(q, &a, d->pw[0], NULL, &y, 0);
        return lk_gemm(q, LK_NO_TRANS, LK_TRANS, &a, &b, NULL, &y, 1, 0);
    }
    case LK_BK_TERNARY: {
        lk_tensor x = lk_mat(d->x, LK_I8, m, k), xs = lk_mat(d->xs, LK_F32, m, 1);
        lk_tensor w = lk_mat(d->pool[rep % d->npool], LK_T2, n, k);
        lk_tensor ws = lk_mat(d->ws, LK_F32, 1, 1), y = lk_mat(d->y, LK_F32, m, n);
        if (c->prepared)
            return lk_ternary_linear(q, &x, &xs, d->pw[rep % d->nw], &y, 0);
        return lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
    }
    case LK_BK_SUM: {
        lk_tensor x = lk_mat(d->x, LK_F32, 1, n), y = lk_mat(d->y, LK_F32, 1, 1);
        return lk_reduce(q, LK_REDUCE_SUM, &x, &y);
    }
    case LK_BK_ATTENTION: {
        lk_tensor kc = lk_mat(d->x, LK_F32, n, 640), vc = lk_mat((float *)d->x + 640, LK_F32, n, 640);
        kc.ld = vc.ld = 1280;
        lk_tensor qr = lk_mat(d->w, LK_F32, 1, 2560), y = lk_mat(d->y, LK_F32, 1, 2560);
        lk_tensor p = lk_mat(d->ws, LK_I32, 1, 1);
        return lk_attention(q, &qr, &kc, &vc, &p, 20, 5, 0.08838834764831845f, &y, 1);
    }
    default: {
        lk_tensor x = lk_mat(d->x, LK_F32, m, n), y = lk_mat(d->y, c->dt, m, n);
        switch (c->kind) {
        case LK_BK_RMSNORM:
            return lk_rmsnorm(q, &x, NULL, 1e-6f, &y);
        case LK_BK_LAYERNORM:
            return lk_layernorm(q, &x, NULL, NULL, 1e-6f, &y);
        case LK_BK_SOFTMAX:
            return lk_softmax(q, &x, &y);
        case LK_BK_SILU:
            return lk_unary(q, LK_UNARY_SILU, &x, &y);
        default:
            return lk_convert(q, &x, &y);
        }
    }
    }
}

/* Before timing a peer: with both scales 1, Lockstep's y and the peer's
 * are the integer dot products themselves (|dot| <= 127 K < 2^24, exact in
 * f32), so the two must agree bit for bit.  Otherwise the comparison
 * would not be of the same work: the case fails. */
static lk_status t2_peer_check(const lk_bench_case *c, bench_data *d, lk_queue *q, int threads)
{
    const int64_t n = c->n, k = c->k;
    float one = 1.0f;
    lk_tensor x = lk_mat(d->x, LK_I8, 1, k), xs = lk_mat(&one, LK_F32, 1, 1);
    lk_tensor w = lk_mat(d->pool[0], LK_T2, n, k);
    lk_tensor ws = lk_mat(&one, LK_F32, 1, 1), y = lk_mat(d->y, LK_F32, 1, n);
    lk_status st = lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
    if (st != LK_OK)
        return st;
    lk_peer_t2_run((lk_peer_t2 *)d->t2p, d->x, 1.0f, 1.0f, d->yp, threads);
    for (int64_t i = 0; i < n; i++)
        if (memcmp((float *)d->y + i, (float *)d->yp + i, 4) != 0) {
            fprintf(stderr, "lockstep bench: %s: row %lld: lockstep %.1f, %s %.1f\n", c->name,
                    (long long)i, (double)((float *)d->y)[i], c->peer_name,
                    (double)((float *)d->yp)[i]);
            return LK_ERR_INTERNAL;
        }
    return LK_OK;
}

/* Where the read loops' results go, so that no compiler skips the reads. */
static volatile unsigned long long sink;

/* The peer, once; 0 when it is not there (lk_bench_run says why). */
static int run_peer(const lk_bench_case *c, bench_data *d, int threads, int rep)
{
    const int64_t m = c->m, n = c->n, k = c->k;
    switch (c->kind) {
    case LK_BK_GEMM:
    case LK_BK_LINEAR:
        if (!lk_peer_have_openblas())
            return 0;
        lk_peer_sgemm((int)m, (int)n, (int)k, d->xf, d->wf, c->kind == LK_BK_LINEAR, d->yp);
        return 1;
    case LK_BK_TERNARY: /* cold: a copy Lockstep has not just read */
        if (c->t2_peer) {
            lk_peer_t2_run((lk_peer_t2 *)d->t2p, d->x, ((float *)d->xs)[0], ((float *)d->ws)[0],
                           d->yp, threads);
            return 1;
        }
        sink = lk_peer_read(d->pool[(rep + d->npool / 2) % d->npool], d->wbytes / 128 * 128,
                            threads);
        return 1;
    case LK_BK_SUM:
        sink = lk_peer_read(d->x, (size_t)n * 4, threads);
        return 1;
    case LK_BK_ATTENTION:
        sink = lk_peer_read(d->x, (size_t)c->bytes / 128 * 128, threads);
        return 1;
    default: /* reads and writes the op's bytes: half each way */
        lk_peer_copy(d->yp, d->x, (size_t)(c->bytes / 2) / 128 * 128, threads);
        return 1;
    }
}

/* OpenBLAS's idle threads spin for about 2^28 cycles after each call, and
 * would take the cores from the next case: let them go to sleep. */
static void settle(const lk_bench_case *c, int threads)
{
    if (threads > 1 && lk_peer_have_openblas() &&
        (c->kind == LK_BK_GEMM || c->kind == LK_BK_LINEAR)) {
        struct timespec t = {0, 250 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
}

lk_status lk_bench_run(const lk_bench_case *c, lk_queue *q, int threads, int reps,
                       lk_bench_result *r)
{
    bench_data d;
    const char *why = NULL;
    r->skip = NULL;
    /* A case that exists for its peer is skipped without it, with the
     * reason; other cases time Lockstep alone. */
    if (c->t2_peer && !lk_peer_t2_available(c->t2_peer, &why)) {
        r->lk_ms = r->peer_ms = 0.0;
        r->peer_name = c->peer_name;
        r->skip = why;
        return LK_OK;
    }
    lk_status st = setup(c, &d);
    double *tl = calloc((size_t)reps, sizeof *tl), *tp = calloc((size_t)reps, sizeof *tp);
    if (st == LK_OK && (!tl || !tp))
        st = LK_ERR_OUT_OF_MEMORY;
    if (st == LK_OK && c->prepared)
        st = prepare(c, &d, q);
    if (st == LK_OK && c->t2_peer)
        st = t2_peer_check(c, &d, q, threads);
    if (st == LK_OK)
        st = run_lockstep(c, &d, q, 0); /* warm-up, and the op's support */
    for (int i = 0; st == LK_OK && i < reps; i++) {
        double t0 = now_ms();
        st = run_lockstep(c, &d, q, i + 1);
        tl[i] = now_ms() - t0;
    }
    int have_peer = st == LK_OK ? run_peer(c, &d, threads, 0) : 0;
    for (int i = 0; have_peer && i < reps; i++) {
        double t0 = now_ms();
        run_peer(c, &d, threads, i + 1);
        tp[i] = now_ms() - t0;
    }
    if (have_peer)
        settle(c, threads);
    if (st == LK_OK) {
        r->lk_ms = median(tl, reps);
        r->peer_ms = have_peer ? median(tp, reps) : 0.0;
        r->peer_name = c->peer_name;
        if (!have_peer && (c->kind == LK_BK_GEMM || c->kind == LK_BK_LINEAR))
            r->skip = lk_peer_openblas_why();
    }
    free(tl);
    free(tp);
    data_free(&d);
    return st;
}
