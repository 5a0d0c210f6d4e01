/* AVX-512 VNNI: element-wise unary ops and conversions (docs/numerics.md sections 3 and 7), the shared kernel of
 * backends/cpu/kernels/unary.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/unary.c"
