/* Lockstep reference: RoPE (docs/numerics.md section 12.2).  Each pair is
 * read whole before either element is written, so y may be x. */
#include <stdint.h>

#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/rope.h"

lk_status lk_ref_rope(const lk_rope_args *a)
{
    const int64_t hd = a->head_dim, half = hd / 2, heads = a->x.cols / hd;
    const int il = (a->flags & LK_ROPE_INTERLEAVED) != 0;
    const float lt = lk_logf(a->theta);
    for (int64_t r = 0; r < a->x.rows; r++) {
        int32_t pos = ((const int32_t *)a->pos.data)[r * a->pos.ld];
        for (int64_t i = 0; i < half; i++) {
            float s, c;
            lk_rope_sincos(pos, lk_rope_inv_freq(i, hd, lt), &s, &c);
            for (int64_t h = 0; h < heads; h++) {
                int64_t j0 = h * hd + lk_rope_i0(i, il), j1 = h * hd + lk_rope_i1(i, hd, il);
                float x0 = lk_ref_load(a->x.data, a->x.dtype, r * a->x.ld + j0);
                float x1 = lk_ref_load(a->x.data, a->x.dtype, r * a->x.ld + j1);
                float y0, y1;
                lk_rope_rotate(x0, x1, s, c, &y0, &y1);
                lk_ref_store(a->y.data, a->y.dtype, r * a->y.ld + j0, y0);
                lk_ref_store(a->y.data, a->y.dtype, r * a->y.ld + j1, y1);
            }
        }
    }
    return LK_OK;
}
