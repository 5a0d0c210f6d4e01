/* Lockstep benchmarks: LK_T2 weights and int8 activations in the layouts
 * of llama.cpp's TQ2_0 kernel (ggml_abi.h describes both blocks), and the
 * GEMV that ggml runs with it: one vec_dot per row, rows split over the
 * threads in contiguous ranges. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers/ternary_peers.h"

#define QK LK_GGML_QK_K
#define HALF_ONE 0x3c00 /* 1.0 as an IEEE half */

/* One row of k LK_T2 codes (code of value i at bits 2 (i % 4) of byte
 * i / 4) as k / 256 TQ2_0 blocks of scale 1.  Both formats store value + 1
 * in two bits, so the codes move unchanged, only to other places. */
static void pack_row(const uint8_t *w, int64_t k, lk_ggml_block_tq2_0 *b)
{
    for (int64_t blk = 0; blk < k / QK; blk++, b++) {
        memset(b->qs, 0, sizeof b->qs);
        b->d = HALF_ONE;
        for (int e = 0; e < QK; e++) {
            const int64_t i = blk * QK + e;
            const int code = w[i / 4] >> (2 * (i % 4)) & 3;
            b->qs[32 * (e / 128) + e % 32] |= (uint8_t)(code << (2 * ((e % 128) / 32)));
        }
    }
}

int lk_peer_tq2_0_create(lk_peer_t2 *p, const uint8_t *w)
{
    const int64_t nb = p->k / QK, rowb = p->k / 4;
    p->w = malloc((size_t)(p->n * nb) * sizeof(lk_ggml_block_tq2_0));
    p->act = malloc((size_t)nb * sizeof(lk_ggml_block_q8_K));
    if (p->w == NULL || p->act == NULL)
        return -1;
    for (int64_t r = 0; r < p->n; r++)
        pack_row(w + r * rowb, p->k, (lk_ggml_block_tq2_0 *)p->w + r * nb);
    return 0;
}

void lk_peer_tq2_0_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                       int threads)
{
    const int64_t nb = p->k / QK;
    lk_ggml_block_q8_K *a = (lk_ggml_block_q8_K *)p->act;
    const lk_ggml_block_tq2_0 *w = (const lk_ggml_block_tq2_0 *)p->w;
    /* The activations are int8 already: q8_K blocks of scale 1 with the
     * sums of 16 that the kernel subtracts (its codes are value + 1). */
    for (int64_t i = 0; i < nb; i++) {
        a[i].d = 1.0f;
        memcpy(a[i].qs, x + i * QK, QK);
        for (int j = 0; j < QK / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += x[i * QK + 16 * j + l];
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
            p->dot((int)p->k, &s, 0, w + r * nb, 0, a, 0, 1);
            y[r] = (s / x_scale) * w_scale;
        }
    }
}
