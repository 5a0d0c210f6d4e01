/* libFuzzer target: the BitNet example's prompt tokenizer.
 *
 * First input byte even: the rest is text, encoded with the demo model
 * file's tokenizer (Llama 3's pre-tokenizer) and GPT-2's, with and without
 * BOS, and decoded back (the ids must give the text's bytes back).  Odd:
 * the rest is a GGUF file whose tokenizer is loaded and used on a fixed
 * text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/model.h"
#include "examples/bitnet/tokenizer.h"
#include "examples/bitnet/vocab.h"
#include "tests/fuzz/fuzz.h"

static lkg_file *demo;
static bn_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    bn_config cfg = bn_config_tiny(1);
    bn_weights w;
    uint8_t *d;
    size_t n;
    if (bn_weights_generate(&w, &cfg, 1, err, sizeof err) ||
        bn_weights_to_gguf(&w, LKG_T_I2_S, &d, &n, err, sizeof err) ||
        lkg_parse(d, n, &demo, err, sizeof err) || bn_tok_load(demo, &tok, err, sizeof err))
        abort();
    bn_weights_free(&w);
    free(d);
    return 0;
}

/* check: 0 encode only, 1 also decode the ids, 2 also compare with text */
static void encode(const bn_tokenizer *t, const lkg_file *f, const char *text, size_t len,
                   int check)
{
    char err[256];
    for (int bos = -1; bos <= 1; bos++) {
        int32_t *ids = NULL;
        int64_t n = 0;
        if (bn_tok_encode(t, text, len, bos, &ids, &n, err, sizeof err) != 0)
            continue;
        /* without BOS the ids' texts are the text, byte for byte */
        if (!check) {
            free(ids);
            continue;
        }
        char *back = malloc(len + 1);
        size_t at = 0;
        int good = back != NULL;
        for (int64_t i = 0; good && i < n; i++) {
            char piece[256];
            int k = bn_detok(f, ids[i], piece, sizeof piece);
            if (k < 0 || (bos == 0 && at + (size_t)k > len)) {
                good = 0;
                break;
            }
            if (bos == 0)
                memcpy(back + at, piece, (size_t)k);
            at += (size_t)k;
        }
        if (check == 2 && bos == 0 && (!good || at != len || memcmp(back, text, len) != 0))
            abort();
        free(back);
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0) {
        /* bn_detok walks the token array up to the id, so decoding a long
         * text is slow by design: the round trip is checked up to 4 KiB */
        encode(tok, demo, (const char *)data + 1, size - 1, size - 1 <= 4096 ? 2 : 0);
        return 0;
    }
    char err[256];
    lkg_file *f;
    bn_tokenizer *t;
    if (lkg_parse(data + 1, size - 1, &f, err, sizeof err) != 0)
        return 0;
    if (bn_tok_load(f, &t, err, sizeof err) == 0) {
        static const char text[] = "Hello, world! It's 2024 -- caf\xc3\xa9 \xf0\x9f\x98\x80 \xff\n\n  x";
        encode(t, f, text, sizeof text - 1, 1);
        (void)bn_tok_pre(t);
        bn_tok_free(t);
    }
    lkg_close(f);
    return 0;
}
