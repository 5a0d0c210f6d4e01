/* Lockstep command: `lockstep demo`, a placeholder until the BitNet work
 * brings an end-to-end model run. */
#include <stdio.h>
#include <string.h>

#include "tools/cmd.h"

int lk_cmd_demo(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("Usage: lockstep demo\n\nNot available yet: the demo (a BitNet b1.58 "
               "model run, identical on every device) comes with the BitNet issue.\n");
        return 0;
    }
    fprintf(stderr, "lockstep demo: not available yet; the demo comes with the BitNet issue\n");
    return 2;
}
