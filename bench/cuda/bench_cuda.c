/* lockstep-cuda-bench: the CUDA driver's benchmarks against its peers on
 * the same GPU, in the same run, with the driver's targets.
 *
 *   bench/cuda/lockstep-cuda-bench [--quick] [--no-graph] [--only SUBSTRING] [--json]
 *                                     [--device cuda:N]
 *
 * Every figure is the median over 11 batches of back-to-back calls on one
 * stream (a Lockstep queue adopting it), timed with CUDA events; a batch is
 * long enough (>= 2 ms) that launch jitter does not count.  A batch is
 * captured once as a CUDA graph and the graph is launched (as a decode
 * step would be), so that the host's launch rate (2-4 us per kernel) does
 * not hide the kernels' own time; --no-graph launches each call.   Peers: cuBLAS
 * SGEMM with TF32 off (CUBLAS_DEFAULT_MATH), cuBLAS bf16 / f32 GEMV, and a
 * device-to-device copy of the bytes an op reads and writes.  A
 * bandwidth-bound case whose bytes fit in L2 would read L2, not memory,
 * when repeated on the same buffers: its calls (Lockstep's and the
 * peer's alike) rotate through copies of the weights (GEMV) or of input
 * and output (the row ops, the copy) that together hold at least three
 * times the L2 size (cudaDevAttrL2CacheSize); a row marked "(L2-hot)"
 * repeats one set on purpose.  Each GEMV is followed by its floor, its
 * weights read at the copy's rate.  --quick runs
 * fewer batches on smaller shapes (a smoke test).  Lines starting with
 * "target" say whether a goal is met.  --json prints the
 * cases on stdout as `lockstep bench --json` does (scripts/bench-report.sh
 * plots them beside the CPU devices), with the copy's rate and the FP32
 * peak as the device's floors, and the text on stderr.  --device picks
 * the GPU by Lockstep's name (default cuda:0). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#ifdef LK_BENCH_CUBLAS
#include <cublas_v2.h>
#endif

#include <lockstep.h>

static cudaStream_t stream;
static lk_device *gpu;
static lk_queue *q;
static int quick;
static int use_graphs = 1; /* --no-graph: time plain launches */
static const char *only;
static const char *device_name = "cuda:0"; /* --device */
static int batches = 11;
static double copy_gbs; /* device-to-device copy, bytes moved (read + write) per second */
static size_t l2_bytes;  /* the device's L2 (0: unknown, no rotation) */
static int failures;
static FILE *txt; /* the text: stdout, or stderr under --json */
static int json;  /* --json: the cases on stdout */
static int json_cases;

#ifdef LK_BENCH_CUBLAS
static cublasHandle_t blas;
#endif

#define CHECK_CUDA(x)                                                                        \
    do {                                                                                    \
        cudaError_t e_ = (x);                                                               \
        if (e_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,                      \
                    cudaGetErrorString(e_));                                                \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

#define CHECK_LK(x)                                                                          \
    do {                                                                                    \
        lk_status s_ = (x);                                                                 \
        if (s_ != LK_OK) {                                                                  \
            fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #x,                  \
                    lk_status_string(s_), lk_last_error());                                 \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

/* ------------------------------------------------------------- timing */

typedef void (*bench_fn)(void *arg);

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median time of one call, in microseconds. */
static double time_us_mode(bench_fn f, void *arg, int graphs)
{
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    f(arg); /* warm up */
    f(arg);
    CHECK_CUDA(cudaStreamSynchronize(stream));
    /* calibrate the batch length */
    int inner = 1;
    for (;;) {
        float ms = 0;
        CHECK_CUDA(cudaEventRecord(e0, stream));
        for (int i = 0; i < inner; i++)
            f(arg);
        CHECK_CUDA(cudaEventRecord(e1, stream));
        CHECK_CUDA(cudaEventSynchronize(e1));
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (ms >= 2.0f || inner >= 1 << 14)
            break;
        inner *= ms > 0.2f ? (int)(2.0f / ms) + 1 : 10;
    }
    /* the batch as one CUDA graph, as a decode step runs: what is timed is
     * the GPU's work and the gaps between kernels, not the host's launch
     * rate (both sides alike; --no-graph times plain launches) */
    cudaGraphExec_t exec = NULL;
    if (graphs) {
        cudaGraph_t graph = NULL;
        if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
            for (int i = 0; i < inner; i++)
                f(arg);
            if (cudaStreamEndCapture(stream, &graph) != cudaSuccess ||
                cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
                exec = NULL;
            if (graph)
                cudaGraphDestroy(graph);
        }
        (void)cudaGetLastError();
        if (exec) { /* warm up the graph itself */
            CHECK_CUDA(cudaGraphLaunch(exec, stream));
            CHECK_CUDA(cudaStreamSynchronize(stream));
        }
    }
    double t[64];
    int nb = batches < 64 ? batches : 64;
    for (int b = 0; b < nb; b++) {
        float ms = 0;
        CHECK_CUDA(cudaEventRecord(e0, stream));
        if (exec) {
            CHECK_CUDA(cudaGraphLaunch(exec, stream));
        } else {
            for (int i = 0; i < inner; i++)
                f(arg);
        }
        CHECK_CUDA(cudaEventRecord(e1, stream));
        CHECK_CUDA(cudaEventSynchronize(e1));
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        t[b] = 1000.0 * ms / inner;
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    qsort(t, (size_t)nb, sizeof t[0], cmp_double);
    return t[nb / 2];
}

static double time_us(bench_fn f, void *arg) { return time_us_mode(f, arg, use_graphs); }

static int wanted(const char *name)
{
    return !only || strstr(name, only);
}

/* One case: our time, the peer's (0: none), and the rate (`amount` per us
 * in `unit`: TFLOP/s from flops / 1e3, GB/s from bytes).  Under --json
 * also a case of `lockstep bench --json`'s form, named without spaces (the
 * report's data files split on them). */
static void row(const char *name, double ours, const char *peer, double theirs, const char *unit,
                double amount)
{
    fprintf(txt, "%-40s %10.1f us", name, ours);
    if (unit)
        fprintf(txt, " %9.1f %-7s", amount / ours / 1e3, unit);
    else
        fprintf(txt, " %17s", "");
    if (peer && theirs > 0)
        fprintf(txt, "  | %-22s %10.1f us  ratio %5.2fx\n", peer, theirs, theirs / ours);
    else
        fprintf(txt, "\n");
    if (!json)
        return;
    /* spaces as dots, without the parentheses of "(L2-hot)" */
    char id[96];
    size_t n = 0;
    for (const char *c = name; *c && n + 1 < sizeof id; c++)
        if (*c != '(' && *c != ')')
            id[n++] = *c == ' ' ? '.' : *c;
    id[n] = '\0';
    const int tf = unit && !strcmp(unit, "TFLOP/s");
    const double rate = unit ? amount / ours / 1e3 : 0.0;
    printf("%s\n  {\"name\": \"%s\", \"lockstep_ms\": %.5f, \"peer\": \"%s\", "
           "\"peer_ms\": %.5f, \"ratio\": %.3f, \"gflops\": %.2f, \"gbps\": %.2f}",
           json_cases++ ? "," : "", id, ours / 1e3, peer && theirs > 0 ? peer : "-",
           theirs > 0 ? theirs / 1e3 : 0.0, theirs > 0 ? theirs / ours : 0.0,
           tf ? rate * 1e3 : 0.0, tf ? 0.0 : rate);
}

static void target(const char *what, double value, double goal)
{
    int met = value >= goal;
    if (!met)
        failures++;
    fprintf(txt, "target  %-58s %6.2f (goal >= %.2f)  %s\n", what, value, goal,
            met ? "MET" : "MISSED");
}

/* ------------------------------------------------------------ buffers */

static void *dalloc(size_t bytes)
{
    void *p;
    CHECK_LK(lk_malloc(gpu, bytes, &p));
    return p;
}

/* Buffer sets the calls of a case rotate through (at most MAX_SETS). */
#define MAX_SETS 128

/* How many sets of `bytes` each together hold three L2s (1 where one set
 * does): enough that a set is gone from L2 when its turn comes again. */
static int sets_for(double bytes)
{
    const double want = 3.0 * (double)l2_bytes;
    if (bytes <= 0 || bytes >= want)
        return 1;
    const int n = (int)(want / bytes) + 1;
    return n < MAX_SETS ? n : MAX_SETS;
}

/* The set a call uses: each call the next one. */
static int next_set(int *next, int sets)
{
    if (sets <= 1)
        return 0;
    const int i = *next % sets;
    *next = i + 1;
    return i;
}

/* Random contents: a 16 MiB host block of values in [-1, 1) (as dtype dt)
 * uploaded as many times as needed. */
static void dfill(void *d, size_t bytes, lk_dtype dt)
{
    static unsigned char *block;
    static lk_dtype block_dt = (lk_dtype)0;
    const size_t bs = (size_t)16 << 20;
    if (!block)
        block = malloc(bs);
    if (!block) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    if (block_dt != dt) {
        uint64_t s = 0x9e3779b97f4a7c15ull;
        size_t n = dt == LK_F32 ? bs / 4 : dt == LK_I8 || dt == LK_T2 ? bs : bs / 2;
        for (size_t i = 0; i < n; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            float v = (float)((double)(s >> 40) * 0x1p-24 * 2.0 - 1.0);
            if (dt == LK_F32)
                ((float *)block)[i] = v;
            else if (dt == LK_BF16)
                ((uint16_t *)block)[i] = lk_f32_to_bf16(v);
            else if (dt == LK_F16)
                ((uint16_t *)block)[i] = lk_f32_to_f16(v);
            else if (dt == LK_I8)
                ((int8_t *)block)[i] = (int8_t)(v * 127.0f);
            else /* LK_T2: codes 0..2 only */
                block[i] = (unsigned char)((s >> 33) % 3 | ((s >> 35) % 3) << 2 |
                                           ((s >> 37) % 3) << 4 | ((s >> 39) % 3) << 6);
        }
        block_dt = dt;
    }
    for (size_t off = 0; off < bytes; off += bs) {
        size_t n = bytes - off < bs ? bytes - off : bs;
        CHECK_LK(lk_memcpy(q, (char *)d + off, block, n, LK_COPY_HOST_TO_DEVICE));
    }
    CHECK_LK(lk_queue_sync(q));
}

/* -------------------------------------------------------------- copy */

typedef struct copy_arg {
    void *dst[MAX_SETS], *src[MAX_SETS];
    size_t bytes;
    int sets, next;
} copy_arg;

static void run_copy(void *p)
{
    copy_arg *a = p;
    const int i = next_set(&a->next, a->sets);
    CHECK_CUDA(cudaMemcpyAsync(a->dst[i], a->src[i], a->bytes, cudaMemcpyDeviceToDevice, stream));
}

/* Time of a device-to-device copy of `bytes` (which moves 2 * bytes),
 * rotating through `sets` pairs of buffers. */
static double copy_us_sets(size_t bytes, int sets)
{
    copy_arg *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    a->bytes = bytes;
    a->sets = sets;
    for (int i = 0; i < sets; i++) {
        a->dst[i] = dalloc(bytes);
        a->src[i] = dalloc(bytes);
    }
    /* plain launches: a copy captured in a graph runs as a memcpy node,
     * measured much slower than cudaMemcpyAsync (775 vs 510 us for 1 GiB on
     * an H200), which would flatter every ratio against it */
    double t = time_us_mode(run_copy, a, 0);
    for (int i = 0; i < sets; i++) {
        lk_free(gpu, a->dst[i]);
        lk_free(gpu, a->src[i]);
    }
    free(a);
    return t;
}

static double copy_us(size_t bytes) { return copy_us_sets(bytes, sets_for(2.0 * (double)bytes)); }

/* -------------------------------------------------------------- GEMM */

typedef struct gemm_arg {
    int64_t m, n, k;
    lk_dtype dt;
    void *a, *b, *c;
    int trans_b; /* b is N x K */
    /* sets > 1: each call takes the next of bs[] as b (the GEMV's weights) */
    int sets, next;
    void *bs[MAX_SETS];
} gemm_arg;

static void gemm_pick(gemm_arg *g)
{
    if (g->sets > 1)
        g->b = g->bs[next_set(&g->next, g->sets)];
}

static void run_lk_gemm(void *p)
{
    gemm_arg *g = p;
    gemm_pick(g);
    lk_tensor a = lk_mat(g->a, g->dt, g->m, g->k);
    lk_tensor b = g->trans_b ? lk_mat(g->b, g->dt, g->n, g->k) : lk_mat(g->b, g->dt, g->k, g->n);
    lk_tensor c = lk_mat(g->c, g->dt == LK_F32 ? LK_F32 : g->dt, g->m, g->n);
    CHECK_LK(lk_gemm(q, LK_NO_TRANS, g->trans_b ? LK_TRANS : LK_NO_TRANS, &a, &b, NULL, &c, 1,
                     0));
}

#ifdef LK_BENCH_CUBLAS
/* Row-major C = A B is column-major C^T = B^T A^T. */
static void run_cublas_sgemm(void *p)
{
    gemm_arg *g = p;
    gemm_pick(g);
    const float one = 1.0f, zero = 0.0f;
    cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)g->n, (int)g->m, (int)g->k, &one, g->b,
                (int)g->n, g->a, (int)g->k, &zero, g->c, (int)g->n);
}

/* y = W x with W row-major N x K: column-major W is K x N, so y = W_cm^T x. */
static void run_cublas_gemv(void *p)
{
    gemm_arg *g = p;
    gemm_pick(g);
    const float one = 1.0f, zero = 0.0f;
    if (g->dt == LK_F32) {
        cublasSgemv(blas, CUBLAS_OP_T, (int)g->k, (int)g->n, &one, g->b, (int)g->k, g->a, 1,
                    &zero, g->c, 1);
    } else {
        cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)g->n, 1, (int)g->k, &one, g->b,
                     CUDA_R_16BF, (int)g->k, g->a, CUDA_R_16BF, (int)g->k, &zero, g->c,
                     CUDA_R_16BF, (int)g->n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    }
}
#endif

static void bench_gemm(int64_t m, int64_t n, int64_t k)
{
    char name[64];
    snprintf(name, sizeof name, "gemm f32 %lldx%lldx%lld", (long long)m, (long long)n,
             (long long)k);
    if (!wanted(name))
        return;
    gemm_arg g = {m, n, k, LK_F32, dalloc((size_t)(m * k) * 4), dalloc((size_t)(k * n) * 4),
                  dalloc((size_t)(m * n) * 4), 0, 1, 0, {NULL}};
    dfill(g.a, (size_t)(m * k) * 4, LK_F32);
    dfill(g.b, (size_t)(k * n) * 4, LK_F32);
    double ours = time_us(run_lk_gemm, &g), theirs = 0;
#ifdef LK_BENCH_CUBLAS
    theirs = time_us(run_cublas_sgemm, &g);
#endif
    row(name, ours, "cuBLAS SGEMM (no TF32)", theirs, "TFLOP/s", 2.0 * m * n * k / 1e3);
    if (theirs > 0 && m == 4096 && n == 4096 && k == 4096)
        target("f32 GEMM 4096^3 vs cuBLAS SGEMM", theirs / ours, 0.8);
    lk_free(gpu, g.a);
    lk_free(gpu, g.b);
    lk_free(gpu, g.c);
}

/* ------------------------------------------------- GEMV, ternary GEMV */

typedef struct t2_arg {
    int64_t n, k;
    void *x, *xs, *w, *ws, *y;
    int sets, next; /* sets > 1: each call takes the next of wset[] as w */
    void *wset[MAX_SETS];
} t2_arg;

static void run_lk_t2(void *p)
{
    t2_arg *t = p;
    if (t->sets > 1)
        t->w = t->wset[next_set(&t->next, t->sets)];
    lk_tensor x = lk_mat(t->x, LK_I8, 1, t->k), xs = lk_mat(t->xs, LK_F32, 1, 1);
    lk_tensor w = lk_mat(t->w, LK_T2, t->n, t->k), ws = lk_mat(t->ws, LK_F32, 1, 1);
    lk_tensor y = lk_mat(t->y, LK_F32, 1, t->n);
    CHECK_LK(lk_ternary_gemm(q, &x, &xs, &w, &ws, &y));
}

/* The same products through prepared weights (lk_linear,
 * lk_ternary_linear); preparing is not timed. */
typedef struct prep_arg {
    int64_t n, k;
    lk_dtype dt;
    void *x, *xs, *y;
    lk_weights *w;
    int sets, next; /* sets > 1: each call takes the next of wset[] as w */
    lk_weights *wset[MAX_SETS];
} prep_arg;

static void prep_pick(prep_arg *t)
{
    if (t->sets > 1)
        t->w = t->wset[next_set(&t->next, t->sets)];
}

static void run_lk_linear(void *p)
{
    prep_arg *t = p;
    prep_pick(t);
    lk_tensor x = lk_mat(t->x, t->dt, 1, t->k), y = lk_mat(t->y, t->dt, 1, t->n);
    CHECK_LK(lk_linear(q, &x, t->w, NULL, &y, 0));
}

static void run_lk_t2_linear(void *p)
{
    prep_arg *t = p;
    prep_pick(t);
    lk_tensor x = lk_mat(t->x, LK_I8, 1, t->k), xs = lk_mat(t->xs, LK_F32, 1, 1);
    lk_tensor y = lk_mat(t->y, LK_F32, 1, t->n);
    CHECK_LK(lk_ternary_linear(q, &x, &xs, t->w, &y, 0));
}

/* bench_read.cu: a kernel that only reads `bytes` at p, shaped and
 * launched like the prepared-weights GEMV */
int lk_bench_read(const void *p, size_t bytes, void *sink, cudaStream_t st);

typedef struct read_arg {
    void *const *p; /* sets of the bytes, one a call in turn */
    size_t bytes;
    void *sink;
    int sets, next;
} read_arg;

static void run_read(void *p)
{
    read_arg *r = p;
    CHECK_CUDA((cudaError_t)lk_bench_read(r->p[next_set(&r->next, r->sets)], r->bytes, r->sink,
                                          stream));
}

/* A GEMV's weights read by a kernel that does nothing else (same shape
 * and launch as the prepared-weights GEMV, back to back, the same weight
 * sets in turn): the cost of reading those bytes with that launch.  For
 * the small shapes (a ternary 2560 x 2560 is 1.6 MB) it is what any op
 * reading them costs. */
static void read_row(void *const *w, int sets, double bytes)
{
    void *sink = dalloc(4);
    read_arg r = {w, (size_t)bytes, sink, sets, 0};
    double t = time_us(run_read, &r);
    fprintf(txt, "%-40s %10.1f us %9.1f GB/s  (the same bytes, a read-only kernel)\n",
            "  read only", t, bytes / t / 1e3);
    lk_free(gpu, sink);
}

/* The weights' bytes read once at the copy's read rate, and the sets the
 * calls above rotated through (sets_for). */
static void floor_row(double bytes, int sets)
{
    fprintf(txt, "%-40s %10.1f us   (the weights read at the copy's rate; calls rotate over %d "
                 "set%s, %.0f MB)\n",
            "  floor", bytes / copy_gbs / 1e3, sets, sets == 1 ? "" : "s", sets * bytes / 1e6);
}

/* bench_handoff.cu: one phase's handoff across the SMs, alone */
int lk_bench_handoff(int mode, int n, int iters, int reps, double *us);

/* The floor of a phase of lk_bitnet_decode's fused kernel (bitnet.cu): a
 * row handed from every SM to every SM with nothing else running.  A
 * BitNet-2B-4T layer at batch 1 hands rows over five times (of 2560
 * floats, and one of 6912), so five of the second line are a floor under
 * a layer; the decode target leaves about 14.8 us a layer on an H100
 * (docs/performance.md). */
static void bench_handoff(void)
{
    static const struct {
        int mode, n;
        const char *name, *what;
    } cases[] = {
        {0, 0, "handoff: grid barrier", "release-add, acquire poll"},
        {1, 2560, "  + stores, row read n=2560", "the fused kernel's handoff"},
        {1, 6912, "  + stores, row read n=6912", "the fused kernel's handoff"},
        {2, 2560, "  LL words instead, n=2560", "value+number words, polled"},
        {2, 6912, "  LL words instead, n=6912", "value+number words, polled"},
        {3, 2560, "  row read alone, n=2560", "every SM the same lines"},
        {3, 6912, "  row read alone, n=6912", "every SM the same lines"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double us = 0.0;
        const int iters = quick ? 200 : 2000;
        const int e = lk_bench_handoff(cases[i].mode, cases[i].n ? cases[i].n : 4, iters, 5, &us);
        if (e) {
            fprintf(txt, "%-40s cannot run: %s\n", cases[i].name,
                    cudaGetErrorString((cudaError_t)e));
            return;
        }
        fprintf(txt, "%-40s %10.2f us   (%s; best of 5 launches of %d, one block an SM)\n",
                cases[i].name, us, cases[i].what, iters);
    }
}

/* The cost of the smallest op, a 1-element add, timed as every case is:
 * what a kernel costs in a replayed graph before it does any work, the
 * floor of the decode-sized kernels (a ternary GEMV of 2560 x 2560 moves
 * 1.6 MB, under 0.4 us of memory time). */
static float *tiny_buf;
static void run_tiny_add(void *p)
{
    (void)p;
    lk_tensor a = lk_mat(tiny_buf, LK_F32, 1, 1), y = lk_mat(tiny_buf + 1, LK_F32, 1, 1);
    CHECK_LK(lk_binary(q, LK_BINARY_ADD, &a, &a, &y));
}

static void bench_floor_op(void)
{
    if (!wanted("smallest op"))
        return;
    tiny_buf = dalloc(2 * sizeof(float));
    dfill(tiny_buf, 2 * sizeof(float), LK_F32);
    fprintf(txt, "%-40s %10.1f us   (a 1-element lk_binary add: the fixed cost of any op)\n",
            "smallest op", time_us(run_tiny_add, NULL));
}

/* lk_weights handles of the GEMV's weight sets (prepared, not timed) */
static void prepare_sets(prep_arg *pa, void *const *w, lk_dtype dt)
{
    for (int i = 0; i < pa->sets; i++) {
        lk_tensor tw = lk_mat(w[i], dt, pa->n, pa->k);
        CHECK_LK(lk_weights_prepare(q, &tw, NULL, &pa->wset[i]));
    }
    pa->w = pa->wset[0];
}

static void destroy_sets(prep_arg *pa)
{
    CHECK_LK(lk_queue_sync(q));
    for (int i = 0; i < pa->sets; i++)
        lk_weights_destroy(pa->wset[i]);
}

/* The prepared bf16 GEMV and cuBLAS again on one set of weights, which
 * stays in L2 when it fits: what a model whose weights all fit in L2
 * would see, labelled as such. */
static void gemv_hot_rows(const char *pname, gemm_arg *g, prep_arg *pa, double bytes)
{
    char hname[96];
    snprintf(hname, sizeof hname, "%s (L2-hot)", pname);
    if (bytes >= (double)l2_bytes || !wanted(hname))
        return;
    prep_arg ph = *pa;
    ph.sets = 1;
    ph.w = pa->wset[0];
    double ours = time_us(run_lk_linear, &ph), theirs = 0;
#ifdef LK_BENCH_CUBLAS
    gemm_arg gh = *g;
    gh.sets = 1;
    gh.b = g->bs[0];
    theirs = time_us(run_cublas_gemv, &gh);
#else
    (void)g;
#endif
    row(hname, ours, "cuBLAS bf16 GemmEx (L2-hot)", theirs, "GB/s", bytes);
}

static void bench_gemv(int64_t n, int64_t k)
{
    double bf16_peer = 0;
    for (int f32 = 0; f32 < 2; f32++) {
        lk_dtype dt = f32 ? LK_F32 : LK_BF16;
        size_t es = f32 ? 4 : 2;
        char name[64];
        snprintf(name, sizeof name, "gemv %s %lldx%lld", f32 ? "f32" : "bf16", (long long)n,
                 (long long)k);
        if (!wanted(name))
            continue;
        const double bytes = (double)(n * k) * es;
        gemm_arg *g = calloc(1, sizeof *g);
        if (!g) {
            fprintf(stderr, "out of host memory\n");
            exit(1);
        }
        *g = (gemm_arg){1, n, k, dt, dalloc((size_t)k * es), NULL, dalloc((size_t)n * es), 1,
                        sets_for(bytes), 0, {NULL}};
        dfill(g->a, (size_t)k * es, dt);
        for (int i = 0; i < g->sets; i++) {
            g->bs[i] = dalloc((size_t)(n * k) * es);
            dfill(g->bs[i], (size_t)(n * k) * es, dt);
        }
        g->b = g->bs[0];
        double ours = time_us(run_lk_gemm, g), theirs = 0;
#ifdef LK_BENCH_CUBLAS
        theirs = time_us(run_cublas_gemv, g);
#endif
        row(name, ours, f32 ? "cuBLAS SGEMV" : "cuBLAS bf16 GemmEx", theirs, "GB/s", bytes);
        floor_row(bytes, g->sets);
        if (!f32) {
            bf16_peer = theirs;
            if (theirs > 0)
                target(name, theirs / ours, 1.5);
        }
        /* prepared weights: the same x, W sets, cuBLAS peer */
        char pname[80];
        snprintf(pname, sizeof pname, "%s prep", name);
        if (wanted(pname)) {
            prep_arg *pa = calloc(1, sizeof *pa);
            if (!pa) {
                fprintf(stderr, "out of host memory\n");
                exit(1);
            }
            *pa = (prep_arg){n, k, dt, g->a, NULL, g->c, NULL, g->sets, 0, {NULL}};
            prepare_sets(pa, g->bs, dt);
            double pours = time_us(run_lk_linear, pa);
            row(pname, pours, f32 ? "cuBLAS SGEMV" : "cuBLAS bf16 GemmEx", theirs, "GB/s", bytes);
            floor_row(bytes, g->sets);
            read_row(g->bs, g->sets, bytes);
            /* the driver's goal; for the LM head it asks more than HBM
             * can give (docs/performance.md) */
            if (!f32 && theirs > 0)
                target(pname, theirs / pours, 1.5);
            if (!f32)
                gemv_hot_rows(pname, g, pa, bytes);
            destroy_sets(pa);
            free(pa);
        }
        lk_free(gpu, g->a);
        for (int i = 0; i < g->sets; i++)
            lk_free(gpu, g->bs[i]);
        lk_free(gpu, g->c);
        free(g);
    }

    char name[64];
    snprintf(name, sizeof name, "ternary gemv %lldx%lld", (long long)n, (long long)k);
    if (!wanted(name))
        return;
    const size_t wbytes = (size_t)(n * ((k + 3) / 4));
    const double bytes = (double)wbytes;
    t2_arg *t = calloc(1, sizeof *t);
    if (!t) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    *t = (t2_arg){n, k, dalloc((size_t)k), dalloc(4), NULL, dalloc(4), dalloc((size_t)n * 4),
                  sets_for(bytes), 0, {NULL}};
    float one = 1.0f;
    dfill(t->x, (size_t)k, LK_I8);
    for (int i = 0; i < t->sets; i++) {
        t->wset[i] = dalloc(wbytes);
        dfill(t->wset[i], wbytes, LK_T2);
    }
    t->w = t->wset[0];
    CHECK_LK(lk_memcpy(q, t->xs, &one, 4, LK_COPY_HOST_TO_DEVICE));
    CHECK_LK(lk_memcpy(q, t->ws, &one, 4, LK_COPY_HOST_TO_DEVICE));
    CHECK_LK(lk_queue_sync(q));
    double ours = time_us(run_lk_t2, t);
    row(name, ours, "cuBLAS bf16 GEMV (same)", bf16_peer, "GB/s", bytes);
    /* the floor: the packed weights read at the copy's rate (a pure read
     * streams as many bytes per second as a copy reads and writes: the sum
     * of 2^28 floats reads at the copy's figure) */
    floor_row(bytes, t->sets);
    if (bf16_peer > 0)
        target(name, bf16_peer / ours, 4.0);
    char pname[80];
    snprintf(pname, sizeof pname, "%s prep", name);
    if (wanted(pname)) {
        prep_arg *pa = calloc(1, sizeof *pa);
        if (!pa) {
            fprintf(stderr, "out of host memory\n");
            exit(1);
        }
        *pa = (prep_arg){n, k, LK_I8, t->x, t->xs, t->y, NULL, t->sets, 0, {NULL}};
        for (int i = 0; i < pa->sets; i++) {
            lk_tensor tw = lk_mat(t->wset[i], LK_T2, n, k), tws = lk_mat(t->ws, LK_F32, 1, 1);
            CHECK_LK(lk_weights_prepare(q, &tw, &tws, &pa->wset[i]));
        }
        pa->w = pa->wset[0];
        double pours = time_us(run_lk_t2_linear, pa);
        row(pname, pours, "cuBLAS bf16 GEMV (same)", bf16_peer, "GB/s", bytes);
        floor_row(bytes, t->sets);
        read_row(t->wset, t->sets, bytes);
        if (bf16_peer > 0)
            target(pname, bf16_peer / pours, 4.0);
        destroy_sets(pa);
        free(pa);
    }
    lk_free(gpu, t->x);
    lk_free(gpu, t->xs);
    for (int i = 0; i < t->sets; i++)
        lk_free(gpu, t->wset[i]);
    lk_free(gpu, t->ws);
    lk_free(gpu, t->y);
    free(t);
}

/* ----------------------------------------------- sum, norms, softmax */

typedef struct row_arg {
    int kind; /* 0 sum, 1 rmsnorm, 2 layernorm, 3 softmax */
    int64_t rows, cols;
    void *x, *y, *w, *b;
    int sets, next; /* sets > 1: each call takes the next of xs[], ys[] */
    void *xs[MAX_SETS], *ys[MAX_SETS];
} row_arg;

static void run_rows(void *p)
{
    row_arg *r = p;
    if (r->sets > 1) {
        const int i = next_set(&r->next, r->sets);
        r->x = r->xs[i];
        r->y = r->ys[i];
    }
    lk_tensor x = lk_mat(r->x, LK_F32, r->rows, r->cols);
    if (r->kind == 0) {
        lk_tensor y = lk_mat(r->y, LK_F32, r->rows, 1);
        CHECK_LK(lk_reduce(q, LK_REDUCE_SUM, &x, &y));
        return;
    }
    lk_tensor y = lk_mat(r->y, LK_F32, r->rows, r->cols);
    lk_tensor w = lk_mat(r->w, LK_F32, 1, r->cols), b = lk_mat(r->b, LK_F32, 1, r->cols);
    if (r->kind == 1)
        CHECK_LK(lk_rmsnorm(q, &x, &w, 1e-6f, &y));
    else if (r->kind == 2)
        CHECK_LK(lk_layernorm(q, &x, &w, &b, 1e-5f, &y));
    else
        CHECK_LK(lk_softmax(q, &x, &y));
}

static void bench_rows(int kind, int64_t rows, int64_t cols)
{
    static const char *names[] = {"sum", "rmsnorm", "layernorm", "softmax"};
    char name[64];
    snprintf(name, sizeof name, "%s f32 %lldx%lld", names[kind], (long long)rows,
             (long long)cols);
    if (!wanted(name))
        return;
    size_t bytes = (size_t)(rows * cols) * 4, ybytes = kind ? bytes : (size_t)rows * 4;
    row_arg *r = calloc(1, sizeof *r);
    if (!r) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    *r = (row_arg){kind, rows, cols, NULL, NULL, dalloc((size_t)cols * 4),
                   dalloc((size_t)cols * 4), sets_for((double)(bytes + ybytes)), 0, {NULL}, {NULL}};
    for (int i = 0; i < r->sets; i++) {
        r->xs[i] = dalloc(bytes);
        r->ys[i] = dalloc(ybytes);
        dfill(r->xs[i], bytes, LK_F32);
    }
    r->x = r->xs[0];
    r->y = r->ys[0];
    dfill(r->w, (size_t)cols * 4, LK_F32);
    dfill(r->b, (size_t)cols * 4, LK_F32);
    double ours = time_us(run_rows, r);
    if (kind == 0) {
        /* a copy of the same bytes reads them and writes them: the read
         * alone takes about half of it, the sum's floor */
        double c = copy_us(bytes);
        row(name, ours, "read floor (half a copy)", c / 2, "GB/s", (double)bytes);
    } else {
        double c = copy_us(bytes);
        row(name, ours, "D2D copy (same bytes)", c, "GB/s", 2.0 * bytes);
        target(name, c / ours, 0.85);
    }
    for (int i = 0; i < r->sets; i++) {
        lk_free(gpu, r->xs[i]);
        lk_free(gpu, r->ys[i]);
    }
    lk_free(gpu, r->w);
    lk_free(gpu, r->b);
    free(r);
}

/* ---------------------------------------------------- decode attention */

/* One decode step's attention of a 30-layer BitNet-2B-4T (20 query heads,
 * 5 KV heads of 128 dims, f32 caches in the model's kv layout: keys and
 * values as column slices of one keys x 1280 tensor per layer) at `keys`
 * keys: every call reads the 30 caches, 30 x keys x 5120 bytes, once. */
#define ATT_LAYERS 30
typedef struct attn_arg {
    int64_t keys;
    float *kv[ATT_LAYERS], *q, *y;
    int32_t *pos;
} attn_arg;

static void run_attn(void *p)
{
    attn_arg *a = p;
    const int64_t kvd = 5 * 128;
    lk_tensor tq = lk_mat(a->q, LK_F32, 1, 20 * 128), ty = lk_mat(a->y, LK_F32, 1, 20 * 128);
    lk_tensor tp = lk_mat(a->pos, LK_I32, 1, 1);
    for (int l = 0; l < ATT_LAYERS; l++) {
        lk_tensor tk = lk_mat(a->kv[l], LK_F32, a->keys, kvd);
        lk_tensor tv = lk_mat(a->kv[l] + kvd, LK_F32, a->keys, kvd);
        tk.ld = tv.ld = 2 * kvd;
        CHECK_LK(lk_attention(q, &tq, &tk, &tv, &tp, 20, 5, 0.08838834764831845f, &ty, 1));
    }
}

static void bench_attention(int64_t keys)
{
    char name[64];
    snprintf(name, sizeof name, "attention decode %lld keys x%d", (long long)keys, ATT_LAYERS);
    if (!wanted(name))
        return;
    attn_arg *a = calloc(1, sizeof *a);
    if (!a) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    const size_t cache = (size_t)keys * 2 * 640 * 4;
    a->keys = keys;
    for (int l = 0; l < ATT_LAYERS; l++) {
        a->kv[l] = dalloc(cache);
        dfill(a->kv[l], cache, LK_F32);
    }
    a->q = dalloc(20 * 128 * 4);
    a->y = dalloc(20 * 128 * 4);
    a->pos = dalloc(4);
    dfill(a->q, 20 * 128 * 4, LK_F32);
    const int32_t p = (int32_t)(keys - 1);
    CHECK_LK(lk_memcpy(q, a->pos, &p, 4, LK_COPY_HOST_TO_DEVICE));
    CHECK_LK(lk_queue_sync(q));
    const double bytes = (double)cache * ATT_LAYERS;
    double ours = time_us(run_attn, a);
    /* the floor: reading the bytes once at the copy's rate (a copy moves
     * each byte twice, read and write) */
    const double floor_us = bytes / (copy_gbs * 1e3);
    fprintf(txt, "%-40s KV %.1f MB, copy-bandwidth floor %.1f us\n", name, bytes / 1e6,
            floor_us);
    row(name, ours, "KV read at copy rate", floor_us, "GB/s", bytes);
    target(name, floor_us / ours, 0.60); /* KV read rate / copy bandwidth */
    for (int l = 0; l < ATT_LAYERS; l++)
        lk_free(gpu, a->kv[l]);
    lk_free(gpu, a->q), lk_free(gpu, a->y), lk_free(gpu, a->pos);
    free(a);
}

/* A prefill's attention of the same 30 layers: `rows` tokens of one
 * sequence at positions 0 .. rows-1 over a cache of `rows` keys (each row
 * its own prefix), the shape examples/bitnet's prefill gives lk_attention. */
typedef struct attn_pre_arg {
    int64_t rows;
    float *kv[ATT_LAYERS], *q, *y;
    int32_t *pos;
} attn_pre_arg;

static void run_attn_prefill(void *p)
{
    attn_pre_arg *a = p;
    const int64_t kvd = 5 * 128;
    lk_tensor tq = lk_mat(a->q, LK_F32, a->rows, 20 * 128);
    lk_tensor ty = lk_mat(a->y, LK_F32, a->rows, 20 * 128);
    lk_tensor tp = lk_mat(a->pos, LK_I32, a->rows, 1);
    for (int l = 0; l < ATT_LAYERS; l++) {
        lk_tensor tk = lk_mat(a->kv[l], LK_F32, a->rows, kvd);
        lk_tensor tv = lk_mat(a->kv[l] + kvd, LK_F32, a->rows, kvd);
        tk.ld = tv.ld = 2 * kvd;
        CHECK_LK(lk_attention(q, &tq, &tk, &tv, &tp, 20, 5, 0.08838834764831845f, &ty, 1));
    }
}

static void bench_attention_prefill(int64_t rows)
{
    char name[64];
    snprintf(name, sizeof name, "attention prefill %lld rows x%d", (long long)rows, ATT_LAYERS);
    if (!wanted(name))
        return;
    attn_pre_arg *a = calloc(1, sizeof *a);
    int32_t *pos = malloc((size_t)rows * 4);
    if (!a || !pos) {
        fprintf(stderr, "out of host memory\n");
        exit(1);
    }
    const size_t cache = (size_t)rows * 2 * 640 * 4;
    a->rows = rows;
    for (int l = 0; l < ATT_LAYERS; l++) {
        a->kv[l] = dalloc(cache);
        dfill(a->kv[l], cache, LK_F32);
    }
    a->q = dalloc((size_t)rows * 20 * 128 * 4);
    a->y = dalloc((size_t)rows * 20 * 128 * 4);
    a->pos = dalloc((size_t)rows * 4);
    dfill(a->q, (size_t)rows * 20 * 128 * 4, LK_F32);
    for (int64_t r = 0; r < rows; r++)
        pos[r] = (int32_t)r;
    CHECK_LK(lk_memcpy(q, a->pos, pos, (size_t)rows * 4, LK_COPY_HOST_TO_DEVICE));
    CHECK_LK(lk_queue_sync(q));
    const double ours = time_us(run_attn_prefill, a);
    row(name, ours, NULL, 0.0, NULL, 0.0);
    fprintf(txt, "%-40s %.0f tokens/s (attention only)\n", name, (double)rows * 1e6 / ours);
    for (int l = 0; l < ATT_LAYERS; l++)
        lk_free(gpu, a->kv[l]);
    lk_free(gpu, a->q), lk_free(gpu, a->y), lk_free(gpu, a->pos);
    free(a), free(pos);
}

/* The FP32 peak of the current CUDA device in GFLOP/s (FMA lanes x 2 x the SM clock): the
 * f32 GEMM's compute floor; 0 where the lanes an SM are not known. */
static double fp32_peak_gflops(void)
{
    int dev = 0, sms = 0, khz = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return 0.0;
    /* FP32 lanes an SM: 64 on sm_60, sm_70, sm_75 and sm_80; 128 on sm_86,
     * sm_89 and sm_90 (the CUDA programming guide's throughput table) */
    const int lanes = major == 9 || (major == 8 && minor >= 6)                        ? 128
                      : major == 7 || (major == 8 && minor == 0) || (major == 6 && minor == 0) ? 64
                                                                                       : 0;
    return (double)sms * lanes * 2.0 * khz / 1e6;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--no-graph"))
            use_graphs = 0;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc)
            device_name = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--no-graph] [--only SUBSTRING] [--json] "
                    "[--device cuda:N]\n",
                    argv[0]);
            return 2;
        }
    }
    txt = json ? stderr : stdout;
    if (quick)
        batches = 3;
#ifdef LK_CUDA_MODULE_DIR
    if (!getenv("LOCKSTEP_DRIVER_PATH"))
        setenv("LOCKSTEP_DRIVER_PATH", LK_CUDA_MODULE_DIR, 1);
#endif
    lk_context *ctx;
    CHECK_LK(lk_context_create(&ctx));
    if (lk_device_find(ctx, device_name, &gpu) != LK_OK) {
        fprintf(stderr, "no %s: %s\n", device_name, lk_last_error());
        for (int i = 0; i < lk_context_driver_count(ctx); i++) {
            lk_driver_info d;
            if (lk_context_driver_info(ctx, i, &d) == LK_OK)
                fprintf(stderr, "  driver %s %s: %s\n", d.name, d.path, d.message);
        }
        return 77;
    }
    lk_device_props props;
    CHECK_LK(lk_device_props_get(gpu, &props));
    if (strncmp(props.name, "cuda:", 5)) {
        fprintf(stderr, "%s is not a CUDA device\n", device_name);
        return 2;
    }
    /* the stream, cuBLAS and the probes' own kernels run on the current
     * CUDA device: make it this one (cuda:N counts the usable GPUs, which
     * need not be the CUDA ordinals; the PCI id names it either way) */
    {
        int ord = 0;
        CHECK_CUDA(cudaDeviceGetByPCIBusId(&ord, props.pci_bus_id));
        CHECK_CUDA(cudaSetDevice(ord));
    }
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    lk_queue_opts opts = {0, (void *)stream};
    CHECK_LK(lk_queue_create(gpu, &opts, &q));
#ifdef LK_BENCH_CUBLAS
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cublasCreate failed\n");
        return 1;
    }
    cublasSetStream(blas, stream);
    cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH); /* no TF32 */
#endif

    fprintf(txt, "lockstep-cuda-bench on %s%s; %s\n", props.description, quick ? " (quick)" : "",
            use_graphs ? "batches timed as CUDA graphs" : "plain launches");
    {
        int dev = 0, l2 = 0;
        if (cudaGetDevice(&dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) == cudaSuccess && l2 > 0)
            l2_bytes = (size_t)l2;
        (void)cudaGetLastError();
        fprintf(txt, "L2 %.1f MiB: the calls of a case rotate through buffer sets of >= %.0f MB "
                     "in all, both sides (\"(L2-hot)\": one set)\n",
                l2_bytes / 1048576.0, 3.0 * l2_bytes / 1e6);
    }
    {
        size_t bytes = (size_t)1 << 28;
        double c = copy_us(bytes);
        copy_gbs = 2.0 * bytes / c / 1e3;
        fprintf(txt, "%-40s %10.1f us %9.1f GB/s (read + write)\n", "D2D copy 256 MiB", c,
                copy_gbs);
    }
    if (json) {
        char desc[sizeof props.description];
        snprintf(desc, sizeof desc, "%s", props.description);
        for (char *c = desc; *c; c++) /* a JSON string without escapes */
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                *c = ' ';
        printf("{\"device\": \"%s\", \"description\": \"%s\", \"threads\": 0, "
               "\"reps\": %d, \"copy_gbps\": %.1f, \"peak_gflops\": %.1f, \"cases\": [",
               props.name, desc, batches, copy_gbs, fp32_peak_gflops());
    }
    bench_floor_op();
    if (wanted("handoff"))
        bench_handoff();
    fprintf(txt, "\n");

    if (quick) {
        bench_gemm(1024, 1024, 1024);
        bench_gemv(6912, 2560);
        bench_rows(0, 1, (int64_t)1 << 24);
        bench_rows(1, 1024, 4096);
        bench_attention(4096);
    } else {
        bench_gemm(4096, 4096, 4096);
        bench_gemm(2048, 3072, 768);
        bench_gemv(6912, 2560);
        bench_gemv(2560, 6912);
        bench_gemv(2560, 2560);
        bench_gemv(128256, 2560);
        bench_rows(0, 1, (int64_t)1 << 28);
        for (int kind = 1; kind <= 3; kind++) {
            bench_rows(kind, 4096, 4096);
            bench_rows(kind, 16384, 8192);
        }
        bench_attention(4096);
        bench_attention(32768);
        bench_attention_prefill(2048);
    }
    fprintf(txt, "\n%d target%s missed\n", failures, failures == 1 ? "" : "s");
    if (json)
        printf("\n]}\n");

#ifdef LK_BENCH_CUBLAS
    cublasDestroy(blas);
#endif
    lk_queue_destroy(q);
    cudaStreamDestroy(stream);
    lk_context_destroy(ctx);
    return 0;
}
