/* Lockstep backends (internal): lk_bitnet_decode as the composition of its
 * ops on any kernel table (bitnet.c).  The core offers it to every driver
 * as lk_host's bitnet_compose; the built-in drivers and the CUDA module
 * link it themselves.  The scratch layout it works in is public:
 * lk_bitnet_layout_of in <lockstep/driver.h>. */
#ifndef LK_BACKENDS_BITNET_H
#define LK_BACKENDS_BITNET_H

#include <lockstep/driver.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What lk_host's bitnet_compose does (include/lockstep/driver.h): every
 * kernel it names must be non-NULL in k.  Each call to a kernel is one of
 * the ops of the composition, with the arguments the core would give it. */
lk_status lk_bitnet_compose(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                            int idx_ready);

#ifdef __cplusplus
}
#endif

#endif
