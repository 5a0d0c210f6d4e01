/* AVX-512 VNNI: element-wise add and mul (docs/numerics.md section 7), the shared kernel of
 * backends/cpu/kernels/binary.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/binary.c"
