/* Lockstep CPU kernels: causal attention with grouped KV heads
 * (docs/numerics.md section 12.3), the reference's backends/ref/attention.c
 * on vectors, bit for bit.
 *
 * A work item is (sequence, token, KV head, slice of that head's query
 * heads): the slices exist so that a decode step (one token, few KV heads)
 * still gives every thread work; the heads of a slice share what is read
 * of K.  Per item, for up to ATT_NH heads at a time:
 *
 *   scores  lanes are key positions: ATT_KT * VW keys of K are transposed
 *           into a stack tile (d-major), so that each lane runs the GEMM
 *           contract's chain over d (fma from +0 per LK_KB block, blocks
 *           added in order), then times scale;
 *   softmax maximum, the contract's exp (sm_exp when mx is finite), the
 *           lane sum, r = 1 / s, p_j = e_j * r, in place;
 *   P.V     lanes are output columns (a row of V is contiguous): per
 *           column the chain over positions ascending, LK_KB blocks added
 *           in order, rounded once at the store.
 *
 * head_dim > ATT_HD_MAX (the tile's bound) goes to the reference. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/lanes.h"
#include "backends/cpu/kernels/transcendental.h"
#include "backends/cpu/threads.h"
#include "backends/cpu/variants.h"

#define ATT_HD_MAX 256 /* the K tile: ATT_HD_MAX * ATT_KT * VW floats on the stack */
#define ATT_NH 4       /* query heads sharing one K tile */
#define ATT_KT 2       /* key vectors per tile: independent fma chains */
#define ATT_CT 4       /* column vectors per P.V pass */

typedef struct att_job {
    const lk_attention_args *a;
    int64_t ns;   /* slices per KV head */
    float *buf;   /* per thread: `per` floats */
    int64_t per;  /* ATT_NH rows of scores (lp each), ATT_NH widened q rows */
    int64_t lp;   /* cache_len rounded up to the tile's keys */
} att_job;

/* Scores of nh (compile-time) heads against keys [0, n): e[h][j] = dot(q_h,
 * k_j) * scale; e rows have room up to n rounded up to the tile. */
LK_INLINE void att_scores(const int nh, const lk_attention_args *a, const float *const *q,
                          float *const *e, const char *kb, int64_t n)
{
    const int64_t hd = a->head_dim, es = dt_size(a->k.dtype);
    const lk_dtype kdt = a->k.dtype;
    const vf scale = vf_set1(a->scale);
    float kt[ATT_HD_MAX * ATT_KT * VW] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < n; j0 += ATT_KT * VW) {
        const int64_t w = n - j0 < ATT_KT * VW ? n - j0 : ATT_KT * VW;
        /* the tile: kt[d][l] = k[j0 + l][d]; lanes past n read nothing */
        for (int64_t l = 0; l < w; l++) {
            const void *row = kb + (j0 + l) * a->k.ld * es;
            if (kdt == LK_F32) {
                const float *r = (const float *)row;
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = r[d];
            } else {
                for (int64_t d = 0; d < hd; d++)
                    kt[d * ATT_KT * VW + l] = ld1(row, kdt, d);
            }
        }
        for (int64_t l = w; l < ATT_KT * VW; l++)
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

/* Softmax over e[0, n) in place: p_j = exp(e_j - mx) * (1 / s). */
static void att_softmax(float *e, int64_t n)
{
    const float mx = row_extreme(1, e, n);
    const vf vmx = vf_set1(mx);
    /* a finite mx: every t_j <= 0 and none NaN, sm_exp's condition */
    const int fast = mx - mx == 0.0f;
    for (int64_t i = 0; i < n; i += VW) {
        const int w = n - i < VW ? (int)(n - i) : VW;
        const vf t = vf_sub(vf_load_part(e + i, w, vmx), vmx);
        vf_store_part(e + i, w, fast ? sm_exp(t) : v_expf(t));
    }
    const vf r = vf_set1(1.0f / lane_sum(LANE_SUM, e, n, 0.0f));
    for (int64_t i = 0; i < n; i += VW) {
        const int w = n - i < VW ? (int)(n - i) : VW;
        vf_store_part(e + i, w, vf_mul(vf_load_part(e + i, w, vf_zero()), r));
    }
}

/* y[c] = store(sum over j of p_j * v[j][c]) for c in [0, hd). */
LK_INLINE void att_pv(const int f32, const lk_attention_args *a, const float *p, int64_t n,
                      const char *vb, int64_t yi)
{
    const int64_t hd = a->head_dim, ld = a->v.ld;
    const lk_dtype vdt = f32 ? LK_F32 : a->v.dtype;
    for (int64_t c0 = 0; c0 < hd; c0 += ATT_CT * VW) {
        int wv[ATT_CT];
        for (int c = 0; c < ATT_CT; c++) {
            const int64_t left = hd - c0 - c * VW;
            wv[c] = left <= 0 ? 0 : (left < VW ? (int)left : VW);
        }
        vf tot[ATT_CT] = {vf_zero()};
        for (int64_t j0 = 0; j0 < n; j0 += LK_KB) {
            const int64_t j1 = n - j0 < LK_KB ? n : j0 + LK_KB;
            vf acc[ATT_CT];
            for (int c = 0; c < ATT_CT; c++)
                acc[c] = vf_zero();
            if (wv[ATT_CT - 1] == VW) {
                for (int64_t j = j0; j < j1; j++) {
                    const vf pj = vf_bcast(p + j);
                    const int64_t vr = j * ld + c0;
                    for (int c = 0; c < ATT_CT; c++)
                        acc[c] = vf_fma(pj, ld_dt(vb, vdt, vr + c * VW), acc[c]);
                }
            } else {
                for (int64_t j = j0; j < j1; j++) {
                    const vf pj = vf_bcast(p + j);
                    const int64_t vr = j * ld + c0;
                    for (int c = 0; c < ATT_CT && wv[c] > 0; c++) {
                        const vf v = wv[c] == VW ? ld_dt(vb, vdt, vr + c * VW)
                                                 : ld_dt_part(vb, vdt, vr + c * VW, wv[c], vf_zero());
                        acc[c] = vf_fma(pj, v, acc[c]);
                    }
                }
            }
            for (int c = 0; c < ATT_CT; c++)
                tot[c] = j0 == 0 ? acc[c] : vf_add(tot[c], acc[c]);
        }
        for (int c = 0; c < ATT_CT && wv[c] > 0; c++) {
            if (wv[c] == VW)
                st_dt(a->y.data, a->y.dtype, yi + c0 + c * VW, tot[c]);
            else
                st_dt_part(a->y.data, a->y.dtype, yi + c0 + c * VW, wv[c], tot[c]);
        }
    }
}

static void att_items(void *p, int64_t i0, int64_t i1, int tid)
{
    const att_job *jb = (const att_job *)p;
    const lk_attention_args *a = jb->a;
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv, L = a->cache_len;
    float *base = jb->buf + (int64_t)tid * jb->per;
    float *e[ATT_NH], *qw[ATT_NH];
    for (int h = 0; h < ATT_NH; h++) {
        e[h] = base + h * jb->lp;
        qw[h] = base + ATT_NH * jb->lp + h * ((hd + 15) & ~(int64_t)15);
    }
    const int64_t kes = dt_size(a->k.dtype), ves = dt_size(a->v.dtype);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t sub = i % jb->ns, g = (i / jb->ns) % a->n_kv;
        const int64_t t = (i / jb->ns / a->n_kv) % a->tokens, b = i / jb->ns / a->n_kv / a->tokens;
        const int64_t h0 = g * group + sub * group / jb->ns;
        const int64_t h1 = g * group + (sub + 1) * group / jb->ns;
        const int64_t pp = ((const int32_t *)a->pos.data)[b * a->pos.batch_stride + t * a->pos.ld];
        const int64_t n = pp < 0 ? 0 : (pp + 1 < L ? pp + 1 : L); /* keys seen */
        const int64_t yrow = b * a->y.batch_stride + t * a->y.ld;
        if (n == 0) {
            for (int64_t c = h0 * hd; c < h1 * hd; c++)
                st1(a->y.data, a->y.dtype, yrow + c, 0.0f);
            continue;
        }
        const char *kb = (const char *)a->k.data + (b * a->k.batch_stride + g * hd) * kes;
        const char *vb = (const char *)a->v.data + (b * a->v.batch_stride + g * hd) * ves;
        for (int64_t hs = h0; hs < h1; hs += ATT_NH) {
            const int nh = h1 - hs < ATT_NH ? (int)(h1 - hs) : ATT_NH;
            const int64_t qrow = b * a->q.batch_stride + t * a->q.ld;
            for (int h = 0; h < nh; h++)
                widen_span(a->q.data, a->q.dtype, qrow + (hs + h) * hd, hd, qw[h]);
            const float *const *qc = (const float *const *)qw;
            switch (nh) {
            case 1:
                att_scores(1, a, qc, e, kb, n);
                break;
            case 2:
                att_scores(2, a, qc, e, kb, n);
                break;
            case 3:
                att_scores(3, a, qc, e, kb, n);
                break;
            default:
                att_scores(4, a, qc, e, kb, n);
                break;
            }
            for (int h = 0; h < nh; h++) {
                att_softmax(e[h], n);
                if (a->v.dtype == LK_F32)
                    att_pv(1, a, e[h], n, vb, yrow + (hs + h) * hd);
                else
                    att_pv(0, a, e[h], n, vb, yrow + (hs + h) * hd);
            }
        }
    }
}

LK_CPU_DEFINE(attention, lk_attention_args)
{
    const lk_attention_args *a = args;
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    if (a->head_dim > ATT_HD_MAX)
        return lk_cpu_ref_attention(queue, a);
    const int64_t per_tok = a->batch * a->tokens * a->n_kv;
    if (per_tok == 0 || a->head_dim == 0)
        return LK_OK;
    const int64_t group = a->n_head / a->n_kv;
    const double work = 4.0 * (double)a->batch * (double)a->tokens * (double)a->n_head *
                        (double)a->head_dim * (double)(a->cache_len > 0 ? a->cache_len : 1);
    const int nt = lk_cpu_threads_for(q, work, per_tok * group);
    /* enough items for every thread a few times over, else whole groups
     * (which share the K tile) */
    int64_t ns = (4 * (int64_t)nt + per_tok - 1) / per_tok;
    if (ns > group)
        ns = group;
    if (ns < 1)
        ns = 1;
    att_job j = {a, ns, NULL, 0, 0};
    j.lp = (a->cache_len + ATT_KT * VW - 1) / (ATT_KT * VW) * (ATT_KT * VW);
    j.per = ATT_NH * j.lp + ATT_NH * ((a->head_dim + 15) & ~(int64_t)15);
    j.per = (j.per + 15) & ~(int64_t)15;
    j.buf = (float *)lk_cpu_scratch(q, (size_t)nt * (size_t)j.per * sizeof(float), "lk_attention");
    if (j.buf == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    lk_cpu_for(nt, per_tok * ns, att_items, &j);
    return LK_OK;
}
