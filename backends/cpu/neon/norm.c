/* NEON: RMSNorm and LayerNorm (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/norm.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/norm.c"
