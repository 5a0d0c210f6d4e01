/* Lockstep reference: element-wise add and mul (docs/numerics.md
 * section 7).  b is broadcast over rows when it has one row and a more.
 * y may be a or b itself: each element is read before it is written. */
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"

lk_status lk_ref_binary(const lk_binary_args *p)
{
    int broadcast = p->b.rows == 1 && p->a.rows > 1;
    for (int64_t r = 0; r < p->a.rows; r++) {
        int64_t ab = r * p->a.ld, bb = (broadcast ? 0 : r) * p->b.ld, yb = r * p->y.ld;
        for (int64_t c = 0; c < p->a.cols; c++) {
            float x = lk_ref_load(p->a.data, p->a.dtype, ab + c);
            float z = lk_ref_load(p->b.data, p->b.dtype, bb + c);
            float v = p->op == LK_BINARY_MUL ? x * z : x + z;
            lk_ref_store(p->y.data, p->y.dtype, yb + c, v);
        }
    }
    return LK_OK;
}
