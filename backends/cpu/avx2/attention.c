/* AVX2: causal attention (docs/numerics.md section 12.3), the shared kernel of
 * backends/cpu/kernels/attention.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/attention.c"
