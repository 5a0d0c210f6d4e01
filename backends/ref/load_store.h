/* Lockstep reference: reading and writing one element of a float tensor
 * (docs/numerics.md section 3).  Loads widen f32/bf16/f16 exactly to f32;
 * stores round once to the tensor's dtype and write the canonical NaN.
 * Only LK_F32, LK_BF16 and LK_F16 are accepted: the core has checked the
 * dtype before any kernel runs. */
#ifndef LK_REF_LOAD_STORE_H
#define LK_REF_LOAD_STORE_H

#include <stdint.h>

#include <lockstep/types.h>

/* Element `index` (counted in elements of dt) of the array at base. */
float lk_ref_load(const void *base, lk_dtype dt, int64_t index);

/* Store v rounded to dt (canonical NaN) as element `index` of base. */
void lk_ref_store(void *base, lk_dtype dt, int64_t index, float v);

/* Widen row r of matrix 0 of t (element (r, c) at r * ld + c) into
 * out[0 .. t->cols). */
void lk_ref_load_row(const lk_tensor *t, int64_t r, float *out);

#endif
