/* NEON dotprod: int8 GEMM with sdot (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/int8_gemm.c on the vocabulary of neon_dotprod/vec.h. */
#include "backends/cpu/neon_dotprod/vec.h"
#include "backends/cpu/kernels/int8_gemm.c"
