/* NEON: BitNet b1.58 quantisation (docs/numerics.md section 8), the shared kernel of
 * backends/cpu/kernels/quant.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/quant.c"
