/* Lockstep tests: a CPU queue in a process that may not create threads.
 *
 * A forked child forbids itself new threads (RLIMIT_NPROC = 1, and, when
 * it runs as root, for which the limit is not enforced, it first becomes
 * the user "nobody"), checks that pthread_create really fails, then runs a
 * GEMM large enough for a team on a "cpu" queue of 4 threads.  The child
 * must return normally (the library may not exit the process), the op
 * must succeed on the threads there are (docs/api.md, "Queues"), and the
 * bits must equal those of the reference computed by the parent.  Last,
 * a child forked after the parent's queue has used its workers runs an op
 * on that queue (it must not wait for workers the child does not have). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lockstep.h>

#include "tests/tap.h"

#define M 192
#define N 160
#define K 256

/* what the child reports back through its exit status */
enum { CHILD_OK = 0, CHILD_THREADS_WORK = 10, CHILD_NO_LIMIT, CHILD_NO_QUEUE, CHILD_OP_FAILED,
       CHILD_BITS_DIFFER };

static void *nothing(void *p)
{
    return p;
}

/* 1 when this process can no longer start a thread, 0 when it still can,
 * -1 when the limits could not be set. */
static int forbid_threads(void)
{
    struct rlimit one = {1, 1};
    if (setrlimit(RLIMIT_NPROC, &one) != 0)
        return -1;
    if (geteuid() == 0) {
        const struct passwd *pw = getpwnam("nobody");
        uid_t uid = pw ? pw->pw_uid : 65534;
        gid_t gid = pw ? pw->pw_gid : 65534;
        if (setgid(gid) != 0 || setuid(uid) != 0)
            return -1;
    }
    pthread_t t;
    int e = pthread_create(&t, NULL, nothing, NULL);
    if (e == 0) {
        pthread_join(t, NULL);
        return 0;
    }
    return 1;
}

static int child(const float *a, const float *b, const float *want, float *c, const char *dev_name)
{
    switch (forbid_threads()) {
    case -1: return CHILD_NO_LIMIT;
    case 0: return CHILD_THREADS_WORK;
    default: break;
    }
    lk_context *ctx;
    lk_device *dev;
    lk_queue *q;
    lk_queue_opts opts = {4, NULL};
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, dev_name, &dev) != LK_OK ||
        lk_queue_create(dev, &opts, &q) != LK_OK)
        return CHILD_NO_QUEUE;
    lk_tensor ta = lk_mat(a, LK_F32, M, K), tb = lk_mat(b, LK_F32, K, N);
    lk_tensor tc = lk_mat(c, LK_F32, M, N);
    lk_status st = lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, 0);
    if (st != LK_OK) {
        fprintf(stderr, "lk_gemm: %s\n", lk_last_error());
        return CHILD_OP_FAILED;
    }
    lk_queue_destroy(q);
    lk_context_destroy(ctx);
    return memcmp(c, want, sizeof(float) * M * N) ? CHILD_BITS_DIFFER : CHILD_OK;
}

int main(void)
{
    uint64_t rng = tap_seed();
    float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N);
    float *want = malloc(sizeof(float) * M * N);
    /* shared, so the parent can say which element differs */
    float *c = mmap(NULL, sizeof(float) * M * N, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!a || !b || !want || c == MAP_FAILED)
        bail("out of memory");
    for (int i = 0; i < M * K; i++)
        a[i] = (float)(int32_t)(uint32_t)tap_rand(&rng) * 0x1p-31f;
    for (int i = 0; i < K * N; i++)
        b[i] = (float)(int32_t)(uint32_t)tap_rand(&rng) * 0x1p-31f;

    /* the reference, in the parent, before any child */
    lk_context *ctx;
    lk_device *ref;
    lk_queue *rq;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "ref", &ref) != LK_OK ||
        lk_queue_create(ref, NULL, &rq) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    lk_tensor ta = lk_mat(a, LK_F32, M, K), tb = lk_mat(b, LK_F32, K, N);
    lk_tensor tw = lk_mat(want, LK_F32, M, N);
    if (lk_gemm(rq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tw, 1, 0) != LK_OK)
        bail("reference GEMM: %s", lk_last_error());
    lk_device *cpu;
    int have_cpu = lk_device_find(ctx, "cpu", &cpu) == LK_OK;
    lk_queue_destroy(rq);
    lk_context_destroy(ctx);
    if (!have_cpu)
        skip_all("no cpu device in this build");
    /* qemu-user asserts and dies itself when a guest's clone fails, so
     * under it the child's death would say nothing about the library */
    if (getenv("LK_TEST_EMULATOR"))
        skip_all("under %s, which aborts when a thread cannot be created",
                 getenv("LK_TEST_EMULATOR"));

    static const char *const devs[] = {"cpu", "cpu:avx2@simde"};
    for (size_t d = 0; d < sizeof devs / sizeof devs[0]; d++) {
        if (d > 0) {
            /* emulated variants: only in --enable-emulated-isa builds */
            lk_context *cx;
            lk_device *dv;
            int have = lk_context_create(&cx) == LK_OK && lk_device_find(cx, devs[d], &dv) == LK_OK;
            if (have)
                lk_context_destroy(cx);
            if (!have) {
                skip(3, "no device %s in this build", devs[d]);
                continue;
            }
        }
        memset(c, 0xff, sizeof(float) * M * N);
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            bail("fork: %s", strerror(errno));
        if (pid == 0)
            _exit(child(a, b, want, c, devs[d]));
        int ws;
        while (waitpid(pid, &ws, 0) < 0)
            if (errno != EINTR)
                bail("waitpid: %s", strerror(errno));
        if (WIFEXITED(ws) && (WEXITSTATUS(ws) == CHILD_NO_LIMIT ||
                              WEXITSTATUS(ws) == CHILD_THREADS_WORK)) {
            skip(3, "%s", WEXITSTATUS(ws) == CHILD_NO_LIMIT
                              ? "cannot set RLIMIT_NPROC or drop privileges here"
                              : "RLIMIT_NPROC = 1 does not stop pthread_create here");
            continue;
        }
        ok(WIFEXITED(ws), "%s: the child returned normally (%s %d)", devs[d],
           WIFEXITED(ws) ? "exit status" : "signal", WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
        int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        ok(code != 1 && code != CHILD_NO_QUEUE && code != CHILD_OP_FAILED,
           "%s: a 4-thread queue's GEMM succeeds without new threads (child status %d)", devs[d],
           code);
        int same = !memcmp(c, want, sizeof(float) * M * N);
        ok(code == CHILD_OK && same, "%s: its bits equal the reference's", devs[d]);
    }
    /* A child forked after the parent's queue used its workers has only
     * the forking thread: its ops must still run (on new workers) rather
     * than wait for threads that do not exist there. */
    {
        lk_context *cx;
        lk_device *dv;
        lk_queue *cq;
        lk_queue_opts opts = {4, NULL};
        if (lk_context_create(&cx) != LK_OK || lk_device_find(cx, "cpu", &dv) != LK_OK ||
            lk_queue_create(dv, &opts, &cq) != LK_OK)
            bail("no cpu queue: %s", lk_last_error());
        lk_tensor tc = lk_mat(c, LK_F32, M, N);
        memset(c, 0xff, sizeof(float) * M * N);
        lk_status st = lk_gemm(cq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, 0);
        ok(st == LK_OK && !memcmp(c, want, sizeof(float) * M * N),
           "the parent's 4-thread GEMM equals the reference");
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0)
            bail("fork: %s", strerror(errno));
        if (pid == 0) {
            alarm(60); /* a child waiting for the parent's workers would hang */
            memset(c, 0xff, sizeof(float) * M * N);
            if (lk_gemm(cq, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, 0) != LK_OK)
                _exit(CHILD_OP_FAILED);
            _exit(memcmp(c, want, sizeof(float) * M * N) ? CHILD_BITS_DIFFER : CHILD_OK);
        }
        int ws;
        while (waitpid(pid, &ws, 0) < 0)
            if (errno != EINTR)
                bail("waitpid: %s", strerror(errno));
        ok(WIFEXITED(ws) && WEXITSTATUS(ws) == CHILD_OK,
           "a forked child's GEMM on the parent's queue runs and equals the reference (%s %d)",
           WIFEXITED(ws) ? "exit status" : "signal", WIFEXITED(ws) ? WEXITSTATUS(ws) : WTERMSIG(ws));
        lk_queue_destroy(cq);
        lk_context_destroy(cx);
    }
    free(a);
    free(b);
    free(want);
    munmap(c, sizeof(float) * M * N);
    return done_testing();
}
