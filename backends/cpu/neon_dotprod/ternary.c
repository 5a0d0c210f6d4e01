/* NEON dotprod: ternary GEMM with sdot (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/ternary.c on the vocabulary of neon_dotprod/vec.h. */
#include "backends/cpu/neon_dotprod/vec.h"
#include "backends/cpu/kernels/ternary.c"
