/* NEON: packed ternary format and ternary GEMM (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/ternary.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/ternary.c"
