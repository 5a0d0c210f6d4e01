/* Lockstep CPU driver: worker teams (a pthread pool per calling thread)
 * with the FP guard and hwloc binding. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>
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

#ifdef LK_HAVE_HWLOC
/* The core this thread is bound to, -1 none: workers persist between
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
 * binding when the team oversubscribes the cores. */
static void lk_bind_worker(int tid, int nt, int caller_core)
{
    if (tid == 0)
        return;
    hwloc_topology_t topo = (hwloc_topology_t)lk_topo_hwloc();
    if (topo == NULL)
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

/* ---- the worker pool ----
 *
 * Each thread that calls into the library gets its own pool of workers,
 * made on its first team and grown when a team asks for more (one caller
 * at a time per pool, as one thread at a time per queue).  The workers are
 * our own pthreads rather than an OpenMP team because a runtime that
 * cannot start a thread must not end the process (libgomp exits): when
 * pthread_create fails, the pool stops growing and teams run on the
 * workers it has, down to the caller alone.  No bit depends on the count.
 *
 * A team: the caller publishes the body and bumps the generation; workers
 * spin on the generation for a while, then sleep on a condition variable;
 * each worker below the team size runs the body and counts itself out.
 * The barrier spins and yields (all of a team's threads are running). */

typedef struct lk_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a new generation, or stop */
    pthread_cond_t done; /* the last worker of a team finished */
    /* generation << 16 | team size: read at once, so a worker idle in one
     * team never pairs its number with another team's size */
    _Atomic unsigned long long word;
    _Atomic int pending; /* workers of the current team still running */
    _Atomic int sleepers;
    int stop;
    int nt; /* the current team's size (the caller included) */
    lk_cpu_body body;
    void *ctx;
    int caller_core;
    _Atomic int spin; /* how long an idle worker polls before it sleeps */
    /* the barrier */
    _Atomic int bar_count;
    _Atomic unsigned bar_gen;
    int nworkers;
    int cannot_grow; /* pthread_create failed once: no more tries */
    pthread_t *threads;
} lk_pool;

typedef struct lk_worker_arg {
    lk_pool *pool;
    int tid;
    unsigned long long word;
} lk_worker_arg;

/* The calling thread's pool (NULL before its first team); the team this
 * thread is running now, if any (nested teams run serially). */
static _Thread_local lk_pool *lk_my_pool;
static _Thread_local lk_pool *lk_in_team;

static pthread_key_t lk_pool_key;
static pthread_once_t lk_pool_once = PTHREAD_ONCE_INIT;

static inline void lk_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void lk_run_member(lk_pool *p, int tid, int nt)
{
    lk_fpenv env;
    lk_fpenv_enter(&env);
    lk_in_team = p;
    lk_bind_worker(tid, nt, p->caller_core);
    p->body(p->ctx, tid, nt);
    lk_in_team = NULL;
    lk_fpenv_leave(&env);
}

static void *lk_worker_main(void *arg)
{
    lk_worker_arg a = *(lk_worker_arg *)arg;
    free(arg);
    lk_pool *p = a.pool;
    unsigned long long seen = a.word;
    for (;;) {
        unsigned long long g;
        int spins = 0, spin = atomic_load_explicit(&p->spin, memory_order_relaxed);
        while ((g = atomic_load_explicit(&p->word, memory_order_acquire)) == seen &&
               spins < spin) {
            lk_cpu_relax();
            spins++;
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load_explicit(&p->word, memory_order_acquire)) == seen && !p->stop)
                pthread_cond_wait(&p->work, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            int stop = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stop)
                return NULL;
        }
        seen = g;
        const int nt = (int)(g & 0xffff);
        if (a.tid >= nt)
            continue;
        lk_run_member(p, a.tid, nt);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* The owning thread ends: its workers end with it. */
static void lk_pool_destroy(void *arg)
{
    lk_pool *p = (lk_pool *)arg;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}

static int lk_pool_key_ok;

/* In a child of fork() only the forking thread exists: its pool's workers
 * are gone, so the child starts a new pool.  The old one is abandoned (its
 * mutex may have been held by a worker), never destroyed. */
static void lk_pool_atfork_child(void)
{
    lk_my_pool = NULL;
    lk_in_team = NULL;
    if (lk_pool_key_ok)
        pthread_setspecific(lk_pool_key, NULL);
}

static void lk_pool_init_once(void)
{
    lk_pool_key_ok = pthread_key_create(&lk_pool_key, lk_pool_destroy) == 0;
    pthread_atfork(NULL, NULL, lk_pool_atfork_child);
}

static lk_pool *lk_pool_get(void)
{
    if (lk_my_pool)
        return lk_my_pool;
    pthread_once(&lk_pool_once, lk_pool_init_once);
    if (!lk_pool_key_ok)
        return NULL;
    lk_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->threads = calloc(LK_MAX_THREADS, sizeof *p->threads);
    if (p->threads == NULL || pthread_mutex_init(&p->mu, NULL) != 0) {
        free(p->threads);
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->work, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        free(p->threads);
        free(p);
        return NULL;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->mu);
        free(p->threads);
        free(p);
        return NULL;
    }
    pthread_setspecific(lk_pool_key, p);
    lk_my_pool = p;
    return p;
}

/* Grows p towards `want` workers; returns how many it has.  Workers start
 * with every signal blocked, so the caller's handlers run on its own
 * threads. */
static int lk_pool_grow(lk_pool *p, int want)
{
    if (want > LK_MAX_THREADS - 1)
        want = LK_MAX_THREADS - 1;
    if (p->nworkers >= want || p->cannot_grow)
        return p->nworkers;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (p->nworkers < want) {
        lk_worker_arg *a = malloc(sizeof *a);
        if (a == NULL) {
            p->cannot_grow = 1;
            break;
        }
        a->pool = p;
        a->tid = p->nworkers + 1;
        a->word = atomic_load(&p->word);
        if (pthread_create(&p->threads[p->nworkers], NULL, lk_worker_main, a) != 0) {
            free(a);
            p->cannot_grow = 1;
            break;
        }
        p->nworkers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* Idle workers poll for about as long as a short op between two teams
     * takes, unless there are more threads than CPUs to run them. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    atomic_store(&p->spin, cpus > 0 && p->nworkers + 1 > cpus ? 64 : 1 << 16);
    return p->nworkers;
}

void lk_cpu_team(int want, lk_cpu_body body, void *ctx)
{
    lk_pool *p = want > 1 && lk_in_team == NULL ? lk_pool_get() : NULL;
    int nt = p ? lk_pool_grow(p, want - 1) + 1 : 1;
    if (nt > want)
        nt = want;
    if (nt <= 1) {
        body(ctx, 0, 1);
        return;
    }
    p->nt = nt;
    p->body = body;
    p->ctx = ctx;
    p->caller_core = lk_caller_core();
    atomic_store(&p->bar_count, 0);
    atomic_store_explicit(&p->pending, nt - 1, memory_order_relaxed);
    pthread_mutex_lock(&p->mu);
    unsigned long long w = atomic_load_explicit(&p->word, memory_order_relaxed);
    atomic_store_explicit(&p->word, ((w >> 16) + 1) << 16 | (unsigned)nt, memory_order_release);
    if (atomic_load(&p->sleepers) > 0)
        pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);

    lk_run_member(p, 0, nt);

    const int spin = atomic_load_explicit(&p->spin, memory_order_relaxed);
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) != 0; spins++) {
        if (spins < spin) {
            lk_cpu_relax();
            continue;
        }
        pthread_mutex_lock(&p->mu);
        while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
        break;
    }
}

void lk_cpu_barrier(void)
{
    lk_pool *p = lk_in_team;
    if (p == NULL || p->nt <= 1)
        return;
    unsigned g = atomic_load_explicit(&p->bar_gen, memory_order_acquire);
    if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->nt - 1) {
        atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p->bar_gen, 1, memory_order_release);
        return;
    }
    const int spin = atomic_load_explicit(&p->spin, memory_order_relaxed);
    for (int spins = 0; atomic_load_explicit(&p->bar_gen, memory_order_acquire) == g; spins++) {
        if (spins < spin)
            lk_cpu_relax();
        else
            sched_yield();
    }
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
