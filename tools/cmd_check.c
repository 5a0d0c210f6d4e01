/* Lockstep command: `lockstep check` — the contract matrix (tools/matrix.h)
 * on this machine's devices, as an op x device table or as JSON. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tools/cmd.h"
#include "tools/matrix.h"

#define MAX_DEVICES 64
#define MAX_FILTERS 64

typedef struct check_opts {
    const char *devices[MAX_FILTERS];
    int ndevices;
    const char *ops[MAX_FILTERS];
    int nops;
    long cases[MAX_FILTERS];
    int ncases;
    uint64_t seed;
    int full, json, verbose, list;
} check_opts;

static void check_usage(FILE *f)
{
    fprintf(f,
            "Usage: lockstep check [--device NAME]... [--op NAME]... [--seed N] [--full]\n"
            "                      [--json] [--verbose] [--list] [--case ID]...\n\n"
            "Runs every op, for every dtype combination, on seeded random inputs of\n"
            "awkward shapes and on edge values, on the reference device and on every\n"
            "other device (or those named with --device), and compares the results bit\n"
            "for bit.  Prints an op x device table: identical, differs (first differing\n"
            "element), unsupported (the device does not implement it), skipped.\n\n"
            "  --device NAME  compare this device (repeatable; default: all but \"ref\")\n"
            "  --op NAME      only this op or op family, e.g. gemm, reduce, reduce.sum\n"
            "  --seed N       seed of the inputs and shapes (default 1)\n"
            "  --full         larger shapes and every dtype x flag combination (slow)\n"
            "  --json         machine-readable output on stdout\n"
            "  --verbose      one line per case and device\n"
            "  --list         list the selected cases and exit\n"
            "  --case ID      only the case with this id (repeatable)\n\n"
            "Exit status: 0 if nothing differs (unsupported is no failure), 1 if a device\n"
            "differs or the reference fails, 2 on a usage error.\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int known_op(const char *name)
{
    for (const char *const *n = lk_mx_op_names(); *n; n++)
        if (!strcmp(*n, name))
            return 1;
    return 0;
}

static int parse_args(int argc, char **argv, check_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            check_usage(stdout);
            return 1;
        } else if (!strcmp(a, "--full")) {
            o->full = 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            o->verbose = 1;
        } else if (!strcmp(a, "--list")) {
            o->list = 1;
        } else if (!strcmp(a, "--device") || !strcmp(a, "--op") || !strcmp(a, "--seed") ||
                   !strcmp(a, "--case")) {
            if (!v) {
                fprintf(stderr, "lockstep check: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "--seed")) {
                if (parse_u64(v, &o->seed)) {
                    fprintf(stderr, "lockstep check: bad seed '%s'\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--case")) {
                uint64_t id;
                if (parse_u64(v, &id) || id > 1000000 || o->ncases == MAX_FILTERS) {
                    fprintf(stderr, "lockstep check: bad case id '%s'\n", v);
                    return 2;
                }
                o->cases[o->ncases++] = (long)id;
            } else if (!strcmp(a, "--op")) {
                if (!known_op(v) || o->nops == MAX_FILTERS) {
                    fprintf(stderr, "lockstep check: unknown op '%s'; ops:", v);
                    for (const char *const *n = lk_mx_op_names(); *n; n++)
                        fprintf(stderr, " %s", *n);
                    fprintf(stderr, "\n");
                    return 2;
                }
                o->ops[o->nops++] = v;
            } else {
                if (o->ndevices == MAX_FILTERS) {
                    fprintf(stderr, "lockstep check: too many --device\n");
                    return 2;
                }
                o->devices[o->ndevices++] = v;
            }
        } else {
            fprintf(stderr, "lockstep check: unknown option '%s'\n\n", a);
            check_usage(stderr);
            return 2;
        }
    }
    return 0;
}

static int selected(const check_opts *o, const lk_mx_case *c)
{
    int ok = o->nops == 0;
    for (int i = 0; i < o->nops && !ok; i++)
        ok = lk_mx_op_matches(c, o->ops[i]);
    if (ok && o->ncases) {
        ok = 0;
        for (int i = 0; i < o->ncases && !ok; i++)
            ok = o->cases[i] == c->id;
    }
    return ok;
}

/* ------------------------------------------------------------------ JSON */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_result(FILE *f, const lk_mx_case *c, const lk_mx_result *r)
{
    fprintf(f, "{\"verdict\": \"%s\", \"status\": \"%s\"", lk_mx_verdict_name(r->verdict),
            lk_status_string(r->status));
    if (r->verdict == LK_MX_DIFFERS && r->buf >= 0) {
        int hex = (int)(2 * lk_mx_elem_bytes(c->buf[r->buf].dtype));
        fprintf(f, ", \"buffer\": ");
        json_str(f, c->buf[r->buf].name);
        fprintf(f, ", \"index\": %lld, \"reference_bits\": \"0x%0*" PRIx64
                   "\", \"device_bits\": \"0x%0*" PRIx64 "\"",
                (long long)r->index, hex, r->ref_bits, hex, r->dev_bits);
    }
    if (r->detail[0]) {
        fprintf(f, ", \"detail\": ");
        json_str(f, r->detail);
    }
    fputc('}', f);
}

/* ----------------------------------------------------------------- table */

typedef struct cell {
    int n[LK_MX_ERROR + 1];
    int first_case;   /* first differing case (index into the run list) */
} cell;

static void cell_text(const cell *c, const lk_mx_result *first, char *buf, size_t size)
{
    int total = 0;
    for (int v = 0; v <= LK_MX_ERROR; v++)
        total += c->n[v];
    if (c->n[LK_MX_ERROR])
        snprintf(buf, size, "ERROR (%d/%d)", c->n[LK_MX_ERROR], total);
    else if (c->n[LK_MX_DIFFERS]) {
        if (first && first->buf >= 0)
            snprintf(buf, size, "DIFFERS @%lld (%d/%d)", (long long)first->index,
                     c->n[LK_MX_DIFFERS], total);
        else
            snprintf(buf, size, "DIFFERS status (%d/%d)", c->n[LK_MX_DIFFERS], total);
    } else if (c->n[LK_MX_IDENTICAL] == total)
        snprintf(buf, size, "identical");
    else if (c->n[LK_MX_UNSUPPORTED] == total)
        snprintf(buf, size, "unsupported");
    else if (c->n[LK_MX_SKIPPED] == total)
        snprintf(buf, size, "skipped");
    else if (c->n[LK_MX_IDENTICAL])
        snprintf(buf, size, "identical, %d unsup/skip", total - c->n[LK_MX_IDENTICAL]);
    else
        snprintf(buf, size, "unsupported/skipped");
}

/* One run of the matrix: the selected cases and every device's results. */
typedef struct check_run {
    lk_mx_case *all;
    int *run, nrun;
    lk_device *devs[MAX_DEVICES];
    int ndev;
    lk_mx_result *ref_res, *res; /* res[i * ndev + d] */
    int tot[LK_MX_ERROR + 1];
} check_run;

#define RES(cr, i, d) (&(cr)->res[(size_t)(i) * (size_t)(cr)->ndev + (size_t)(d)])

/* The devices to compare with "ref": those named, or all the others. */
static int pick_devices(lk_context *ctx, const check_opts *o, lk_device *ref, check_run *cr)
{
    if (!o->ndevices) {
        for (int i = 0; i < lk_device_count(ctx) && cr->ndev < MAX_DEVICES; i++) {
            lk_device *d;
            if (lk_device_get(ctx, i, &d) == LK_OK && d != ref)
                cr->devs[cr->ndev++] = d;
        }
        return 0;
    }
    for (int i = 0; i < o->ndevices; i++) {
        lk_device *d;
        if (lk_device_find(ctx, o->devices[i], &d) != LK_OK) {
            fprintf(stderr, "lockstep check: no device '%s': %s\n", o->devices[i],
                    lk_last_error());
            return 2;
        }
        if (cr->ndev < MAX_DEVICES)
            cr->devs[cr->ndev++] = d;
    }
    return 0;
}

static void run_cases(const check_opts *o, check_run *cr, lk_queue *ref_q, lk_queue **qs)
{
    for (int i = 0; i < cr->nrun; i++) {
        const lk_mx_case *c = &cr->all[cr->run[i]];
        lk_mx_check_case(c, ref_q, qs, cr->ndev, &cr->ref_res[i], RES(cr, i, 0));
        if (cr->ref_res[i].verdict == LK_MX_ERROR)
            cr->tot[LK_MX_ERROR]++;
        for (int d = 0; d < cr->ndev; d++)
            cr->tot[RES(cr, i, d)->verdict]++;
        if (!o->verbose || o->json)
            continue;
        const lk_mx_result *rr = &cr->ref_res[i];
        printf("%4d %-20s %-44s ref: %s%s%s\n", c->id, c->op, c->label,
               lk_mx_verdict_name(rr->verdict), rr->detail[0] ? ": " : "", rr->detail);
        for (int d = 0; d < cr->ndev; d++) {
            const lk_mx_result *r = RES(cr, i, d);
            printf("     %-20s %s%s%s\n", lk_device_name(cr->devs[d]),
                   lk_mx_verdict_name(r->verdict), r->detail[0] ? ": " : "", r->detail);
        }
        fflush(stdout);
    }
}

static void print_json(const check_opts *o, const check_run *cr, int failed)
{
    printf("{\n  \"lockstep\": \"%s\",\n  \"contract\": %d,\n  \"seed\": %" PRIu64
           ",\n  \"full\": %s,\n  \"reference\": \"ref\",\n  \"devices\": [",
           lk_version_string(), lk_contract_version(), o->seed, o->full ? "true" : "false");
    for (int d = 0; d < cr->ndev; d++) {
        printf("%s", d ? ", " : "");
        json_str(stdout, lk_device_name(cr->devs[d]));
    }
    printf("],\n  \"cases\": [\n");
    for (int i = 0; i < cr->nrun; i++) {
        const lk_mx_case *c = &cr->all[cr->run[i]];
        printf("    {\"id\": %d, \"op\": ", c->id);
        json_str(stdout, c->op);
        printf(", \"label\": ");
        json_str(stdout, c->label);
        printf(", \"seed\": \"0x%016" PRIx64 "\", \"reference\": ", c->seed);
        json_result(stdout, c, &cr->ref_res[i]);
        printf(", \"results\": {");
        for (int d = 0; d < cr->ndev; d++) {
            printf("%s", d ? ", " : "");
            json_str(stdout, lk_device_name(cr->devs[d]));
            printf(": ");
            json_result(stdout, c, RES(cr, i, d));
        }
        printf("}}%s\n", i + 1 < cr->nrun ? "," : "");
    }
    printf("  ],\n  \"summary\": {");
    for (int v = 0; v <= LK_MX_ERROR; v++)
        printf("%s\"%s\": %d", v ? ", " : "", lk_mx_verdict_name((lk_mx_verdict)v), cr->tot[v]);
    printf("},\n  \"ok\": %s\n}\n", failed ? "false" : "true");
}

/* The reference's column: did it run every case of the op as expected? */
static void ref_cell(const check_run *cr, const char *op, char *text, size_t size)
{
    cell c = {{0}, -1};
    int total = 0;
    for (int j = 0; j < cr->nrun; j++)
        if (!strcmp(cr->all[cr->run[j]].op, op)) {
            c.n[cr->ref_res[j].verdict]++;
            total++;
        }
    if (c.n[LK_MX_ERROR])
        snprintf(text, size, "ERROR %d", c.n[LK_MX_ERROR]);
    else if (c.n[LK_MX_IDENTICAL] == total)
        snprintf(text, size, "ok (%d)", total);
    else if (c.n[LK_MX_UNSUPPORTED] == total)
        snprintf(text, size, "unsupported");
    else
        snprintf(text, size, "ok %d/%d", c.n[LK_MX_IDENTICAL], total);
}

static void device_cell(const check_run *cr, const char *op, int d, char *text, size_t size)
{
    cell c = {{0}, -1};
    for (int j = 0; j < cr->nrun; j++) {
        if (strcmp(cr->all[cr->run[j]].op, op))
            continue;
        lk_mx_verdict v = RES(cr, j, d)->verdict;
        c.n[v]++;
        if (v == LK_MX_DIFFERS && c.first_case < 0)
            c.first_case = j;
    }
    cell_text(&c, c.first_case >= 0 ? RES(cr, c.first_case, d) : NULL, text, size);
}

/* One row per op, in the order the matrix lists them. */
static void print_table(const check_opts *o, const check_run *cr)
{
    printf("lockstep check: seed %" PRIu64 "%s, %d cases, reference \"ref\" against %d "
           "device%s\n\n",
           o->seed, o->full ? " (full)" : "", cr->nrun, cr->ndev, cr->ndev == 1 ? "" : "s");
    int width = 24;
    for (int d = 0; d < cr->ndev; d++) {
        int w = (int)strlen(lk_device_name(cr->devs[d])) + 2;
        if (w > width)
            width = w;
    }
    printf("%-20s %-11s", "op", "ref");
    for (int d = 0; d < cr->ndev; d++)
        printf(" %-*s", width, lk_device_name(cr->devs[d]));
    printf("\n");
    for (int i = 0; i < cr->nrun; i++) {
        const char *op = cr->all[cr->run[i]].op;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = !strcmp(cr->all[cr->run[j]].op, op);
        if (seen)
            continue;
        char text[64];
        ref_cell(cr, op, text, sizeof text);
        printf("%-20s %-11s", op, text);
        for (int d = 0; d < cr->ndev; d++) {
            device_cell(cr, op, d, text, sizeof text);
            printf(" %-*s", width, text);
        }
        printf("\n");
    }
}

/* Every reference failure and difference, with where and both values. */
static void print_problems(const check_opts *o, const check_run *cr, int failed)
{
    int shown = 0;
    for (int i = 0; i < cr->nrun; i++) {
        const lk_mx_case *c = &cr->all[cr->run[i]];
        for (int d = -1; d < cr->ndev; d++) {
            const lk_mx_result *r = d < 0 ? &cr->ref_res[i] : RES(cr, i, d);
            if (r->verdict != (d < 0 ? LK_MX_ERROR : LK_MX_DIFFERS))
                continue;
            if (!shown++)
                printf("\nProblems (repeat one with --seed %" PRIu64 " --case ID):\n", o->seed);
            if (shown <= 50)
                printf("  #%d %s %s on %s: %s\n", c->id, c->op, c->label,
                       d < 0 ? "ref" : lk_device_name(cr->devs[d]), r->detail);
        }
    }
    if (shown > 50)
        printf("  ... %d more\n", shown - 50);
    printf("\n%d identical, %d differ, %d unsupported, %d skipped, %d reference errors: %s\n",
           cr->tot[LK_MX_IDENTICAL], cr->tot[LK_MX_DIFFERS], cr->tot[LK_MX_UNSUPPORTED],
           cr->tot[LK_MX_SKIPPED], cr->tot[LK_MX_ERROR], failed ? "FAILED" : "OK");
}

/* Queues on ref and on each device, the run, the report. */
static int check_on(lk_context *ctx, const check_opts *o, check_run *cr)
{
    lk_device *ref;
    lk_queue *ref_q = NULL, *qs[MAX_DEVICES] = {NULL};
    int rc = 0;
    if (lk_device_find(ctx, "ref", &ref) != LK_OK) {
        fprintf(stderr, "lockstep check: no reference device: %s\n", lk_last_error());
        return 1;
    }
    rc = pick_devices(ctx, o, ref, cr);
    if (!rc && lk_queue_create(ref, NULL, &ref_q) != LK_OK) {
        fprintf(stderr, "lockstep check: no queue on ref: %s\n", lk_last_error());
        rc = 1;
    }
    for (int i = 0; i < cr->ndev && !rc; i++)
        if (lk_queue_create(cr->devs[i], NULL, &qs[i]) != LK_OK) {
            fprintf(stderr, "lockstep check: no queue on %s: %s\n",
                    lk_device_name(cr->devs[i]), lk_last_error());
            rc = 1;
        }
    if (!rc) {
        cr->ref_res = calloc((size_t)cr->nrun, sizeof *cr->ref_res);
        cr->res = calloc((size_t)cr->nrun * (size_t)(cr->ndev ? cr->ndev : 1), sizeof *cr->res);
        if (!cr->ref_res || !cr->res) {
            fprintf(stderr, "lockstep check: out of memory\n");
            rc = 1;
        }
    }
    if (!rc) {
        run_cases(o, cr, ref_q, qs);
        int failed = cr->tot[LK_MX_DIFFERS] || cr->tot[LK_MX_ERROR];
        if (o->json) {
            print_json(o, cr, failed);
        } else {
            print_table(o, cr);
            print_problems(o, cr, failed);
        }
        rc = failed;
    }
    free(cr->res);
    free(cr->ref_res);
    for (int i = 0; i < cr->ndev; i++)
        if (qs[i])
            lk_queue_destroy(qs[i]);
    if (ref_q)
        lk_queue_destroy(ref_q);
    return rc;
}

int lk_cmd_check(int argc, char **argv)
{
    check_opts o;
    check_run cr;
    int rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;

    memset(&cr, 0, sizeof cr);
    int nall = lk_mx_build(o.seed, o.full, &cr.all);
    cr.run = nall ? malloc((size_t)nall * sizeof *cr.run) : NULL;
    if (!cr.run) {
        free(cr.all);
        fprintf(stderr, "lockstep check: out of memory\n");
        return 1;
    }
    for (int i = 0; i < nall; i++)
        if (selected(&o, &cr.all[i]))
            cr.run[cr.nrun++] = i;

    if (o.list) {
        for (int i = 0; i < cr.nrun; i++)
            printf("%4d  %-20s %s\n", cr.all[cr.run[i]].id, cr.all[cr.run[i]].op,
                   cr.all[cr.run[i]].label);
    } else {
        lk_context *ctx;
        lk_status st = lk_context_create(&ctx);
        if (st != LK_OK) {
            fprintf(stderr, "lockstep check: no context: %s: %s\n", lk_status_string(st),
                    lk_last_error());
            rc = 1;
        } else {
            rc = check_on(ctx, &o, &cr);
            lk_context_destroy(ctx);
        }
    }
    free(cr.run);
    free(cr.all);
    return rc;
}
