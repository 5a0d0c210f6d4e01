/* AVX2: row reductions (docs/numerics.md section 5), the shared kernel of
 * backends/cpu/kernels/reduce.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/reduce.c"
