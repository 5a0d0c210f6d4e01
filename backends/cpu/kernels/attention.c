/* Lockstep CPU kernels: causal attention with grouped KV heads, over a
 * contiguous cache (lk_attention) or a paged one (lk_attention_paged), in
 * docs/numerics.md section 12.3's chunked order: the reference's
 * backends/ref/attention.c on vectors, bit for bit.
 *
 * A work item is (query row, KV head, slice of that head's query heads):
 * the slices exist so that a decode step (one token, few KV heads) still
 * gives every thread work; the heads of a slice share what is read of K.
 * Per item, for up to ATT_NH heads at a time:
 *
 *   scores  lanes are key positions: ATT_KT * VW keys of K are transposed
 *           into a stack tile (d-major), so that each lane runs the GEMM
 *           contract's chain over d (fma from +0 per LK_KB block, blocks
 *           added in order), then times scale;
 *   chunks  per chunk of LK_ATTENTION_CHUNK keys: its maximum m_c, the
 *           contract's exp of s_j - m_c (sm_exp when m_c is finite), the
 *           lane sum l_c, and o_c with lanes as output columns (a row of V
 *           is contiguous): per column the fma chain over the chunk's keys;
 *           then l and o gain l_c w_c and o_c w_c, w_c = exp(m_c - m);
 *   store   o * (1 / l), rounded once.
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
    int64_t ns;   /* slices per KV head */
    float *buf;   /* per thread: `per` floats */
    int64_t per;  /* ATT_NH rows of scores (lp each), ATT_NH widened q rows, chunk maxima, o */
    int64_t lp;   /* keys rounded up to the tile's keys */
} att_job;

/* Scores of nh (compile-time) heads against keys [0, n): e[h][j] = dot(q_h,
 * k_j) * scale; e rows have room up to n rounded up to the tile. */
LK_INLINE void att_scores(const int nh, const att_call *a, const float *const *q,
                          float *const *e, const char *kb, const att_row *w, int64_t n)
{
    const int64_t hd = a->head_dim, es = dt_size(a->k->dtype), ps = a->page_size;
    const lk_dtype kdt = a->k->dtype;
    const vf scale = vf_set1(a->scale);
    float kt[ATT_HD_MAX * ATT_KT * VW] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < n; j0 += ATT_KT * VW) {
        const int64_t wd = n - j0 < ATT_KT * VW ? n - j0 : ATT_KT * VW;
        /* the tile: kt[d][l] = k[j0 + l][d]; lanes past n read nothing */
        for (int64_t l = 0; l < wd; l++) {
            const void *row = kb + att_key(w, ps, j0 + l) * a->k->ld * es;
            if (kdt == LK_F32) {
                const float *r = (const float *)row;
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = r[d];
            } else {
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = ld1(row, kdt, d);
            }
        }
        for (int64_t l = wd; l < ATT_KT * VW; l++)
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

/* One head: scores e[0, n) in, y[yi .. yi + hd) out.  mc: room for the
 * chunk maxima; o: hd floats rounded up to ATT_CT vectors. */
LK_INLINE void att_head(const int f32, const att_call *a, float *e, int64_t n,
                        const char *vb, const att_row *rw, float *mc, float *o, int64_t yi)
{
    const int64_t hd = a->head_dim, ld = a->v->ld, ps = a->page_size;
    const int64_t ves = dt_size(a->v->dtype), nc = (n + ATT_C - 1) / ATT_C;
    const lk_dtype vdt = f32 ? LK_F32 : a->v->dtype;
    float m = 0.0f;
    for (int64_t c = 0; c < nc; c++) {
        const int64_t j0 = c * ATT_C, len = n - j0 < ATT_C ? n - j0 : ATT_C;
        mc[c] = row_extreme(1, e + j0, len);
        m = c == 0 ? mc[c] : lk_maximum(m, mc[c]);
    }
    float l = -0.0f;
    for (int64_t i = 0; i < (hd + ATT_CT * VW - 1) / (ATT_CT * VW) * (ATT_CT * VW); i++)
        o[i] = -0.0f;
    for (int64_t c = 0; c < nc; c++) {
        const int64_t j0 = c * ATT_C, len = n - j0 < ATT_C ? n - j0 : ATT_C;
        if (mc[c] == -INFINITY && m != -INFINITY)
            continue; /* every score -Inf: the chunk adds nothing */
        const float wc = lk_expf(mc[c] - m);
        const float lc = att_chunk_exp(e + j0, len, mc[c]);
        l = l + lc * wc;
        const vf vw = vf_set1(wc);
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
                    const vf pj = vf_bcast(e + j0 + j);
                    for (int u = 0; u < ATT_CT; u++)
                        acc[u] = vf_fma(pj, ld_dt(rows[j], vdt, c0 + u * VW), acc[u]);
                }
            } else {
                for (int64_t j = 0; j < len; j++) {
                    const vf pj = vf_bcast(e + j0 + j);
                    for (int u = 0; u < ATT_CT && wv[u] > 0; u++) {
                        const vf v = wv[u] == VW
                                         ? ld_dt(rows[j], vdt, c0 + u * VW)
                                         : ld_dt_part(rows[j], vdt, c0 + u * VW, wv[u], vf_zero());
                        acc[u] = vf_fma(pj, v, acc[u]);
                    }
                }
            }
            for (int u = 0; u < ATT_CT; u++) /* o has room for whole vectors */
                vf_store(o + c0 + u * VW,
                         vf_add(vf_load(o + c0 + u * VW), vf_mul(acc[u], vw)));
        }
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

static void att_items(void *p, int64_t i0, int64_t i1, int tid)
{
    const att_job *jb = (const att_job *)p;
    const att_call *a = jb->c;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv;
    const int64_t hdr = (hd + 15) & ~(int64_t)15, ov = ATT_CT * VW;
    float *base = jb->buf + (int64_t)tid * jb->per;
    float *e[ATT_NH], *qw[ATT_NH];
    for (int h = 0; h < ATT_NH; h++) {
        e[h] = base + h * jb->lp;
        qw[h] = base + ATT_NH * jb->lp + h * hdr;
    }
    float *o = base + ATT_NH * jb->lp + ATT_NH * hdr;
    float *mc = o + (hd + ov - 1) / ov * ov;
    const int64_t kes = dt_size(a->k->dtype), ves = dt_size(a->v->dtype);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t sub = i % jb->ns, g = (i / jb->ns) % a->n_kv, r = i / jb->ns / a->n_kv;
        const int64_t h0 = g * group + sub * group / jb->ns;
        const int64_t h1 = g * group + (sub + 1) * group / jb->ns;
        const att_row rw = att_row_of(a, r);
        const int64_t n = rw.n;
        if (n == 0) {
            for (int64_t c = h0 * hd; c < h1 * hd; c++)
                st1(a->y->data, a->y->dtype, rw.yi + c, 0.0f);
            continue;
        }
        const char *kb = (const char *)a->k->data + (rw.kb + g * hd) * kes;
        const char *vb = (const char *)a->v->data + (rw.vb + g * hd) * ves;
        for (int64_t hs = h0; hs < h1; hs += ATT_NH) {
            const int nh = h1 - hs < ATT_NH ? (int)(h1 - hs) : ATT_NH;
            for (int h = 0; h < nh; h++)
                widen_span(a->q->data, a->q->dtype, rw.qi + (hs + h) * hd, hd, qw[h]);
            const float *const *qc = (const float *const *)qw;
            switch (nh) {
            case 1:
                att_scores(1, a, qc, e, kb, &rw, n);
                break;
            case 2:
                att_scores(2, a, qc, e, kb, &rw, n);
                break;
            case 3:
                att_scores(3, a, qc, e, kb, &rw, n);
                break;
            default:
                att_scores(4, a, qc, e, kb, &rw, n);
                break;
            }
            for (int h = 0; h < nh; h++) {
                if (a->v->dtype == LK_F32)
                    att_head(1, a, e[h], n, vb, &rw, mc, o, rw.yi + (hs + h) * hd);
                else
                    att_head(0, a, e[h], n, vb, &rw, mc, o, rw.yi + (hs + h) * hd);
            }
        }
    }
}

/* Any call: threads over (row, KV head, slice); keys: the most any row
 * sees (cache_len, or the paged rows' largest position + 1). */
static lk_status att_run(lk_cpu_queue *q, const att_call *c, int64_t keys)
{
    const int64_t per_tok = c->rows * c->n_kv;
    if (per_tok == 0 || c->head_dim == 0)
        return LK_OK;
    const int64_t group = c->n_head / c->n_kv;
    const double work = 4.0 * (double)c->rows * (double)c->n_head * (double)c->head_dim *
                        (double)(keys > 0 ? keys : 1);
    const int nt = lk_cpu_threads_for(q, work, per_tok * group);
    /* enough items for every thread a few times over, else whole groups
     * (which share the K tile) */
    int64_t ns = (4 * (int64_t)nt + per_tok - 1) / per_tok;
    if (ns > group)
        ns = group;
    if (ns < 1)
        ns = 1;
    att_job j = {c, ns, NULL, 0, 0};
    const int64_t ov = ATT_CT * VW;
    j.lp = (keys + ATT_KT * VW - 1) / (ATT_KT * VW) * (ATT_KT * VW);
    j.per = ATT_NH * j.lp + ATT_NH * ((c->head_dim + 15) & ~(int64_t)15) +
            (c->head_dim + ov - 1) / ov * ov + (keys + ATT_C - 1) / ATT_C + 1;
    j.per = (j.per + 15) & ~(int64_t)15;
    j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * (size_t)j.per * sizeof(float),
                                    c->a ? "lk_attention" : "lk_attention_paged");
    if (j.buf == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    lk_cpu_for(nt, per_tok * ns, att_items, &j);
    return LK_OK;
}

LK_CPU_DEFINE(attention_paged, lk_attention_paged_args)
{
    const lk_attention_paged_args *a = args;
    if (a->head_dim > ATT_HD_MAX)
        return lk_cpu_ref_attention_paged(queue, a);
    int64_t keys = 0;
    for (int64_t r = 0; r < a->rows; r++) {
        const int64_t p = ((const int32_t *)a->pos.data)[r * a->pos.ld];
        keys = p + 1 > keys ? p + 1 : keys;
    }
    const att_call c = {a->rows, a->n_head, a->n_kv, a->head_dim, 0, a->page_size, a->scale,
                        &a->q, &a->k, &a->v, &a->y, NULL, a};
    return att_run((lk_cpu_queue *)queue, &c, keys);
}

LK_CPU_DEFINE(attention, lk_attention_args)
{
    const lk_attention_args *a = args;
    if (a->head_dim > ATT_HD_MAX)
        return lk_cpu_ref_attention(queue, a);
    const att_call c = {a->batch * a->tokens, a->n_head, a->n_kv, a->head_dim, a->cache_len, 1,
                        a->scale, &a->q, &a->k, &a->v, &a->y, a, NULL};
    return att_run((lk_cpu_queue *)queue, &c, a->cache_len);
}
