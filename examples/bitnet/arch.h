/* BitNet example: the GGUF architectures the decoder runs, and how.
 *
 * A file's general.architecture names the engine that wrote it, and that
 * engine's graph is the model the file holds: the same weights give other
 * logits under another RoPE pairing or FFN activation.  So the choice is
 * made per architecture name, as the engines make it (docs/demo.md has the
 * table and where each entry comes from).  GGUF has no key that states the
 * RoPE pairing (llama.cpp derives it from the architecture too). */
#ifndef LK_EXAMPLES_BITNET_ARCH_H
#define LK_EXAMPLES_BITNET_ARCH_H

#include <stddef.h>

#include "gguf.h"

typedef struct bn_arch {
    const char *name;    /* general.architecture */
    const char *writer;  /* who writes such files and runs them */
    unsigned rope_flags; /* LK_ROPE_NEOX or LK_ROPE_INTERLEAVED */
    int ffn_act;         /* lk_unary_op of the gate: LK_UNARY_RELU2 or LK_UNARY_SILU */
    int tied_head;       /* 1: the LM head is always token_embd (output.weight refused) */
} bn_arch;

/* The entry for an architecture name, or NULL. */
const bn_arch *bn_arch_find(const char *name);
/* The table, for listings and tests: entry i < bn_arch_count(). */
int bn_arch_count(void);
const bn_arch *bn_arch_at(int i);
/* The names, comma separated, for messages. */
const char *bn_arch_names(void);

/* What a file says beyond the hyper-parameters that would change the
 * model: RoPE scaling other than none or linear by 1, per-tensor scale
 * tensors (blk.N.*.scale), output.weight where the architecture ties the
 * head.  0, or -1 with a message naming the key or tensor. */
int bn_arch_check(const lkg_file *f, const bn_arch *a, char *err, size_t errlen);

#endif
