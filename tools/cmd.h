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

/* tools/args.c: seconds on the monotonic clock; a comma-separated list of
 * at most max integers in [lo, hi] into v (their count, or -1). */
double lk_tool_now(void);
int lk_tool_parse_list(const char *s, long *v, int max, long lo, long hi);

#endif
