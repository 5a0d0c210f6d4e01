/* Lockstep CPU kernels: what the integer GEMMs share (docs/numerics.md
 * section 9): output tiles of up to QG_MT x QG_NT, threads over column
 * tiles (or row tiles when N is narrow), weight rows walked in blocks that
 * stay in cache while every row of x passes over them, and the
 * dequantising store of the reference (backends/ref/qgemm_epilogue.h) on
 * vectors.  Integer sums are exact in any order, so
 * the tiling is free; each op supplies the tile. */
#ifndef LK_CPU_KERNELS_QGEMM_H
#define LK_CPU_KERNELS_QGEMM_H

#include "backends/cpu/threads.h"

#define QG_MT 4                   /* x rows per tile */
#define QG_NT (VW == 16 ? 4 : 2)  /* weight rows per tile */
#define QG_BLOCK_BYTES (128 * 1024)
#define QG_BLOCK_ROWS 512         /* at most, per block of weight rows */

typedef struct qg_job qg_job;
/* out[i * ldo + j] = acc of (m0 + i, n0 + j), i < mt, j < nt. */
typedef void (*qg_tile_fn)(const qg_job *j, int64_t m0, int64_t n0, int mt, int nt,
                           int32_t *out, int64_t ldo);

/* name(j, m0, n0, mt, nt, out, ldo): the tile function `inner`, written
 * with mt and nt as its first two arguments, instantiated for every tile
 * shape so that each one keeps its accumulators in registers (at run time
 * only, against SIMDe: see LK_SIMDE_GENERIC). */
#define QG_CASE(inner, a, b)                          \
    case (a) * 8 + (b):                               \
        inner(a, b, j, m0, n0, out, ldo);             \
        break;
#define QG_CASES(inner, b) \
    QG_CASE(inner, 1, b) QG_CASE(inner, 2, b) QG_CASE(inner, 3, b) QG_CASE(inner, 4, b)
#if QG_NT > 2
#define QG_CASES_WIDE(inner) QG_CASES(inner, 3) QG_CASES(inner, 4)
#else
#define QG_CASES_WIDE(inner)
#endif
#define QG_DEFINE_TILE(name, inner)                                                     \
    static void name(const qg_job *j, int64_t m0, int64_t n0, int mt, int nt,          \
                     int32_t *out, int64_t ldo)                                        \
    {                                                                                  \
        if (LK_SIMDE_GENERIC) {                                                        \
            inner(mt, nt, j, m0, n0, out, ldo);                                        \
            return;                                                                    \
        }                                                                              \
        switch (mt * 8 + nt) {                                                         \
            QG_CASES(inner, 1) QG_CASES(inner, 2) QG_CASES_WIDE(inner)                 \
        default:                                                                       \
            break;                                                                     \
        }                                                                              \
    }

struct qg_job {
    const lk_qgemm_args *q;
    qg_tile_fn tile;
    int64_t wrow_bytes; /* bytes of one weight row that a tile reads */
    int by_rows;        /* threads split row tiles, not column tiles */
    const void *ctx;    /* the op's own data */
};

/* y[m, n0 .. n0 + cnt) from the accumulators: acc as int32 without scales,
 * else ((float)acc / x_scale[m]) * w_scale[n or 0], rounded once (then
 * added to y's old value, rounded once more, with LK_GEMM_ACCUMULATE). */
static void qg_store_row(const lk_qgemm_args *q, int64_t m, int64_t n0, int64_t cnt,
                         const int32_t *acc)
{
    const int64_t yi = m * q->y.ld + n0;
    if (q->x_scale.data == NULL) {
        memcpy((int32_t *)q->y.data + yi, acc, (size_t)cnt * sizeof *acc);
        return;
    }
    const float xs = ld1(q->x_scale.data, q->x_scale.dtype, m * q->x_scale.ld);
    const int per_n = q->w_scale.cols != 1;
    /* y f32 (the core's rule): y's old value plus the plain result, one
     * rounding: the bits of lk_binary ADD after the plain store */
    const int accumulate = (q->flags & LK_GEMM_ACCUMULATE) != 0;
    const vf vxs = vf_set1(xs);
    const vf ws1 = vf_set1(ld1(q->w_scale.data, q->w_scale.dtype, 0));
    int64_t i = 0;
    for (; i + VW <= cnt; i += VW) {
        vf ws = per_n ? ld_dt(q->w_scale.data, q->w_scale.dtype, n0 + i) : ws1;
        vf v = vf_mul(vf_div(vi_to_vf(vi_load(acc + i)), vxs), ws);
        if (accumulate)
            v = vf_add(ld_dt(q->y.data, q->y.dtype, yi + i), v);
        st_dt(q->y.data, q->y.dtype, yi + i, v);
    }
    for (; i < cnt; i++) {
        float ws = ld1(q->w_scale.data, q->w_scale.dtype, per_n ? n0 + i : 0);
        float v = ((float)acc[i] / xs) * ws;
        if (accumulate)
            v = ld1(q->y.data, q->y.dtype, yi + i) + v;
        st1(q->y.data, q->y.dtype, yi + i, v);
    }
}

static void qg_tiles(const qg_job *j, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    int64_t nblk = QG_BLOCK_BYTES / (j->wrow_bytes > 0 ? j->wrow_bytes : 1);
    nblk = nblk < QG_NT ? QG_NT : nblk > QG_BLOCK_ROWS ? QG_BLOCK_ROWS : nblk / QG_NT * QG_NT;
    int32_t out[QG_MT * QG_BLOCK_ROWS];
    for (int64_t nb = n0; nb < n1; nb += nblk) {
        const int64_t ne = n1 - nb < nblk ? n1 : nb + nblk;
        for (int64_t m = m0; m < m1; m += QG_MT) {
            const int mt = (int)(m1 - m < QG_MT ? m1 - m : QG_MT);
            for (int64_t n = nb; n < ne; n += QG_NT) {
                const int nt = (int)(ne - n < QG_NT ? ne - n : QG_NT);
                j->tile(j, m, n, mt, nt, out + (n - nb), QG_BLOCK_ROWS);
            }
            for (int a = 0; a < mt; a++)
                qg_store_row(j->q, m + a, nb, ne - nb, out + a * QG_BLOCK_ROWS);
        }
    }
}

static void qg_part(void *p, int64_t t0, int64_t t1, int tid)
{
    const qg_job *j = (const qg_job *)p;
    const lk_qgemm_args *q = j->q;
    (void)tid;
    if (j->by_rows) {
        int64_t m1 = t1 * QG_MT < q->m ? t1 * QG_MT : q->m;
        qg_tiles(j, t0 * QG_MT, m1, 0, q->n);
    } else {
        int64_t n1 = t1 * QG_NT < q->n ? t1 * QG_NT : q->n;
        qg_tiles(j, 0, q->m, t0 * QG_NT, n1);
    }
}

static void qg_run(lk_cpu_queue *cq, qg_job *j)
{
    const lk_qgemm_args *q = j->q;
    const int64_t mtiles = (q->m + QG_MT - 1) / QG_MT, ntiles = (q->n + QG_NT - 1) / QG_NT;
    const double work = 2.0 * (double)q->m * (double)q->n * (double)q->k;
    j->by_rows = ntiles < 2 * (int64_t)cq->nthreads && mtiles > ntiles;
    const int64_t items = j->by_rows ? mtiles : ntiles;
    lk_cpu_for(lk_cpu_threads_for(cq, work, items), items, qg_part, j);
}

#endif
