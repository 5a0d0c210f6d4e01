/* AVX-512 VNNI: softmax and log-softmax (docs/numerics.md section 6), the shared kernel of
 * backends/cpu/kernels/softmax.c on the vocabulary of avx512/vec.h. */
#include "backends/cpu/avx512/vec.h"
#include "backends/cpu/kernels/softmax.c"
