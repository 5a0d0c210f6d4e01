/* Lockstep CPU driver (backends/cpu): the built-in "cpu" driver.
 *
 * Devices: "cpu" (the best variant this machine runs natively, or the one
 * LOCKSTEP_CPU_ISA names), one device per native variant ("cpu:avx2",
 * "cpu:avx-vnni", "cpu:avx512-vnni") so that they can be compared, and with
 * --enable-emulated-isa every x86 variant compiled against SIMDe
 * ("cpu:avx2@simde", ...; emulated, never chosen by "auto"). */
#ifndef LK_CPU_CPU_H
#define LK_CPU_CPU_H

#include <lockstep/driver.h>

const lk_driver *lk_cpu_driver(void);

#endif
