/* AVX2: softmax and log-softmax (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/softmax.c on the vocabulary of avx2/vec.h. */
#include "backends/cpu/avx2/vec.h"
#include "backends/cpu/kernels/softmax.c"
