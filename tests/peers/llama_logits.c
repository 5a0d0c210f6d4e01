/* Lockstep: a small driver of llama.cpp's library that prints the logits
 * of a GGUF model's last position, for tests/test_llama_fidelity.c.
 * scripts/get-peers.sh compiles it against the llama.cpp it builds,
 * outside the tree; it is not part of the library or of `make check`'s
 * build.
 *
 *   lockstep-llama-logits MODEL.gguf ID,ID,...
 *
 * prints "n_vocab N" and then the N logits of the last id, one a line,
 * as %.9g (enough digits to give the float back).  The ids run as one
 * batch from position 0 on the CPU, with an f32 KV cache; exit status 1 with a message on
 * stderr when the model does not load or the batch fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf ID,ID,...\n", argv[0]);
        return 2;
    }
    llama_token ids[512];
    int n = 0;
    for (char *p = argv[2]; *p && n < 512;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p) {
            fprintf(stderr, "bad id list '%s'\n", argv[2]);
            return 2;
        }
        ids[n++] = (llama_token)v;
        p = *e == ',' ? e + 1 : e;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama.cpp could not load %s\n", argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_ubatch = 256;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    /* f32 KV cache and plain attention: what is compared is the model, not
     * llama.cpp's f16 cache */
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama.cpp could not make a context for %s\n", argv[1]);
        return 1;
    }
    if (llama_decode(ctx, llama_batch_get_one(ids, n))) {
        fprintf(stderr, "llama_decode failed\n");
        return 1;
    }
    const float *lg = llama_get_logits_ith(ctx, -1);
    int nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    printf("n_vocab %d\n", nv);
    for (int i = 0; i < nv; i++)
        printf("%.9g\n", lg[i]);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
