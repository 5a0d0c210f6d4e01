/* NEON: row reductions (docs/numerics.md section 5), the shared kernel of
 * backends/cpu/kernels/reduce.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/reduce.c"
