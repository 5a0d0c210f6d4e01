/* AVX-512 VNNI: packed ternary format and ternary GEMM (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/ternary.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/ternary.c"
