/* Lockstep tests: invariance.  On every device:
 *
 * - batch invariance: row i of every op's output is the same whatever the
 *   batch around it.  A problem of m rows is run whole, then as every
 *   slice of M = 1 .. m rows (up to a cap) at offsets 0, the middle and the
 *   end of the batch (so the same rows sit at different offsets, pointer
 *   alignments and tile positions); each slice must reproduce its rows of
 *   the whole run and touch nothing else;
 * - run-to-run identity: the same call twice on one queue, and on a second
 *   queue, gives the same bytes;
 * - thread-count invariance (CPU devices): queues with num_threads 1, 2,
 *   3, 5 and 8 give the bytes of the default queue.
 *
 * Cases come from the contract matrix (tools/matrix.h), a few per op. */
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
#define PER_OP 2       /* cases per op family */
#define MAX_SLICE 24   /* every M up to this, then only M = m */

static const int thread_counts[] = {1, 2, 3, 5, 8};
#define NTHREADS ((int)(sizeof thread_counts / sizeof thread_counts[0]))

/* Bytes of one row of b, and where matrix j's row r starts. */
static size_t row_bytes(const lk_mx_buf *b)
{
    return b->dtype == LK_T2 ? (size_t)(b->ld / 4) : (size_t)b->ld * lk_dtype_size(b->dtype);
}

static size_t row_start(const lk_mx_buf *b, int64_t j, int64_t r)
{
    int64_t e = j * b->batch_stride + r * b->ld;
    return b->dtype == LK_T2 ? (size_t)(e / 4) : (size_t)e * lk_dtype_size(b->dtype);
}

/* What a run of rows [off, off + len) must leave: the initial bytes, with
 * those rows of every output replaced by the whole run's. */
static int expected_slice(const lk_mx_case *c, const lk_mx_data *init, const lk_mx_data *whole,
                          int64_t off, int64_t len, lk_mx_data *exp)
{
    if (lk_mx_data_clone(init, exp) != LK_OK)
        return -1;
    for (int i = 0; i < c->nbuf; i++) {
        const lk_mx_buf *b = &c->buf[i];
        if (!exp->host[i] || b->role == LK_MX_IN || b->m_axis != LK_MX_AXIS_ROWS)
            continue;
        for (int64_t j = 0; j < b->nmat; j++)
            for (int64_t r = off; r < off + len; r++) {
                size_t at = row_start(b, j, r);
                size_t nb = row_bytes(b);
                if (at + nb > exp->bytes[i])
                    nb = exp->bytes[i] - at;
                memcpy((char *)exp->host[i] + at, (const char *)whole->host[i] + at, nb);
            }
    }
    return 0;
}

/* The first slice of c that differs on q, described in why; 0 if none. */
static int batch_invariance(lk_queue *q, const lk_mx_case *c, char *why, size_t size,
                            int *nslices)
{
    lk_mx_data init, whole, got, exp;
    lk_status st, ost;
    char msg[200];
    *nslices = 0;
    if (lk_mx_data_make(c, &init) != LK_OK) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    st = lk_mx_run(q, c, &init, &whole, LK_MX_WHOLE, NULL, &ost, msg, sizeof msg);
    if (st != LK_OK || ost != LK_OK) {
        snprintf(why, size, "%s", ost == LK_ERR_UNSUPPORTED ? "unsupported" : msg);
        lk_mx_data_free(&whole);
        lk_mx_data_free(&init);
        return ost == LK_ERR_UNSUPPORTED ? -2 : 1;
    }
    int bad = 0;
    for (int64_t len = 1; len <= c->m && !bad; len++) {
        if (len > MAX_SLICE && len != c->m)
            continue;
        int64_t offs[3] = {0, (c->m - len) / 2, c->m - len};
        for (int k = 0; k < 3 && !bad; k++) {
            if ((k == 1 && (offs[1] == 0 || offs[1] == offs[2])) || (k == 2 && offs[2] == 0))
                continue;
            lk_mx_slice s = {offs[k], len};
            (*nslices)++;
            st = lk_mx_run(q, c, &init, &got, s, NULL, &ost, msg, sizeof msg);
            lk_mx_result r;
            memset(&r, 0, sizeof r);
            if (st != LK_OK || ost != LK_OK) {
                snprintf(why, size, "rows [%lld, %lld): %s %s", (long long)offs[k],
                         (long long)(offs[k] + len), lk_status_string(ost), msg);
                bad = 1;
            } else if (expected_slice(c, &init, &whole, offs[k], len, &exp) != 0) {
                snprintf(why, size, "out of memory");
                bad = 1;
            } else {
                if (lk_mx_compare(c, &exp, &got, &r)) {
                    snprintf(why, size, "rows [%lld, %lld) of %lld: %s", (long long)offs[k],
                             (long long)(offs[k] + len), (long long)c->m, r.detail);
                    bad = 1;
                }
                lk_mx_data_free(&exp);
            }
            lk_mx_data_free(&got);
        }
    }
    lk_mx_data_free(&whole);
    lk_mx_data_free(&init);
    return bad;
}

/* Run c on q and on each of qs; 1 and a description if any differs. */
static int same_bytes(lk_queue *q, lk_queue *const *qs, const int *labels, int nq,
                      const char *what, const lk_mx_case *c, char *why, size_t size)
{
    lk_mx_data init, first, again;
    lk_status st, ost;
    char msg[200];
    if (lk_mx_data_make(c, &init) != LK_OK) {
        snprintf(why, size, "out of memory");
        return -1;
    }
    st = lk_mx_run(q, c, &init, &first, LK_MX_WHOLE, NULL, &ost, msg, sizeof msg);
    int bad = 0;
    if (st != LK_OK || ost != c->expect) {
        snprintf(why, size, "%s", ost == LK_ERR_UNSUPPORTED ? "unsupported" : msg);
        bad = ost == LK_ERR_UNSUPPORTED ? -2 : 1;
    }
    for (int i = 0; i < nq && !bad; i++) {
        lk_mx_result r;
        memset(&r, 0, sizeof r);
        st = lk_mx_run(qs[i], c, &init, &again, LK_MX_WHOLE, NULL, &ost, msg, sizeof msg);
        if (st != LK_OK || ost != c->expect) {
            snprintf(why, size, "%s %d: %s %s", what, labels[i], lk_status_string(ost), msg);
            bad = 1;
        } else if (lk_mx_compare(c, &first, &again, &r)) {
            snprintf(why, size, "%s %d: %s", what, labels[i], r.detail);
            bad = 1;
        }
        lk_mx_data_free(&again);
    }
    lk_mx_data_free(&first);
    lk_mx_data_free(&init);
    return bad;
}

static void report(int rc, const char *why, const char *fmt_what, const lk_mx_case *c,
                   const char *dev)
{
    if (rc == -2)
        skip(1, "%s [%d] %s %s on %s: unsupported", fmt_what, c->id, c->op, c->label, dev);
    else if (rc < 0)
        skip(1, "%s [%d] %s %s on %s: %s", fmt_what, c->id, c->op, c->label, dev, why);
    else if (!ok(rc == 0, "%s [%d] %s %s on %s", fmt_what, c->id, c->op, c->label, dev))
        diag("  %s", why);
}

int main(void)
{
    uint64_t seed = tap_seed();
    setenv("LOCKSTEP_TESTDRV_DEVMEM", "1", 0);

    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("no context: %s", lk_last_error());
    lk_device *devs[MAX_DEVICES];
    lk_queue *qs[MAX_DEVICES];
    lk_device_props props[MAX_DEVICES];
    int ndev = 0, ncpu = 0;
    for (int i = 0; i < lk_device_count(ctx) && ndev < MAX_DEVICES; i++) {
        if (lk_device_get(ctx, i, &devs[ndev]) != LK_OK ||
            lk_device_props_get(devs[ndev], &props[ndev]) != LK_OK)
            continue;
        if (lk_queue_create(devs[ndev], NULL, &qs[ndev]) != LK_OK)
            bail("no queue on %s: %s", props[ndev].name, lk_last_error());
        ncpu += props[ndev].kind == LK_DEVICE_CPU;
        ndev++;
    }

    /* a few cases per op family, from the small end of the matrix */
    lk_mx_case *all;
    int nall = lk_mx_build(seed, 0, &all);
    if (nall == 0)
        bail("out of memory building the matrix");
    int *pick = malloc((size_t)nall * sizeof *pick), npick = 0;
    if (!pick)
        bail("out of memory");
    for (int i = 0; i < nall; i++) {
        const lk_mx_case *c = &all[i];
        int same = 0;
        for (int j = 0; j < npick; j++)
            same += !strcmp(all[pick[j]].op, c->op);
        if (same >= PER_OP || c->expect != LK_OK || c->m > 257)
            continue;
        pick[npick++] = i;
    }
    int nbatch = 0;
    for (int i = 0; i < npick; i++)
        nbatch += all[pick[i]].m >= 2;
    diag("%d cases (%d with a batch axis) on %d devices, %d of them CPU devices", npick, nbatch,
         ndev, ncpu);
    plan(nbatch * ndev + npick * ndev + npick * (ncpu ? ncpu : 1));

    char why[400];
    for (int i = 0; i < npick; i++) {
        const lk_mx_case *c = &all[pick[i]];
        if (c->m < 2)
            continue;
        for (int d = 0; d < ndev; d++) {
            int ns;
            int rc = batch_invariance(qs[d], c, why, sizeof why, &ns);
            report(rc, why, "batch invariance", c, props[d].name);
        }
    }

    for (int i = 0; i < npick; i++) {
        const lk_mx_case *c = &all[pick[i]];
        for (int d = 0; d < ndev; d++) {
            lk_queue *q2[2] = {qs[d], NULL};
            int labels[2] = {2, 3};
            if (lk_queue_create(devs[d], NULL, &q2[1]) != LK_OK)
                bail("no second queue on %s: %s", props[d].name, lk_last_error());
            int rc = same_bytes(qs[d], q2, labels, 2, "run", c, why, sizeof why);
            report(rc, why, "run-to-run", c, props[d].name);
            lk_queue_destroy(q2[1]);
        }
    }

    if (ncpu == 0) {
        for (int i = 0; i < npick; i++)
            skip(1, "thread-count invariance [%d] %s %s: no cpu device", all[pick[i]].id,
                 all[pick[i]].op, all[pick[i]].label);
    }
    for (int d = 0; d < ndev; d++) {
        if (props[d].kind != LK_DEVICE_CPU)
            continue;
        lk_queue *tq[NTHREADS];
        for (int t = 0; t < NTHREADS; t++) {
            lk_queue_opts o;
            memset(&o, 0, sizeof o);
            o.num_threads = thread_counts[t];
            if (lk_queue_create(devs[d], &o, &tq[t]) != LK_OK)
                bail("no %d-thread queue on %s: %s", thread_counts[t], props[d].name,
                     lk_last_error());
        }
        for (int i = 0; i < npick; i++) {
            int rc = same_bytes(qs[d], tq, thread_counts, NTHREADS, "num_threads",
                                &all[pick[i]], why, sizeof why);
            report(rc, why, "thread-count invariance", &all[pick[i]], props[d].name);
        }
        for (int t = 0; t < NTHREADS; t++)
            lk_queue_destroy(tq[t]);
    }

    free(pick);
    free(all);
    for (int d = 0; d < ndev; d++)
        lk_queue_destroy(qs[d]);
    lk_context_destroy(ctx);
    return done_testing();
}
