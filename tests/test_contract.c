/* Lockstep tests: the contract test.  Every case of the contract matrix
 * (tools/matrix.h: every op, every dtype combination, awkward shapes, edge
 * values) on the reference device and on every other device of the
 * context, compared with the reference bit for bit.
 *
 * One TAP line per (case, device).  A device family this machine lacks
 * (no CUDA GPU, no CPU driver) gets a SKIP line per case with the reason,
 * never a pass; so does a case a device does not implement.
 *
 * LOCKSTEP_TEST_SEED repeats a run; LOCKSTEP_TEST_FULL=1 runs the larger
 * matrix of `lockstep check --full`.  LOCKSTEP_CUDA_TEST_SMALL=1 (the small
 * mode of compute-sanitizer's runs, where only the GPU is instrumented)
 * compares the CUDA devices alone: every other device's lines are a SKIP
 * with that reason, and the GPU still runs every case. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tools/matrix.h"

#define MAX_DEVICES 32

/* A device family that is absent here, and why. */
typedef struct absent {
    const char *family;
    char reason[300];
} absent;

static int has_driver(lk_context *ctx, const char *driver)
{
    for (int i = 0; i < lk_device_count(ctx); i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) == LK_OK && lk_device_props_get(d, &p) == LK_OK &&
            !strcmp(p.driver, driver))
            return 1;
    }
    return 0;
}

static void absent_reason(lk_context *ctx, const char *family, char *out, size_t size)
{
    for (int i = 0; i < lk_context_driver_count(ctx); i++) {
        lk_driver_info d;
        if (lk_context_driver_info(ctx, i, &d) == LK_OK && !strcmp(d.name, family)) {
            snprintf(out, size, "no %s device (%s: %.200s)", family, lk_status_string(d.status),
                     d.message[0] ? d.message : "no reason given");
            return;
        }
    }
    snprintf(out, size, "no %s device (the %s driver is not built or not found)", family,
             family);
}

int main(void)
{
    uint64_t seed = tap_seed();
    const char *full_env = getenv("LOCKSTEP_TEST_FULL");
    int full = full_env && !strcmp(full_env, "1");
    const char *small_env = getenv("LOCKSTEP_CUDA_TEST_SMALL");
    int small = small_env && !strcmp(small_env, "1");
    diag("mode: %s", small ? "small (LOCKSTEP_CUDA_TEST_SMALL=1): every case, on ref and the "
                             "CUDA devices only"
                           : full ? "full (LOCKSTEP_TEST_FULL=1)" : "default");
    /* test:1 of the test driver keeps its memory behind mem_alloc/memcpy
     * like a GPU: the matrix's device-memory path runs without one */
    setenv("LOCKSTEP_TESTDRV_DEVMEM", "1", 0);

    lk_context *ctx;
    lk_device *ref;
    lk_queue *ref_q;
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    if (lk_device_find(ctx, "ref", &ref) != LK_OK || lk_queue_create(ref, NULL, &ref_q) != LK_OK)
        bail("no reference device: %s", lk_last_error());

    lk_device *devs[MAX_DEVICES];
    lk_queue *qs[MAX_DEVICES];
    int ndev = 0, nleft = 0;
    const char *left[MAX_DEVICES]; /* small mode: the devices not compared */
    for (int i = 0; i < lk_device_count(ctx) && ndev < MAX_DEVICES; i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || d == ref)
            continue;
        if (small && nleft < MAX_DEVICES && lk_device_props_get(d, &p) == LK_OK &&
            strcmp(p.driver, "cuda") != 0) {
            left[nleft++] = lk_device_name(d);
            continue;
        }
        if (lk_queue_create(d, NULL, &qs[ndev]) != LK_OK)
            bail("no queue on %s: %s", lk_device_name(d), lk_last_error());
        devs[ndev++] = d;
    }

    absent missing[2];
    int nmissing = 0;
    const char *families[] = {"cpu", "cuda"};
    for (int i = 0; i < 2; i++)
        if (!has_driver(ctx, families[i])) {
            missing[nmissing].family = families[i];
            absent_reason(ctx, families[i], missing[nmissing].reason,
                          sizeof missing[nmissing].reason);
            nmissing++;
        }

    lk_mx_case *cases;
    int n = lk_mx_build(seed, full, &cases);
    if (n == 0)
        bail("out of memory building the matrix");
    diag("%d cases%s; reference \"ref\" against %d device%s", n, full ? " (full)" : "", ndev,
         ndev == 1 ? "" : "s");
    for (int d = 0; d < ndev; d++)
        diag("  %s", lk_device_name(devs[d]));
    for (int i = 0; i < nmissing; i++)
        diag("  %s", missing[i].reason);
    for (int i = 0; i < nleft; i++)
        diag("  %s: not compared in the small mode", left[i]);
    plan(n * (1 + ndev + nmissing + nleft));

    lk_mx_result ref_res, res[MAX_DEVICES];
    for (int i = 0; i < n; i++) {
        const lk_mx_case *c = &cases[i];
        lk_mx_check_case(c, ref_q, qs, ndev, &ref_res, res);

        /* the reference itself must run every valid call as expected */
        switch (ref_res.verdict) {
        case LK_MX_IDENTICAL:
            ok(1, "[%d] %s %s on ref", c->id, c->op, c->label);
            break;
        case LK_MX_UNSUPPORTED:
            skip(1, "[%d] %s %s on ref: unsupported (%s)", c->id, c->op, c->label,
                 ref_res.detail);
            break;
        case LK_MX_SKIPPED:
            skip(1, "[%d] %s %s on ref: %s", c->id, c->op, c->label, ref_res.detail);
            break;
        default:
            ok(0, "[%d] %s %s on ref", c->id, c->op, c->label);
            diag("  %s", ref_res.detail);
            break;
        }
        for (int d = 0; d < ndev; d++) {
            const lk_mx_result *r = &res[d];
            const char *name = lk_device_name(devs[d]);
            if (r->verdict == LK_MX_IDENTICAL) {
                ok(1, "[%d] %s %s on %s", c->id, c->op, c->label, name);
            } else if (r->verdict == LK_MX_UNSUPPORTED) {
                skip(1, "[%d] %s %s on %s: unsupported (%s)", c->id, c->op, c->label, name,
                     r->detail);
            } else if (r->verdict == LK_MX_SKIPPED) {
                skip(1, "[%d] %s %s on %s: %s", c->id, c->op, c->label, name, r->detail);
            } else {
                ok(0, "[%d] %s %s on %s", c->id, c->op, c->label, name);
                diag("  %s", r->detail);
                diag("  repeat: LOCKSTEP_TEST_SEED=%llu, or lockstep check --seed %llu "
                     "--case %d --device %s",
                     (unsigned long long)seed, (unsigned long long)seed, c->id, name);
            }
        }
        for (int m = 0; m < nmissing; m++)
            skip(1, "[%d] %s %s: %s", c->id, c->op, c->label, missing[m].reason);
        for (int m = 0; m < nleft; m++)
            skip(1, "[%d] %s %s on %s: the small mode compares the CUDA devices alone", c->id,
                 c->op, c->label, left[m]);
    }

    free(cases);
    for (int d = 0; d < ndev; d++)
        lk_queue_destroy(qs[d]);
    lk_queue_destroy(ref_q);
    lk_context_destroy(ctx);
    return done_testing();
}
