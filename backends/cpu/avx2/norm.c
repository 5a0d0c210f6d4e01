/* AVX2: RMSNorm and LayerNorm (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/norm.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/norm.c"
