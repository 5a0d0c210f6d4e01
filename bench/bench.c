/* Lockstep benchmarks: `lockstep bench`.
 *
 * For each case: Lockstep's median time over --reps runs, the peer's
 * median in the same run on the same number of threads, and their ratio
 * (peer time / Lockstep time: above 1, Lockstep is faster; for a floor
 * such as a streaming read, the fraction of the machine's speed reached).
 * The cases and what they are compared with are in bench_cases.c;
 * docs/performance.md explains the floors and keeps the figures measured. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "bench/bench.h"
#include "bench/bench_cases.h"
#include "bench/peers.h"
#include "bench/peers/ternary_peers.h"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: lockstep bench [--device NAME] [--case NAME]... [--reps N]\n"
            "                      [--threads N] [--quick] [--json] [--list]\n\n"
            "Times Lockstep against its peers on the same machine, in the same run, on\n"
            "the same number of threads, and prints each case's median times and their\n"
            "ratio (peer time / Lockstep time).  Peers: OpenBLAS sgemm/sgemv for GEMM\n"
            "and GEMV (libopenblas.so.0, loaded where installed), streaming read and\n"
            "copy loops for bandwidth-bound ops, the bytes-over-bandwidth floor for\n"
            "ternary GEMV, and llama.cpp's TQ2_0 and bitnet.cpp's I2_S kernels\n"
            "(ternary.*.m1.tq2_0, .i2_s) where scripts/get-peers.sh has built them in\n"
            "$LOCKSTEP_PEERS_DIR (default ~/.cache/lockstep/peers).  A peer that is not\n"
            "there is a \"skip\" with the reason.\n\n"
            "  --device NAME  Lockstep device (default \"cpu\")\n"
            "  --case NAME    the case NAME, or those starting with NAME (repeatable)\n"
            "  --reps N       timed runs per case and peer (default 5, --quick 3)\n"
            "  --threads N    threads for Lockstep and the peers (default: the device's)\n"
            "  --quick        a short subset (about 20 s on 2 cores)\n"
            "  --json         machine-readable output on stdout\n"
            "  --list         list the cases and exit\n");
}

/* A name selects the case of that exact name if there is one, else every
 * case it is a prefix of. */
static int selected(const lk_bench_case *all, const lk_bench_case *c, char **names, int nnames,
                    int quick)
{
    if (nnames == 0)
        return !quick || c->quick;
    for (int i = 0; i < nnames; i++) {
        int exact = 0;
        for (const lk_bench_case *o = all; o->name; o++)
            exact |= strcmp(o->name, names[i]) == 0;
        if (exact ? strcmp(c->name, names[i]) == 0
                  : strncmp(c->name, names[i], strlen(names[i])) == 0)
            return 1;
    }
    return 0;
}

/* s as the inside of a JSON string. */
static void print_json_str(const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned)(unsigned char)*s);
        else
            putchar(*s);
    }
}

static void print_rate(char *buf, size_t n, const lk_bench_case *c, double ms)
{
    if (c->flops > 0)
        snprintf(buf, n, "%.1f GFLOP/s", c->flops / (ms * 1e6));
    else
        snprintf(buf, n, "%.1f GB/s", c->bytes / (ms * 1e6));
}

int lk_bench_main(int argc, char **argv)
{
    const char *device = "cpu";
    char *names[64];
    int nnames = 0, reps = 0, threads = 0, quick = 0, json = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--device") && v) {
            device = v;
            i++;
        } else if (!strcmp(a, "--case") && v && nnames < 64) {
            names[nnames++] = argv[++i];
        } else if (!strcmp(a, "--reps") && v && atoi(v) > 0) {
            reps = atoi(v);
            i++;
        } else if (!strcmp(a, "--threads") && v && atoi(v) > 0) {
            threads = atoi(v);
            i++;
        } else if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else {
            fprintf(stderr, "lockstep bench: unknown or incomplete option \"%s\"\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (reps == 0)
        reps = quick ? 3 : 5;
    const lk_bench_case *cases = lk_bench_cases();
    if (list) {
        for (const lk_bench_case *c = cases; c->name; c++)
            printf("%-34s %s%s\n", c->name, c->peer_name, c->quick ? "  (quick)" : "");
        return 0;
    }

    lk_context *ctx = NULL;
    lk_device *dev = NULL;
    lk_queue *q = NULL;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, device, &dev) != LK_OK) {
        fprintf(stderr, "lockstep bench: %s\n", lk_last_error());
        lk_context_destroy(ctx);
        return 1;
    }
    lk_device_props props;
    lk_device_props_get(dev, &props);
    lk_queue_opts opts = {threads, NULL};
    if (lk_queue_create(dev, &opts, &q) != LK_OK) {
        fprintf(stderr, "lockstep bench: %s\n", lk_last_error());
        lk_context_destroy(ctx);
        return 1;
    }
    if (threads == 0)
        threads = props.max_threads > 0 ? props.max_threads : 1;
    lk_peer_openblas_threads(threads);

    if (json) {
        printf("{\"device\": \"%s\", \"description\": \"%s\", \"threads\": %d, \"reps\": %d, "
               "\"openblas\": %s, \"cases\": [",
               props.name, props.description, threads, reps,
               lk_peer_have_openblas() ? "true" : "false");
    } else {
        printf("lockstep bench: device %s (%s), %d threads, median of %d runs\n", props.name,
               props.description, threads, reps);
        for (int p = LK_PEER_TQ2_0; p <= LK_PEER_I2_S; p++) /* which build of a peer this is */
            if (lk_peer_t2_source(p))
                printf("peer: %s\n", lk_peer_t2_source(p));
        printf("\n%-34s %11s  %-22s %11s  %6s  %s\n", "case", "lockstep", "peer", "peer time",
               "ratio", "lockstep rate");
    }
    int failed = 0, first = 1;
    for (const lk_bench_case *c = cases; c->name; c++) {
        if (!selected(cases, c, names, nnames, quick))
            continue;
        lk_bench_result r;
        lk_status st = lk_bench_run(c, q, threads, reps, &r);
        if (st != LK_OK) {
            if (st != LK_ERR_UNSUPPORTED)
                failed = 1;
            if (json)
                printf("%s\n  {\"name\": \"%s\", \"error\": \"%s\"}", first ? "" : ",", c->name,
                       lk_status_string(st));
            else
                printf("%-34s %s: %s\n", c->name, lk_status_string(st), lk_last_error());
            first = 0;
            fflush(stdout);
            continue;
        }
        if (r.skip && r.lk_ms <= 0) { /* a case for its peer, without the peer */
            if (json) {
                printf("%s\n  {\"name\": \"%s\", \"peer\": \"%s\", \"skipped\": \"", first ? "" : ",",
                       c->name, r.peer_name);
                print_json_str(r.skip);
                printf("\"}");
            } else {
                printf("%-34s skip: %s\n", c->name, r.skip);
            }
            first = 0;
            fflush(stdout);
            continue;
        }
        char rate[32];
        print_rate(rate, sizeof rate, c, r.lk_ms);
        double ratio = r.peer_ms > 0 ? r.peer_ms / r.lk_ms : 0.0;
        if (json) {
            printf("%s\n  {\"name\": \"%s\", \"lockstep_ms\": %.4f, \"peer\": \"%s\", "
                   "\"peer_ms\": %.4f, \"ratio\": %.3f, \"gflops\": %.2f, \"gbps\": %.2f",
                   first ? "" : ",", c->name, r.lk_ms, r.peer_name, r.peer_ms, ratio,
                   c->flops > 0 ? c->flops / (r.lk_ms * 1e6) : 0.0,
                   c->bytes > 0 ? c->bytes / (r.lk_ms * 1e6) : 0.0);
            if (r.skip) {
                printf(", \"skipped\": \"");
                print_json_str(r.skip);
                printf("\"");
            }
            printf("}");
        } else if (r.peer_ms > 0) {
            printf("%-34s %8.3f ms  %-22s %8.3f ms  %6.2f  %s\n", c->name, r.lk_ms, r.peer_name,
                   r.peer_ms, ratio, rate);
        } else {
            printf("%-34s %8.3f ms  %-22s %11s  %6s  %s%s%s\n", c->name, r.lk_ms, r.peer_name, "-",
                   "-", rate, r.skip ? "  skip: " : "", r.skip ? r.skip : "");
        }
        first = 0;
        fflush(stdout);
    }
    if (json)
        printf("\n]}\n");
    lk_queue_destroy(q);
    lk_context_destroy(ctx);
    return failed;
}
