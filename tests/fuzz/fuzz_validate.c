/* libFuzzer target: the argument validator of every public op, fast.
 *
 * fuzz_ops.c with LK_FUZZ_VALIDATE: the same input format and checks (an
 * error must carry a message and leave every buffer untouched; any access
 * past a descriptor's extent is a sanitizer report), but dimensions of
 * 0..5 or an edge value, buffers of at most 64 KiB and the "ref" device
 * on one thread.  Most inputs are refused by the validator; the rest run
 * on a few elements, so an input takes microseconds rather than the
 * milliseconds of fuzz_ops's 70-wide shapes. */
#define LK_FUZZ_VALIDATE 1
#include "tests/fuzz/fuzz_ops.c"
