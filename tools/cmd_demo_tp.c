/* Lockstep command: `lockstep demo --tp N` and `--pp N`, the BitNet
 * decoder split across N ranks (examples/bitnet/shard.h), one rank per
 * device under mpirun, with the SHA-256 of every step's logits against
 * the one-device model on rank 0's device and on the CPU: the same bits,
 * or the command fails on every rank. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <lockstep.h>

#include "examples/bitnet/model.h"
#include "examples/bitnet/sha256.h"
#include "examples/bitnet/shard.h"
#include "tools/cmd.h"

#define TP_MAX_BATCH 32
#define TP_MAX_BATCHES 4
#define TP_MAX_STEPS 64
#define TP_MAX_REF 4

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: mpirun -np N lockstep demo --tp N | --pp N [options]\n\n"
            "The BitNet b1.58 decoder of `lockstep demo` split across N ranks, one device\n"
            "each: --tp splits heads, FFN and vocabulary (tensor parallel), --pp splits the\n"
            "layers (pipeline parallel, micro-batches in flight).  Rank 0 prints the\n"
            "SHA-256 of each step's logits beside those of the one-device model (on rank\n"
            "0's device and on the CPU) and every rank exits 1 unless they are the same\n"
            "bits.  docs/multi-device.md says how to run it across machines.\n\n"
            "  --tp N / --pp N   the split; N must be the number of ranks\n"
            "  --micro N         --pp: micro-batches per call (default 2, at most the batch)\n"
            "  --tiny            the tiny built-in model (dim 256)\n"
            "  --shape NAME      2b4t (default; --layers of BitNet-2B-4T's shapes) or 70b\n"
            "                    (80 layers, hidden 8192, FFN 28672, 64 / 8 heads, ~19 GB)\n"
            "  --layers N        layers of the built-in model (default 2)\n"
            "  --seed N          seed of the weights (default 1)\n"
            "  --prompt-len N    prompt length (default 8)\n"
            "  --steps N         decode steps (default 4)\n"
            "  --batch LIST      batch sizes, up to 32 (default 1)\n"
            "  --device LIST     the device of each rank, comma-separated in rank order\n"
            "                    (the last repeats; default: cuda:<local rank> where there\n"
            "                    is a GPU, else cpu)\n"
            "  --ref LIST        the one-device references on rank 0 (default: rank 0's\n"
            "                    device and cpu; none: no reference, digests only)\n"
            "  --threads N       CPU threads per device\n"
            "  --no-prepare      plain ops on the weights as stored\n"
            "  --graph           --tp over NCCL: each decode step's layers as one captured\n"
            "                    graph (the same bits; elsewhere the steps run eagerly)\n"
            "  --full            full hashes\n"
            "  --comm-bench      first time the collectives on hidden-size vectors (2560 to\n"
            "                    65536 floats) beside their floor: the latency of a 4-byte\n"
            "                    all-gather plus the bytes at the rate of a 1 MiB one\n"
            "  --floor-gbs G     the device's memory bandwidth in GB/s: print the decode\n"
            "                    floor, weights per rank / G + collectives x latency\n");
}

/* The n-th comma-separated item of list (the last one past the end). */
static void list_item(const char *list, int n, char *out, size_t len)
{
    const char *p = list;
    for (int i = 0; i < n; i++) {
        const char *c = strchr(p, ',');
        if (!c)
            break;
        p = c + 1;
    }
    size_t k = strcspn(p, ",");
    snprintf(out, len, "%.*s", (int)(k < len ? k : len - 1), p);
}

typedef struct run_result {
    char name[64];
    char hash[TP_MAX_BATCHES][TP_MAX_STEPS + 1][65]; /* sequence 0 */
    char digest[65];
    double prefill_tps[TP_MAX_BATCHES], decode_tps[TP_MAX_BATCHES];
    int32_t tokens[TP_MAX_STEPS + 1];
    /* PP: bn_shard_decode_pipelined's rate and whether its tokens are the
     * step-by-step run's (-1: not run) */
    double pipe_tps[TP_MAX_BATCHES];
    int pipe_same[TP_MAX_BATCHES];
} run_result;

typedef struct demo_args {
    int64_t T;
    long steps;
    int nbatch;
    long batches[TP_MAX_BATCHES];
    const int32_t *prompt;
    int64_t vocab;
    int pipelined;
} demo_args;

static void digest_of(run_result *r, const demo_args *a, char (*all)[TP_MAX_STEPS + 1][TP_MAX_BATCH][65])
{
    lk_sha256 s;
    uint8_t d[32];
    lk_sha256_init(&s);
    for (int bi = 0; bi < a->nbatch; bi++)
        for (long st = 0; st <= a->steps; st++)
            for (long b = 0; b < a->batches[bi]; b++)
                lk_sha256_update(&s, all[bi][st][b], 64);
    lk_sha256_final(&s, d);
    lk_sha256_tohex(d, r->digest);
}

/* The sharded model's run: every rank; hashes on rank 0. */
static int run_shard(bn_shard *sh, int rank, const demo_args *a, run_result *r, float *logits,
                     char (*all)[TP_MAX_STEPS + 1][TP_MAX_BATCH][65], char *err, size_t errlen)
{
    /* each step's next tokens: step by step (sw), pipelined (pt) */
    static int32_t sw[TP_MAX_STEPS * TP_MAX_BATCH], pt[TP_MAX_STEPS * TP_MAX_BATCH];
    for (int bi = 0; bi < a->nbatch; bi++) {
        const int64_t B = a->batches[bi];
        int32_t next[TP_MAX_BATCH], ids[TP_MAX_BATCH];
        double tdec = 0, t0 = lk_tool_now();
        if (bn_shard_forward(sh, B, a->T, 0, a->prompt, next, err, errlen))
            return -1;
        r->prefill_tps[bi] = (double)(B * a->T) / (lk_tool_now() - t0);
        for (long st = 0;; st++) {
            /* the logits to rank 0 and hashed outside the timing */
            if (bn_shard_logits(sh, B, logits, err, errlen))
                return -1;
            for (int64_t b = 0; rank == 0 && b < B; b++)
                lk_sha256_hex(logits + b * a->vocab, (size_t)a->vocab * 4, all[bi][st][b]);
            if (rank == 0) {
                memcpy(r->hash[bi][st], all[bi][st][0], 65);
                if (bi == 0)
                    r->tokens[st] = next[0];
            }
            if (st == a->steps)
                break;
            memcpy(ids, next, sizeof ids);
            t0 = lk_tool_now();
            if (bn_shard_forward(sh, B, 1, a->T + st, ids, next, err, errlen))
                return -1;
            tdec += lk_tool_now() - t0;
            memcpy(sw + st * B, next, (size_t)B * sizeof *next);
        }
        r->decode_tps[bi] = a->steps && tdec > 0 ? (double)(B * a->steps) / tdec : 0;
        r->pipe_same[bi] = -1;
        if (a->pipelined && a->steps) {
            /* the same steps again with micro-batches of successive steps
             * in flight, after the same prefill: the same tokens */
            if (bn_shard_forward(sh, B, a->T, 0, a->prompt, next, err, errlen))
                return -1;
            t0 = lk_tool_now();
            if (bn_shard_decode_pipelined(sh, B, a->steps, a->T, next, pt, err, errlen))
                return -1;
            r->pipe_tps[bi] = (double)(B * a->steps) / (lk_tool_now() - t0);
            r->pipe_same[bi] = !memcmp(pt, sw, (size_t)(B * a->steps) * sizeof *pt);
        }
    }
    if (rank == 0)
        digest_of(r, a, all);
    return 0;
}

/* The one-device model on dev (rank 0 only). */
static int run_ref(lk_device *dev, int threads, const bn_weights *w, unsigned flags,
                   const demo_args *a, run_result *r, float *logits,
                   char (*all)[TP_MAX_STEPS + 1][TP_MAX_BATCH][65], char *err, size_t errlen)
{
    int64_t maxb = 1;
    for (int i = 0; i < a->nbatch; i++)
        maxb = a->batches[i] > maxb ? a->batches[i] : maxb;
    bn_model *m = NULL;
    if (bn_model_create(dev, threads, w, maxb, a->T, flags, &m, err, errlen))
        return -1;
    int bad = 0;
    for (int bi = 0; bi < a->nbatch && !bad; bi++) {
        const int64_t B = a->batches[bi];
        int32_t next[TP_MAX_BATCH], ids[TP_MAX_BATCH];
        double tdec = 0, t0 = lk_tool_now();
        bad = bn_model_forward(m, B, a->T, 0, a->prompt, logits, next, err, errlen);
        r->prefill_tps[bi] = (double)(B * a->T) / (lk_tool_now() - t0);
        for (long st = 0; !bad; st++) {
            for (int64_t b = 0; b < B; b++)
                lk_sha256_hex(logits + b * a->vocab, (size_t)a->vocab * 4, all[bi][st][b]);
            memcpy(r->hash[bi][st], all[bi][st][0], 65);
            if (bi == 0)
                r->tokens[st] = next[0];
            if (st == a->steps)
                break;
            memcpy(ids, next, sizeof ids);
            t0 = lk_tool_now();
            bad = bn_model_forward(m, B, 1, a->T + st, ids, logits, next, err, errlen);
            tdec += lk_tool_now() - t0;
        }
        r->decode_tps[bi] = a->steps && tdec > 0 ? (double)(B * a->steps) / tdec : 0;
    }
    bn_model_destroy(m);
    if (!bad)
        digest_of(r, a, all);
    return bad ? -1 : 0;
}

/* An int from root to every rank, through host memory. */
static int share_int(lk_comm *comm, lk_queue *hq, int32_t *v, int root)
{
    lk_tensor t = lk_mat(v, LK_I32, 1, 1);
    return lk_comm_broadcast(comm, hq, &t, root) == LK_OK ? 0 : -1;
}

/* Seconds per call of f, the median of 5 batches of reps calls. */
typedef lk_status (*coll_fn)(lk_comm *c, lk_queue *q, void *arg);
static double time_coll(lk_comm *c, lk_queue *q, coll_fn f, void *arg, int reps, lk_status *st)
{
    double t[5];
    *st = f(c, q, arg); /* warm */
    for (int k = 0; k < 5 && *st == LK_OK; k++) {
        double t0 = lk_tool_now();
        for (int i = 0; i < reps && *st == LK_OK; i++)
            *st = f(c, q, arg);
        if (*st == LK_OK)
            *st = lk_queue_sync(q);
        t[k] = (lk_tool_now() - t0) / reps;
    }
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j], t[j] = x;
            }
    return t[2];
}

typedef struct coll_arg {
    lk_tensor x, y;
    int peer, sending;
} coll_arg;

static lk_status do_gather(lk_comm *c, lk_queue *q, void *p)
{
    coll_arg *a = p;
    return lk_comm_all_gather(c, q, &a->x, &a->y);
}
static lk_status do_max(lk_comm *c, lk_queue *q, void *p)
{
    coll_arg *a = p;
    return lk_comm_all_reduce(c, q, LK_COMM_MAX, &a->x, &a->y);
}
static lk_status do_bcast(lk_comm *c, lk_queue *q, void *p)
{
    coll_arg *a = p;
    return lk_comm_broadcast(c, q, &a->y, 0);
}
/* rank 0 sends to rank 1 and back: half of it is one transfer */
static lk_status do_pingpong(lk_comm *c, lk_queue *q, void *p)
{
    coll_arg *a = p;
    const int r = lk_comm_rank(c);
    lk_status st = LK_OK;
    if (r == 0 && (st = lk_comm_send(c, q, &a->y, 1)) == LK_OK)
        st = lk_comm_recv(c, q, &a->y, 1);
    else if (r == 1 && (st = lk_comm_recv(c, q, &a->y, 0)) == LK_OK)
        st = lk_comm_send(c, q, &a->y, 0);
    return st;
}

/* The latency of a 4-byte all-gather into *lat; with print, the table of
 * the collectives on hidden-size vectors beside their floor (rank 0
 * prints). */
static int comm_bench(lk_comm *comm, lk_device *dev, int print, double *lat, char *err,
                      size_t errlen)
{
    const int rank = lk_comm_rank(comm), size = lk_comm_size(comm);
    lk_queue *q = NULL;
    void *buf = NULL;
    const int64_t big = 1 << 18; /* floats: 1 MiB */
    lk_status st = lk_comm_queue_create(comm, 0, &q);
    if (!st)
        st = lk_malloc(dev, (size_t)(big + 65536 + 16) * 4 * 2, &buf);
    if (st) {
        snprintf(err, errlen, "comm bench: %s", lk_last_error());
        lk_queue_destroy(q);
        return -1;
    }
    float *y = buf, *x = (float *)buf + big + 65536 + 16;
    coll_arg a;
    a.x = lk_mat(x, LK_F32, 1, 1), a.y = lk_mat(y, LK_F32, 1, size);
    *lat = time_coll(comm, q, do_gather, &a, 50, &st);
    double bw = 0;
    if (!st && print) {
        a.x = lk_mat(x, LK_F32, 1, big / size), a.y = lk_mat(y, LK_F32, 1, big / size * size);
        double t = time_coll(comm, q, do_gather, &a, 2, &st);
        bw = (double)(big / size * (size - 1)) * 4 / (t > 2 * *lat ? t - *lat : t);
        if (rank == 0)
            printf("comm bench over %d ranks (transport %s): latency %.1f us (4-byte all-gather), "
                   "%.1f GB/s into each rank (1 MiB all-gather)\n%-10s %8s %12s %12s %12s\n",
                   size, lk_comm_transport(comm), *lat * 1e6, bw / 1e9, "collective", "floats",
                   "us/call", "floor us", "floor/call");
        static const int64_t sizes[5] = {2560, 8192, 16384, 28672, 65536};
        for (int i = 0; i < 5 && !st; i++) {
            const int64_t n = sizes[i], w = n / size;
            for (int k = 0; k < 4 && !st; k++) {
                static const char *const nm[4] = {"all-gather", "max", "broadcast", "send"};
                static const coll_fn fn[4] = {do_gather, do_max, do_bcast, do_pingpong};
                double bytes = 0;
                if (k == 0)
                    a.x = lk_mat(x, LK_F32, 1, w), a.y = lk_mat(y, LK_F32, 1, w * size),
                    bytes = (double)(w * (size - 1)) * 4;
                else if (k == 1)
                    a.x = lk_mat(x, LK_F32, 1, n), a.y = lk_mat(y, LK_F32, 1, n),
                    bytes = (double)(n * (size - 1)) * 4;
                else
                    a.y = lk_mat(y, LK_F32, 1, n), bytes = (double)n * 4;
                double tt = time_coll(comm, q, fn[k], &a, 20, &st);
                if (k == 3)
                    tt /= 2;
                const double fl = *lat + (bw > 0 ? bytes / bw : 0);
                if (rank == 0 && !st)
                    printf("%-10s %8lld %12.1f %12.1f %11.0f%%\n", nm[k], (long long)n, tt * 1e6,
                           fl * 1e6, 100.0 * fl / tt);
            }
        }
        if (rank == 0)
            printf("(eager calls; each includes the ranks' agreement on the arguments)\n\n");
        fflush(stdout);
    }
    if (st)
        snprintf(err, errlen, "comm bench: %s", lk_last_error());
    lk_free(dev, buf);
    lk_queue_destroy(q);
    return st ? -1 : 0;
}

int lk_cmd_demo_sharded(int argc, char **argv)
{
    long tp = 0, pp = 0, micro = 2, layers = 2, seed = 1, plen = 8, steps = 4, threads = 0;
    long batches[TP_MAX_BATCHES] = {1};
    int nbatch = 1, tiny = 0, prep = 1, full = 0, cbench = 0, graph = 0;
    double floor_gbs = 0;
    const char *shape = "2b4t", *devlist = NULL, *reflist = NULL;
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
#define NUM(var, lo, hi)                                                                \
    do {                                                                                \
        if (!v || (var = strtol(v, &end, 0), *end) || var < (lo) || var > (hi)) {       \
            fprintf(stderr, "lockstep demo: %s needs a number in [%ld, %ld]\n", a,      \
                    (long)(lo), (long)(hi));                                            \
            return 2;                                                                   \
        }                                                                               \
        i++;                                                                            \
    } while (0)
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--tp")) {
            NUM(tp, 1, 4096);
        } else if (!strcmp(a, "--pp")) {
            NUM(pp, 1, 4096);
        } else if (!strcmp(a, "--micro")) {
            NUM(micro, 1, TP_MAX_BATCH);
        } else if (!strcmp(a, "--layers")) {
            NUM(layers, 1, 1000);
        } else if (!strcmp(a, "--seed")) {
            NUM(seed, 0, 0x7fffffffL);
        } else if (!strcmp(a, "--prompt-len")) {
            NUM(plen, 1, 4096);
        } else if (!strcmp(a, "--steps")) {
            NUM(steps, 0, TP_MAX_STEPS);
        } else if (!strcmp(a, "--threads")) {
            NUM(threads, 0, 4096);
        } else if (!strcmp(a, "--tiny")) {
            tiny = 1;
        } else if (!strcmp(a, "--no-prepare")) {
            prep = 0;
        } else if (!strcmp(a, "--no-graph")) {
            graph = 0;
        } else if (!strcmp(a, "--graph")) {
            graph = 1;
        } else if (!strcmp(a, "--full")) {
            full = 1;
        } else if (!strcmp(a, "--comm-bench")) {
            cbench = 1;
        } else if (!strcmp(a, "--floor-gbs") && v && (floor_gbs = strtod(v, &end)) > 0 && !*end) {
            i++;
        } else if (!strcmp(a, "--shape") && v && (!strcmp(v, "2b4t") || !strcmp(v, "70b"))) {
            shape = argv[++i];
        } else if (!strcmp(a, "--device") && v) {
            devlist = argv[++i];
        } else if (!strcmp(a, "--ref") && v) {
            reflist = argv[++i];
        } else if (!strcmp(a, "--batch") && v &&
                   (nbatch = lk_tool_parse_list(v, batches, TP_MAX_BATCHES, 1, TP_MAX_BATCH)) > 0) {
            i++;
        } else {
            fprintf(stderr, "lockstep demo: unknown or incomplete option \"%s\" (with --tp or "
                            "--pp)\n\n", a);
            usage(stderr);
            return 2;
        }
#undef NUM
    }
    if (!tp == !pp) {
        fprintf(stderr, "lockstep demo: give one of --tp N and --pp N\n");
        return 2;
    }
    const int mode = tp ? BN_SHARD_TP : BN_SHARD_PP;
    const long want = tp ? tp : pp;

    lk_comm *comm = NULL;
    if (lk_comm_create_mpi(NULL, &comm) != LK_OK) {
        fprintf(stderr, "lockstep demo: %s\n", lk_last_error());
        return 2;
    }
    const int rank = lk_comm_rank(comm), size = lk_comm_size(comm);
    if (size != want) {
        if (rank == 0)
            fprintf(stderr, "lockstep demo: --%s %ld needs %ld ranks, this job has %d (run it as "
                    "mpirun -np %ld lockstep demo ...)\n", tp ? "tp" : "pp", want, want, size,
                    want);
        lk_comm_destroy(comm);
        return 2;
    }

    /* The weights: every rank draws the same from the seed. */
    bn_config cfg = tiny ? bn_config_tiny(layers) : bn_config_2b4t(layers);
    if (!tiny && !strcmp(shape, "70b")) {
        cfg.n_layer = 80, cfg.dim = 8192, cfg.ffn = 28672, cfg.n_head = 64, cfg.n_kv = 8;
        cfg.head_dim = 128, cfg.max_ctx = 4096;
    }
    if (mode == BN_SHARD_PP && cfg.n_layer < size) {
        if (rank == 0)
            fprintf(stderr, "lockstep demo: --pp %d needs at least %d layers (--layers)\n", size,
                    size);
        lk_comm_destroy(comm);
        return 2;
    }
    int64_t maxb = 1;
    for (int i = 0; i < nbatch; i++)
        maxb = batches[i] > maxb ? batches[i] : maxb;
    if (plen + steps > cfg.max_ctx) {
        if (rank == 0)
            fprintf(stderr, "lockstep demo: %ld prompt tokens + %ld steps exceed the context "
                    "(%lld)\n", plen, steps, (long long)cfg.max_ctx);
        lk_comm_destroy(comm);
        return 2;
    }
    cfg.max_ctx = plen + steps;
    /* this rank's rows only (bn_weights_generate's bits); the one-device
     * references draw the whole model later */
    bn_weights w;
    memset(&w, 0, sizeof w);
    int bad = bn_shard_weights(&w, &cfg, (uint64_t)seed, mode, rank, size, err, sizeof err);
    int32_t *prompt = malloc((size_t)(maxb * plen) * 4);
    float *logits = malloc((size_t)(maxb * cfg.vocab) * 4);
    char (*all)[TP_MAX_STEPS + 1][TP_MAX_BATCH][65] = calloc(TP_MAX_BATCHES, sizeof *all);
    run_result *res = calloc(1 + TP_MAX_REF, sizeof *res);
    if (!bad && (!prompt || !logits || !all || !res))
        bad = 1, snprintf(err, sizeof err, "out of memory");
    for (int64_t b = 0; prompt && b < maxb; b++)
        for (int64_t t = 0; t < plen; t++)
            prompt[b * plen + t] = (int32_t)((1 + 31 * t + 7919 * b) % cfg.vocab);

    /* This rank's device, and a host queue for host-side exchanges. */
    lk_context *ctx = NULL;
    lk_device *dev = NULL, *hdev = NULL;
    lk_queue *hq = NULL;
    char dname[64];
    if (!bad && lk_context_create(&ctx) != LK_OK)
        bad = 1, snprintf(err, sizeof err, "%s", lk_last_error());
    if (!bad) {
        if (devlist) {
            list_item(devlist, rank, dname, sizeof dname);
        } else {
            snprintf(dname, sizeof dname, "cuda:%d", lk_comm_local_rank(comm));
            if (lk_device_find(ctx, dname, &dev) != LK_OK)
                snprintf(dname, sizeof dname, "cpu");
            dev = NULL;
        }
        lk_queue_opts one = {1, NULL}; /* small host-side exchanges only */
        if (lk_device_find(ctx, dname, &dev) != LK_OK || lk_device_find(ctx, "cpu", &hdev) != LK_OK ||
            lk_queue_create(hdev, &one, &hq) != LK_OK)
            bad = 1, snprintf(err, sizeof err, "%s", lk_last_error());
    }
    /* Every rank learns whether every rank got this far. */
    int32_t ok = !bad, every = 1;
    if (hq) {
        for (int r = 0; r < size; r++) {
            int32_t v = ok;
            if (share_int(comm, hq, &v, r))
                v = 0;
            every &= v != 0;
        }
    } else {
        /* no host queue: the others cannot hear of it, so end them */
        fprintf(stderr, "lockstep demo: rank %d: %s; ending every rank\n", rank, err);
        lk_comm_abort(comm, 1);
    }
    if (!every) {
        if (bad)
            fprintf(stderr, "lockstep demo: rank %d: %s\n", rank, err);
        else if (rank == 0)
            fprintf(stderr, "lockstep demo: another rank could not start (its message above)\n");
        goto done;
    }
    if (lk_comm_attach(comm, dev) != LK_OK) {
        fprintf(stderr, "lockstep demo: rank %d: %s\n", rank, lk_last_error());
        bad = 1;
        goto done;
    }

    double lat = 0;
    if (comm_bench(comm, dev, cbench, &lat, err, sizeof err)) {
        fprintf(stderr, "lockstep demo: rank %d: %s; ending every rank\n", rank, err);
        lk_comm_abort(comm, 1);
    }

    bn_shard *sh = NULL;
    const unsigned flags = prep ? BN_PREPARED : 0;
    int sbad = bn_shard_create(comm, dev, (int)threads, &w, mode, maxb, plen, micro,
                               flags | (graph ? BN_GRAPH : 0), &sh, err, sizeof err);
    /* a rank that failed here says so and ends the job: the others may be
     * inside a collective already */
    if (sbad) {
        fprintf(stderr, "lockstep demo: rank %d: %s; ending every rank\n", rank, err);
        lk_comm_abort(comm, 1);
    }
    {
        /* each rank's line, rank 0 prints them in order */
        char line[256];
        bn_shard_describe(sh, line, sizeof line);
        lk_tensor lt = lk_mat(line, LK_I8, 1, sizeof line);
        if (rank == 0) {
            printf("lockstep demo: BitNet b1.58, built-in %s model (seed %ld), %s over %d ranks "
                   "(transport %s)\n  %lld layers, hidden %lld, %lld heads / %lld KV heads of "
                   "%lld, FFN %lld, vocab %lld; prompt %ld, %ld decode steps\n",
                   tiny ? "tiny" : !strcmp(shape, "70b") ? "70B-class" : "BitNet-2B-4T-shaped",
                   seed, mode == BN_SHARD_TP ? "tensor parallel" : "pipeline parallel", size,
                   lk_comm_transport(comm), (long long)cfg.n_layer, (long long)cfg.dim,
                   (long long)cfg.n_head, (long long)cfg.n_kv, (long long)cfg.head_dim,
                   (long long)cfg.ffn, (long long)cfg.vocab, plen, steps);
            printf("  %s\n", line);
            if (graph)
                printf("  decode steps: %s\n", bn_shard_graphs(sh) ? "captured graphs"
                                                                   : "eager (graphs need --tp over NCCL, or one rank)");
        }
        for (int r = 1; r < size; r++) {
            lk_status st = rank == r ? lk_comm_send(comm, hq, &lt, 0)
                           : rank == 0 ? lk_comm_recv(comm, hq, &lt, r) : LK_OK;
            if (st != LK_OK) {
                fprintf(stderr, "lockstep demo: rank %d: %s; ending every rank\n", rank,
                        lk_last_error());
                lk_comm_abort(comm, 1);
            }
            if (rank == 0)
                printf("  %.*s\n", (int)sizeof line - 1, line);
        }
        fflush(stdout);
    }

    demo_args da = {plen, steps, nbatch, {0}, prompt, cfg.vocab, mode == BN_SHARD_PP};
    memcpy(da.batches, batches, sizeof batches);
    snprintf(res[0].name, sizeof res[0].name, "%s%d", mode == BN_SHARD_TP ? "tp" : "pp", size);
    if (run_shard(sh, rank, &da, &res[0], logits, all, err, sizeof err)) {
        fprintf(stderr, "lockstep demo: rank %d: %s; ending every rank\n", rank, err);
        lk_comm_abort(comm, 1);
    }
    const double wb = bn_shard_weight_bytes(sh);
    bn_shard_destroy(sh);
    bn_weights_free(&w);

    /* The references, on rank 0; the others wait for the verdict. */
    int32_t verdict = 0;
    if (rank == 0) {
        int nref = 0;
        char refs[TP_MAX_REF][64];
        if (!reflist) {
            snprintf(refs[nref++], 64, "%s", dname);
            if (strcmp(dname, "cpu"))
                snprintf(refs[nref++], 64, "cpu");
        } else if (strcmp(reflist, "none")) {
            for (int i = 0; i < TP_MAX_REF; i++) {
                char item[64];
                list_item(reflist, i, item, sizeof item);
                if (i && !strcmp(item, refs[nref - 1]))
                    break;
                snprintf(refs[nref++], 64, "%s", item);
            }
        }
        int nran = 0;
        if (nref && bn_weights_generate(&w, &cfg, (uint64_t)seed, err, sizeof err)) {
            printf("  the references cannot run: %s\n", err);
            verdict = 1;
            nref = 0;
        }
        for (int i = 0; i < nref; i++) {
            lk_device *rd = NULL;
            run_result *r = &res[1 + nran];
            snprintf(r->name, sizeof r->name, "%.63s", refs[i]);
            if (lk_device_find(ctx, refs[i], &rd) != LK_OK ||
                run_ref(rd, (int)threads, &w, flags, &da, r, logits, all, err, sizeof err)) {
                printf("  reference %s cannot run: %s\n", refs[i],
                       rd ? err : lk_last_error());
                verdict = 1;
                continue;
            }
            nran++;
        }
        printf("\n%-24s", "run");
        for (int bi = 0; bi < nbatch; bi++)
            printf("  prefill b%ld   decode b%ld ", batches[bi], batches[bi]);
        printf(" (tokens/s)\n");
        for (int i = 0; i <= nran; i++) {
            printf("%-24s", res[i].name);
            for (int bi = 0; bi < nbatch; bi++)
                printf("  %10.2f  %10.2f  ", res[i].prefill_tps[bi], res[i].decode_tps[bi]);
            printf("\n");
        }
        for (int bi = 0; bi < nbatch; bi++) {
            if (res[0].pipe_same[bi] < 0)
                continue;
            const long nm = micro < batches[bi] ? micro : batches[bi];
            printf("pipelined decode b%ld: %.2f tokens/s over %ld steps, %ld micro-batch%s in "
                   "flight, tokens %s\n", batches[bi], res[0].pipe_tps[bi], steps, nm,
                   nm == 1 ? "" : "es", res[0].pipe_same[bi] ? "identical" : "DIFFERENT");
            verdict |= !res[0].pipe_same[bi];
        }
        /* collectives per decode step: TP 4 all-gathers a layer and the
         * argmax; PP a send per stage boundary and micro-batch, and the
         * broadcast of the next tokens */
        const long ncoll = mode == BN_SHARD_TP ? 4 * (long)cfg.n_layer + 1
                                               : (long)(size - 1) * (micro < batches[0] ? micro : batches[0]) + 1;
        printf("\nweights per rank: %.1f MB (rank 0); %ld collectives per decode step, %.1f us "
               "each at least (a 4-byte all-gather)\n", wb / 1e6, ncoll, lat * 1e6);
        if (floor_gbs > 0 && res[0].decode_tps[0] > 0) {
            const double fl = wb / (floor_gbs * 1e9) + (double)ncoll * lat;
            printf("decode b%ld floor: %.1f us a step (weights %.1f us at %.0f GB/s + "
                   "collectives %.1f us); measured %.1f us (%.0f%% of the floor's rate)\n",
                   batches[0], fl * 1e6, wb / (floor_gbs * 1e3), floor_gbs,
                   (double)ncoll * lat * 1e6, 1e6 * (double)batches[0] / res[0].decode_tps[0],
                   100.0 * fl * res[0].decode_tps[0] / (double)batches[0]);
        }
        printf("\nSHA-256 of the logits of sequence 0, batch %ld (step 0 is the prefill's last "
               "token)%s:\n", batches[0], full ? "" : ", first 16 hex digits per run");
        for (long st = 0; st <= steps; st++) {
            int same = 1;
            printf("step %-3ld", st);
            for (int i = 0; i <= nran; i++) {
                printf(full ? " %s" : " %.16s", res[i].hash[0][st]);
                same &= !strcmp(res[i].hash[0][st], res[0].hash[0][st]);
            }
            printf("  %s\n", same ? "same" : "DIFFERENT");
        }
        printf("\ntokens (sequence 0):");
        for (long st = 0; st <= steps; st++)
            printf(" %d", res[0].tokens[st]);
        printf("\n\ndigest of every step, sequence and batch size per run:\n");
        for (int i = 0; i <= nran; i++) {
            int same = !strcmp(res[i].digest, res[0].digest);
            verdict |= !same;
            printf("  %-24s %s%s\n", res[i].name, res[i].digest, same ? "" : "  DIFFERENT");
        }
        printf("\n%s: %s over %d ranks against %d one-device run%s\n",
               verdict ? "FAILED" : "identical logits", res[0].name, size, nran,
               nran == 1 ? "" : "s");
        fflush(stdout);
    }
    if (share_int(comm, hq, &verdict, 0)) {
        fprintf(stderr, "lockstep demo: rank %d: %s\n", rank, lk_last_error());
        verdict = 1;
    }
    bad = verdict != 0;
done:
    lk_queue_destroy(hq);
    free(prompt);
    free(logits);
    free(all);
    free(res);
    bn_weights_free(&w);
    lk_context_destroy(ctx);
    lk_comm_destroy(comm);
    return bad ? 1 : 0;
}
