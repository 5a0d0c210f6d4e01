/* Lockstep CPU driver: worker threads (internal).
 *
 * Work is only ever split into independent outputs (rows, column panels of
 * a GEMM, chunks of a row sum whose partials are then combined in the
 * contract's order), so no bit depends on how many threads run or which
 * one computes what.  Every worker runs the FP environment guard
 * (numerics.md section 2) and is bound to a core with hwloc, once. */
#ifndef LK_CPU_THREADS_H
#define LK_CPU_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep/device.h>

struct lk_cpu_device;

/* The CPU driver's queue: the device, how many threads its ops use, and
 * scratch memory kept between calls (a queue serves one caller at a time,
 * and repeated GEMVs should not pay for malloc and page faults). */
typedef struct lk_cpu_queue {
    const struct lk_cpu_device *dev;
    int nthreads;
    void *scratch;
    size_t scratch_bytes;
} lk_cpu_queue;

/* The queue's scratch, at least `bytes` long and 64-byte aligned (its
 * contents are not kept); NULL with the error message set when memory runs
 * out.  Valid until the next call on the queue. */
void *lk_cpu_scratch(lk_cpu_queue *q, size_t bytes, const char *who);

/* opts->num_threads, else LOCKSTEP_NUM_THREADS, else the physical cores;
 * LK_ERR_INVALID_ARGUMENT (message set) for a malformed variable. */
lk_status lk_cpu_threads_resolve(const lk_queue_opts *opts, int *nthreads);

/* The default count (LOCKSTEP_NUM_THREADS or the cores), for device props. */
int lk_cpu_threads_default(void);

/* How many of the queue's threads are worth waking for `work` bytes or
 * flops of independent work split into `items` parts: 1 for small calls,
 * where waking a team costs more than it saves. */
int lk_cpu_threads_for(const lk_cpu_queue *q, double work, int64_t items);

/* Run body(ctx, tid, nt) on a team of nt <= want threads (tid 0 is the
 * caller).  The body may call lk_cpu_barrier; it must not fail (allocate
 * before the team starts). */
typedef void (*lk_cpu_body)(void *ctx, int tid, int nt);
void lk_cpu_team(int want, lk_cpu_body body, void *ctx);

/* Every thread of the current team waits for the others. */
void lk_cpu_barrier(void);

/* Part tid of nt of [0, n), contiguous, sizes differing by at most one. */
static inline void lk_cpu_part(int64_t n, int tid, int nt, int64_t *begin, int64_t *end)
{
    int64_t q = n / nt, r = n % nt;
    *begin = tid * q + (tid < r ? tid : r);
    *end = *begin + q + (tid < r ? 1 : 0);
}

/* fn(ctx, begin, end, tid) over contiguous parts of [0, n) on up to
 * `threads` threads; tid < threads picks per-thread scratch. */
typedef void (*lk_cpu_range_fn)(void *ctx, int64_t begin, int64_t end, int tid);
void lk_cpu_for(int threads, int64_t n, lk_cpu_range_fn fn, void *ctx);

#endif
