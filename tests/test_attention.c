/* Lockstep tests: attention's chunked order and the paged KV cache
 * (docs/numerics.md sections 12.3 and 12.3.1), on every device, bit for bit
 * (memcmp) against the reference:
 *
 * - lk_attention at context lengths around the chunk boundaries (1, 63, 64,
 *   65, 3 * 64 + 5, ...), with a NaN key, chunks of -Inf scores, a -Inf
 *   score inside a finite chunk, and negative positions;
 * - lk_attention_paged: a token's output is the same computed in a one-shot
 *   prefill, in a prefill cut into calls of several sizes, by decoding (one
 *   row per sequence a call), with its prefix in pages shared with another
 *   sequence, inside a ragged batch of 64 sequences in shuffled row order,
 *   and under another page size; all equal to lk_attention over the same
 *   keys;
 * - lk_kv_write_paged writes the pool rows the table names, k and v as
 *   column slices of one tensor;
 * - bad tables, sequences, positions and page sizes, and a write into a
 *   shared page, are refused with the output untouched.
 *
 * Small shapes by default (every CPU variant, emulated ones included); a
 * CUDA device also runs full BitNet-2B-4T shapes (20 query heads, 5 KV
 * heads, 128 dims) at 4096 and 32768 keys and a prefill of 333 + 200
 * rows, unless LOCKSTEP_CUDA_TEST_SMALL is set (the sanitizers' runs).
 * A GPU runs everything twice: its tile kernel, then the one-row chunk
 * kernel (LOCKSTEP_CUDA_ATTENTION_V1=1); with that variable set, only
 * the kernel it chooses. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

#include "tests/tap.h"
#include "tests/devices.h"

#define C LK_ATTENTION_CHUNK

static uint64_t rng;

static float unitf(void) /* in [-1, 1) */
{
    return (float)((double)(tap_rand(&rng) >> 40) / (double)(1ull << 23) - 1.0);
}

/* One world of sequences: logical keys and values per sequence, queries
 * per (sequence, position), and the reference's outputs. */
typedef struct world {
    int64_t S, nh, nkv, hd, qc, kvd;
    int64_t *len;        /* keys of sequence s */
    int64_t *off;        /* first row of sequence s in the flat arrays */
    int64_t total;       /* rows in all */
    float *k, *v;        /* total x kvd, logical order */
    float *q;            /* total x qc */
    float *want;         /* total x qc: ref's lk_attention */
    int share;           /* sequence 1 shares sequence 0's first `share_keys` keys */
    int64_t share_keys;
    float scale;
} world;

static void world_free(world *w)
{
    free(w->len), free(w->off), free(w->k), free(w->v), free(w->q), free(w->want);
}

/* Contiguous lk_attention for sequence s, rows [r0, r1) of it (positions
 * r0 .. r1-1), on device index d; out to host y (rows x qc). */
static lk_status contig(test_devices *t, int d, const world *w, int64_t s, const int32_t *pos,
                        const float *q, int64_t rows, float *y)
{
    const int64_t L = w->len[s];
    dbuf bq, bk, bv, bp, by;
    memset(&bq, 0, sizeof bq), bk = bv = bp = by = bq;
    lk_status st = LK_ERR_OUT_OF_MEMORY;
    lk_device *dv = t->dev[d];
    lk_queue *qq = t->q[d];
    if (dbuf_up(dv, qq, &bq, q, (size_t)(rows * w->qc) * 4) &&
        dbuf_up(dv, qq, &bk, w->k + w->off[s] * w->kvd, (size_t)(L * w->kvd) * 4) &&
        dbuf_up(dv, qq, &bv, w->v + w->off[s] * w->kvd, (size_t)(L * w->kvd) * 4) &&
        dbuf_up(dv, qq, &bp, pos, (size_t)rows * 4) &&
        dbuf_up(dv, qq, &by, NULL, (size_t)(rows * w->qc) * 4)) {
        lk_tensor tq = lk_mat(bq.p, LK_F32, rows, w->qc), tk = lk_mat(bk.p, LK_F32, L, w->kvd),
                  tv = lk_mat(bv.p, LK_F32, L, w->kvd), tp = lk_mat(bp.p, LK_I32, rows, 1),
                  ty = lk_mat(by.p, LK_F32, rows, w->qc);
        st = lk_attention(qq, &tq, &tk, &tv, &tp, w->nh, w->nkv, w->scale, &ty, 1);
        if (st == LK_OK && !dbuf_down(qq, y, &by))
            st = LK_ERR_DRIVER;
    }
    dbuf_free(dv, &bq), dbuf_free(dv, &bk), dbuf_free(dv, &bv), dbuf_free(dv, &bp),
        dbuf_free(dv, &by);
    return st;
}

/* A paged layout of a world: one pool of both k (cols 0 .. kvd) and v
 * (cols kvd .. 2 kvd), pages in shuffled order, sequence 1's first pages
 * those of sequence 0 when w->share. */
typedef struct paged {
    int64_t ps, npages, maxp;
    int32_t *table;      /* S x maxp, -1: no page */
    float *pool;         /* npages ps x 2 kvd */
} paged;

static int paged_make(const world *w, int64_t ps, paged *p)
{
    p->ps = ps;
    p->maxp = 0;
    for (int64_t s = 0; s < w->S; s++) {
        const int64_t np = (w->len[s] + ps - 1) / ps;
        p->maxp = np > p->maxp ? np : p->maxp;
    }
    p->maxp += 1; /* a spare column of -1 */
    int64_t need = 0;
    for (int64_t s = 0; s < w->S; s++)
        need += (w->len[s] + ps - 1) / ps;
    p->npages = need + 3; /* unused pages too */
    p->table = malloc((size_t)(w->S * p->maxp) * sizeof *p->table);
    p->pool = malloc((size_t)(p->npages * ps * 2 * w->kvd) * sizeof *p->pool);
    int32_t *perm = malloc((size_t)p->npages * sizeof *perm);
    if (!p->table || !p->pool || !perm) {
        free(perm);
        return 0;
    }
    for (int64_t i = 0; i < p->npages; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = p->npages - 1; i > 0; i--) {
        int64_t j = (int64_t)(tap_rand(&rng) % (uint64_t)(i + 1));
        int32_t x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    for (int64_t i = 0; i < p->npages * ps * 2 * w->kvd; i++)
        p->pool[i] = NAN; /* rows no key lives in: never read */
    int64_t next = 0;
    const int64_t shared_pages = w->share ? w->share_keys / ps : 0;
    for (int64_t s = 0; s < w->S; s++) {
        const int64_t np = (w->len[s] + ps - 1) / ps;
        for (int64_t i = 0; i < p->maxp; i++)
            p->table[s * p->maxp + i] = -1;
        for (int64_t i = 0; i < np; i++) {
            if (s == 1 && i < shared_pages)
                p->table[s * p->maxp + i] = p->table[i];
            else
                p->table[s * p->maxp + i] = perm[next++];
        }
        for (int64_t j = 0; j < w->len[s]; j++) {
            const int64_t row = (int64_t)p->table[s * p->maxp + j / ps] * ps + j % ps;
            memcpy(p->pool + row * 2 * w->kvd, w->k + (w->off[s] + j) * w->kvd,
                   (size_t)w->kvd * 4);
            memcpy(p->pool + row * 2 * w->kvd + w->kvd, w->v + (w->off[s] + j) * w->kvd,
                   (size_t)w->kvd * 4);
        }
    }
    free(perm);
    return 1;
}

static void paged_free(paged *p)
{
    free(p->table), free(p->pool);
}

/* lk_attention_paged on device d for `rows` rows (seq, pos, q given), out
 * to host y, which also gives the output's initial contents. */
static lk_status paged_run(test_devices *t, int d, const world *w, const paged *p,
                           const int32_t *seq, const int32_t *pos, const float *q, int64_t rows,
                           float *y, int64_t page_size)
{
    dbuf bq, bpool, bt, bs, bp, by;
    memset(&bq, 0, sizeof bq), bpool = bt = bs = bp = by = bq;
    lk_status st = LK_ERR_OUT_OF_MEMORY;
    lk_device *dv = t->dev[d];
    lk_queue *qq = t->q[d];
    const int64_t prow = p->npages * p->ps;
    if (dbuf_up(dv, qq, &bq, q, (size_t)(rows * w->qc) * 4) &&
        dbuf_up(dv, qq, &bpool, p->pool, (size_t)(prow * 2 * w->kvd) * 4) &&
        dbuf_up(dv, qq, &bt, p->table, (size_t)(w->S * p->maxp) * 4) &&
        dbuf_up(dv, qq, &bs, seq, (size_t)rows * 4) && dbuf_up(dv, qq, &bp, pos, (size_t)rows * 4) &&
        dbuf_up(dv, qq, &by, y, (size_t)(rows * w->qc) * 4)) {
        lk_tensor tq = lk_mat(bq.p, LK_F32, rows, w->qc);
        lk_tensor tk = lk_mat(bpool.p, LK_F32, prow, w->kvd);
        lk_tensor tv = lk_mat((float *)bpool.p + w->kvd, LK_F32, prow, w->kvd);
        tk.ld = tv.ld = 2 * w->kvd;
        lk_tensor tt = lk_mat(bt.p, LK_I32, w->S, p->maxp), ts = lk_mat(bs.p, LK_I32, rows, 1),
                  tp = lk_mat(bp.p, LK_I32, rows, 1), ty = lk_mat(by.p, LK_F32, rows, w->qc);
        st = lk_attention_paged(qq, &tq, &tk, &tv, &tt, &ts, &tp, page_size, w->nh, w->nkv,
                                w->scale, &ty);
        if (!dbuf_down(qq, y, &by) && st == LK_OK)
            st = LK_ERR_DRIVER;
    }
    dbuf_free(dv, &bq), dbuf_free(dv, &bpool), dbuf_free(dv, &bt), dbuf_free(dv, &bs),
        dbuf_free(dv, &bp), dbuf_free(dv, &by);
    return st;
}

/* A world of S sequences with the given lengths (NULL: random in [1, lmax]). */
static int world_make(world *w, int64_t S, const int64_t *lens, int64_t lmax, int64_t nh,
                      int64_t nkv, int64_t hd)
{
    memset(w, 0, sizeof *w);
    w->S = S, w->nh = nh, w->nkv = nkv, w->hd = hd;
    w->qc = nh * hd, w->kvd = nkv * hd;
    w->scale = 1.0f / sqrtf((float)hd);
    w->len = malloc((size_t)S * sizeof *w->len);
    w->off = malloc((size_t)S * sizeof *w->off);
    if (!w->len || !w->off)
        return 0;
    w->total = 0;
    for (int64_t s = 0; s < S; s++) {
        w->len[s] = lens && s < 8 && lens[s] > 0 ? lens[s]
                                                 : 1 + (int64_t)(tap_rand(&rng) % (uint64_t)lmax);
        w->off[s] = w->total;
        w->total += w->len[s];
    }
    w->k = malloc((size_t)(w->total * w->kvd) * 4);
    w->v = malloc((size_t)(w->total * w->kvd) * 4);
    w->q = malloc((size_t)(w->total * w->qc) * 4);
    w->want = malloc((size_t)(w->total * w->qc) * 4);
    if (!w->k || !w->v || !w->q || !w->want)
        return 0;
    for (int64_t i = 0; i < w->total * w->kvd; i++)
        w->k[i] = unitf() * 2.0f, w->v[i] = unitf();
    for (int64_t i = 0; i < w->total * w->qc; i++)
        w->q[i] = unitf() * 2.0f;
    return 1;
}

/* Sequence 1 shares sequence 0's first keys (whole pages of any page size
 * used: share_keys a multiple of 64 * 3). */
static void world_share(world *w, int64_t keys)
{
    if (w->S < 2 || w->len[0] < keys || w->len[1] < keys)
        return;
    w->share = 1;
    w->share_keys = keys;
    memcpy(w->k + w->off[1] * w->kvd, w->k + w->off[0] * w->kvd, (size_t)(keys * w->kvd) * 4);
    memcpy(w->v + w->off[1] * w->kvd, w->v + w->off[0] * w->kvd, (size_t)(keys * w->kvd) * 4);
}

/* The reference's outputs: lk_attention per sequence, one-shot prefill. */
static int world_want(test_devices *t, world *w, int ref)
{
    for (int64_t s = 0; s < w->S; s++) {
        int32_t *pos = malloc((size_t)w->len[s] * 4);
        for (int64_t j = 0; j < w->len[s]; j++)
            pos[j] = (int32_t)j;
        lk_status st = contig(t, ref, w, s, pos, w->q + w->off[s] * w->qc, w->len[s],
                              w->want + w->off[s] * w->qc);
        free(pos);
        if (st != LK_OK) {
            diag("ref lk_attention: %s", lk_last_error());
            return 0;
        }
    }
    return 1;
}

static int same_rows(const float *a, const float *b, int64_t rows, int64_t qc)
{
    return memcmp(a, b, (size_t)(rows * qc) * 4) == 0;
}

/* ------------------------------------------------------------- lk_attention */

/* Context lengths around chunk boundaries, with the edge rules: rows of a
 * sequence with a NaN key, with a chunk of -Inf scores and a -Inf score in
 * a finite chunk, and negative positions; every device against ref. */
static void test_contiguous(test_devices *t, int ref)
{
    const int64_t lens[8] = {1, C - 1, C, C + 1, 3 * C + 5, 2 * C, 5 * C + 17, 130};
    world w;
    if (!world_make(&w, 8, lens, 0, 4, 2, 32))
        bail("out of memory");
    /* sequence 5: a NaN in key 70's kv head 1 (rows >= 70 of heads 2, 3
     * NaN); sequence 4: keys 64 .. 127 of kv head 0 -Inf at column 0 with q
     * > 0 there (chunk 1 of heads 0, 1 skipped), key 5 too (e = +0) */
    w.k[(w.off[5] + 70) * w.kvd + w.hd + 3] = NAN;
    for (int64_t j = 64; j < 128; j++)
        w.k[(w.off[4] + j) * w.kvd] = -INFINITY;
    w.k[(w.off[4] + 5) * w.kvd] = -INFINITY;
    for (int64_t j = 0; j < w.len[4]; j++)
        for (int64_t h = 0; h < 2; h++)
            w.q[(w.off[4] + j) * w.qc + h * w.hd] = 1.0f;
    if (!world_want(t, &w, ref))
        bail("the reference failed");
    /* the edge rules on ref itself */
    int nan_ok = 1, inf_ok = 1;
    for (int64_t j = 0; j < w.len[5]; j++)
        for (int64_t c = 0; c < w.qc; c++) {
            const float y = w.want[(w.off[5] + j) * w.qc + c];
            nan_ok &= (j >= 70 && c >= 2 * w.hd) ? isnan(y) : !isnan(y);
        }
    for (int64_t j = 0; j < w.len[4]; j++)
        for (int64_t c = 0; c < w.qc; c++)
            inf_ok &= isfinite(w.want[(w.off[4] + j) * w.qc + c]);
    ok(nan_ok, "ref: a NaN key makes its kv head's rows NaN from its position on, only those");
    ok(inf_ok, "ref: a chunk of -Inf scores and a -Inf score in a chunk leave finite rows");
    /* negative positions: +0 rows */
    int32_t negpos[3] = {-1, -5, 2};
    float *yneg = malloc((size_t)(3 * w.qc) * 4);
    int zero_ok = contig(t, ref, &w, 7, negpos, w.q, 3, yneg) == LK_OK;
    for (int64_t c = 0; zero_ok && c < 2 * w.qc; c++)
        zero_ok &= yneg[c] == 0.0f && !signbit(yneg[c]);
    ok(zero_ok, "ref: negative positions give +0 rows");

    float *y = malloc((size_t)(w.total * w.qc) * 4), *y2 = malloc((size_t)(3 * w.qc) * 4);
    for (int d = 0; d < t->n; d++) {
        const char *name = lk_device_name(t->dev[d]);
        int bad = 0, unsup = 0;
        for (int64_t s = 0; s < w.S && !bad; s++) {
            int32_t *pos = malloc((size_t)w.len[s] * 4);
            for (int64_t j = 0; j < w.len[s]; j++)
                pos[j] = (int32_t)j;
            lk_status st = contig(t, d, &w, s, pos, w.q + w.off[s] * w.qc, w.len[s],
                                  y + w.off[s] * w.qc);
            free(pos);
            if (st == LK_ERR_UNSUPPORTED)
                unsup = 1;
            else if (st != LK_OK || !same_rows(y + w.off[s] * w.qc, w.want + w.off[s] * w.qc,
                                               w.len[s], w.qc)) {
                diag("%s: sequence %lld (%lld keys): %s", name, (long long)s,
                     (long long)w.len[s], st != LK_OK ? lk_last_error() : "bits differ");
                bad = 1;
            }
        }
        if (unsup) {
            skip(2, "%s: lk_attention unsupported", name);
            continue;
        }
        ok(!bad, "%s: lk_attention = ref at 1, 63, 64, 65, 197, 128, 337, 130 keys, NaN and -Inf "
           "keys", name);
        lk_status st = contig(t, d, &w, 7, negpos, w.q, 3, y2);
        ok(st == LK_OK && memcmp(y2, yneg, (size_t)(3 * w.qc) * 4) == 0,
           "%s: negative positions as ref", name);
    }
    free(y), free(y2), free(yneg);
    world_free(&w);
}

/* ------------------------------------------------------------------ paged */

/* Rows of sequences `ss` at positions [p0, p1) each, in one call; the
 * outputs scattered back into the flat layout of y. */
static lk_status paged_rows(test_devices *t, int d, const world *w, const paged *p,
                            const int64_t *ss, int64_t ns, int64_t p0, int64_t p1, float *y,
                            int shuffle)
{
    int64_t rows = 0;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t e = p1 < w->len[ss[i]] ? p1 : w->len[ss[i]];
        rows += e > p0 ? e - p0 : 0;
    }
    if (rows == 0)
        return LK_OK;
    int32_t *seq = malloc((size_t)rows * 4), *pos = malloc((size_t)rows * 4);
    int64_t *flat = malloc((size_t)rows * sizeof *flat);
    float *q = malloc((size_t)(rows * w->qc) * 4), *yo = malloc((size_t)(rows * w->qc) * 4);
    int64_t r = 0;
    for (int64_t i = 0; i < ns; i++) {
        const int64_t s = ss[i], e = p1 < w->len[s] ? p1 : w->len[s];
        for (int64_t j = p0; j < e; j++, r++)
            seq[r] = (int32_t)s, pos[r] = (int32_t)j, flat[r] = w->off[s] + j;
    }
    for (int64_t i = rows - 1; shuffle && i > 0; i--) {
        int64_t j = (int64_t)(tap_rand(&rng) % (uint64_t)(i + 1));
        int32_t a = seq[i], b = pos[i];
        int64_t f = flat[i];
        seq[i] = seq[j], pos[i] = pos[j], flat[i] = flat[j];
        seq[j] = a, pos[j] = b, flat[j] = f;
    }
    for (r = 0; r < rows; r++)
        memcpy(q + r * w->qc, w->q + flat[r] * w->qc, (size_t)w->qc * 4);
    lk_status st = paged_run(t, d, w, p, seq, pos, q, rows, yo, p->ps);
    for (r = 0; st == LK_OK && r < rows; r++)
        memcpy(y + flat[r] * w->qc, yo + r * w->qc, (size_t)w->qc * 4);
    free(seq), free(pos), free(flat), free(q), free(yo);
    return st;
}

static void test_paged(test_devices *t, int ref, int64_t S, int64_t lmax)
{
    const int64_t lens[8] = {5 * C + 17, 3 * C + 5, C, C + 1, 1, C - 1, 2 * C, 4 * C};
    world w;
    if (!world_make(&w, S, lens, lmax, 4, 2, 32))
        bail("out of memory");
    world_share(&w, 3 * C); /* whole pages of 16, 64 and 48 keys */
    if (!world_want(t, &w, ref))
        bail("the reference failed");
    paged p16, p48, p1;
    if (!paged_make(&w, 16, &p16) || !paged_make(&w, 48, &p48) || !paged_make(&w, 1, &p1))
        bail("out of memory");
    float *y = malloc((size_t)(w.total * w.qc) * 4);
    int64_t *all = malloc((size_t)S * sizeof *all);
    for (int64_t s = 0; s < S; s++)
        all[s] = s;
    const int64_t few[4] = {0, 1, 2, 3};
    for (int d = 0; d < t->n; d++) {
        const char *name = lk_device_name(t->dev[d]);
        /* the ragged batch: every row of every sequence, shuffled, one call */
        memset(y, 0, (size_t)(w.total * w.qc) * 4);
        lk_status st = paged_rows(t, d, &w, &p16, all, S, 0, INT32_MAX, y, 1);
        if (st == LK_ERR_UNSUPPORTED) {
            skip(5, "%s: lk_attention_paged unsupported: %s", name, lk_last_error());
            continue;
        }
        ok(st == LK_OK && same_rows(y, w.want, w.total, w.qc),
           "%s: a ragged batch of %lld sequences (%lld rows, shuffled, prefix pages shared) "
           "= lk_attention on ref", name, (long long)S, (long long)w.total);
        if (st != LK_OK)
            diag("%s", lk_last_error());
        /* chunked prefill at several sizes, sequences 0 .. 3 together */
        const int64_t sizes[4] = {7, C, 100, 3 * C + 1};
        int bad = 0;
        for (int i = 0; i < 4 && !bad; i++) {
            memset(y, 0, (size_t)(w.total * w.qc) * 4);
            for (int64_t p0 = 0; p0 < 6 * C && !bad; p0 += sizes[i])
                bad |= paged_rows(t, d, &w, &p16, few, 4, p0, p0 + sizes[i], y, 0) != LK_OK;
            bad |= !same_rows(y, w.want, w.off[4], w.qc);
        }
        ok(!bad, "%s: prefill in calls of 7, 64, 100 and 193 rows = one-shot", name);
        /* decode: one row per sequence a call, the last 70 positions */
        memset(y, 0, (size_t)(w.total * w.qc) * 4);
        bad = 0;
        for (int64_t j = 0; j < 6 * C && !bad; j++)
            if (j + 70 >= 5 * C + 17 || j < 3)
                bad |= paged_rows(t, d, &w, &p16, few, 4, j, j + 1, y, 0) != LK_OK;
        for (int64_t s = 0; s < 4; s++)
            for (int64_t j = 0; j < w.len[s]; j++)
                if (j + 70 >= 5 * C + 17 || j < 3)
                    bad |= !same_rows(y + (w.off[s] + j) * w.qc, w.want + (w.off[s] + j) * w.qc,
                                      1, w.qc);
        ok(!bad, "%s: decode rows = prefill rows", name);
        /* page sizes 48 and 1 give the same bits */
        memset(y, 0, (size_t)(w.total * w.qc) * 4);
        st = paged_rows(t, d, &w, &p48, few, 4, 0, INT32_MAX, y, 0);
        int same = st == LK_OK && same_rows(y, w.want, w.off[4], w.qc);
        memset(y, 0, (size_t)(w.total * w.qc) * 4);
        st = paged_rows(t, d, &w, &p1, few, 2, 0, INT32_MAX, y, 0);
        same &= st == LK_OK && same_rows(y, w.want, w.off[2], w.qc);
        ok(same, "%s: page sizes 16, 48 and 1 give the same bits", name);
        /* sequence 1's rows read sequence 0's shared pages */
        ok(w.share && p16.table[p16.maxp] == p16.table[0],
           "sequence 1 shares its first pages with sequence 0 (checked above)");
    }
    free(y), free(all);
    paged_free(&p16), paged_free(&p48), paged_free(&p1);
    world_free(&w);
}

/* lk_kv_write_paged: every key of sequences 2 .. 5 written through the op
 * into a pool of NaN, k and v column slices of one tensor; then the pool's
 * bytes are those of paged_make's. */
static void test_kv_write(test_devices *t)
{
    const int64_t lens[8] = {2 * C, 2 * C, 3 * C + 5, C + 1, 1, 40};
    world w;
    if (!world_make(&w, 6, lens, 0, 4, 2, 32))
        bail("out of memory");
    world_share(&w, 2 * C);
    paged p;
    if (!paged_make(&w, 16, &p))
        bail("out of memory");
    const int64_t prow = p.npages * p.ps, pc = 2 * w.kvd;
    float *init = malloc((size_t)(prow * pc) * 4), *got = malloc((size_t)(prow * pc) * 4);
    for (int64_t i = 0; i < prow * pc; i++)
        init[i] = NAN;
    int64_t rows = 0;
    for (int64_t s = 2; s < 6; s++)
        rows += w.len[s];
    int32_t *seq = malloc((size_t)rows * 4), *pos = malloc((size_t)rows * 4);
    float *kn = malloc((size_t)(rows * w.kvd) * 4), *vn = malloc((size_t)(rows * w.kvd) * 4);
    int64_t r = 0;
    for (int64_t s = 2; s < 6; s++)
        for (int64_t j = 0; j < w.len[s]; j++, r++) {
            seq[r] = (int32_t)s, pos[r] = (int32_t)j;
            memcpy(kn + r * w.kvd, w.k + (w.off[s] + j) * w.kvd, (size_t)w.kvd * 4);
            memcpy(vn + r * w.kvd, w.v + (w.off[s] + j) * w.kvd, (size_t)w.kvd * 4);
        }
    /* the rows paged_make put there, for sequences 2 .. 5 */
    float *want = malloc((size_t)(prow * pc) * 4);
    memcpy(want, init, (size_t)(prow * pc) * 4);
    for (int64_t s = 2; s < 6; s++)
        for (int64_t j = 0; j < w.len[s]; j++) {
            const int64_t row = (int64_t)p.table[s * p.maxp + j / p.ps] * p.ps + j % p.ps;
            memcpy(want + row * pc, p.pool + row * pc, (size_t)pc * 4);
        }
    for (int d = 0; d < t->n; d++) {
        const char *name = lk_device_name(t->dev[d]);
        lk_device *dv = t->dev[d];
        lk_queue *qq = t->q[d];
        dbuf bpool, bt, bs, bp, bk, bv;
        memset(&bpool, 0, sizeof bpool), bt = bs = bp = bk = bv = bpool;
        if (!dbuf_up(dv, qq, &bpool, init, (size_t)(prow * pc) * 4) ||
            !dbuf_up(dv, qq, &bt, p.table, (size_t)(w.S * p.maxp) * 4) ||
            !dbuf_up(dv, qq, &bs, seq, (size_t)rows * 4) ||
            !dbuf_up(dv, qq, &bp, pos, (size_t)rows * 4) ||
            !dbuf_up(dv, qq, &bk, kn, (size_t)(rows * w.kvd) * 4) ||
            !dbuf_up(dv, qq, &bv, vn, (size_t)(rows * w.kvd) * 4))
            bail("%s: no memory", name);
        lk_tensor tk = lk_mat(bpool.p, LK_F32, prow, w.kvd);
        lk_tensor tv = lk_mat((float *)bpool.p + w.kvd, LK_F32, prow, w.kvd);
        tk.ld = tv.ld = pc;
        lk_tensor tt = lk_mat(bt.p, LK_I32, w.S, p.maxp), ts = lk_mat(bs.p, LK_I32, rows, 1),
                  tp = lk_mat(bp.p, LK_I32, rows, 1), tkn = lk_mat(bk.p, LK_F32, rows, w.kvd),
                  tvn = lk_mat(bv.p, LK_F32, rows, w.kvd);
        lk_status st = lk_kv_write_paged(qq, &tkn, &tvn, &tk, &tv, &tt, &ts, &tp, 16);
        if (st == LK_ERR_UNSUPPORTED) {
            skip(4, "%s: lk_kv_write_paged unsupported", name);
        } else {
            int down = dbuf_down(qq, got, &bpool);
            ok(st == LK_OK && down && memcmp(got, want, (size_t)(prow * pc) * 4) == 0,
               "%s: lk_kv_write_paged writes exactly the named rows, k and v slices of one "
               "tensor", name);
            if (st != LK_OK)
                diag("%s", lk_last_error());
            /* refused: a write into sequence 1's first page (shared with 0) */
            int32_t s1 = 1, p0 = 5, pbig = (int32_t)(p.maxp * 16), pneg = -1;
            lk_tensor one_s = lk_mat(bs.p, LK_I32, 1, 1), one_p = lk_mat(bp.p, LK_I32, 1, 1);
            lk_tensor one_k = lk_mat(bk.p, LK_F32, 1, w.kvd), one_v = lk_mat(bv.p, LK_F32, 1, w.kvd);
            lk_status e[3];
            const int32_t *pp[3] = {&p0, &pbig, &pneg};
            for (int i = 0; i < 3; i++) {
                lk_memcpy(qq, bs.p, &s1, 4, LK_COPY_HOST_TO_DEVICE);
                lk_memcpy(qq, bp.p, pp[i], 4, LK_COPY_HOST_TO_DEVICE);
                e[i] = lk_kv_write_paged(qq, &one_k, &one_v, &tk, &tv, &tt, &one_s, &one_p, 16);
            }
            down = dbuf_down(qq, got, &bpool);
            ok(e[0] == LK_ERR_RANGE, "%s: a write into a shared page: LK_ERR_RANGE", name);
            ok(e[1] == LK_ERR_RANGE && e[2] == LK_ERR_RANGE,
               "%s: a write beyond the table or at a negative position: LK_ERR_RANGE", name);
            ok(down && memcmp(got, want, (size_t)(prow * pc) * 4) == 0,
               "%s: the refused writes left the pool untouched", name);
        }
        dbuf_free(dv, &bpool), dbuf_free(dv, &bt), dbuf_free(dv, &bs), dbuf_free(dv, &bp),
            dbuf_free(dv, &bk), dbuf_free(dv, &bv);
    }
    free(init), free(got), free(want), free(seq), free(pos), free(kn), free(vn);
    paged_free(&p);
    world_free(&w);
}

/* Bad tables, sequences, positions, page sizes: refused, out untouched. */
static void test_paged_errors(test_devices *t)
{
    const int64_t lens[8] = {C + 3, 20};
    world w;
    if (!world_make(&w, 2, lens, 0, 2, 1, 16))
        bail("out of memory");
    paged p;
    if (!paged_make(&w, 16, &p))
        bail("out of memory");
    float *y = malloc((size_t)(2 * w.qc) * 4), *y0 = malloc((size_t)(2 * w.qc) * 4);
    for (int64_t i = 0; i < 2 * w.qc; i++)
        y0[i] = 42.0f;
    for (int d = 0; d < t->n; d++) {
        const char *name = lk_device_name(t->dev[d]);
        struct {
            int32_t seq[2], pos[2];
            int64_t ps;
            int bad_page;
            lk_status want;
            const char *what;
        } c[5] = {
            {{0, 1}, {C + 2, 19}, 16, 1, LK_ERR_RANGE, "a page id outside the pool"},
            {{0, 2}, {C + 2, 19}, 16, 0, LK_ERR_RANGE, "a sequence outside the table"},
            {{0, 1}, {C + 2, (int32_t)(p.maxp * 16)}, 16, 0, LK_ERR_RANGE,
             "a position beyond the table's pages"},
            {{0, 1}, {C + 2, 19}, 0, 0, LK_ERR_INVALID_ARGUMENT, "page_size 0"},
            {{0, -1}, {C + 2, 19}, 16, 0, LK_ERR_RANGE, "a negative sequence"},
        };
        for (int i = 0; i < 5; i++) {
            int32_t keep = p.table[1];
            if (c[i].bad_page)
                p.table[1] = (int32_t)p.npages; /* sequence 0's page 1 */
            memcpy(y, y0, (size_t)(2 * w.qc) * 4);
            lk_status st = paged_run(t, d, &w, &p, c[i].seq, c[i].pos, w.q, 2, y, c[i].ps);
            p.table[1] = keep;
            if (st == LK_ERR_UNSUPPORTED && i == 0) {
                skip(5, "%s: lk_attention_paged unsupported", name);
                break;
            }
            ok(st == c[i].want && memcmp(y, y0, (size_t)(2 * w.qc) * 4) == 0,
               "%s: %s: %s, out untouched", name, c[i].what, lk_status_string(c[i].want));
        }
    }
    free(y), free(y0);
    paged_free(&p);
    world_free(&w);
}

/* ------------------------------------------------------- full shapes (GPU) */

/* BitNet-2B-4T's attention (20 heads, 5 KV heads, 128 dims) at 4096 and
 * 32768 keys: decode rows near chunk ends, contiguous and paged, against
 * the reference. */
static void test_full(test_devices *t, int ref, int d)
{
    const char *name = lk_device_name(t->dev[d]);
    const int64_t L[2] = {4096, 32768};
    for (int i = 0; i < 2; i++) {
        world w;
        const int64_t lens[8] = {L[i], 2 * C};
        if (!world_make(&w, 2, lens, 0, 20, 5, 128))
            bail("out of memory");
        paged p;
        if (!paged_make(&w, 16, &p))
            bail("out of memory");
        const int32_t pos[4] = {(int32_t)L[i] - 1, (int32_t)L[i] / 2 + 63, 64, 4095};
        const int32_t seq[4] = {0, 0, 0, 0};
        float *q = malloc((size_t)(4 * w.qc) * 4);
        for (int r = 0; r < 4; r++)
            memcpy(q + r * w.qc, w.q + (int64_t)pos[r] * w.qc, (size_t)w.qc * 4);
        float *yr = malloc((size_t)(4 * w.qc) * 4), *yc = malloc((size_t)(4 * w.qc) * 4),
              *yp = malloc((size_t)(4 * w.qc) * 4);
        lk_status sr = contig(t, ref, &w, 0, pos, q, 4, yr);
        lk_status sc = contig(t, d, &w, 0, pos, q, 4, yc);
        memset(yp, 0, (size_t)(4 * w.qc) * 4);
        lk_status sp = paged_run(t, d, &w, &p, seq, pos, q, 4, yp, 16);
        ok(sr == LK_OK && sc == LK_OK && memcmp(yr, yc, (size_t)(4 * w.qc) * 4) == 0,
           "%s: lk_attention at %lld keys, 20/5 heads of 128 = ref", name, (long long)L[i]);
        ok(sp == LK_OK && memcmp(yr, yp, (size_t)(4 * w.qc) * 4) == 0,
           "%s: lk_attention_paged at %lld keys (pages of 16) = ref", name, (long long)L[i]);
        free(q), free(yr), free(yc), free(yp);
        paged_free(&p);
        world_free(&w);
    }
}

/* A prefill at BitNet-2B-4T's shapes: 333 and 200 rows, contiguous (tiles
 * of rows that share their keys) and paged in pages of 48 (in row order:
 * tiles cut where the sequence changes; shuffled: rows of different
 * sequences side by side), against the reference. */
static void test_full_prefill(test_devices *t, int ref, int d)
{
    const char *name = lk_device_name(t->dev[d]);
    const int64_t lens[8] = {333, 200}, ss[2] = {0, 1};
    world w;
    if (!world_make(&w, 2, lens, 0, 20, 5, 128))
        bail("out of memory");
    if (!world_want(t, &w, ref))
        bail("the reference failed");
    float *y = malloc((size_t)(w.total * w.qc) * 4);
    int32_t *pos = malloc((size_t)w.len[0] * 4);
    if (!y || !pos)
        bail("out of memory");
    for (int64_t j = 0; j < w.len[0]; j++)
        pos[j] = (int32_t)j;
    lk_status st = contig(t, d, &w, 0, pos, w.q, w.len[0], y);
    ok(st == LK_OK && same_rows(y, w.want, w.len[0], w.qc),
       "%s: lk_attention prefill of 333 rows, 20/5 heads of 128 = ref", name);
    paged p;
    if (!paged_make(&w, 48, &p))
        bail("out of memory");
    for (int sh = 0; sh < 2; sh++) {
        memset(y, 0, (size_t)(w.total * w.qc) * 4);
        st = paged_rows(t, d, &w, &p, ss, 2, 0, 333, y, sh);
        ok(st == LK_OK && same_rows(y, w.want, w.total, w.qc),
           "%s: lk_attention_paged prefill of 333 + 200 rows (pages of 48%s) = ref", name,
           sh ? ", rows shuffled" : "");
    }
    paged_free(&p);
    free(y), free(pos);
    world_free(&w);
}

/* Every test that runs a device's attention kernels. */
static void test_devices_all(test_devices *t, int ref)
{
    test_contiguous(t, ref);
    test_paged(t, ref, 64, 80);
    const char *small = getenv("LOCKSTEP_CUDA_TEST_SMALL");
    for (int d = 0; d < t->n; d++) {
        lk_device_props pr;
        if (lk_device_props_get(t->dev[d], &pr) != LK_OK || pr.host_memory)
            continue;
        if (small && *small)
            skip(7, "%s: full shapes (LOCKSTEP_CUDA_TEST_SMALL is set)", pr.name);
        else {
            test_full(t, ref, d);
            test_full_prefill(t, ref, d);
        }
    }
}

int main(void)
{
    rng = tap_seed();
    test_devices t;
    test_devices_open(&t);
    int ref = -1;
    for (int d = 0; d < t.n; d++)
        if (t.q[d] == t.ref_q)
            ref = d;
    test_devices_all(&t, ref);
    test_kv_write(&t);
    test_paged_errors(&t);
    /* a GPU has two attention kernels: unless one is chosen, the first
     * (LOCKSTEP_CUDA_ATTENTION_V1=1) is tested too */
    int gpu = 0;
    for (int d = 0; d < t.n; d++) {
        lk_device_props pr;
        gpu |= lk_device_props_get(t.dev[d], &pr) == LK_OK && !pr.host_memory;
    }
    if (gpu && !getenv("LOCKSTEP_CUDA_ATTENTION_V1")) {
        diag("again with LOCKSTEP_CUDA_ATTENTION_V1=1");
        setenv("LOCKSTEP_CUDA_ATTENTION_V1", "1", 1);
        test_devices_all(&t, ref);
        unsetenv("LOCKSTEP_CUDA_ATTENTION_V1");
    }
    test_devices_close(&t);
    return done_testing();
}
