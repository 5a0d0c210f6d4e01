/* Lockstep command: `lockstep <command> [options]`. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <string.h>

#include <lockstep.h>
#include <lockstep/driver.h>

#include "tools/cmd.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} lk_commands[] = {
    {"info", lk_cmd_info, "version, drivers, devices, topology, and what \"auto\" picks"},
    {"check", lk_cmd_check, "run every op on every device and compare bits with the reference"},
    {"bench", lk_cmd_bench, "time ops against the peers this build knows (prints ratios)"},
    {"demo", lk_cmd_demo, "a BitNet b1.58 model on every device: the same logits bits"},
};
#define LK_NCOMMANDS (sizeof lk_commands / sizeof lk_commands[0])

static void usage(FILE *f)
{
    fprintf(f, "Usage: lockstep <command> [options]\n"
               "       lockstep --help | --version\n\n"
               "Lockstep gives the same bits on every device.  Commands:\n");
    for (size_t i = 0; i < LK_NCOMMANDS; i++)
        fprintf(f, "  %-7s %s\n", lk_commands[i].name, lk_commands[i].help);
    fprintf(f, "\n`lockstep <command> --help` describes a command's options.\n"
               "Environment: LOCKSTEP_DEVICE, LOCKSTEP_DRIVER_PATH, LOCKSTEP_CPU_ISA,\n"
               "LOCKSTEP_NUM_THREADS, LOCKSTEP_DEBUG (see docs/api.md).\n");
}

static void version(void)
{
    printf("lockstep %s (library %s, numerical contract %d, driver ABI %u)\n",
           LK_VERSION_STRING, lk_version_string(), lk_contract_version(),
           (unsigned)LK_DRIVER_ABI_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        version();
        return 0;
    }
    for (size_t i = 0; i < LK_NCOMMANDS; i++)
        if (!strcmp(argv[1], lk_commands[i].name))
            return lk_commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lockstep: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
