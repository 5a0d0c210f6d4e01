/* Lockstep tests: the transformer ops (docs/numerics.md section 12).
 *
 * - sin and cos (12.1): 2M sampled inputs up to 2^22 against double
 *   precision within the bounds of 12.5, special values bit for bit;
 * - RoPE and attention of the reference against float64 computations;
 * - on every device: attention's batch invariance (a sequence's output does
 *   not depend on the others in the batch), decode = prefill for the same
 *   token, cache rows beyond the causal limit never read (NaN there changes
 *   nothing), and embedding's out-of-range id refused with nothing written;
 * - lk_set_rows on every device: random shapes, dtypes, lds and duplicate
 *   indices against an in-order host scatter bit for bit (the last equal
 *   index wins), a bad index refused with nothing written, eagerly and
 *   inside a captured graph (reported by the next sync);
 * - argument errors.
 * The bit-for-bit comparison of every device with the reference is in the
 * contract matrix (tests/test_contract.c). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lockstep.h>

#include "backends/transcendental.h"
#include "numerics/contract.h"
#include "tests/tap.h"

#define SIN_BOUND 2.5 /* numerics.md 12.5: 2.2289 measured over every f32 */
#define COS_BOUND 2.5 /* 2.3172 */

static uint64_t rng;

static uint64_t next(void)
{
    rng += 0x9e3779b97f4a7c15ull;
    uint64_t x = rng;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static float unit(void) /* in [-1, 1) */
{
    return (float)((double)(next() >> 40) / (double)(1ull << 23) - 1.0);
}

static double ulps(float y, double e)
{
    double a = fabs(e);
    if (a < 0x1p-126)
        return fabs((double)y - e) / 0x1p-149;
    int ex;
    frexp(a, &ex);
    return fabs((double)y - e) / ldexp(1.0, ex - 24);
}

static void test_sincos(void)
{
    double ms = 0, mc = 0;
    float xs = 0, xc = 0;
    const int n = 2000000;
    for (int i = 0; i < n; i++) {
        float x;
        if (i % 2) {
            uint32_t u = (uint32_t)(next() % 0x4a800001u);
            memcpy(&x, &u, sizeof x);
        } else {
            x = unit() * 0x1p22f;
        }
        if (next() & 1)
            x = -x;
        float s, c;
        lk_sincosf(x, &s, &c);
        double es = ulps(s, sin((double)x)), ec = ulps(c, cos((double)x));
        if (es > ms)
            ms = es, xs = x;
        if (ec > mc)
            mc = ec, xc = x;
    }
    diag("sin: max %.4f ulp at %a; cos: max %.4f ulp at %a", ms, (double)xs, mc, (double)xc);
    ok(ms <= SIN_BOUND, "sin: %d inputs with |x| <= 2^22 within %g ulp", n, SIN_BOUND);
    ok(mc <= COS_BOUND, "cos: %d inputs with |x| <= 2^22 within %g ulp", n, COS_BOUND);

    int bad = 0;
    float s, c, s2, c2;
    lk_sincosf(0.0f, &s, &c);
    bad += lk_f32_bits(s) != 0 || c != 1.0f;
    lk_sincosf(-0.0f, &s, &c);
    bad += lk_f32_bits(s) != 0x80000000u || c != 1.0f;
    lk_sincosf(0x1p22f, &s, &c);
    bad += lk_isnan(s) || lk_isnan(c);
    lk_sincosf(0x1.000002p22f, &s, &c);
    bad += !lk_isnan(s) || !lk_isnan(c);
    lk_sincosf(lk_bits_f32(0x7f800000u), &s, &c);
    bad += !lk_isnan(s) || !lk_isnan(c);
    lk_sincosf(lk_bits_f32(0x7fc00001u), &s, &c);
    bad += !lk_isnan(s) || !lk_isnan(c);
    for (int i = 0; i < 100000; i++) { /* odd and even, bit for bit */
        float x = unit() * 0x1p22f;
        lk_sincosf(x, &s, &c);
        lk_sincosf(-x, &s2, &c2);
        bad += lk_f32_bits(s) != (lk_f32_bits(s2) ^ 0x80000000u) ||
               lk_f32_bits(c) != lk_f32_bits(c2);
    }
    ok(bad == 0, "sin/cos: zeros, range limit, Inf, NaN, symmetry");
}

/* ------------------------------------------------------------ helpers */

typedef struct dev {
    lk_device *d;
    lk_queue *q;
    lk_device_props p;
} dev;

/* A copy of host data on the device (or the host pointer itself). */
static void *put(dev *v, const void *h, size_t bytes)
{
    void *p = NULL;
    if (lk_malloc(v->d, bytes ? bytes : 1, &p) != LK_OK)
        return NULL;
    if (bytes && lk_memcpy(v->q, p, h, bytes,
                           LK_COPY_HOST_TO_DEVICE) !=
                     LK_OK)
        return NULL;
    return p;
}

static int get(dev *v, void *h, const void *p, size_t bytes)
{
    if (lk_memcpy(v->q, h, p, bytes,
                  LK_COPY_DEVICE_TO_HOST) != LK_OK)
        return -1;
    return lk_queue_sync(v->q) == LK_OK ? 0 : -1;
}

/* Attention on v: host q [batch][T x nh*hd], k/v [batch][L x nkv*hd],
 * pos [batch][T]; out to host y. */
static lk_status attn(dev *v, const float *q, const float *k, const float *vv,
                      const int32_t *pos, float *y, int64_t batch, int64_t T, int64_t L,
                      int64_t nh, int64_t nkv, int64_t hd)
{
    size_t qb = (size_t)(batch * T * nh * hd) * 4, kb = (size_t)(batch * L * nkv * hd) * 4,
           pb = (size_t)(batch * T) * 4;
    void *dq = put(v, q, qb), *dk = put(v, k, kb), *dv = put(v, vv, kb), *dp = put(v, pos, pb),
         *dy = put(v, y, qb);
    lk_status st = LK_ERR_OUT_OF_MEMORY;
    if (dq && dk && dv && dp && dy) {
        lk_tensor tq = lk_mat(dq, LK_F32, T, nh * hd), tk = lk_mat(dk, LK_F32, L, nkv * hd),
                  tv = lk_mat(dv, LK_F32, L, nkv * hd), tp = lk_mat(dp, LK_I32, T, 1),
                  ty = lk_mat(dy, LK_F32, T, nh * hd);
        tq.batch_stride = ty.batch_stride = T * nh * hd;
        tk.batch_stride = tv.batch_stride = L * nkv * hd;
        tp.batch_stride = T;
        st = lk_attention(v->q, &tq, &tk, &tv, &tp, nh, nkv, 1.0f / sqrtf((float)hd), &ty,
                          batch);
        if (st == LK_OK && get(v, y, dy, qb) != 0)
            st = LK_ERR_DRIVER;
    }
    lk_free(v->d, dq), lk_free(v->d, dk), lk_free(v->d, dv), lk_free(v->d, dp),
        lk_free(v->d, dy);
    return st;
}

static float *randf(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++)
        p[i] = unit() * scale;
    return p;
}

/* ------------------------------------------ reference against float64 */

static void test_rope_ref(dev *ref)
{
    const int64_t T = 9, hd = 64, nh = 3, cols = nh * hd;
    float *x = randf((size_t)(T * cols), 2.0f), *y = malloc((size_t)(T * cols) * 4);
    int32_t pos[9] = {0, 1, 2, 17, 100, 1000, 4095, 65536, 1 << 20};
    lk_tensor tx = lk_mat(x, LK_F32, T, cols), tp = lk_mat(pos, LK_I32, T, 1),
              ty = lk_mat(y, LK_F32, T, cols);
    double worst = 0;
    for (unsigned f = 0; f < 2; f++) {
        lk_status st = lk_rope(ref->q, &tx, &tp, hd, 500000.0f, f, &ty);
        ok(st == LK_OK, "lk_rope on ref (%s)", f ? "interleaved" : "neox");
        for (int64_t r = 0; r < T; r++)
            for (int64_t h = 0; h < nh; h++)
                for (int64_t i = 0; i < hd / 2; i++) {
                    int64_t j0 = h * hd + (f ? 2 * i : i), j1 = h * hd + (f ? 2 * i + 1 : i + hd / 2);
                    double fr = pow(500000.0, -2.0 * (double)i / (double)hd);
                    double a = (double)pos[r] * fr;
                    double x0 = x[r * cols + j0], x1 = x[r * cols + j1];
                    double y0 = x0 * cos(a) - x1 * sin(a), y1 = x1 * cos(a) + x0 * sin(a);
                    /* f32 angle: its rounding grows with the position */
                    double tol = (fabs(x0) + fabs(x1)) * (4e-7 + fabs(a) * 1.5e-6);
                    double e = fmax(fabs(y[r * cols + j0] - y0), fabs(y[r * cols + j1] - y1));
                    if (e / tol > worst)
                        worst = e / tol;
                }
    }
    diag("rope: worst error / tolerance %.3f", worst);
    ok(worst <= 1.0, "lk_rope on ref within float64 +- (4e-7 + 1.5e-6 |angle|) |x|");
    lk_status st = lk_rope(ref->q, &tx, &tp, hd, 10000.0f, 0, &tx);
    ok(st == LK_OK, "lk_rope in place");
    free(x), free(y);
}

static void test_attention_ref(dev *ref)
{
    const int64_t T = 6, L = 300, nh = 4, nkv = 2, hd = 40;
    float *q = randf((size_t)(T * nh * hd), 1.0f), *k = randf((size_t)(L * nkv * hd), 1.0f),
          *v = randf((size_t)(L * nkv * hd), 1.0f), *y = calloc((size_t)(T * nh * hd), 4);
    int32_t pos[6] = {0, 5, 128, 200, 299, 1000};
    lk_status st = attn(ref, q, k, v, pos, y, 1, T, L, nh, nkv, hd);
    ok(st == LK_OK, "lk_attention on ref");
    double worst = 0;
    double *s = malloc((size_t)L * sizeof *s);
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++) {
            int64_t g = h / (nh / nkv), n = pos[t] + 1 < L ? pos[t] + 1 : L;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++)
                    d += (double)q[t * nh * hd + h * hd + i] * k[j * nkv * hd + g * hd + i];
                s[j] = d / sqrt((double)hd);
                mx = fmax(mx, s[j]);
            }
            for (int64_t j = 0; j < n; j++)
                sum += s[j] = exp(s[j] - mx);
            for (int64_t i = 0; i < hd; i++) {
                double o = 0;
                for (int64_t j = 0; j < n; j++)
                    o += s[j] / sum * v[j * nkv * hd + g * hd + i];
                double e = fabs(y[t * nh * hd + h * hd + i] - o) / 1e-5;
                if (e > worst)
                    worst = e;
            }
        }
    diag("attention: worst error %.3g", worst * 1e-5);
    ok(worst <= 1.0, "lk_attention on ref within 1e-5 of float64 (|v| <= 1)");
    free(s), free(q), free(k), free(v), free(y);
}

/* ----------------------------------------------------- every device */

static void test_attention_invariance(dev *v)
{
    const int64_t B = 3, T = 4, L = 150, nh = 6, nkv = 2, hd = 36;
    const int64_t qn = T * nh * hd, kn = L * nkv * hd;
    float *q = randf((size_t)(B * qn), 1.5f), *k = randf((size_t)(B * kn), 1.5f),
          *vv = randf((size_t)(B * kn), 1.0f);
    float *yb = calloc((size_t)(B * qn), 4), *y1 = calloc((size_t)qn, 4),
          *yt = calloc((size_t)(nh * hd), 4);
    int32_t pos[3 * 4] = {0, 1, 2, 3, 140, 141, 142, 143, 60, 61, 62, 200};
    lk_status st = attn(v, q, k, vv, pos, yb, B, T, L, nh, nkv, hd);
    if (st == LK_ERR_UNSUPPORTED) {
        skip(3, "%s: lk_attention unsupported", v->p.name);
        goto out;
    }
    int bad = st != LK_OK;
    for (int64_t b = 0; b < B && !bad; b++) {
        bad |= attn(v, q + b * qn, k + b * kn, vv + b * kn, pos + b * T, y1, 1, T, L, nh, nkv,
                    hd) != LK_OK;
        bad |= memcmp(y1, yb + b * qn, (size_t)qn * 4) != 0;
    }
    ok(!bad, "%s: attention of each sequence alone = its rows of a batch of 3", v->p.name);
    /* decode: each token on its own, as after a prefill */
    bad = 0;
    for (int64_t t = 0; t < T && !bad; t++) {
        bad |= attn(v, q + t * nh * hd, k, vv, pos + t, yt, 1, 1, L, nh, nkv, hd) != LK_OK;
        bad |= memcmp(yt, yb + t * nh * hd, (size_t)(nh * hd) * 4) != 0;
    }
    ok(!bad, "%s: decode token by token = prefill of the same tokens", v->p.name);
    /* NaN beyond every token's causal limit changes nothing */
    for (int64_t j = 4; j < L; j++)
        for (int64_t i = 0; i < nkv * hd; i++)
            k[j * nkv * hd + i] = vv[j * nkv * hd + i] = NAN;
    bad = attn(v, q, k, vv, pos, y1, 1, T, L, nh, nkv, hd) != LK_OK ||
          memcmp(y1, yb, (size_t)qn * 4) != 0;
    ok(!bad, "%s: cache rows beyond the causal limit are never read", v->p.name);
out:
    free(q), free(k), free(vv), free(yb), free(y1), free(yt);
}

static void test_embedding_range(dev *v)
{
    float table[4 * 3] = {0};
    for (int i = 0; i < 12; i++)
        table[i] = (float)i;
    int32_t ids[3] = {1, 4, 0};
    float y[9], y0[9];
    for (int i = 0; i < 9; i++)
        y[i] = y0[i] = -7.0f;
    void *dt = put(v, table, sizeof table), *di = put(v, ids, sizeof ids),
         *dy = put(v, y, sizeof y);
    lk_tensor tt = lk_mat(dt, LK_F32, 4, 3), ti = lk_mat(di, LK_I32, 3, 1),
              ty = lk_mat(dy, LK_F32, 3, 3);
    lk_status st = lk_embedding(v->q, &tt, &ti, &ty);
    char msg[160];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    int same = get(v, y, dy, sizeof y) == 0 && memcmp(y, y0, sizeof y) == 0;
    ok(st == LK_ERR_RANGE && same, "%s: id 4 of a 4-row table: LK_ERR_RANGE, nothing written (%s)",
       v->p.name, msg);
    ids[1] = 3;
    lk_memcpy(v->q, di, ids, sizeof ids,
              LK_COPY_HOST_TO_DEVICE);
    st = lk_embedding(v->q, &tt, &ti, &ty);
    if (st == LK_ERR_UNSUPPORTED) {
        skip(1, "%s: lk_embedding unsupported", v->p.name);
        lk_free(v->d, dt), lk_free(v->d, di), lk_free(v->d, dy);
        return;
    }
    int good = st == LK_OK && get(v, y, dy, sizeof y) == 0 && y[0] == 3.0f && y[3] == 9.0f &&
               y[8] == 2.0f;
    ok(good, "%s: embedding rows gathered", v->p.name);
    lk_free(v->d, dt), lk_free(v->d, di), lk_free(v->d, dy);
}

/* ---- lk_set_rows (numerics.md section 12.4.1) ---- */

static const lk_dtype sr_types[6] = {LK_F32, LK_BF16, LK_F16, LK_I8, LK_I32, LK_I64};

static void fill_bytes(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)next();
}

/* The contract's scatter on host bytes: rows in order, the last wins. */
static void host_set_rows(unsigned char *dst, int64_t dld, const unsigned char *src,
                          int64_t sld, const int32_t *idx, int64_t n, int64_t cols, size_t es)
{
    for (int64_t r = 0; r < n; r++)
        memcpy(dst + (size_t)(idx[r] * dld) * es, src + (size_t)(r * sld) * es,
               (size_t)cols * es);
}

static void test_set_rows(dev *v)
{
    int bad = 0, unsupported = 0, ngraph = 0;
    char what[200] = "";
    for (int it = 0; it < 24 && !bad && !unsupported; it++) {
        lk_dtype dt = sr_types[it % 6];
        size_t es = lk_dtype_size(dt);
        /* every 8th: more rows than one block's check takes (cuda: two
         * kernels under capture instead of one, backends/cuda/set_rows.cu) */
        int64_t n = (int64_t)(next() % 40), cols = 1 + (int64_t)(next() % 300);
        if (it % 8 == 7)
            n = 257 + (int64_t)(next() % 50);
        int64_t R = 1 + (int64_t)(next() % 50);
        int64_t sld = cols + (int64_t)(next() % 3), dld = cols + (int64_t)(next() % 5);
        int64_t nid = (next() & 1) ? 1 : 2; /* idx ld */
        size_t sb = (size_t)((n > 0 ? n : 1) * sld) * es, db = (size_t)(R * dld) * es;
        unsigned char *hs = malloc(sb), *hd = malloc(db), *want = malloc(db), *got = malloc(db);
        int32_t *hi = calloc((size_t)((n > 0 ? n : 1) * nid), sizeof *hi),
                *hic = calloc((size_t)(n > 0 ? n : 1), sizeof *hic);
        fill_bytes(hs, sb);
        fill_bytes(hd, db);
        for (int64_t r = 0; r < n; r++) {
            /* small ranges make duplicates common */
            int64_t span = (next() & 1) ? (R < 4 ? R : 4) : R;
            hic[r] = (int32_t)(next() % (uint64_t)span);
            hi[r * nid] = hic[r];
        }
        memcpy(want, hd, db);
        host_set_rows(want, dld, hs, sld, hic, n, cols, es);
        void *ds = put(v, hs, sb), *di = put(v, hi, (size_t)((n > 0 ? n : 1) * nid) * 4),
             *dd = put(v, hd, db);
        lk_tensor ts = lk_mat_ld(ds, dt, n, cols, sld), ti = lk_mat_ld(di, LK_I32, n, 1, nid),
                  td = lk_mat_ld(dd, dt, R, cols, dld);
        lk_status st = ds && di && dd ? LK_OK : LK_ERR_OUT_OF_MEMORY;
        /* odd iterations inside a captured graph (indices read on the
         * device when it runs), where the device can capture */
        lk_graph *g = NULL;
        if (st == LK_OK && (it & 1) && lk_queue_capture_begin(v->q) == LK_OK) {
            st = lk_set_rows(v->q, &ts, &ti, &td);
            lk_status ce = lk_queue_capture_end(v->q, &g);
            if (st == LK_OK)
                st = ce != LK_OK ? ce : lk_graph_launch(g, v->q);
            lk_graph_destroy(g);
            if (st == LK_OK)
                ngraph++;
        } else if (st == LK_OK) {
            st = lk_set_rows(v->q, &ts, &ti, &td);
        }
        if (st == LK_ERR_UNSUPPORTED) {
            unsupported = 1;
        } else if (st != LK_OK || get(v, got, dd, db) != 0 || memcmp(got, want, db) != 0) {
            bad = 1;
            snprintf(what, sizeof what, "%s %lld x %lld -> %lld rows (lds %lld, %lld): %s",
                     lk_dtype_name(dt), (long long)n, (long long)cols, (long long)R,
                     (long long)sld, (long long)dld,
                     st != LK_OK ? lk_last_error() : "different bits");
        }
        lk_free(v->d, ds), lk_free(v->d, di), lk_free(v->d, dd);
        free(hs), free(hd), free(want), free(got), free(hi), free(hic);
    }
    if (unsupported) {
        skip(4, "%s: lk_set_rows unsupported", v->p.name);
        return;
    }
    ok(!bad, "%s: set_rows, random shapes, dtypes and duplicates (%d in graphs), bit for bit%s%s",
       v->p.name, ngraph, bad ? ": " : "", what);

    /* a bad index, eagerly, then inside a graph */
    float src[2 * 3] = {1, 2, 3, 4, 5, 6}, dst[4 * 3], dst0[4 * 3], got[4 * 3];
    for (int i = 0; i < 12; i++)
        dst[i] = dst0[i] = -7.0f;
    int32_t idx[2] = {1, 4};
    void *ds = put(v, src, sizeof src), *di = put(v, idx, sizeof idx), *dd = put(v, dst, sizeof dst);
    lk_tensor ts = lk_mat(ds, LK_F32, 2, 3), ti = lk_mat(di, LK_I32, 2, 1),
              td = lk_mat(dd, LK_F32, 4, 3);
    lk_status st = lk_set_rows(v->q, &ts, &ti, &td);
    char msg[200];
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    int same = get(v, got, dd, sizeof got) == 0 && memcmp(got, dst0, sizeof got) == 0;
    ok(st == LK_ERR_RANGE && same, "%s: set_rows idx 4 of 4 rows: LK_ERR_RANGE, nothing written (%s)",
       v->p.name, msg);

    lk_graph *g = NULL;
    idx[1] = 0;
    lk_status cs = lk_memcpy(v->q, di, idx, sizeof idx, LK_COPY_HOST_TO_DEVICE);
    if (cs == LK_OK)
        cs = lk_queue_capture_begin(v->q);
    if (cs == LK_OK) {
        st = lk_set_rows(v->q, &ts, &ti, &td);
        cs = lk_queue_capture_end(v->q, &g);
        if (st != LK_OK)
            cs = st;
    }
    if (cs != LK_OK) {
        skip(2, "%s: set_rows not captured: %s", v->p.name, lk_last_error());
        lk_graph_destroy(g);
        lk_free(v->d, ds), lk_free(v->d, di), lk_free(v->d, dd);
        return;
    }
    /* in the graph: rows 1 and 0 written */
    int good = lk_graph_launch(g, v->q) == LK_OK && get(v, got, dd, sizeof got) == 0 &&
               got[3] == 1.0f && got[5] == 3.0f && got[0] == 4.0f && got[2] == 6.0f &&
               got[6] == -7.0f && got[11] == -7.0f;
    ok(good, "%s: set_rows in a graph scatters", v->p.name);
    /* a bad index met by the graph: nothing written, LK_ERR_RANGE at the sync */
    float poison[4 * 3];
    for (int i = 0; i < 12; i++)
        poison[i] = -9.0f;
    int32_t badidx[2] = {2, -1};
    lk_memcpy(v->q, dd, poison, sizeof poison, LK_COPY_HOST_TO_DEVICE);
    lk_memcpy(v->q, di, badidx, sizeof badidx, LK_COPY_HOST_TO_DEVICE);
    lk_status ls = lk_graph_launch(g, v->q);
    lk_status ss = lk_queue_sync(v->q);
    snprintf(msg, sizeof msg, "%s", lk_last_error());
    lk_status s2 = lk_queue_sync(v->q);
    same = get(v, got, dd, sizeof got) == 0 && memcmp(got, poison, sizeof got) == 0;
    ok(ls == LK_OK && ss == LK_ERR_RANGE && s2 == LK_OK && same,
       "%s: set_rows idx -1 in a graph: nothing written, LK_ERR_RANGE at the next sync (%s)",
       v->p.name, msg);
    lk_graph_destroy(g);
    lk_free(v->d, ds), lk_free(v->d, di), lk_free(v->d, dd);
}

static void test_set_rows_errors(dev *ref)
{
    float x[4 * 3] = {0}, y[4 * 3] = {0};
    int32_t idx[4] = {0};
    lk_tensor ts = lk_mat(x, LK_F32, 2, 3), ti = lk_mat(idx, LK_I32, 2, 1),
              td = lk_mat(y, LK_F32, 4, 3);
    lk_tensor tb = lk_mat(y, LK_BF16, 4, 3);
    ok(lk_set_rows(ref->q, &ts, &ti, &tb) == LK_ERR_BAD_DTYPE, "set_rows: dst dtype != src dtype");
    lk_tensor t2 = lk_mat(x, LK_T2, 2, 4), d2 = lk_mat(y, LK_T2, 4, 4);
    ok(lk_set_rows(ref->q, &t2, &ti, &d2) == LK_ERR_BAD_DTYPE, "set_rows: LK_T2 refused");
    lk_tensor i3 = lk_mat(idx, LK_I32, 3, 1);
    ok(lk_set_rows(ref->q, &ts, &i3, &td) == LK_ERR_BAD_SHAPE, "set_rows: idx rows != src rows");
    lk_tensor d4 = lk_mat(y, LK_F32, 3, 4);
    ok(lk_set_rows(ref->q, &ts, &ti, &d4) == LK_ERR_BAD_SHAPE, "set_rows: dst cols != src cols");
    lk_tensor dx = lk_mat(x, LK_F32, 4, 3);
    ok(lk_set_rows(ref->q, &ts, &ti, &dx) == LK_ERR_ALIASING, "set_rows: dst overlapping src");
}

static void test_errors(dev *ref)
{
    float x[8 * 4] = {0}, y[8 * 4];
    int32_t pos[8] = {0};
    lk_tensor tx = lk_mat(x, LK_F32, 4, 8), tp = lk_mat(pos, LK_I32, 4, 1),
              ty = lk_mat(y, LK_F32, 4, 8);
    ok(lk_rope(ref->q, &tx, &tp, 3, 1e4f, 0, &ty) == LK_ERR_BAD_SHAPE, "rope: odd head_dim");
    ok(lk_rope(ref->q, &tx, &tp, 6, 1e4f, 0, &ty) == LK_ERR_BAD_SHAPE,
       "rope: head_dim not dividing cols");
    ok(lk_rope(ref->q, &tx, &tp, 4, 0.0f, 0, &ty) == LK_ERR_INVALID_ARGUMENT, "rope: theta 0");
    ok(lk_rope(ref->q, &tx, &tp, 4, 1e4f, 4, &ty) == LK_ERR_INVALID_ARGUMENT,
       "rope: unknown flag");
    lk_tensor bp = lk_mat(pos, LK_F32, 4, 1);
    ok(lk_rope(ref->q, &tx, &bp, 4, 1e4f, 0, &ty) == LK_ERR_BAD_DTYPE, "rope: f32 positions");
    lk_tensor k = lk_mat(x, LK_F32, 4, 4);
    ok(lk_attention(ref->q, &tx, &k, &k, &tp, 3, 2, 1.0f, &ty, 1) == LK_ERR_BAD_SHAPE,
       "attention: n_head not a multiple of n_kv");
    ok(lk_attention(ref->q, &tx, &k, &k, &tp, 2, 1, 1.0f, &tx, 1) == LK_ERR_ALIASING,
       "attention: out overlapping q");
    lk_tensor k3 = lk_mat(x, LK_F32, 4, 3);
    ok(lk_attention(ref->q, &tx, &k3, &k3, &tp, 2, 1, 1.0f, &ty, 1) == LK_ERR_BAD_SHAPE,
       "attention: k cols != n_kv * head_dim");
}

int main(void)
{
    rng = (uint64_t)time(NULL);
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
    int n = lk_device_count(ctx);
    dev *devs = calloc((size_t)(n > 0 ? n : 1), sizeof *devs);
    int nd = 0, iref = -1;
    for (int i = 0; i < n; i++) {
        dev *v = &devs[nd];
        if (lk_device_get(ctx, i, &v->d) != LK_OK || lk_device_props_get(v->d, &v->p) != LK_OK ||
            lk_queue_create(v->d, NULL, &v->q) != LK_OK)
            continue;
        if (strcmp(v->p.name, "ref") == 0)
            iref = nd;
        nd++;
    }
    plan(3 + 4 + 2 + 8 + 5 + 9 * nd);
    test_sincos();
    if (iref < 0) {
        skip(4 + 2 + 8 + 5, "no ref device");
    } else {
        test_rope_ref(&devs[iref]);
        test_attention_ref(&devs[iref]);
        test_errors(&devs[iref]);
        test_set_rows_errors(&devs[iref]);
    }
    for (int i = 0; i < nd; i++) {
        test_attention_invariance(&devs[i]);
        test_embedding_range(&devs[i]);
        test_set_rows(&devs[i]);
    }
    for (int i = 0; i < nd; i++)
        lk_queue_destroy(devs[i].q);
    free(devs);
    lk_context_destroy(ctx);
    return 0;
}
