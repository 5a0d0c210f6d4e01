/* BitNet example: the bookkeeping of a paged KV cache, in host memory.
 *
 * The cache of every layer is one pool of n_pages pages of page_size rows;
 * sequence s holds its position p in row table[s][p / page_size] *
 * page_size + p % page_size.  A page may be held by several sequences (a
 * shared prefix); a sequence only ever writes into pages it holds alone
 * (bn_pages_need counts the copy a write into a shared page needs first).
 * Page k of sequence s is preferably page s * width + k (the "identity"
 * layout: sequence s's rows are then s * width * page_size + p, the
 * contiguous cache that lk_bitnet_decode and a batched lk_attention read);
 * any free page serves when that one is taken. */
#ifndef LK_EXAMPLES_BITNET_KVPAGES_H
#define LK_EXAMPLES_BITNET_KVPAGES_H

#include <stdint.h>

typedef struct bn_pages {
    int64_t n_pages, page_size, max_seqs, width; /* width: blocks per sequence */
    int32_t *ref;   /* n_pages: how many sequences hold each page */
    int32_t *table; /* max_seqs x width: the page of each block, -1 none */
    int64_t *len;   /* max_seqs: positions held */
    int64_t nfree;
} bn_pages;

/* 0, or -1 when out of memory. */
int bn_pages_init(bn_pages *p, int64_t n_pages, int64_t page_size, int64_t max_seqs,
                  int64_t width);
void bn_pages_free(bn_pages *p);

/* Pages sequence s needs before it can write positions from..upto-1:
 * the blocks it does not hold yet, plus one copy where the block holding
 * `from` is shared (*cow set to that block, else -1). */
int64_t bn_pages_need(const bn_pages *p, int64_t s, int64_t from, int64_t upto, int64_t *cow);
/* A free page for block k of sequence s (its identity page when free),
 * marked held once; -1 when none is free.  The caller puts it in the table. */
int32_t bn_pages_take(bn_pages *p, int64_t s, int64_t k);
/* Sequence s lets go of its blocks from block k on. */
void bn_pages_release(bn_pages *p, int64_t s, int64_t k);
/* 1 when blocks 0 .. ceil(upto / page_size) - 1 of s are its identity pages. */
int bn_pages_identity(const bn_pages *p, int64_t s, int64_t upto);

#endif
