/* Lockstep benchmarks: the public ternary GEMV kernels that `lockstep
 * bench` compares lk_ternary_gemm with (internal; never linked into
 * liblockstep, and not into the bench either: their libraries are loaded
 * at run time).
 *
 *   LK_PEER_TQ2_0  llama.cpp's TQ2_0 weights against q8_K activations,
 *                  through ggml's CPU library (ggml_get_type_traits_cpu)
 *   LK_PEER_I2_S   bitnet.cpp's I2_S weights against int8 activations
 *                  (ggml_vec_dot_i2_i8_s), from its ggml
 *
 * scripts/get-peers.sh builds them into the peers directory:
 * $LOCKSTEP_PEERS_DIR, else ~/.cache/lockstep/peers.  Each peer takes the
 * LK_T2 weights once (converted to its own layout outside the timing) and
 * then, per run, does what its library does for one token: lays out the
 * int8 activations its kernel wants, runs the dot of every row on
 * `threads` OpenMP threads (contiguous row ranges, as ggml splits a GEMV's
 * rows), and applies the scales as y[n] = ((float)(dot_n) / x_scale) *
 * w_scale. */
#ifndef LK_BENCH_PEERS_TERNARY_PEERS_H
#define LK_BENCH_PEERS_TERNARY_PEERS_H

#include <stdint.h>

#include "bench/peers/ggml_abi.h"

enum { LK_PEER_TQ2_0 = 1, LK_PEER_I2_S = 2 };

typedef struct lk_peer_t2 {
    int kind;
    int64_t n, k;
    lk_ggml_vec_dot_fn dot; /* the peer's kernel, from its library */
    void *w;                /* the weights in the peer's layout */
    void *act;              /* the activations in the peer's layout, rebuilt every run */
} lk_peer_t2;

/* "llama.cpp TQ2_0", "bitnet.cpp I2_S". */
const char *lk_peer_t2_name(int kind);

/* Loads the peer's library (once) and returns 1 when it runs here; else 0
 * and *why says why not (not found, not loadable, another layout, a CPU
 * without the ISA it was built for), naming the directory searched. */
int lk_peer_t2_available(int kind, const char **why);

/* What was loaded, for the bench's header: "llama.cpp TQ2_0 from ggml
 * 0.25.3 (DIR/...)"; NULL when the peer is not available. */
const char *lk_peer_t2_source(int kind);

/* K must be a multiple of 256 (TQ2_0's block; I2_S needs 128 or 64).  w: n rows
 * of LK_T2 codes (k / 4 bytes each, codes 0..2).  NULL when out of memory,
 * when k does not fit or when the peer is not available. */
lk_peer_t2 *lk_peer_t2_create(int kind, const uint8_t *w, int64_t n, int64_t k);

void lk_peer_t2_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                    int threads);

void lk_peer_t2_destroy(lk_peer_t2 *p);

/* The adapters (tq2_0_adapter.c, i2_s_adapter.c): create fills p->w and
 * p->act from LK_T2 codes and returns 0, or -1 when out of memory. */
int lk_peer_tq2_0_create(lk_peer_t2 *p, const uint8_t *w);
void lk_peer_tq2_0_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                       int threads);
int lk_peer_i2_s_create(lk_peer_t2 *p, const uint8_t *w);
void lk_peer_i2_s_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                      int threads);

#endif
