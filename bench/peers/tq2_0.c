/* Lockstep benchmarks: llama.cpp's TQ2_0 ternary dot product, as a peer
 * for `lockstep bench` (never linked into liblockstep).  MIT licence,
 * copyright the ggml authors: LICENSE.llama.cpp, next to this file.
 *
 * Copied from llama.cpp (https://github.com/ggml-org/llama.cpp):
 *   - block_tq2_0, block_q8_K, QK_K: ggml/src/ggml-common.h
 *   - quantize_row_tq2_0_ref: ggml/src/ggml-quants.c (commit 36491e40)
 *   - ggml_vec_dot_tq2_0_q8_K (its __AVX2__ path) and hsum_float_8:
 *     ggml/src/ggml-cpu/arch/x86/quants.c (commit 04e1dd75)
 * The function bodies are unchanged; only what they need from ggml is
 * defined here (GGML_RESTRICT, UNUSED, the fp16 conversions through F16C,
 * as ggml does on x86).  This file is compiled with -mavx2 -mfma -mf16c
 * only (bench/local.mk).
 *
 * The glue at the end is ours: it builds the q8_K activations from int8
 * values that are already quantized (d = 1, qs = x, bsums = sums of 16,
 * what quantize_row_q8_K stores next to its int8 values) and splits the
 * rows over OpenMP threads in contiguous ranges. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>
#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers/ternary_peers.h"

/* ---- from ggml ---- */

#define GGML_RESTRICT restrict
#define UNUSED(x) (void)(x)
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define QK_K 256

typedef uint16_t ggml_half;
#define GGML_FP32_TO_FP16(x) _cvtss_sh(x, 0)
#define GGML_CPU_FP16_TO_FP32(x) _cvtsh_ss(x)

/* 2.0625 bpw */
typedef struct {
    uint8_t qs[QK_K / 4]; /* 2 bits per element */
    ggml_half d;
} block_tq2_0;

/* This is only used for intermediate quantization and dot products */
typedef struct {
    float d;                  /* delta */
    int8_t qs[QK_K];          /* quants */
    int16_t bsums[QK_K / 16]; /* sum of quants in groups of 16 */
} block_q8_K;

/* horizontally add 8 floats */
static inline float hsum_float_8(const __m256 x) {
    __m128 res = _mm256_extractf128_ps(x, 1);
    res = _mm_add_ps(res, _mm256_castps256_ps128(x));
    res = _mm_add_ps(res, _mm_movehl_ps(res, res));
    res = _mm_add_ss(res, _mm_movehdup_ps(res));
    return _mm_cvtss_f32(res);
}

static void quantize_row_tq2_0_ref(const float * GGML_RESTRICT x, block_tq2_0 * GGML_RESTRICT y, int64_t k) {
    assert(k % QK_K == 0);
    const int64_t nb = k / QK_K;

    for (int64_t i = 0; i < nb; i++) {
        float amax = 0.0f; // absolute max

        for (int j = 0; j < QK_K; j++) {
            const float v = x[j];
            amax = MAX(amax, fabsf(v));
        }

        const float d = amax;
        const float id = d ? 1.0f/d : 0.0f;

        y[i].d = GGML_FP32_TO_FP16(d);

        for (size_t j = 0; j < sizeof(y->qs); j += 32) {
            for (size_t m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (size_t n = 0; n < 4; ++n) {
                    // -1, 0, 1 -> 0, 1, 2
                    int xi = lroundf(x[m + n*32] * id) + 1;
                    q += (xi & 3) << (2*n);
                }
                y[i].qs[j + m] = q;
            }
            x += 4*32;
        }
    }
}

static void ggml_vec_dot_tq2_0_q8_K(int n, float * GGML_RESTRICT s, size_t bs, const void * GGML_RESTRICT vx, size_t bx, const void * GGML_RESTRICT vy, size_t by, int nrc) {
    assert(nrc == 1);
    UNUSED(nrc);
    UNUSED(bx);
    UNUSED(by);
    UNUSED(bs);

    const block_tq2_0 * GGML_RESTRICT x = vx;
    const block_q8_K  * GGML_RESTRICT y = vy;

    const int nb = n / QK_K;

    __m256 sumf = _mm256_setzero_ps();

    for (int i = 0; i < nb; ++i) {
        // 16-bit sums, because 256*127 still fits
        __m256i sumi0 = _mm256_setzero_si256();
        __m256i sumi1 = _mm256_setzero_si256();

        for (size_t j = 0; j < sizeof(x->qs); j += 32) {
            __m256i qx0 = _mm256_loadu_si256((const __m256i *) (x[i].qs + j));
            __m256i qx1 = _mm256_srli_epi16(qx0, 2);
            __m256i qx2 = _mm256_srli_epi16(qx0, 4);
            __m256i qx3 = _mm256_srli_epi16(qx0, 6);

            // 0, 1, 2 (should not be 3)
            qx0 = _mm256_and_si256(qx0, _mm256_set1_epi8(3));
            qx1 = _mm256_and_si256(qx1, _mm256_set1_epi8(3));
            qx2 = _mm256_and_si256(qx2, _mm256_set1_epi8(3));
            qx3 = _mm256_and_si256(qx3, _mm256_set1_epi8(3));

            const __m256i qy0 = _mm256_loadu_si256((const __m256i *) (y[i].qs + j*4 +  0));
            const __m256i qy1 = _mm256_loadu_si256((const __m256i *) (y[i].qs + j*4 + 32));
            const __m256i qy2 = _mm256_loadu_si256((const __m256i *) (y[i].qs + j*4 + 64));
            const __m256i qy3 = _mm256_loadu_si256((const __m256i *) (y[i].qs + j*4 + 96));

            qx0 = _mm256_maddubs_epi16(qx0, qy0);
            qx1 = _mm256_maddubs_epi16(qx1, qy1);
            qx2 = _mm256_maddubs_epi16(qx2, qy2);
            qx3 = _mm256_maddubs_epi16(qx3, qy3);

            sumi0 = _mm256_add_epi16(sumi0, _mm256_add_epi16(qx0, qx1));
            sumi1 = _mm256_add_epi16(sumi1, _mm256_add_epi16(qx2, qx3));
        }

        const __m256i ysum = _mm256_loadu_si256((const __m256i *) y[i].bsums);
        const __m256 d = _mm256_set1_ps(y[i].d * GGML_CPU_FP16_TO_FP32(x[i].d));

        sumi0 = _mm256_add_epi16(sumi0, sumi1);
        sumi0 = _mm256_sub_epi16(sumi0, ysum);
        sumi0 = _mm256_madd_epi16(sumi0, _mm256_set1_epi16(1));

        sumf = _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(sumi0), d), sumf);
    }

    *s = hsum_float_8(sumf);
}

/* ---- Lockstep's glue ---- */

int lk_peer_tq2_0_create(lk_peer_t2 *p, const uint8_t *w)
{
    const int64_t nb = p->k / QK_K, rowb = p->k / 4;
    float *row = malloc((size_t)p->k * sizeof *row);
    p->w = malloc((size_t)(p->n * nb) * sizeof(block_tq2_0));
    p->act = malloc((size_t)nb * sizeof(block_q8_K));
    if (row == NULL || p->w == NULL || p->act == NULL) {
        free(row);
        return -1;
    }
    for (int64_t r = 0; r < p->n; r++) { /* LK_T2 code c of k at bits 2 (k % 4) of byte k / 4 */
        for (int64_t k = 0; k < p->k; k++)
            row[k] = (float)((w[r * rowb + k / 4] >> (2 * (k % 4)) & 3) - 1);
        quantize_row_tq2_0_ref(row, (block_tq2_0 *)p->w + r * nb, p->k);
    }
    free(row);
    return 0;
}

void lk_peer_tq2_0_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                       int threads)
{
    const int64_t nb = p->k / QK_K;
    block_q8_K *a = (block_q8_K *)p->act;
    const block_tq2_0 *w = (const block_tq2_0 *)p->w;
    for (int64_t i = 0; i < nb; i++) {
        a[i].d = 1.0f;
        memcpy(a[i].qs, x + i * QK_K, QK_K);
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += x[i * QK_K + 16 * j + l];
            a[i].bsums[j] = (int16_t)s;
        }
    }
#ifdef LK_HAVE_OPENMP
#pragma omp parallel num_threads(threads)
#endif
    {
#ifdef LK_HAVE_OPENMP
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
        const int t = 0, nt = 1;
        (void)threads;
#endif
        const int64_t r0 = p->n * t / nt, r1 = p->n * (t + 1) / nt;
        for (int64_t r = r0; r < r1; r++) {
            float s;
            ggml_vec_dot_tq2_0_q8_K((int)p->k, &s, 0, w + r * nb, 0, a, 0, 1);
            y[r] = (s / x_scale) * w_scale;
        }
    }
}
