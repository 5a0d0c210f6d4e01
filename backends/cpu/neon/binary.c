/* NEON: element-wise add and mul (docs/numerics.md section 7), the shared kernel of
 * backends/cpu/kernels/binary.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/binary.c"
