/* Lockstep benchmarks: the cases (internal). */
#ifndef LK_BENCH_CASES_H
#define LK_BENCH_CASES_H

#include <stdint.h>

#include <lockstep.h>

typedef enum lk_bench_kind {
    LK_BK_GEMM,      /* C = A . B, square, f32 */
    LK_BK_LINEAR,    /* y = x . W^T, W N x K in dt: a linear layer at batch M */
    LK_BK_TERNARY,   /* y = ternary_gemm(xq, W), W N x K packed */
    LK_BK_RMSNORM,   /* rows M x cols N */
    LK_BK_LAYERNORM,
    LK_BK_SOFTMAX,
    LK_BK_SILU,
    LK_BK_SUM,       /* one row of N */
    LK_BK_CONVERT,   /* f32 -> dt, M x N */
    LK_BK_ATTENTION  /* decode: one token, BitNet-2B-4T heads (20/5 x 128), N keys, f32 kv */
} lk_bench_kind;

typedef struct lk_bench_case {
    const char *name;
    lk_bench_kind kind;
    lk_dtype dt;
    int64_t m, n, k;
    int cold;          /* weights rotate through copies larger than the caches */
    int quick;         /* part of --quick */
    int prepared;      /* linear/ternary: on lk_weights_prepare'd weights */
    double flops;      /* per run (0: bandwidth-bound) */
    double bytes;      /* moved per run, at least once */
    const char *peer_name;
    int t2_peer;       /* ternary: LK_PEER_TQ2_0 or LK_PEER_I2_S (bench/peers) as the
                          peer instead of the read floor; 0: the floor */
} lk_bench_case;

typedef struct lk_bench_result {
    double lk_ms, peer_ms; /* medians; peer_ms 0 when the peer is not there */
    const char *peer_name;
    const char *skip;      /* why the peer is not there ("<peer>: ..."), else NULL;
                              a case that exists for its peer then has no
                              times at all (lk_ms 0) */
} lk_bench_result;

/* The cases, ending with name == NULL. */
const lk_bench_case *lk_bench_cases(void);

/* Time one case: LK_ERR_UNSUPPORTED when the device lacks the op. */
lk_status lk_bench_run(const lk_bench_case *c, lk_queue *q, int threads, int reps,
                       lk_bench_result *r);

#endif
