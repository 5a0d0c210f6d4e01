/* Lockstep core: dtype names and sizes, and the contract's conversions
 * exported for host code (the inline versions live in numerics/scalar.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <lockstep/driver.h>
#include <lockstep/types.h>

#include "core/dtype.h"
#include "numerics/scalar.h"

LK_API const char *lk_dtype_name(lk_dtype dtype)
{
    switch (dtype) {
    case LK_F32: return "f32";
    case LK_BF16: return "bf16";
    case LK_F16: return "f16";
    case LK_I8: return "i8";
    case LK_I32: return "i32";
    case LK_I64: return "i64";
    case LK_T2: return "t2";
    }
    return "?";
}

LK_API size_t lk_dtype_size(lk_dtype dtype)
{
    return lk_driver_dtype_size(dtype); /* one table, shared with modules */
}

int lk_dtype_valid(int dtype)
{
    return dtype >= LK_F32 && dtype <= LK_T2;
}

LK_API uint16_t lk_f32_to_bf16(float x)
{
    return lk_to_bf16(x);
}

LK_API uint16_t lk_f32_to_f16(float x)
{
    return lk_to_f16(x);
}

LK_API float lk_bf16_to_f32(uint16_t x)
{
    return lk_from_bf16(x);
}

LK_API float lk_f16_to_f32(uint16_t x)
{
    return lk_from_f16(x);
}
