/* NEON: element-wise unary ops and conversions (docs/numerics.md sections 3 and 7), the shared kernel of
 * backends/cpu/kernels/unary.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/unary.c"
