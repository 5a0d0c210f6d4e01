/* Lockstep CUDA: the tensor-core tier against cuBLAS (not installed).
 *
 *   bench/cuda/lockstep-tc-bench [--quick] [--case KIND:MxNxK[,...]]
 *
 * bf16 GEMM C(f32, M x N) = A(M x K) . B(N x K)^T with the GPU's own tier
 * (LK_GEMM_TC_SM80 or _SM90) against cublasGemmEx (bf16 inputs, f32
 * compute and output) on the same stream, same data, same run: per call,
 * the median over the repetitions of a batch of calls back to back (the
 * GPU's time once the host runs ahead; a call alone on an idle stream and
 * the host's time per call are printed beside it), TFLOP/s and the ratio
 * ours/cuBLAS speed (targets: >= 0.85 at 4096^3 and 8192^3, >= 0.8 at
 * 2048x3072x768 and the BitNet shapes).  Then ternary prefill (lk_ternary_gemm on canonical
 * LK_T2 codes, and lk_ternary_linear on prepared weights, what a model's
 * prefill runs; int8 tensor cores: wgmma on sm_90, the mma.sync kernels
 * beside it) against cuBLAS bf16 of the same shape (target: faster).  LOCKSTEP_TC_BENCH_VARIANTS
 * (comma-separated LOCKSTEP_CUDA_TC_KERNEL names, and int:NAME for
 * LOCKSTEP_CUDA_TC_INT_KERNEL) times forced kernels beside the automatic
 * choice.  Timing only: tests/test_tc.c and tests/test_tc_ternary.c check
 * the bits. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <lockstep.h>

#define CK(x)                                                                       \
    do {                                                                            \
        if ((x) != 0) {                                                             \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);          \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

static cudaStream_t stream;
static cublasHandle_t blas;
static lk_queue *q;
static lk_device *gpu; /* buffers come from lk_malloc: the core checks where each lives */
static unsigned tier;
static int reps = 20;

static void dmalloc(void **p, size_t bytes)
{
    if (lk_malloc(gpu, bytes, p) != LK_OK) {
        fprintf(stderr, "lk_malloc(%zu): %s\n", bytes, lk_last_error());
        exit(1);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int64_t m, n, k;
    void *a, *b, *c;
    int ours;            /* 0: cuBLAS bf16, 1: lk_gemm in the tier, 2: lk_ternary_gemm,
                            3: lk_ternary_linear on pw */
    void *xs, *ws;       /* ternary: the scales (a: x int8, b: w LK_T2) */
    lk_weights *pw;      /* ternary: b and ws prepared */
} call;

static void once(const call *g)
{
    if (g->ours >= 2) {
        lk_tensor x = lk_mat(g->a, LK_I8, g->m, g->k), xs = lk_mat(g->xs, LK_F32, g->m, 1);
        lk_tensor w = lk_mat(g->b, LK_T2, g->n, g->k), ws = lk_mat(g->ws, LK_F32, 1, 1);
        lk_tensor y = lk_mat(g->c, LK_F32, g->m, g->n);
        const lk_status st = g->ours == 3 ? lk_ternary_linear(q, &x, &xs, g->pw, &y, 0)
                                          : lk_ternary_gemm(q, &x, &xs, &w, &ws, &y);
        if (st != LK_OK) {
            fprintf(stderr, "%s: %s\n", g->ours == 3 ? "lk_ternary_linear" : "lk_ternary_gemm",
                    lk_last_error());
            exit(1);
        }
    } else if (g->ours) {
        lk_tensor a = lk_mat(g->a, LK_BF16, g->m, g->k), b = lk_mat(g->b, LK_BF16, g->n, g->k);
        lk_tensor c = lk_mat(g->c, LK_F32, g->m, g->n);
        if (lk_gemm(q, LK_NO_TRANS, LK_TRANS, &a, &b, NULL, &c, 1, tier) != LK_OK) {
            fprintf(stderr, "lk_gemm: %s\n", lk_last_error());
            exit(1);
        }
    } else {
        const float one = 1.0f, zero = 0.0f;
        CK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &one,
                        g->b, CUDA_R_16BF, (int)g->k, g->a, CUDA_R_16BF, (int)g->k, &zero,
                        g->c, CUDA_R_32F, (int)g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

#define BATCH 10 /* calls per batch: the GPU's time once the host runs ahead */

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* The last time_us's single-call time (one call between two events on an
 * idle stream: launch latency and the host's work included) and its host
 * time per call (enqueueing only). */
static double single_us, host_us;

/* Median per-call time of batches of BATCH calls back to back, which is
 * the GPU's time whenever the host enqueues faster than the GPU runs (as
 * lockstep-cuda-bench's graph-timed batches); single_us and host_us as
 * above. */
static double time_us(const call *g)
{
    cudaEvent_t e0, e1;
    double t[64], t1[64], th[64];
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++)
        once(g);
    for (int i = 0; i < reps; i++) {
        float ms;
        CK(cudaEventRecord(e0, stream));
        once(g);
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t1[i] = ms * 1000.0;
        CK(cudaEventRecord(e0, stream));
        const double h0 = now_us();
        for (int j = 0; j < BATCH; j++)
            once(g);
        th[i] = (now_us() - h0) / BATCH;
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t[i] = ms * 1000.0 / BATCH;
    }
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    qsort(t1, (size_t)reps, sizeof t1[0], cmp);
    qsort(th, (size_t)reps, sizeof th[0], cmp);
    single_us = t1[reps / 2];
    host_us = th[reps / 2];
    return t[reps / 2];
}

/* The forced kernels timed beside the automatic choice: a comma-separated
 * list in LOCKSTEP_TC_BENCH_VARIANTS (LOCKSTEP_CUDA_TC_KERNEL names for
 * bf16, LOCKSTEP_CUDA_TC_INT_KERNEL names for ternary), or none. */
static void variants(const call *g, const char *env, double ref)
{
    const char *list = getenv("LOCKSTEP_TC_BENCH_VARIANTS");
    char buf[512], *save = NULL;
    if (!list || !*list)
        return;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *v = strtok_r(buf, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
        const int is_int = strncmp(v, "int:", 4) == 0;
        if (is_int != (g->ours >= 2))
            continue;
        if (is_int)
            v += 4;
        setenv(env, v, 1);
        const double us = time_us(g);
        printf("  [%s: %.1f us, ratio %.2f]", v, us, ref / us);
    }
    unsetenv(env);
}

static void bench(int64_t m, int64_t n, int64_t k, double goal)
{
    call g = {m, n, k, NULL, NULL, NULL, 1, NULL, NULL, NULL};
    size_t na = (size_t)(m * k), nb = (size_t)(n * k);
    uint16_t *h = malloc((na > nb ? na : nb) * 2);
    uint64_t s = 0x9e3779b97f4a7c15u;
    dmalloc(&g.a, na * 2);
    dmalloc(&g.b, nb * 2);
    dmalloc(&g.c, (size_t)(m * n) * 4);
    for (size_t i = 0; i < (na > nb ? na : nb); i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        h[i] = lk_f32_to_bf16((float)((int)(s >> 40) % 2001 - 1000) / 1000.0f);
    }
    CK(cudaMemcpy(g.a, h, na * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.b, h, nb * 2, cudaMemcpyHostToDevice));
    g.ours = 0;
    const double theirs = time_us(&g), theirs1 = single_us, theirs_host = host_us;
    g.ours = 1;
    const double ours = time_us(&g), ours1 = single_us, ours_host = host_us;
    double fl = 2.0 * (double)m * (double)n * (double)k;
    printf("bf16 gemm %5lldx%5lldx%5lld  lockstep %9.1f us %7.1f TFLOP/s  cuBLAS %9.1f us "
           "%7.1f TFLOP/s  ratio %.2f  (target %.2f: %s)  single calls %.1f / %.1f us, "
           "host %.1f / %.1f us",
           (long long)m, (long long)n, (long long)k, ours, fl / ours * 1e-6, theirs,
           fl / theirs * 1e-6, theirs / ours, goal, theirs / ours >= goal ? "met" : "NOT met",
           ours1, theirs1, ours_host, theirs_host);
    if (tier == LK_GEMM_TC_SM90 && !getenv("LOCKSTEP_CUDA_TC_KERNEL"))
        variants(&g, "LOCKSTEP_CUDA_TC_KERNEL", theirs);
    printf("\n");
    fflush(stdout);
    lk_free(gpu, g.a);
    lk_free(gpu, g.b);
    lk_free(gpu, g.c);
    free(h);
}

/* Ternary prefill (lk_ternary_gemm: int8 x, LK_T2 w, f32 y) against cuBLAS
 * bf16 of the same M x N x K (target: faster than cuBLAS), and against
 * the dp4a kernels (LOCKSTEP_CUDA_TC_INT_KERNEL=simt). */
static void bench_ternary(int64_t m, int64_t n, int64_t k)
{
    call g = {m, n, k, NULL, NULL, NULL, 2, NULL, NULL, NULL};
    call h = {m, n, k, NULL, NULL, NULL, 0, NULL, NULL, NULL};
    size_t nx = (size_t)(m * k), nw = (size_t)(n * k / 4), nb = (size_t)(n * k);
    size_t big = nb > nx * 2 ? nb : nx * 2;
    unsigned char *host = malloc(big * 2);
    float *ones = malloc((size_t)m * 4);
    uint64_t s = 0x2545f4914f6cdd1du;
    CK(host == NULL || ones == NULL);
    CK(k % 64 != 0); /* LK_T2 rows of whole 16-byte pieces: the cp.async loader */
    for (size_t i = 0; i < big * 2; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        host[i] = (unsigned char)(s >> 56);
    }
    for (size_t i = 0; i < nw; i++) /* codes 0..2 only (values -1, 0, 1) */
        host[nx + i] = (unsigned char)((host[nx + i] % 3) | (host[nx + i] / 3 % 3) << 2 |
                                       (host[nx + i] / 9 % 3) << 4 | (host[nx + i] / 27 % 3) << 6);
    for (int64_t i = 0; i < m; i++)
        ones[i] = 1.0f;
    dmalloc(&g.a, nx);
    dmalloc(&g.b, nw);
    dmalloc(&g.c, (size_t)(m * n) * 4);
    dmalloc(&g.xs, (size_t)m * 4);
    dmalloc(&g.ws, 4);
    CK(cudaMemcpy(g.a, host, nx, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.b, host + nx, nw, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.xs, ones, (size_t)m * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g.ws, ones, 4, cudaMemcpyHostToDevice));
    /* cuBLAS: bf16 A (M x K) and B (N x K), f32 C, as the tier's bench */
    uint16_t *hb = (uint16_t *)host;
    for (size_t i = 0; i < big; i++)
        hb[i] = lk_f32_to_bf16((float)((int)(hb[i] % 2001) - 1000) / 1000.0f);
    dmalloc(&h.a, nx * 2);
    dmalloc(&h.b, nb * 2);
    h.c = g.c;
    CK(cudaMemcpy(h.a, hb, nx * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(h.b, hb, nb * 2, cudaMemcpyHostToDevice));

    const double theirs = time_us(&h);
    if (getenv("LOCKSTEP_CUDA_TC_INT_KERNEL")) {
        fprintf(stderr, "lockstep-tc-bench: unset LOCKSTEP_CUDA_TC_INT_KERNEL (the bench forces it)\n");
        exit(1);
    }
    const double plain = time_us(&g);
    setenv("LOCKSTEP_CUDA_TC_INT_KERNEL", "simt", 1);
    const double simt = time_us(&g);
    unsetenv("LOCKSTEP_CUDA_TC_INT_KERNEL");
    /* prepared weights (not timed), as a model's prefill */
    {
        lk_tensor w = lk_mat(g.b, LK_T2, n, k), ws = lk_mat(g.ws, LK_F32, 1, 1);
        if (lk_weights_prepare(q, &w, &ws, &g.pw) != LK_OK) {
            fprintf(stderr, "lk_weights_prepare: %s\n", lk_last_error());
            exit(1);
        }
    }
    g.ours = 3;
    const double ours = time_us(&g), ours1 = single_us, ours_host = host_us;
    double fl = 2.0 * (double)m * (double)n * (double)k;
    printf("ternary gemm %5lldx%5lldx%5lld  lockstep prepared %8.1f us %7.1f TOP/s  (canonical "
           "%.1f us, ratio %.2f; dp4a %.1f us)  cuBLAS bf16 %8.1f us %7.1f TFLOP/s  ratio %.2f  "
           "(target > 1: %s)  single call %.1f us, host %.1f us",
           (long long)m, (long long)n, (long long)k, ours, fl / ours * 1e-6, plain, theirs / plain,
           simt, theirs, fl / theirs * 1e-6, theirs / ours, theirs / ours > 1.0 ? "met" : "NOT met",
           ours1, ours_host);
    if (tier == LK_GEMM_TC_SM90)
        variants(&g, "LOCKSTEP_CUDA_TC_INT_KERNEL", theirs);
    printf("\n");
    lk_queue_sync(q);
    lk_weights_destroy(g.pw);
    fflush(stdout);
    lk_free(gpu, g.a);
    lk_free(gpu, g.b);
    lk_free(gpu, g.c);
    lk_free(gpu, g.xs);
    lk_free(gpu, g.ws);
    lk_free(gpu, h.a);
    lk_free(gpu, h.b);
    free(host);
    free(ones);
}

int main(int argc, char **argv)
{
    int quick = 0;
    const char *only = NULL; /* --case: run just these (a profiler then sees only their kernels) */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
        } else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--quick] [--case KIND:MxNxK[,...]] (KIND: bf16, ternary; "
                            "e.g. --case ternary:512x2560x2560)\n", argv[0]);
            return 2;
        }
    }
#ifdef LK_CUDA_MODULE_DIR
    if (!getenv("LOCKSTEP_DRIVER_PATH"))
        setenv("LOCKSTEP_DRIVER_PATH", LK_CUDA_MODULE_DIR, 1);
#endif
    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "cuda:0", &gpu) != LK_OK) {
        printf("no CUDA device: %s\n", lk_last_error());
        return 0;
    }
    lk_device_props p;
    lk_device_props_get(gpu, &p);
    const char *sm = strstr(p.description, "sm_");
    int arch = sm ? atoi(sm + 3) : 0;
    tier = arch == 90 ? LK_GEMM_TC_SM90 : (arch / 10 == 8 ? LK_GEMM_TC_SM80 : 0);
    if (!tier) {
        printf("%s: no tensor-core tier\n", p.description);
        return 0;
    }
    printf("# %s, tier %s\n", p.description, tier == LK_GEMM_TC_SM90 ? "SM90" : "SM80");
    CK(cudaStreamCreate(&stream));
    CK(cublasCreate(&blas));
    CK(cublasSetStream(blas, stream));
    lk_queue_opts o;
    memset(&o, 0, sizeof o);
    o.native_stream = stream;
    if (lk_queue_create(gpu, &o, &q) != LK_OK) {
        fprintf(stderr, "queue: %s\n", lk_last_error());
        return 1;
    }
    if (quick)
        reps = 5;
    if (only) {
        char list[512], *save = NULL;
        snprintf(list, sizeof list, "%s", only);
        for (char *c = strtok_r(list, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
            long long m, n, k;
            char kind[16];
            if (sscanf(c, "%15[a-z0-9]:%lldx%lldx%lld", kind, &m, &n, &k) != 4 || m < 1 ||
                n < 1 || k < 1 || (strcmp(kind, "bf16") != 0 && strcmp(kind, "ternary") != 0) ||
                (strcmp(kind, "ternary") == 0 && k % 64 != 0)) {
                fprintf(stderr, "lockstep-tc-bench: bad case '%s' (bf16:MxNxK or ternary:MxNxK, "
                                "ternary K a multiple of 64)\n", c);
                return 2;
            }
            if (strcmp(kind, "bf16") == 0)
                bench(m, n, k, m == n && n == k ? 0.85 : 0.8);
            else
                bench_ternary(m, n, k);
        }
        goto done;
    }
    bench(4096, 4096, 4096, 0.85);
    if (!quick)
        bench(8192, 8192, 8192, 0.85);
    bench(2048, 3072, 768, 0.8);
    /* BitNet b1.58 2B: hidden 2560, FFN 6912 */
    static const int64_t nk[4][2] = {{2560, 2560}, {6912, 2560}, {2560, 6912}, {640, 2560}};
    static const int64_t ms[4] = {128, 512, 1024, 2048};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            if (!quick || j == 1)
                bench(ms[j], nk[i][0], nk[i][1], 0.8);
    /* ternary prefill at M = 512 on the BitNet shapes (and 640 x 2560) */
    static const int64_t tnk[4][2] = {{2560, 2560}, {6912, 2560}, {2560, 6912}, {640, 2560}};
    for (int i = 0; i < 4; i++)
        bench_ternary(512, tnk[i][0], tnk[i][1]);
    if (!quick)
        for (int i = 0; i < 4; i++)
            bench_ternary(2048, tnk[i][0], tnk[i][1]);
done:
    lk_queue_destroy(q);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
    lk_context_destroy(ctx);
    return 0;
}
