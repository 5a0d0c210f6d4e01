/* AVX-512 VNNI: BitNet b1.58 quantisation (docs/numerics.md section 8), the shared kernel of
 * backends/cpu/kernels/quant.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/quant.c"
