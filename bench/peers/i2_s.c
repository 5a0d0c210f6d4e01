/* Lockstep benchmarks: bitnet.cpp's I2_S ternary dot product, as a peer
 * for `lockstep bench` (never linked into liblockstep).  MIT licence,
 * copyright Microsoft Corporation: LICENSE.BitNet, next to this file.
 *
 * Copied from bitnet.cpp (https://github.com/microsoft/BitNet),
 * src/ggml-bitnet-mad.cpp at commit 5cad0d40: hsum_i32_8, quantize_i2_s
 * and ggml_vec_dot_i2_i8_s (its __AVX2__ path).  The function bodies are
 * unchanged; the C++ constants became macros, ggml_row_size(GGML_TYPE_I2_S,
 * n) is n / 4 and the casts C needs were kept.  This file is compiled with
 * -mavx2 -mfma -mf16c only (bench/local.mk).
 *
 * Weight layout: blocks of 128 values in 32 bytes, value j of a block at
 * bits 6 - 2 (j / 32) of byte j % 32, codes 0, 1, 2 for -1, 0, +1.  The
 * kernel returns sum code * y; bitnet.cpp's mul_mat then subtracts the
 * activations' sum and applies the scales, as the glue at the end does. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <immintrin.h>
#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers/ternary_peers.h"

#define QK_I2_S 128
#define QK_I2 128
#define ggml_row_size(type, n) ((size_t)(n) / 4)

// horizontally add 8 int32_t
static inline int hsum_i32_8(const __m256i a) {
    const __m128i sum128 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extractf128_si256(a, 1));
    const __m128i hi64 = _mm_unpackhi_epi64(sum128, sum128);
    const __m128i sum64 = _mm_add_epi32(hi64, sum128);
    const __m128i hi32  = _mm_shuffle_epi32(sum64, _MM_SHUFFLE(2, 3, 0, 1));
    return _mm_cvtsi128_si32(_mm_add_epi32(sum64, hi32));
}

static size_t quantize_i2_s(const float * src, void * dst, int64_t nrow, int64_t n_per_row, const float * quant_weights) {
    // 2 bits per weight
    (void)quant_weights;

    size_t row_size = ggml_row_size(GGML_TYPE_I2_S, n_per_row);

    int n = nrow * n_per_row;

    // f32 -> q8
    double max = 0;
    for (int i = 0; i < n; ++i) {
        max = fmax(max, (double)fabs((double)src[i]));
    }
    double i2_scale = max;

    uint8_t* q8 = (uint8_t*)malloc(n * sizeof(uint8_t));
    if (q8 == NULL) /* added: the bench must not crash */
        return 0;
    for (int i=0; i<n; i++) {
        if (fabs((double)(src[i])) < 1e-6) {
            q8[i] = 1;
            continue;
        }
        q8[i] = (double)src[i] * i2_scale > 0 ? 2 : 0;
    }

    memset(dst, 0, n * sizeof(uint8_t) / 4);

    // q8 -> 0, 1, 2
    //       |  |  |
    //      -1, 0, 1

    uint8_t* i2_weight = (uint8_t*)dst;
    for (int i = 0; i < n / QK_I2; i++) {
        for (int j = 0; j < QK_I2; j++) {
            int group_idx = j / 32;
            int group_pos = j % 32;
            uint8_t temp = (q8[i * QK_I2 + j] << (6 - 2 * group_idx));
            i2_weight[i * 32 + group_pos] |= temp;
        }
    }

    float* scale_ptr = (float*)((char*)i2_weight + n / 4);
    scale_ptr[0] = i2_scale;

    free(q8);

    // 32B for alignment
    return nrow * row_size / 4 + 32;
}

static void ggml_vec_dot_i2_i8_s(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc) {
    const uint8_t *    x = (uint8_t *)vx;
    const int8_t  *    y = (int8_t *)vy;
    (void)bs, (void)bx, (void)by, (void)nrc;

    const int nb = n / QK_I2_S;
    const int group32_num = nb / 32;
    const int la_num = nb % 32;
    const int groupla_num = nb % 32 != 0 ? 1 : 0;

    __m256i mask = _mm256_set1_epi8(0x03);
    __m256i accu = _mm256_setzero_si256();

    for (int i=0; i < group32_num; i++){
        __m256i accu32 = _mm256_setzero_si256();
        for (int j=0; j < 32; j++) {
        // 128 index
        __m256i xq8_3 = _mm256_loadu_si256((const __m256i*)(x + i * 32 * 32 + j * 32));
        __m256i xq8_2 = _mm256_srli_epi16(xq8_3, 2);
        __m256i xq8_1 = _mm256_srli_epi16(xq8_3, 4);
        __m256i xq8_0 = _mm256_srli_epi16(xq8_3, 6);

        // each 32 index
        xq8_3 = _mm256_and_si256(xq8_3, mask);
        xq8_2 = _mm256_and_si256(xq8_2, mask);
        xq8_1 = _mm256_and_si256(xq8_1, mask);
        xq8_0 = _mm256_and_si256(xq8_0, mask);

        // each 32 index
        __m256i yq8_0 = _mm256_loadu_si256((const __m256i*)(y + i * 128 * 32 + j * 128 + 0));
        __m256i yq8_1 = _mm256_loadu_si256((const __m256i*)(y + i * 128 * 32 + j * 128 + 32));
        __m256i yq8_2 = _mm256_loadu_si256((const __m256i*)(y + i * 128 * 32 + j * 128 + 64));
        __m256i yq8_3 = _mm256_loadu_si256((const __m256i*)(y + i * 128 * 32 + j * 128 + 96));

        // 128 index accumulation add
        // split into 32 accumulation block
        // each block each 128 index accumulated 4index
        // each index maximum 256
        // each block maximum 4 * 256
        // each block accumulation maximum 127 * 256
        // each 32 group index (128 index in one group) needs cast to int32
        xq8_0 = _mm256_maddubs_epi16(xq8_0, yq8_0);
        xq8_1 = _mm256_maddubs_epi16(xq8_1, yq8_1);
        xq8_2 = _mm256_maddubs_epi16(xq8_2, yq8_2);
        xq8_3 = _mm256_maddubs_epi16(xq8_3, yq8_3);

        accu32 = _mm256_add_epi16(accu32, _mm256_add_epi16(xq8_0, xq8_1));
        accu32 = _mm256_add_epi16(accu32, _mm256_add_epi16(xq8_2, xq8_3));
        }
        accu = _mm256_add_epi32(_mm256_madd_epi16(accu32, _mm256_set1_epi16(1)), accu);
    }

    for (int i = 0; i < groupla_num; i++){
        __m256i accula = _mm256_setzero_si256();
        for (int j = 0; j < la_num; j++) {
        // 128 index
        __m256i xq8_3 = _mm256_loadu_si256((const __m256i*)(x + group32_num * 32 * 32 + j * 32));
        __m256i xq8_2 = _mm256_srli_epi16(xq8_3, 2);
        __m256i xq8_1 = _mm256_srli_epi16(xq8_3, 4);
        __m256i xq8_0 = _mm256_srli_epi16(xq8_3, 6);

        // each 32 index
        xq8_3 = _mm256_and_si256(xq8_3, mask);
        xq8_2 = _mm256_and_si256(xq8_2, mask);
        xq8_1 = _mm256_and_si256(xq8_1, mask);
        xq8_0 = _mm256_and_si256(xq8_0, mask);

        // each 32 index
        __m256i yq8_0 = _mm256_loadu_si256((const __m256i*)(y + group32_num * 128 * 32 + j * 128 + 0));
        __m256i yq8_1 = _mm256_loadu_si256((const __m256i*)(y + group32_num * 128 * 32 + j * 128 + 32));
        __m256i yq8_2 = _mm256_loadu_si256((const __m256i*)(y + group32_num * 128 * 32 + j * 128 + 64));
        __m256i yq8_3 = _mm256_loadu_si256((const __m256i*)(y + group32_num * 128 * 32 + j * 128 + 96));

        // 128 index accumulation add
        // split into 32 accumulation block
        // each block each 128 index accumulated 4index
        // each index maximum 256
        // each block maximum 4 * 256
        // each block accumulation maximum 127 * 256
        // each 32 group index (128 index in one group) needs cast to int32
        xq8_0 = _mm256_maddubs_epi16(xq8_0, yq8_0);
        xq8_1 = _mm256_maddubs_epi16(xq8_1, yq8_1);
        xq8_2 = _mm256_maddubs_epi16(xq8_2, yq8_2);
        xq8_3 = _mm256_maddubs_epi16(xq8_3, yq8_3);

        accula = _mm256_add_epi16(accula, _mm256_add_epi16(xq8_0, xq8_1));
        accula = _mm256_add_epi16(accula, _mm256_add_epi16(xq8_2, xq8_3));
        }
        accu = _mm256_add_epi32(accu, _mm256_madd_epi16(accula, _mm256_set1_epi16(1)));
    }
    int sumi = hsum_i32_8(accu);
    *s = (float)sumi;
}

/* ---- Lockstep's glue ---- */

int lk_peer_i2_s_create(lk_peer_t2 *p, const uint8_t *w)
{
    const int64_t rowb = p->k / 4;
    float *row = malloc((size_t)p->k * sizeof *row);
    /* + 32: quantize_i2_s stores its scale after each row's bytes */
    p->w = malloc((size_t)(p->n * rowb) + 32);
    if (row == NULL || p->w == NULL) {
        free(row);
        return -1;
    }
    for (int64_t r = 0; r < p->n; r++) { /* LK_T2 code of k at bits 2 (k % 4) of byte k / 4 */
        for (int64_t k = 0; k < p->k; k++)
            row[k] = (float)((w[r * rowb + k / 4] >> (2 * (k % 4)) & 3) - 1);
        if (quantize_i2_s(row, (uint8_t *)p->w + r * rowb, 1, p->k, NULL) == 0) {
            free(row);
            return -1;
        }
    }
    free(row);
    return 0;
}

void lk_peer_i2_s_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                      int threads)
{
    const int64_t rowb = p->k / 4;
    int32_t xsum = 0; /* bitnet.cpp's act_sums: its activations are used as they are */
    for (int64_t k = 0; k < p->k; k++)
        xsum += x[k];
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
            ggml_vec_dot_i2_i8_s((int)p->k, &s, 0, (const uint8_t *)p->w + r * rowb, 0, x, 0, 1);
            y[r] = ((float)((int32_t)s - xsum) / x_scale) * w_scale;
        }
    }
}
