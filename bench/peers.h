/* Lockstep benchmarks: what each case is compared with (internal).
 *
 * OpenBLAS for f32 GEMM and GEMV (loaded at run time where installed), and
 * for the bandwidth-bound ops the machine's own streaming loops run on the
 * same number of threads: a read loop (the floor of an op that reads n bytes)
 * and a copy loop (one that reads n and writes n). */
#ifndef LK_BENCH_PEERS_H
#define LK_BENCH_PEERS_H

#include <stddef.h>

/* 1 when OpenBLAS is loaded (the first call tries libopenblas.so.0). */
int lk_peer_have_openblas(void);

/* Why OpenBLAS is not there ("OpenBLAS: ..."); NULL when it is. */
const char *lk_peer_openblas_why(void);

/* OpenBLAS's thread count, to match Lockstep's; nothing without it. */
void lk_peer_openblas_threads(int n);

/* Row-major C = A (m x k) . op(B); b_trans: B is n x k (weights), else
 * k x n.  m == 1 goes to sgemv. */
void lk_peer_sgemm(int m, int n, int k, const float *a, const float *b, int b_trans, float *c);

/* Read every byte of p (bytes a multiple of 64) on `threads` threads;
 * returns a value that depends on all of them. */
unsigned long long lk_peer_read(const void *p, size_t bytes, int threads);

/* dst = src, regular stores, on `threads` threads. */
void lk_peer_copy(void *dst, const void *src, size_t bytes, int threads);

#endif
