/* BitNet example: text to token ids with a GGUF file's byte-level BPE
 * tokenizer (tokenizer.ggml.model "gpt2", as Llama 3 and BitNet-2B-4T use),
 * for `lockstep demo --prompt`.  The inverse of bn_detok (vocab.h).
 *
 * Text is split into pieces by the pre-tokenizer named by tokenizer.ggml.pre
 * (the names llama.cpp gives Llama 3's, GPT-2's, Qwen2's or StarCoder's
 * regexes, listed in docs/demo.md; absent: Llama 3's, with a note on
 * stderr; any other name is refused), each piece's bytes are mapped through GPT-2's bytes_to_unicode
 * and merged by tokenizer.ggml.merges in rank order (a piece that is a
 * token as a whole is that token, for the names llama.cpp gives
 * ignore_merges: Llama 3's), and the merged symbols are looked up in
 * tokenizer.ggml.tokens.
 * The regexes are implemented by hand; docs/demo.md says which Unicode
 * classes are exact and which approximated.  Bytes that are not UTF-8 are
 * pieces of their own (their byte tokens), so decoding gives the text back
 * byte for byte.  Control tokens (token_type 3) are never produced. */
#ifndef LK_EXAMPLES_BITNET_TOKENIZER_H
#define LK_EXAMPLES_BITNET_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct bn_tokenizer bn_tokenizer;

/* Build the tokenizer from f's metadata (f may be closed afterwards).
 * Returns 0, or -1 with a message in err for a missing or malformed
 * vocabulary, a merge naming an unknown token, a tokenizer model other
 * than "gpt2", or a pre-tokenizer name not implemented here. */
int bn_tok_load(const lkg_file *f, bn_tokenizer **out, char *err, size_t errlen);
void bn_tok_free(bn_tokenizer *t);

/* The pre-tokenizer in use ("llama3", "gpt2", "qwen2" or "starcoder"). */
const char *bn_tok_pre(const bn_tokenizer *t);
/* 1 when name is a tokenizer.ggml.pre value bn_tok_load accepts. */
int bn_tok_pre_known(const char *name);

/* len bytes of text to token ids: *ids (malloc'd, the caller frees it) and
 * *n.  bos: 1 puts tokenizer.ggml.bos_token_id first, 0 does not, -1 does
 * what tokenizer.ggml.add_bos_token says (default: yes for llama3, no for
 * gpt2).  Returns 0, or -1 with err (a byte without a token, no BOS token,
 * out of memory). */
int bn_tok_encode(const bn_tokenizer *t, const char *text, size_t len, int bos, int32_t **ids,
                  int64_t *n, char *err, size_t errlen);

#endif
