/* AVX-512 VNNI: causal attention (docs/numerics.md section 12.3), the shared kernel of
 * backends/cpu/kernels/attention.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/attention.c"
