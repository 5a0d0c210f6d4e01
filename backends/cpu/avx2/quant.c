/* AVX2: BitNet b1.58 quantisation (docs/numerics.md section 8), the shared kernel of
 * backends/cpu/kernels/quant.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/quant.c"
