/* Lockstep command: the sub-commands of `lockstep` (tools/lockstep.c). */
#ifndef LK_TOOLS_CMD_H
#define LK_TOOLS_CMD_H

/* Each takes the arguments after its name (argv[0] is the sub-command) and
 * returns the process exit status: 0 success, 1 failure, 2 usage error. */
int lk_cmd_info(int argc, char **argv);
int lk_cmd_check(int argc, char **argv);
int lk_cmd_bench(int argc, char **argv);
int lk_cmd_demo(int argc, char **argv);
/* `lockstep demo --tp N` / `--pp N` (tools/cmd_demo_tp.c) */
int lk_cmd_demo_sharded(int argc, char **argv);

#endif
