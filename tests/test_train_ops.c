/* Lockstep tests: the training ops (docs/numerics.md section 13) on every
 * device against the reference, bit for bit (memcmp of whole buffers,
 * padding included): lk_unary_backward for every op and mixed dtypes,
 * lk_softmax_backward (softmax and log-softmax, rows of one and of two
 * chunks), lk_norm_backward (RMSNorm and LayerNorm, with and without a
 * weight and dwt), lk_embedding_backward (repeated ids, accumulation),
 * lk_sgd_step and lk_adamw_step (every flag, several steps).  Inputs are
 * seeded random values with NaN, Inf, zeros and subnormals among them.
 * The reference itself is checked against float64 formulas on finite
 * inputs, and the argument errors write nothing. */
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

static uint64_t rng;

/* mostly values in [-4, 4]; specials with probability 1/special_every */
static float rnd(int special_every)
{
    static const uint32_t special[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000000u,
                                       0x80000000u, 0x00000001u, 0x807fffffu, 0x42b20000u};
    uint64_t r = tap_rand(&rng);
    if (special_every > 0 && r % (uint64_t)special_every == 0) {
        float f;
        memcpy(&f, &special[(r >> 8) % (sizeof special / sizeof special[0])], 4);
        return f;
    }
    return (float)((double)(r >> 40) / (double)(1ull << 22) - 2.0) * 2.0f;
}

/* One tensor of an op: its dtype, shape, ld and host contents. */
typedef struct tb {
    lk_dtype dt;
    int64_t rows, cols, ld;
    int out;        /* compared after the op */
    void *host;     /* initial contents (rows * ld elements) */
    size_t bytes;
} tb;

#define MAXT 6

typedef lk_status (*op_fn)(lk_queue *q, const lk_tensor *t, const void *ctx);

static size_t esz(lk_dtype d)
{
    return d == LK_F32 || d == LK_I32 ? 4 : 2;
}

static void tb_make(tb *t, lk_dtype dt, int64_t rows, int64_t cols, int64_t pad, int out,
                    int special_every)
{
    t->dt = dt, t->rows = rows, t->cols = cols, t->ld = cols + pad, t->out = out;
    t->bytes = (size_t)(rows * t->ld) * esz(dt);
    t->host = malloc(t->bytes ? t->bytes : 1);
    if (!t->host)
        bail("out of memory");
    const size_t n = (size_t)(rows * t->ld);
    float *v = malloc((n ? n : 1) * sizeof(float));
    if (!v)
        bail("out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = rnd(special_every);
    if (dt != LK_I32)
        test_fill(t->host, dt, v, n);
    free(v);
}

/* Runs op on (d, q) with device copies of t[0..n); the outputs' bytes
 * after the op into res[i] (malloc'd). */
static lk_status run_on(lk_device *d, lk_queue *q, const tb *t, int n, op_fn fn,
                        const void *ctx, void **res)
{
    dbuf b[MAXT];
    lk_tensor ts[MAXT];
    memset(b, 0, sizeof b);
    for (int i = 0; i < n; i++) {
        if (!dbuf_up(d, q, &b[i], t[i].host, t[i].bytes))
            bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
        ts[i] = lk_mat_ld(b[i].p, t[i].dt, t[i].rows, t[i].cols, t[i].ld);
    }
    lk_status st = fn(q, ts, ctx);
    if (st == LK_OK)
        st = lk_queue_sync(q);
    for (int i = 0; i < n; i++) {
        res[i] = NULL;
        if (t[i].out && st == LK_OK) {
            res[i] = malloc(t[i].bytes ? t[i].bytes : 1);
            if (!res[i] || !dbuf_down(q, res[i], &b[i]))
                bail("%s: read back failed: %s", lk_device_name(d), lk_last_error());
        }
        dbuf_free(d, &b[i]);
    }
    return st;
}

/* The op on device d against the reference: ok when every output's bytes
 * agree; a SKIP when d does not have the op. */
static void compare(lk_device *d, lk_queue *q, lk_device *rd, lk_queue *rq, tb *t, int n,
                    op_fn fn, const void *ctx, const char *what)
{
    void *rr[MAXT], *dr[MAXT];
    lk_status sr = run_on(rd, rq, t, n, fn, ctx, rr);
    lk_status sd = run_on(d, q, t, n, fn, ctx, dr);
    char err[200];
    snprintf(err, sizeof err, "%s", lk_last_error());
    if (sd == LK_ERR_UNSUPPORTED) {
        skip(1, "%s on %s: unsupported (%s)", what, lk_device_name(d), err);
    } else {
        int bad = sr != LK_OK || sd != LK_OK;
        int first = -1;
        for (int i = 0; i < n && !bad; i++)
            if (t[i].out && memcmp(rr[i], dr[i], t[i].bytes)) {
                bad = 1;
                first = i;
            }
        ok(!bad, "%s on %s == ref%s%s%s", what, lk_device_name(d),
           sr != LK_OK || sd != LK_OK ? ": " : "", sr != LK_OK || sd != LK_OK ? err : "",
           first >= 0 ? " (output differs)" : "");
    }
    for (int i = 0; i < n; i++) {
        free(rr[i]);
        free(dr[i]);
    }
}

static void tb_free(tb *t, int n)
{
    for (int i = 0; i < n; i++)
        free(t[i].host);
}

/* ---- the ops, as op_fn ---- */

static lk_status f_unary(lk_queue *q, const lk_tensor *t, const void *ctx)
{
    const int *op = ctx;
    /* op < 0: in place, dx = dy */
    return *op > 0 ? lk_unary_backward(q, (lk_unary_op)*op, &t[0], &t[1], &t[2])
                   : lk_unary_backward(q, (lk_unary_op)-*op, &t[0], &t[1], &t[1]);
}

static lk_status f_softmax(lk_queue *q, const lk_tensor *t, const void *ctx)
{
    return lk_softmax_backward(q, &t[0], &t[1], *(const int *)ctx, &t[2]);
}

typedef struct norm_ctx {
    int layer, weight, dwt;
} norm_ctx;

static lk_status f_norm(lk_queue *q, const lk_tensor *t, const void *ctx)
{
    const norm_ctx *c = ctx;
    return lk_norm_backward(q, c->layer, &t[0], c->weight ? &t[1] : NULL, &t[2], 1e-5f, &t[3],
                            c->dwt ? &t[4] : NULL);
}

static lk_status f_embed(lk_queue *q, const lk_tensor *t, const void *ctx)
{
    (void)ctx;
    return lk_embedding_backward(q, &t[0], &t[1], &t[2]);
}

typedef struct optim_ctx {
    int adamw;
    float lr, mom, damp, wd;
    unsigned flags;
    int steps;
} optim_ctx;

static lk_status f_optim(lk_queue *q, const lk_tensor *t, const void *ctx)
{
    const optim_ctx *c = ctx;
    for (int s = 1; s <= c->steps; s++) {
        lk_status st =
            c->adamw ? lk_adamw_step(q, &t[0], &t[1], &t[2], &t[3], c->lr, 0.9f, 0.999f, 1e-8f,
                                     c->wd, s)
                     : lk_sgd_step(q, &t[0], &t[1], c->mom != 0.0f ? &t[2] : NULL, c->lr,
                                   c->mom, c->damp, c->wd, s == 1 ? c->flags | LK_SGD_FIRST
                                                                   : c->flags);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}

static const char *const unames[] = {"", "copy", "relu", "relu2", "sigmoid", "silu",
                                     "gelu_tanh", "gelu_erf", "exp", "log", "tanh", "erf"};

static const char *dn(lk_dtype d)
{
    return d == LK_F32 ? "f32" : d == LK_BF16 ? "bf16" : "f16";
}

#define N_UNARY_CASES 3
#define N_SOFTMAX_CASES 3
#define N_NORM_CASES 5
#define N_OPTIM_CASES 5
#define PER_DEVICE                                                                         \
    (N_UNARY_CASES * 11 + 1 + N_SOFTMAX_CASES * 2 + N_NORM_CASES * 2 + 2 + N_OPTIM_CASES)

static void test_device(lk_device *d, lk_queue *q, lk_device *rd, lk_queue *rq)
{
    char what[160];
    /* unary backward: every op, mixed dtypes and padding */
    static const struct {
        int64_t rows, cols;
        lk_dtype x, dy, dx;
    } uc[N_UNARY_CASES] = {{3, 517, LK_F32, LK_F32, LK_F32},
                           {2, 33, LK_BF16, LK_F32, LK_F16},
                           {5, 70, LK_F16, LK_BF16, LK_BF16}};
    for (int c = 0; c < N_UNARY_CASES; c++)
        for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++) {
            tb t[3];
            tb_make(&t[0], uc[c].x, uc[c].rows, uc[c].cols, c, 0, 12);
            tb_make(&t[1], uc[c].dy, uc[c].rows, uc[c].cols, 1, 0, 12);
            tb_make(&t[2], uc[c].dx, uc[c].rows, uc[c].cols, 2, 1, 0);
            snprintf(what, sizeof what, "unary_backward %s %lldx%lld %s,%s->%s", unames[op],
                     (long long)uc[c].rows, (long long)uc[c].cols, dn(uc[c].x), dn(uc[c].dy),
                     dn(uc[c].dx));
            compare(d, q, rd, rq, t, 3, f_unary, &op, what);
            tb_free(t, 3);
        }
    {
        tb t[2];
        int op = -LK_UNARY_SILU;
        tb_make(&t[0], LK_F32, 4, 300, 0, 0, 12);
        tb_make(&t[1], LK_F32, 4, 300, 0, 1, 12);
        compare(d, q, rd, rq, t, 2, f_unary, &op, "unary_backward silu, dx over dy");
        tb_free(t, 2);
    }
    /* softmax backward: one chunk, two chunks, one column */
    static const struct {
        int64_t rows, cols;
        lk_dtype dt;
    } sc[N_SOFTMAX_CASES] = {{5, 300, LK_F32}, {2, 5000, LK_BF16}, {7, 1, LK_F32}};
    for (int c = 0; c < N_SOFTMAX_CASES; c++)
        for (int log = 0; log < 2; log++) {
            tb t[3];
            tb_make(&t[0], sc[c].dt, sc[c].rows, sc[c].cols, 3, 0, 200);
            tb_make(&t[1], LK_F32, sc[c].rows, sc[c].cols, 0, 0, 200);
            tb_make(&t[2], sc[c].dt, sc[c].rows, sc[c].cols, 1, 1, 0);
            snprintf(what, sizeof what, "softmax_backward%s %lldx%lld %s", log ? " (log)" : "",
                     (long long)sc[c].rows, (long long)sc[c].cols, dn(sc[c].dt));
            compare(d, q, rd, rq, t, 3, f_softmax, &log, what);
            tb_free(t, 3);
        }
    /* norm backward */
    static const struct {
        int64_t rows, cols;
        lk_dtype dt;
        int weight, dwt;
    } nc[N_NORM_CASES] = {{5, 300, LK_F32, 1, 1},
                          {3, 4100, LK_F32, 1, 1},
                          {4, 64, LK_BF16, 0, 0},
                          {9, 768, LK_F16, 1, 0},
                          {2, 1, LK_F32, 1, 1}};
    for (int c = 0; c < N_NORM_CASES; c++)
        for (int layer = 0; layer < 2; layer++) {
            tb t[5];
            norm_ctx nx = {layer, nc[c].weight, nc[c].dwt};
            tb_make(&t[0], nc[c].dt, nc[c].rows, nc[c].cols, 1, 0, 500);
            tb_make(&t[1], LK_F32, 1, nc[c].cols, 0, 0, 0);
            tb_make(&t[2], LK_F32, nc[c].rows, nc[c].cols, 2, 0, 500);
            tb_make(&t[3], nc[c].dt, nc[c].rows, nc[c].cols, 0, 1, 0);
            tb_make(&t[4], LK_F32, nc[c].rows, nc[c].cols, 3, 1, 0);
            snprintf(what, sizeof what, "norm_backward %s %lldx%lld %s%s%s",
                     layer ? "layernorm" : "rmsnorm", (long long)nc[c].rows,
                     (long long)nc[c].cols, dn(nc[c].dt), nc[c].weight ? " weight" : "",
                     nc[c].dwt ? " dwt" : "");
            compare(d, q, rd, rq, t, 5, f_norm, &nx, what);
            tb_free(t, 5);
        }
    /* embedding backward: ids repeat, dtable accumulates */
    for (int c = 0; c < 2; c++) {
        tb t[3];
        const int64_t n = c ? 300 : 37, dim = c ? 130 : 9, vocab = c ? 50 : 3;
        tb_make(&t[0], c ? LK_BF16 : LK_F32, n, dim, c, 0, 100);
        tb_make(&t[1], LK_I32, n, 1, 0, 0, 0);
        for (int64_t r = 0; r < n; r++)
            ((int32_t *)t[1].host)[r] = (int32_t)(tap_rand(&rng) % (uint64_t)vocab);
        tb_make(&t[2], LK_F32, vocab, dim, 2, 1, 0);
        snprintf(what, sizeof what, "embedding_backward n=%lld dim=%lld vocab=%lld",
                 (long long)n, (long long)dim, (long long)vocab);
        compare(d, q, rd, rq, t, 3, f_embed, NULL, what);
        tb_free(t, 3);
    }
    /* optimizer steps */
    static const optim_ctx oc[N_OPTIM_CASES] = {
        {0, 0.1f, 0.0f, 0.0f, 0.0f, 0, 3},
        {0, 0.05f, 0.9f, 0.1f, 1e-2f, 0, 4},
        {0, 0.05f, 0.9f, 0.0f, 0.0f, LK_SGD_NESTEROV, 4},
        {1, 1e-3f, 0, 0, 0.01f, 0, 7},
        {1, 3e-4f, 0, 0, 0.0f, 0, 2},
    };
    for (int c = 0; c < N_OPTIM_CASES; c++) {
        tb t[4];
        tb_make(&t[0], LK_F32, 7, 129, 3, 1, 300);
        tb_make(&t[1], c == 2 ? LK_BF16 : LK_F32, 7, 129, 0, 0, 300);
        tb_make(&t[2], LK_F32, 7, 129, 1, 1, 0);
        tb_make(&t[3], LK_F32, 7, 129, 0, 1, 0);
        for (size_t i = 0; i < (size_t)(7 * 130); i++) /* a second moment is >= 0 */
            ((float *)t[2].host)[i] = 0.0f;
        memset(t[3].host, 0, t[3].bytes);
        snprintf(what, sizeof what, "%s step x%d (lr %g, momentum %g, wd %g, flags %u)",
                 oc[c].adamw ? "adamw" : "sgd", oc[c].steps, (double)oc[c].lr,
                 (double)oc[c].mom, (double)oc[c].wd, oc[c].flags);
        compare(d, q, rd, rq, t, 4, f_optim, &oc[c], what);
        tb_free(t, 4);
    }
}

/* ---- the reference against float64 formulas (finite inputs) ---- */

static double gelu_tanh_d(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double unary_d(int op, double x)
{
    switch (op) {
    case LK_UNARY_RELU: return x > 0 ? x : 0;
    case LK_UNARY_RELU2: return x > 0 ? x * x : 0;
    case LK_UNARY_SIGMOID: return 1 / (1 + exp(-x));
    case LK_UNARY_SILU: return x / (1 + exp(-x));
    case LK_UNARY_GELU_TANH: return gelu_tanh_d(x);
    case LK_UNARY_GELU_ERF: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case LK_UNARY_EXP: return exp(x);
    case LK_UNARY_LOG: return log(x);
    case LK_UNARY_TANH: return tanh(x);
    case LK_UNARY_ERF: return erf(x);
    default: return x;
    }
}

static void test_formulas(lk_queue *rq)
{
    enum { N = 64 };
    float x[N], dy[N], dx[N];
    int bad = 0;
    char first[160] = "";
    for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++) {
        for (int i = 0; i < N; i++) {
            x[i] = op == LK_UNARY_LOG ? 0.1f + (float)i * 0.1f : -3.0f + (float)i * 0.0931f;
            if (op == LK_UNARY_RELU || op == LK_UNARY_RELU2)
                x[i] += 0.013f; /* no kink exactly at 0 */
            dy[i] = 1.0f + (float)(i % 5) * 0.25f;
        }
        lk_tensor tx = lk_mat(x, LK_F32, 1, N), td = lk_mat(dy, LK_F32, 1, N);
        lk_tensor to = lk_mat(dx, LK_F32, 1, N);
        if (lk_unary_backward(rq, (lk_unary_op)op, &tx, &td, &to) != LK_OK) {
            bad++;
            continue;
        }
        for (int i = 0; i < N; i++) {
            const double h = 1e-6, xd = x[i];
            const double want = dy[i] * (unary_d(op, xd + h) - unary_d(op, xd - h)) / (2 * h);
            if (fabs(dx[i] - want) > 1e-4 * (1 + fabs(want))) {
                if (!bad++)
                    snprintf(first, sizeof first, "%s at %g: %g, float64 %g", unames[op],
                             (double)x[i], (double)dx[i], want);
            }
        }
    }
    ok(!bad, "unary_backward (ref) within 1e-4 of float64 derivatives%s%s", bad ? ": " : "",
       first);

    /* softmax, rmsnorm and layernorm backward on a small row */
    enum { R = 3, C = 37 };
    float xs[R * C], g[R * C], y[R * C], w[C], o[R * C], wt[R * C];
    for (int i = 0; i < R * C; i++) {
        xs[i] = rnd(0);
        g[i] = rnd(0);
    }
    for (int i = 0; i < C; i++)
        w[i] = 0.5f + (float)i / C;
    lk_tensor tx = lk_mat(xs, LK_F32, R, C), tg = lk_mat(g, LK_F32, R, C);
    lk_tensor ty = lk_mat(y, LK_F32, R, C), tw = lk_mat(w, LK_F32, 1, C);
    lk_tensor tout = lk_mat(o, LK_F32, R, C), twt = lk_mat(wt, LK_F32, R, C);
    double err = 0;
    int st = lk_softmax(rq, &tx, &ty) == LK_OK && lk_softmax_backward(rq, &ty, &tg, 0, &tout) == LK_OK;
    for (int r = 0; r < R && st; r++) {
        double dot = 0;
        for (int i = 0; i < C; i++)
            dot += (double)g[r * C + i] * y[r * C + i];
        for (int i = 0; i < C; i++)
            err = fmax(err, fabs(o[r * C + i] - (g[r * C + i] - dot) * y[r * C + i]));
    }
    ok(st && err < 1e-6, "softmax_backward (ref) within 1e-6 of float64 (%g)", err);
    for (int layer = 0; layer < 2; layer++) {
        err = 0;
        double werr = 0;
        st = lk_norm_backward(rq, layer, &tx, &tw, &tg, 1e-5f, &tout, &twt) == LK_OK;
        for (int r = 0; r < R && st; r++) {
            const float *xr = xs + r * C, *gr = g + r * C;
            double m = 0, v = 0, xh[C], gg[C], a = 0, b = 0;
            if (layer) {
                for (int i = 0; i < C; i++)
                    m += xr[i];
                m /= C;
            }
            for (int i = 0; i < C; i++)
                v += (xr[i] - m) * (xr[i] - m);
            v /= C;
            const double rs = 1 / sqrt(v + 1e-5);
            for (int i = 0; i < C; i++) {
                xh[i] = (xr[i] - m) * rs;
                gg[i] = (double)gr[i] * w[i];
                a += gg[i];
                b += gg[i] * xh[i];
            }
            a /= C, b /= C;
            for (int i = 0; i < C; i++) {
                double want = layer ? (gg[i] - a - xh[i] * b) * rs : (gg[i] - xh[i] * b) * rs;
                err = fmax(err, fabs(o[r * C + i] - want) / (1 + fabs(want)));
                werr = fmax(werr, fabs(wt[r * C + i] - gr[i] * xh[i]) / (1 + fabs(gr[i] * xh[i])));
            }
        }
        ok(st && err < 1e-5 && werr < 1e-5,
           "%s backward (ref) within 1e-5 of float64 (dx %g, dwt %g)",
           layer ? "layernorm" : "rmsnorm", err, werr);
    }

    /* AdamW and SGD against float64 on one element, three steps */
    float p = 0.5f, gr = 0.25f, m1 = 0, v1 = 0, ps = 0.5f, bs = 0;
    lk_tensor tp = lk_mat(&p, LK_F32, 1, 1), tgr = lk_mat(&gr, LK_F32, 1, 1);
    lk_tensor tm = lk_mat(&m1, LK_F32, 1, 1), tv = lk_mat(&v1, LK_F32, 1, 1);
    lk_tensor tps = lk_mat(&ps, LK_F32, 1, 1), tbs = lk_mat(&bs, LK_F32, 1, 1);
    double P = 0.5, M = 0, V = 0, PS = 0.5, B = 0;
    st = 1;
    for (int s = 1; s <= 3; s++) {
        st &= lk_adamw_step(rq, &tp, &tgr, &tm, &tv, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, s) == LK_OK;
        P *= 1 - 1e-2 * 0.1;
        M = 0.9 * M + 0.1 * 0.25;
        V = 0.999 * V + 0.001 * 0.0625;
        P -= 1e-2 / (1 - pow(0.9, s)) * M / (sqrt(V) / sqrt(1 - pow(0.999, s)) + 1e-8);
        st &= lk_sgd_step(rq, &tps, &tgr, &tbs, 0.1f, 0.9f, 0.0f, 0.0f,
                          s == 1 ? LK_SGD_FIRST : 0) == LK_OK;
        B = s == 1 ? 0.25 : 0.9 * B + 0.25;
        PS -= 0.1 * B;
    }
    ok(st && fabs(p - P) < 1e-6 && fabs(ps - PS) < 1e-6,
       "adamw and sgd (ref), three steps: %.9g / %.9g, float64 %.9g / %.9g", (double)p,
       (double)ps, P, PS);
}

/* ---- argument errors: nothing written ---- */

static void test_errors(lk_queue *q)
{
    float a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b[12] = {0}, y[12], tab[8];
    int32_t ids[3] = {0, 1, 4};
    for (int i = 0; i < 12; i++)
        y[i] = -1.0f;
    for (int i = 0; i < 8; i++)
        tab[i] = -1.0f;
    lk_tensor ta = lk_mat(a, LK_F32, 3, 4), tb2 = lk_mat(b, LK_F32, 3, 4);
    lk_tensor ty = lk_mat(y, LK_F32, 3, 4), bad = lk_mat(b, LK_F32, 3, 3);
#define UNTOUCHED() (y[0] == -1.0f && y[11] == -1.0f)
    ok(lk_unary_backward(q, (lk_unary_op)0, &ta, &tb2, &ty) == LK_ERR_INVALID_ARGUMENT &&
           UNTOUCHED(),
       "unary_backward op 0: LK_ERR_INVALID_ARGUMENT, nothing written");
    ok(lk_unary_backward(q, LK_UNARY_SILU, &ta, &bad, &ty) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "unary_backward dy of another shape: LK_ERR_BAD_SHAPE");
    ok(lk_softmax_backward(q, &ta, &bad, 0, &ty) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "softmax_backward dy of another shape: LK_ERR_BAD_SHAPE");
    lk_tensor w3 = lk_mat(b, LK_F32, 1, 3);
    ok(lk_norm_backward(q, 0, &ta, &w3, &tb2, 1e-5f, &ty, NULL) == LK_ERR_BAD_SHAPE &&
           UNTOUCHED(),
       "norm_backward weight 1 x 3 for 4 cols: LK_ERR_BAD_SHAPE");
    lk_tensor tid = lk_mat(ids, LK_I32, 3, 1), ttab = lk_mat(tab, LK_F32, 2, 4);
    ok(lk_embedding_backward(q, &ta, &tid, &ttab) == LK_ERR_RANGE && tab[0] == -1.0f &&
           tab[7] == -1.0f,
       "embedding_backward id 4 of 2: LK_ERR_RANGE, nothing written");
    lk_tensor tb16 = lk_mat(tab, LK_BF16, 2, 4);
    ids[2] = 1;
    ok(lk_embedding_backward(q, &ta, &tid, &tb16) == LK_ERR_BAD_DTYPE,
       "embedding_backward into bf16: LK_ERR_BAD_DTYPE (f32 accumulates)");
    ok(lk_embedding_backward(q, &ta, &tid, &ttab) == LK_OK && tab[0] == 0.0f && tab[4] == 13.0f,
       "embedding_backward: rows added in order (tab[0] = -1 + 1, tab[4] = -1 + 5 + 9)");
    ok(lk_adamw_step(q, &ty, &ta, &tb2, &tb2, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 0) ==
               LK_ERR_INVALID_ARGUMENT &&
           UNTOUCHED(),
       "adamw_step step 0: LK_ERR_INVALID_ARGUMENT");
    ok(lk_adamw_step(q, &ty, &ta, &tb2, &tb2, 1e-3f, 0.9f, 0.999f, 1e-8f, 0, 1) == LK_ERR_ALIASING &&
           UNTOUCHED(),
       "adamw_step m and v one buffer: LK_ERR_ALIASING");
    ok(lk_sgd_step(q, &ty, &ta, NULL, 0.1f, 0.9f, 0, 0, 0) == LK_ERR_NULL_POINTER && UNTOUCHED(),
       "sgd_step momentum without buf: LK_ERR_NULL_POINTER");
    ok(lk_sgd_step(q, &ty, &ta, NULL, 0.1f, 0, 0, 0, 1u << 7) == LK_ERR_INVALID_ARGUMENT &&
           UNTOUCHED(),
       "sgd_step unknown flag: LK_ERR_INVALID_ARGUMENT");
#undef UNTOUCHED
}

int main(void)
{
    uint64_t seed = tap_seed();
    test_devices t;
    test_devices_open(&t);
    lk_device *rd = NULL;
    for (int d = 0; d < t.n; d++)
        if (t.q[d] == t.ref_q)
            rd = t.dev[d];
    plan((t.n - 1) * PER_DEVICE + 5 + 11);
    for (int d = 0; d < t.n; d++) {
        if (t.q[d] == t.ref_q)
            continue;
        rng = seed;
        test_device(t.dev[d], t.q[d], rd, t.ref_q);
    }
    rng = seed;
    test_formulas(t.ref_q);
    test_errors(t.ref_q);
    test_devices_close(&t);
    return done_testing();
}
