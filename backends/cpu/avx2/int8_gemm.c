/* AVX2: int8 GEMM (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/int8_gemm.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/int8_gemm.c"
