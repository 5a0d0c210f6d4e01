/* Lockstep CPU kernels: causal attention with grouped KV heads, over a
 * contiguous cache (lk_attention) or a paged one (lk_attention_paged), in
 * docs/numerics.md section 12.3's chunked order: the reference's
 * backends/ref/attention.c on vectors, bit for bit.
 *
 * A work item is (query row, range of key chunks): the ranges exist so
 * that a decode step (one row) gives every thread a share of the keys.
 * Work and scratch follow the keys a row reads, min(pos + 1, cache_len).
 * Per item, chunk by chunk, every KV head in turn (a key's cache row holds
 * every KV head's columns: read together, they stream), for up to ATT_NH
 * heads of the KV head's group at a time (they share the K tile):
 *
 *   scores  lanes are key positions: ATT_KT * VW keys of K are transposed
 *           into a stack tile (d-major), so that each lane runs the GEMM
 *           contract's chain over d (fma from +0 per LK_KB block, blocks
 *           added in order), then times scale;
 *   state   the chunk's maximum m_c, the contract's exp of s_j - m_c
 *           (sm_exp when m_c is finite), the lane sum l_c, and o_c with
 *           lanes as output columns (a row of V is contiguous): per column
 *           the fma chain over the chunk's keys;
 *   combine once a row's chunks are all done (after a barrier when its
 *           ranges ran on several threads): m, then in chunk order l and o
 *           gain l_c w_c and o_c w_c, w_c = exp(m_c - m); the store is
 *           o * (1 / l), rounded once.
 *
 * head_dim > ATT_HD_MAX (the tile's bound) goes to the reference. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"
#include "backends/cpu/variants.h"
#include "numerics/scalar.h"

#define ATT_HD_MAX 256 /* the K tile: ATT_HD_MAX * ATT_KT * VW floats on the stack */
#define ATT_NH 4       /* query heads sharing one K tile */
#define ATT_KT 2       /* key vectors per tile: independent fma chains */
#define ATT_CT 4       /* column vectors per P.V pass */
#define ATT_C LK_ATTENTION_CHUNK
#define ATT_STATES ((int64_t)1 << 20) /* floats of chunk states per thread */

/* One call, contiguous or paged, as query rows: row r's batch entry and
 * token (contiguous), or its table row (paged). */
typedef struct att_call {
    int64_t rows, n_head, n_kv, head_dim, cache_len, page_size;
    float scale;
    const lk_tensor *q, *k, *v, *y;
    const lk_attention_args *a;        /* contiguous, or NULL */
    const lk_attention_paged_args *p;  /* paged, or NULL */
} att_call;

/* Row r of a call: element offsets of its q and y rows and of its cache's
 * batch entry, its number of keys, and its table row (NULL: contiguous). */
typedef struct att_row {
    int64_t qi, yi, kb, vb, n;
    const int32_t *tab;
} att_row;

static att_row att_row_of(const att_call *c, int64_t r)
{
    att_row w;
    if (c->a) {
        const lk_attention_args *a = c->a;
        const int64_t b = r / a->tokens, t = r % a->tokens;
        const int64_t p = ((const int32_t *)a->pos.data)[b * a->pos.batch_stride + t * a->pos.ld];
        w.qi = b * a->q.batch_stride + t * a->q.ld;
        w.yi = b * a->y.batch_stride + t * a->y.ld;
        w.kb = b * a->k.batch_stride;
        w.vb = b * a->v.batch_stride;
        w.n = p < 0 ? 0 : (p + 1 < c->cache_len ? p + 1 : c->cache_len);
        w.tab = NULL;
    } else {
        const lk_attention_paged_args *a = c->p;
        const int64_t p = ((const int32_t *)a->pos.data)[r * a->pos.ld];
        const int64_t s = ((const int32_t *)a->seq.data)[r * a->seq.ld];
        w.qi = r * a->q.ld;
        w.yi = r * a->y.ld;
        w.kb = w.vb = 0;
        w.n = p < 0 ? 0 : p + 1;
        w.tab = (const int32_t *)a->table.data + s * a->table.ld;
    }
    return w;
}

/* The cache row of key j. */
LK_INLINE int64_t att_key(const att_row *w, int64_t ps, int64_t j)
{
    return w->tab ? (int64_t)w->tab[j / ps] * ps + j % ps : j;
}

typedef struct att_job {
    const att_call *c;
    int64_t np;    /* chunk ranges per (row, KV head, slice) */
    int64_t nc;    /* chunks of the longest row */
    int64_t hdp;   /* head_dim rounded up to ATT_CT vectors */
    int64_t sw;    /* floats of one (row, head)'s chunk states: nc * (hdp + 2) */
    int64_t hb;    /* heads whose states a thread holds at once (np == 1) */
    float *buf;    /* per thread: `per` floats */
    int64_t per;   /* ATT_NH chunks of scores, the row's widened q, o, and
                    * (np == 1) every head's chunk states */
    float *st;     /* np > 1: every (row, head)'s chunk states */
} att_job;

/* Software prefetch of the cache rows a tile reads next: K of the next
 * tile's keys and V of this tile's (read by att_chunk right after); the
 * rows are far apart, too many streams for the hardware prefetchers. */
LK_INLINE void att_prefetch(const att_call *a, const char *kb, const char *vb, const att_row *w,
                            int64_t j0, int64_t jn)
{
    const int64_t ps = a->page_size, kl = a->k->ld * dt_size(a->k->dtype);
    const int64_t vl = a->v->ld * dt_size(a->v->dtype);
    const int64_t kr = a->head_dim * dt_size(a->k->dtype), vr = a->head_dim * dt_size(a->v->dtype);
    const int64_t kn = j0 + ATT_KT * VW, kend = kn + ATT_KT * VW < w->n ? kn + ATT_KT * VW : w->n;
    for (int64_t j = kn; j < kend; j++) {
        const char *p = kb + att_key(w, ps, j) * kl;
        for (int64_t o = 0; o < kr; o += 64)
            __builtin_prefetch(p + o);
    }
    for (int64_t j = j0; j < jn; j++) {
        const char *p = vb + att_key(w, ps, j) * vl;
        for (int64_t o = 0; o < vr; o += 64)
            __builtin_prefetch(p + o);
    }
}

/* Scores of nh (compile-time) heads against keys [jb, jb + n), n <= ATT_C:
 * e[h][j] = dot(q_h, k_(jb+j)) * scale; e rows have room up to n rounded
 * up to the tile. */
LK_INLINE void att_scores(const int nh, const att_call *a, const float *const *q,
                          float *const *e, const char *kb, const char *vb, const att_row *w,
                          int64_t jb, int64_t n)
{
    const int64_t hd = a->head_dim, es = dt_size(a->k->dtype), ps = a->page_size;
    const lk_dtype kdt = a->k->dtype;
    const vf scale = vf_set1(a->scale);
    float kt[ATT_HD_MAX * ATT_KT * VW] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < n; j0 += ATT_KT * VW) {
        const int64_t wd = n - j0 < ATT_KT * VW ? n - j0 : ATT_KT * VW;
        att_prefetch(a, kb, vb, w, jb + j0, jb + j0 + wd);
        /* the tile: kt[d][l] = k[jb + j0 + l][d]; lanes past n read nothing */
        int64_t l = 0;
#if !defined(LK_VEC_ARM)
        /* 8 keys x 8 columns at a time, transposed in registers */
        for (; l + 8 <= wd && (kdt == LK_F32 || kdt == LK_BF16 || kdt == LK_F16); l += 8) {
            const char *rp[8];
            for (int u = 0; u < 8; u++)
                rp[u] = kb + att_key(w, ps, jb + j0 + l + u) * a->k->ld * es;
            int64_t d = 0;
            for (; d + 8 <= hd; d += 8) {
                __m256 r[8];
                for (int u = 0; u < 8; u++)
                    r[u] = lk_x86_load8(rp[u] + d * es, (int)es, kdt == LK_F16);
                lk_x86_transpose8(r);
                for (int u = 0; u < 8; u++)
                    _mm256_storeu_ps(kt + (d + u) * ATT_KT * VW + l, r[u]);
            }
            for (; d < hd; d++)
                for (int u = 0; u < 8; u++)
                    kt[d * ATT_KT * VW + l + u] = ld1(rp[u], kdt, d);
        }
#endif
        for (; l < wd; l++) {
            const void *row = kb + att_key(w, ps, jb + j0 + l) * a->k->ld * es;
            if (kdt == LK_F32) {
                const float *r = (const float *)row;
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = r[d];
            } else {
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = ld1(row, kdt, d);
            }
        }
        for (l = wd; l < ATT_KT * VW; l++)
            for (int64_t d = 0; d < hd; d++)
                kt[d * ATT_KT * VW + l] = 0.0f;
        vf tot[ATT_NH][ATT_KT] = {{vf_zero()}};
        for (int64_t d0 = 0; d0 < hd; d0 += LK_KB) {
            const int64_t d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
            vf acc[ATT_NH][ATT_KT];
            for (int h = 0; h < nh; h++)
                for (int c = 0; c < ATT_KT; c++)
                    acc[h][c] = vf_zero();
            for (int64_t d = d0; d < d1; d++) {
                const float *t = kt + d * ATT_KT * VW;
                for (int c = 0; c < ATT_KT; c++) {
                    const vf kv = vf_load(t + c * VW);
                    for (int h = 0; h < nh; h++)
                        acc[h][c] = vf_fma(vf_bcast(q[h] + d), kv, acc[h][c]);
                }
            }
            for (int h = 0; h < nh; h++)
                for (int c = 0; c < ATT_KT; c++)
                    tot[h][c] = d0 == 0 ? acc[h][c] : vf_add(tot[h][c], acc[h][c]);
        }
        for (int h = 0; h < nh; h++)
            for (int c = 0; c < ATT_KT; c++)
                vf_store(e[h] + j0 + c * VW, vf_mul(tot[h][c], scale));
    }
}

/* e_j = exp(e_j - mc) over [0, n) in place; returns their lane sum. */
static float att_chunk_exp(float *e, int64_t n, float mc)
{
    const vf vmx = vf_set1(mc);
    /* a finite mc: every t_j <= 0 and none NaN, sm_exp's condition */
    const int fast = mc - mc == 0.0f;
    for (int64_t i = 0; i < n; i += VW) {
        const int w = n - i < VW ? (int)(n - i) : VW;
        const vf t = vf_sub(vf_load_part(e + i, w, vmx), vmx);
        vf_store_part(e + i, w, fast ? sm_exp(t) : v_expf(t));
    }
    return lane_sum(LANE_SUM, e, n, 0.0f);
}

/* One chunk of one head: scores e[0, len) of keys [j0, j0 + len) in; its
 * state out: *mcp = m_c, *lcp = l_c, oc[0, hdp) = o_c (the fma chains of
 * e_j v_j per column, unweighted). */
LK_INLINE void att_chunk(const int f32, const att_call *a, float *e, int64_t j0, int64_t len,
                         const char *vb, const att_row *rw, float *mcp, float *lcp, float *oc)
{
    const int64_t hd = a->head_dim, ld = a->v->ld, ps = a->page_size;
    const int64_t ves = dt_size(a->v->dtype);
    const lk_dtype vdt = f32 ? LK_F32 : a->v->dtype;
    const float mc = row_extreme(1, e, len);
    *mcp = mc;
    *lcp = att_chunk_exp(e, len, mc);
    const char *rows[ATT_C];
    for (int64_t j = 0; j < len; j++)
        rows[j] = vb + att_key(rw, ps, j0 + j) * ld * ves;
    for (int64_t c0 = 0; c0 < hd; c0 += ATT_CT * VW) {
        int wv[ATT_CT];
        for (int u = 0; u < ATT_CT; u++) {
            const int64_t left = hd - c0 - u * VW;
            wv[u] = left <= 0 ? 0 : (left < VW ? (int)left : VW);
        }
        vf acc[ATT_CT];
        for (int u = 0; u < ATT_CT; u++)
            acc[u] = vf_zero();
        if (wv[ATT_CT - 1] == VW) {
            for (int64_t j = 0; j < len; j++) {
                const vf pj = vf_bcast(e + j);
                for (int u = 0; u < ATT_CT; u++)
                    acc[u] = vf_fma(pj, ld_dt(rows[j], vdt, c0 + u * VW), acc[u]);
            }
        } else {
            for (int64_t j = 0; j < len; j++) {
                const vf pj = vf_bcast(e + j);
                for (int u = 0; u < ATT_CT && wv[u] > 0; u++) {
                    const vf v = wv[u] == VW
                                     ? ld_dt(rows[j], vdt, c0 + u * VW)
                                     : ld_dt_part(rows[j], vdt, c0 + u * VW, wv[u], vf_zero());
                    acc[u] = vf_fma(pj, v, acc[u]);
                }
            }
        }
        for (int u = 0; u < ATT_CT; u++) /* oc has room for whole vectors */
            vf_store(oc + c0 + u * VW, acc[u]);
    }
}

/* One (row, head): its nc chunk states (st: maxima, then sums, then o_c
 * rows of hdp floats) combined in chunk order into y[yi .. yi + hd); o:
 * hdp floats. */
static void att_combine(const att_call *a, const float *st, int64_t nc, int64_t hdp, float *o,
                        int64_t yi)
{
    const int64_t hd = a->head_dim;
    const float *mc = st, *lc = st + nc, *oc = st + 2 * nc;
    float m = mc[0];
    for (int64_t c = 1; c < nc; c++)
        m = lk_maximum(m, mc[c]);
    float l = -0.0f;
    for (int64_t i = 0; i < hdp; i++)
        o[i] = -0.0f;
    for (int64_t c = 0; c < nc; c++) {
        if (mc[c] == -INFINITY && m != -INFINITY)
            continue; /* every score -Inf: the chunk adds nothing */
        const float wc = lk_expf(mc[c] - m);
        l = l + lc[c] * wc;
        const vf vw = vf_set1(wc);
        const float *oi = oc + c * hdp;
        for (int64_t i = 0; i < hdp; i += VW)
            vf_store(o + i, vf_add(vf_load(o + i), vf_mul(vf_load(oi + i), vw)));
    }
    const vf r = vf_set1(1.0f / l);
    for (int64_t c0 = 0; c0 < hd; c0 += VW) {
        const int w = hd - c0 < VW ? (int)(hd - c0) : VW;
        const vf y = vf_mul(vf_load(o + c0), r);
        if (w == VW)
            st_dt(a->y->data, a->y->dtype, yi + c0, y);
        else
            st_dt_part(a->y->data, a->y->dtype, yi + c0, w, y);
    }
}

/* Where (row r, head h)'s chunk states live: the shared array when chunk
 * ranges are split over threads, else the thread's own. */
LK_INLINE float *att_states(const att_job *jb, float *own, int64_t r, int64_t h, int64_t hb0)
{
    if (jb->np == 1)
        return own + (h - hb0) * jb->sw;
    return jb->st + (r * jb->c->n_head + h) * jb->sw;
}

/* Work item i: (row, chunk range), every head; chunk by chunk, every KV
 * head in turn, so that what a key's cache row holds is read together;
 * with one range, the heads' outputs too. */
static void att_item(const att_job *jb, int64_t i, int tid)
{
    const att_call *a = jb->c;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv, hdp = jb->hdp;
    const int64_t hdr = (hd + 15) & ~(int64_t)15;
    float *base = jb->buf + (int64_t)tid * jb->per;
    float *e[ATT_NH];
    for (int h = 0; h < ATT_NH; h++)
        e[h] = base + h * ATT_C;
    float *qall = base + ATT_NH * ATT_C;
    float *o = qall + a->n_head * hdr;
    float *own = o + hdp;
    const int64_t kes = dt_size(a->k->dtype), ves = dt_size(a->v->dtype);
    const int64_t part = i % jb->np, r = i / jb->np;
    const att_row rw = att_row_of(a, r);
    const int64_t n = rw.n, nc = (n + ATT_C - 1) / ATT_C;
    if (n == 0) {
        if (part == 0)
            for (int64_t c = 0; c < a->n_head * hd; c++)
                st1(a->y->data, a->y->dtype, rw.yi + c, 0.0f);
        return;
    }
    const int64_t c0 = part * nc / jb->np, c1 = (part + 1) * nc / jb->np;
    if (c0 == c1)
        return;
    for (int64_t h = 0; h < a->n_head; h++)
        widen_span(a->q->data, a->q->dtype, rw.qi + h * hd, hd, qall + h * hdr);
    for (int64_t hb0 = 0; hb0 < a->n_head; hb0 += jb->hb) {
        const int64_t hb1 = a->n_head - hb0 < jb->hb ? a->n_head : hb0 + jb->hb;
        for (int64_t c = c0; c < c1; c++) {
            const int64_t j0 = c * ATT_C, len = n - j0 < ATT_C ? n - j0 : ATT_C;
            for (int64_t g = hb0 / group; g <= (hb1 - 1) / group; g++) {
                const char *kb = (const char *)a->k->data + (rw.kb + g * hd) * kes;
                const char *vb = (const char *)a->v->data + (rw.vb + g * hd) * ves;
                const int64_t ge = (g + 1) * group < hb1 ? (g + 1) * group : hb1;
                for (int64_t hs = g * group > hb0 ? g * group : hb0; hs < ge; hs += ATT_NH) {
                    const int nh = ge - hs < ATT_NH ? (int)(ge - hs) : ATT_NH;
                    const float *qc[ATT_NH];
                    for (int h = 0; h < ATT_NH; h++)
                        qc[h] = qall + (hs + (h < nh ? h : 0)) * hdr;
                    switch (nh) {
                    case 1:
                        att_scores(1, a, qc, e, kb, vb, &rw, j0, len);
                        break;
                    case 2:
                        att_scores(2, a, qc, e, kb, vb, &rw, j0, len);
                        break;
                    case 3:
                        att_scores(3, a, qc, e, kb, vb, &rw, j0, len);
                        break;
                    default:
                        att_scores(4, a, qc, e, kb, vb, &rw, j0, len);
                        break;
                    }
                    for (int h = 0; h < nh; h++) {
                        float *st = att_states(jb, own, r, hs + h, hb0);
                        if (a->v->dtype == LK_F32)
                            att_chunk(1, a, e[h], j0, len, vb, &rw, st + c, st + nc + c,
                                      st + 2 * nc + c * hdp);
                        else
                            att_chunk(0, a, e[h], j0, len, vb, &rw, st + c, st + nc + c,
                                      st + 2 * nc + c * hdp);
                    }
                }
            }
        }
        if (jb->np == 1)
            for (int64_t h = hb0; h < hb1; h++)
                att_combine(a, att_states(jb, own, r, h, hb0), nc, hdp, o, rw.yi + h * hd);
    }
}

/* The team: the items, then (chunk ranges split) every (row, head)'s
 * combination once all its ranges are done. */
static void att_body(void *p, int tid, int nt)
{
    const att_job *jb = (const att_job *)p;
    const att_call *a = jb->c;
    const int64_t items = a->rows * jb->np;
    int64_t b, e;
    lk_cpu_part(items, tid, nt, &b, &e);
    for (int64_t i = b; i < e; i++)
        att_item(jb, i, tid);
    if (jb->np == 1)
        return;
    lk_cpu_barrier();
    lk_cpu_part(a->rows * a->n_head, tid, nt, &b, &e);
    float *o = jb->buf + (int64_t)tid * jb->per + ATT_NH * ATT_C +
               a->n_head * ((a->head_dim + 15) & ~(int64_t)15);
    for (int64_t i = b; i < e; i++) {
        const int64_t r = i / a->n_head, h = i % a->n_head;
        const att_row rw = att_row_of(a, r);
        if (rw.n > 0)
            att_combine(a, jb->st + i * jb->sw, (rw.n + ATT_C - 1) / ATT_C, jb->hdp, o,
                        rw.yi + h * a->head_dim);
    }
}

/* Any call.  Work and scratch follow the keys each row reads (min(pos + 1,
 * cache_len)), never the cache's length.  Items are (row, chunk range):
 * a call with few rows (a decode step) splits each
 * row's chunks into ranges so that every thread has work, and combines the
 * ranges' chunk states in chunk order afterwards, which the contract's
 * order allows since each chunk's m_c, l_c and o_c depend on its own keys
 * only. */
static lk_status att_run(lk_cpu_queue *q, const att_call *c)
{
    if (c->rows == 0 || c->head_dim == 0)
        return LK_OK;
    int64_t keys = 0;
    double total = 0.0;
    for (int64_t r = 0; r < c->rows; r++) {
        const int64_t n = att_row_of(c, r).n;
        keys = n > keys ? n : keys;
        total += (double)(n > 0 ? n : 1);
    }
    const int64_t hd = c->head_dim, ov = ATT_CT * VW;
    const double work = 4.0 * (double)c->n_head * (double)hd * total;
    const int nt = lk_cpu_threads_for(q, work, c->rows * ((keys + ATT_C - 1) / ATT_C));
    att_job j;
    memset(&j, 0, sizeof j);
    j.c = c;
    j.nc = (keys + ATT_C - 1) / ATT_C;
    j.hdp = (hd + ov - 1) / ov * ov;
    j.sw = j.nc * (j.hdp + 2);
    j.np = 1;
    if (nt > 1 && c->rows < 4 * (int64_t)nt) {
        j.np = (4 * (int64_t)nt + c->rows - 1) / c->rows;
        if (j.np > j.nc)
            j.np = j.nc > 0 ? j.nc : 1;
    }
    /* with one range per row, a thread holds the states of hb heads at a
     * time: at most ATT_STATES floats unless one head needs more (about
     * 4 floats per key at head_dim 256) */
    j.hb = c->n_head;
    if (j.np == 1 && j.hb * j.sw > ATT_STATES)
        j.hb = ATT_STATES / j.sw > 1 ? ATT_STATES / j.sw : 1;
    j.per = ATT_NH * ATT_C + c->n_head * ((hd + 15) & ~(int64_t)15) + j.hdp +
            (j.np == 1 ? j.hb * j.sw : 0);
    j.per = (j.per + 15) & ~(int64_t)15;
    const int64_t shared = j.np > 1 ? c->rows * c->n_head * j.sw : 0;
    const double bytes = ((double)nt * (double)j.per + (double)shared) * sizeof(float);
    float *s = bytes < (double)SIZE_MAX
                   ? (float *)lk_cpu_scratch(q, (size_t)bytes,
                                             c->a ? "lk_attention" : "lk_attention_paged")
                   : NULL;
    if (s == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    j.buf = s;
    j.st = s + (int64_t)nt * j.per;
    lk_cpu_team(nt, att_body, &j);
    return LK_OK;
}

LK_CPU_DEFINE(attention_paged, lk_attention_paged_args)
{
    const lk_attention_paged_args *a = args;
    if (a->head_dim > ATT_HD_MAX)
        return lk_cpu_ref_attention_paged(queue, a);
    const att_call c = {a->rows, a->n_head, a->n_kv, a->head_dim, 0, a->page_size, a->scale,
                        &a->q, &a->k, &a->v, &a->y, NULL, a};
    return att_run((lk_cpu_queue *)queue, &c);
}

LK_CPU_DEFINE(attention, lk_attention_args)
{
    const lk_attention_args *a = args;
    if (a->head_dim > ATT_HD_MAX)
        return lk_cpu_ref_attention(queue, a);
    const att_call c = {a->batch * a->tokens, a->n_head, a->n_kv, a->head_dim, a->cache_len, 1,
                        a->scale, &a->q, &a->k, &a->v, &a->y, a, NULL};
    return att_run((lk_cpu_queue *)queue, &c);
}
