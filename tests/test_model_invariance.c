/* The BitNet demo model's paged KV cache and ragged calls
 * (examples/bitnet/model.h): the logits of one token at position P, past
 * several attention chunks, are the same bits (memcmp) when computed
 *   (a) in a one-shot prefill of its prompt,
 *   (b) in prefills chunked at several sizes,
 *   (c) by decoding it after a prefill of the rest (one lk_bitnet_decode
 *       call for the layers, in a captured graph),
 *   (d) with its prefix taken from another sequence's shared pages (a
 *       page-aligned and an unaligned prefix, the other sequence writing
 *       on meanwhile),
 *   (e) inside a ragged call of 64 sequences of different lengths, as a
 *       decode row among prefill chunks and as a chunk itself,
 * on every CPU device (emulated ones included, at a tiny model), and the
 * same bits as the reference device's (with LOCKSTEP_TEST_QUICK set, as
 * under qemu, on the reference and the plain "cpu" device only: the other
 * variants' kernels are compared op by op in test_attention and the rest);
 * bad input (a length past the
 * context, a full page pool, a sequence twice, an id outside the
 * vocabulary) is refused with a message and changes nothing.  On a CUDA
 * device the model has BitNet-2B-4T's layer shapes (tiny ones with
 * LOCKSTEP_CUDA_TEST_SMALL set) and (a) is also compared with the CPU's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "examples/bitnet/model.h"
#include "tests/tap.h"

#define P 1100      /* the token's position: past 3 chunks of attention */
#define CTX 1216    /* the context */
#define NRAG 64     /* sequences in a ragged call */
#define PAGE 64

enum { S_ONE, S_CH37, S_CH256, S_CH513, S_DECODE, S_SHARE640, S_SHARE700, S_RAG_DEC,
       S_RAG_CHUNK, NS };
static const char *const sname[NS] = {
    "one-shot prefill", "prefill in chunks of 37", "prefill in chunks of 256",
    "prefill in chunks of 513", "decode after a prefill", "prefix of 640 from shared pages",
    "prefix of 700 from shared pages", "decode row in a ragged call of 64",
    "chunk in a ragged call of 64"};

static char err[512];
static int32_t prompt[P + 1], other[NRAG][P + 1];

/* Appends tokens ids[0 .. n) to sequence s in chunks of `chunk`, the logits
 * of the last into out. */
static int feed(bn_model *m, int64_t s, const int32_t *ids, int64_t n, int64_t chunk, float *out)
{
    int32_t next;
    for (int64_t i = 0; i < n; i += chunk) {
        bn_entry e = {s, n - i < chunk ? n - i : chunk, ids + i};
        if (bn_model_step(m, 1, &e, i + chunk >= n ? out : NULL, &next, err, sizeof err))
            return -1;
    }
    return 0;
}

/* Every scenario's logits of token P into out[NS][V]; -1 with err. */
static int scenarios(lk_device *d, const bn_weights *w, float *out, int only_one)
{
    const int64_t V = w->cfg.vocab;
    bn_model_opts o = {NRAG, 2048, PAGE, 0, BN_PREPARED | BN_GRAPH | BN_LAYERS_OP};
    bn_model *m = NULL;
    if (bn_model_create_ex(d, 0, w, &o, &m, err, sizeof err))
        return -1;
    int rc = feed(m, 0, prompt, P + 1, P + 1, out + S_ONE * V);
    const int ch[3] = {37, 256, 513};
    for (int i = 0; i < 3 && !rc && !only_one; i++)
        rc = bn_seq_truncate(m, 0, 0, err, sizeof err) ||
             feed(m, 0, prompt, P + 1, ch[i], out + (S_CH37 + i) * V);
    if (!rc && !only_one)
        rc = bn_seq_truncate(m, 0, 0, err, sizeof err) || feed(m, 0, prompt, P, P, NULL) ||
             feed(m, 0, prompt + P, 1, 1, out + S_DECODE * V);
    /* (d): sequence 1 takes sequence 0's prefix, sequence 0 goes on with
     * other tokens (into its own pages), then sequence 1 with the rest */
    const int sh[2] = {640, 700};
    for (int i = 0; i < 2 && !rc && !only_one; i++)
        rc = bn_seq_truncate(m, 0, i ? sh[0] : sh[i], err, sizeof err) ||
             (i && feed(m, 0, prompt + sh[0], sh[1] - sh[0], 64, NULL)) ||
             bn_seq_share(m, 1, 0, sh[i], err, sizeof err) ||
             feed(m, 0, other[0], 90, 90, NULL) ||
             feed(m, 1, prompt + sh[i], P + 1 - sh[i], 200, out + (S_SHARE640 + i) * V);
    /* (e): sequence 1 (its prefix in shared pages) cut back to P tokens;
     * the 63 others hold 1 .. 63 tokens; then one call with each of them
     * appending 1 .. 40 tokens and sequence 1 decoding token P (entry 17);
     * then sequence 1's last 50 tokens as a chunk among them (entry 40) */
    if (!rc && !only_one) {
        bn_entry e[NRAG];
        int32_t next[NRAG];
        int64_t sq[NRAG - 1]; /* the others: 0, 2, 3, ... */
        float *lg = malloc((size_t)(NRAG * V) * sizeof *lg);
        rc = !lg || bn_seq_truncate(m, 1, P, err, sizeof err);
        for (int i = 0; i < NRAG - 1; i++) {
            sq[i] = i ? i + 1 : 0;
            rc = rc || bn_seq_truncate(m, sq[i], 0, err, sizeof err);
            e[i] = (bn_entry){sq[i], i + 1, other[sq[i]]};
        }
        rc = rc || bn_model_step(m, NRAG - 1, e, NULL, next, err, sizeof err);
        for (int i = 0, j = 0; i < NRAG; i++)
            e[i] = i == 17 ? (bn_entry){1, 1, prompt + P}
                           : (bn_entry){sq[j], 1 + (i * 13) % 40, other[sq[j]] + 100}, j += i != 17;
        rc = rc || bn_model_step(m, NRAG, e, lg, next, err, sizeof err);
        if (!rc) {
            memcpy(out + S_RAG_DEC * V, lg + 17 * V, (size_t)V * 4);
            diag("%s: the ragged call ran its attention %s", lk_device_name(d),
                 bn_model_attention_mode(m) == 1 ? "as the paged op" : "one sequence at a time");
        }
        rc = rc || bn_seq_truncate(m, 1, P + 1 - 50, err, sizeof err);
        for (int i = 0, j = 0; i < NRAG; i++)
            e[i] = i == 40 ? (bn_entry){1, 50, prompt + P + 1 - 50}
                           : (bn_entry){sq[j], 1 + (i * 7) % 30, other[sq[j]] + 200}, j += i != 40;
        rc = rc || bn_model_step(m, NRAG, e, lg, next, err, sizeof err);
        if (!rc)
            memcpy(out + S_RAG_CHUNK * V, lg + 40 * V, (size_t)V * 4);
        free(lg);
    }
    bn_model_destroy(m);
    return rc ? -1 : 0;
}

/* Bad input on d: refused with a message, nothing changed. */
static void bad_input(lk_device *d, const bn_weights *w, const float *want)
{
    const char *dn = lk_device_name(d);
    const int64_t V = w->cfg.vocab;
    /* a pool of CTX / PAGE + 1 pages: sequence 0's context and one more */
    bn_model_opts o = {4, CTX, PAGE, CTX / PAGE + 1, BN_PREPARED};
    bn_model *m = NULL;
    float *lg = malloc((size_t)V * 4 * 2);
    int32_t next[4];
    if (!lg || bn_model_create_ex(d, 0, w, &o, &m, err, sizeof err) ||
        feed(m, 0, prompt, P, P, NULL)) {
        ok(0, "bad input on %s: setting up: %s", dn, err);
        free(lg);
        bn_model_destroy(m);
        return;
    }
    const int64_t free0 = bn_model_free_pages(m);
    bn_entry past = {0, CTX - P + 1, other[1]};
    err[0] = 0;
    int r = bn_model_step(m, 1, &past, lg, next, err, sizeof err);
    ok(r == -1 && strstr(err, "exceed the context") && bn_seq_len(m, 0) == P &&
           bn_model_free_pages(m) == free0,
       "%s: a length past the context is refused (%s), nothing changed", dn, err);
    /* sequence 1 needs 3 pages, 2 are free (one after sequence 0's 18) */
    bn_entry full[2] = {{0, 1, prompt + P}, {1, 3 * PAGE, other[1]}};
    err[0] = 0;
    r = bn_model_step(m, 2, full, lg, next, err, sizeof err);
    ok(r == -1 && strstr(err, "page pool is full") && bn_seq_len(m, 0) == P &&
           bn_seq_len(m, 1) == 0 && bn_model_free_pages(m) == free0,
       "%s: a full page pool is refused (%s), nothing changed", dn, err);
    bn_entry twice[2] = {{0, 1, prompt + P}, {0, 1, prompt + P}};
    err[0] = 0;
    r = bn_model_step(m, 2, twice, lg, next, err, sizeof err);
    ok(r == -1 && strstr(err, "twice") && bn_seq_len(m, 0) == P,
       "%s: a sequence twice in a call is refused (%s)", dn, err);
    int32_t bad = (int32_t)V;
    bn_entry badid[2] = {{1, 1, other[1]}, {0, 1, &bad}};
    err[0] = 0;
    r = bn_model_step(m, 2, badid, lg, next, err, sizeof err);
    ok(r == -1 && strstr(err, "vocabulary") && bn_seq_len(m, 0) == P && bn_seq_len(m, 1) == 0,
       "%s: an id outside the vocabulary is refused (%s), nothing changed", dn, err);
    err[0] = 0;
    r = bn_seq_share(m, 1, 0, P + 1, err, sizeof err);
    ok(r == -1 && bn_seq_len(m, 1) == 0, "%s: sharing past a sequence's length is refused (%s)",
       dn, err);
    /* after all that, the token's logits are still the one-shot's */
    bn_entry dec = {0, 1, prompt + P};
    r = bn_model_step(m, 1, &dec, lg, next, err, sizeof err);
    ok(r == 0 && !memcmp(lg, want, (size_t)V * 4),
       "%s: after the refused calls, decoding the token gives the one-shot bits", dn);
    free(lg);
    bn_model_destroy(m);
}

static int is_cuda(lk_device *d)
{
    lk_device_props p;
    return lk_device_props_get(d, &p) == LK_OK && !strcmp(p.driver, "cuda");
}

/* Every scenario on d equals its one-shot prefill; the one-shot equals
 * want (when given). */
static void check_device(lk_device *d, const bn_weights *w, const float *want, const char *wname,
                         float *out)
{
    const char *dn = lk_device_name(d);
    const int64_t V = w->cfg.vocab;
    if (scenarios(d, w, out, 0)) {
        ok(0, "%s: the scenarios run: %s", dn, err);
        return;
    }
    for (int s = 1; s < NS; s++)
        ok(!memcmp(out + s * V, out, (size_t)V * 4), "%s: token %d's logits: %s == one-shot", dn,
           P, sname[s]);
    if (want)
        ok(!memcmp(out, want, (size_t)V * 4), "%s: one-shot prefill == %s", dn, wname);
    bad_input(d, w, out);
}

int main(void)
{
    uint64_t seed = tap_seed(), s = seed;
    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("lk_context_create: %s", lk_last_error());
    bn_weights tiny, full;
    /* smaller than bn_config_tiny, so that the emulated devices stay fast:
     * 2 heads of 64 over 1 KV head (grouped), FFN 256, vocab 512 */
    bn_config ct = bn_config_tiny(1);
    ct.dim = 128, ct.n_head = 2, ct.n_kv = 1, ct.ffn = 256, ct.vocab = 512;
    ct.max_ctx = CTX;
    if (bn_weights_generate(&tiny, &ct, seed, err, sizeof err))
        bail("%s", err);
    for (int i = 0; i <= P; i++)
        prompt[i] = (int32_t)(tap_rand(&s) % (uint64_t)ct.vocab);
    for (int j = 0; j < NRAG; j++)
        for (int i = 0; i <= P; i++)
            other[j][i] = (int32_t)(tap_rand(&s) % (uint64_t)ct.vocab);
    const int64_t V = ct.vocab;
    float *ref = malloc((size_t)(NS * V) * 4), *out = malloc((size_t)(NS * V) * 4);
    if (!ref || !out)
        bail("out of memory");

    const char *q = getenv("LOCKSTEP_TEST_QUICK");
    const int quick = q && *q && strcmp(q, "0");
    lk_device *rd;
    if (lk_device_find(ctx, "ref", &rd) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    check_device(rd, &tiny, NULL, NULL, ref);
    int ncuda = 0;
    lk_device *cpu = NULL;
    for (int i = 0; i < lk_device_count(ctx); i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK ||
            d == rd || p.kind == LK_DEVICE_OTHER)
            continue;
        if (is_cuda(d)) {
            ncuda++;
            continue;
        }
        if (!strcmp(p.driver, "cpu") && !p.emulated && !cpu)
            cpu = d;
        if (quick && strcmp(lk_device_name(d), "cpu")) {
            diag("%s: left out (LOCKSTEP_TEST_QUICK)", lk_device_name(d));
            continue;
        }
        check_device(d, &tiny, ref, "the reference's", out);
    }

    /* CUDA: 2B-4T's layer shapes unless asked small, compared with the CPU */
    const char *small = getenv("LOCKSTEP_CUDA_TEST_SMALL");
    const int big = !(small && *small && strcmp(small, "0"));
    bn_config cf = big ? bn_config_2b4t(2) : ct;
    cf.max_ctx = CTX;
    if (ncuda && bn_weights_generate(&full, &cf, seed, err, sizeof err))
        bail("%s", err);
    float *fref = NULL, *fout = NULL;
    if (ncuda) {
        fref = malloc((size_t)(NS * cf.vocab) * 4);
        fout = malloc((size_t)(NS * cf.vocab) * 4);
        if (!fref || !fout)
            bail("out of memory");
        if (big)
            diag("CUDA at BitNet-2B-4T's layer shapes, 2 layers; the CPU's one-shot prefill "
                 "for comparison (%s)", cpu ? lk_device_name(cpu) : "none");
        if (!cpu || scenarios(cpu, &full, fref, 1))
            ok(0, "the CPU's one-shot prefill at CUDA's shapes: %s", cpu ? err : "no CPU device");
    }
    for (int i = 0; ncuda && i < lk_device_count(ctx); i++) {
        lk_device *d;
        if (lk_device_get(ctx, i, &d) == LK_OK && is_cuda(d))
            check_device(d, &full, fref, cpu ? lk_device_name(cpu) : "the CPU's", fout);
    }
    if (!ncuda)
        diag("no CUDA device: the GPU part does not run");
    if (ncuda)
        bn_weights_free(&full);
    free(fref), free(fout), free(ref), free(out);
    bn_weights_free(&tiny);
    lk_context_destroy(ctx);
    return done_testing();
}
