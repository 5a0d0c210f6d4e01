/* Lockstep core: the transformer ops -- RoPE, causal GQA attention over a
 * KV cache, embedding lookup (docs/numerics.md section 12). */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/validate.h"
#include "numerics/fpenv.h"

/* x: the positions of an op, LK_I32 rows x 1. */
static lk_status lk_pos_check(lk_validator *v, const char *name, const lk_tensor *src,
                              lk_tensor *dst, int64_t rows, unsigned flags, int64_t batch)
{
    LK_V_TRY(lk_v_tensor(v, name, src, dst, LK_DT(LK_I32), LK_V_IN | flags, batch));
    return lk_v_dims(v, name, dst, rows, "tokens", 1, NULL);
}

LK_API lk_status lk_rope(lk_queue *q, const lk_tensor *x, const lk_tensor *pos,
                         int64_t head_dim, float theta, unsigned flags, const lk_tensor *y)
{
    lk_validator v;
    lk_rope_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_rope", q));
    if (flags & ~(unsigned)LK_ROPE_INTERLEAVED)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_rope: flags: unknown bits 0x%x",
                        flags & ~(unsigned)LK_ROPE_INTERLEAVED);
    if (!(theta > 0.0f) || isinf(theta))
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_rope: theta (%g) must be finite and > 0",
                        (double)theta);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_pos_check(&v, "pos", pos, &a.pos, a.x.rows, 0, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.y, LK_DT_FLOAT, LK_V_OUT | LK_V_INPLACE, 1));
    LK_V_TRY(lk_v_dims(&v, "y", &a.y, a.x.rows, "x rows", a.x.cols, "x cols"));
    if (head_dim < 2 || head_dim % 2 != 0)
        return lk_error(LK_ERR_BAD_SHAPE, "lk_rope: head_dim (%lld) must be even and >= 2",
                        (long long)head_dim);
    if (head_dim > ((int64_t)1 << 24))
        return lk_error(LK_ERR_RANGE, "lk_rope: head_dim (%lld) > 2^24",
                        (long long)head_dim);
    if (a.x.cols % head_dim != 0)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_rope: x cols (%lld) is not a multiple of head_dim (%lld)",
                        (long long)a.x.cols, (long long)head_dim);
    LK_V_TRY(lk_v_finish(&v));
    a.head_dim = head_dim;
    a.theta = theta;
    a.flags = flags;
    LK_V_RUN(&v, LK_OP_ROPE, rope, a, a.x.rows == 0 || a.x.cols == 0);
}

LK_API lk_status lk_attention(lk_queue *q, const lk_tensor *qry, const lk_tensor *k,
                              const lk_tensor *vc, const lk_tensor *pos, int64_t n_head,
                              int64_t n_kv, float scale, const lk_tensor *out, int64_t batch)
{
    lk_validator v;
    lk_attention_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_attention", q));
    if (batch < 1)
        return lk_error(LK_ERR_BAD_SHAPE, "lk_attention: batch (%lld) < 1", (long long)batch);
    if (n_head < 1 || n_kv < 1)
        return lk_error(LK_ERR_BAD_SHAPE, "lk_attention: n_head (%lld) and n_kv (%lld) must be >= 1",
                        (long long)n_head, (long long)n_kv);
    if (n_head % n_kv != 0)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_attention: n_head (%lld) is not a multiple of n_kv (%lld)",
                        (long long)n_head, (long long)n_kv);
    const unsigned B = LK_V_BATCHED;
    LK_V_TRY(lk_v_tensor(&v, "qry", qry, &a.q, LK_DT_FLOAT, LK_V_IN | B, batch));
    LK_V_TRY(lk_v_tensor(&v, "k", k, &a.k, LK_DT_FLOAT, LK_V_IN | B, batch));
    LK_V_TRY(lk_v_tensor(&v, "v", vc, &a.v, LK_DT_FLOAT, LK_V_IN | B, batch));
    LK_V_TRY(lk_pos_check(&v, "pos", pos, &a.pos, a.q.rows, B, batch));
    LK_V_TRY(lk_v_tensor(&v, "out", out, &a.y, LK_DT_FLOAT, LK_V_OUT | B, batch));
    if (a.q.cols % n_head != 0 || a.q.cols == 0)
        return lk_error(LK_ERR_BAD_SHAPE,
                        "lk_attention: qry cols (%lld) is not a positive multiple of n_head "
                        "(%lld)",
                        (long long)a.q.cols, (long long)n_head);
    int64_t hd = a.q.cols / n_head;
    int64_t kvc = hd * n_kv; /* <= q cols: no overflow */
    LK_V_TRY(lk_v_dims(&v, "k", &a.k, -1, NULL, kvc, "n_kv * head_dim"));
    LK_V_TRY(lk_v_dims(&v, "v", &a.v, a.k.rows, "k rows", kvc, "n_kv * head_dim"));
    LK_V_TRY(lk_v_dims(&v, "out", &a.y, a.q.rows, "qry rows", a.q.cols, "qry cols"));
    if (a.k.rows > ((int64_t)1 << 24))
        return lk_error(LK_ERR_RANGE, "lk_attention: cache_len (%lld) > 2^24",
                        (long long)a.k.rows);
    LK_V_TRY(lk_v_finish(&v));
    a.batch = batch;
    a.tokens = a.q.rows;
    a.n_head = n_head;
    a.n_kv = n_kv;
    a.head_dim = hd;
    a.cache_len = a.k.rows;
    a.scale = scale;
    LK_V_RUN(&v, LK_OP_ATTENTION, attention, a, a.tokens == 0);
}

/* Every id in [0, vocab), read from host memory (a copy on GPUs).  Also
 * what a replayed graph runs before each lk_embedding (core/graph.c). */
lk_status lk_embedding_ids_check(const char *fn, lk_queue *q, const lk_tensor *ids,
                                 int64_t vocab)
{
    return lk_index_check(fn, "ids", q, ids, vocab);
}

/* The elements an LK_I32 tensor spans, on the host: t's own data on
 * host-memory devices, else a copy (*own, to free). */
lk_status lk_i32_host(const char *fn, const char *name, lk_queue *q, const lk_tensor *t,
                          const int32_t **h, int32_t **own)
{
    *h = NULL;
    *own = NULL;
    if (t->rows == 0 || t->cols == 0)
        return LK_OK;
    int64_t n = (t->rows - 1) * t->ld + t->cols; /* the core checked the extent */
    lk_device *dev = q->dev;
    if (dev->props.host_memory) {
        *h = t->data;
        return LK_OK;
    }
    int32_t *copy;
    if ((uint64_t)n > SIZE_MAX / sizeof *copy || !(copy = malloc((size_t)n * sizeof *copy)))
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: no host memory to read %s", fn, name);
    lk_error_clear();
    /* the driver's runtime may touch the FP flags: the caller's
     * environment comes back whole (numerics.md section 2) */
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    lk_status st = dev->iface->memcpy(q->state, copy, t->data, (size_t)n * sizeof *copy,
                                      LK_COPY_DEVICE_TO_HOST);
    if (st == LK_OK)
        st = dev->iface->queue_sync(q->state);
    lk_fpenv_leave(&fe);
    if (st != LK_OK) {
        free(copy);
        if (lk_last_error()[0])
            return lk_error(st, "%s: %s", fn, lk_last_error());
        return lk_error(st, "%s: device %s failed (%s)", fn, dev->props.name,
                        lk_status_string(st));
    }
    *h = copy;
    *own = copy;
    return LK_OK;
}

/* lk_embedding_ids_check for any LK_I32 n x 1 index tensor (name in the
 * message); also lk_set_rows' idx. */
lk_status lk_index_check(const char *fn, const char *name, lk_queue *q, const lk_tensor *ids,
                         int64_t vocab)
{
    if (ids->rows == 0 || ids->cols == 0)
        return LK_OK;
    const int32_t *h;
    int32_t *copy;
    lk_status st = lk_i32_host(fn, name, q, ids, &h, &copy);
    if (st != LK_OK)
        return st;
    for (int64_t r = 0; r < ids->rows; r++) {
        int32_t id = h[r * ids->ld];
        if (id < 0 || id >= vocab) {
            st = lk_error(LK_ERR_RANGE, "%s: %s[%lld] = %d is outside [0, %lld)", fn, name,
                          (long long)r, (int)id, (long long)vocab);
            break;
        }
    }
    free(copy);
    return st;
}

LK_API lk_status lk_embedding(lk_queue *q, const lk_tensor *table, const lk_tensor *ids,
                              const lk_tensor *y)
{
    lk_validator v;
    lk_embedding_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_embedding", q));
    LK_V_TRY(lk_v_tensor(&v, "table", table, &a.table, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "ids", ids, &a.ids, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(&v, "ids", &a.ids, -1, NULL, 1, NULL));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.y, LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "y", &a.y, a.ids.rows, "ids rows", a.table.cols, "table cols"));
    LK_V_TRY(lk_v_finish(&v));
    /* Under capture the ids are read when the graph runs: by the replay
     * (core/graph.c) or on the device (driver.h, queue_capturing). */
    if (a.ids.rows > 0 && a.table.cols > 0 && !lk_capture_hosted(q) &&
        !lk_capture_on_device(q))
        LK_V_TRY(lk_embedding_ids_check(v.fn, q, &a.ids, a.table.rows));
    LK_V_RUN(&v, LK_OP_EMBEDDING, embedding, a, a.ids.rows == 0 || a.table.cols == 0);
}

/* Any dtype with whole bytes per element: the rows move as bytes. */
#define LK_DT_ROWS                                                                      \
    (LK_DT_FLOAT | LK_DT(LK_I8) | LK_DT(LK_I32) | LK_DT(LK_I64))

LK_API lk_status lk_set_rows(lk_queue *q, const lk_tensor *src, const lk_tensor *idx,
                             const lk_tensor *dst)
{
    lk_validator v;
    lk_set_rows_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, "lk_set_rows", q));
    LK_V_TRY(lk_v_tensor(&v, "src", src, &a.src, LK_DT_ROWS, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "idx", idx, &a.idx, LK_DT(LK_I32), LK_V_IN, 1));
    LK_V_TRY(lk_v_dims(&v, "idx", &a.idx, a.src.rows, "src rows", 1, NULL));
    LK_V_TRY(lk_v_tensor(&v, "dst", dst, &a.dst, LK_DT_ROWS, LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "dst", &a.dst, -1, NULL, a.src.cols, "src cols"));
    if (a.dst.dtype != a.src.dtype)
        return lk_error(LK_ERR_BAD_DTYPE, "lk_set_rows: dst is %s, src is %s (rows are copied "
                        "bit for bit: convert first)", lk_dtype_name(a.dst.dtype),
                        lk_dtype_name(a.src.dtype));
    LK_V_TRY(lk_v_finish(&v));
    /* As lk_embedding: under capture the indices are checked when the
     * graph runs. */
    if (a.src.rows > 0 && a.src.cols > 0 && !lk_capture_hosted(q) && !lk_capture_on_device(q))
        LK_V_TRY(lk_index_check(v.fn, "idx", q, &a.idx, a.dst.rows));
    LK_V_RUN(&v, LK_OP_SET_ROWS, set_rows, a, a.src.rows == 0 || a.src.cols == 0);
}
