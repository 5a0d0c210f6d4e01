/* AVX-512 VNNI: GEMM (docs/numerics.md section 4), the shared kernel of
 * backends/cpu/kernels/gemm.c on 512-bit vectors, 12 x 32 micro-tiles. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/gemm.c"
