/* BitNet example: token ids back to text, from a GGUF file's vocabulary
 * (tokenizer.ggml.tokens).  Byte-level BPE vocabularies (tokenizer.ggml.model
 * "gpt2", as Llama 3 and BitNet-2B-4T use) store each byte as a printable
 * code point (GPT-2's bytes_to_unicode); SentencePiece ones ("llama") write
 * a space as U+2581 and raw bytes as <0xXX>.  Decoding only: tokenizer.h
 * turns a prompt into ids. */
#ifndef LK_EXAMPLES_BITNET_VOCAB_H
#define LK_EXAMPLES_BITNET_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* The text of token id appended to out (NUL-terminated, truncated to n);
 * returns the bytes written, or -1 when the file has no vocabulary or id is
 * outside it. */
int bn_detok(const lkg_file *f, int64_t id, char *out, size_t n);

#endif
