/* Lockstep core: dtype helpers (internal). */
#ifndef LK_CORE_DTYPE_H
#define LK_CORE_DTYPE_H

#include <lockstep/types.h>

/* 1 when dtype is one of the lk_dtype values. */
int lk_dtype_valid(int dtype);

/* dtype sets, as bit masks of (1u << dtype) */
#define LK_DT(d) (1u << (d))
#define LK_DT_FLOAT (LK_DT(LK_F32) | LK_DT(LK_BF16) | LK_DT(LK_F16))

#endif
