/* libFuzzer target: the BitNet example's GGUF reader and model loader.
 *
 * The input is a GGUF file.  Whatever lkg_parse accepts is then read the
 * way the demo reads it: every key through the typed getters, the string
 * arrays element by element, every tensor's shape and (the first few of
 * up to 1024 elements) its conversion to f32, bf16 and LK_T2, token texts,
 * and the whole model through bn_weights_from_gguf. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "examples/bitnet/gguf.h"
#include "examples/bitnet/model.h"
#include "examples/bitnet/vocab.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256], key[256], s[64];
    lkg_file *f = NULL;
    if (lkg_parse(data, size, &f, err, sizeof err) != 0)
        return 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const lkg_kv *kv = &f->kv[i];
        size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
        memcpy(key, kv->key.s, n);
        key[n] = 0;
        uint64_t u;
        float x;
        (void)lkg_get_u64(f, key, &u, err, sizeof err);
        (void)lkg_get_f32(f, key, &x, err, sizeof err);
        (void)lkg_get_str(f, key, s, sizeof s, err, sizeof err);
        if (kv->value.type == LKG_ARRAY)
            for (uint64_t j = 0; j < kv->value.v.arr.count && j < 64; j++) {
                lkg_str e;
                (void)lkg_array_str(&kv->value, j, &e);
            }
    }
    int64_t budget = 1 << 11;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const lkg_tensor *t = &f->tensors[i];
        int64_t rows, cols;
        (void)lkg_type_name(t->type);
        /* the conversions loop per element and per row: 1024 elements
         * and rows a tensor (every block layout of every type fits: four
         * TQ blocks, eight I2_S blocks), 2048 of both in all.  Inputs that declare hundreds of tensors over
         * the same bytes, or tensors of 0 columns and many rows (no data,
         * so the parser takes them), took milliseconds each otherwise */
        if (lkg_tensor_shape(t, &rows, &cols, err, sizeof err) || rows > (1 << 10) ||
            rows * cols > (1 << 10) || rows * cols + rows > budget)
            continue;
        budget -= rows * cols + rows;
        size_t n = (size_t)(rows * cols);
        float *fv = malloc(n * 4 + 4);
        uint16_t *bv = malloc(n * 2 + 2);
        if (fv && bv) {
            (void)lkg_tensor_to_f32(t, fv, err, sizeof err);
            (void)lkg_tensor_to_bf16(t, bv, err, sizeof err);
        }
        free(fv);
        free(bv);
        for (int blk = 64; blk <= 128; blk += 64) {
            lkg_ternary tt;
            if (lkg_tensor_to_t2(t, blk, &tt, err, sizeof err) == 0)
                lkg_ternary_free(&tt);
        }
    }
    char text[64];
    for (int64_t id = -1; id < 8; id++)
        (void)bn_detok(f, id, text, sizeof text);
    bn_weights w; /* I2_S blocks of 128 or 64, as the size's parity says */
    if (bn_weights_from_gguf(&w, f, size & 1 ? 64 : 128, 64, err, sizeof err) == 0)
        bn_weights_free(&w);
    lkg_close(f);
    return 0;
}
