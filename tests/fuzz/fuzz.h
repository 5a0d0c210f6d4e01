/* Lockstep fuzz targets: libFuzzer's entry points, which every target
 * defines (LLVMFuzzerInitialize where it needs set-up) and replay.c calls. */
#ifndef LK_TESTS_FUZZ_H
#define LK_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
