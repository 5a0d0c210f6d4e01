/* Lockstep reference: causal attention with grouped KV heads over a KV
 * cache, contiguous (lk_attention) or paged (lk_attention_paged), in
 * docs/numerics.md section 12.3's chunked order, literally: per (token,
 * head) the scores by the GEMM contract's dot (section 4) times scale; per
 * chunk of LK_ATTENTION_CHUNK keys its maximum m_c, e_j = exp(s_j - m_c),
 * their lane sum l_c and o_c = the fma chain of e_j v_j; the chunks
 * weighted by exp(m_c - m) and added in chunk order; one division and one
 * product per output at the end.  Keys beyond the causal limit are never
 * read. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#include "numerics/contract.h"
#include "numerics/scalar.h"

#define C LK_ATTENTION_CHUNK

/* Where key j of one (sequence, kv head) lives: element offset of its
 * first column in k and in v. */
typedef struct keys {
    const lk_tensor *k, *v;
    int64_t kbase, vbase;  /* batch entry and kv head's columns */
    const int32_t *table;  /* paged: the sequence's row of the block table */
    int64_t page_size;
} keys;

static int64_t key_row(const keys *K, int64_t j)
{
    if (K->table == NULL)
        return j;
    return (int64_t)K->table[j / K->page_size] * K->page_size + j % K->page_size;
}

/* One (token, head): q (hd floats, widened) against keys 0 .. n-1 (n >= 1);
 * e holds n scores, mc ceil(n / C) chunk maxima, o hd floats; the result
 * (before the store's rounding) goes to o. */
static void att_head(const float *q, const keys *K, int64_t n, int64_t hd, float scale,
                     float *e, float *mc, float *o)
{
    const int64_t nc = (n + C - 1) / C;
    /* s_j = dot(q, k_j) * scale, the dot in section 4's KB blocks */
    for (int64_t j = 0; j < n; j++) {
        const int64_t kr = K->kbase + key_row(K, j) * K->k->ld;
        float total = 0.0f;
        for (int64_t d0 = 0; d0 < hd; d0 += LK_KB) {
            int64_t d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
            float acc = 0.0f;
            for (int64_t d = d0; d < d1; d++)
                acc = fmaf(q[d], lk_ref_load(K->k->data, K->k->dtype, kr + d), acc);
            total = d0 == 0 ? acc : total + acc;
        }
        e[j] = total * scale;
    }
    /* m_c = maximum of the chunk's scores; m = maximum of the m_c */
    float m = 0.0f;
    for (int64_t c = 0; c < nc; c++) {
        const int64_t j0 = c * C, j1 = n - j0 < C ? n : j0 + C;
        float x = e[j0];
        for (int64_t j = j0 + 1; j < j1; j++)
            x = lk_maximum(x, e[j]);
        mc[c] = x;
        m = c == 0 ? x : lk_maximum(m, x);
    }
    float l = -0.0f;
    for (int64_t i = 0; i < hd; i++)
        o[i] = -0.0f;
    for (int64_t c = 0; c < nc; c++) {
        const int64_t j0 = c * C, j1 = n - j0 < C ? n : j0 + C;
        if (mc[c] == -INFINITY && m != -INFINITY)
            continue; /* every score -Inf: the chunk adds nothing */
        const float w = lk_ref_expf(mc[c] - m);
        for (int64_t j = j0; j < j1; j++)
            e[j] = lk_ref_expf(e[j] - mc[c]);
        const float lc = lk_ref_lane_sum(e + j0, j1 - j0);
        l = l + lc * w;
        for (int64_t i = 0; i < hd; i++) {
            float acc = 0.0f;
            for (int64_t j = j0; j < j1; j++) {
                const int64_t vr = K->vbase + key_row(K, j) * K->v->ld;
                acc = fmaf(e[j], lk_ref_load(K->v->data, K->v->dtype, vr + i), acc);
            }
            o[i] = o[i] + acc * w;
        }
    }
    const float r = 1.0f / l;
    for (int64_t i = 0; i < hd; i++)
        o[i] = o[i] * r;
}

/* Scratch for keys up to n: scores, chunk maxima, q and o. */
static float *att_scratch(int64_t n, int64_t hd, const char *fn)
{
    const int64_t floats = n + (n + C - 1) / C + 2 * hd + 1;
    float *s = (uint64_t)floats <= SIZE_MAX / sizeof *s ? malloc((size_t)floats * sizeof *s)
                                                         : NULL;
    if (s == NULL)
        lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "%s: no memory for %lld scores", fn,
                        (long long)n);
    return s;
}

/* Head h of one query row: q from qi, out to yi (element offsets). */
static void att_row_head(const lk_tensor *qt, int64_t qi, const lk_tensor *yt, int64_t yi,
                         const keys *K, int64_t n, int64_t hd, float scale, float *s)
{
    float *qv = s, *o = s + hd, *mc = s + 2 * hd, *e = mc + (n + C - 1) / C + 1;
    if (n == 0) {
        for (int64_t d = 0; d < hd; d++)
            lk_ref_store(yt->data, yt->dtype, yi + d, 0.0f);
        return;
    }
    for (int64_t d = 0; d < hd; d++)
        qv[d] = lk_ref_load(qt->data, qt->dtype, qi + d);
    att_head(qv, K, n, hd, scale, e, mc, o);
    for (int64_t d = 0; d < hd; d++)
        lk_ref_store(yt->data, yt->dtype, yi + d, o[d]);
}

lk_status lk_ref_attention(const lk_attention_args *a)
{
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv, L = a->cache_len;
    int64_t nmax = 0; /* scratch for the keys a row reads, not the whole cache */
    for (int64_t b = 0; b < a->batch; b++)
        for (int64_t t = 0; t < a->tokens; t++) {
            int64_t p = ((const int32_t *)a->pos.data)[b * a->pos.batch_stride + t * a->pos.ld];
            int64_t n = p < 0 ? 0 : (p + 1 < L ? p + 1 : L);
            nmax = n > nmax ? n : nmax;
        }
    float *s = att_scratch(nmax, hd, "lk_attention");
    if (s == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; b < a->batch; b++) {
        for (int64_t t = 0; t < a->tokens; t++) {
            int64_t p = ((const int32_t *)a->pos.data)[b * a->pos.batch_stride + t * a->pos.ld];
            int64_t n = p < 0 ? 0 : (p + 1 < L ? p + 1 : L); /* keys seen */
            for (int64_t h = 0; h < a->n_head; h++) {
                const int64_t kc = (h / group) * hd;
                const keys K = {&a->k, &a->v, b * a->k.batch_stride + kc,
                                b * a->v.batch_stride + kc, NULL, 1};
                att_row_head(&a->q, b * a->q.batch_stride + t * a->q.ld + h * hd, &a->y,
                             b * a->y.batch_stride + t * a->y.ld + h * hd, &K, n, hd,
                             a->scale, s);
            }
        }
    }
    free(s);
    return LK_OK;
}

/* Rows [r0, r1) of a paged call. */
lk_status lk_ref_attention_paged_rows(const lk_attention_paged_args *a, int64_t r0, int64_t r1)
{
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv;
    const int32_t *pos = a->pos.data, *seq = a->seq.data, *tab = a->table.data;
    int64_t nmax = 0;
    for (int64_t r = r0; r < r1; r++)
        if (pos[r * a->pos.ld] + (int64_t)1 > nmax)
            nmax = pos[r * a->pos.ld] + (int64_t)1;
    float *s = att_scratch(nmax, hd, "lk_attention_paged");
    if (s == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t p = pos[r * a->pos.ld], n = p < 0 ? 0 : p + 1;
        const int32_t *trow = tab + (int64_t)seq[r * a->seq.ld] * a->table.ld;
        for (int64_t h = 0; h < a->n_head; h++) {
            const int64_t kc = (h / group) * hd;
            const keys K = {&a->k, &a->v, kc, kc, trow, a->page_size};
            att_row_head(&a->q, r * a->q.ld + h * hd, &a->y, r * a->y.ld + h * hd, &K, n, hd,
                         a->scale, s);
        }
    }
    free(s);
    return LK_OK;
}

lk_status lk_ref_attention_paged(const lk_attention_paged_args *a)
{
    return lk_ref_attention_paged_rows(a, 0, a->rows);
}

/* The paged write: rows in order, so the last of two rows naming one slot
 * wins; bits copied unchanged. */
lk_status lk_ref_kv_write_paged(const lk_kv_write_paged_args *a)
{
    const int32_t *pos = a->pos.data, *seq = a->seq.data, *tab = a->table.data;
    const size_t es = lk_dtype_size(a->k.dtype);
    for (int64_t r = 0; r < a->rows; r++) {
        const int64_t j = pos[r * a->pos.ld], s = seq[r * a->seq.ld];
        const int64_t row = (int64_t)tab[s * a->table.ld + j / a->page_size] * a->page_size +
                            j % a->page_size;
        memcpy((char *)a->k.data + (size_t)(row * a->k.ld) * es,
               (const char *)a->k_new.data + (size_t)(r * a->k_new.ld) * es,
               (size_t)a->k_new.cols * es);
        memcpy((char *)a->v.data + (size_t)(row * a->v.ld) * es,
               (const char *)a->v_new.data + (size_t)(r * a->v_new.ld) * es,
               (size_t)a->v_new.cols * es);
    }
    return LK_OK;
}
