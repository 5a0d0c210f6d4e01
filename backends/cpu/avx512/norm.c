/* AVX-512 VNNI: RMSNorm and LayerNorm (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/norm.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/norm.c"
