/* Lockstep reference: embedding lookup (docs/numerics.md section 12.4).
 * The core has checked every id against the table's rows. */
#include <stdint.h>

#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"

lk_status lk_ref_embedding(const lk_embedding_args *a)
{
    for (int64_t r = 0; r < a->ids.rows; r++) {
        int64_t id = ((const int32_t *)a->ids.data)[r * a->ids.ld];
        for (int64_t c = 0; c < a->table.cols; c++)
            lk_ref_store(a->y.data, a->y.dtype, r * a->y.ld + c,
                         lk_ref_load(a->table.data, a->table.dtype, id * a->table.ld + c));
    }
    return LK_OK;
}
