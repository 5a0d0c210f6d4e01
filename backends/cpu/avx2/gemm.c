/* AVX2: GEMM (docs/numerics.md section 4), the shared kernel of
 * backends/cpu/kernels/gemm.c on 256-bit vectors, 6 x 16 micro-tiles. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/gemm.c"
