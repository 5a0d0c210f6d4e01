/* Lockstep benchmarks: the ternary peers' common entry points. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>

#include "bench/peers/ternary_peers.h"

lk_peer_t2 *lk_peer_t2_create(int kind, const uint8_t *w, int64_t n, int64_t k)
{
    if (n <= 0 || k <= 0 || k % 256 != 0 || k > (1 << 20) || n * k > INT32_MAX)
        return NULL;
    lk_peer_t2 *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->kind = kind;
    p->n = n;
    p->k = k;
    int st = kind == LK_PEER_TQ2_0 ? lk_peer_tq2_0_create(p, w)
             : kind == LK_PEER_I2_S ? lk_peer_i2_s_create(p, w)
                                    : -1;
    if (st != 0) {
        lk_peer_t2_destroy(p);
        return NULL;
    }
    return p;
}

void lk_peer_t2_run(lk_peer_t2 *p, const int8_t *x, float x_scale, float w_scale, float *y,
                    int threads)
{
    if (p->kind == LK_PEER_TQ2_0)
        lk_peer_tq2_0_run(p, x, x_scale, w_scale, y, threads);
    else
        lk_peer_i2_s_run(p, x, x_scale, w_scale, y, threads);
}

void lk_peer_t2_destroy(lk_peer_t2 *p)
{
    if (p == NULL)
        return;
    free(p->w);
    free(p->act);
    free(p);
}
