/* AVX2: element-wise add and mul (docs/numerics.md section 7), the shared kernel of
 * backends/cpu/kernels/binary.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/binary.c"
