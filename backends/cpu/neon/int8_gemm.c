/* NEON: int8 GEMM (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/int8_gemm.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/int8_gemm.c"
