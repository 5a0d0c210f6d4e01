/* Lockstep tests: a hostile caller.  A program built with -ffast-math runs
 * with FTZ/DAZ set, and any program may change the rounding mode; neither
 * may change a bit (docs/numerics.md section 2), and the caller must get
 * its own state back after every call.
 *
 * For each device and a selection of contract-matrix cases (edge values
 * first: subnormals are what FTZ/DAZ would destroy), the case runs with
 *   1. FTZ + DAZ set around the call (x86 MXCSR 0x9FC0; AArch64 FPCR FZ,
 *      FZ16, AH and FIZ, those of them the core implements),
 *   2. FTZ + DAZ + round-toward-zero (MXCSR 0xFFC0; the same FPCR bits and
 *      RMode = RZ)
 *      on a queue created while that state was set, so worker threads that
 *      inherit their creator's state are covered too,
 * and must give the bytes of a normal call, leaving the hostile state
 * exactly as it was set. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <fenv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tools/matrix.h"

#define MAX_DEVICES 32
#define PER_OP 2

/* ---- the control register, per ISA ---- */

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef unsigned int fpstate;
static fpstate fp_get(void) { return _mm_getcsr(); }
static void fp_set(fpstate s) { _mm_setcsr(s); }
static const fpstate hostile_modes[2] = {0x9FC0u, 0xFFC0u};
static const char *const hostile_names[2] = {"MXCSR 0x9FC0 (FTZ+DAZ)",
                                             "MXCSR 0xFFC0 (FTZ+DAZ+RZ, queue made under it)"};
#elif defined(__aarch64__)
typedef unsigned long long fpstate;
static fpstate fp_get(void)
{
    unsigned long long v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    return v;
}
static void fp_set(fpstate s) { __asm__ __volatile__("msr fpcr, %0" : : "r"(s)); }
#define FPCR_FZ (1ull << 24)
#define FPCR_FZ16 (1ull << 19)
#define FPCR_RZ (3ull << 22)
#define FPCR_AH_FIZ (3ull) /* FEAT_AFP: AH (bit 1) and FIZ (bit 0) */
/* Not const: a core without FP16 (Cortex-A53) or FEAT_AFP keeps FZ16, AH
 * and FIZ as RES0, so main() trims each state to the bits the FPCR keeps
 * (fp_kept) before comparing what comes back. */
static fpstate hostile_modes[2] = {FPCR_FZ | FPCR_FZ16 | FPCR_AH_FIZ,
                                   FPCR_FZ | FPCR_FZ16 | FPCR_AH_FIZ | FPCR_RZ};
static const char *const hostile_names[2] = {"FPCR FZ+FZ16+AH+FIZ",
                                             "FPCR FZ+FZ16+AH+FIZ+RZ (queue made under it)"};
static fpstate fp_kept(fpstate s)
{
    fpstate o = fp_get();
    fp_set(s);
    s = fp_get();
    fp_set(o);
    return s;
}
#else
/* no FTZ to set: the rounding mode alone */
typedef int fpstate;
static fpstate fp_get(void) { return fegetround(); }
static void fp_set(fpstate s) { fesetround(s); }
static const fpstate hostile_modes[2] = {FE_TOWARDZERO, FE_TOWARDZERO};
static const char *const hostile_names[2] = {"round toward zero",
                                             "round toward zero (queue made under it)"};
#endif

#define FP_FMT "0x%llx"

typedef struct hostile {
    fpstate normal, set, seen;
} hostile;

static void hostile_before(void *user)
{
    hostile *h = user;
    h->normal = fp_get();
    fp_set(h->set);
}

static void hostile_after(void *user)
{
    hostile *h = user;
    h->seen = fp_get();
    fp_set(h->normal);
}

/* Edge-value fills first: they hold the subnormals FTZ/DAZ would flush. */
static int edgy(const lk_mx_case *c)
{
    for (int i = 0; i < c->nbuf; i++)
        if (c->buf[i].fill == LK_MX_FILL_EDGE || c->buf[i].fill == LK_MX_FILL_ALLBITS ||
            c->buf[i].fill == LK_MX_FILL_WIDE)
            return 1;
    return 0;
}

int main(void)
{
    uint64_t seed = tap_seed();
#if defined(__aarch64__)
    for (int m = 0; m < 2; m++)
        hostile_modes[m] = fp_kept(hostile_modes[m]);
    diag("FPCR states this CPU keeps: " FP_FMT ", " FP_FMT, (unsigned long long)hostile_modes[0],
         (unsigned long long)hostile_modes[1]);
#endif
    setenv("LOCKSTEP_TESTDRV_DEVMEM", "1", 0);

    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    int ndev = lk_device_count(ctx);
    if (ndev > MAX_DEVICES)
        ndev = MAX_DEVICES;
    lk_device *devs[MAX_DEVICES];
    for (int d = 0; d < ndev; d++)
        if (lk_device_get(ctx, d, &devs[d]) != LK_OK)
            bail("device %d: %s", d, lk_last_error());

    lk_mx_case *all;
    int nall = lk_mx_build(seed, 0, &all);
    if (nall == 0)
        bail("out of memory building the matrix");
    int *pick = malloc((size_t)nall * sizeof *pick), npick = 0;
    if (!pick)
        bail("out of memory");
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < nall; i++) {
            const lk_mx_case *c = &all[i];
            int same = 0, dup = 0;
            for (int j = 0; j < npick; j++) {
                same += !strcmp(all[pick[j]].op, c->op);
                dup |= pick[j] == i;
            }
            if (dup || same >= PER_OP || (pass == 0 && !edgy(c)))
                continue;
            pick[npick++] = i;
        }
    diag("%d cases on %d devices; hostile states: %s; %s", npick, ndev, hostile_names[0],
         hostile_names[1]);
    plan(ndev + npick * ndev * 2);

    for (int d = 0; d < ndev; d++) {
        const char *name = lk_device_name(devs[d]);
        lk_queue *q, *hq;
        hostile h;
        if (lk_queue_create(devs[d], NULL, &q) != LK_OK)
            bail("no queue on %s: %s", name, lk_last_error());
        /* the second queue (and any workers it starts) is born hostile */
        fpstate saved = fp_get();
        fp_set(hostile_modes[1]);
        lk_status qst = lk_queue_create(devs[d], NULL, &hq);
        fpstate after = fp_get();
        fp_set(saved);
        if (qst != LK_OK)
            bail("no queue on %s: %s", name, lk_last_error());
        if (!ok(after == hostile_modes[1], "lk_queue_create on %s under %s keeps it", name,
                hostile_names[1]))
            diag("  it came back as " FP_FMT, (unsigned long long)after);

        for (int i = 0; i < npick; i++) {
            const lk_mx_case *c = &all[pick[i]];
            lk_mx_data in, normal, got;
            lk_status st, ost, nst;
            char msg[200];
            if (lk_mx_data_make(c, &in) != LK_OK)
                bail("out of memory");
            st = lk_mx_run(q, c, &in, &normal, LK_MX_WHOLE, NULL, &nst, msg, sizeof msg);
            for (int m = 0; m < 2; m++) {
                if (st != LK_OK || nst == LK_ERR_UNSUPPORTED) {
                    skip(1, "%s [%d] %s %s on %s: %s", hostile_names[m], c->id, c->op, c->label,
                         name, nst == LK_ERR_UNSUPPORTED ? "unsupported" : msg);
                    continue;
                }
                h.set = hostile_modes[m];
                h.seen = (fpstate)0; /* proves the hook ran */
                lk_mx_hook hook = {hostile_before, hostile_after, &h};
                lk_mx_result r;
                memset(&r, 0, sizeof r);
                lk_status hs = lk_mx_run(m ? hq : q, c, &in, &got, LK_MX_WHOLE, &hook, &ost,
                                         msg, sizeof msg);
                int same = hs == LK_OK && ost == nst && !lk_mx_compare(c, &normal, &got, &r);
                int intact = h.seen == h.set;
                if (!ok(same && intact, "%s [%d] %s %s on %s", hostile_names[m], c->id, c->op,
                        c->label, name)) {
                    if (hs != LK_OK || ost != nst)
                        diag("  status %s under the hostile state, %s normally (%s)",
                             lk_status_string(ost), lk_status_string(nst), msg);
                    else if (!same)
                        diag("  %s", r.detail);
                    if (!intact)
                        diag("  caller's state " FP_FMT " came back as " FP_FMT,
                             (unsigned long long)h.set, (unsigned long long)h.seen);
                }
                lk_mx_data_free(&got);
            }
            lk_mx_data_free(&normal);
            lk_mx_data_free(&in);
        }
        lk_queue_destroy(hq);
        lk_queue_destroy(q);
    }

    free(pick);
    free(all);
    lk_context_destroy(ctx);
    return done_testing();
}
