/* NEON: softmax and log-softmax (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/softmax.c on the vocabulary of neon/vec.h. */
#include "backends/cpu/neon/vec.h"
#include "backends/cpu/kernels/softmax.c"
