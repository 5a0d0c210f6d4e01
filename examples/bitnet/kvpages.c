/* BitNet example: the paged KV cache's bookkeeping (kvpages.h). */
#include <stdlib.h>
#include <string.h>

#include "kvpages.h"

int bn_pages_init(bn_pages *p, int64_t n_pages, int64_t page_size, int64_t max_seqs,
                  int64_t width)
{
    memset(p, 0, sizeof *p);
    p->n_pages = n_pages, p->page_size = page_size, p->max_seqs = max_seqs, p->width = width;
    p->ref = calloc((size_t)n_pages, sizeof *p->ref);
    p->table = malloc((size_t)(max_seqs * width) * sizeof *p->table);
    p->len = calloc((size_t)max_seqs, sizeof *p->len);
    if (!p->ref || !p->table || !p->len) {
        bn_pages_free(p);
        return -1;
    }
    for (int64_t i = 0; i < max_seqs * width; i++)
        p->table[i] = -1;
    p->nfree = n_pages;
    return 0;
}

void bn_pages_free(bn_pages *p)
{
    free(p->ref);
    free(p->table);
    free(p->len);
    memset(p, 0, sizeof *p);
}

int64_t bn_pages_need(const bn_pages *p, int64_t s, int64_t from, int64_t upto, int64_t *cow)
{
    const int32_t *t = p->table + s * p->width;
    int64_t n = 0;
    *cow = -1;
    if (upto <= from)
        return 0;
    for (int64_t k = from / p->page_size; k <= (upto - 1) / p->page_size; k++)
        if (t[k] < 0)
            n++;
        else if (k == from / p->page_size && p->ref[t[k]] > 1)
            *cow = k, n++;
    return n;
}

int32_t bn_pages_take(bn_pages *p, int64_t s, int64_t k)
{
    int64_t id = s * p->width + k;
    if (!p->nfree)
        return -1;
    /* Any other free page from the top: the identity pages of the last
     * sequences go first, as those are the least often used. */
    if (id >= p->n_pages || p->ref[id])
        for (id = p->n_pages - 1; id >= 0 && p->ref[id]; id--)
            ;
    p->ref[id] = 1;
    p->nfree--;
    return (int32_t)id;
}

void bn_pages_release(bn_pages *p, int64_t s, int64_t k)
{
    int32_t *t = p->table + s * p->width;
    for (; k < p->width; k++)
        if (t[k] >= 0) {
            if (--p->ref[t[k]] == 0)
                p->nfree++;
            t[k] = -1;
        }
}

int bn_pages_identity(const bn_pages *p, int64_t s, int64_t upto)
{
    const int32_t *t = p->table + s * p->width;
    for (int64_t k = 0; k * p->page_size < upto; k++)
        if (t[k] != s * p->width + k)
            return 0;
    return 1;
}
