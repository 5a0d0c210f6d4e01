/* Prepared weights (include/lockstep/weights.h): on every device,
 * lk_linear gives the bits of lk_gemm(NO_TRANS, TRANS) and
 * lk_ternary_linear those of lk_ternary_gemm, for random odd shapes and
 * M = 1, 3, 8, 33; row i does not depend on M; the handle keeps its own
 * copy; and every bad call fails with its status and writes nothing. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tap.h"

static uint64_t rng;

static int64_t rnd(int64_t lo, int64_t hi) { return lo + (int64_t)(tap_rand(&rng) % (uint64_t)(hi - lo + 1)); }

static float rndf(void) { return (float)((double)(tap_rand(&rng) >> 11) / 9007199254740992.0 * 4.0 - 2.0); }

static size_t esize(lk_dtype dt) { return dt == LK_T2 ? 1 : lk_dtype_size(dt); }

/* A host matrix of random contents (float values in [-2, 2), int8, or
 * ternary codes), rows x ld elements (ld / 4 bytes per row for t2). */
typedef struct hmat {
    lk_dtype dt;
    int64_t rows, cols, ld;
    size_t bytes;
    unsigned char *h;
} hmat;

/* When set, about one float in 16 is an edge value (NaN, +-Inf, +-0, a
 * subnormal, near-overflow). */
static int edge_vals;

static float edge_or(float v)
{
    static const float sp[8] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e-40f, 3e38f, -3e38f};
    if (!edge_vals || tap_rand(&rng) % 16 != 0)
        return v;
    return sp[tap_rand(&rng) % 8];
}

static hmat hrand(lk_dtype dt, int64_t rows, int64_t cols, int64_t pad)
{
    hmat m = {dt, rows, cols, cols + pad, 0, NULL};
    if (dt == LK_T2)
        m.ld = (cols + pad + 3) / 4 * 4;
    m.bytes = dt == LK_T2 ? (size_t)(rows * m.ld / 4) : (size_t)(rows * m.ld) * esize(dt);
    m.h = malloc(m.bytes ? m.bytes : 1);
    for (size_t i = 0; i < m.bytes; i++)
        m.h[i] = (unsigned char)tap_rand(&rng);
    if (dt == LK_F32 || dt == LK_BF16 || dt == LK_F16)
        for (int64_t i = 0; i < rows * m.ld; i++) {
            float v = edge_or(rndf());
            if (dt == LK_F32)
                ((float *)(void *)m.h)[i] = v;
            else if (dt == LK_BF16)
                ((uint16_t *)(void *)m.h)[i] = lk_f32_to_bf16(v);
            else
                ((uint16_t *)(void *)m.h)[i] = lk_f32_to_f16(v);
        }
    if (dt == LK_T2) /* codes 0..2 only (value code - 1) */
        for (size_t i = 0; i < m.bytes; i++) {
            unsigned char b = 0;
            for (int j = 0; j < 4; j++)
                b |= (unsigned char)((tap_rand(&rng) % 3) << (2 * j));
            m.h[i] = b;
        }
    return m;
}

/* A copy of m in memory of dev, as a tensor. */
typedef struct dmat {
    lk_device *dev;
    void *p;
    lk_tensor t;
    size_t bytes;
} dmat;

static dmat up(lk_queue *q, const hmat *m)
{
    dmat d = {lk_queue_device(q), NULL, lk_mat_ld(NULL, m->dt, m->rows, m->cols, m->ld), m->bytes};
    if (lk_malloc(d.dev, m->bytes ? m->bytes : 1, &d.p) != LK_OK)
        bail("lk_malloc: %s", lk_last_error());
    if (m->bytes && lk_memcpy(q, d.p, m->h, m->bytes, LK_COPY_HOST_TO_DEVICE) != LK_OK)
        bail("lk_memcpy: %s", lk_last_error());
    /* the data is used on other queues too: on a GPU, queues are streams
     * that do not wait for each other */
    if (lk_queue_sync(q) != LK_OK)
        bail("lk_queue_sync: %s", lk_last_error());
    d.t.data = d.p;
    return d;
}

static void down(lk_queue *q, const dmat *d, unsigned char *h)
{
    if (d->bytes && lk_memcpy(q, h, d->p, d->bytes, LK_COPY_DEVICE_TO_HOST) != LK_OK)
        bail("lk_memcpy: %s", lk_last_error());
    lk_queue_sync(q);
}

static void dfree(dmat *d) { lk_free(d->dev, d->p); }

static const lk_dtype fdt[3] = {LK_F32, LK_BF16, LK_F16};

/* One float case: y1 = lk_gemm(x, W^T), y2 = lk_linear(x, prepared W),
 * starting from the same y when accumulating; then row by row with M = 1
 * (batch invariance).  Returns 1 when every bit agrees. */
static int float_case(lk_queue *q, lk_queue *q3, int64_t m, int64_t n, int64_t k, lk_dtype xd,
                      lk_dtype wd, lk_dtype yd, int with_bias, unsigned flags, char *why,
                      size_t whyn)
{
    hmat x = hrand(xd, m, k, rnd(0, 1) * 3), w = hrand(wd, n, k, rnd(0, 1) * 5);
    hmat b = hrand(xd, 1, n, 0), y0 = hrand(yd, m, n, rnd(0, 1) * 2);
    dmat dx = up(q, &x), dw = up(q, &w), db = up(q, &b), d1 = up(q, &y0), d2 = up(q, &y0);
    unsigned char *h1 = malloc(y0.bytes + 1), *h2 = malloc(y0.bytes + 1), *hr = malloc(y0.bytes + 1);
    int good = 1;
    lk_weights *pw = NULL;
    why[0] = '\0';
    if (lk_weights_prepare(q3, &dw.t, NULL, &pw) != LK_OK) {
        snprintf(why, whyn, "prepare: %s", lk_last_error());
        good = 0;
        goto out;
    }
    /* the handle owns its copy: scribbling over w now changes nothing */
    memset(w.h, 0x7f, w.bytes);
    lk_status s1 = lk_gemm(q, LK_NO_TRANS, LK_TRANS, &dx.t, &dw.t, with_bias ? &db.t : NULL,
                           &d1.t, 1, flags);
    if (w.bytes)
        lk_memcpy(q, dw.p, w.h, w.bytes, LK_COPY_HOST_TO_DEVICE);
    lk_queue_sync(q); /* d1 is read back through q3 below */
    lk_status s2 = lk_linear(q3, &dx.t, pw, with_bias ? &db.t : NULL, &d2.t, flags);
    if (s1 != LK_OK || s2 != LK_OK) {
        snprintf(why, whyn, "gemm %s, linear %s: %s", lk_status_string(s1),
                 lk_status_string(s2), lk_last_error());
        good = 0;
        goto out;
    }
    down(q, &d1, h1);
    down(q3, &d2, h2);
    if (memcmp(h1, h2, y0.bytes) != 0) {
        snprintf(why, whyn, "lk_linear differs from lk_gemm");
        good = 0;
        goto out;
    }
    /* row r alone (M = 1) gives row r of the whole */
    const size_t ye = esize(yd);
    for (int64_t r = 0; r < m && good; r += (m > 4 ? 7 : 1)) {
        hmat xr = x, yr = y0;
        xr.rows = yr.rows = 1;
        xr.h = x.h + (size_t)(r * x.ld) * esize(xd);
        yr.h = y0.h + (size_t)(r * y0.ld) * ye;
        xr.bytes = (size_t)x.ld * esize(xd);
        yr.bytes = (size_t)y0.ld * ye;
        dmat ex = up(q, &xr), ey = up(q, &yr);
        if (lk_linear(q3, &ex.t, pw, with_bias ? &db.t : NULL, &ey.t, flags) != LK_OK) {
            snprintf(why, whyn, "linear M=1: %s", lk_last_error());
            good = 0;
        } else {
            down(q3, &ey, hr);
            if (memcmp(hr, h1 + (size_t)(r * y0.ld) * ye, (size_t)n * ye) != 0) {
                snprintf(why, whyn, "row %lld with M = 1 differs", (long long)r);
                good = 0;
            }
        }
        dfree(&ex);
        dfree(&ey);
    }
out:
    lk_weights_destroy(pw);
    dfree(&dx), dfree(&dw), dfree(&db), dfree(&d1), dfree(&d2);
    free(x.h), free(w.h), free(b.h), free(y0.h), free(h1), free(h2), free(hr);
    return good;
}

static int ternary_case(lk_queue *q, lk_queue *q3, int64_t m, int64_t n, int64_t k, lk_dtype yd,
                        int per_n, char *why, size_t whyn)
{
    hmat x = hrand(LK_I8, m, k, rnd(0, 1) * 3), w = hrand(LK_T2, n, k, rnd(0, 1) * 8);
    hmat xs = hrand(LK_F32, m, 1, 0), ws = hrand(LK_F32, 1, per_n ? n : 1, 0);
    hmat y0 = hrand(yd, m, n, 0);
    for (int64_t i = 0; i < m; i++) /* scales as lk_quantize_act makes them: positive */
        ((float *)(void *)xs.h)[i] = 1.0f + (float)rnd(0, 1000) / 7.0f;
    if (rnd(0, 3) == 0) /* extremes: every x = -128, every weight -1 */
        memset(x.h, 0x80, x.bytes), memset(w.h, 0, w.bytes);
    dmat dx = up(q, &x), dw = up(q, &w), dxs = up(q, &xs), dws = up(q, &ws);
    dmat d1 = up(q, &y0), d2 = up(q, &y0);
    unsigned char *h1 = malloc(y0.bytes + 1), *h2 = malloc(y0.bytes + 1), *hr = malloc(y0.bytes + 1);
    int good = 1;
    lk_weights *pw = NULL;
    why[0] = '\0';
    if (lk_weights_prepare(q3, &dw.t, &dws.t, &pw) != LK_OK) {
        snprintf(why, whyn, "prepare: %s", lk_last_error());
        good = 0;
        goto out;
    }
    lk_status s1 = lk_ternary_gemm(q, &dx.t, &dxs.t, &dw.t, &dws.t, &d1.t);
    lk_status s2 = lk_ternary_linear(q3, &dx.t, &dxs.t, pw, &d2.t, 0);
    if (s1 != LK_OK || s2 != LK_OK) {
        snprintf(why, whyn, "ternary_gemm %s, ternary_linear %s: %s", lk_status_string(s1),
                 lk_status_string(s2), lk_last_error());
        good = 0;
        goto out;
    }
    down(q, &d1, h1);
    down(q3, &d2, h2);
    if (memcmp(h1, h2, y0.bytes) != 0) {
        snprintf(why, whyn, "lk_ternary_linear differs from lk_ternary_gemm");
        good = 0;
        goto out;
    }
    const size_t ye = esize(yd);
    for (int64_t r = 0; r < m && good; r += (m > 4 ? 5 : 1)) {
        hmat xr = x, sr = xs, yr = y0;
        xr.rows = sr.rows = yr.rows = 1;
        xr.h = x.h + (size_t)(r * x.ld);
        sr.h = xs.h + (size_t)r * 4;
        yr.h = y0.h + (size_t)(r * y0.ld) * ye;
        xr.bytes = (size_t)x.ld;
        sr.bytes = 4;
        yr.bytes = (size_t)y0.ld * ye;
        dmat ex = up(q, &xr), es = up(q, &sr), ey = up(q, &yr);
        if (lk_ternary_linear(q3, &ex.t, &es.t, pw, &ey.t, 0) != LK_OK) {
            snprintf(why, whyn, "ternary_linear M=1: %s", lk_last_error());
            good = 0;
        } else {
            down(q3, &ey, hr);
            if (memcmp(hr, h1 + (size_t)(r * y0.ld) * ye, (size_t)n * ye) != 0) {
                snprintf(why, whyn, "row %lld with M = 1 differs", (long long)r);
                good = 0;
            }
        }
        dfree(&ex), dfree(&es), dfree(&ey);
    }
out:
    lk_weights_destroy(pw);
    dfree(&dx), dfree(&dw), dfree(&dxs), dfree(&dws), dfree(&d1), dfree(&d2);
    free(x.h), free(w.h), free(xs.h), free(ws.h), free(y0.h), free(h1), free(h2), free(hr);
    return good;
}

/* LK_GEMM_ACCUMULATE: lk_ternary_linear into y0 gives the bits of the
 * plain call into a temporary, then lk_binary ADD of y0 and it; y0 holds
 * NaN (one with a payload, one negative), +-Inf and -0 among its values. */
static int accum_case(lk_queue *q3, int64_t m, int64_t n, int64_t k, int per_n, char *why,
                      size_t whyn)
{
    hmat x = hrand(LK_I8, m, k, rnd(0, 1) * 3), w = hrand(LK_T2, n, k, rnd(0, 1) * 8);
    hmat xs = hrand(LK_F32, m, 1, 0), ws = hrand(LK_F32, 1, per_n ? n : 1, 0);
    for (int64_t i = 0; i < m; i++)
        ((float *)(void *)xs.h)[i] = 1.0f + (float)rnd(0, 1000) / 7.0f;
    edge_vals = 1;
    hmat y0 = hrand(LK_F32, m, n, 0);
    edge_vals = 0;
    static const uint32_t sp[6] = {0x7fc00001u, 0xffc00000u, 0x7f800000u, 0xff800000u,
                                   0x80000000u, 0x7fc00000u};
    for (int i = 0; i < 6 && i < m * n; i++)
        memcpy(y0.h + (size_t)rnd(0, m * n - 1) * 4, &sp[i], 4);
    dmat dx = up(q3, &x), dw = up(q3, &w), dxs = up(q3, &xs), dws = up(q3, &ws);
    dmat d1 = up(q3, &y0), d2 = up(q3, &y0), dt = up(q3, &y0);
    unsigned char *h1 = malloc(y0.bytes + 1), *h2 = malloc(y0.bytes + 1);
    int good = 1;
    lk_weights *pw = NULL;
    why[0] = '\0';
    if (lk_weights_prepare(q3, &dw.t, &dws.t, &pw) != LK_OK) {
        snprintf(why, whyn, "prepare: %s", lk_last_error());
        good = 0;
        goto out;
    }
    lk_status s1 = lk_ternary_linear(q3, &dx.t, &dxs.t, pw, &dt.t, 0);
    if (s1 == LK_OK)
        s1 = lk_binary(q3, LK_BINARY_ADD, &d1.t, &dt.t, &d1.t);
    lk_status s2 = lk_ternary_linear(q3, &dx.t, &dxs.t, pw, &d2.t, LK_GEMM_ACCUMULATE);
    if (s1 != LK_OK || s2 != LK_OK) {
        snprintf(why, whyn, "plain + add %s, accumulate %s: %s", lk_status_string(s1),
                 lk_status_string(s2), lk_last_error());
        good = 0;
        goto out;
    }
    down(q3, &d1, h1);
    down(q3, &d2, h2);
    for (int64_t i = 0; i < m * n && good; i++)
        if (memcmp(h1 + i * 4, h2 + i * 4, 4) != 0) {
            uint32_t a, b, o;
            memcpy(&a, h1 + i * 4, 4), memcpy(&b, h2 + i * 4, 4), memcpy(&o, y0.h + i * 4, 4);
            snprintf(why, whyn, "y[%lld, %lld] (old 0x%08x): accumulate 0x%08x, add 0x%08x",
                     (long long)(i / n), (long long)(i % n), (unsigned)o, (unsigned)b,
                     (unsigned)a);
            good = 0;
        }
out:
    lk_weights_destroy(pw);
    dfree(&dx), dfree(&dw), dfree(&dxs), dfree(&dws), dfree(&d1), dfree(&d2), dfree(&dt);
    free(x.h), free(w.h), free(xs.h), free(ws.h), free(y0.h), free(h1), free(h2);
    return good;
}

static const int64_t ms[4] = {1, 3, 8, 33};

static void run_device(lk_device *dev)
{
    lk_device_props p;
    lk_device_props_get(dev, &p);
    lk_queue *q = NULL, *q3 = NULL;
    lk_queue_opts o2 = {2, NULL}, o3 = {3, NULL};
    if (lk_queue_create(dev, &o2, &q) != LK_OK || lk_queue_create(dev, &o3, &q3) != LK_OK) {
        skip(4, "%s: no queue: %s", p.name, lk_last_error());
        lk_queue_destroy(q);
        return;
    }
    /* emulated ISAs are slow: fewer and smaller cases */
    const int slow = p.emulated, reps = slow ? 1 : 3;
    const int64_t kmax = slow ? 200 : 700;
    int good = 1;
    char why[256] = "";
    for (int rep = 0; rep < reps && good; rep++)
        for (int mi = 0; mi < 4 && good; mi++) {
            const int64_t m = ms[mi], n = rnd(1, 80), k = rnd(1, kmax);
            const lk_dtype xd = fdt[rnd(0, 2)], wd = fdt[(mi + rep) % 3], yd = fdt[rnd(0, 2)];
            const int bias = (int)rnd(0, 1);
            const unsigned flags = rnd(0, 2) == 0 ? LK_GEMM_ACCUMULATE : 0u;
            if (!float_case(q, q3, m, n, k, xd, wd, yd, bias, flags, why, sizeof why))
                diag("%s: M %lld N %lld K %lld x %s w %s y %s bias %d flags %u: %s", p.name,
                     (long long)m, (long long)n, (long long)k, lk_dtype_name(xd),
                     lk_dtype_name(wd), lk_dtype_name(yd), bias, flags, why),
                    good = 0;
        }
    /* K over several k-panels and N over several panels, once per weight dtype */
    for (int d = 0; d < 3 && good && !slow; d++)
        if (!float_case(q, q3, 40, 150, 1000 + d, LK_F32, fdt[d], LK_F32, 1, 0, why, sizeof why))
            diag("%s: M 40 N 150 K %d w %s: %s", p.name, 1000 + d, lk_dtype_name(fdt[d]), why),
                good = 0;
    /* N over two column blocks of the CPU GEMM (3072 columns each) */
    if (good && !slow && !float_case(q, q3, 13, 3100, 130, LK_BF16, fdt[rnd(0, 2)], LK_F32, 0, 0,
                                     why, sizeof why))
        diag("%s: M 13 N 3100 K 130: %s", p.name, why), good = 0;
    ok(good, "%s: lk_linear = lk_gemm(NO_TRANS, TRANS), M = 1, 3, 8, 33, batch invariant",
       p.name);

    /* shapes that cut a prepared layout's row groups and 128-k blocks
     * unevenly (N = 1, 31, 33, 640, 6912; K = 1, 127, 128, 129, 2560,
     * 6912; M = 1, 2, 5, 8, 9, 33), with edge values in x and w; the last
     * three have more row groups than two blocks an SM of a 132-SM GPU
     * take and 4, 8 or 20 128-k blocks: the CUDA driver's blocks of one
     * group each (linear.cu) */
    static const int64_t stress[][3] = {
        {1, 1, 1},       {2, 31, 127},    {5, 33, 128},  {8, 640, 129},  {9, 33, 2560},
        {1, 6912, 129},  {33, 31, 6912},  {1, 640, 2560}, {2, 6912, 128}, {5, 1, 6912},
        {8, 33, 1},      {33, 640, 127},  {1, 2560, 2560}, {1, 3000, 512}, {4, 2600, 1000},
    };
    const int nstress = (int)(sizeof stress / sizeof stress[0]);
    good = 1;
    for (int i = 0; i < nstress && good && !slow; i++) {
        const int64_t m = stress[i][0], n = stress[i][1], k = stress[i][2];
        const lk_dtype xd = fdt[rnd(0, 2)], wd = fdt[i % 3], yd = fdt[rnd(0, 2)];
        const int bias = (int)rnd(0, 1);
        const unsigned flags = rnd(0, 1) == 0 ? LK_GEMM_ACCUMULATE : 0u;
        edge_vals = 1;
        if (!float_case(q, q3, m, n, k, xd, wd, yd, bias, flags, why, sizeof why))
            diag("%s: M %lld N %lld K %lld x %s w %s y %s bias %d flags %u: %s", p.name,
                 (long long)m, (long long)n, (long long)k, lk_dtype_name(xd), lk_dtype_name(wd),
                 lk_dtype_name(yd), bias, flags, why),
                good = 0;
        edge_vals = 0;
        if (good && !ternary_case(q, q3, m, n, k, yd, (int)rnd(0, 1), why, sizeof why))
            diag("%s: ternary M %lld N %lld K %lld y %s: %s", p.name, (long long)m, (long long)n,
                 (long long)k, lk_dtype_name(yd), why),
                good = 0;
    }
    if (slow)
        skip(1, "%s: layout stress shapes (emulated device: too slow)", p.name);
    else
        ok(good, "%s: prepared = unprepared on the layout stress shapes, edge values", p.name);

    good = 1;
    for (int rep = 0; rep < reps && good; rep++)
        for (int mi = 0; mi < 4 && good; mi++) {
            const int64_t m = ms[mi], n = rnd(1, 70);
            const int64_t k = rep == 0 && mi == 3 && !slow ? rnd(2000, 3000) : rnd(1, kmax);
            const lk_dtype yd = fdt[rnd(0, 2)];
            const int per_n = (int)rnd(0, 1);
            if (!ternary_case(q, q3, m, n, k, yd, per_n, why, sizeof why))
                diag("%s: M %lld N %lld K %lld y %s per_n %d: %s", p.name, (long long)m,
                     (long long)n, (long long)k, lk_dtype_name(yd), per_n, why),
                    good = 0;
        }
    ok(good, "%s: lk_ternary_linear = lk_ternary_gemm, M = 1, 3, 8, 33, batch invariant",
       p.name);

    /* M on both sides of the CUDA kernel switches (GEMV <= 8 < tensor
     * cores / tiles), and once a shape the wgmma kernels take */
    static const int64_t ams[5] = {1, 3, 8, 9, 64};
    good = 1;
    for (int mi = 0; mi < 5 && good; mi++) {
        const int64_t m = ams[mi], n = rnd(1, 90), k = rnd(1, kmax);
        const int per_n = (int)rnd(0, 1);
        if (!accum_case(q3, m, n, k, per_n, why, sizeof why))
            diag("%s: accumulate M %lld N %lld K %lld per_n %d: %s", p.name, (long long)m,
                 (long long)n, (long long)k, per_n, why),
                good = 0;
    }
    if (good && !slow && !accum_case(q3, 64, 256, 640, 1, why, sizeof why))
        diag("%s: accumulate M 64 N 256 K 640: %s", p.name, why), good = 0;
    ok(good, "%s: lk_ternary_linear ACCUMULATE = plain + lk_binary ADD, M = 1, 3, 8, 9, 64",
       p.name);
    lk_queue_destroy(q);
    lk_queue_destroy(q3);
}

/* Bad calls on a host-memory device: status, and y untouched. */
static void errors(lk_context *ctx, lk_device *dev)
{
    lk_queue *q = NULL, *qr = NULL;
    lk_device *ref = NULL;
    lk_queue_create(dev, NULL, &q);
    if (lk_device_find(ctx, "ref", &ref) != LK_OK || lk_queue_create(ref, NULL, &qr) != LK_OK)
        bail("ref: %s", lk_last_error());
    float x[4 * 6], w[5 * 6], b[5], y[4 * 5], y_before[4 * 5];
    int8_t xq[4 * 6];
    uint8_t wt[5 * 2];
    float xs[4], ws[5];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i / 8.0f, xq[i] = (int8_t)(i - 12);
    for (int i = 0; i < 30; i++)
        w[i] = (float)(i % 7) - 3.0f;
    memset(wt, 0x55, sizeof wt);
    for (int i = 0; i < 5; i++)
        b[i] = 1.0f, ws[i] = 0.5f;
    for (int i = 0; i < 4; i++)
        xs[i] = 3.0f;
    for (int i = 0; i < 20; i++)
        y[i] = y_before[i] = -7.0f;
    lk_tensor tx = lk_mat(x, LK_F32, 4, 6), tw = lk_mat(w, LK_F32, 5, 6), tb = lk_mat(b, LK_F32, 1, 5);
    lk_tensor ty = lk_mat(y, LK_F32, 4, 5), txq = lk_mat(xq, LK_I8, 4, 6);
    lk_tensor twt = lk_mat_ld(wt, LK_T2, 5, 6, 8), txs = lk_mat(xs, LK_F32, 4, 1);
    lk_tensor tws = lk_mat(ws, LK_F32, 1, 5), tws1 = lk_mat(ws, LK_F32, 1, 1);
    lk_weights *pw = NULL, *pt = NULL, *pref = NULL, *bad = NULL;
    int good = 1;
#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        lk_status s_ = (call);                                                              \
        if (s_ != (want)) {                                                                 \
            diag("line %d: %s gave %s (%s), want %s", __LINE__, #call, lk_status_string(s_), \
                 lk_last_error(), lk_status_string(want));                                 \
            good = 0;                                                                       \
        }                                                                                   \
    } while (0)
    EXPECT(lk_weights_prepare(NULL, &tw, NULL, &pw), LK_ERR_NULL_POINTER);
    EXPECT(lk_weights_prepare(q, NULL, NULL, &pw), LK_ERR_NULL_POINTER);
    EXPECT(lk_weights_prepare(q, &tw, NULL, NULL), LK_ERR_NULL_POINTER);
    EXPECT(lk_weights_prepare(q, &tw, &tws, &bad), LK_ERR_INVALID_ARGUMENT);
    EXPECT(lk_weights_prepare(q, &twt, NULL, &bad), LK_ERR_NULL_POINTER);
    lk_tensor tws_bad = lk_mat(ws, LK_F32, 1, 3);
    EXPECT(lk_weights_prepare(q, &twt, &tws_bad, &bad), LK_ERR_BAD_SHAPE);
    EXPECT(lk_weights_prepare(q, &txq, NULL, &bad), LK_ERR_BAD_DTYPE);
    good &= bad == NULL;
    EXPECT(lk_weights_prepare(q, &tw, NULL, &pw), LK_OK);
    EXPECT(lk_weights_prepare(q, &twt, &tws1, &pt), LK_OK);
    EXPECT(lk_weights_prepare(qr, &tw, NULL, &pref), LK_OK);
    lk_dtype dt = 0;
    int64_t n = 0, k = 0;
    EXPECT(lk_weights_info(pt, &dt, &n, &k), LK_OK);
    good &= dt == LK_T2 && n == 5 && k == 6 && lk_weights_device(pt) == dev;
    EXPECT(lk_weights_info(NULL, &dt, &n, &k), LK_ERR_NULL_POINTER);

    EXPECT(lk_linear(NULL, &tx, pw, NULL, &ty, 0), LK_ERR_NULL_POINTER);
    EXPECT(lk_linear(q, &tx, NULL, NULL, &ty, 0), LK_ERR_NULL_POINTER);
    EXPECT(lk_linear(q, NULL, pw, NULL, &ty, 0), LK_ERR_NULL_POINTER);
    EXPECT(lk_linear(q, &tx, pw, NULL, NULL, 0), LK_ERR_NULL_POINTER);
    EXPECT(lk_linear(q, &tx, pt, NULL, &ty, 0), LK_ERR_BAD_DTYPE);
    EXPECT(lk_linear(q, &tx, pw, NULL, &ty, 4u), LK_ERR_INVALID_ARGUMENT);
    if (dev != ref)
        EXPECT(lk_linear(q, &tx, pref, NULL, &ty, 0), LK_ERR_WRONG_DEVICE);
    lk_tensor tx5 = lk_mat(x, LK_F32, 4, 5), ty4 = lk_mat(y, LK_F32, 4, 4);
    lk_tensor ty3 = lk_mat(y, LK_F32, 3, 5), tb4 = lk_mat(b, LK_F32, 1, 4);
    EXPECT(lk_linear(q, &tx5, pw, NULL, &ty, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_linear(q, &tx, pw, NULL, &ty4, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_linear(q, &tx, pw, NULL, &ty3, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_linear(q, &tx, pw, &tb4, &ty, 0), LK_ERR_BAD_SHAPE);
    lk_tensor ti = lk_mat(y, LK_I32, 4, 5), talias = lk_mat(x, LK_F32, 4, 5);
    EXPECT(lk_linear(q, &tx, pw, NULL, &ti, 0), LK_ERR_BAD_DTYPE);
    EXPECT(lk_linear(q, &tx, pw, NULL, &talias, 0), LK_ERR_ALIASING);

    EXPECT(lk_ternary_linear(q, &txq, &txs, pw, &ty, 0), LK_ERR_BAD_DTYPE);
    EXPECT(lk_ternary_linear(q, &txq, NULL, pt, &ty, 0), LK_ERR_NULL_POINTER);
    EXPECT(lk_ternary_linear(q, &tx, &txs, pt, &ty, 0), LK_ERR_BAD_DTYPE);
    lk_tensor txs3 = lk_mat(xs, LK_F32, 3, 1), txq5 = lk_mat(xq, LK_I8, 4, 5);
    EXPECT(lk_ternary_linear(q, &txq, &txs3, pt, &ty, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_ternary_linear(q, &txq5, &txs, pt, &ty, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_ternary_linear(q, &txq, &txs, pt, &ty4, 0), LK_ERR_BAD_SHAPE);
    EXPECT(lk_ternary_linear(q, &txq, &txs, pt, &ty, 4u), LK_ERR_INVALID_ARGUMENT);
    EXPECT(lk_ternary_linear(q, &txq, &txs, pt, &ty, LK_GEMM_ACCUMULATE | 0x80000000u),
           LK_ERR_INVALID_ARGUMENT);
    lk_tensor tyb = lk_mat(y, LK_BF16, 4, 5);
    EXPECT(lk_ternary_linear(q, &txq, &txs, pt, &tyb, LK_GEMM_ACCUMULATE), LK_ERR_BAD_DTYPE);
    good &= memcmp(y, y_before, sizeof y) == 0;
    ok(good, "%s: bad calls fail with their status and write nothing", lk_device_name(dev));

    /* empty shapes are no-ops, K = 0 gives the bias */
    lk_tensor t0 = lk_mat(x, LK_F32, 0, 6), ty0 = lk_mat(y, LK_F32, 0, 5);
    good = lk_linear(q, &t0, pw, NULL, &ty0, 0) == LK_OK;
    lk_weights *pk0 = NULL;
    lk_tensor tw0 = lk_mat(w, LK_F32, 5, 0), tx0 = lk_mat(x, LK_F32, 4, 0);
    good &= lk_weights_prepare(q, &tw0, NULL, &pk0) == LK_OK &&
            lk_linear(q, &tx0, pk0, &tb, &ty, 0) == LK_OK;
    for (int i = 0; i < 20; i++)
        good &= y[i] == 1.0f;
    ok(good, "%s: M = 0 is a no-op, K = 0 gives the bias", lk_device_name(dev));
    lk_weights_destroy(pk0);
    lk_weights_destroy(pw);
    lk_weights_destroy(pt);
    lk_weights_destroy(pref);
    lk_weights_destroy(NULL);
    lk_queue_destroy(q);
    lk_queue_destroy(qr);
}

int main(void)
{
    lk_context *ctx = NULL;
    /* test:1 keeps its tensors behind pretend device memory: the fallback
     * copy of the weights is then made with lk_malloc and lk_memcpy */
    setenv("LOCKSTEP_TESTDRV_DEVMEM", "1", 0);
    if (lk_context_create(&ctx) != LK_OK)
        bail("lk_context_create: %s", lk_last_error());
    rng = tap_seed();
    int nd = lk_device_count(ctx);
    for (int i = 0; i < nd; i++) {
        lk_device *d = NULL;
        if (lk_device_get(ctx, i, &d) == LK_OK)
            run_device(d);
    }
    lk_device *cpu = NULL;
    errors(ctx, lk_device_find(ctx, "cpu", &cpu) == LK_OK ? cpu : NULL);
    lk_device *ref = NULL;
    lk_device_find(ctx, "ref", &ref);
    errors(ctx, ref);
    lk_context_destroy(ctx);
    return done_testing();
}
