/* The communicator's collectives against the one-device reference
 * (docs/numerics.md section 14), run under mpirun by tests/test_comm.sh:
 * every rank builds every rank's inputs from the seed, so each checks its
 * result against what the whole row gives on one device (lk_reduce on the
 * "ref" device).  Rank 0 prints TAP; an assertion passes when it holds on
 * every rank.  Uneven shares (a rank with nothing included), ties and
 * NaNs across ranks, a bad argument on one rank (every rank fails, with
 * that rank named), and int32 overflow; and a row-parallel ternary
 * projection (K split across ranks): the global activation scale from a
 * max all-reduce of the per-rank absmax, exact int32 partial sums, the
 * one-device dequantisation after.
 *
 *   test_comm                 the checks
 *   test_comm --exit-rank R   rank R exits before a collective: the job
 *                             must end (tests/test_comm.sh times it) */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockstep.h>

static lk_comm *comm;
static lk_queue *q;
static int rank, size, ntest;

/* one assertion: holds on every rank */
static void check(int cond, const char *what)
{
    int32_t bad = !cond, any = bad;
    lk_tensor t = lk_mat(&bad, LK_I32, 1, 1), u = lk_mat(&any, LK_I32, 1, 1);
    if (lk_comm_all_reduce(comm, q, LK_COMM_MAX, &t, &u) != LK_OK)
        any = 1;
    ntest++;
    if (rank == 0)
        printf("%s %d - %s\n", any ? "not ok" : "ok", ntest, what);
    if (bad)
        fprintf(stderr, "# rank %d: %s failed (%s)\n", rank, what, lk_last_error());
    fflush(stdout);
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float f_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* the width of rank r's share of n: uneven, rank 0's empty when size > 1 */
static int64_t share(int64_t n, int r, int64_t *off)
{
    int64_t w = 0, o = 0;
    for (int i = 0; i <= r; i++) {
        o += w;
        w = size == 1 ? n : i == 0 ? 0 : n * i / (size * (size - 1) / 2);
        if (i == size - 1)
            w = n - o;
    }
    *off = o;
    return w;
}

int main(int argc, char **argv)
{
    const uint64_t seed = 20261128;
    lk_status st = lk_comm_create_mpi(NULL, &comm);
    if (st == LK_ERR_UNSUPPORTED) {
        printf("1..0 # SKIP %s\n", lk_last_error());
        return 0;
    }
    if (st != LK_OK) {
        printf("Bail out! lk_comm_create_mpi: %s\n", lk_last_error());
        return 1;
    }
    rank = lk_comm_rank(comm), size = lk_comm_size(comm);
    lk_context *ctx;
    lk_device *dev;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "ref", &dev) != LK_OK ||
        lk_queue_create(dev, NULL, &q) != LK_OK || lk_comm_attach(comm, dev) != LK_OK) {
        printf("Bail out! rank %d: %s\n", rank, lk_last_error());
        lk_comm_abort(comm, 1);
    }
    if (argc == 3 && !strcmp(argv[1], "--exit-rank")) {
        int r = atoi(argv[2]);
        float x[4] = {0}, y[64];
        if (rank == r) {
            fprintf(stderr, "test_comm: rank %d exits before the all-gather\n", rank);
            _exit(3);
        }
        lk_tensor xt = lk_mat(x, LK_F32, 1, 4), yt = lk_mat(y, LK_F32, 1, 4 * size);
        st = lk_comm_all_gather(comm, q, &xt, &yt);
        fprintf(stderr, "test_comm: rank %d: the all-gather returned %s\n", rank,
                lk_status_string(st));
        lk_comm_destroy(comm);
        return 1;
    }
    if (rank == 0)
        printf("1..14\n# %d ranks, seed %llu, transport %s\n", size, (unsigned long long)seed,
               lk_comm_transport(comm));

    /* all-gather: R rows of widths share(n, r), every dtype's bits */
    const int64_t R = 3, n = 37;
    {
        uint64_t s = seed;
        int32_t *full = malloc((size_t)(R * n) * 4), *y = malloc((size_t)(R * n) * 4);
        for (int64_t i = 0; i < R * n; i++)
            full[i] = (int32_t)rnd(&s);
        int64_t off, w = share(n, rank, &off);
        int32_t *x = malloc((size_t)(R * (w + 1)) * 4);
        for (int64_t i = 0; i < R; i++)
            memcpy(x + i * w, full + i * n + off, (size_t)w * 4);
        memset(y, 0, (size_t)(R * n) * 4);
        lk_tensor xt = lk_mat(x, LK_I32, R, w), yt = lk_mat(y, LK_I32, R, n);
        st = lk_comm_all_gather(comm, q, &xt, &yt);
        check(st == LK_OK && !memcmp(y, full, (size_t)(R * n) * 4),
              "all-gather of uneven shares (rank 0 empty) is the whole matrix");
        /* in place: x is this rank's block of y */
        memset(y, 0, (size_t)(R * n) * 4);
        for (int64_t i = 0; i < R; i++)
            memcpy(y + i * n + off, full + i * n + off, (size_t)w * 4);
        xt = lk_mat_ld(y + off, LK_I32, R, w, n);
        st = lk_comm_all_gather(comm, q, &xt, &yt);
        check(st == LK_OK && !memcmp(y, full, (size_t)(R * n) * 4), "all-gather in place");
        /* a wrong width of y on the last rank: every rank fails, naming it */
        memset(y, 0x5a, (size_t)(R * n) * 4);
        xt = lk_mat(x, LK_I32, R, w);
        yt = lk_mat(y, LK_I32, R, rank == size - 1 ? n - 1 : n);
        st = lk_comm_all_gather(comm, q, &xt, &yt);
        char want[32];
        snprintf(want, sizeof want, "rank %d", size - 1);
        check(st == LK_ERR_BAD_SHAPE && strstr(lk_last_error(), want) && y[0] == 0x5a5a5a5a,
              "a bad y on the last rank fails every rank's call, naming it, writing nothing");
        /* NULL x on rank size / 2 */
        xt = lk_mat(x, LK_I32, R, w);
        yt = lk_mat(y, LK_I32, R, n);
        st = lk_comm_all_gather(comm, q, rank == size / 2 ? NULL : &xt, &yt);
        check(st == LK_ERR_NULL_POINTER, "a NULL tensor on one rank fails every rank's call");
        free(x), free(full), free(y);
    }

    /* broadcast from the last rank, send / recv around a ring */
    {
        uint64_t s = seed + 1;
        float v[8], want[8];
        for (int i = 0; i < 8; i++)
            want[i] = f_of((uint32_t)rnd(&s));
        for (int i = 0; i < 8; i++)
            v[i] = rank == size - 1 ? want[i] : 0;
        lk_tensor t = lk_mat(v, LK_F32, 2, 4);
        st = lk_comm_broadcast(comm, q, &t, size - 1);
        check(st == LK_OK && !memcmp(v, want, sizeof v), "broadcast gives the root's bits");
        int32_t out[5], in[5] = {0};
        for (int i = 0; i < 5; i++)
            out[i] = rank * 100 + i;
        lk_tensor to = lk_mat(out, LK_I32, 1, 5), ti = lk_mat(in, LK_I32, 1, 5);
        int ok = 1;
        if (size > 1) {
            const int nx = (rank + 1) % size, pv = (rank + size - 1) % size;
            /* even ranks send first: no cycle of blocking sends */
            for (int ph = 0; ph < 2; ph++)
                if ((rank % 2 == 0) == (ph == 0))
                    ok &= lk_comm_send(comm, q, &to, nx) == LK_OK;
                else
                    ok &= lk_comm_recv(comm, q, &ti, pv) == LK_OK;
            for (int i = 0; i < 5; i++)
                ok &= in[i] == pv * 100 + i;
        }
        check(ok, "send / recv around the ring");
    }

    /* all-reduce: int32 sums, float maxima with NaN and signed zeros */
    {
        int32_t x[6], y[6];
        for (int i = 0; i < 6; i++)
            x[i] = (rank + 1) * (i - 3) * 1000003;
        lk_tensor xt = lk_mat(x, LK_I32, 2, 3), yt = lk_mat(y, LK_I32, 2, 3);
        st = lk_comm_all_reduce(comm, q, LK_COMM_SUM, &xt, &yt);
        int ok = st == LK_OK;
        for (int i = 0; i < 6; i++)
            ok &= y[i] == (size * (size + 1) / 2) * (i - 3) * 1000003;
        check(ok, "int32 sum all-reduce is exact");
        for (int i = 0; i < 6; i++)
            x[i] = INT32_MAX / 2 + 1;
        st = lk_comm_all_reduce(comm, q, LK_COMM_SUM, &xt, &yt);
        check(size == 1 ? st == LK_OK : st == LK_ERR_RANGE,
              "an int32 sum that overflows is LK_ERR_RANGE on every rank");
        float f[4] = {rank == size - 1 ? 0.0f : -0.0f, (float)rank, -1.0f, -1.0f};
        if (rank == size / 2)
            f[3] = f_of(0xffc00001u); /* a NaN with payload and sign */
        float g[4];
        lk_tensor ft = lk_mat(f, LK_F32, 1, 4), gt = lk_mat(g, LK_F32, 1, 4);
        st = lk_comm_all_reduce(comm, q, LK_COMM_MAX, &ft, &gt);
        uint32_t u[4];
        memcpy(u, g, 16);
        check(st == LK_OK && u[0] == 0 && g[1] == (float)(size - 1) && g[2] == -1.0f &&
                  u[3] == 0x7fc00000u,
              "f32 max all-reduce: +0 over -0, the canonical NaN");
        st = lk_comm_all_reduce(comm, q, LK_COMM_SUM, &ft, &gt);
        check(st == LK_ERR_BAD_DTYPE, "a float sum all-reduce is refused (not exact)");
    }

    /* lk_comm_sum and lk_comm_argmax against lk_reduce on the whole row */
    {
        const int64_t rows = 3, N = 9000; /* three chunks of the lane sum */
        uint64_t s = seed + 2;
        float *full = malloc((size_t)(rows * N) * 4);
        for (int64_t i = 0; i < rows * N; i++)
            full[i] = (float)((int64_t)(rnd(&s) >> 40) - (1 << 23)) * 0x1p-20f;
        /* row 1: its maximum twice, in two ranks' shares; row 2: a NaN late */
        full[1 * N + 10] = 1e6f, full[1 * N + N - 3] = 1e6f;
        full[2 * N + N - 2] = f_of(0x7fc00000u);
        int64_t off, w = share(N, rank, &off);
        float *x = malloc((size_t)(rows * (w + 1)) * 4);
        for (int64_t i = 0; i < rows; i++)
            memcpy(x + i * w, full + i * N + off, (size_t)w * 4);
        float ys[3], ws[3];
        int64_t ya[3], wa[3];
        lk_tensor ft = lk_mat(full, LK_F32, rows, N), xt = lk_mat(x, LK_F32, rows, w);
        lk_tensor yst = lk_mat(ys, LK_F32, rows, 1), wst = lk_mat(ws, LK_F32, rows, 1);
        lk_tensor yat = lk_mat(ya, LK_I64, rows, 1), wat = lk_mat(wa, LK_I64, rows, 1);
        st = lk_reduce(q, LK_REDUCE_SUM, &ft, &wst);
        lk_status st2 = lk_comm_sum(comm, q, &xt, &yst);
        check(st == LK_OK && st2 == LK_OK && !memcmp(ys, ws, sizeof ys),
              "lk_comm_sum is lk_reduce SUM of the whole row, bit for bit");
        st = lk_reduce(q, LK_REDUCE_ARGMAX, &ft, &wat);
        st2 = lk_comm_argmax(comm, q, &xt, &yat);
        check(st == LK_OK && st2 == LK_OK && !memcmp(ya, wa, sizeof ya) && ya[1] == 10 &&
                  ya[2] == N - 2,
              "lk_comm_argmax is lk_reduce ARGMAX of the whole row (ties: first; NaN wins)");
        free(x), free(full);
    }

    /* Row-parallel ternary linear: x (M x K) and W (N x K) split along K.
     * The activation scale needs the absmax of the whole row: a max
     * all-reduce of each rank's; the int32 dot products of each rank's K
     * slice sum exactly; ((float)acc / xs) * ws is then lk_ternary_gemm's
     * value (docs/numerics.md sections 8, 9, 13). */
    {
        const int64_t M = 2, K = 1000, Nn = 5;
        uint64_t s = seed + 3;
        float *xf = malloc((size_t)(M * K) * 4), ws = 0.03125f;
        int8_t *xq = malloc((size_t)(M * K)), *wi = malloc((size_t)(Nn * K));
        uint8_t *wt = calloc((size_t)(Nn * (K / 4 + 1)), 1);
        for (int64_t i = 0; i < M * K; i++)
            xf[i] = (float)((int64_t)(rnd(&s) >> 44) - (1 << 19)) * 0x1p-16f;
        xf[K + 777] = 40.0f; /* row 1's absmax in one rank's slice */
        for (int64_t i = 0; i < Nn * K; i++)
            wi[i] = (int8_t)(rnd(&s) % 3) - 1;
        float xs[2], amax[2], gmax[2];
        lk_tensor xt = lk_mat(xf, LK_F32, M, K), xqt = lk_mat(xq, LK_I8, M, K);
        lk_tensor xst = lk_mat(xs, LK_F32, M, 1), wit = lk_mat(wi, LK_I8, Nn, K);
        lk_tensor wtt = lk_mat_ld(wt, LK_T2, Nn, K, (K + 3) / 4 * 4);
        lk_tensor wst = lk_mat(&ws, LK_F32, 1, 1);
        float *ref = malloc((size_t)(M * Nn) * 4);
        lk_tensor reft = lk_mat(ref, LK_F32, M, Nn);
        /* one device: quantise the whole rows, the whole GEMM */
        st = lk_quantize_act(q, &xt, &xqt, &xst);
        if (!st)
            st = lk_ternary_pack(q, &wit, &wtt);
        if (!st)
            st = lk_ternary_gemm(q, &xqt, &xst, &wtt, &wst, &reft);
        /* split: this rank's K slice; the global absmax, then the scale */
        int64_t k0, w = share(K, rank, &k0);
        for (int64_t i = 0; i < M; i++) {
            float m = 0.0f;
            for (int64_t k = k0; k < k0 + w; k++) {
                float a = fabsf(xf[i * K + k]);
                m = a > m ? a : m;
            }
            amax[i] = m;
        }
        lk_tensor at = lk_mat(amax, LK_F32, M, 1), gt = lk_mat(gmax, LK_F32, M, 1);
        lk_status st2 = lk_comm_all_reduce(comm, q, LK_COMM_MAX, &at, &gt);
        int ok = st == LK_OK && st2 == LK_OK;
        for (int64_t i = 0; i < M; i++) {
            float d = gmax[i] > 1e-5f ? gmax[i] : 1e-5f;
            ok &= 127.0f / d == xs[i];
        }
        check(ok, "row-parallel: a max all-reduce of the slices' absmax gives the row's scale");
        int32_t part[10], acc[10];
        lk_tensor a = lk_mat_ld(xq + k0, LK_I8, M, w, K), b = lk_mat_ld(wi + k0, LK_I8, Nn, w, K);
        lk_tensor pt = lk_mat(part, LK_I32, M, Nn), act = lk_mat(acc, LK_I32, M, Nn);
        memset(part, 0, sizeof part);
        st = w ? lk_int8_gemm(q, &a, &b, NULL, NULL, &pt) : LK_OK;
        st2 = lk_comm_all_reduce(comm, q, LK_COMM_SUM, &pt, &act);
        ok = st == LK_OK && st2 == LK_OK;
        for (int64_t i = 0; i < M && ok; i++)
            for (int64_t j = 0; j < Nn; j++) {
                float y = ((float)acc[i * Nn + j] / xs[i]) * ws;
                ok &= !memcmp(&y, &ref[i * Nn + j], 4);
            }
        check(ok, "row-parallel: int32 partials summed over ranks give lk_ternary_gemm's bits");
        free(xf), free(xq), free(wi), free(wt), free(ref);
    }
    lk_queue_destroy(q);
    lk_context_destroy(ctx);
    lk_comm_destroy(comm);
    return 0;
}
