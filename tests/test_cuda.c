/* Lockstep tests: what is particular to the CUDA driver, beyond the
 * contract matrix (tests/test_contract.c) that runs every op on cuda:N.
 *
 * 1. The kernels' own paths against the reference, bit for bit: GEMV with
 *    both weight layouts, small M and small N, x in shared or global
 *    memory, unaligned rows, K = 0 and K tails; the tiled GEMM with every
 *    transpose and dtype mix, batches with shared operands, bias and
 *    accumulation, products that round to -0; reductions on the fused and
 *    the split (workspace) path, rows longer than 2^24 (three levels);
 *    norms and softmax with and without the row cache; ternary GEMV with
 *    junk padding codes and code 3, and its tiled fallback; int8 GEMM.
 * 2. A queue that adopts the caller's cudaStream_t: the work lands there.
 * 3. A sequence of ops captured into a CUDA graph and replayed gives the
 *    reference's bits; lk_ternary_pack refuses to run under capture.
 * 4. Errors map to statuses with messages: out of memory, an invalid
 *    ternary value (nothing written), a workspace too small.
 *
 * Without a CUDA device every check is a SKIP with the reason.  The seed
 * comes from LOCKSTEP_TEST_SEED or the clock and is printed.
 * LOCKSTEP_CUDA_TEST_SMALL=1 skips the largest cases (for compute-sanitizer). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"

#ifdef LK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static lk_context *ctx;
static lk_device *ref, *gpu;
static lk_queue *rq, *gq;
static uint64_t rng;
static int small; /* LOCKSTEP_CUDA_TEST_SMALL: the largest cases are skipped (sanitizers) */

/* ------------------------------------------------------------ buffers */

/* One tensor's memory on both sides: h (host, the reference's), d (GPU). */
typedef struct buf {
    void *h, *d, *back; /* back: the GPU result, downloaded */
    size_t bytes;
} buf;

static buf mk(size_t bytes)
{
    buf b;
    b.bytes = bytes ? bytes : 1;
    b.h = malloc(b.bytes);
    b.back = malloc(b.bytes);
    if (!b.h || !b.back || lk_malloc(gpu, b.bytes, &b.d) != LK_OK)
        bail("out of memory for %zu bytes: %s", bytes, lk_last_error());
    memset(b.h, 0x5a, b.bytes); /* what nobody writes must stay equal */
    return b;
}

static void up(buf *b)
{
    if (lk_memcpy(gq, b->d, b->h, b->bytes, LK_COPY_HOST_TO_DEVICE) != LK_OK ||
        lk_queue_sync(gq) != LK_OK)
        bail("upload: %s", lk_last_error());
}

static void down(buf *b)
{
    if (lk_memcpy(gq, b->back, b->d, b->bytes, LK_COPY_DEVICE_TO_HOST) != LK_OK ||
        lk_queue_sync(gq) != LK_OK)
        bail("download: %s", lk_last_error());
}

static void rel(buf *b)
{
    free(b->h);
    free(b->back);
    lk_free(gpu, b->d);
}

static lk_tensor tn(const buf *b, int dev, lk_dtype dt, int64_t rows, int64_t cols, int64_t ld)
{
    return lk_mat_ld(dev ? b->d : b->h, dt, rows, cols, ld);
}

static size_t esize(lk_dtype dt) { return dt == LK_T2 ? 1 : lk_dtype_size(dt); }

/* A value for a test input: mostly uniform in [-2, 2), with edge values
 * (+-0, subnormals, huge, Inf, NaN) when edges is set. */
static float rnd(int edges)
{
    uint64_t r = tap_rand(&rng);
    if (edges && (r & 15) == 0) {
        static const float e[] = {0.0f, -0.0f, 0x1p-140f, -0x1p-149f, 0x1p-100f, -0x1p-100f,
                                  3e38f, -3e38f, INFINITY, -INFINITY, NAN, 1.0f};
        return e[(r >> 8) % (sizeof e / sizeof e[0])];
    }
    return (float)((double)(r >> 11) * 0x1p-53 * 4.0 - 2.0);
}

static void fill(buf *b, lk_dtype dt, int edges)
{
    size_t n = b->bytes / esize(dt);
    for (size_t i = 0; i < n; i++) {
        float v = rnd(edges);
        if (dt == LK_F32)
            ((float *)b->h)[i] = v;
        else if (dt == LK_BF16)
            ((uint16_t *)b->h)[i] = lk_f32_to_bf16(v);
        else if (dt == LK_F16)
            ((uint16_t *)b->h)[i] = lk_f32_to_f16(v);
        else if (dt == LK_I8)
            ((int8_t *)b->h)[i] = (int8_t)(tap_rand(&rng) & 0xff);
        else /* LK_T2: any codes, 3 included */
            ((uint8_t *)b->h)[i] = (uint8_t)(tap_rand(&rng) & 0xff);
    }
}

/* The GPU's copy of an output equals the reference's, byte for byte. */
static int same(buf *b, const char *what)
{
    down(b);
    if (memcmp(b->h, b->back, b->bytes) == 0)
        return 1;
    const unsigned char *x = b->h, *y = b->back;
    size_t i = 0;
    while (x[i] == y[i])
        i++;
    diag("%s: first difference at byte %zu of %zu (ref %02x, cuda %02x)", what, i, b->bytes,
         x[i], y[i]);
    return 0;
}

static int run_both(lk_status st_ref, lk_status st_gpu, const char *what)
{
    if (st_ref != LK_OK || st_gpu != LK_OK) {
        diag("%s: ref %s, cuda %s: %s", what, lk_status_string(st_ref),
             lk_status_string(st_gpu), lk_last_error());
        return 0;
    }
    return 1;
}

/* ------------------------------------------------------------- GEMM */

typedef struct gemm_case {
    int ta, tb;
    lk_dtype da, db, dc, dbias;
    int64_t m, n, k, batch;
    int pad;       /* added to every ld (unaligned rows) */
    int bias, acc; /* bias row, LK_GEMM_ACCUMULATE */
    int share_b;   /* batch_stride of b = 0 */
    int edges;
} gemm_case;

static void gemm_check(lk_queue *q, const gemm_case *c, const char *what)
{
    int64_t ar = c->ta ? c->k : c->m, ac = c->ta ? c->m : c->k;
    int64_t br = c->tb ? c->n : c->k, bc = c->tb ? c->k : c->n;
    int64_t lda = ac + c->pad, ldb = bc + c->pad, ldc = c->n + c->pad;
    int64_t abs_ = ar * lda, bbs = c->share_b ? 0 : br * ldb, cbs = c->m * ldc;
    int64_t bias_bs = c->n + c->pad;
    buf A = mk((size_t)(abs_ * c->batch) * esize(c->da));
    buf B = mk((size_t)(c->share_b ? br * ldb : bbs * c->batch) * esize(c->db));
    buf C = mk((size_t)(cbs * c->batch) * esize(c->dc));
    buf Bi = mk((size_t)(bias_bs * c->batch) * esize(c->dbias));
    fill(&A, c->da, c->edges);
    fill(&B, c->db, c->edges);
    fill(&C, c->dc, c->edges);
    fill(&Bi, c->dbias, c->edges);
    up(&A), up(&B), up(&C), up(&Bi);
    lk_status st[2];
    for (int dev = 0; dev < 2; dev++) {
        lk_tensor a = tn(&A, dev, c->da, ar, ac, lda), b = tn(&B, dev, c->db, br, bc, ldb);
        lk_tensor cc = tn(&C, dev, c->dc, c->m, c->n, ldc);
        lk_tensor bi = tn(&Bi, dev, c->dbias, 1, c->n, c->n);
        a.batch_stride = abs_;
        b.batch_stride = bbs;
        cc.batch_stride = cbs;
        bi.batch_stride = bias_bs;
        st[dev] = lk_gemm(dev ? q : rq, c->ta ? LK_TRANS : LK_NO_TRANS,
                          c->tb ? LK_TRANS : LK_NO_TRANS, &a, &b, c->bias ? &bi : NULL, &cc,
                          c->batch, c->acc ? LK_GEMM_ACCUMULATE : 0);
    }
    ok(run_both(st[0], st[1], what) && same(&C, what),
       "gemm %s: %s%s %lldx%lldx%lld batch %lld, %s.%s->%s%s%s%s", what, c->ta ? "T" : "N",
       c->tb ? "T" : "N", (long long)c->m, (long long)c->n, (long long)c->k,
       (long long)c->batch, lk_dtype_name(c->da), lk_dtype_name(c->db), lk_dtype_name(c->dc),
       c->bias ? " +bias" : "", c->acc ? " +C" : "", c->pad ? " (padded ld)" : "");
    rel(&A), rel(&B), rel(&C), rel(&Bi);
}

static void test_gemm(void)
{
    const gemm_case cases[] = {
        /* GEMV, weights N x K (KC): decode shape with a K tail */
        {0, 1, LK_F32, LK_BF16, LK_F32, LK_F32, 1, 1000, 2600, 1, 0, 0, 0, 0, 0},
        {0, 1, LK_BF16, LK_BF16, LK_BF16, LK_BF16, 3, 333, 1000, 2, 1, 1, 1, 1, 1},
        {0, 1, LK_F16, LK_F32, LK_F32, LK_F32, 2, 300, 512, 1, 0, 1, 0, 0, 1},
        /* the streaming GEMV (K a multiple of 128, rows contiguous):
         * one to eight rows of x, x contiguous or strided, batches */
        {0, 1, LK_BF16, LK_BF16, LK_F32, LK_F32, 1, 1000, 2560, 1, 0, 0, 0, 0, 1},
        {0, 1, LK_F32, LK_F32, LK_F32, LK_F32, 2, 333, 1024, 2, 0, 1, 1, 0, 1},
        {0, 1, LK_F16, LK_F16, LK_BF16, LK_F32, 3, 700, 6912, 1, 0, 1, 0, 1, 0},
        {1, 1, LK_F32, LK_BF16, LK_F32, LK_BF16, 5, 129, 384, 3, 0, 0, 1, 0, 1},
        {0, 1, LK_BF16, LK_F32, LK_F16, LK_F32, 8, 95, 128, 1, 0, 1, 0, 0, 0},
        /* GEMV, weights K x N (LC) */
        {1, 0, LK_F32, LK_F16, LK_F16, LK_F32, 3, 517, 300, 1, 0, 1, 1, 0, 1},
        {0, 0, LK_BF16, LK_BF16, LK_F32, LK_BF16, 8, 64, 1030, 3, 3, 0, 0, 1, 0},
        /* small N: the roles swap */
        {0, 0, LK_F32, LK_F32, LK_F32, LK_F32, 700, 5, 260, 1, 0, 1, 1, 0, 1},
        {1, 1, LK_BF16, LK_F32, LK_F32, LK_F16, 700, 1, 130, 2, 1, 1, 0, 0, 0},
        /* x too large for shared memory */
        {0, 1, LK_F32, LK_F32, LK_F32, LK_F32, 8, 40, 20000, 1, 0, 1, 0, 0, 0},
        {0, 0, LK_F32, LK_BF16, LK_F32, LK_F32, 6, 40, 20000, 1, 2, 0, 0, 0, 0},
        /* K = 0: +0, then the epilogue */
        {0, 1, LK_F32, LK_F32, LK_F32, LK_F32, 3, 7, 0, 1, 0, 1, 1, 0, 1},
        {0, 0, LK_F32, LK_F32, LK_BF16, LK_F32, 200, 150, 0, 1, 0, 1, 1, 0, 1},
        /* the tiled GEMM */
        {0, 0, LK_F32, LK_F32, LK_F32, LK_F32, 130, 257, 300, 1, 0, 0, 0, 0, 0},
        {1, 0, LK_BF16, LK_F16, LK_F32, LK_F32, 129, 140, 385, 2, 1, 1, 1, 0, 1},
        {0, 1, LK_F16, LK_BF16, LK_F16, LK_BF16, 200, 131, 129, 3, 0, 1, 0, 1, 1},
        {1, 1, LK_F32, LK_F32, LK_BF16, LK_F16, 67, 300, 1000, 1, 3, 1, 1, 0, 1},
        {0, 0, LK_F32, LK_F32, LK_F32, LK_F32, 512, 384, 1024, 1, 0, 1, 0, 0, 0},
        /* f32 x f32 with 16-byte aligned rows: sgemm.cu's pipelined kernel
         * (A transposed or not, B through cp.async or transposed), with
         * edge tiles, a K tail inside a group of four, partial B groups
         * (N = 258), every epilogue, batches, edge values */
        {0, 0, LK_F32, LK_F32, LK_F32, LK_F32, 300, 258, 1002, 2, 2, 1, 1, 0, 1},
        {0, 1, LK_F32, LK_F32, LK_F32, LK_F32, 257, 300, 1000, 1, 0, 0, 0, 0, 0},
        {1, 0, LK_F32, LK_F32, LK_BF16, LK_F32, 200, 132, 129, 1, 0, 1, 0, 0, 1},
        {1, 1, LK_F32, LK_F32, LK_F32, LK_F16, 136, 140, 300, 3, 0, 1, 1, 1, 1},
        {0, 0, LK_F32, LK_F32, LK_F32, LK_F32, 150, 132, 4, 1, 0, 0, 0, 0, 1},
        {0, 1, LK_F32, LK_F32, LK_F16, LK_F32, 384, 256, 640, 2, 0, 0, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (small && cases[i].m * cases[i].n * cases[i].k > ((int64_t)1 << 26))
            skip(1, "a large GEMM (LOCKSTEP_CUDA_TEST_SMALL is set)");
        else
            gemm_check(gq, &cases[i], "cuda");
    }

    /* products that underflow to -0: a block sum of -0 must be stored */
    gemm_case z = {0, 1, LK_F32, LK_F32, LK_F32, LK_F32, 20, 300, 300, 1, 0, 0, 0, 0, 0};
    buf A = mk((size_t)(z.m * z.k) * 4), B = mk((size_t)(z.n * z.k) * 4);
    buf C = mk((size_t)(z.m * z.n) * 4);
    for (int64_t i = 0; i < z.m * z.k; i++)
        ((float *)A.h)[i] = (tap_rand(&rng) & 1) ? -0x1p-100f : 0x1p-100f;
    for (int64_t i = 0; i < z.n * z.k; i++)
        ((float *)B.h)[i] = (i % 7) ? 0x1p-100f : -0.0f;
    up(&A), up(&B), up(&C);
    lk_status st[2];
    for (int dev = 0; dev < 2; dev++) {
        lk_tensor a = tn(&A, dev, LK_F32, z.m, z.k, z.k), b = tn(&B, dev, LK_F32, z.n, z.k, z.k);
        lk_tensor c = tn(&C, dev, LK_F32, z.m, z.n, z.n);
        st[dev] = lk_gemm(dev ? gq : rq, LK_NO_TRANS, LK_TRANS, &a, &b, NULL, &c, 1, 0);
    }
    ok(run_both(st[0], st[1], "-0") && same(&C, "-0"), "gemm: block sums of -0 (tiled)");
    for (int dev = 0; dev < 2; dev++) {
        lk_tensor a = tn(&A, dev, LK_F32, 1, z.k, z.k), b = tn(&B, dev, LK_F32, z.n, z.k, z.k);
        lk_tensor c = tn(&C, dev, LK_F32, 1, z.n, z.n);
        st[dev] = lk_gemm(dev ? gq : rq, LK_NO_TRANS, LK_TRANS, &a, &b, NULL, &c, 1, 0);
    }
    ok(run_both(st[0], st[1], "-0") && same(&C, "-0 gemv"), "gemm: block sums of -0 (GEMV)");
    rel(&A), rel(&B), rel(&C);
}

/* ------------------------------------------------------ row reductions */

static void reduce_check(lk_queue *q, lk_reduce_op op, lk_dtype dx, lk_dtype dy, int64_t rows,
                         int64_t n, int64_t pad, int edges, const char *path)
{
    buf X = mk((size_t)(rows * (n + pad)) * esize(dx));
    lk_dtype yt = op == LK_REDUCE_ARGMAX ? LK_I64 : dy;
    buf Y = mk((size_t)(rows * 2) * esize(yt));
    fill(&X, dx, edges);
    up(&X), up(&Y);
    lk_status st[2];
    for (int dev = 0; dev < 2; dev++) {
        lk_tensor x = tn(&X, dev, dx, rows, n, n + pad), y = tn(&Y, dev, yt, rows, 1, 2);
        st[dev] = lk_reduce(dev ? q : rq, op, &x, &y);
    }
    /* same() downloads on gq; q (small_ws) is another non-blocking stream,
     * so its work must be finished first or the download races the kernel */
    if (st[1] == LK_OK && q != gq)
        st[1] = lk_queue_sync(q);
    ok(run_both(st[0], st[1], path) && same(&Y, path), "reduce op %d %s -> %s, %lld x %lld (%s)",
       (int)op, lk_dtype_name(dx), lk_dtype_name(yt), (long long)rows, (long long)n, path);
    rel(&X), rel(&Y);
}

static void test_reduce(lk_queue *small_ws)
{
    static const lk_reduce_op ops[] = {LK_REDUCE_SUM, LK_REDUCE_MEAN, LK_REDUCE_MAX,
                                       LK_REDUCE_MIN, LK_REDUCE_VAR, LK_REDUCE_VAR_UNBIASED,
                                       LK_REDUCE_ARGMAX};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        /* fused: short rows, a warp each; medium rows, a block each */
        reduce_check(gq, ops[i], LK_F32, LK_F32, 37, 1000, 3, 1, "fused");
        reduce_check(gq, ops[i], LK_BF16, LK_F16, 5, 20000, 0, 1, "fused");
        /* one long row: split on the default workspace, fused on a tiny one */
        reduce_check(gq, ops[i], LK_F32, LK_F32, 1, (3 << 20) + 17, 0, 0, "split");
        reduce_check(small_ws, ops[i], LK_F32, LK_F32, 1, (3 << 20) + 17, 0, 0,
                     "fused, small workspace");
        reduce_check(gq, ops[i], LK_F16, LK_BF16, 3, 70001, 1, 1, "split, unaligned");
    }
    /* more than 4096 chunks: the superchunk levels */
    if (small) {
        skip(3, "rows of 2^24 elements (LOCKSTEP_CUDA_TEST_SMALL is set)");
        return;
    }
    reduce_check(gq, LK_REDUCE_SUM, LK_F32, LK_F32, 1, (1 << 24) + 4097 * 3, 0, 0, "split");
    reduce_check(small_ws, LK_REDUCE_SUM, LK_F32, LK_F32, 1, (1 << 24) + 4097 * 3, 0, 0,
                 "fused, three levels");
    reduce_check(small_ws, LK_REDUCE_VAR, LK_BF16, LK_F32, 1, (1 << 24) + 5, 0, 0,
                 "fused, three levels");
}

/* ---------------------------------------------------- norms, softmax */

static void rows_check(int which, lk_dtype dx, lk_dtype dy, lk_dtype dw, int64_t rows,
                       int64_t n, int64_t pad, int weight, int edges)
{
    static const char *names[] = {"rmsnorm", "layernorm", "softmax", "log_softmax"};
    buf X = mk((size_t)(rows * (n + pad)) * esize(dx));
    buf Y = mk((size_t)(rows * (n + pad)) * esize(dy));
    buf W = mk((size_t)n * esize(dw)), Bi = mk((size_t)n * esize(dw));
    fill(&X, dx, edges);
    fill(&W, dw, 0);
    fill(&Bi, dw, 0);
    up(&X), up(&Y), up(&W), up(&Bi);
    lk_status st[2];
    for (int dev = 0; dev < 2; dev++) {
        lk_queue *q = dev ? gq : rq;
        lk_tensor x = tn(&X, dev, dx, rows, n, n + pad), y = tn(&Y, dev, dy, rows, n, n + pad);
        lk_tensor w = tn(&W, dev, dw, 1, n, n), b = tn(&Bi, dev, dw, 1, n, n);
        if (which == 0)
            st[dev] = lk_rmsnorm(q, &x, weight ? &w : NULL, 1e-6f, &y);
        else if (which == 1)
            st[dev] = lk_layernorm(q, &x, weight ? &w : NULL, weight ? &b : NULL, 1e-5f, &y);
        else if (which == 2)
            st[dev] = lk_softmax(q, &x, &y);
        else
            st[dev] = lk_log_softmax(q, &x, &y);
    }
    ok(run_both(st[0], st[1], names[which]) && same(&Y, names[which]),
       "%s %s -> %s, %lld x %lld%s%s", names[which], lk_dtype_name(dx), lk_dtype_name(dy),
       (long long)rows, (long long)n, pad ? " (padded ld)" : "", weight ? " with weight" : "");
    rel(&X), rel(&Y), rel(&W), rel(&Bi);
}

static void test_rows(void)
{
    for (int which = 0; which < 4; which++) {
        rows_check(which, LK_F32, LK_F32, LK_F32, 33, 100, 1, 1, 1);  /* a warp per row */
        rows_check(which, LK_F32, LK_BF16, LK_BF16, 9, 5000, 0, 1, 0); /* cached, 2 chunks */
        rows_check(which, LK_BF16, LK_F32, LK_F16, 3, 20000, 3, 1, 1); /* not cached */
        rows_check(which, LK_F16, LK_F16, LK_F32, 64, 4096, 0, 0, 0);  /* one chunk */
        rows_check(which, LK_F32, LK_F32, LK_F32, 5, 1, 0, 1, 0);      /* n = 1 */
        /* rows in registers: 1024 (16 terms a lane), 8 full chunks, 8
         * chunks with a short last one; one past that goes to the rows of
         * rows.cuh */
        rows_check(which, LK_F32, LK_F32, LK_BF16, 7, 1024, 0, 1, 1);
        rows_check(which, LK_F32, LK_F32, LK_F32, 3, 32768, 0, 1, 1);
        rows_check(which, LK_BF16, LK_BF16, LK_F32, 2, 32768 - 77, 5, 1, 1);
        rows_check(which, LK_F32, LK_F16, LK_F32, 2, 32769, 0, 1, 0);
        rows_check(which, LK_F32, LK_F32, LK_F32, 300, 2560, 0, 1, 1);
        /* more than 256 rows of one chunk past 1024 (LayerNorm: four
         * threads a lane, the last ones holding nothing at 1100) */
        rows_check(which, LK_BF16, LK_F32, LK_F32, 260, 1100, 3, 0, 1);
        rows_check(which, LK_F32, LK_F32, LK_F16, 257, 4096, 0, 1, 1);
        /* one chunk, two threads a lane: the second ones hold nothing */
        rows_check(which, LK_F32, LK_F32, LK_F32, 6, 1100, 0, 1, 1);
        /* decode: one row of 2560, the weight loaded with the row */
        rows_check(which, LK_BF16, LK_F32, LK_BF16, 1, 2560, 0, 1, 1);
        /* 2 and 3 chunks (softmax: two threads a lane), a short last one */
        rows_check(which, LK_F32, LK_F32, LK_F32, 40, 8192, 0, 1, 1);
        rows_check(which, LK_F16, LK_F32, LK_F32, 3, 12000, 2, 1, 1);
    }
}

/* ------------------------------------------------ element-wise, quant */

static void test_elementwise(void)
{
    static const lk_unary_op uops[] = {LK_UNARY_COPY, LK_UNARY_RELU, LK_UNARY_RELU2,
                                       LK_UNARY_SIGMOID, LK_UNARY_SILU, LK_UNARY_GELU_TANH,
                                       LK_UNARY_GELU_ERF, LK_UNARY_EXP, LK_UNARY_LOG,
                                       LK_UNARY_TANH, LK_UNARY_ERF};
    for (size_t i = 0; i < sizeof uops / sizeof uops[0]; i++) {
        int64_t rows = 37, cols = 101, pad = i & 1 ? 3 : 0;
        lk_dtype dx = i % 3 == 0 ? LK_F32 : i % 3 == 1 ? LK_BF16 : LK_F16;
        lk_dtype dy = i % 2 ? LK_F32 : LK_F16;
        buf X = mk((size_t)(rows * (cols + pad)) * esize(dx));
        buf Y = mk((size_t)(rows * (cols + pad)) * esize(dy));
        fill(&X, dx, 1);
        up(&X), up(&Y);
        lk_status st[2];
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor x = tn(&X, dev, dx, rows, cols, cols + pad);
            lk_tensor y = tn(&Y, dev, dy, rows, cols, cols + pad);
            st[dev] = lk_unary(dev ? gq : rq, uops[i], &x, &y);
        }
        ok(run_both(st[0], st[1], "unary") && same(&Y, "unary"), "unary op %d %s -> %s",
           (int)uops[i], lk_dtype_name(dx), lk_dtype_name(dy));
        /* in place, every element of a contiguous matrix */
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor x = tn(&X, dev, dx, rows, cols + pad, cols + pad);
            st[dev] = lk_unary(dev ? gq : rq, uops[i], &x, &x);
        }
        ok(run_both(st[0], st[1], "unary in place") && same(&X, "unary in place"),
           "unary op %d in place %s", (int)uops[i], lk_dtype_name(dx));
        rel(&X), rel(&Y);
    }

    for (int i = 0; i < 6; i++) {
        int64_t rows = 19, cols = 67 + i;
        int bcast = i & 1;
        lk_dtype da = i < 2 ? LK_F32 : i < 4 ? LK_BF16 : LK_F16, db = i & 2 ? LK_F32 : LK_F16;
        buf A = mk((size_t)(rows * cols) * esize(da)), B = mk((size_t)(rows * cols) * esize(db));
        buf Y = mk((size_t)(rows * cols) * 4);
        fill(&A, da, 1), fill(&B, db, 1);
        up(&A), up(&B), up(&Y);
        lk_binary_op op = i % 3 ? LK_BINARY_MUL : LK_BINARY_ADD;
        lk_status st[2];
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor a = tn(&A, dev, da, rows, cols, cols);
            lk_tensor b = tn(&B, dev, db, bcast ? 1 : rows, cols, cols);
            lk_tensor y = tn(&Y, dev, LK_F32, rows, cols, cols);
            st[dev] = lk_binary(dev ? gq : rq, op, &a, &b, &y);
        }
        ok(run_both(st[0], st[1], "binary") && same(&Y, "binary"), "binary op %d %s.%s%s",
           (int)op, lk_dtype_name(da), lk_dtype_name(db), bcast ? " broadcast" : "");
        rel(&A), rel(&B), rel(&Y);
    }

    /* quantize_act with NaN / Inf / zero rows among random ones */
    for (int i = 0; i < 2; i++) {
        int64_t rows = 9, cols = i ? 5000 : 300;
        lk_dtype dx = i ? LK_BF16 : LK_F32;
        buf X = mk((size_t)(rows * cols) * esize(dx)), Q = mk((size_t)(rows * cols));
        buf S = mk((size_t)rows * 4);
        fill(&X, dx, 0);
        if (dx == LK_F32) {
            ((float *)X.h)[5] = NAN;
            ((float *)X.h)[cols + 7] = INFINITY;
            memset((float *)X.h + 2 * cols, 0, (size_t)cols * 4);
        }
        up(&X), up(&Q), up(&S);
        lk_status st[2];
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor x = tn(&X, dev, dx, rows, cols, cols), q = tn(&Q, dev, LK_I8, rows, cols, cols);
            lk_tensor s = tn(&S, dev, LK_F32, rows, 1, 1);
            st[dev] = lk_quantize_act(dev ? gq : rq, &x, &q, &s);
        }
        ok(run_both(st[0], st[1], "quantize_act") && same(&Q, "q") && same(&S, "scale"),
           "quantize_act %s %lld x %lld", lk_dtype_name(dx), (long long)rows, (long long)cols);
        rel(&X), rel(&Q), rel(&S);
    }

    /* quantize_ternary, and pack/unpack */
    {
        int64_t n = 300, k = 1001, ldq = 1004;
        buf W = mk((size_t)(n * k) * 4), Q = mk((size_t)(n * ldq / 4)), S = mk(4);
        fill(&W, LK_F32, 0);
        up(&W), up(&Q), up(&S);
        lk_status st[2];
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor w = tn(&W, dev, LK_F32, n, k, k), q = tn(&Q, dev, LK_T2, n, k, ldq);
            lk_tensor s = tn(&S, dev, LK_F32, 1, 1, 1);
            st[dev] = lk_quantize_ternary(dev ? gq : rq, &w, &q, &s);
        }
        ok(run_both(st[0], st[1], "quantize_ternary") && same(&Q, "wq") && same(&S, "scale"),
           "quantize_ternary f32 %lld x %lld", (long long)n, (long long)k);

        buf U = mk((size_t)(n * k));
        up(&U);
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor q = tn(&Q, dev, LK_T2, n, k, ldq), u = tn(&U, dev, LK_I8, n, k, k);
            st[dev] = lk_ternary_unpack(dev ? gq : rq, &q, &u);
        }
        ok(run_both(st[0], st[1], "unpack") && same(&U, "unpack"), "ternary_unpack");
        for (int dev = 0; dev < 2; dev++) {
            lk_tensor q = tn(&Q, dev, LK_T2, n, k, ldq), u = tn(&U, dev, LK_I8, n, k, k);
            st[dev] = lk_ternary_pack(dev ? gq : rq, &u, &q);
        }
        ok(run_both(st[0], st[1], "pack") && same(&Q, "pack"), "ternary_pack");

        /* a 2 anywhere: refused, nothing written */
        ((int8_t *)U.h)[n * k - 3] = 2;
        up(&U);
        down(&Q);
        memcpy(Q.h, Q.back, Q.bytes);
        lk_tensor q = tn(&Q, 1, LK_T2, n, k, ldq), u = tn(&U, 1, LK_I8, n, k, k);
        lk_status s2 = lk_ternary_pack(gq, &u, &q);
        ok(s2 == LK_ERR_INVALID_VALUE && strstr(lk_last_error(), "is not -1, 0 or 1") &&
               same(&Q, "pack refused"),
           "ternary_pack: a bad value is refused with a message, nothing written (%s: %s)",
           lk_status_string(s2), lk_last_error());
        rel(&W), rel(&Q), rel(&S), rel(&U);
    }
}

/* --------------------------------------------------------- integer GEMM */

static void qgemm_check(int ternary, int64_t m, int64_t n, int64_t k, int64_t xpad, int64_t wpad,
                        int scaled, int per_channel, lk_dtype dy, const char *what)
{
    int64_t ldx = k + xpad, ldw = ternary ? (k + 3) / 4 * 4 + 4 * wpad : k + wpad;
    buf X = mk((size_t)(m * ldx)), XS = mk((size_t)m * 4), WS = mk((size_t)n * 4);
    buf W = mk(ternary ? (size_t)(n * ldw / 4) : (size_t)(n * ldw));
    lk_dtype yt = scaled ? dy : LK_I32;
    buf Y = mk((size_t)(m * n) * esize(yt));
    fill(&X, LK_I8, 0);
    fill(&W, ternary ? LK_T2 : LK_I8, 0);
    for (int64_t i = 0; i < m; i++)
        ((float *)XS.h)[i] = 1.0f + (float)(tap_rand(&rng) % 1000);
    for (int64_t i = 0; i < n; i++)
        ((float *)WS.h)[i] = 0.001f * (float)(1 + tap_rand(&rng) % 100);
    up(&X), up(&XS), up(&W), up(&WS), up(&Y);
    lk_status st[2];
    for (int dev = 0; dev < 2; dev++) {
        lk_queue *q = dev ? gq : rq;
        lk_tensor x = tn(&X, dev, LK_I8, m, k, ldx), xs = tn(&XS, dev, LK_F32, m, 1, 1);
        lk_tensor w = tn(&W, dev, ternary ? LK_T2 : LK_I8, n, k, ldw);
        lk_tensor ws = tn(&WS, dev, LK_F32, 1, per_channel ? n : 1, per_channel ? n : 1);
        lk_tensor y = tn(&Y, dev, yt, m, n, n);
        if (ternary)
            st[dev] = lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
        else
            st[dev] = lk_int8_gemm(q, &x, &w, scaled ? &xs : NULL, scaled ? &ws : NULL, &y);
    }
    ok(run_both(st[0], st[1], what) && same(&Y, what), "%s %lldx%lldx%lld%s -> %s (%s)",
       ternary ? "ternary_gemm" : "int8_gemm", (long long)m, (long long)n, (long long)k,
       per_channel ? " per-channel scale" : "", lk_dtype_name(yt), what);
    rel(&X), rel(&XS), rel(&W), rel(&WS), rel(&Y);
}

static void test_qgemm(void)
{
    /* ternary GEMV: K tails at every granularity, junk padding codes */
    qgemm_check(1, 1, 300, 2560 + 13, 0, 0, 1, 0, LK_F32, "gemv");
    qgemm_check(1, 2, 129, 1001, 1, 1, 1, 1, LK_BF16, "gemv, unaligned");
    qgemm_check(1, 3, 77, 64, 0, 0, 1, 1, LK_F16, "gemv");
    qgemm_check(1, 5, 300, 777, 0, 3, 1, 0, LK_F32, "gemv");
    qgemm_check(1, 8, 257, 4099, 0, 0, 1, 1, LK_F32, "gemv");
    qgemm_check(1, 8, 33, 40000, 0, 0, 1, 0, LK_F32, "x too large: tiled");
    qgemm_check(1, 20, 70, 333, 0, 0, 1, 1, LK_F32, "tiled");
    qgemm_check(1, 130, 65, 1000, 3, 1, 1, 0, LK_BF16, "tiled, unaligned");
    /* int8 */
    qgemm_check(0, 5, 70, 1000, 0, 0, 0, 0, LK_F32, "int32 out");
    qgemm_check(0, 130, 65, 77, 1, 3, 1, 1, LK_F32, "unaligned");
    qgemm_check(0, 64, 64, 4096, 0, 0, 1, 0, LK_F16, "aligned");
}

/* ------------------------------------------- streams, graphs, errors */

#ifdef LK_HAVE_CUDA
static void test_native_stream(void)
{
    cudaStream_t s;
    if (cudaStreamCreate(&s) != cudaSuccess) {
        skip(1, "cudaStreamCreate failed");
        return;
    }
    lk_queue_opts o = {0, (void *)s};
    lk_queue *q;
    lk_status st = lk_queue_create(gpu, &o, &q);
    if (st != LK_OK) {
        ok(0, "queue on a native stream: %s", lk_last_error());
        cudaStreamDestroy(s);
        return;
    }
    int64_t rows = 64, n = 3000;
    buf X = mk((size_t)(rows * n) * 4), Y = mk((size_t)(rows * n) * 4);
    fill(&X, LK_F32, 0);
    up(&X), up(&Y);
    lk_tensor xr = tn(&X, 0, LK_F32, rows, n, n), yr = tn(&Y, 0, LK_F32, rows, n, n);
    lk_tensor xg = tn(&X, 1, LK_F32, rows, n, n), yg = tn(&Y, 1, LK_F32, rows, n, n);
    lk_status s0 = lk_rmsnorm(rq, &xr, NULL, 1e-6f, &yr);
    lk_status s1 = lk_rmsnorm(q, &xg, NULL, 1e-6f, &yg);
    /* the caller's stream, not lk_queue_sync, makes the result visible */
    int good = s0 == LK_OK && s1 == LK_OK && cudaStreamSynchronize(s) == cudaSuccess &&
               cudaMemcpy(Y.back, Y.d, Y.bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
               memcmp(Y.h, Y.back, Y.bytes) == 0;
    ok(good, "a queue adopts the caller's cudaStream_t and runs there");
    lk_queue_destroy(q);
    cudaStreamDestroy(s);
    rel(&X), rel(&Y);
}

static void test_graph(void)
{
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        skip(3, "cudaStreamCreate failed");
        return;
    }
    lk_queue_opts o = {0, (void *)s};
    lk_queue *q;
    if (lk_queue_create(gpu, &o, &q) != LK_OK) {
        ok(0, "queue on a native stream: %s", lk_last_error());
        skip(2, "no queue");
        cudaStreamDestroy(s);
        return;
    }
    /* a decoder step in miniature: rmsnorm -> gemv -> silu -> mul ->
     * quantize -> ternary gemv -> softmax -> sum of a long row (split) */
    const int64_t k = 2560, n = 1000, big = (1 << 22) + 3;
    buf X = mk((size_t)k * 4), Xn = mk((size_t)k * 4), W = mk((size_t)(n * k) * 2);
    buf H = mk((size_t)n * 4), G = mk((size_t)n * 4), Q = mk((size_t)n), QS = mk(4);
    buf T = mk((size_t)(n * n / 4)), TS = mk(4), O = mk((size_t)n * 4), P = mk((size_t)n * 4);
    buf L = mk((size_t)big * 4), R = mk(4);
    fill(&X, LK_F32, 0), fill(&W, LK_BF16, 0), fill(&T, LK_T2, 0), fill(&L, LK_F32, 0);
    ((float *)TS.h)[0] = 0.25f;
    buf *all[] = {&X, &Xn, &W, &H, &G, &Q, &QS, &T, &TS, &O, &P, &L, &R};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        up(all[i]);

    lk_status st[2] = {LK_OK, LK_OK};
    for (int dev = 0; dev < 2; dev++) {
        lk_queue *qq = dev ? q : rq;
        lk_tensor x = tn(&X, dev, LK_F32, 1, k, k), xn = tn(&Xn, dev, LK_F32, 1, k, k);
        lk_tensor w = tn(&W, dev, LK_BF16, n, k, k), h = tn(&H, dev, LK_F32, 1, n, n);
        lk_tensor g = tn(&G, dev, LK_F32, 1, n, n), qv = tn(&Q, dev, LK_I8, 1, n, n);
        lk_tensor qs = tn(&QS, dev, LK_F32, 1, 1, 1), t = tn(&T, dev, LK_T2, n, n, n);
        lk_tensor ts = tn(&TS, dev, LK_F32, 1, 1, 1), ov = tn(&O, dev, LK_F32, 1, n, n);
        lk_tensor p = tn(&P, dev, LK_F32, 1, n, n), l = tn(&L, dev, LK_F32, 1, big, big);
        lk_tensor r = tn(&R, dev, LK_F32, 1, 1, 1);
        if (dev && cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) != cudaSuccess) {
            st[1] = LK_ERR_DRIVER;
            break;
        }
        lk_status e[9];
        e[0] = lk_rmsnorm(qq, &x, NULL, 1e-6f, &xn);
        e[1] = lk_gemm(qq, LK_NO_TRANS, LK_TRANS, &xn, &w, NULL, &h, 1, 0);
        e[2] = lk_unary(qq, LK_UNARY_SILU, &h, &g);
        e[3] = lk_binary(qq, LK_BINARY_MUL, &g, &h, &g);
        e[4] = lk_quantize_act(qq, &g, &qv, &qs);
        e[5] = lk_ternary_gemm(qq, &qv, &qs, &t, &ts, &ov);
        e[6] = lk_softmax(qq, &ov, &p);
        e[7] = lk_reduce(qq, LK_REDUCE_SUM, &l, &r);
        lk_tensor t1 = tn(&T, dev, LK_T2, 1, n, n);
        e[8] = dev ? lk_ternary_pack(qq, &qv, &t1) : LK_ERR_UNSUPPORTED;
        for (int i = 0; i < 8; i++)
            if (e[i] != LK_OK) {
                diag("op %d: %s: %s", i, lk_status_string(e[i]), lk_last_error());
                st[dev] = e[i];
            }
        if (dev) {
            ok(e[8] == LK_ERR_UNSUPPORTED,
               "lk_ternary_pack refuses to run under graph capture (%s: %s)",
               lk_status_string(e[8]), lk_last_error());
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            int good = cudaStreamEndCapture(s, &graph) == cudaSuccess &&
                       cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
            if (good) {
                /* replay twice from fresh outputs */
                buf *outs[] = {&Xn, &H, &G, &Q, &QS, &O, &P, &R};
                for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
                    cudaMemsetAsync(outs[i]->d, 0, outs[i]->bytes, s);
                good = cudaGraphLaunch(exec, s) == cudaSuccess &&
                       cudaGraphLaunch(exec, s) == cudaSuccess &&
                       cudaStreamSynchronize(s) == cudaSuccess;
                cudaGraphExecDestroy(exec);
                cudaGraphDestroy(graph);
            }
            if (!good)
                st[1] = LK_ERR_DRIVER;
        }
    }
    int good = run_both(st[0], st[1], "graph");
    ok(good, "eight ops captured into a CUDA graph");
    buf *outs[] = {&Xn, &H, &G, &Q, &QS, &O, &P, &R};
    int equal = good;
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        equal = same(outs[i], "graph output") && equal;
    ok(equal, "the graph replayed gives the reference's bits");
    lk_queue_destroy(q);
    cudaStreamDestroy(s);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rel(all[i]);
}

/* Memory another allocator made on the GPU (here cudaMalloc itself, as
 * PyTorch's allocator does) is the device's too: an op reads and writes it
 * and gives the reference's bits; host memory is still refused. */
static void test_foreign_memory(void)
{
    int64_t rows = 7, n = 1000;
    size_t bytes = (size_t)(rows * n) * 4;
    buf X = mk(bytes), Y = mk(bytes);
    fill(&X, LK_F32, 0);
    up(&X);
    void *fx = NULL, *fy = NULL;
    if (cudaMalloc(&fx, bytes) != cudaSuccess || cudaMalloc(&fy, bytes) != cudaSuccess) {
        skip(3, "cudaMalloc failed");
        cudaFree(fx);
        rel(&X), rel(&Y);
        return;
    }
    lk_tensor xr = tn(&X, 0, LK_F32, rows, n, n), yr = tn(&Y, 0, LK_F32, rows, n, n);
    /* a view that starts one row in, as a slice of a framework's tensor */
    lk_tensor xg = lk_mat(fx, LK_F32, rows, n), yg = lk_mat(fy, LK_F32, rows, n);
    lk_tensor xv = lk_mat((float *)fx + n, LK_F32, rows - 1, n);
    lk_tensor yv = lk_mat((float *)fy + n, LK_F32, rows - 1, n);
    lk_status s0 = lk_rmsnorm(rq, &xr, NULL, 1e-6f, &yr);
    lk_status s1 = cudaMemcpy(fx, X.h, bytes, cudaMemcpyHostToDevice) == cudaSuccess
                       ? lk_rmsnorm(gq, &xg, NULL, 1e-6f, &yg)
                       : LK_ERR_INTERNAL;
    lk_status s2 = s1 == LK_OK ? lk_queue_sync(gq) : s1;
    int good = s0 == LK_OK && s2 == LK_OK &&
               cudaMemcpy(Y.back, fy, bytes, cudaMemcpyDeviceToHost) == cudaSuccess &&
               memcmp(Y.h, Y.back, bytes) == 0;
    ok(good, "an op on cudaMalloc'd memory the library did not allocate: the reference's bits (%s)",
       s2 == LK_OK ? "ok" : lk_last_error());
    lk_status s3 = lk_rmsnorm(gq, &xv, NULL, 1e-6f, &yv);
    ok(s3 == LK_OK && lk_queue_sync(gq) == LK_OK, "a view inside foreign memory is accepted (%s)",
       s3 == LK_OK ? "ok" : lk_last_error());
    /* host memory is not the GPU's, whoever allocated it */
    lk_tensor xh = lk_mat(X.h, LK_F32, rows, n);
    lk_status s4 = lk_rmsnorm(gq, &xh, NULL, 1e-6f, &yg);
    ok(s4 == LK_ERR_WRONG_DEVICE, "host memory on cuda:0: LK_ERR_WRONG_DEVICE (%s)",
       lk_last_error());
    cudaFree(fx), cudaFree(fy);
    rel(&X), rel(&Y);
}
#endif

static void test_errors(void)
{
    void *p = NULL;
    lk_status st = lk_malloc(gpu, (size_t)1 << 55, &p);
    ok(st == LK_ERR_OUT_OF_MEMORY && p == NULL && lk_last_error()[0],
       "lk_malloc of 32 PiB: LK_ERR_OUT_OF_MEMORY (%s)", lk_last_error());
    /* the failure is not sticky: the device still works */
    reduce_check(gq, LK_REDUCE_SUM, LK_F32, LK_F32, 3, 100, 0, 0, "after an allocation failure");
}

static void test_small_workspace(lk_queue *small_ws)
{
    /* quantize_ternary needs N + 1 floats of workspace */
    int64_t n = 2000, k = 8;
    buf W = mk((size_t)(n * k) * 4), Q = mk((size_t)(n * k / 4)), S = mk(4);
    fill(&W, LK_F32, 0);
    up(&W);
    lk_tensor w = tn(&W, 1, LK_F32, n, k, k), q = tn(&Q, 1, LK_T2, n, k, k);
    lk_tensor s = tn(&S, 1, LK_F32, 1, 1, 1);
    lk_status st = lk_quantize_ternary(small_ws, &w, &q, &s);
    ok(st == LK_ERR_OUT_OF_MEMORY && strstr(lk_last_error(), "LOCKSTEP_CUDA_WORKSPACE"),
       "a workspace too small for quantize_ternary says so (%s)", lk_last_error());
    rel(&W), rel(&Q), rel(&S);
}

int main(void)
{
#ifdef LK_CUDA_MODULE_DIR
    /* find the uninstalled module first */
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
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    if (lk_device_find(ctx, "ref", &ref) != LK_OK || lk_queue_create(ref, NULL, &rq) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    if (lk_device_find(ctx, "cuda:0", &gpu) != LK_OK) {
        char why[600] = "the CUDA driver module was not found";
        int broken = 0;
        for (int i = 0; i < lk_context_driver_count(ctx); i++) {
            lk_driver_info d;
            if (lk_context_driver_info(ctx, i, &d) != LK_OK ||
                (strcmp(d.name, "cuda") && !strstr(d.path, "lockstep-cuda")))
                continue;
            snprintf(why, sizeof why, "%s", d.message);
            /* a module that is there but does not load is a failure */
            broken = d.status != LK_ERR_NO_DEVICE;
        }
#ifndef LK_HAVE_CUDA
        snprintf(why, sizeof why, "the CUDA driver is not built (configure --with-cuda)");
#endif
        plan(1);
        if (broken)
            ok(0, "the CUDA driver module loads: %s", why);
        else
            skip(1, "no CUDA device: %s", why);
        lk_queue_destroy(rq);
        lk_context_destroy(ctx);
        return done_testing();
    }
    lk_device_props props;
    lk_device_props_get(gpu, &props);
    diag("cuda:0 is %s (PCI %s, NUMA node %d)", props.description, props.pci_bus_id,
         props.numa_node);
    if (lk_queue_create(gpu, NULL, &gq) != LK_OK)
        bail("no queue on cuda:0: %s", lk_last_error());
    /* a queue whose workspace holds nothing: every op on its fallback path */
    setenv("LOCKSTEP_CUDA_WORKSPACE", "4096", 1);
    lk_queue *small_ws;
    if (lk_queue_create(gpu, NULL, &small_ws) != LK_OK)
        bail("no small-workspace queue on cuda:0: %s", lk_last_error());
    unsetenv("LOCKSTEP_CUDA_WORKSPACE");

    test_gemm();
    test_reduce(small_ws);
    test_rows();
    test_elementwise();
    test_qgemm();
#ifdef LK_HAVE_CUDA
    test_native_stream();
    test_graph();
    test_foreign_memory();
#else
    skip(7, "built without the CUDA runtime");
#endif
    test_errors();
    test_small_workspace(small_ws);

    lk_queue_destroy(small_ws);
    lk_queue_destroy(gq);
    lk_queue_destroy(rq);
    lk_context_destroy(ctx);
    return done_testing();
}
