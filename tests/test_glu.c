/* Lockstep tests: lk_glu(op, gate, up -> y) is lk_unary(op, gate -> f32)
 * then lk_binary(MUL, that, up -> y), bit for bit, on every device and for
 * every lk_unary_op: gate and up as the column halves of one [gate | up]
 * buffer (the BitNet demo's layout), separate padded tensors with mixed
 * dtypes, NaN, Inf, zeros and subnormals among the inputs, y over gate or
 * over up; the argument errors write nothing.  The comparison with the
 * reference is in the contract matrix (tools/matrix_cases.c, "glu"). */
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
    int64_t rows, cols;
    lk_dtype gd, ud, yd;
    int joint; /* 1: gate and up share one buffer, ld = 2 * cols (gd == ud) */
} tcase;

static const tcase cases[] = {
    {1, 6912, LK_F32, LK_F32, LK_F32, 1},    {3, 6912, LK_F32, LK_F32, LK_F32, 1},
    {2, 1001, LK_BF16, LK_BF16, LK_BF16, 1}, {5, 37, LK_F16, LK_F16, LK_F32, 1},
    {4, 250, LK_BF16, LK_F32, LK_F16, 0},    {7, 129, LK_F32, LK_F16, LK_BF16, 0},
    {1, 3, LK_F32, LK_F32, LK_F32, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))
#define NOPS (LK_UNARY_ERF - LK_UNARY_COPY + 1)

static const char *const op_names[NOPS] = {"copy", "relu", "relu2", "sigmoid", "silu",
                                           "gelu_tanh", "gelu_erf", "exp", "log", "tanh",
                                           "erf"};

static uint64_t rng;

static const char *dname(lk_dtype d)
{
    return d == LK_F32 ? "f32" : d == LK_BF16 ? "bf16" : "f16";
}

/* One f32 bit pattern: mostly values in about [-8, 8], some specials. */
static uint32_t rnd_f32(void)
{
    static const uint32_t special[] = {0x7fc00000u, 0xffc00001u, 0x7f800000u, 0xff800000u,
                                       0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu,
                                       0x7f7fffffu, 0xff7fffffu, 0x42b20000u, 0xc2d00000u};
    uint64_t r = tap_rand(&rng);
    if (r % 16 == 0)
        return special[(r >> 8) % (sizeof special / sizeof special[0])];
    float f = (float)((double)(r >> 40) / (double)(1ull << 20) - 8.0);
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

/* n elements of dtype d at dst[0 .. n) (the element index, not bytes). */
static void fill(void *dst, lk_dtype d, size_t i0, size_t n)
{
    for (size_t i = i0; i < i0 + n; i++) {
        uint32_t b = rnd_f32();
        if (d == LK_F32)
            ((uint32_t *)dst)[i] = b;
        else if (d == LK_BF16)
            ((uint16_t *)dst)[i] = (uint16_t)(b >> 16);
        else /* f16: any pattern now and then, else a moderate exponent */
            ((uint16_t *)dst)[i] = tap_rand(&rng) % 16 == 0
                                       ? (uint16_t)tap_rand(&rng)
                                       : (uint16_t)((b >> 16 & 0x83ffu) |
                                                    (uint16_t)((8 + tap_rand(&rng) % 14) << 10));
    }
}

static void *dev_put(lk_device *d, lk_queue *q, const void *h, size_t bytes)
{
    void *p = NULL;
    if (lk_malloc(d, bytes, &p) != LK_OK)
        return NULL;
    if (h && lk_memcpy(q, p, h, bytes, LK_COPY_HOST_TO_DEVICE) != LK_OK) {
        lk_free(d, p);
        return NULL;
    }
    return p;
}

static int dev_get(lk_queue *q, void *h, const void *p, size_t bytes)
{
    return lk_memcpy(q, h, p, bytes, LK_COPY_DEVICE_TO_HOST) == LK_OK &&
           lk_queue_sync(q) == LK_OK;
}

/* Every op on one case: the fused call against the two-op sequence. */
static void run_case(lk_device *d, lk_queue *q, const tcase *c, int ci)
{
    const int64_t R = c->rows, K = c->cols;
    const int64_t gld = c->joint ? 2 * K : K + 3, uld = c->joint ? 2 * K : K + 1, yld = K + 2;
    const size_t gbytes = (size_t)(R * gld) * test_esize(c->gd);
    const size_t ubytes = c->joint ? 0 : (size_t)(R * uld) * test_esize(c->ud);
    const size_t ybytes = (size_t)(R * yld) * test_esize(c->yd);
    unsigned char *gh = calloc(1, gbytes), *uh = calloc(1, ubytes + 1);
    unsigned char *y1 = malloc(ybytes), *y2 = malloc(ybytes);
    if (!gh || !uh || !y1 || !y2)
        bail("out of memory");
    for (int64_t r = 0; r < R; r++) {
        fill(gh, c->gd, (size_t)(r * gld), (size_t)(c->joint ? 2 * K : K));
        if (!c->joint)
            fill(uh, c->ud, (size_t)(r * uld), (size_t)K);
    }
    memset(y1, 0xa5, ybytes);
    void *gb = dev_put(d, q, gh, gbytes);
    void *ub = c->joint ? NULL : dev_put(d, q, uh, ubytes);
    void *yb1 = dev_put(d, q, y1, ybytes), *yb2 = dev_put(d, q, y1, ybytes);
    void *tb = dev_put(d, q, NULL, (size_t)(R * K) * 4);
    if (!gb || (!c->joint && !ub) || !yb1 || !yb2 || !tb)
        bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
    lk_tensor g = lk_mat_ld(gb, c->gd, R, K, gld);
    lk_tensor u = c->joint ? lk_mat_ld((char *)gb + (size_t)K * test_esize(c->gd), c->ud, R, K, uld)
                           : lk_mat_ld(ub, c->ud, R, K, uld);
    lk_tensor t1 = lk_mat_ld(yb1, c->yd, R, K, yld), t2 = lk_mat_ld(yb2, c->yd, R, K, yld);
    lk_tensor tmp = lk_mat(tb, LK_F32, R, K);

    int bad = 0, unsupported = 0;
    char what[256] = "";
    for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++) {
        lk_status st = lk_glu(q, (lk_unary_op)op, &g, &u, &t1);
        if (st == LK_ERR_UNSUPPORTED) {
            unsupported = 1;
            snprintf(what, sizeof what, "%s", lk_last_error());
            break;
        }
        lk_status s2 = lk_unary(q, (lk_unary_op)op, &g, &tmp);
        lk_status s3 = lk_binary(q, LK_BINARY_MUL, &tmp, &u, &t2);
        int good = st == LK_OK && s2 == LK_OK && s3 == LK_OK && dev_get(q, y1, yb1, ybytes) &&
                   dev_get(q, y2, yb2, ybytes);
        if (!good || memcmp(y1, y2, ybytes)) {
            if (!bad++)
                snprintf(what, sizeof what, "first: %s (%s / %s / %s%s%s)", op_names[op - 1],
                         lk_status_string(st), lk_status_string(s2), lk_status_string(s3),
                         good ? "" : ": ", good ? "" : lk_last_error());
        }
    }
    if (unsupported)
        skip(1, "[%d] on %s: lk_glu unsupported (%s)", ci, lk_device_name(d), what);
    else
        ok(!bad, "[%d] %s,%s->%s %lldx%lld%s on %s: glu == unary + binary mul, every op%s%s", ci,
           dname(c->gd), dname(c->ud), dname(c->yd), (long long)R, (long long)K,
           c->joint ? " [gate|up]" : " ld+", lk_device_name(d), bad ? "; " : "", what);
    lk_free(d, gb);
    if (ub)
        lk_free(d, ub);
    lk_free(d, yb1), lk_free(d, yb2), lk_free(d, tb);
    free(gh), free(uh), free(y1), free(y2);
}

/* y over gate and over up (f32, dense): each element read before written. */
static void run_inplace(lk_device *d, lk_queue *q)
{
    const int64_t R = 3, K = 517;
    const size_t n = (size_t)(R * K), bytes = n * 4;
    uint32_t *gh = malloc(bytes), *uh = malloc(bytes), *w1 = malloc(bytes), *w2 = malloc(bytes);
    if (!gh || !uh || !w1 || !w2)
        bail("out of memory");
    fill(gh, LK_F32, 0, n);
    fill(uh, LK_F32, 0, n);
    int bad = 0;
    for (int over = 0; over < 2; over++) {
        void *gb = dev_put(d, q, gh, bytes), *ub = dev_put(d, q, uh, bytes);
        void *yb = dev_put(d, q, NULL, bytes), *tb = dev_put(d, q, NULL, bytes);
        if (!gb || !ub || !yb || !tb)
            bail("%s: no device memory: %s", lk_device_name(d), lk_last_error());
        lk_tensor g = lk_mat(gb, LK_F32, R, K), u = lk_mat(ub, LK_F32, R, K);
        lk_tensor y = lk_mat(yb, LK_F32, R, K), t = lk_mat(tb, LK_F32, R, K);
        const lk_tensor *dst = over ? &u : &g;
        lk_status s1 = lk_unary(q, LK_UNARY_SILU, &g, &t);
        lk_status s2 = lk_binary(q, LK_BINARY_MUL, &t, &u, &y);
        lk_status s3 = lk_glu(q, LK_UNARY_SILU, &g, &u, dst);
        if (s3 == LK_ERR_UNSUPPORTED)
            bad = -1;
        else if (s1 != LK_OK || s2 != LK_OK || s3 != LK_OK || !dev_get(q, w1, yb, bytes) ||
                 !dev_get(q, w2, over ? ub : gb, bytes) || memcmp(w1, w2, bytes))
            bad = 1;
        lk_free(d, gb), lk_free(d, ub), lk_free(d, yb), lk_free(d, tb);
    }
    if (bad < 0)
        skip(1, "%s: lk_glu unsupported", lk_device_name(d));
    else
        ok(!bad, "%s: glu with y over gate, then over up: the same bits", lk_device_name(d));
    free(gh), free(uh), free(w1), free(w2);
}

/* Argument errors (host memory: the reference device). */
static void test_errors(lk_queue *q)
{
    float g[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, u[12] = {0};
    float y[12];
    for (int i = 0; i < 12; i++)
        y[i] = -1.0f;
    lk_tensor tg = lk_mat(g, LK_F32, 3, 4), tu = lk_mat(u, LK_F32, 3, 4);
    lk_tensor ty = lk_mat(y, LK_F32, 3, 4), bad;
#define UNTOUCHED() (y[0] == -1.0f && y[11] == -1.0f)
    ok(lk_glu(q, (lk_unary_op)0, &tg, &tu, &ty) == LK_ERR_INVALID_ARGUMENT && UNTOUCHED(),
       "op 0: LK_ERR_INVALID_ARGUMENT, nothing written");
    ok(lk_glu(q, (lk_unary_op)(LK_UNARY_ERF + 1), &tg, &tu, &ty) == LK_ERR_INVALID_ARGUMENT &&
           UNTOUCHED(),
       "op past LK_UNARY_ERF: LK_ERR_INVALID_ARGUMENT");
    bad = lk_mat(u, LK_F32, 3, 3);
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, &bad, &ty) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "up cols != gate cols: LK_ERR_BAD_SHAPE");
    bad = lk_mat(y, LK_F32, 2, 4);
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, &tu, &bad) == LK_ERR_BAD_SHAPE && UNTOUCHED(),
       "y rows != gate rows: LK_ERR_BAD_SHAPE");
    bad = lk_mat(u, LK_I8, 3, 4);
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, &bad, &ty) == LK_ERR_BAD_DTYPE && UNTOUCHED(),
       "up i8: LK_ERR_BAD_DTYPE");
    bad = lk_mat(g + 1, LK_F32, 3, 4);
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, &tu, &bad) == LK_ERR_ALIASING && UNTOUCHED(),
       "y overlapping gate, not equal: LK_ERR_ALIASING");
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, NULL, &ty) == LK_ERR_NULL_POINTER && UNTOUCHED(),
       "up NULL: LK_ERR_NULL_POINTER");
    bad = lk_mat(g, LK_F32, 0, 4);
    lk_tensor u0 = lk_mat(u, LK_F32, 0, 4), y0 = lk_mat(y, LK_F32, 0, 4);
    ok(lk_glu(q, LK_UNARY_RELU2, &bad, &u0, &y0) == LK_OK && UNTOUCHED(), "0 rows: a no-op");
    ok(lk_glu(q, LK_UNARY_RELU2, &tg, &tu, &ty) == LK_OK && y[0] == 0.0f && y[11] == 0.0f,
       "valid call writes");
#undef UNTOUCHED
}

int main(void)
{
    uint64_t seed = tap_seed();
    test_devices t;
    test_devices_open(&t);
    lk_device **devs = t.dev;
    lk_queue **qs = t.q, *ref_q = t.ref_q;
    const int nd = t.n;
    plan(nd * (NCASES + 1) + 9);
    for (int d = 0; d < nd; d++) {
        rng = seed;
        for (int c = 0; c < NCASES; c++)
            run_case(devs[d], qs[d], &cases[c], c);
        run_inplace(devs[d], qs[d]);
    }
    test_errors(ref_q);
    test_devices_close(&t);
    return done_testing();
}
