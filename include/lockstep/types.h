/* Lockstep: element types and the 2-D tensor descriptor. */
#ifndef LOCKSTEP_TYPES_H
#define LOCKSTEP_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <lockstep/export.h>

LK_BEGIN_DECLS

typedef enum lk_dtype {
    LK_F32 = 1,  /* IEEE binary32 */
    LK_BF16 = 2, /* bfloat16, stored as uint16_t */
    LK_F16 = 3,  /* IEEE binary16, stored as uint16_t */
    LK_I8 = 4,
    LK_I32 = 5,
    LK_I64 = 6,
    LK_T2 = 7    /* packed ternary, 4 weights per byte (docs/formats.md) */
} lk_dtype;

/* A row-major matrix view: element (r, c) of matrix b of a batch lives at
 * data + (b * batch_stride + r * ld + c) elements.  ld is counted in
 * elements (for LK_T2 too, where it must be a multiple of 4); ld == 0 means
 * ld = cols.  batch_stride is read by batched ops only; 0 there means every
 * matrix of the batch is the same one (allowed for inputs only).
 * Views never own memory. */
typedef struct lk_tensor {
    void *data;
    lk_dtype dtype;
    int64_t rows;
    int64_t cols;
    int64_t ld;
    int64_t batch_stride;
} lk_tensor;

/* A view of a dense rows x cols matrix. */
static inline lk_tensor lk_mat(const void *data, lk_dtype dtype, int64_t rows,
                               int64_t cols)
{
    lk_tensor t;
    t.data = (void *)(uintptr_t)data;
    t.dtype = dtype;
    t.rows = rows;
    t.cols = cols;
    t.ld = cols;
    t.batch_stride = 0;
    return t;
}

/* Same with an explicit leading dimension. */
static inline lk_tensor lk_mat_ld(const void *data, lk_dtype dtype, int64_t rows,
                                  int64_t cols, int64_t ld)
{
    lk_tensor t = lk_mat(data, dtype, rows, cols);
    t.ld = ld;
    return t;
}

/* "f32", "bf16", ... or "?" for a value that is no lk_dtype. */
LK_API const char *lk_dtype_name(lk_dtype dtype);

/* Bytes one element takes; 0 for LK_T2 (a quarter byte) and unknown values. */
LK_API size_t lk_dtype_size(lk_dtype dtype);

/* Bit-exact conversions of the contract (docs/numerics.md, "Conversions"),
 * for host code that prepares inputs or reads outputs. */
LK_API uint16_t lk_f32_to_bf16(float x);
LK_API uint16_t lk_f32_to_f16(float x);
LK_API float lk_bf16_to_f32(uint16_t x);
LK_API float lk_f16_to_f32(uint16_t x);

LK_END_DECLS

#endif
