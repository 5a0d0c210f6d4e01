/* Lockstep benchmarks: the harness behind `lockstep bench` (and
 * `make bench`).  Timing lives here only, never in the tests. */
#ifndef LK_BENCH_BENCH_H
#define LK_BENCH_BENCH_H

/* argv[0] is "bench"; returns 0, 1 (a run failed) or 2 (usage). */
int lk_bench_main(int argc, char **argv);

#endif
