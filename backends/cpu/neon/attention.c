/* NEON: causal attention (docs/numerics.md section 12.3), the shared kernel of
 * backends/cpu/kernels/attention.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/attention.c"
