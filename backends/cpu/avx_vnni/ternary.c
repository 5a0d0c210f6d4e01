/* AVX-VNNI: ternary GEMM with vpdpbusd (docs/numerics.md section 9), the shared kernel of
 * backends/cpu/kernels/ternary.c on the vocabulary of avx_vnni/vec.h. */
#include "backends/cpu/avx_vnni/vec.h"
#include "backends/cpu/kernels/ternary.c"
