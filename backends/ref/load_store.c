/* Lockstep reference: element loads and stores (numerics.md section 3),
 * built on the conversions of numerics/scalar.h. */
#include "backends/ref/load_store.h"

#include "numerics/scalar.h"

float lk_ref_load(const void *base, lk_dtype dt, int64_t index)
{
    switch (dt) {
    case LK_BF16:
        return lk_from_bf16(((const uint16_t *)base)[index]);
    case LK_F16:
        return lk_from_f16(((const uint16_t *)base)[index]);
    default: /* LK_F32 */
        return ((const float *)base)[index];
    }
}

void lk_ref_store(void *base, lk_dtype dt, int64_t index, float v)
{
    switch (dt) {
    case LK_BF16:
        ((uint16_t *)base)[index] = lk_to_bf16(v);
        break;
    case LK_F16:
        ((uint16_t *)base)[index] = lk_to_f16(v);
        break;
    default: /* LK_F32 */
        ((float *)base)[index] = lk_canon_f32(v);
        break;
    }
}

void lk_ref_load_row(const lk_tensor *t, int64_t r, float *out)
{
    int64_t ld = t->ld ? t->ld : t->cols;
    int64_t base = r * ld;
    for (int64_t c = 0; c < t->cols; c++)
        out[c] = lk_ref_load(t->data, t->dtype, base + c);
}
