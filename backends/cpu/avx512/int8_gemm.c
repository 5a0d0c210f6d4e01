/* AVX-512 VNNI: int8 GEMM (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/int8_gemm.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/int8_gemm.c"
