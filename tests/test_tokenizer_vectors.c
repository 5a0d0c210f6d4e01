/* The prompt encoder (examples/bitnet/tokenizer.c) against llama.cpp's own
 * tokenizer test vectors: the vocabulary-only GGUF files llama.cpp ships
 * (models/ggml-vocab-NAME.gguf) with their inputs (.inp, separated by
 * "\n__ggml_vocab_test__\n") and the ids llama.cpp gives them (.out, one
 * line each, no BOS).  scripts/get-peers.sh copies them, outside the tree,
 * to $LOCKSTEP_PEERS_DIR/llama.cpp/vocab (default
 * ~/.cache/lockstep/peers); without them the test is a SKIP.
 *
 * Every vocabulary whose tokenizer.ggml.model is "gpt2" and whose
 * tokenizer.ggml.pre the encoder implements runs every vector; the others
 * are a SKIP naming their pre-tokenizer (the loader refuses them with a
 * message, checked here too).  A vector that differs is printed with both
 * id lists. */
#define _POSIX_C_SOURCE 200809L /* opendir, strdup */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/tokenizer.h"
#include "tests/tap.h"

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap + 1);
    while (b) {
        size_t k = fread(b + len, 1, cap - len, f);
        len += k;
        if (len < cap)
            break;
        char *nb = realloc(b, 2 * cap + 1);
        if (!nb)
            free(b);
        b = nb;
        cap *= 2;
    }
    fclose(f);
    if (b)
        b[len] = 0;
    *n = len;
    return b;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One vocabulary: its vectors, or a SKIP saying why not. */
static void run_vocab(const char *dir, const char *name)
{
    char path[4096], err[512], model[32] = "", pre[64] = "(none)";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lkg_file *f = NULL;
    if (lkg_open(path, &f, err, sizeof err)) {
        ok(0, "%s: read (%s)", name, err);
        return;
    }
    lkg_get_str(f, "tokenizer.ggml.model", model, sizeof model, NULL, 0);
    lkg_get_str(f, "tokenizer.ggml.pre", pre, sizeof pre, NULL, 0);
    bn_tokenizer *t = NULL;
    int loaded = bn_tok_load(f, &t, err, sizeof err) == 0;
    lkg_close(f);
    if (!strcmp(pre, "(none)")) {
        skip(1, "%s: tokenizer %s names no pre-tokenizer (llama.cpp takes its \"default\" "
             "regexes, not implemented here)", name, model);
        bn_tok_free(t);
        return;
    }
    if (strcmp(model, "gpt2") || !bn_tok_pre_known(pre)) {
        ok(!loaded && err[0], "%s: tokenizer %s, pre-tokenizer %s: refused with a message (%s)",
           name, model, pre, err);
        skip(1, "%s: tokenizer %s, pre-tokenizer %s is not implemented here", name, model, pre);
        bn_tok_free(t);
        return;
    }
    if (!ok(loaded, "%s: loads (pre-tokenizer %s)", name, pre)) {
        diag("%s", err);
        return;
    }
    size_t ni, no;
    char pin[4096], pout[4096];
    snprintf(pin, sizeof pin, "%s.inp", path);
    snprintf(pout, sizeof pout, "%s.out", path);
    char *inp = slurp(pin, &ni), *out = slurp(pout, &no);
    if (!inp || !out) {
        skip(1, "%s: no .inp/.out vectors", name);
        free(inp), free(out), bn_tok_free(t);
        return;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sl = sizeof sep - 1;
    int total = 0, same = 0, bad_format = 0;
    char *ip = inp, *op = out, *iend = inp + ni;
    while (ip < iend) {
        char *next = strstr(ip, sep);
        size_t len = next ? (size_t)(next - ip) : (size_t)(iend - ip);
        char *eol = strchr(op, '\n');
        if (!eol && !*op) {
            bad_format = 1;
            break;
        }
        if (eol)
            *eol = 0;
        /* the expected ids */
        int32_t want[4096];
        int nw = 0;
        for (char *q = op; *q && nw < 4096;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) {
                q++;
                continue;
            }
            want[nw++] = (int32_t)v;
            q = e;
        }
        int32_t *ids = NULL;
        int64_t n = 0;
        total++;
        if (bn_tok_encode(t, ip, len, 0, &ids, &n, err, sizeof err)) {
            diag("%s: vector %d: %s", name, total, err);
        } else if (n == nw && (nw == 0 || !memcmp(ids, want, (size_t)nw * 4))) {
            same++;
        } else {
            char got[2048] = "";
            size_t at = 0;
            for (int64_t k = 0; k < n && at < sizeof got - 16; k++)
                at += (size_t)snprintf(got + at, sizeof got - at, " %d", ids[k]);
            diag("%s: vector %d \"%.*s\": llama.cpp%s, here%s", name, total,
                 (int)(len > 60 ? 60 : len), ip, op, got);
        }
        free(ids);
        op = eol ? eol + 1 : op + strlen(op);
        if (!next)
            break;
        ip = next + sl;
    }
    ok(!bad_format && total > 0 && same == total,
       "%s (pre-tokenizer %s): %d of %d of llama.cpp's vectors give llama.cpp's ids", name, pre,
       same, total);
    free(inp), free(out);
    bn_tok_free(t);
}

int main(void)
{
    char dir[4096];
    const char *peers = getenv("LOCKSTEP_PEERS_DIR"), *home = getenv("HOME");
    if (peers && *peers)
        snprintf(dir, sizeof dir, "%s/llama.cpp/vocab", peers);
    else
        snprintf(dir, sizeof dir, "%s/.cache/lockstep/peers/llama.cpp/vocab", home ? home : ".");
    DIR *d = opendir(dir);
    if (!d)
        skip_all("no llama.cpp vocabularies in %s (scripts/get-peers.sh fetches them)", dir);
    char *names[256];
    int nn = 0;
    for (struct dirent *e; (e = readdir(d)) && nn < 256;) {
        size_t l = strlen(e->d_name);
        if (l > 5 && !strcmp(e->d_name + l - 5, ".gguf") && !strncmp(e->d_name, "ggml-vocab-", 11))
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    if (nn == 0)
        skip_all("no ggml-vocab-*.gguf in %s (scripts/get-peers.sh fetches them)", dir);
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    for (int i = 0; i < nn; i++) {
        run_vocab(dir, names[i]);
        free(names[i]);
    }
    return done_testing();
}
