/* Lockstep: the reference GEMM, integer GEMM, quantisation, packing and
 * binary kernels against independent, straightforward computations.
 *
 * The kernels are called directly with hand-built args structs (the test
 * links backends/ref/libref.la, not the core), so every check here is about
 * the arithmetic of docs/numerics.md sections 4, 7, 8 and 9 and the layout
 * of docs/formats.md.  Each expected value is computed in this file with a
 * loop of its own shape (not the kernel's), then compared bit for bit with
 * memcmp over whole buffers, padding included, so a write outside the
 * output is caught too.  Random inputs come from tap_seed() (printed;
 * LOCKSTEP_TEST_SEED repeats a run). */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ref/ref.h"
#include "numerics/scalar.h"
#include "tests/ref_host.h"
#include "tests/tap.h"

/* ------------------------------------------------------------ plumbing */

/* The kernels report data errors through the host tests/ref_host.h
 * gives them; the core is not linked. */
#define last_error ref_last_error

static uint64_t rng_state;

static uint64_t rng_next(void) { return tap_rand(&rng_state); }

static int rng_int(int lo, int hi) /* inclusive */
{
    return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1));
}

/* A value in (-2^e, 2^e) with e in [-3, 3]: 24 random bits, exactly
 * representable in f32. */
static float rng_float(void)
{
    int32_t m = (int32_t)(rng_next() >> 40) - (1 << 23);
    return ldexpf((float)m, rng_int(-3, 3) - 23);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        printf("Bail out! out of memory\n");
        exit(1);
    }
    return p;
}

static const lk_dtype float_types[3] = {LK_F32, LK_BF16, LK_F16};

static size_t fsize(lk_dtype dt) { return dt == LK_F32 ? 4 : 2; }

static const char *dname(lk_dtype dt)
{
    return dt == LK_F32 ? "f32" : dt == LK_BF16 ? "bf16" : "f16";
}

/* Round v to dt and write it (the contract's store, built from scalar.h's
 * conversions, which have their own test). */
static void put(void *base, lk_dtype dt, int64_t i, float v)
{
    if (dt == LK_F32) {
        uint32_t u = lk_isnan(v) ? LK_NAN_F32_BITS : lk_f32_bits(v);
        memcpy((char *)base + 4 * i, &u, 4);
    } else {
        uint16_t h = dt == LK_BF16 ? lk_to_bf16(v) : lk_to_f16(v);
        memcpy((char *)base + 2 * i, &h, 2);
    }
}

static float get(const void *base, lk_dtype dt, int64_t i)
{
    if (dt == LK_F32) {
        float f;
        memcpy(&f, (const char *)base + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)base + 2 * i, 2);
    return dt == LK_BF16 ? lk_from_bf16(h) : lk_from_f16(h);
}

/* A float buffer of n elements of dtype dt holding random values (or the
 * given constant pattern), so padding holds something a kernel must not
 * touch or use. */
static void *rand_buf(lk_dtype dt, int64_t n)
{
    void *p = xmalloc((size_t)n * fsize(dt));
    for (int64_t i = 0; i < n; i++)
        put(p, dt, i, rng_float());
    return p;
}

static lk_tensor tens(void *data, lk_dtype dt, int64_t rows, int64_t cols, int64_t ld,
                      int64_t bstride)
{
    lk_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.rows = rows;
    t.cols = cols;
    t.ld = ld;
    t.batch_stride = bstride;
    return t;
}

/* -------------------------------------------------------------- GEMM */

typedef struct gemm_case {
    lk_transpose ta, tb;
    lk_dtype da, db, dc, dbias;
    int64_t m, n, k, batch;
    int bias, accumulate, share_b, pad;
} gemm_case;

/* The contract's dot product, written as one pass over k that closes a
 * block every 128 steps (the kernel loops over blocks instead). */
static float expect_dot(const gemm_case *gc, const lk_gemm_args *g, int64_t b, int64_t m,
                        int64_t n)
{
    float total = 0.0f, acc = 0.0f;
    for (int64_t k = 0; k < gc->k; k++) {
        int64_t ia = b * g->a.batch_stride + (gc->ta ? k * g->a.ld + m : m * g->a.ld + k);
        int64_t ib = b * g->b.batch_stride + (gc->tb ? n * g->b.ld + k : k * g->b.ld + n);
        acc = fmaf(get(g->a.data, gc->da, ia), get(g->b.data, gc->db, ib), acc);
        if ((k + 1) % 128 == 0 || k + 1 == gc->k) {
            total = k < 128 ? acc : total + acc;
            acc = 0.0f;
        }
    }
    return total;
}

/* Run one case on random data; 0 when every byte of C (padding and the
 * gaps between batch entries included) is as expected. */
static int run_gemm_case(const gemm_case *gc)
{
    int64_t pad = gc->pad ? 3 : 0;
    int64_t ar = gc->ta ? gc->k : gc->m, ac = gc->ta ? gc->m : gc->k;
    int64_t br = gc->tb ? gc->n : gc->k, bc = gc->tb ? gc->k : gc->n;
    int64_t lda = ac + pad, ldb = bc + pad, ldc = gc->n + pad;
    int64_t sa = ar * lda + pad, sb = gc->share_b ? 0 : br * ldb + 1;
    int64_t sc = gc->m * ldc + 2 * pad, sbias = gc->share_b ? 0 : gc->n + 1;
    int64_t na = (gc->batch - 1) * sa + ar * lda + 1;
    int64_t nb = (gc->batch - 1) * sb + br * ldb + 1;
    int64_t nc = (gc->batch - 1) * sc + gc->m * ldc + 1;
    int64_t nbias = (gc->batch - 1) * sbias + gc->n + 1;

    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    g.ta = gc->ta;
    g.tb = gc->tb;
    g.m = gc->m;
    g.n = gc->n;
    g.k = gc->k;
    g.batch = gc->batch;
    g.flags = gc->accumulate ? LK_GEMM_ACCUMULATE : 0;
    g.a = tens(rand_buf(gc->da, na), gc->da, ar, ac, lda, sa);
    g.b = tens(rand_buf(gc->db, nb), gc->db, br, bc, ldb, sb);
    g.c = tens(rand_buf(gc->dc, nc), gc->dc, gc->m, gc->n, ldc, sc);
    if (gc->bias)
        g.bias = tens(rand_buf(gc->dbias, nbias), gc->dbias, 1, gc->n, gc->n, sbias);

    size_t cbytes = (size_t)nc * fsize(gc->dc);
    void *want = xmalloc(cbytes);
    memcpy(want, g.c.data, cbytes);
    for (int64_t b = 0; b < gc->batch; b++)
        for (int64_t m = 0; m < gc->m; m++)
            for (int64_t n = 0; n < gc->n; n++) {
                int64_t ci = b * sc + m * ldc + n;
                float t = expect_dot(gc, &g, b, m, n);
                if (gc->bias)
                    t = t + get(g.bias.data, gc->dbias, b * sbias + n);
                if (gc->accumulate)
                    t = t + get(g.c.data, gc->dc, ci);
                put(want, gc->dc, ci, t);
            }

    lk_status st = lk_ref_gemm(&g);
    int bad = st != LK_OK || memcmp(want, g.c.data, cbytes) != 0;
    if (bad) {
        diag("gemm %s%s a=%s b=%s c=%s M=%lld N=%lld K=%lld batch=%lld bias=%d acc=%d "
             "share=%d pad=%d: status %d, C differs",
             gc->ta ? "T" : "N", gc->tb ? "T" : "N", dname(gc->da), dname(gc->db),
             dname(gc->dc), (long long)gc->m, (long long)gc->n, (long long)gc->k,
             (long long)gc->batch, gc->bias, gc->accumulate, gc->share_b, gc->pad, (int)st);
    }
    free(g.a.data);
    free(g.b.data);
    free(g.c.data);
    free(g.bias.data);
    free(want);
    return bad;
}

static const int64_t odd_k[] = {0, 1, 127, 128, 129, 300};

/* Every dtype triple, both trans flags each, for every K of odd_k; the
 * epilogue flags, batching and padding cycle with the case number. */
static void test_gemm_contract_order(void)
{
    for (size_t ki = 0; ki < sizeof odd_k / sizeof odd_k[0]; ki++) {
        int cases = 0, bad = 0;
        for (int ia = 0; ia < 3; ia++)
            for (int ib = 0; ib < 3; ib++)
                for (int ic = 0; ic < 3; ic++)
                    for (int tr = 0; tr < 4; tr++) {
                        gemm_case gc;
                        int sel = cases++;
                        gc.ta = (tr & 1) ? LK_TRANS : LK_NO_TRANS;
                        gc.tb = (tr & 2) ? LK_TRANS : LK_NO_TRANS;
                        gc.da = float_types[ia];
                        gc.db = float_types[ib];
                        gc.dc = float_types[ic];
                        gc.dbias = float_types[(ia + ib + ic) % 3];
                        gc.m = 3 + sel % 3;
                        gc.n = 5 - sel % 2;
                        gc.k = odd_k[ki];
                        gc.bias = sel & 1;
                        gc.accumulate = (sel >> 1) & 1;
                        gc.batch = 1 + (sel >> 2) % 3;
                        gc.share_b = (sel >> 3) & 1;
                        gc.pad = (sel % 5) != 0;
                        bad += run_gemm_case(&gc);
                    }
        ok(bad == 0, "gemm K=%lld: %d cases (3x3x3 dtypes, trans flags, bias, accumulate, "
                     "batch strides, ld padding) match the fma chain bit for bit",
           (long long)odd_k[ki], cases);
    }
}

/* Batch strides, shared inputs, the epilogue order, one dtype at a time. */
static void test_gemm_epilogue_and_batch(void)
{
    int bad = 0, cases = 0;
    for (int flags = 0; flags < 4; flags++)
        for (int share = 0; share < 2; share++)
            for (int64_t batch = 1; batch <= 4; batch += 3) {
                gemm_case gc = {LK_NO_TRANS, LK_TRANS, LK_F32, LK_BF16, LK_F32, LK_F16,
                                7, 9, 200, batch, flags & 1, flags >> 1, share, 1};
                bad += run_gemm_case(&gc);
                cases++;
            }
    ok(bad == 0, "gemm bias/accumulate/batch-stride grid: %d cases bit-exact", cases);

    /* The same GEMM as one call with batch 3 and as three calls. */
    int64_t m = 4, n = 6, k = 150;
    float *a = rand_buf(LK_F32, 3 * m * k), *b = rand_buf(LK_F32, k * n);
    float *c1 = xmalloc(3 * m * n * 4), *c3 = xmalloc(3 * m * n * 4);
    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = m, g.n = n, g.k = k, g.batch = 3;
    g.a = tens(a, LK_F32, m, k, k, m * k);
    g.b = tens(b, LK_F32, k, n, n, 0);
    g.c = tens(c1, LK_F32, m, n, n, m * n);
    lk_ref_gemm(&g);
    g.batch = 1;
    for (int i = 0; i < 3; i++) {
        g.a = tens(a + i * m * k, LK_F32, m, k, k, 0);
        g.c = tens(c3 + i * m * n, LK_F32, m, n, n, 0);
        lk_ref_gemm(&g);
    }
    ok(memcmp(c1, c3, (size_t)(3 * m * n * 4)) == 0,
       "gemm batch 3 with a shared B equals three single calls");
    free(a), free(b), free(c1), free(c3);
}

/* Signs of zero, NaN and Inf through the GEMM. */
static void test_gemm_edges(void)
{
    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    g.m = 1, g.n = 1, g.batch = 1;

    /* K = 129, every product -2^-160: each fma rounds to -0, both blocks
     * are -0 and so is their sum; adding the first block to +0 would give
     * +0. */
    float a[129], b[129], c;
    for (int i = 0; i < 129; i++)
        a[i] = -0x1p-80f, b[i] = 0x1p-80f;
    for (int k = 1; k <= 129; k += 128) {
        g.k = k;
        g.a = tens(a, LK_F32, 1, k, k, 0);
        g.b = tens(b, LK_F32, k, 1, 1, 0);
        g.c = tens(&c, LK_F32, 1, 1, 1, 0);
        c = 1.0f;
        lk_ref_gemm(&g);
        ok(lk_f32_bits(c) == 0x80000000u, "gemm K=%d: a sum of products rounding to -0 is -0 "
                                           "(got 0x%08x)", k, (unsigned)lk_f32_bits(c));
    }

    /* K = 0: +0, then the epilogue: bias -0 gives +0 + -0 = +0; C old 5
     * with ACCUMULATE gives 5. */
    float bias = -0.0f;
    g.k = 0;
    g.a = tens(a, LK_F32, 1, 0, 1, 0);
    g.b = tens(b, LK_F32, 0, 1, 1, 0);
    c = -7.0f;
    lk_ref_gemm(&g);
    ok(lk_f32_bits(c) == 0, "gemm K=0 stores +0");
    g.bias = tens(&bias, LK_F32, 1, 1, 1, 0);
    c = -7.0f;
    lk_ref_gemm(&g);
    ok(lk_f32_bits(c) == 0, "gemm K=0 with bias -0 stores +0");
    g.flags = LK_GEMM_ACCUMULATE;
    c = 5.0f;
    lk_ref_gemm(&g);
    ok(c == 5.0f, "gemm K=0 with ACCUMULATE keeps C (+0 + -0 + 5 = 5)");
    g.flags = 0;
    memset(&g.bias, 0, sizeof g.bias);

    /* A signalling NaN with a payload and an Inf - Inf: canonical NaN in
     * each output dtype. */
    float na[2] = {lk_bits_f32(0x7f800001u), 1.0f}, nb[2] = {1.0f, 1.0f};
    float ia[2] = {INFINITY, -INFINITY}, ib[2] = {1.0f, 1.0f};
    int good = 1;
    for (int d = 0; d < 3; d++) {
        uint32_t out = 0;
        const uint32_t want = float_types[d] == LK_F32 ? LK_NAN_F32_BITS
                            : float_types[d] == LK_BF16 ? LK_NAN_BF16_BITS
                                                        : LK_NAN_F16_BITS;
        g.k = 2;
        g.a = tens(na, LK_F32, 1, 2, 2, 0);
        g.b = tens(nb, LK_F32, 2, 1, 1, 0);
        g.c = tens(&out, float_types[d], 1, 1, 1, 0);
        lk_ref_gemm(&g);
        good &= out == want;
        out = 0;
        g.a = tens(ia, LK_F32, 1, 2, 2, 0);
        g.b = tens(ib, LK_F32, 2, 1, 1, 0);
        lk_ref_gemm(&g);
        good &= out == want;
    }
    ok(good, "gemm stores the canonical NaN (sNaN input, Inf - Inf) in f32, bf16, f16");
}

/* The reference against float64: |C - exact| <= gamma_n * sum |a_k b_k|,
 * n = min(K, 128) + ceil(K / 128) - 1, gamma_n = n u / (1 - n u),
 * u = 2^-24 (docs/numerics.md section 4).  The float64 sum of the exact
 * products is itself off by at most K 2^-53 sum |a_k b_k|, added to the
 * bound. */
static void test_gemm_accuracy(void)
{
    static const int64_t ks[] = {1, 127, 128, 129, 300, 1000, 4096};
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t m = 4, n = 4, k = ks[ki];
        for (int d = 0; d < 2; d++) {
            lk_dtype dt = d ? LK_BF16 : LK_F32;
            void *a = rand_buf(dt, m * k), *b = rand_buf(dt, k * n);
            float c[16];
            lk_gemm_args g;
            memset(&g, 0, sizeof g);
            g.m = m, g.n = n, g.k = k, g.batch = 1;
            g.a = tens(a, dt, m, k, k, 0);
            g.b = tens(b, dt, k, n, n, 0);
            g.c = tens(c, LK_F32, m, n, n, 0);
            lk_ref_gemm(&g);
            double nr = (double)(k < 128 ? k : 128) + (double)((k + 127) / 128) - 1;
            double u = 0x1p-24, gamma = nr * u / (1 - nr * u);
            double worst = 0; /* largest |error| / (gamma * sum |ab|) */
            int good = 1;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double exact = 0, mag = 0;
                    for (int64_t q = 0; q < k; q++) {
                        double p = (double)get(a, dt, i * k + q) * (double)get(b, dt, q * n + j);
                        exact += p;
                        mag += fabs(p);
                    }
                    double err = fabs((double)c[i * n + j] - exact);
                    double bound = gamma * mag + (double)k * 0x1p-53 * mag;
                    if (!(err <= bound))
                        good = 0;
                    if (mag > 0 && err / (gamma * mag) > worst)
                        worst = err / (gamma * mag);
                }
            ok(good, "gemm accuracy %s K=%lld: |C - exact| <= gamma_%d * sum|ab| "
                     "(worst %.3f of the bound)",
               dname(dt), (long long)k, (int)nr, worst);
            free(a), free(b);
        }
    }
}

/* ------------------------------------------------------ integer GEMM */

/* y as the contract's epilogue gives it: ((float)acc / xs) * ws. */
static float dequant(int64_t acc, float xs, float ws) { return ((float)acc / xs) * ws; }

static void test_int8_gemm(void)
{
    for (size_t ki = 0; ki < sizeof odd_k / sizeof odd_k[0]; ki++) {
        int64_t m = 3, n = 5, k = odd_k[ki], lda = k + 2, ldb = k + 1;
        int8_t *a = xmalloc((size_t)(m * lda)), *b = xmalloc((size_t)(n * ldb));
        for (int64_t i = 0; i < m * lda; i++)
            a[i] = (int8_t)rng_int(-128, 127);
        for (int64_t i = 0; i < n * ldb; i++)
            b[i] = (int8_t)rng_int(-128, 127);
        int64_t sums[15];
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t s = 0;
                for (int64_t q = 0; q < k; q++)
                    s += (int64_t)a[i * lda + q] * b[j * ldb + q];
                sums[i * n + j] = s;
            }
        int64_t ldy = n + 1;
        lk_qgemm_args q;
        memset(&q, 0, sizeof q);
        q.m = m, q.n = n, q.k = k;
        q.x = tens(a, LK_I8, m, k, lda, 0);
        q.w = tens(b, LK_I8, n, k, ldb, 0);

        int32_t yi[3 * 6], wi[3 * 6];
        memset(yi, 0x5a, sizeof yi);
        memcpy(wi, yi, sizeof wi);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                wi[i * ldy + j] = (int32_t)sums[i * n + j];
        q.y = tens(yi, LK_I32, m, n, ldy, 0);
        int good = lk_ref_int8_gemm(&q) == LK_OK && memcmp(yi, wi, sizeof yi) == 0;

        /* dequantised, per-tensor and per-channel weight scales, each dtype */
        float xs[3], ws[5];
        for (int i = 0; i < 3; i++)
            xs[i] = 100.0f + 10.0f * rng_float();
        for (int i = 0; i < 5; i++)
            ws[i] = fabsf(rng_float()) + 0.01f;
        q.x_scale = tens(xs, LK_F32, m, 1, 1, 0);
        for (int per = 0; per < 2; per++)
            for (int d = 0; d < 3; d++) {
                lk_dtype dt = float_types[d];
                uint32_t yb[3 * 6], wb[3 * 6];
                memset(yb, 0x5a, sizeof yb);
                memcpy(wb, yb, sizeof wb);
                q.w_scale = tens(ws, LK_F32, 1, per ? n : 1, per ? n : 1, 0);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++)
                        put(wb, dt, i * ldy + j, dequant(sums[i * n + j], xs[i], ws[per ? j : 0]));
                q.y = tens(yb, dt, m, n, ldy, 0);
                good &= lk_ref_int8_gemm(&q) == LK_OK && memcmp(yb, wb, sizeof yb) == 0;
            }
        ok(good, "int8 gemm K=%lld: int32 equals the int64 sums; dequantised output "
                 "(1x1 and 1xN weight scales, f32/bf16/f16) bit-exact",
           (long long)k);
        free(a), free(b);
    }

    /* The int32 edges: (-128)(-128) K = 2^17 - 1 times is 2^31 - 2^14, the
     * largest sum the contract allows; (-128)(127) the most negative. */
    int64_t k = 131071;
    int8_t *a = xmalloc((size_t)k), *b = xmalloc((size_t)k);
    memset(a, 0x80, (size_t)k);
    int32_t y[2];
    lk_qgemm_args q;
    memset(&q, 0, sizeof q);
    q.m = 1, q.n = 2, q.k = k;
    int8_t *w2 = xmalloc((size_t)(2 * k));
    memset(w2, 0x80, (size_t)k);
    memset(w2 + k, 127, (size_t)k);
    q.x = tens(a, LK_I8, 1, k, k, 0);
    q.w = tens(w2, LK_I8, 2, k, k, 0);
    q.y = tens(y, LK_I32, 1, 2, 2, 0);
    lk_ref_int8_gemm(&q);
    ok(y[0] == 2147467264 && y[1] == -2130690176,
       "int8 gemm K=131071 extremes: %ld (want 2147467264), %ld (want -2130690176)",
       (long)y[0], (long)y[1]);
    free(a), free(b), free(w2);
}

/* Pack codes into a buffer as docs/formats.md describes, independently of
 * backends/ref/t2.h: element k of row r in byte r * ld / 4 + k / 4, bits
 * 2 (k % 4). */
static void set_code(uint8_t *buf, int64_t ld, int64_t r, int64_t k, unsigned code)
{
    uint8_t *byte = buf + r * ld / 4 + k / 4;
    unsigned sh = (unsigned)(2 * (k % 4));
    *byte = (uint8_t)((*byte & ~(3u << sh)) | (code << sh));
}

static void test_ternary_gemm(void)
{
    for (size_t ki = 0; ki < sizeof odd_k / sizeof odd_k[0]; ki++) {
        int64_t m = 3, n = 5, k = odd_k[ki], ldx = k + 3, ldw = ((k + 3) / 4) * 4 + 8;
        int8_t *x = xmalloc((size_t)(m * ldx));
        uint8_t *w = xmalloc((size_t)(n * ldw / 4));
        int8_t *wv = xmalloc((size_t)(n * (k + 1)));
        for (int64_t i = 0; i < m * ldx; i++)
            x[i] = (int8_t)rng_int(-128, 127);
        for (int64_t i = 0; i < n * ldw / 4; i++)
            w[i] = (uint8_t)rng_next(); /* padding and gaps: anything */
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < k; c++) {
                unsigned code = (unsigned)rng_int(0, 3); /* the reserved 3 too */
                set_code(w, ldw, r, c, code);
                wv[r * (k + 1) + c] = (int8_t)((int)code - 1);
            }
        int64_t sums[15];
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t s = 0;
                for (int64_t c = 0; c < k; c++)
                    s += (int64_t)x[i * ldx + c] * wv[j * (k + 1) + c];
                sums[i * n + j] = s;
            }
        lk_qgemm_args q;
        memset(&q, 0, sizeof q);
        q.m = m, q.n = n, q.k = k;
        q.x = tens(x, LK_I8, m, k, ldx, 0);
        q.w = tens(w, LK_T2, n, k, ldw, 0);
        int32_t yi[15];
        q.y = tens(yi, LK_I32, m, n, n, 0);
        int good = lk_ref_ternary_gemm(&q) == LK_OK;
        for (int i = 0; i < 15; i++)
            good &= yi[i] == sums[i];

        float xs[3], ws[5];
        for (int i = 0; i < 3; i++)
            xs[i] = 127.0f / (fabsf(rng_float()) + 0.001f);
        for (int i = 0; i < 5; i++)
            ws[i] = fabsf(rng_float()) + 0.01f;
        q.x_scale = tens(xs, LK_F32, m, 1, 1, 0);
        for (int per = 0; per < 2; per++)
            for (int d = 0; d < 3; d++) {
                lk_dtype dt = float_types[d];
                uint32_t yb[15], wb[15];
                q.w_scale = tens(ws, LK_F32, 1, per ? n : 1, per ? n : 1, 0);
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++)
                        put(wb, dt, i * n + j, dequant(sums[i * n + j], xs[i], ws[per ? j : 0]));
                q.y = tens(yb, dt, m, n, n, 0);
                good &= lk_ref_ternary_gemm(&q) == LK_OK &&
                        memcmp(yb, wb, (size_t)(m * n) * fsize(dt)) == 0;
            }
        ok(good, "ternary gemm K=%lld (codes 0..3, code 3 = 2): int32 equals the int64 "
                 "sums; dequantised output bit-exact",
           (long long)k);
        free(x), free(w), free(wv);
    }

    /* The int32 edge: K = 2^23, x = -128, every code 3 (= 2): -2^31. */
    int64_t k = 8388608;
    int8_t *x = xmalloc((size_t)k);
    uint8_t *w = xmalloc((size_t)(k / 4));
    memset(x, 0x80, (size_t)k);
    memset(w, 0xff, (size_t)(k / 4));
    float xs = 1.0f, ws = 1.0f, y = 0;
    int32_t yi = 0;
    lk_qgemm_args q;
    memset(&q, 0, sizeof q);
    q.m = 1, q.n = 1, q.k = k;
    q.x = tens(x, LK_I8, 1, k, k, 0);
    q.w = tens(w, LK_T2, 1, k, k, 0);
    q.y = tens(&yi, LK_I32, 1, 1, 1, 0);
    lk_ref_ternary_gemm(&q);
    q.x_scale = tens(&xs, LK_F32, 1, 1, 1, 0);
    q.w_scale = tens(&ws, LK_F32, 1, 1, 1, 0);
    q.y = tens(&y, LK_F32, 1, 1, 1, 0);
    lk_ref_ternary_gemm(&q);
    ok(yi == INT32_MIN && y == -0x1p31f,
       "ternary gemm K=2^23, x=-128, code 3: acc = -2^31 (got %ld, %a)", (long)yi, (double)y);
    free(x), free(w);
}

/* ------------------------------------------------------ pack / unpack */

static void test_pack(void)
{
    static const int64_t colss[] = {1, 2, 3, 4, 5, 7, 8, 129, 300};
    int good_pack = 1, good_rt = 1;
    for (size_t ci = 0; ci < sizeof colss / sizeof colss[0]; ci++) {
        int64_t rows = 3, cols = colss[ci], lds = cols + 1;
        int64_t ldq = ((cols + 3) / 4) * 4 + 4; /* one spare byte per row */
        size_t qbytes = (size_t)(rows * ldq / 4);
        int8_t *src = xmalloc((size_t)(rows * lds));
        uint8_t *got = xmalloc(qbytes), *want = xmalloc(qbytes);
        for (int64_t i = 0; i < rows * lds; i++)
            src[i] = (int8_t)rng_int(-1, 1);
        memset(got, 0xaa, qbytes);
        memset(want, 0xaa, qbytes);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t c = 0; c < ((cols + 3) / 4) * 4; c++)
                set_code(want, ldq, r, c, c < cols ? (unsigned)(src[r * lds + c] + 1) : 1u);
        }
        lk_pack_args p;
        p.src = tens(src, LK_I8, rows, cols, lds, 0);
        p.dst = tens(got, LK_T2, rows, cols, ldq, 0);
        good_pack &= lk_ref_ternary_pack(&p) == LK_OK && memcmp(got, want, qbytes) == 0;

        int64_t ldu = cols + 2;
        int8_t *back = xmalloc((size_t)(rows * ldu)), *bwant = xmalloc((size_t)(rows * ldu));
        memset(back, 0x55, (size_t)(rows * ldu));
        memcpy(bwant, back, (size_t)(rows * ldu));
        for (int64_t r = 0; r < rows; r++)
            memcpy(bwant + r * ldu, src + r * lds, (size_t)cols);
        lk_pack_args u;
        u.src = tens(got, LK_T2, rows, cols, ldq, 0);
        u.dst = tens(back, LK_I8, rows, cols, ldu, 0);
        good_rt &= lk_ref_ternary_unpack(&u) == LK_OK &&
                   memcmp(back, bwant, (size_t)(rows * ldu)) == 0;
        free(src), free(got), free(want), free(back), free(bwant);
    }
    ok(good_pack, "ternary pack: bytes as docs/formats.md (padding codes 1, spare bytes "
                  "untouched) for cols 1..8, 129, 300");
    ok(good_rt, "ternary unpack(pack(w)) == w");

    int8_t row[5] = {1, -1, 0, 1, 1};
    uint8_t bytes[2] = {0, 0};
    lk_pack_args p;
    p.src = tens(row, LK_I8, 1, 5, 5, 0);
    p.dst = tens(bytes, LK_T2, 1, 5, 8, 0);
    lk_ref_ternary_pack(&p);
    ok(bytes[0] == 0x92 && bytes[1] == 0x56,
       "ternary pack [1, -1, 0, 1, 1] = 0x92 0x56 (docs/formats.md example; got 0x%02x 0x%02x)",
       bytes[0], bytes[1]);

    /* code 3 decodes to 2 */
    uint8_t b3 = 0xe4; /* codes 0, 1, 2, 3 */
    int8_t v3[4];
    lk_pack_args u;
    u.src = tens(&b3, LK_T2, 1, 4, 4, 0);
    u.dst = tens(v3, LK_I8, 1, 4, 4, 0);
    lk_ref_ternary_unpack(&u);
    ok(v3[0] == -1 && v3[1] == 0 && v3[2] == 1 && v3[3] == 2,
       "ternary unpack of codes 0, 1, 2, 3 gives -1, 0, 1, 2");

    /* an invalid value: the error names the first one, nothing is written */
    int8_t bad[3 * 6];
    for (int i = 0; i < 18; i++)
        bad[i] = (int8_t)rng_int(-1, 1);
    bad[1 * 6 + 3] = 2;
    bad[2 * 6 + 0] = -128;
    uint8_t out[3 * 2];
    memset(out, 0xaa, sizeof out);
    p.src = tens(bad, LK_I8, 3, 6, 6, 0);
    p.dst = tens(out, LK_T2, 3, 6, 8, 0);
    last_error[0] = 0;
    lk_status st = lk_ref_ternary_pack(&p);
    int untouched = 1;
    for (size_t i = 0; i < sizeof out; i++)
        untouched &= out[i] == 0xaa;
    ok(st == LK_ERR_INVALID_VALUE && untouched &&
           strcmp(last_error, "lk_ternary_pack: w[1, 3] = 2 is not -1, 0 or 1") == 0,
       "ternary pack refuses 2 with LK_ERR_INVALID_VALUE, names w[1, 3], writes nothing "
       "(\"%s\")", last_error);
    bad[1 * 6 + 3] = 0;
    st = lk_ref_ternary_pack(&p);
    ok(st == LK_ERR_INVALID_VALUE &&
           strcmp(last_error, "lk_ternary_pack: w[2, 0] = -128 is not -1, 0 or 1") == 0,
       "ternary pack refuses -128 (\"%s\")", last_error);
}

/* ------------------------------------------------------- quantisation */

/* quantize_act as numerics.md section 8 reads, with libm's fabsf, fmaxf,
 * fminf and nearbyintf (round to nearest even in the default mode). */
static void expect_act_row(const float *x, int64_t n, int8_t *q, uint32_t *scale_bits)
{
    float amax = 0.0f;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(x[i]))
            nan = 1;
        else if (fabsf(x[i]) > amax)
            amax = fabsf(x[i]);
    }
    float s = nan ? NAN : 127.0f / (amax > LK_QUANT_EPS ? amax : LK_QUANT_EPS);
    for (int64_t i = 0; i < n; i++) {
        float v = x[i] * s;
        q[i] = isnan(v) ? 0 : (int8_t)nearbyintf(fminf(fmaxf(v, -128.0f), 127.0f));
    }
    *scale_bits = isnan(s) ? LK_NAN_F32_BITS : lk_f32_bits(s);
}

static int run_act(const float *rows, int64_t nrows, int64_t n, lk_dtype dt, const char *what)
{
    /* the input in dt, its widened values, and the expected outputs */
    int64_t ldx = n + 1, ldq = n + 2, lds = 2;
    void *x = xmalloc((size_t)(nrows * ldx) * fsize(dt));
    float *wide = xmalloc((size_t)(nrows * n) * 4);
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t i = 0; i < ldx; i++) {
            put(x, dt, r * ldx + i, i < n ? rows[r * n + i] : 1e30f);
            if (i < n)
                wide[r * n + i] = get(x, dt, r * ldx + i);
        }
    int8_t *q = xmalloc((size_t)(nrows * ldq)), *wq = xmalloc((size_t)(nrows * ldq));
    uint32_t *sc = xmalloc((size_t)(nrows * lds) * 4), *wsc = xmalloc((size_t)(nrows * lds) * 4);
    memset(q, 0x77, (size_t)(nrows * ldq));
    memcpy(wq, q, (size_t)(nrows * ldq));
    memset(sc, 0x77, (size_t)(nrows * lds) * 4);
    memcpy(wsc, sc, (size_t)(nrows * lds) * 4);
    for (int64_t r = 0; r < nrows; r++)
        expect_act_row(wide + r * n, n, wq + r * ldq, &wsc[r * lds]);
    lk_quant_args a;
    a.x = tens(x, dt, nrows, n, ldx, 0);
    a.q = tens(q, LK_I8, nrows, n, ldq, 0);
    a.scale = tens(sc, LK_F32, nrows, 1, lds, 0);
    int good = lk_ref_quantize_act(&a) == LK_OK &&
               memcmp(q, wq, (size_t)(nrows * ldq)) == 0 &&
               memcmp(sc, wsc, (size_t)(nrows * lds) * 4) == 0;
    if (!good)
        diag("quantize_act %s (%s): first row scale got 0x%08x want 0x%08x", what, dname(dt),
             (unsigned)sc[0], (unsigned)wsc[0]);
    free(x), free(wide), free(q), free(wq), free(sc), free(wsc);
    return good;
}

static void test_quantize_act(void)
{
    /* random rows of each dtype, odd lengths */
    static const int64_t ns[] = {1, 127, 129, 300};
    int good = 1;
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
        for (int d = 0; d < 3; d++) {
            int64_t n = ns[ni];
            float *rows = xmalloc((size_t)(3 * n) * 4);
            for (int64_t i = 0; i < 3 * n; i++)
                rows[i] = rng_float();
            good &= run_act(rows, 3, n, float_types[d], "random");
            free(rows);
        }
    ok(good, "quantize_act: random rows (n = 1, 127, 129, 300; f32/bf16/f16) bit-exact");

    /* the edge rows of numerics.md section 8, with their stated results */
    enum { N = 6 };
    const float sub = 0x1p-140f;
    const float edge[5][N] = {
        {1.0f, NAN, -3.0f, 0.5f, 0.0f, 2.0f},                 /* NaN */
        {1.0f, INFINITY, -3.0f, -INFINITY, 0.0f, 2.0f},       /* Inf */
        {0.0f, -0.0f, 0.0f, 0.0f, -0.0f, 0.0f},               /* zeros */
        {sub, -sub, 0x1p-149f, -0x1.fffffcp-127f, 0.0f, sub}, /* subnormals */
        {254.0f, 1.0f, 3.0f, 5.0f, -3.0f, -254.0f},           /* ties at s = 0.5 */
    };
    const int8_t want_q[5][N] = {
        {0, 0, 0, 0, 0, 0},
        {0, 0, 0, 0, 0, 0},
        {0, 0, 0, 0, 0, 0},
        {0, 0, 0, 0, 0, 0},
        {127, 0, 2, 2, -2, -127},
    };
    const uint32_t want_s[5] = {LK_NAN_F32_BITS, 0u, lk_f32_bits(0x1.8392cp+23f),
                                lk_f32_bits(0x1.8392cp+23f), lk_f32_bits(0.5f)};
    const char *names[5] = {"a NaN: q = 0, scale = NaN", "an Inf: q = 0, scale = +0",
                            "all zeros: q = 0, scale = 127 / 1e-5f",
                            "subnormals: q = 0, scale = 127 / 1e-5f",
                            "amax 254: s = 0.5, ties to even"};
    for (int e = 0; e < 5; e++) {
        int8_t q[N];
        uint32_t s;
        lk_quant_args a;
        a.x = tens((void *)edge[e], LK_F32, 1, N, N, 0);
        a.q = tens(q, LK_I8, 1, N, N, 0);
        a.scale = tens(&s, LK_F32, 1, 1, 1, 0);
        lk_ref_quantize_act(&a);
        ok(memcmp(q, want_q[e], N) == 0 && s == want_s[e] && run_act(edge[e], 1, N, LK_F32, names[e]),
           "quantize_act row with %s (scale 0x%08x)", names[e], (unsigned)s);
    }
}

/* numerics.md section 5's lane sum, written recursively over chunks (the
 * reference streams through levels instead). */
static float lane_sum(const float *t, int64_t n)
{
    if (n > 4096) {
        int64_t nc = (n + 4095) / 4096;
        float *part = xmalloc((size_t)nc * 4);
        for (int64_t c = 0; c < nc; c++)
            part[c] = lane_sum(t + c * 4096, n - c * 4096 < 4096 ? n - c * 4096 : 4096);
        float s = lane_sum(part, nc);
        free(part);
        return s;
    }
    float lane[64];
    for (int l = 0; l < 64; l++)
        lane[l] = -0.0f;
    for (int64_t i = 0; i < n; i++)
        lane[i % 64] += t[i];
    for (int s = 32; s >= 1; s /= 2)
        for (int l = 0; l < s; l++)
            lane[l] += lane[l + s];
    return lane[0];
}

static int run_ternary_quant(const float *w, int64_t rows, int64_t cols, lk_dtype dt,
                             uint32_t *scale_out)
{
    int64_t ldw = cols + 1, ldq = ((cols + 3) / 4) * 4 + 4;
    size_t qbytes = (size_t)(rows * ldq / 4);
    void *x = xmalloc((size_t)(rows * ldw) * fsize(dt));
    float *wide = xmalloc((size_t)(rows * cols) * 4), *ab = xmalloc((size_t)cols * 4);
    float *rs = xmalloc((size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < ldw; c++) {
            put(x, dt, r * ldw + c, c < cols ? w[r * cols + c] : NAN);
            if (c < cols)
                wide[r * cols + c] = get(x, dt, r * ldw + c);
        }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < cols; c++)
            ab[c] = fabsf(wide[r * cols + c]);
        rs[r] = lane_sum(ab, cols);
    }
    float mean = lane_sum(rs, rows) / (float)(rows * cols);
    float m = isnan(mean) ? NAN : mean > LK_QUANT_EPS ? mean : LK_QUANT_EPS;
    uint8_t *want = xmalloc(qbytes), *got = xmalloc(qbytes);
    memset(want, 0x3c, qbytes);
    memcpy(got, want, qbytes);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < ((cols + 3) / 4) * 4; c++) {
            int t = 0;
            if (c < cols) {
                float v = wide[r * cols + c] / m;
                t = isnan(v) ? 0 : (int)nearbyintf(fminf(fmaxf(v, -1.0f), 1.0f));
            }
            set_code(want, ldq, r, c, (unsigned)(t + 1));
        }
    uint32_t wsc = isnan(m) ? LK_NAN_F32_BITS : lk_f32_bits(m), sc = 0x12345678u;
    lk_quant_args a;
    a.x = tens(x, dt, rows, cols, ldw, 0);
    a.q = tens(got, LK_T2, rows, cols, ldq, 0);
    a.scale = tens(&sc, LK_F32, 1, 1, 1, 0);
    int good = lk_ref_quantize_ternary(&a) == LK_OK && memcmp(got, want, qbytes) == 0 &&
               sc == wsc;
    if (scale_out)
        *scale_out = sc;
    free(x), free(wide), free(ab), free(rs), free(want), free(got);
    return good;
}

static void test_quantize_ternary(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 5}, {4, 130}, {3, 5000}, {70, 3}};
    int good = 1;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int d = 0; d < 3; d++) {
            int64_t r = shapes[si][0], c = shapes[si][1];
            float *w = xmalloc((size_t)(r * c) * 4);
            for (int64_t i = 0; i < r * c; i++)
                w[i] = rng_float();
            good &= run_ternary_quant(w, r, c, float_types[d], NULL);
            free(w);
        }
    ok(good, "quantize_ternary: random tensors (1x1 .. 3x5000, 70x3; f32/bf16/f16) pack "
             "and scale bit-exact");

    float w[2 * 7] = {0.5f, -1.0f, 2.0f, 0.0f, 0.1f, -0.2f, 3.0f,
                      1.0f, 1.0f, -1.0f, 0.25f, NAN, 0.0f, 0.0f};
    uint32_t sc;
    int g1 = run_ternary_quant(w, 2, 7, LK_F32, &sc);
    ok(g1 && sc == LK_NAN_F32_BITS, "quantize_ternary with a NaN weight: every t = 0, "
                                    "scale canonical NaN");
    float z[3 * 3] = {0};
    int g2 = run_ternary_quant(z, 3, 3, LK_F32, &sc);
    ok(g2 && sc == lk_f32_bits(LK_QUANT_EPS), "quantize_ternary of zeros: t = 0, scale 1e-5f");
}

/* ------------------------------------------------------------ binary */

static void test_binary(void)
{
    int good = 1, cases = 0;
    int64_t rows = 4, cols = 7;
    for (int op = LK_BINARY_ADD; op <= LK_BINARY_MUL; op++)
        for (int ia = 0; ia < 3; ia++)
            for (int ib = 0; ib < 3; ib++)
                for (int iy = 0; iy < 3; iy++)
                    for (int bc = 0; bc < 2; bc++) {
                        lk_dtype da = float_types[ia], db = float_types[ib], dy = float_types[iy];
                        int64_t brows = bc ? 1 : rows, lda = cols + 2, ldb = cols + 1, ldy = cols + 3;
                        void *a = rand_buf(da, rows * lda), *b = rand_buf(db, brows * ldb);
                        void *y = rand_buf(dy, rows * ldy);
                        put(a, da, 1, NAN);
                        put(b, db, 2, INFINITY);
                        size_t yb = (size_t)(rows * ldy) * fsize(dy);
                        void *want = xmalloc(yb);
                        memcpy(want, y, yb);
                        for (int64_t r = 0; r < rows; r++)
                            for (int64_t c = 0; c < cols; c++) {
                                float x = get(a, da, r * lda + c);
                                float z = get(b, db, (bc ? 0 : r) * ldb + c);
                                put(want, dy, r * ldy + c, op == LK_BINARY_ADD ? x + z : x * z);
                            }
                        lk_binary_args p;
                        p.op = (lk_binary_op)op;
                        p.a = tens(a, da, rows, cols, lda, 0);
                        p.b = tens(b, db, brows, cols, ldb, 0);
                        p.y = tens(y, dy, rows, cols, ldy, 0);
                        good &= lk_ref_binary(&p) == LK_OK && memcmp(y, want, yb) == 0;
                        cases++;
                        free(a), free(b), free(y), free(want);
                    }
    ok(good, "binary add/mul: %d cases (dtypes, broadcast, NaN/Inf, ld padding) bit-exact",
       cases);

    /* in place: y is a, then y is b (same rows, no broadcast) */
    int inplace = 1;
    for (int which = 0; which < 2; which++)
        for (int d = 0; d < 3; d++) {
            lk_dtype dt = float_types[d];
            int64_t ld = cols + 1;
            size_t bytes = (size_t)(rows * ld) * fsize(dt);
            void *a = rand_buf(dt, rows * ld), *b = rand_buf(dt, rows * ld);
            void *want = xmalloc(bytes);
            memcpy(want, which ? b : a, bytes);
            for (int64_t i = 0; i < rows * ld; i++)
                if (i % ld < cols)
                    put(want, dt, i, get(a, dt, i) * get(b, dt, i));
            lk_binary_args p;
            p.op = LK_BINARY_MUL;
            p.a = tens(a, dt, rows, cols, ld, 0);
            p.b = tens(b, dt, rows, cols, ld, 0);
            p.y = which ? p.b : p.a;
            inplace &= lk_ref_binary(&p) == LK_OK && memcmp(which ? b : a, want, bytes) == 0;
            free(a), free(b), free(want);
        }
    ok(inplace, "binary in place (y = a, y = b) in f32, bf16, f16");
}

int main(void)
{
    ref_host_install();
    rng_state = tap_seed();
    test_gemm_contract_order(); /* 6 */
    test_gemm_epilogue_and_batch(); /* 2 */
    test_gemm_edges(); /* 6 */
    test_gemm_accuracy(); /* 14 */
    test_int8_gemm(); /* 7 */
    test_ternary_gemm(); /* 7 */
    test_pack(); /* 6 */
    test_quantize_act(); /* 6 */
    test_quantize_ternary(); /* 3 */
    test_binary(); /* 2 */
    return done_testing();
}
