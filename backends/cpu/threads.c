/* Lockstep CPU driver: OpenMP teams with the FP guard and hwloc binding. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#ifdef LK_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef LK_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "backends/cpu/threads.h"
#include "backends/host.h"
#include "core/builtin.h" /* lk_topo_hwloc: why is said there */
#include "numerics/fpenv.h"

#define LK_MAX_THREADS 1024

/* Below this much work per thread a team costs more than it saves (a
 * wake-up is a few microseconds; 2^16 bytes stream in about as long). */
#define LK_WORK_PER_THREAD 65536.0

static int lk_env_threads(int *n)
{
    const char *s = getenv("LOCKSTEP_NUM_THREADS");
    if (s == NULL || *s == '\0')
        return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 1 || v > LK_MAX_THREADS)
        return -1;
    *n = (int)v;
    return 1;
}

int lk_cpu_threads_default(void)
{
    int n;
    if (lk_env_threads(&n) == 1)
        return n;
    return lk_backend_num_cores();
}

lk_status lk_cpu_threads_resolve(const lk_queue_opts *opts, int *nthreads)
{
    if (opts != NULL && opts->num_threads != 0) {
        if (opts->num_threads < 0 || opts->num_threads > LK_MAX_THREADS)
            return lk_kernel_error(LK_ERR_INVALID_ARGUMENT,
                                   "lk_queue_create: num_threads = %d (expected 0 for the default, or 1 to %d)",
                                   opts->num_threads, LK_MAX_THREADS);
        *nthreads = opts->num_threads;
        return LK_OK;
    }
    int n;
    switch (lk_env_threads(&n)) {
    case 1:
        *nthreads = n;
        return LK_OK;
    case -1:
        return lk_kernel_error(LK_ERR_INVALID_ARGUMENT,
                               "LOCKSTEP_NUM_THREADS=\"%s\" is not a thread count from 1 to %d",
                               getenv("LOCKSTEP_NUM_THREADS"), LK_MAX_THREADS);
    default:
        *nthreads = lk_backend_num_cores();
        return LK_OK;
    }
}

void *lk_cpu_scratch(lk_cpu_queue *q, size_t bytes, const char *who)
{
    if (bytes < 64)
        bytes = 64; /* never NULL for an empty request */
    if (bytes <= q->scratch_bytes)
        return q->scratch;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0) {
        lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "%s: no memory for %zu bytes of scratch", who, bytes);
        return NULL;
    }
    free(q->scratch);
    q->scratch = p;
    q->scratch_bytes = bytes;
    return p;
}

int lk_cpu_threads_for(const lk_cpu_queue *q, double work, int64_t items)
{
    double want = work / LK_WORK_PER_THREAD;
    int nt = q->nthreads;
    if (want < nt)
        nt = want < 1.0 ? 1 : (int)want;
    if (items < nt)
        nt = items < 1 ? 1 : (int)items;
    return nt;
}

#if defined(LK_HAVE_OPENMP) && defined(LK_HAVE_HWLOC)
/* The core this thread is bound to, -1 none: pool threads persist between
 * teams, so each binds once and keeps it. */
static _Thread_local int lk_bound_core = -1;

/* The core (hwloc logical index) the calling thread runs on, -1 unknown. */
static int lk_current_core(hwloc_topology_t topo)
{
    int cpu = sched_getcpu();
    hwloc_obj_t pu = cpu < 0 ? NULL : hwloc_get_pu_obj_by_os_index(topo, (unsigned)cpu);
    hwloc_obj_t core = pu ? hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu) : NULL;
    return core ? (int)core->logical_index : -1;
}

/* Workers 1 .. nt - 1 go to the cores other than the caller's, in order:
 * the caller (tid 0) is not ours to bind, and a worker on its core would
 * halve the speed of both while every other thread waits for them.  No
 * binding when the team oversubscribes the cores or the user asked OpenMP
 * to place threads. */
static void lk_bind_worker(int tid, int nt, int caller_core)
{
    if (tid == 0)
        return;
    hwloc_topology_t topo = (hwloc_topology_t)lk_topo_hwloc();
    if (topo == NULL || omp_get_proc_bind() != omp_proc_bind_false)
        return;
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    if (nt > cores)
        return;
    int want = tid - 1 < caller_core || caller_core < 0 ? tid - 1 : tid;
    if (lk_bound_core == want)
        return;
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)want);
    if (core == NULL || core->cpuset == NULL)
        return;
    if (hwloc_set_cpubind(topo, core->cpuset, HWLOC_CPUBIND_THREAD) == 0)
        lk_bound_core = want;
}

static int lk_caller_core(void)
{
    hwloc_topology_t topo = (hwloc_topology_t)lk_topo_hwloc();
    return topo ? lk_current_core(topo) : -1;
}
#else
static void lk_bind_worker(int tid, int nt, int caller_core)
{
    (void)tid;
    (void)nt;
    (void)caller_core;
}

static int lk_caller_core(void) { return -1; }
#endif

void lk_cpu_team(int want, lk_cpu_body body, void *ctx)
{
    if (want <= 1) {
        body(ctx, 0, 1);
        return;
    }
#ifdef LK_HAVE_OPENMP
    const int caller_core = lk_caller_core();
#pragma omp parallel num_threads(want)
    {
        int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        lk_fpenv env;
        lk_fpenv_enter(&env);
        lk_bind_worker(tid, nt, caller_core);
        body(ctx, tid, nt);
        lk_fpenv_leave(&env);
    }
#else
    (void)lk_bind_worker;
    (void)lk_caller_core;
    body(ctx, 0, 1);
#endif
}

void lk_cpu_barrier(void)
{
#ifdef LK_HAVE_OPENMP
#pragma omp barrier
#endif
}

typedef struct lk_for_ctx {
    int64_t n;
    lk_cpu_range_fn fn;
    void *ctx;
} lk_for_ctx;

static void lk_for_body(void *p, int tid, int nt)
{
    const lk_for_ctx *f = (const lk_for_ctx *)p;
    int64_t b, e;
    lk_cpu_part(f->n, tid, nt, &b, &e);
    if (b < e)
        f->fn(f->ctx, b, e, tid);
}

void lk_cpu_for(int threads, int64_t n, lk_cpu_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (threads <= 1 || n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    lk_for_ctx f = {n, fn, ctx};
    lk_cpu_team(threads > n ? (int)n : threads, lk_for_body, &f);
}
