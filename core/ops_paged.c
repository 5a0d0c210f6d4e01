/* Lockstep core: the paged KV cache -- lk_attention_paged and
 * lk_kv_write_paged (include/lockstep/ops.h, docs/numerics.md section
 * 12.3.1).  The block table, seq and pos are read on the host before any
 * kernel runs, so a bad page id, sequence or position is refused with
 * nothing written; that is also why the two ops cannot be captured. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/validate.h"
#include "numerics/fpenv.h"

#define PAGED_MAX_KEYS ((int64_t)1 << 24) /* lk_attention's cache_len limit */

/* The driver's paged kernels, NULL where its lk_device_iface ends before
 * them (driver.h: optional members). */
static int has_member(const lk_device *d, size_t off)
{
    return d->iface->struct_size >= off + sizeof(void (*)(void));
}

#define PAGED_SLOT(d, m)                                                                \
    (has_member((d), offsetof(lk_device_iface, m)) ? (d)->iface->m : NULL)

typedef struct paged_host {
    const int32_t *table, *seq, *pos;
    int32_t *own[3];
} paged_host;

static void paged_host_free(paged_host *p)
{
    for (int i = 0; i < 3; i++)
        free(p->own[i]);
}

static lk_status paged_read(const char *fn, lk_queue *q, const lk_tensor *table,
                            const lk_tensor *seq, const lk_tensor *pos, paged_host *p)
{
    memset(p, 0, sizeof *p);
    lk_status st = lk_i32_host(fn, "block_table", q, table, &p->table, &p->own[0]);
    if (st == LK_OK)
        st = lk_i32_host(fn, "seq", q, seq, &p->seq, &p->own[1]);
    if (st == LK_OK)
        st = lk_i32_host(fn, "pos", q, pos, &p->pos, &p->own[2]);
    if (st != LK_OK)
        paged_host_free(p);
    return st;
}

/* Row r's sequence in the table, and (need_pos: a position >= 0 required)
 * every page it reads or writes in [0, n_pages). */
static lk_status paged_row(const char *fn, const paged_host *p, const lk_tensor *table,
                           const lk_tensor *seq, const lk_tensor *pos, int64_t r,
                           int64_t page_size, int64_t n_pages, int write)
{
    const int64_t s = p->seq[r * seq->ld], j = p->pos[r * pos->ld];
    if (s < 0 || s >= table->rows)
        return lk_error(LK_ERR_RANGE, "%s: seq[%lld] = %lld is outside the block table's %lld "
                        "sequences", fn, (long long)r, (long long)s, (long long)table->rows);
    if (j < 0) {
        if (!write)
            return LK_OK; /* no keys */
        return lk_error(LK_ERR_RANGE, "%s: pos[%lld] = %lld is negative", fn, (long long)r,
                        (long long)j);
    }
    if (j >= PAGED_MAX_KEYS)
        return lk_error(LK_ERR_RANGE, "%s: pos[%lld] = %lld: more than 2^24 keys", fn,
                        (long long)r, (long long)j);
    const int64_t np = j / page_size + 1;
    if (np > table->cols)
        return lk_error(LK_ERR_RANGE, "%s: pos[%lld] = %lld is beyond the %lld pages of "
                        "sequence %lld's table (page_size %lld)", fn, (long long)r,
                        (long long)j, (long long)table->cols, (long long)s,
                        (long long)page_size);
    for (int64_t i = write ? np - 1 : 0; i < np; i++) {
        const int64_t pg = p->table[s * table->ld + i];
        if (pg < 0 || pg >= n_pages)
            return lk_error(LK_ERR_RANGE, "%s: block_table[%lld][%lld] = %lld is outside the "
                            "pool's %lld pages", fn, (long long)s, (long long)i, (long long)pg,
                            (long long)n_pages);
    }
    return LK_OK;
}

static lk_status paged_common(lk_validator *v, int64_t page_size, const lk_tensor *table,
                              lk_tensor *at, const lk_tensor *seq, lk_tensor *as,
                              const lk_tensor *pos, lk_tensor *ap, int64_t rows)
{
    if (page_size < 1)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: page_size (%lld) must be >= 1", v->fn,
                        (long long)page_size);
    LK_V_TRY(lk_v_tensor(v, "block_table", table, at, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(v, "seq", seq, as, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(v, "seq", as, rows, "rows", 1, NULL));
    LK_V_TRY(lk_v_tensor(v, "pos", pos, ap, LK_DT(LK_I32), LK_V_IN, 1));
    return lk_v_dims(v, "pos", ap, rows, "rows", 1, NULL);
}

static lk_status paged_capture_check(lk_validator *v)
{
    if (v->q->cap != NULL || lk_capture_on_device(v->q))
        return lk_error(LK_ERR_UNSUPPORTED, "%s: cannot be captured in a graph (the block "
                        "table is checked on the host)", v->fn);
    return LK_OK;
}

LK_API lk_status lk_attention_paged(lk_queue *q, const lk_tensor *qry, const lk_tensor *k_pool,
                                    const lk_tensor *v_pool, const lk_tensor *block_table,
                                    const lk_tensor *seq, const lk_tensor *pos,
                                    int64_t page_size, int64_t n_head, int64_t n_kv,
                                    float scale, const lk_tensor *out)
{
    lk_validator v;
    lk_attention_paged_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_attention_paged", q));
    if (n_head < 1 || n_kv < 1)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_attention_paged: n_head (%lld) and n_kv (%lld) must be >= 1",
                        (long long)n_head, (long long)n_kv);
    if (n_head % n_kv != 0)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_attention_paged: n_head (%lld) is not a multiple of n_kv (%lld)",
                        (long long)n_head, (long long)n_kv);
    LK_V_TRY(lk_v_tensor(&v, "qry", qry, &a.q, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "k_pool", k_pool, &a.k, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "v_pool", v_pool, &a.v, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(paged_common(&v, page_size, block_table, &a.table, seq, &a.seq, pos, &a.pos,
                          a.q.rows));
    LK_V_TRY(lk_v_tensor(&v, "out", out, &a.y, LK_DT_FLOAT, LK_V_OUT, 1));
    if (a.q.cols % n_head != 0 || a.q.cols == 0)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_attention_paged: qry cols (%lld) is not a positive multiple of "
                        "n_head (%lld)",
                        (long long)a.q.cols, (long long)n_head);
    const int64_t hd = a.q.cols / n_head, kvc = hd * n_kv;
    LK_V_TRY(lk_v_dims(&v, "k_pool", &a.k, -1, NULL, kvc, "n_kv * head_dim"));
    LK_V_TRY(lk_v_dims(&v, "v_pool", &a.v, a.k.rows, "k_pool rows", kvc, "n_kv * head_dim"));
    LK_V_TRY(lk_v_dims(&v, "out", &a.y, a.q.rows, "qry rows", a.q.cols, "qry cols"));
    LK_V_TRY(lk_v_finish(&v));
    LK_V_TRY(paged_capture_check(&v));
    a.rows = a.q.rows;
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.head_dim = hd;
    a.page_size = page_size;
    a.n_pages = a.k.rows / page_size;
    a.scale = scale;
    lk_status (*fn)(void *, const lk_attention_paged_args *) = PAGED_SLOT(v.dev, attention_paged);
    LK_V_TRY(lk_v_supported(&v, LK_OP_ATTENTION_PAGED, "attention_paged", fn != NULL, &a));
    if (a.rows == 0)
        return LK_OK;
    paged_host h;
    LK_V_TRY(paged_read(v.fn, q, &a.table, &a.seq, &a.pos, &h));
    lk_status st = LK_OK;
    for (int64_t r = 0; r < a.rows && st == LK_OK; r++) {
        st = paged_row(v.fn, &h, &a.table, &a.seq, &a.pos, r, page_size, a.n_pages, 0);
        const int64_t keys = (int64_t)h.pos[r * a.pos.ld] + 1;
        a.max_keys = keys > a.max_keys ? keys : a.max_keys;
    }
    paged_host_free(&h);
    if (st != LK_OK)
        return st;
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    st = fn(q->state, &a);
    lk_fpenv_leave(&fe);
    return lk_v_result(&v, st);
}

/* k and v may be column slices of one tensor (the BitNet kv layout): the
 * validator refuses two outputs whose byte ranges meet, so each pool is
 * checked against the inputs on its own and the two against each other
 * here, exactly: disjoint columns of rows the same ld apart. */
static lk_status pools_disjoint(const char *fn, const lk_tensor *k, const lk_tensor *v)
{
    const size_t es = lk_dtype_size(k->dtype);
    const uintptr_t k0 = (uintptr_t)k->data, v0 = (uintptr_t)v->data;
    const uintptr_t kh = k0 + ((k->rows - 1) * k->ld + k->cols) * es;
    const uintptr_t vh = v0 + ((v->rows - 1) * v->ld + v->cols) * es;
    if (k->rows == 0 || k->cols == 0 || !(k0 < vh && v0 < kh))
        return LK_OK;
    const uintptr_t d = k0 < v0 ? v0 - k0 : k0 - v0;
    if (k->ld == v->ld && d % es == 0) {
        const uint64_t rem = (uint64_t)(d / es) % (uint64_t)k->ld;
        if (rem >= (uint64_t)k->cols && rem + (uint64_t)k->cols <= (uint64_t)k->ld)
            return LK_OK;
    }
    return lk_error(LK_ERR_ALIASING, "%s: k_pool overlaps v_pool", fn);
}

LK_API lk_status lk_kv_write_paged(lk_queue *q, const lk_tensor *k_new, const lk_tensor *v_new,
                                   const lk_tensor *k_pool, const lk_tensor *v_pool,
                                   const lk_tensor *block_table, const lk_tensor *seq,
                                   const lk_tensor *pos, int64_t page_size)
{
    lk_validator v, w;
    lk_kv_write_paged_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_kv_write_paged", q));
    for (int pass = 0; pass < 2; pass++) {
        lk_validator *x = pass ? &w : &v;
        if (pass)
            LK_V_TRY(lk_v_begin(&w, "lk_kv_write_paged", q));
        LK_V_TRY(lk_v_tensor(x, "k_new", k_new, &a.k_new, LK_DT_FLOAT, LK_V_IN, 1));
        LK_V_TRY(lk_v_tensor(x, "v_new", v_new, &a.v_new, LK_DT_FLOAT, LK_V_IN, 1));
        LK_V_TRY(paged_common(x, page_size, block_table, &a.table, seq, &a.seq, pos, &a.pos,
                              a.k_new.rows));
        if (pass)
            LK_V_TRY(lk_v_tensor(x, "v_pool", v_pool, &a.v, LK_DT_FLOAT, LK_V_OUT, 1));
        else
            LK_V_TRY(lk_v_tensor(x, "k_pool", k_pool, &a.k, LK_DT_FLOAT, LK_V_OUT, 1));
    }
    LK_V_TRY(lk_v_dims(&v, "v_new", &a.v_new, a.k_new.rows, "k_new rows", a.k_new.cols,
                       "k_new cols"));
    LK_V_TRY(lk_v_dims(&v, "k_pool", &a.k, -1, NULL, a.k_new.cols, "k_new cols"));
    LK_V_TRY(lk_v_dims(&v, "v_pool", &a.v, a.k.rows, "k_pool rows", a.k_new.cols,
                       "k_new cols"));
    if (a.k_new.dtype != a.k.dtype || a.v_new.dtype != a.k.dtype || a.v.dtype != a.k.dtype)
        return lk_error(LK_ERR_BAD_DTYPE, "lk_kv_write_paged: k_new, v_new and the pools must "
                        "have one dtype (rows are copied bit for bit: convert first)");
    LK_V_TRY(lk_v_finish(&v));
    LK_V_TRY(lk_v_finish(&w));
    LK_V_TRY(pools_disjoint(v.fn, &a.k, &a.v));
    LK_V_TRY(paged_capture_check(&v));
    a.rows = a.k_new.rows;
    a.page_size = page_size;
    a.n_pages = a.k.rows / page_size;
    lk_status (*fn)(void *, const lk_kv_write_paged_args *) = PAGED_SLOT(v.dev, kv_write_paged);
    LK_V_TRY(lk_v_supported(&v, LK_OP_KV_WRITE_PAGED, "kv_write_paged", fn != NULL, &a));
    if (a.rows == 0 || a.k_new.cols == 0)
        return LK_OK;
    paged_host h;
    LK_V_TRY(paged_read(v.fn, q, &a.table, &a.seq, &a.pos, &h));
    lk_status st = LK_OK;
    for (int64_t r = 0; r < a.rows && st == LK_OK; r++)
        st = paged_row(v.fn, &h, &a.table, &a.seq, &a.pos, r, page_size, a.n_pages, 1);
    /* every page written is named once in the whole table */
    uint32_t *count = NULL;
    if (st == LK_OK && ((uint64_t)a.n_pages > SIZE_MAX / sizeof *count ||
                        !(count = calloc((size_t)a.n_pages + 1, sizeof *count))))
        st = lk_error(LK_ERR_OUT_OF_MEMORY, "lk_kv_write_paged: no memory to count %lld pages",
                      (long long)a.n_pages);
    if (st == LK_OK) {
        for (int64_t s = 0; s < a.table.rows; s++)
            for (int64_t i = 0; i < a.table.cols; i++) {
                const int64_t pg = h.table[s * a.table.ld + i];
                if (pg >= 0 && pg < a.n_pages && count[pg] < 2)
                    count[pg]++;
            }
        for (int64_t r = 0; r < a.rows && st == LK_OK; r++) {
            const int64_t s = h.seq[r * a.seq.ld], j = h.pos[r * a.pos.ld];
            const int64_t pg = h.table[s * a.table.ld + j / page_size];
            if (count[pg] > 1)
                st = lk_error(LK_ERR_RANGE, "lk_kv_write_paged: row %lld writes page %lld of "
                              "sequence %lld, which the block table names more than once (a "
                              "shared page is read-only: a page reused while written)",
                              (long long)r, (long long)pg, (long long)s);
        }
    }
    free(count);
    paged_host_free(&h);
    if (st != LK_OK)
        return st;
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    st = fn(q->state, &a);
    lk_fpenv_leave(&fe);
    return lk_v_result(&v, st);
}
