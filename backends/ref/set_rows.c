/* Lockstep reference: row scatter, lk_set_rows (docs/numerics.md section
 * 12.4.1).  The core has checked every index against dst's rows.  Rows go
 * in order, so a later row with the same index overwrites an earlier one:
 * the last wins, the rule every device keeps. */
#include <stdint.h>
#include <string.h>

#include "backends/ref/ref.h"

lk_status lk_ref_set_rows(const lk_set_rows_args *a)
{
    const size_t es = lk_dtype_size(a->src.dtype);
    const size_t row = (size_t)a->src.cols * es;
    for (int64_t r = 0; r < a->src.rows; r++) {
        int64_t i = ((const int32_t *)a->idx.data)[r * a->idx.ld];
        memcpy((char *)a->dst.data + (size_t)(i * a->dst.ld) * es,
               (const char *)a->src.data + (size_t)(r * a->src.ld) * es, row);
    }
    return LK_OK;
}
