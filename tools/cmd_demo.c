/* Lockstep command: `lockstep demo`, a BitNet b1.58 model run on every
 * device, with the SHA-256 of every step's logits per device: the same
 * bits everywhere, or the command fails (examples/bitnet/model.h). */
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
#include "examples/bitnet/tokenizer.h"
#include "examples/bitnet/vocab.h"
#include "tools/cmd.h"

#define DEMO_MAX_DEV 32
#define DEMO_MAX_BATCH 4
#define DEMO_MAX_BATCHES 4
#define DEMO_MAX_STEPS 256
#define DEMO_MAX_CTX 32768 /* the built-in model's context */
#define DEMO_MAX_RAGGED 64

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: lockstep demo [options]\n\n"
            "Runs a BitNet b1.58 decoder (RMSNorm with subln, ternary projections with\n"
            "int8 per-token activations, RoPE, GQA attention with a KV cache, ReLU^2 FFN,\n"
            "bf16 tied LM head, greedy argmax) on every device, prints prefill and decode\n"
            "tokens/s and the SHA-256 of each step's logits per device, and fails unless\n"
            "every device gives the same bits, and a sequence's logits in a batch of 4\n"
            "are those it has alone.  Without --model: BitNet-2B-4T's layer shapes with\n"
            "fewer layers and weights from a fixed seed (no download).  The rates time\n"
            "each call until its next tokens are on the host; the logits stay on the\n"
            "device meanwhile and are read back and hashed after the timing.\n\n"
            "  --layers N        layers of the built-in model (default 2; 2B-4T has 30)\n"
            "  --tiny            a tiny built-in model (dim 256, for tests)\n"
            "  --seed N          seed of the built-in weights (default 1)\n"
            "  --model FILE      a BitNet b1.58 GGUF file instead (TQ1_0, TQ2_0, I2_S,\n"
            "                    or F16/F32 ternary projections)\n"
            "  --i2s-block N     I2_S block size of the file: 128 (x86, default) or 64 (ARM)\n"
            "  --tokens A,B,...  the prompt's token ids (default: a fixed sequence)\n"
            "  --prompt TEXT     the prompt as text, encoded with the --model file's\n"
            "                    byte-level BPE tokenizer (tokenizer.ggml.*; BOS first\n"
            "                    when the file asks for it); not with --tokens\n"
            "  --prompt-len N    length of the default prompt (default 8, up to 32768)\n"
            "  --ctx N           positions of each sequence's KV cache (default: the prompt\n"
            "                    and the steps; up to 32768 built in, the file's\n"
            "                    context_length with --model); refused when the cache\n"
            "                    does not fit the device\n"
            "  --chunk N         prefill in chunks of N tokens (the same bits as one call)\n"
            "  --ragged N|LIST   then decode a ragged batch: N sequences (up to 64) whose\n"
            "                    prompts run from the prompt's length down to a quarter\n"
            "                    of it, or one sequence per length of LIST (a,b,...);\n"
            "                    sequence 0 of length --prompt-len must keep its logits\n"
            "  --shared-prefix N then run the largest batch again with its sequences\n"
            "                    sharing the prompt's first N tokens through shared KV\n"
            "                    pages; sequence 0 must keep its logits\n"
            "  --steps N         decode steps (default 4)\n"
            "  --batch LIST      batch sizes to run, up to 4 (default 1,4)\n"
            "  --device NAME     run on NAME (repeatable; default: every device that is\n"
            "                    not emulated)\n"
            "  --all             every device, emulated ones (SIMDe, slow) included\n"
            "  --threads N       CPU threads per device (default: the device's)\n"
            "  --rope MODE       neox or interleaved (default: neox built in; for GGUF\n"
            "                    files, the file's architecture's, docs/demo.md)\n"
            "  --write-gguf FILE write the model to FILE (with --gguf-type tq1_0, tq2_0 or\n"
            "                    i2_s, default i2_s) and exit\n"
            "  --no-prepare      run the plain ops on the weights as stored, not prepared\n"
            "                    weights (the same bits either way)\n"
            "  --layers-op       run a decode step's layers as one lk_bitnet_decode call\n"
            "                    (one kernel on sm_90 GPUs, today slower than the ops in a\n"
            "                    graph: docs/performance.md; the same bits either way)\n"
            "  --no-graph        run the decode steps op by op, not as captured graphs\n"
            "                    (CUDA graphs on GPUs, replayed records elsewhere; the\n"
            "                    same bits either way)\n"
            "  --full            print every step's full hash for every device\n"
            "  --tp N, --pp N    the model split across N ranks under mpirun (tensor or\n"
            "                    pipeline parallel): `lockstep demo --tp 2 --help`\n");
}

typedef struct dev_result {
    char name[64];
    int ran;
    double prefill_tps[DEMO_MAX_BATCHES], decode_tps[DEMO_MAX_BATCHES];
    /* hash[batch][step][seq] */
    char (*hash)[DEMO_MAX_STEPS + 1][DEMO_MAX_BATCH][65];
    int32_t tokens[DEMO_MAX_BATCHES][DEMO_MAX_BATCH][DEMO_MAX_STEPS + 1];
    char digest[65];
    int graph_mode; /* bn_model_graph_mode */
    double bw;      /* device copy bandwidth, bytes/s (0: not measured) */
    /* --ragged and --shared-prefix: prefill and decode times, digest of
     * every step and sequence, sequence 0 the same as alone */
    double set_pre[2], set_dec[2];
    char set_digest[2][65];
    int set_inv[2], set_att[2];
    int chunk_inv;
} dev_result;

/* Sequence b's token t of the demo prompts: sequence 0 is the given or
 * default prompt, the others variations of it. */
static int32_t prompt_tok(const long *toks, int ntok, int64_t V, int64_t b, int64_t t)
{
    int64_t base = ntok ? toks[t] : 1 + 31 * t;
    return (int32_t)((base + 7919 * b) % V);
}

/* A device's copy bandwidth in bytes/s (read and write counted), from
 * device-to-device copies of a large buffer; 0 when it cannot be measured. */
static double copy_bandwidth(lk_device *d, int host)
{
    const size_t bytes = host ? (size_t)64 << 20 : (size_t)1 << 30;
    lk_queue *q = NULL;
    void *a = NULL, *b = NULL;
    double bw = 0;
    if (lk_queue_create(d, NULL, &q) != LK_OK)
        return 0;
    if (lk_malloc(d, bytes, &a) == LK_OK && lk_malloc(d, bytes, &b) == LK_OK &&
        lk_memcpy(q, b, a, bytes, LK_COPY_DEVICE_TO_DEVICE) == LK_OK &&
        lk_memcpy(q, a, b, bytes, LK_COPY_DEVICE_TO_DEVICE) == LK_OK && lk_queue_sync(q) == LK_OK) {
        /* both buffers touched once first: page faults are not bandwidth */
        double t0 = lk_tool_now();
        int ok = 1;
        for (int i = 0; i < 4 && ok; i++)
            ok = lk_memcpy(q, i % 2 ? a : b, i % 2 ? b : a, bytes, LK_COPY_DEVICE_TO_DEVICE) == LK_OK;
        if (ok && lk_queue_sync(q) == LK_OK)
            bw = 2.0 * 4 * (double)bytes / (lk_tool_now() - t0);
    }
    lk_free(d, a);
    lk_free(d, b);
    lk_queue_destroy(q);
    return bw;
}

/* --ragged and --shared-prefix: sequences 0 .. n-1 of lengths len[] (token
 * t of sequence s: prompt_tok), sharing the first `share` positions of
 * sequence 0 (0: none), prefilled in ragged calls of up to `rows` tokens,
 * each sequence's pieces at most `chunk`; then `steps` decode steps of all
 * n in one call each, timed, the logits kept on the device.  The digest
 * hashes every step's logits of every sequence; inv: sequence 0's hashes
 * are main0's (its prompt is the main prompt), when check0. */
static int64_t ragsum(const int64_t *len, int64_t n)
{
    int64_t s = 0;
    for (int64_t i = 0; i < n; i++)
        s += len[i];
    return s;
}

typedef struct set_ctx {
    const long *toks;
    int ntok, keep;
    int64_t V, rows, chunk;
    long steps;
    float *logits; /* max_seqs x V */
} set_ctx;

static int run_set(bn_model *m, const set_ctx *sc, int64_t n, const int64_t *len, int64_t share,
                   char (*main0)[DEMO_MAX_BATCH][65], int check0, double *tpre, double *tdec,
                   char *digest, int *inv, char *err, size_t errlen)
{
    const int64_t V = sc->V;
    int64_t maxlen = 0;
    for (int64_t s = 0; s < n; s++)
        maxlen = len[s] > maxlen ? len[s] : maxlen;
    int32_t *ids = malloc((size_t)(n * maxlen) * sizeof *ids), cur[DEMO_MAX_RAGGED];
    int64_t done[DEMO_MAX_RAGGED];
    char(*h)[65] = calloc((size_t)((sc->steps + 1) * n), sizeof *h);
    bn_entry e[DEMO_MAX_RAGGED];
    int rc = !ids || !h ? snprintf(err, errlen, "out of memory"), -1 : 0;
    for (int64_t s = 0; s < n && !rc; s++) {
        for (int64_t t = 0; t < len[s]; t++)
            ids[s * maxlen + t] = prompt_tok(sc->toks, sc->ntok, V, t < share ? 0 : s, t);
        rc = bn_seq_truncate(m, s, 0, err, errlen);
        done[s] = 0;
    }
    double t0 = lk_tool_now();
    /* the shared prefix: sequence 0's first `share` tokens, then shared */
    while (!rc && done[0] < share) {
        int64_t k = share - done[0];
        k = k < sc->chunk ? k : sc->chunk;
        k = k < sc->rows ? k : sc->rows;
        e[0] = (bn_entry){0, k, ids + done[0]};
        rc = bn_model_step(m, 1, e, NULL, cur, err, errlen);
        done[0] += k;
    }
    for (int64_t s = 1; s < n && share && !rc; s++)
        if (!(rc = bn_seq_share(m, s, 0, share, err, errlen)))
            done[s] = share;
    for (;;) {
        int64_t E = 0, r = 0;
        for (int64_t s = 0; s < n && !rc && r < sc->rows; s++) {
            int64_t k = len[s] - done[s];
            k = k < sc->chunk ? k : sc->chunk;
            k = k < sc->rows - r ? k : sc->rows - r;
            if (k > 0)
                e[E++] = (bn_entry){s, k, ids + s * maxlen + done[s]}, r += k;
        }
        if (!E || rc)
            break;
        int32_t next[DEMO_MAX_RAGGED];
        rc = bn_model_step(m, E, e, sc->logits, next, err, errlen);
        for (int64_t i = 0; i < E && !rc; i++) {
            const int64_t s = e[i].seq;
            done[s] += e[i].n;
            if (done[s] == len[s]) {
                lk_sha256_hex(sc->logits + i * V, (size_t)V * 4, h[s]);
                cur[s] = next[i];
            }
        }
    }
    *tpre = lk_tool_now() - t0;
    *tdec = 0;
    for (long st = 1; st <= sc->steps && !rc; st++) {
        for (int64_t s = 0; s < n; s++)
            e[s] = (bn_entry){s, 1, &cur[s]};
        int32_t next[DEMO_MAX_RAGGED];
        t0 = lk_tool_now();
        rc = sc->keep ? bn_model_step_kept(m, n, e, st, next, err, errlen)
                      : bn_model_step(m, n, e, sc->logits, next, err, errlen);
        *tdec += lk_tool_now() - t0;
        for (int64_t s = 0; s < n && !rc; s++) {
            if (!sc->keep)
                lk_sha256_hex(sc->logits + s * V, (size_t)V * 4, h[st * n + s]);
            cur[s] = next[s];
        }
    }
    for (long st = 1; st <= sc->steps && sc->keep && !rc; st++) {
        rc = bn_model_kept(m, st, n, sc->logits, err, errlen);
        for (int64_t s = 0; s < n && !rc; s++)
            lk_sha256_hex(sc->logits + s * V, (size_t)V * 4, h[st * n + s]);
    }
    if (!rc) {
        lk_sha256 sh;
        uint8_t d[32];
        lk_sha256_init(&sh);
        *inv = 1;
        for (long st = 0; st <= sc->steps; st++) {
            for (int64_t s = 0; s < n; s++)
                lk_sha256_update(&sh, h[st * n + s], 64);
            if (check0 && strcmp(h[st * n], main0[st][0]))
                *inv = 0;
        }
        lk_sha256_final(&sh, d);
        lk_sha256_tohex(d, digest);
    }
    free(ids);
    free(h);
    return rc;
}

int lk_cmd_demo(int argc, char **argv)
{
    long layers = 2, seed = 1, plen = 8, steps = 4, threads = 0, i2s_block = 128;
    long ctx_opt = 0, chunk = 0, shared = 0, ragged[DEMO_MAX_RAGGED];
    int nragged = 0;
    long batches[DEMO_MAX_BATCHES] = {1, 4}, toks[4096];
    int nbatch = 2, ntok = 0, tiny = 0, all = 0, full = 0, ndevname = 0, prep = 1, graph = 1;
    int layers_op = 0;
    const char *model = NULL, *write_gguf = NULL, *rope = NULL, *devnames[DEMO_MAX_DEV];
    const char *prompt_text = NULL;
    uint32_t gtype = LKG_T_I2_S;
    char err[512];

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--tp") || !strcmp(argv[i], "--pp"))
            return lk_cmd_demo_sharded(argc, argv);
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
        } else if (!strcmp(a, "--layers")) {
            NUM(layers, 1, 1000);
        } else if (!strcmp(a, "--seed")) {
            NUM(seed, 0, 0x7fffffffL);
        } else if (!strcmp(a, "--prompt-len")) {
            NUM(plen, 1, DEMO_MAX_CTX);
        } else if (!strcmp(a, "--ctx")) {
            NUM(ctx_opt, 1, 1L << 24);
        } else if (!strcmp(a, "--chunk")) {
            NUM(chunk, 1, DEMO_MAX_CTX);
        } else if (!strcmp(a, "--shared-prefix")) {
            NUM(shared, 1, DEMO_MAX_CTX);
        } else if (!strcmp(a, "--ragged") && v &&
                   (nragged = lk_tool_parse_list(v, ragged, DEMO_MAX_RAGGED, 1, DEMO_MAX_CTX)) > 0) {
            i++;
            if (nragged == 1) { /* N sequences: lengths filled in below */
                if (ragged[0] > DEMO_MAX_RAGGED) {
                    fprintf(stderr, "lockstep demo: --ragged N takes up to %d sequences\n",
                            DEMO_MAX_RAGGED);
                    return 2;
                }
                nragged = -(int)ragged[0];
            }
        } else if (!strcmp(a, "--steps")) {
            NUM(steps, 0, DEMO_MAX_STEPS);
        } else if (!strcmp(a, "--threads")) {
            NUM(threads, 0, 4096);
        } else if (!strcmp(a, "--i2s-block")) {
            NUM(i2s_block, 64, 128);
        } else if (!strcmp(a, "--tiny")) {
            tiny = 1;
        } else if (!strcmp(a, "--all")) {
            all = 1;
        } else if (!strcmp(a, "--full")) {
            full = 1;
        } else if (!strcmp(a, "--no-prepare")) {
            prep = 0;
        } else if (!strcmp(a, "--no-graph")) {
            graph = 0;
        } else if (!strcmp(a, "--layers-op")) {
            layers_op = 1;
        } else if (!strcmp(a, "--model") && v) {
            model = argv[++i];
        } else if (!strcmp(a, "--prompt") && v) {
            prompt_text = argv[++i];
        } else if (!strcmp(a, "--write-gguf") && v) {
            write_gguf = argv[++i];
        } else if (!strcmp(a, "--gguf-type") && v) {
            i++;
            gtype = !strcmp(v, "tq1_0") ? LKG_T_TQ1_0 : !strcmp(v, "tq2_0") ? LKG_T_TQ2_0
                    : !strcmp(v, "i2_s") ? LKG_T_I2_S : 0;
            if (!gtype) {
                fprintf(stderr, "lockstep demo: --gguf-type is tq1_0, tq2_0 or i2_s\n");
                return 2;
            }
        } else if (!strcmp(a, "--rope") && v && (!strcmp(v, "neox") || !strcmp(v, "interleaved"))) {
            rope = argv[++i];
        } else if (!strcmp(a, "--device") && v && ndevname < DEMO_MAX_DEV) {
            devnames[ndevname++] = argv[++i];
        } else if (!strcmp(a, "--tokens") && v &&
                   (ntok = lk_tool_parse_list(v, toks, 4096, 0, 0x7fffffffL)) > 0) {
            i++;
        } else if (!strcmp(a, "--batch") && v &&
                   (nbatch = lk_tool_parse_list(v, batches, DEMO_MAX_BATCHES, 1, DEMO_MAX_BATCH)) > 0) {
            i++;
        } else {
            fprintf(stderr, "lockstep demo: unknown or incomplete option \"%s\"\n\n", a);
            usage(stderr);
            return 2;
        }
#undef NUM
    }
    if (prompt_text && ntok) {
        fprintf(stderr, "lockstep demo: --prompt and --tokens exclude each other\n");
        return 2;
    }
    if (prompt_text && !model) {
        fprintf(stderr, "lockstep demo: --prompt needs --model FILE.gguf (the built-in model "
                        "has no vocabulary; give --tokens instead)\n");
        return 2;
    }
    if (i2s_block != 64 && i2s_block != 128) {
        fprintf(stderr, "lockstep demo: --i2s-block is 64 or 128\n");
        return 2;
    }

    /* The weights. */
    bn_weights w;
    char what[256];
    lkg_file *vocab = NULL; /* the model file, kept while it has a vocabulary */
    if (model) {
        lkg_file *f = NULL;
        if (lkg_open(model, &f, err, sizeof err) ||
            bn_weights_from_gguf(&w, f, (int)i2s_block, 0, err, sizeof err)) {
            fprintf(stderr, "lockstep demo: %s\n", err);
            lkg_close(f);
            return 1;
        }
        if (prompt_text) {
            /* The text to ids, with the file's own tokenizer. */
            bn_tokenizer *tk = NULL;
            int32_t *ids = NULL;
            int64_t nids = 0;
            if (bn_tok_load(f, &tk, err, sizeof err) ||
                bn_tok_encode(tk, prompt_text, strlen(prompt_text), -1, &ids, &nids, err,
                              sizeof err)) {
                fprintf(stderr, "lockstep demo: --prompt: %s\n", err);
                bn_tok_free(tk);
                bn_weights_free(&w);
                lkg_close(f);
                return 2; /* a usage error: --tokens still runs the file */
            }
            bn_tok_free(tk);
            if (nids < 1 || nids > 4096) {
                fprintf(stderr, "lockstep demo: --prompt gives %lld tokens (1 to 4096 can run)\n",
                        (long long)nids);
                free(ids);
                bn_weights_free(&w);
                lkg_close(f);
                return 2;
            }
            printf("prompt: %lld tokens:", (long long)nids);
            for (int64_t t = 0; t < nids; t++) {
                toks[t] = ids[t];
                printf(" %d", ids[t]);
            }
            printf("\n");
            ntok = (int)nids;
            free(ids);
        }
        if (lkg_find_kv(f, "tokenizer.ggml.tokens"))
            vocab = f;
        else
            lkg_close(f);
        snprintf(what, sizeof what, "%s", model);
    } else {
        bn_config cfg = tiny ? bn_config_tiny(layers) : bn_config_2b4t(layers);
        if (bn_weights_generate(&w, &cfg, (uint64_t)seed, err, sizeof err)) {
            fprintf(stderr, "lockstep demo: %s\n", err);
            return 1;
        }
        snprintf(what, sizeof what, "built-in %s model, weights from seed %ld",
                 tiny ? "tiny" : "BitNet-2B-4T-shaped", seed);
    }
    if (rope)
        w.cfg.rope_flags = !strcmp(rope, "neox") ? LK_ROPE_NEOX : LK_ROPE_INTERLEAVED;
    const bn_config *c = &w.cfg;
    if (write_gguf) {
        uint8_t *data = NULL;
        size_t size = 0;
        FILE *fp = NULL;
        int bad = bn_weights_to_gguf(&w, gtype, &data, &size, err, sizeof err) ||
                  !(fp = fopen(write_gguf, "wb")) || fwrite(data, 1, size, fp) != size;
        if (fp && fclose(fp))
            bad = 1;
        free(data);
        bn_weights_free(&w);
        if (bad) {
            fprintf(stderr, "lockstep demo: writing %s: %s\n", write_gguf,
                    err[0] ? err : "I/O error");
            return 1;
        }
        printf("lockstep demo: wrote %s (%zu bytes, %s projections)\n", write_gguf, size,
               lkg_type_name(gtype));
        return 0;
    }

    /* The prompts: sequence 0 is the given or default prompt, the others
     * are variations of it, so the batch mixes different sequences. */
    int64_t T = ntok ? ntok : plen, maxb = 1, nrag = nragged < 0 ? -nragged : nragged;
    for (int i = 0; i < nbatch; i++)
        maxb = batches[i] > maxb ? batches[i] : maxb;
    int64_t raglen[DEMO_MAX_RAGGED], need = T + steps;
    for (int64_t i = 0; i < nrag; i++) {
        /* N: from T down to a quarter of it, sequence 0 the main prompt */
        raglen[i] = nragged < 0 ? T - i * (T - (T + 3) / 4) / (nrag > 1 ? nrag - 1 : 1) : ragged[i];
        raglen[i] = raglen[i] < 1 ? 1 : raglen[i];
        need = raglen[i] + steps > need ? raglen[i] + steps : need;
    }
    const int64_t limit = model ? c->max_ctx : DEMO_MAX_CTX;
    if (ctx_opt && ctx_opt > limit) {
        fprintf(stderr, "lockstep demo: --ctx %ld exceeds the model's context (%lld%s)\n", ctx_opt,
                (long long)limit, model ? ", the file's context_length" : "");
        bn_weights_free(&w);
        return 2;
    }
    if (need > (ctx_opt ? ctx_opt : limit)) {
        fprintf(stderr, "lockstep demo: %lld prompt tokens + %ld steps exceed the context (%lld)\n",
                (long long)(need - steps), steps, (long long)(ctx_opt ? ctx_opt : limit));
        bn_weights_free(&w);
        return 2;
    }
    if (shared && shared >= T) {
        fprintf(stderr, "lockstep demo: --shared-prefix %ld needs a longer prompt (%lld tokens)\n",
                shared, (long long)T);
        bn_weights_free(&w);
        return 2;
    }
    /* The caches hold --ctx positions, or only this run. */
    w.cfg.max_ctx = ctx_opt ? ctx_opt : need;
    const int64_t ptok = chunk && chunk < T ? chunk : T; /* prefill tokens per call */
    const int64_t maxs = nrag > maxb ? nrag : maxb;
    int32_t *prompt = malloc((size_t)(maxb * T) * sizeof *prompt);
    int32_t *chunk_ids = malloc((size_t)(maxb * ptok) * sizeof *chunk_ids);
    float *logits = malloc((size_t)(maxs * c->vocab) * sizeof *logits);
    if (!prompt || !chunk_ids || !logits) {
        fprintf(stderr, "lockstep demo: out of memory\n");
        return 1;
    }
    for (int64_t b = 0; b < maxb; b++)
        for (int64_t t = 0; t < T; t++) {
            if (ntok && toks[t] >= c->vocab) {
                fprintf(stderr, "lockstep demo: token %ld is outside the vocabulary (%lld)\n",
                        toks[t], (long long)c->vocab);
                return 2;
            }
            prompt[b * T + t] = prompt_tok(toks, ntok, c->vocab, b, t);
        }

    /* The devices. */
    lk_context *ctx = NULL;
    if (lk_context_create(&ctx) != LK_OK) {
        fprintf(stderr, "lockstep demo: %s\n", lk_last_error());
        return 1;
    }
    lk_device *devs[DEMO_MAX_DEV];
    int ndev = 0;
    if (ndevname) {
        for (int i = 0; i < ndevname; i++)
            if (lk_device_find(ctx, devnames[i], &devs[ndev]) == LK_OK)
                ndev++;
            else {
                fprintf(stderr, "lockstep demo: %s\n", lk_last_error());
                lk_context_destroy(ctx);
                return 2;
            }
    } else {
        int n = lk_device_count(ctx), named_cpu = 0;
        for (int i = 0; i < n; i++) {
            lk_device *d;
            if (lk_device_get(ctx, i, &d) == LK_OK && !strncmp(lk_device_name(d), "cpu:", 4))
                named_cpu = 1;
        }
        for (int i = 0; i < n && ndev < DEMO_MAX_DEV; i++) {
            lk_device *d;
            lk_device_props p;
            if (lk_device_get(ctx, i, &d) != LK_OK || lk_device_props_get(d, &p) != LK_OK)
                continue;
            /* "cpu" is one of the cpu:<isa> devices under another name;
             * test-only devices are not part of the product. */
            if ((named_cpu && !strcmp(p.name, "cpu")) || p.kind == LK_DEVICE_OTHER ||
                (p.emulated && !all))
                continue;
            devs[ndev++] = d;
        }
    }

    printf("lockstep demo: BitNet b1.58, %s\n"
           "  %lld layers, hidden %lld, %lld heads / %lld KV heads of %lld, FFN %lld, vocab %lld, "
           "theta %g, %s RoPE, %s FFN\n"
           "  prompt of %lld tokens, %ld decode steps, context %lld, batch sizes",
           what, (long long)c->n_layer, (long long)c->dim, (long long)c->n_head,
           (long long)c->n_kv, (long long)c->head_dim, (long long)c->ffn, (long long)c->vocab,
           (double)c->theta, c->rope_flags == LK_ROPE_NEOX ? "neox" : "interleaved",
           w.ffn_act == LK_UNARY_SILU ? "silu-gated" : "relu^2-gated", (long long)T, steps,
           (long long)c->max_ctx);
    for (int i = 0; i < nbatch; i++)
        printf("%s%ld", i ? ", " : " ", batches[i]);
    printf("; %d devices\n", ndev);
    if (chunk)
        printf("  prefill in chunks of %lld tokens\n", (long long)ptok);
    if (nrag) {
        printf("  then a ragged decode batch of %lld sequences, prompts of", (long long)nrag);
        for (int64_t i = 0; i < nrag; i++)
            printf(i < 6 || i == nrag - 1 ? " %lld" : i == 6 ? " ..." : "", (long long)raglen[i]);
        printf(" tokens\n");
    }
    if (shared)
        printf("  then batch %lld with a %ld-token prefix in shared KV pages\n", (long long)maxb,
               shared);
    printf("\n");

    dev_result *res = calloc((size_t)ndev, sizeof *res);
    int failed = 0;
    printf("%-24s", "device");
    for (int i = 0; i < nbatch; i++)
        printf("  prefill b%ld   decode b%ld ", batches[i], batches[i]);
    printf(" (tokens/s)\n");
    for (int di = 0; di < ndev; di++) {
        dev_result *r = &res[di];
        snprintf(r->name, sizeof r->name, "%s", lk_device_name(devs[di]));
        r->hash = calloc((size_t)nbatch, sizeof *r->hash);
        bn_model *m = NULL;
        printf("%-24s", r->name);
        fflush(stdout);
        unsigned mflags = (prep ? BN_PREPARED : 0) | (graph ? BN_GRAPH : 0) |
                          (layers_op ? BN_LAYERS_OP : 0);
        bn_model_opts mo = {maxs, maxb * ptok > 1024 ? maxb * ptok : 1024, 0, 0, mflags};
        if (!r->hash || bn_model_create_ex(devs[di], (int)threads, &w, &mo, &m, err, sizeof err)) {
            printf("  cannot run: %s\n", r->hash ? err : "out of memory");
            failed = 1;
            continue;
        }
        /* One untimed token first: lazy initialisation (GPU modules, thread
         * pools, page faults) is not what the rates should measure.  The
         * timed prefill rewrites the cache row it leaves. */
        int32_t warm[DEMO_MAX_BATCH];
        int bad = bn_model_forward(m, 1, 1, 0, prompt, NULL, warm, err, sizeof err);
        /* The timed calls read back only the next tokens, as generating
         * does; each step's logits stay on the device (a copy there) and
         * are read and hashed after the timing.  Where the device has no
         * room for them, each call copies its logits out (slower). */
        const int keep = !bad && bn_model_keep(m, steps + 1, err, sizeof err) == 0;
        if (!bad && !keep)
            fprintf(stderr, "lockstep demo: %s: the logits are read back inside the timing (%s)\n",
                    r->name, err);
        for (int bi = 0; bi < nbatch && !bad; bi++) {
            int64_t B = batches[bi];
            int32_t next[DEMO_MAX_BATCH];
            double t0 = lk_tool_now();
            for (int64_t p0 = 0; p0 < T && !bad; p0 += ptok) {
                /* the prompt, or its next chunk, of every sequence */
                const int64_t n = T - p0 < ptok ? T - p0 : ptok;
                for (int64_t b = 0; b < B; b++)
                    memcpy(chunk_ids + b * n, prompt + b * T + p0, (size_t)n * sizeof *chunk_ids);
                bad = keep ? bn_model_forward_kept(m, B, n, p0, chunk_ids, 0, next, err, sizeof err)
                           : bn_model_forward(m, B, n, p0, chunk_ids, logits, next, err, sizeof err);
            }
            double t1 = lk_tool_now();
            r->prefill_tps[bi] = (double)(B * T) / (t1 - t0);
            double tdec = 0;
            for (long s = 0; !bad; s++) {
                for (int64_t b = 0; b < B; b++) {
                    if (!keep)
                        lk_sha256_hex(logits + b * c->vocab, (size_t)c->vocab * sizeof(float),
                                      r->hash[bi][s][b]);
                    r->tokens[bi][b][s] = next[b];
                }
                if (s == steps)
                    break;
                int32_t ids[DEMO_MAX_BATCH];
                memcpy(ids, next, sizeof ids);
                t0 = lk_tool_now();
                bad = keep ? bn_model_forward_kept(m, B, 1, T + s, ids, s + 1, next, err,
                                                   sizeof err)
                           : bn_model_forward(m, B, 1, T + s, ids, logits, next, err, sizeof err);
                tdec += lk_tool_now() - t0;
            }
            for (long s = 0; keep && !bad && s <= steps; s++) {
                bad = bn_model_kept(m, s, B, logits, err, sizeof err);
                for (int64_t b = 0; b < B && !bad; b++)
                    lk_sha256_hex(logits + b * c->vocab, (size_t)c->vocab * sizeof(float),
                                  r->hash[bi][s][b]);
            }
            r->decode_tps[bi] = steps && tdec > 0 ? (double)(B * steps) / tdec : 0;
            if (steps)
                r->graph_mode = bn_model_graph_mode(m);
            if (!bad)
                printf("  %10.2f  %10.2f  ", r->prefill_tps[bi], r->decode_tps[bi]);
            fflush(stdout);
        }
        /* --ragged and --shared-prefix on the same model and caches */
        set_ctx sc = {toks, ntok, keep, c->vocab, mo.max_rows, chunk ? chunk : T, steps, logits};
        if (!bad && nrag) {
            r->set_att[0] = -1;
            bad = run_set(m, &sc, nrag, raglen, 0, r->hash[0], raglen[0] == T, &r->set_pre[0],
                          &r->set_dec[0], r->set_digest[0], &r->set_inv[0], err, sizeof err);
            r->set_att[0] = bn_model_attention_mode(m);
        }
        if (!bad && shared) {
            int64_t sl[DEMO_MAX_BATCH];
            for (int64_t b = 0; b < maxb; b++)
                sl[b] = T;
            bad = run_set(m, &sc, maxb, sl, shared, r->hash[0], 1, &r->set_pre[1], &r->set_dec[1],
                          r->set_digest[1], &r->set_inv[1], err, sizeof err);
            r->set_att[1] = bn_model_attention_mode(m);
        }
        bn_model_destroy(m);
        lk_device_props pp;
        if (!bad && steps && lk_device_props_get(devs[di], &pp) == LK_OK)
            r->bw = copy_bandwidth(devs[di], pp.host_memory);
        if (bad) {
            printf("  failed: %s\n", err);
            failed = 1;
            continue;
        }
        r->ran = 1;
        lk_sha256 s;
        uint8_t d[32];
        lk_sha256_init(&s);
        for (int bi = 0; bi < nbatch; bi++)
            for (long st = 0; st <= steps; st++)
                for (int64_t b = 0; b < batches[bi]; b++)
                    lk_sha256_update(&s, r->hash[bi][st][b], 64);
        lk_sha256_final(&s, d);
        lk_sha256_tohex(d, r->digest);
        printf("\n");
    }

    /* A decode step of one sequence reads every weight once: the ternary
     * projections at 2 bits and the bf16 head.  Bytes per step times steps
     * per second is the rate the weights stream at, the figure to set
     * beside the machine's read bandwidth (the decode rate's floor). */
    {
        const double qd = (double)(c->n_head * c->head_dim), kvd = (double)(c->n_kv * c->head_dim);
        const double d = (double)c->dim, f = (double)c->ffn;
        const double tern = (double)c->n_layer * (qd * d + 2 * kvd * d + d * qd + 3 * f * d) / 4;
        const double head = (double)c->vocab * d * 2;
        printf("\nweights read per decode step: %.1f MB (ternary projections %.1f MB at 2 bits, "
               "bf16 head %.1f MB)\n", (tern + head) / 1e6, tern / 1e6, head / 1e6);
        for (int di = 0; di < ndev; di++)
            if (res[di].ran && batches[0] == 1 && res[di].decode_tps[0] > 0)
                printf("  %-24s decode b1 streams them at %.1f GB/s\n", res[di].name,
                       (tern + head) * res[di].decode_tps[0] / 1e9);
        /* The KV cache a decode token reads: every layer's keys and values
         * (f32) of its context.  The floor is the rate at which the
         * device's copy bandwidth streams the weights and that. */
        const double kv_mid = (double)bn_kv_bytes_read(c, T + steps / 2);
        printf("KV cache read per decode step of one sequence at context %lld: %.1f MB; "
               "cache of each sequence %.1f MB\n", (long long)(T + steps / 2), kv_mid / 1e6,
               (double)bn_kv_bytes_read(c, c->max_ctx) / 1e6);
        for (int di = 0; di < ndev; di++)
            if (res[di].ran && res[di].bw > 0 && batches[0] == 1 && res[di].decode_tps[0] > 0)
                printf("  %-24s decode b1 %.1f tokens/s; floor at its copy bandwidth (%.0f GB/s): "
                       "%.1f tokens/s (%.0f%%)\n", res[di].name, res[di].decode_tps[0],
                       res[di].bw / 1e9, res[di].bw / (tern + head + kv_mid),
                       100 * res[di].decode_tps[0] * (tern + head + kv_mid) / res[di].bw);
        if (nrag) {
            /* a step of the ragged batch reads the weights once and every
             * sequence's cache */
            double kv = 0;
            for (int64_t i = 0; i < nrag; i++)
                kv += (double)bn_kv_bytes_read(c, raglen[i] + steps / 2);
            printf("ragged decode of %lld sequences: %.1f MB of KV cache per step\n",
                   (long long)nrag, kv / 1e6);
            for (int di = 0; di < ndev; di++)
                if (res[di].ran && res[di].set_dec[0] > 0) {
                    const double tps = (double)(nrag * steps) / res[di].set_dec[0];
                    printf("  %-24s prefill %.1f tokens/s, decode %.1f tokens/s", res[di].name,
                           (double)(ragsum(raglen, nrag)) / res[di].set_pre[0], tps);
                    if (res[di].bw > 0)
                        printf("; floor %.1f tokens/s (%.0f%%)",
                               (double)nrag * res[di].bw / (tern + head + kv),
                               100 * tps * (tern + head + kv) / ((double)nrag * res[di].bw));
                    printf("\n");
                }
        }
        if (shared)
            for (int di = 0; di < ndev; di++)
                if (res[di].ran)
                    printf("shared %ld-token prefix, batch %lld: %-24s prefill %.1f tokens/s, "
                           "decode %.1f tokens/s\n", shared, (long long)maxb, res[di].name,
                           (double)(maxb * T - (maxb - 1) * shared) / res[di].set_pre[1],
                           res[di].set_dec[1] > 0 ? (double)(maxb * steps) / res[di].set_dec[1]
                                                  : 0.0);
    }

    /* The hashes: batch 1 (or the first batch size) sequence 0 per step. */
    int ref = -1;
    for (int di = 0; di < ndev && ref < 0; di++)
        if (res[di].ran)
            ref = di;
    if (ref < 0) {
        printf("\nno device could run the model\n");
        failed = 1;
    } else {
        printf("\nSHA-256 of the logits of sequence 0, batch %ld (step 0 is the prefill's last "
               "token)%s:\n", batches[0], full ? "" : ", first 16 hex digits per device");
        for (long st = 0; st <= steps; st++) {
            if (full) {
                for (int di = 0; di < ndev; di++)
                    if (res[di].ran)
                        printf("step %-3ld %-24s %s\n", st, res[di].name, res[di].hash[0][st][0]);
                continue;
            }
            printf("step %-3ld", st);
            int same = 1;
            for (int di = 0; di < ndev; di++)
                if (res[di].ran) {
                    printf(" %.16s", res[di].hash[0][st][0]);
                    same &= !strcmp(res[di].hash[0][st][0], res[ref].hash[0][st][0]);
                }
            printf("  %s\n", same ? "same" : "DIFFERENT");
        }
        printf("\ntokens (sequence 0):");
        for (long st = 0; st <= steps; st++)
            printf(" %d", res[ref].tokens[0][0][st]);
        if (vocab) {
            char piece[256];
            printf("\ntext (sequence 0): \"");
            for (int64_t t = 0; t < T; t++)
                if (bn_detok(vocab, prompt[t], piece, sizeof piece) >= 0)
                    printf("%s", piece);
            printf("\" ->");
            for (long st = 0; st <= steps; st++)
                if (bn_detok(vocab, res[ref].tokens[0][0][st], piece, sizeof piece) >= 0)
                    printf(" \"%s\"", piece);
        }
        printf("\n\ndigest of every step, sequence and batch size per device:\n");
        int all_same = 1, inv = 1;
        for (int di = 0; di < ndev; di++) {
            if (!res[di].ran)
                continue;
            int same = !strcmp(res[di].digest, res[ref].digest);
            all_same &= same;
            static const char *const mode[3] = {"eager", "graphs replayed by the core",
                                                "CUDA graphs"};
            printf("  %-24s %s%s  (decode: %s)\n", res[di].name, res[di].digest,
                   same ? "" : "  DIFFERENT", mode[res[di].graph_mode]);
            /* A sequence alone and in a batch: sequence 0 of every batch
             * size against the first. */
            for (int bi = 1; bi < nbatch; bi++)
                for (long st = 0; st <= steps; st++)
                    if (strcmp(res[di].hash[bi][st][0], res[di].hash[0][st][0])) {
                        if (inv)
                            printf("    batch %ld changes sequence 0's logits at step %ld\n",
                                   batches[bi], st);
                        inv = 0;
                    }
        }
        /* --ragged and --shared-prefix: the same digest on every device, and
         * sequence 0 as alone */
        static const char *const set_name[2] = {"ragged batch", "shared prefix"};
        static const char *const att_name[3] = {"batched", "paged", "per sequence"};
        for (int k = 0; k < 2; k++) {
            if (!(k ? shared != 0 : nrag != 0))
                continue;
            int same = 1, sinv = 1;
            printf("\n%s: digest of every step and sequence per device:\n", set_name[k]);
            for (int di = 0; di < ndev; di++) {
                if (!res[di].ran)
                    continue;
                int sm = !strcmp(res[di].set_digest[k], res[ref].set_digest[k]);
                same &= sm;
                sinv &= res[di].set_inv[k];
                printf("  %-24s %s%s  (attention: %s)\n", res[di].name, res[di].set_digest[k],
                       sm ? "" : "  DIFFERENT",
                       res[di].set_att[k] >= 0 && res[di].set_att[k] < 3
                           ? att_name[res[di].set_att[k]] : "?");
            }
            const int checked = k || raglen[0] == T;
            printf("%s: %s; sequence 0 keeps its logits: %s\n", set_name[k],
                   same ? "identical on every device" : "DIFFERENT between devices",
                   !checked ? "not checked (its length is not the prompt's)"
                            : sinv ? "holds" : "BROKEN");
            failed |= !same || (checked && !sinv);
        }
        printf("\n%s on %d device%s; batch invariance %s\n",
               all_same ? "identical logits" : "DIFFERENT logits", ndev, ndev == 1 ? "" : "s",
               nbatch < 2 ? "not checked (one batch size)" : inv ? "holds" : "BROKEN");
        failed |= !all_same || !inv;
    }
    for (int di = 0; di < ndev; di++)
        free(res[di].hash);
    free(res);
    free(prompt);
    free(chunk_ids);
    free(logits);
    bn_weights_free(&w);
    lkg_close(vocab);
    lk_context_destroy(ctx);
    return failed ? 1 : 0;
}
