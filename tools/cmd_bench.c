/* Lockstep command: `lockstep bench`, a thin front for the harness in
 * bench/ (bench/bench.h). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>

#include "tools/cmd.h"

#ifdef LK_HAVE_BENCH
#include "bench/bench.h"
#endif

int lk_cmd_bench(int argc, char **argv)
{
#ifdef LK_HAVE_BENCH
    return lk_bench_main(argc, argv);
#else
    (void)argc;
    (void)argv;
    fprintf(stderr, "lockstep bench: not built\n");
    return 2;
#endif
}
