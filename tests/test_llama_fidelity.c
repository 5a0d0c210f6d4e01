/* The demo model (examples/bitnet/model.c) against llama.cpp on GGUF files
 * of each architecture it accepts (examples/bitnet/arch.c): a tiny model
 * is written as a GGUF file (bn_weights_to_gguf, TQ2_0 projections), read
 * back as `lockstep demo --model` reads it (so the RoPE pairing and FFN
 * activation come from the file's architecture), run on the reference
 * device, and run by llama.cpp's library through lockstep-llama-logits
 * (tests/peers/llama_logits.c, built with llama.cpp by
 * scripts/get-peers.sh, outside the tree, in $LOCKSTEP_PEERS_DIR/llama.cpp
 * or ~/.cache/lockstep/peers/llama.cpp).  Without it the test is a SKIP.
 *
 * The bits cannot agree: llama.cpp quantises the activations of a TQ2_0
 * product in blocks of 256 (Q8_K) where Lockstep quantises per token, and
 * rounds the last hidden state to bf16 for the bf16 LM head (the driver
 * keeps its KV cache in f32).  So the test compares the top-k token ids
 * and prints the largest logit difference (two ids at one rank may differ
 * only where their logits here are closer than twice it), on weights
 * whose top tokens are well separated (embedding rows of lognormal norms,
 * the first seed whose top K logits stand apart by 4% of the top one and
 * a tenth of the logits' standard deviation), and checks the
 * comparison has teeth: the other RoPE pairing and the other FFN
 * activation are each much further from llama.cpp.  An architecture
 * llama.cpp does not know (bitnet.cpp's) is a SKIP naming it. */
#define _POSIX_C_SOURCE 200809L /* popen, mkstemp */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lockstep.h>

#include "examples/bitnet/arch.h"
#include "examples/bitnet/gguf.h"
#include "examples/bitnet/model.h"
#include "tests/tap.h"

#define K 5      /* top-k compared */
#define T 12     /* prompt tokens */
#define SEEDS 400 /* weights tried for well separated top tokens */
#define SPREAD 1.0 /* the log-standard deviation of the embedding rows' norms */

static char err[512];

/* llama.cpp's architectures (upstream, which get-peers.sh builds). */
static int llama_knows(const char *arch)
{
    return !strcmp(arch, "bitnet");
}

static int run_lockstep(lk_device *ref, const bn_weights *w, const int32_t *ids, float *logits)
{
    bn_model *m = NULL;
    int32_t next;
    if (bn_model_create(ref, 0, w, 1, T, 0, &m, err, sizeof err))
        return -1;
    int rc = bn_model_forward(m, 1, T, 0, ids, logits, &next, err, sizeof err);
    bn_model_destroy(m);
    return rc;
}

/* The indices of the k largest values, largest first. */
static void topk(const float *v, int64_t n, int *idx)
{
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int64_t i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++)
                taken |= idx[q] == (int)i;
            if (!taken && (best < 0 || v[i] > v[best]))
                best = (int)i;
        }
        idx[j] = best;
    }
}

static double stddev(const float *v, int64_t n)
{
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i], s2 += (double)v[i] * v[i];
    s /= (double)n;
    return sqrt(s2 / (double)n - s * s);
}

/* Apart: each of the top K logits above the next by a tenth of the
 * logits' standard deviation and by 4% of the top logit (the two engines'
 * logits differ by a few per cent of the top one). */
static int separated(const float *v, int64_t n)
{
    int idx[K];
    topk(v, n, idx);
    double gap = fmax(stddev(v, n) / 10, 0.04 * fabs((double)v[idx[0]]));
    float next = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        int taken = 0;
        for (int q = 0; q < K; q++)
            taken |= idx[q] == (int)i;
        if (!taken && v[i] > next)
            next = v[i];
    }
    for (int j = 0; j < K; j++) {
        float below = j + 1 < K ? v[idx[j + 1]] : next;
        if (v[idx[j]] - below < gap)
            return 0;
    }
    return 1;
}

/* Heavy-tailed logits: each token's embedding row (the tied LM head) is
 * scaled by a lognormal factor, so that the top tokens are a few rows of
 * large norm whose logits stand apart, instead of the close-packed tail of
 * a thousand like rows. */
static void spread_rows(bn_weights *w, uint64_t *s)
{
    const int64_t V = w->cfg.vocab, D = w->cfg.dim;
    for (int64_t j = 0; j < V; j++) {
        double u1 = ((double)(tap_rand(s) >> 11) + 0.5) / 9007199254740992.0;
        double u2 = ((double)(tap_rand(s) >> 11) + 0.5) / 9007199254740992.0;
        float fac = (float)exp(SPREAD * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
        for (int64_t k = 0; k < D; k++) {
            uint16_t *e = &w->embd[j * D + k];
            uint32_t b = (uint32_t)*e << 16;
            float x;
            memcpy(&x, &b, 4);
            x *= fac;
            memcpy(&b, &x, 4);
            b += 0x7fffu + (b >> 16 & 1); /* to nearest bf16, ties to even (finite values) */
            *e = (uint16_t)(b >> 16);
        }
    }
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double m = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > m)
            m = fabs((double)a[i] - b[i]);
    return m;
}

/* llama.cpp's logits for ids through the driver; 0 or -1 with err. */
static int run_llama(const char *driver, const char *path, const int32_t *ids, float *logits,
                     int64_t vocab)
{
    char cmd[8192];
    int at = snprintf(cmd, sizeof cmd, "'%s' '%s' ", driver, path);
    for (int i = 0; i < T; i++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s%d", i ? "," : "", ids[i]);
    snprintf(cmd + at, sizeof cmd - (size_t)at, " 2>&1");
    FILE *p = popen(cmd, "r");
    if (!p)
        return snprintf(err, sizeof err, "cannot run %.400s", driver), -1;
    char line[512];
    long nv = -1;
    int64_t got = 0;
    err[0] = 0;
    while (fgets(line, sizeof line, p)) {
        if (nv < 0) {
            if (sscanf(line, "n_vocab %ld", &nv) != 1) {
                size_t l = strlen(err);
                snprintf(err + l, sizeof err - l, "%s", line);
            }
            continue;
        }
        if (got < vocab)
            logits[got] = strtof(line, NULL);
        got++;
    }
    int st = pclose(p);
    if (st != 0 || nv != vocab || got != vocab) {
        if (!err[0])
            snprintf(err, sizeof err, "status %d, n_vocab %ld, %lld logits", st, nv, (long long)got);
        return -1;
    }
    return 0;
}

static void check_arch(lk_device *ref, const bn_arch *a, const char *driver, uint64_t seed)
{
    if (!llama_knows(a->name)) {
        skip(4, "%s: llama.cpp has no such architecture (%s runs it)", a->name, a->writer);
        return;
    }
    const bn_config cfg = bn_config_tiny(2);
    const int64_t V = cfg.vocab;
    float *mine = malloc((size_t)V * 4), *theirs = malloc((size_t)V * 4), *alt = malloc((size_t)V * 4);
    int32_t ids[T];
    bn_weights w, wf;
    uint8_t *data = NULL;
    size_t size = 0;
    lkg_file *f = NULL;
    int found = 0;
    uint64_t s = seed;
    memset(&wf, 0, sizeof wf);
    for (int i = 0; i < T; i++)
        ids[i] = (int32_t)(tap_rand(&s) % (uint64_t)V);
    /* The first weights whose top tokens stand apart, run from the file. */
    for (int k = 0; k < SEEDS && !found; k++) {
        if (bn_weights_generate(&w, &cfg, seed + (uint64_t)k, err, sizeof err))
            break;
        w.arch = a->name;
        w.ffn_act = a->ffn_act;
        spread_rows(&w, &s);
        free(data);
        data = NULL;
        lkg_close(f);
        f = NULL;
        bn_weights_free(&wf);
        int good = bn_weights_to_gguf(&w, LKG_T_TQ2_0, &data, &size, err, sizeof err) == 0 &&
                   lkg_parse(data, size, &f, err, sizeof err) == 0 &&
                   bn_weights_from_gguf(&wf, f, 128, cfg.max_ctx, err, sizeof err) == 0 &&
                   run_lockstep(ref, &wf, ids, mine) == 0;
        bn_weights_free(&w);
        if (!good)
            break;
        found = separated(mine, V);
        if (found)
            diag("%s: weights from seed %llu (try %d) have their top %d logits apart", a->name,
                 (unsigned long long)(seed + (uint64_t)k), k + 1, K);
    }
    if (!ok(found, "%s: weights with well separated top tokens, run from the GGUF file%s%s", a->name,
            err[0] && !found ? ": " : "", err[0] && !found ? err : "")) {
        skip(3, "%s: no model to compare", a->name);
        goto out;
    }
    char path[] = "/tmp/lockstep-fidelity-XXXXXX";
    int fd = mkstemp(path);
    FILE *fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    int wrote = fp && fwrite(data, 1, size, fp) == size;
    if (fp)
        fclose(fp);
    int ran = wrote && run_llama(driver, path, ids, theirs, V) == 0;
    if (fd >= 0)
        remove(path);
    if (!ok(ran, "%s: llama.cpp runs the same file (%s)", a->name, ran ? "ok" : err)) {
        skip(2, "%s: no llama.cpp logits", a->name);
        goto out;
    }
    int ti[K], tl[K];
    topk(mine, V, ti);
    topk(theirs, V, tl);
    double d = max_diff(mine, theirs, V), sd = stddev(mine, V);
    /* the contrast: the other RoPE pairing, the other activation */
    unsigned rope = wf.cfg.rope_flags;
    wf.cfg.rope_flags = rope == LK_ROPE_NEOX ? LK_ROPE_INTERLEAVED : LK_ROPE_NEOX;
    double d_rope = run_lockstep(ref, &wf, ids, alt) == 0 ? max_diff(alt, theirs, V) : -1;
    wf.cfg.rope_flags = rope;
    int act = wf.ffn_act;
    wf.ffn_act = act == LK_UNARY_SILU ? LK_UNARY_RELU2 : LK_UNARY_SILU;
    double d_act = run_lockstep(ref, &wf, ids, alt) == 0 ? max_diff(alt, theirs, V) : -1;
    wf.ffn_act = act;
    char l1[96] = "", l2[96] = "";
    for (int j = 0, a1 = 0, a2 = 0; j < K; j++) {
        a1 += snprintf(l1 + a1, sizeof l1 - (size_t)a1, " %d", ti[j]);
        a2 += snprintf(l2 + a2, sizeof l2 - (size_t)a2, " %d", tl[j]);
    }
    diag("%s: top %d here%s, llama.cpp%s", a->name, K, l1, l2);
    diag("%s: max |logit difference| %.4g (logits' standard deviation %.4g, top logit %.4g); "
         "with the other RoPE pairing %.4g, with the other FFN activation %.4g",
         a->name, d, sd, (double)mine[ti[0]], d_rope, d_act);
    /* rank by rank the same token, or two whose logits here are closer
     * than twice the largest difference (a tie at this precision) */
    int same = 0, tie = 1;
    for (int j = 0; j < K; j++) {
        same += ti[j] == tl[j];
        tie &= ti[j] == tl[j] || fabs((double)mine[ti[j]] - mine[tl[j]]) <= 2 * d;
    }
    ok(tie, "%s: the top %d token ids are llama.cpp's, rank by rank (%d of %d the same id, the "
       "others ties within 2 x max |diff|)", a->name, K, same, K);
    ok(d_rope > 3 * d && d_act > 3 * d,
       "%s: llama.cpp is over 3 times closer than with the other RoPE pairing or activation "
       "(max |diff| %.3g against %.3g and %.3g)", a->name, d, d_rope, d_act);
out:
    bn_weights_free(&wf);
    lkg_close(f);
    free(data);
    free(mine), free(theirs), free(alt);
}

int main(void)
{
    char driver[4096];
    const char *peers = getenv("LOCKSTEP_PEERS_DIR"), *home = getenv("HOME");
    if (peers && *peers)
        snprintf(driver, sizeof driver, "%s/llama.cpp/bin/lockstep-llama-logits", peers);
    else
        snprintf(driver, sizeof driver, "%s/.cache/lockstep/peers/llama.cpp/bin/lockstep-llama-logits",
                 home ? home : ".");
    if (access(driver, X_OK))
        skip_all("no llama.cpp driver at %s (scripts/get-peers.sh builds it)", driver);
    uint64_t seed = tap_seed();
    lk_context *ctx;
    lk_device *ref;
    if (lk_context_create(&ctx) != LK_OK || lk_device_find(ctx, "ref", &ref) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    for (int i = 0; i < bn_arch_count(); i++)
        check_arch(ref, bn_arch_at(i), driver, seed);
    lk_context_destroy(ctx);
    return done_testing();
}
