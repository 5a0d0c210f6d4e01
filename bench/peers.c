/* Lockstep benchmarks: the peers (OpenBLAS, streaming loops).
 *
 * OpenBLAS is loaded at run time (dlopen of Debian's libopenblas0,
 * libopenblas.so.0), not linked: the lockstep binary needs no BLAS to
 * build or to run, and the bench compares with it wherever it is
 * installed.  Only the CBLAS entry points are used, declared here. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers.h"

/* CBLAS's enums, as every CBLAS defines them. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
typedef void (*sgemv_fn)(int order, int ta, int m, int n, float alpha, const float *a, int lda,
                         const float *x, int incx, float beta, float *y, int incy);
typedef void (*set_threads_fn)(int n);

static struct {
    int tried, ok;
    sgemm_fn sgemm;
    sgemv_fn sgemv;
    set_threads_fn set_threads;
    char why[384];
} blas;

#define OPENBLAS_LIB "libopenblas.so.0"

static int load_openblas(void)
{
    if (blas.tried)
        return blas.ok;
    blas.tried = 1;
#ifdef LK_BENCH_NO_OPENBLAS
    snprintf(blas.why, sizeof blas.why, "OpenBLAS: left out (configure --without-openblas)");
    return 0;
#else
    void *h = dlopen(OPENBLAS_LIB, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(blas.why, sizeof blas.why,
                 "OpenBLAS: " OPENBLAS_LIB " not found (apt-get install libopenblas0): %s",
                 dlerror());
        return 0;
    }
    *(void **)&blas.sgemm = dlsym(h, "cblas_sgemm");
    *(void **)&blas.sgemv = dlsym(h, "cblas_sgemv");
    *(void **)&blas.set_threads = dlsym(h, "openblas_set_num_threads");
    if (!blas.sgemm || !blas.sgemv || !blas.set_threads) {
        snprintf(blas.why, sizeof blas.why,
                 "OpenBLAS: " OPENBLAS_LIB " lacks cblas_sgemm, cblas_sgemv or "
                 "openblas_set_num_threads");
        dlclose(h);
        return 0;
    }
    blas.ok = 1;
    return 1;
#endif
}

int lk_peer_have_openblas(void)
{
    return load_openblas();
}

const char *lk_peer_openblas_why(void)
{
    return load_openblas() ? NULL : blas.why;
}

void lk_peer_openblas_threads(int n)
{
    if (load_openblas())
        blas.set_threads(n);
}

void lk_peer_sgemm(int m, int n, int k, const float *a, const float *b, int b_trans, float *c)
{
    if (!load_openblas())
        return;
    if (m == 1 && b_trans)
        blas.sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, n, k, 1.0f, b, k, a, 1, 0.0f, c, 1);
    else if (m == 1)
        blas.sgemv(CBLAS_ROW_MAJOR, CBLAS_TRANS, k, n, 1.0f, b, n, a, 1, 0.0f, c, 1);
    else
        blas.sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, b_trans ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n,
                   k, 1.0f, a, k, b, b_trans ? k : n, 0.0f, c, n);
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
