/* AVX-512 VNNI: row reductions (docs/numerics.md section 5), the shared kernel of
 * backends/cpu/kernels/reduce.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/reduce.c"
