/* Lockstep benchmarks: the peers (OpenBLAS, streaming loops). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#ifdef LK_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers.h"

int lk_peer_have_openblas(void)
{
#ifdef LK_HAVE_OPENBLAS
    return 1;
#else
    return 0;
#endif
}

void lk_peer_openblas_threads(int n)
{
#ifdef LK_HAVE_OPENBLAS
    openblas_set_num_threads(n);
#else
    (void)n;
#endif
}

void lk_peer_sgemm(int m, int n, int k, const float *a, const float *b, int b_trans, float *c)
{
#ifdef LK_HAVE_OPENBLAS
    if (m == 1 && b_trans)
        cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, b, k, a, 1, 0.0f, c, 1);
    else if (m == 1)
        cblas_sgemv(CblasRowMajor, CblasTrans, k, n, 1.0f, b, n, a, 1, 0.0f, c, 1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, b_trans ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, a, k, b, b_trans ? k : n, 0.0f, c, n);
#else
    (void)m, (void)n, (void)k, (void)a, (void)b, (void)b_trans, (void)c;
#endif
}

/* 32-byte vectors of the compiler's own: the loops compile to AVX2 where
 * the CPU has it (target_clones picks at load time), SSE2 elsewhere. */
typedef unsigned long long lk_v4 __attribute__((vector_size(32)));

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LK_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LK_CLONES
#endif

LK_CLONES static unsigned long long read_span(const unsigned char *p, size_t bytes)
{
    lk_v4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        a0 ^= *(const lk_v4 *)(const void *)(p + i);
        a1 ^= *(const lk_v4 *)(const void *)(p + i + 32);
        a2 ^= *(const lk_v4 *)(const void *)(p + i + 64);
        a3 ^= *(const lk_v4 *)(const void *)(p + i + 96);
    }
    a0 ^= a1 ^ a2 ^ a3;
    return a0[0] ^ a0[1] ^ a0[2] ^ a0[3];
}

LK_CLONES static void copy_span(unsigned char *d, const unsigned char *s, size_t bytes)
{
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        lk_v4 v0 = *(const lk_v4 *)(const void *)(s + i);
        lk_v4 v1 = *(const lk_v4 *)(const void *)(s + i + 32);
        lk_v4 v2 = *(const lk_v4 *)(const void *)(s + i + 64);
        lk_v4 v3 = *(const lk_v4 *)(const void *)(s + i + 96);
        *(lk_v4 *)(void *)(d + i) = v0;
        *(lk_v4 *)(void *)(d + i + 32) = v1;
        *(lk_v4 *)(void *)(d + i + 64) = v2;
        *(lk_v4 *)(void *)(d + i + 96) = v3;
    }
}

#ifdef LK_HAVE_OPENMP
/* Part t of nt of [0, bytes) in whole 128-byte blocks. */
static void part(size_t bytes, int t, int nt, size_t *b, size_t *e)
{
    size_t blocks = bytes / 128;
    *b = blocks * (size_t)t / (size_t)nt * 128;
    *e = blocks * (size_t)(t + 1) / (size_t)nt * 128;
}
#endif

unsigned long long lk_peer_read(const void *p, size_t bytes, int threads)
{
    unsigned long long r = 0;
#ifdef LK_HAVE_OPENMP
#pragma omp parallel num_threads(threads) reduction(^ : r)
    {
        size_t b, e;
        part(bytes, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        r ^= read_span((const unsigned char *)p + b, e - b);
    }
#else
    (void)threads;
    r = read_span((const unsigned char *)p, bytes);
#endif
    return r;
}

void lk_peer_copy(void *dst, const void *src, size_t bytes, int threads)
{
#ifdef LK_HAVE_OPENMP
#pragma omp parallel num_threads(threads)
    {
        size_t b, e;
        part(bytes, omp_get_thread_num(), omp_get_num_threads(), &b, &e);
        copy_span((unsigned char *)dst + b, (const unsigned char *)src + b, e - b);
    }
#else
    (void)threads;
    copy_span((unsigned char *)dst, (const unsigned char *)src, bytes);
#endif
}
