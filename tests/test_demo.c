/* The BitNet b1.58 demo model (examples/bitnet/model.h) on every device:
 * a tiny model's logits after the prefill and after each decode step are
 * the reference's bits on every device present (emulated variants and the
 * test driver included), a sequence's logits in a batch of 4 are those it
 * has alone (batch invariance), the model written to GGUF in each ternary
 * type reads back to the same weights and the same logits, and the SHA-256
 * used for the printed fingerprints passes the FIPS 180-4 examples. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "examples/bitnet/model.h"
#include "examples/bitnet/sha256.h"
#include "examples/bitnet/vocab.h"
#include "tests/tap.h"

#define T 5     /* prompt tokens */
#define STEPS 3 /* decode steps */
#define B 4

static char err[512];

/* logits[batch index][step][seq][vocab]: every step's logits of a run. */
static int run(lk_device *dev, const bn_weights *w, int64_t nb, const int32_t *prompt,
               float *out, unsigned flags)
{
    const int64_t V = w->cfg.vocab;
    bn_model *m = NULL;
    int32_t next[B];
    if (bn_model_create(dev, 0, w, B, T, flags, &m, err, sizeof err))
        return -1;
    if ((flags & BN_PREPARED) && nb == 1)
        diag("%s: %d of %lld weight tensors prepared", lk_device_name(dev), bn_model_prepared(m),
             (long long)(7 * w->cfg.n_layer + 1));
    int rc = bn_model_forward(m, nb, T, 0, prompt, out, next, err, sizeof err);
    for (int s = 1; s <= STEPS && !rc; s++)
        rc = bn_model_forward(m, nb, 1, T + s - 1, next, out + (size_t)s * nb * V, next, err,
                              sizeof err);
    if (!rc && (flags & BN_GRAPH) && bn_model_graph_mode(m) == 0)
        rc = -1, snprintf(err, sizeof err, "BN_GRAPH given but the decode steps ran eagerly");
    if (!rc && (flags & BN_GRAPH) && nb == 1)
        diag("%s: decode steps as %s graphs", lk_device_name(dev),
             bn_model_graph_mode(m) == 2 ? "native (CUDA)" : "host-recorded");
    bn_model_destroy(m);
    return rc;
}

/* run, with the logits kept on the device (bn_model_keep) and read back
 * at the end; bad slots are refused and leave the outputs alone. */
static int run_kept(lk_device *dev, const bn_weights *w, int64_t nb, const int32_t *prompt,
                    float *out, unsigned flags, int *refused)
{
    const int64_t V = w->cfg.vocab;
    bn_model *m = NULL;
    int32_t next[B];
    if (bn_model_create(dev, 0, w, B, T, flags, &m, err, sizeof err))
        return -1;
    int rc = bn_model_keep(m, STEPS + 1, err, sizeof err);
    rc = rc ? rc : bn_model_forward_kept(m, nb, T, 0, prompt, 0, next, err, sizeof err);
    for (int s = 1; s <= STEPS && !rc; s++)
        rc = bn_model_forward_kept(m, nb, 1, T + s - 1, next, s, next, err, sizeof err);
    for (int s = 0; s <= STEPS && !rc; s++)
        rc = bn_model_kept(m, s, nb, out + (size_t)s * nb * V, err, sizeof err);
    /* out of range: an error naming the slot, next and the logits untouched */
    int32_t keep_next[B];
    memcpy(keep_next, next, sizeof next);
    float sentinel = out[0];
    *refused = !rc && bn_model_forward_kept(m, nb, 1, T + STEPS, next, STEPS + 1, next, err,
                                            sizeof err) != 0 &&
               strstr(err, "slot") && !memcmp(keep_next, next, sizeof next) &&
               bn_model_kept(m, -1, nb, out, err, sizeof err) != 0 &&
               bn_model_keep(m, STEPS + 2, err, sizeof err) != 0 &&
               !memcmp(&sentinel, &out[0], 4);
    bn_model_destroy(m);
    return rc;
}

static int same_weights(const bn_weights *a, const bn_weights *b)
{
    const bn_config *c = &a->cfg;
    if (c->n_layer != b->cfg.n_layer || c->dim != b->cfg.dim || c->ffn != b->cfg.ffn ||
        c->n_head != b->cfg.n_head || c->n_kv != b->cfg.n_kv || c->vocab != b->cfg.vocab ||
        c->theta != b->cfg.theta || c->eps != b->cfg.eps)
        return 0;
    if (memcmp(a->embd, b->embd, (size_t)(c->vocab * c->dim) * 2) ||
        memcmp(a->out_norm, b->out_norm, (size_t)c->dim * 4))
        return 0;
    for (int64_t l = 0; l < c->n_layer; l++) {
        const bn_layer_w *x = &a->layers[l], *y = &b->layers[l];
        const lkg_ternary *tx[7] = {&x->wq, &x->wk, &x->wv, &x->wo, &x->wgate, &x->wup, &x->wdown};
        const lkg_ternary *ty[7] = {&y->wq, &y->wk, &y->wv, &y->wo, &y->wgate, &y->wup, &y->wdown};
        for (int i = 0; i < 7; i++) {
            if (tx[i]->rows != ty[i]->rows || tx[i]->cols != ty[i]->cols ||
                memcmp(tx[i]->codes, ty[i]->codes, (size_t)(tx[i]->rows * tx[i]->ld / 4)))
                return 0;
            for (int64_t r = 0; r < tx[i]->rows; r++)
                if (tx[i]->scale[tx[i]->nscale == 1 ? 0 : r] !=
                    ty[i]->scale[ty[i]->nscale == 1 ? 0 : r])
                    return 0;
        }
        if (memcmp(x->attn_sub_norm, y->attn_sub_norm, (size_t)c->dim * 4) ||
            memcmp(x->ffn_sub_norm, y->ffn_sub_norm, (size_t)c->ffn * 4))
            return 0;
    }
    return 1;
}

int main(void)
{
    uint64_t seed = tap_seed(), s = seed;
    char hex[65];

    /* FIPS 180-4 examples. */
    lk_sha256_hex("abc", 3, hex);
    ok(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
       "SHA-256(\"abc\")");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    lk_sha256_hex(m2, strlen(m2), hex);
    ok(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
       "SHA-256 of the 448-bit example");
    lk_sha256_hex("", 0, hex);
    ok(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
       "SHA-256 of the empty string");

    bn_weights w;
    bn_config cfg = bn_config_tiny(2);
    if (bn_weights_generate(&w, &cfg, seed, err, sizeof err))
        bail("%s", err);
    const int64_t V = cfg.vocab;
    int32_t prompt[B * T];
    for (int i = 0; i < B * T; i++)
        prompt[i] = (int32_t)(tap_rand(&s) % (uint64_t)V);

    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        bail("lk_context_create: %s", lk_last_error());
    lk_device *ref;
    if (lk_device_find(ctx, "ref", &ref) != LK_OK)
        bail("no reference device: %s", lk_last_error());
    const size_t n1 = (size_t)(STEPS + 1) * V, n4 = n1 * B;
    float *want1 = malloc(n1 * 4), *want4 = malloc(n4 * 4), *got = malloc(n4 * 4);
    if (!ok(run(ref, &w, 1, prompt, want1, 0) == 0 && run(ref, &w, B, prompt, want4, 0) == 0,
            "the reference runs the model at batch 1 and 4 (%s)", err))
        bail("cannot continue without the reference");
    /* Batch invariance on the reference: sequence 0 of the batch of 4. */
    int inv = 1;
    for (int st = 0; st <= STEPS; st++)
        inv &= !memcmp(want1 + (size_t)st * V, want4 + (size_t)st * B * V, (size_t)V * 4);
    ok(inv, "ref: sequence 0's logits at batch 4 are its logits alone, every step");
    /* And the other sequences do differ (the check above is not vacuous). */
    ok(memcmp(want4, want4 + V, (size_t)V * 4) != 0, "ref: the sequences of the batch differ");

    int nd = lk_device_count(ctx);
    for (int i = 0; i < nd; i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK ||
            d == ref)
            continue;
        static const unsigned flag_sets[5] = {0, BN_PREPARED, BN_PREPARED | BN_GRAPH,
                                              BN_PREPARED | BN_LAYERS_OP,
                                              BN_PREPARED | BN_GRAPH | BN_LAYERS_OP};
        static const char *const hows[5] = {
            "plain ops", "prepared weights", "prepared weights, decode graphs",
            "prepared weights, lk_bitnet_decode",
            "prepared weights, lk_bitnet_decode in decode graphs"};
        for (int fi = 0; fi < 5; fi++) {
            const unsigned fl = flag_sets[fi];
            const char *how = hows[fi];
            int r1 = run(d, &w, 1, prompt, got, fl);
            int same1 = r1 == 0 && !memcmp(got, want1, n1 * 4);
            if (r1 && strstr(err, "LK_ERR_UNSUPPORTED")) {
                skip(2, "%s does not implement an op of the model: %s", p.name, err);
                continue;
            }
            ok(same1, "%s, %s: batch 1, prefill and %d decode steps: the reference's bits%s%s",
               p.name, how, STEPS, r1 ? ": " : "", r1 ? err : "");
            int r4 = run(d, &w, B, prompt, got, fl);
            ok(r4 == 0 && !memcmp(got, want4, n4 * 4),
               "%s, %s: batch 4: the reference's bits (hence batch invariant)%s%s", p.name, how,
               r4 ? ": " : "", r4 ? err : "");
        }
    }
    /* Logits kept on the device (how `lockstep demo` times decode): the
     * same bits on every device, bad slots refused. */
    for (int i = 0; i < nd; i++) {
        lk_device *d;
        lk_device_props p;
        if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK)
            continue;
        int refused = 0;
        const unsigned fl = BN_PREPARED | BN_GRAPH | BN_LAYERS_OP;
        int rk = run_kept(d, &w, B, prompt, got, fl, &refused);
        if (rk && strstr(err, "LK_ERR_UNSUPPORTED")) {
            skip(1, "%s does not implement an op of the model: %s", p.name, err);
            continue;
        }
        ok(rk == 0 && refused && !memcmp(got, want4, n4 * 4),
           "%s: batch 4 with the logits kept on the device: the reference's bits, bad slots "
           "refused%s%s", p.name, rk ? ": " : "", rk ? err : "");
    }
    /* The reference with prepared weights too, and with decode graphs. */
    err[0] = '\0';
    ok(run(ref, &w, B, prompt, got, BN_PREPARED) == 0 && !memcmp(got, want4, n4 * 4),
       "ref, prepared weights: its own plain bits");
    ok(run(ref, &w, 1, prompt, got, BN_GRAPH) == 0 && !memcmp(got, want1, n1 * 4) &&
           run(ref, &w, B, prompt, got, BN_GRAPH) == 0 && !memcmp(got, want4, n4 * 4),
       "ref, decode graphs: its own eager bits at batch 1 and 4%s%s", err[0] ? ": " : "", err);
    err[0] = '\0';
    ok(run(ref, &w, B, prompt, got, BN_PREPARED | BN_LAYERS_OP | BN_GRAPH) == 0 &&
           !memcmp(got, want4, n4 * 4),
       "ref, lk_bitnet_decode in decode graphs: its own plain bits%s%s", err[0] ? ": " : "", err);

    /* GGUF: each ternary type reads back to the same weights and logits. */
    const uint32_t types[3] = {LKG_T_TQ1_0, LKG_T_TQ2_0, LKG_T_I2_S};
    for (int ti = 0; ti < 3; ti++) {
        uint8_t *data = NULL;
        size_t size = 0;
        lkg_file *f = NULL;
        bn_weights w2;
        int good = bn_weights_to_gguf(&w, types[ti], &data, &size, err, sizeof err) == 0 &&
                   lkg_parse(data, size, &f, err, sizeof err) == 0 &&
                   bn_weights_from_gguf(&w2, f, 128, cfg.max_ctx, err, sizeof err) == 0;
        if (good) {
            good = same_weights(&w, &w2);
            good = good && w2.cfg.rope_flags == cfg.rope_flags; /* bitnet-b1.58: NEOX */
            good = good && run(ref, &w2, 1, prompt, got, 0) == 0 && !memcmp(got, want1, n1 * 4);
            bn_weights_free(&w2);
        }
        ok(good, "GGUF with %s projections: same weights, same logits%s%s",
           lkg_type_name(types[ti]), good ? "" : ": ", good ? "" : err);
        lkg_close(f);
        free(data);
    }
    /* A truncated model file is an error, not a crash. */
    {
        uint8_t *data = NULL;
        size_t size = 0;
        lkg_file *f = NULL;
        bn_weights w2;
        bn_weights_to_gguf(&w, LKG_T_I2_S, &data, &size, err, sizeof err);
        ok(lkg_parse(data, size - 100, &f, err, sizeof err) != 0 && strstr(err, "outside"),
           "a truncated model file is refused (%s)", err);
        /* A file with a layer's tensor missing. */
        lkg_file *g = NULL;
        uint8_t *d3 = NULL;
        size_t s3 = 0;
        int rc = bn_weights_to_gguf(&w, LKG_T_TQ2_0, &d3, &s3, err, sizeof err);
        /* Patch block_count 2 -> 3 in place (the u32 after its key and
         * type): layer 2's tensors are then missing. */
        const char *key = "bitnet-b1.58.block_count";
        uint8_t *k = NULL;
        for (size_t i = 0; !rc && !k && i + strlen(key) < s3; i++)
            if (!memcmp(d3 + i, key, strlen(key)))
                k = d3 + i;
        if (k)
            k[strlen(key) + 4] = 3;
        ok(k && lkg_parse(d3, s3, &g, err, sizeof err) == 0 &&
               bn_weights_from_gguf(&w2, g, 128, 64, err, sizeof err) != 0 &&
               strstr(err, "blk.2.") && strstr(err, "missing"),
           "a model file without a layer's tensors is refused (%s)", err);
        lkg_close(g);
        free(d3);
        free(data);
    }

    /* Token ids back to text: byte-level BPE and SentencePiece vocabularies. */
    {
        static const char *const bpe[] = {"Hello", "\xc4\xa0world", "\xc4\x8a", "<|eot_id|>",
                                          "\xc3\x83\xc2\xa9"};
        static const char *const want[] = {"Hello", " world", "\n", "<|eot_id|>", "\xc3\xa9"};
        static const char *const spm[] = {"\xe2\x96\x81the", "<0x41>", "x"};
        static const char *const wspm[] = {" the", "A", "x"};
        for (int kind = 0; kind < 2; kind++) {
            lkg_writer *wr = lkg_writer_new(32);
            uint8_t *d = NULL;
            size_t n = 0;
            lkg_file *f = NULL;
            lkg_w_str(wr, "tokenizer.ggml.model", kind ? "llama" : "gpt2");
            lkg_w_str_array(wr, "tokenizer.ggml.tokens", kind ? spm : bpe, kind ? 3 : 5);
            lkg_writer_finish(wr, &d, &n);
            lkg_writer_free(wr);
            int good = lkg_parse(d, n, &f, err, sizeof err) == 0;
            char piece[64];
            for (int i = 0; good && i < (kind ? 3 : 5); i++) {
                good = bn_detok(f, i, piece, sizeof piece) >= 0 &&
                       !strcmp(piece, kind ? wspm[i] : want[i]);
                if (!good)
                    diag("token %d: \"%s\"", i, piece);
            }
            good = good && bn_detok(f, kind ? 3 : 5, piece, sizeof piece) == -1 &&
                   bn_detok(f, -1, piece, sizeof piece) == -1;
            ok(good, "%s vocabulary: ids back to text, out-of-range ids refused",
               kind ? "SentencePiece" : "byte-level BPE");
            lkg_close(f);
            free(d);
        }
    }

    free(want1);
    free(want4);
    free(got);
    bn_weights_free(&w);
    lk_context_destroy(ctx);
    return done_testing();
}
