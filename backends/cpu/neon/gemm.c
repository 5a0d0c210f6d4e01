/* NEON: GEMM (docs/numerics.md section 4), the shared kernel of
 * backends/cpu/kernels/gemm.c on 128-bit vectors, 6 x 16 micro-tiles. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/gemm.c"
