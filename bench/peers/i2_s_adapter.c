/* Lockstep benchmarks: LK_T2 weights in the layout of bitnet.cpp's I2_S
 * kernel (ggml_abi.h describes it), and the GEMV that bitnet.cpp runs with
 * it: one dot per row against the int8 activations as they are, then the
 * activations' sum subtracted (the codes are value + 1) and the scales
 * applied; rows split over the threads in contiguous ranges. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif

#include "bench/peers/ternary_peers.h"

#define QB LK_BITNET_QK_I2_S /* values in an I2_S block of QB / 4 bytes */

/* One row of k LK_T2 codes (code of value i at bits 2 (i % 4) of byte
 * i / 4) in I2_S blocks; both store value + 1 in two bits. */
static void pack_row(const uint8_t *w, int64_t k, uint8_t *dst)
{
    memset(dst, 0, (size_t)(k / 4));
    for (int64_t i = 0; i < k; i++) {
        const int code = w[i / 4] >> (2 * (i % 4)) & 3;
        const int64_t blk = i / QB, j = i % QB;
        dst[QB / 4 * blk + j % (QB / 4)] |= (uint8_t)(code << (6 - 2 * (j / (QB / 4))));
    }
}

int lk_peer_i2_s_create(lk_peer_t2 *p, const uint8_t *w)
{
    const int64_t rowb = p->k / 4;
    /* + 32: bitnet.cpp keeps a row's scale after its bytes, and its kernel
     * may load a whole vector at the end of the last row */
    p->w = calloc(1, (size_t)(p->n * rowb) + 32);
    if (p->w == NULL)
        return -1;
    for (int64_t r = 0; r < p->n; r++)
        pack_row(w + r * rowb, p->k, (uint8_t *)p->w + r * rowb);
    return 0;
}

void lk_peer_i2_s_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                      int threads)
{
    const int64_t rowb = p->k / 4;
    int32_t xsum = 0; /* bitnet.cpp's act_sums */
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
            p->dot((int)p->k, &s, 0, (const uint8_t *)p->w + r * rowb, 0, x, 0, 1);
            y[r] = ((float)((int32_t)s - xsum) / x_scale) * w_scale;
        }
    }
}
