/* Lockstep CPU kernels: GEMM (docs/numerics.md section 4), in the BLIS
 * style: B packed in k-panels of GEMM_KC x GEMM_NC, A in blocks of
 * GEMM_MC x GEMM_KC, a GEMM_MR x GEMM_NR register micro-tile.
 *
 * The contract's order is kept by the micro-kernel: for each block of LK_KB
 * consecutive k it starts from zero accumulators, runs the fma chain with k
 * ascending, and then stores the block into the tile of totals (the very
 * first block) or adds it (every later one).  GEMM_KC is a multiple of
 * LK_KB, so k-panels never cut a block.  The totals live in C when C is f32
 * without ACCUMULATE, otherwise in a workspace; the epilogue then adds the
 * bias and C's old value and rounds once, after the last k-panel.
 *
 * Threads split independent output tiles only (column panels, or row
 * blocks: gemm_grid), so the bits do not depend on their number.  For
 * M <= GEMM_MR (GEMV and small batches) there is no shared packing at all:
 * each thread takes whole column panels and runs the micro-kernel over all
 * of K, or, for a transposed B (a linear layer's weights), transposes 8 x 8
 * blocks in registers and uses them at once (gemv_t_group).  Prepared
 * weights (prepared.h) are B already packed for the whole of K: the
 * micro-kernel reads them in place, widening bf16/f16 as it loads, so the
 * threads share no packing and never wait for each other. */
#include <stdlib.h>

#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/prepared.h"
#include "backends/cpu/threads.h"
#include "backends/host.h"
#include "backends/ref/ref.h"

#define GEMM_NV (GEMM_NR / VW)                /* vectors per tile row */
#define GEMM_KC (2 * LK_KB)                   /* B micro-panel: KC x NR in L1 */
#define GEMM_MC ((144 / GEMM_MR) * GEMM_MR)   /* A block: MC x KC in L2 */
#define GEMM_NC 3072                          /* B panel: KC x NC in L3 */
#define GEMM_WS_FLOATS (1 << 20)              /* workspace of totals: 4 MB */

/* X(r) for every micro-tile height r = 1 .. GEMM_MR. */
#define GEMM_MR_LIST_6(X) X(1) X(2) X(3) X(4) X(5) X(6)
#if GEMM_MR == 6
#define GEMM_MR_LIST(X) GEMM_MR_LIST_6(X)
#elif GEMM_MR == 12
#define GEMM_MR_LIST(X) GEMM_MR_LIST_6(X) X(7) X(8) X(9) X(10) X(11) X(12)
#else
#error "GEMM_MR: list its heights in GEMM_MR_LIST"
#endif

#if GEMM_KC % LK_KB != 0
#error "a k-panel must hold whole contract blocks"
#endif

typedef struct gemm_job {
    const lk_gemm_args *g;
    const char *a, *b, *bias; /* matrix `batch` of each */
    char *c;
    int64_t m, n, k;
    int64_t nc;        /* columns per jc block */
    float *bp;         /* shared packed B panels (KC x nc), two: k-panels alternate */
    float *ap;         /* per-thread A blocks (MC x KC), or GEMV: A (m x K) */
    float *ws;         /* totals when C cannot hold them (m x nc), else NULL */
    float *bbuf;       /* GEMV: per-thread K x NR B panels */
    const lk_cpu_weights *prep; /* B prepared (prepared.h), else NULL */
} gemm_job;

/* ---- the micro-kernel ---- */

#if GEMM_NV % 2 != 0
#error "prepared bf16 panels interleave pairs of vectors (prepared.h)"
#endif

/* Vector v (columns v VW .. v VW + VW) of the prepared k-row at element
 * index row: bf16 from its interleaved chunk (prepared.h) by a shift or a
 * mask of the same load, exactly the values ld_dt widens. */
LK_INLINE vf ld_w(const void *bp, const lk_dtype bdt, int64_t row, const int v)
{
    if (bdt == LK_BF16) {
        const vi w = vi_load((const uint16_t *)bp + row + (v / 2) * 2 * VW);
        return vi_as_vf(v % 2 == 0 ? vi_slli(w, 16) : vi_and(w, vi_set1(-65536)));
    }
    return ld_dt(bp, bdt, row + v * VW);
}

/* Totals t[i][0..NR) += the KB blocks of A (mr x kc, k-major, stride mr)
 * times B (kc x NR, row stride ldb elements of dtype bdt: f32, or a
 * prepared bf16/f16 panel widened as it is loaded); first: the first block
 * of the whole dot product, stored rather than added.  mr and bdt are
 * constants at each call site (ukernel_mr), so the accumulators live in
 * registers. */
LK_INLINE void ukernel(const int mr, const lk_dtype bdt, int64_t kc, const float *ap,
                       const void *bp, int64_t ldb, float *t, int64_t ldt, int first)
{
    for (int64_t k0 = 0; k0 < kc; k0 += LK_KB) {
        const int64_t kb = kc - k0 < LK_KB ? kc - k0 : LK_KB;
        const float *a = ap + k0 * mr;
        int64_t b = k0 * ldb;
        vf acc[GEMM_MR][GEMM_NV];
LK_UNROLL(16)
        for (int i = 0; i < mr; i++)
LK_UNROLL(4)
            for (int v = 0; v < GEMM_NV; v++)
                acc[i][v] = vf_zero();
        for (int64_t k = 0; k < kb; k++, a += mr, b += ldb) {
            vf bv[GEMM_NV];
LK_UNROLL(4)
            for (int v = 0; v < GEMM_NV; v++)
                bv[v] = ld_w(bp, bdt, b, v);
LK_UNROLL(16)
            for (int i = 0; i < mr; i++) {
                vf ai = vf_bcast(a + i);
LK_UNROLL(4)
                for (int v = 0; v < GEMM_NV; v++)
                    acc[i][v] = vf_fma(ai, bv[v], acc[i][v]);
            }
        }
        const int store = first && k0 == 0;
LK_UNROLL(16)
        for (int i = 0; i < mr; i++)
LK_UNROLL(4)
            for (int v = 0; v < GEMM_NV; v++) {
                float *ti = t + i * ldt + v * VW;
                vf_store(ti, store ? acc[i][v] : vf_add(vf_load(ti), acc[i][v]));
            }
    }
}

#define UK_CASE(r)                                                                   \
    case r:                                                                          \
        if (bdt == LK_F32)                                                           \
            ukernel(r, LK_F32, kc, ap, bp, ldb, t, ldt, first);                      \
        else if (bdt == LK_BF16)                                                     \
            ukernel(r, LK_BF16, kc, ap, bp, ldb, t, ldt, first);                     \
        else                                                                         \
            ukernel(r, LK_F16, kc, ap, bp, ldb, t, ldt, first);                      \
        break;

static void ukernel_mr(int mr, lk_dtype bdt, int64_t kc, const float *ap, const void *bp,
                       int64_t ldb, float *t, int64_t ldt, int first)
{
    if (LK_SIMDE_GENERIC) {
        ukernel(mr, bdt, kc, ap, bp, ldb, t, ldt, first);
        return;
    }
    switch (mr) {
        GEMM_MR_LIST(UK_CASE)
    default:
        break;
    }
}
#undef UK_CASE

/* ---- packing: widen to f32, transposes resolved ---- */

/* A rows i0 .. i0 + mr, k0 .. k0 + kc -> dst[k * mr + i]. */
static void pack_a(const gemm_job *j, int64_t i0, int mr, int64_t k0, int64_t kc, float *dst)
{
    const lk_tensor *A = &j->g->a;
    const lk_dtype dt = A->dtype;
    if (j->g->ta == LK_TRANS) { /* K x M: op(A)[i, k] at k * ld + i */
        for (int64_t k = 0; k < kc; k++)
            widen_span(j->a, dt, (k0 + k) * A->ld + i0, mr, dst + k * mr);
        return;
    }
    for (int i = 0; i < mr; i++) { /* M x K: row i contiguous in k */
        const int64_t s = (i0 + i) * A->ld + k0;
        switch (dt) {
        case LK_BF16:
            for (int64_t k = 0; k < kc; k++)
                dst[k * mr + i] = lk_from_bf16(((const uint16_t *)j->a)[s + k]);
            break;
        case LK_F16:
            for (int64_t k = 0; k < kc; k++)
                dst[k * mr + i] = lk_from_f16(((const uint16_t *)j->a)[s + k]);
            break;
        default:
            for (int64_t k = 0; k < kc; k++)
                dst[k * mr + i] = ((const float *)j->a)[s + k];
            break;
        }
    }
}

/* Software prefetch distance of pack_bt, per row: its eight rows at a
 * time are too many short streams for the hardware prefetchers. */
#define GEMM_PF_BYTES 512

/* pack_b of a transposed B (N x K, row n contiguous in k), elements of es
 * bytes (f16 when f16): 8 rows x 8 k at a time, transposed in registers. */
LK_INLINE void pack_bt(const gemm_job *j, int64_t n0, int nr, int64_t k0, int64_t kc,
                       float *dst, const int es, const int f16)
{
    const lk_tensor *B = &j->g->b;
    int jj = 0;
    for (; jj + 8 <= nr; jj += 8) {
        const char *rows = j->b + ((n0 + jj) * B->ld + k0) * es;
        const int64_t ldb = B->ld * es;
        int64_t k = 0;
        for (; k + 8 <= kc; k += 8) {
            __m256 r[8];
LK_UNROLL(8)
            for (int u = 0; u < 8; u++) {
                const char *p = rows + u * ldb + k * es;
                if ((k & 31) == 0)
                    __builtin_prefetch(p + GEMM_PF_BYTES);
                r[u] = lk_x86_load8(p, es, f16);
            }
            lk_x86_transpose8(r);
LK_UNROLL(8)
            for (int u = 0; u < 8; u++)
                _mm256_storeu_ps(dst + (k + u) * GEMM_NR + jj, r[u]);
        }
        for (; k < kc; k++)
            for (int u = 0; u < 8; u++)
                dst[k * GEMM_NR + jj + u] = ld1(j->b, B->dtype, (n0 + jj + u) * B->ld + k0 + k);
    }
    for (; jj < GEMM_NR; jj++) {
        if (jj >= nr) {
            for (int64_t k = 0; k < kc; k++)
                dst[k * GEMM_NR + jj] = 0.0f;
            continue;
        }
        const int64_t s = (n0 + jj) * B->ld + k0;
        for (int64_t k = 0; k < kc; k++)
            dst[k * GEMM_NR + jj] = ld1(j->b, B->dtype, s + k);
    }
}

/* B columns n0 .. n0 + nr (nr <= NR), k0 .. k0 + kc -> dst[k * NR + jj],
 * columns past nr zero. */
static void pack_b(const gemm_job *j, int64_t n0, int nr, int64_t k0, int64_t kc, float *dst)
{
    const lk_tensor *B = &j->g->b;
    const lk_dtype dt = B->dtype;
    if (j->g->tb == LK_NO_TRANS) { /* K x N: row k contiguous in n */
        for (int64_t k = 0; k < kc; k++) {
            const int64_t s = (k0 + k) * B->ld + n0;
            float *d = dst + k * GEMM_NR;
            if (nr == GEMM_NR) {
                for (int v = 0; v < GEMM_NV; v++)
                    vf_store(d + v * VW, ld_dt(j->b, dt, s + v * VW));
            } else {
                widen_span(j->b, dt, s, nr, d);
                memset(d + nr, 0, (size_t)(GEMM_NR - nr) * sizeof *d);
            }
        }
        return;
    }
    /* N x K: row n contiguous in k; 8 x 8 blocks transposed in registers */
    switch (dt) {
    case LK_BF16:
        pack_bt(j, n0, nr, k0, kc, dst, 2, 0);
        break;
    case LK_F16:
        pack_bt(j, n0, nr, k0, kc, dst, 2, 1);
        break;
    default:
        pack_bt(j, n0, nr, k0, kc, dst, 4, 0);
        break;
    }
}

/* ---- the epilogue: bias, C's old value, one rounding (section 4) ---- */

/* Rows mi .. mi + mr, columns ni .. ni + nr of C from the totals t. */
static void epilogue(const gemm_job *j, const float *t, int64_t ldt, int64_t mi, int64_t ni,
                     int mr, int nr)
{
    const lk_gemm_args *g = j->g;
    const int acc = (g->flags & LK_GEMM_ACCUMULATE) != 0;
    const lk_dtype cdt = g->c.dtype, bdt = g->bias.dtype;
    for (int i = 0; i < mr; i++) {
        const float *ti = t + i * ldt;
        const int64_t ci = (mi + i) * g->c.ld + ni;
        int c = 0;
        for (; c + VW <= nr; c += VW) {
            vf v = vf_load(ti + c);
            if (j->bias)
                v = vf_add(v, ld_dt(j->bias, bdt, ni + c));
            if (acc)
                v = vf_add(v, ld_dt(j->c, cdt, ci + c));
            st_dt(j->c, cdt, ci + c, v);
        }
        if (c < nr) {
            const int r = nr - c;
            vf v = vf_load_part(ti + c, r, vf_zero());
            if (j->bias)
                v = vf_add(v, ld_dt_part(j->bias, bdt, ni + c, r, vf_zero()));
            if (acc)
                v = vf_add(v, ld_dt_part(j->c, cdt, ci + c, r, vf_zero()));
            st_dt_part(j->c, cdt, ci + c, r, v);
        }
    }
}

/* One micro-tile of a k-panel: totals at (mi, ni), epilogue after the last
 * panel.  Edge tiles go through a full-size copy of their totals. */
static void tile(const gemm_job *j, const float *ap, const void *bp, lk_dtype bdt, int64_t mi,
                 int64_t ni, int mr, int nr, int64_t kc, int first, int last, int64_t jc)
{
    float *t;
    int64_t ldt;
    if (j->ws) {
        ldt = j->nc;
        t = j->ws + mi * ldt + (ni - jc);
    } else {
        ldt = j->g->c.ld;
        t = (float *)(void *)j->c + mi * ldt + ni;
    }
    if (nr == GEMM_NR) {
        ukernel_mr(mr, bdt, kc, ap, bp, GEMM_NR, t, ldt, first);
    } else {
        float tl[GEMM_MR * GEMM_NR];
        if (!first)
            for (int i = 0; i < mr; i++)
                memcpy(tl + i * GEMM_NR, t + i * ldt, (size_t)nr * sizeof *t);
        ukernel_mr(mr, bdt, kc, ap, bp, GEMM_NR, tl, GEMM_NR, first);
        for (int i = 0; i < mr; i++)
            memcpy(t + i * ldt, tl + i * GEMM_NR, (size_t)nr * sizeof *t);
    }
    if (last)
        epilogue(j, t, ldt, mi, ni, mr, nr);
}

/* ---- the blocked path ---- */

/* The team as a grid of rows x cols threads (rows * cols <= nt); each
 * thread owns a contiguous share of M (whole micro-rows, so the shares
 * differ by one micro-row at most) and of the column panels.  Columns
 * only when M is small beside each thread's share of N: a thread alone on
 * its columns packs its own B and never waits for the others, but packs
 * all of A, which then costs little beside its products.  Otherwise rows,
 * with B packed by everyone and shared through barriers. */
static void gemm_grid(int64_t mrows, int64_t npan, int64_t m, int64_t n, int nt, int *rows,
                      int *cols)
{
    *rows = 1;
    *cols = nt;
    if (npan >= 2 * (int64_t)nt && 2 * m * nt <= n)
        return;
    int best = 0;
    for (int r = (int)(mrows < nt ? mrows : nt); r >= 1; r--) {
        int c = nt / r;
        if (r * c > best) {
            best = r * c;
            *rows = r;
            *cols = c;
        }
    }
}

/* The B of column panel q (first column n0) for the k-panel at pc: packed,
 * or prepared weights in place (the micro-kernel widens bf16/f16 as it
 * loads them, so nothing is packed and the threads never wait for each
 * other). */
static const void *b_panel(const gemm_job *j, const float *bp, int64_t n0, int64_t q,
                           int64_t pc)
{
    if (j->prep)
        return (const char *)j->prep->data +
               (n0 / GEMM_NR * j->k + pc) * GEMM_NR * dt_size(j->prep->dtype);
    return bp + q * GEMM_KC * GEMM_NR;
}

static void gemm_body(void *p, int tid, int nt)
{
    const gemm_job *j = (const gemm_job *)p;
    float *ap = j->ap + (int64_t)tid * GEMM_MC * GEMM_KC;
    const int64_t mrows = (j->m + GEMM_MR - 1) / GEMM_MR;
    int rows, cols;
    gemm_grid(mrows, (j->nc + GEMM_NR - 1) / GEMM_NR, j->m, j->n, nt, &rows, &cols);
    const int busy = tid < rows * cols, shared = rows > 1 && !j->prep;
    const lk_dtype bdt = j->prep ? j->prep->dtype : LK_F32;
    int64_t r0 = 0, r1 = 0;
    if (busy)
        lk_cpu_part(mrows, tid / cols, rows, &r0, &r1);
    const int64_t m0 = r0 * GEMM_MR, m1 = r1 * GEMM_MR < j->m ? r1 * GEMM_MR : j->m;
    /* Shared B is packed into two buffers by turns, with one barrier per
     * k-panel, after the packing: a thread packs a buffer again only once
     * every thread has passed the barrier of the k-panel in between, so
     * has finished with it (and with the totals of the previous column
     * block).  A thread done early packs ahead instead of waiting. */
    int64_t turn = 0;
    for (int64_t jc = 0; jc < j->n; jc += j->nc) {
        const int64_t ncur = j->n - jc < j->nc ? j->n - jc : j->nc;
        const int64_t npan = (ncur + GEMM_NR - 1) / GEMM_NR;
        /* Without barriers a thread may run ahead into the next column
         * block: its share is then the same panels of every block (cut at
         * a narrow last one), so the totals it keeps in the workspace,
         * indexed within a block, are never another thread's. */
        int64_t q0 = 0, q1 = 0;
        if (busy)
            lk_cpu_part(shared ? npan : (j->nc + GEMM_NR - 1) / GEMM_NR, tid % cols, cols, &q0,
                        &q1);
        q1 = q1 < npan ? q1 : npan;
        q0 = q0 < q1 ? q0 : q1;
        for (int64_t pc = 0; pc < j->k; pc += GEMM_KC) {
            const int64_t kc = j->k - pc < GEMM_KC ? j->k - pc : GEMM_KC;
            const int first = pc == 0, last = pc + kc >= j->k;
            float *bp = j->bp + (turn++ & 1) * GEMM_KC * j->nc;
            int64_t b0 = q0, b1 = q1; /* shared: every thread packs a share of all of B */
            if (shared)
                lk_cpu_part(npan, tid, nt, &b0, &b1);
            for (int64_t q = b0; q < b1 && !j->prep; q++) {
                int64_t n0 = jc + q * GEMM_NR;
                int nr = (int)(j->n - n0 < GEMM_NR ? j->n - n0 : GEMM_NR);
                pack_b(j, n0, nr, pc, kc, bp + q * GEMM_KC * GEMM_NR);
            }
            if (shared)
                lk_cpu_barrier();
            for (int64_t ic = m0; ic < m1; ic += GEMM_MC) {
                const int64_t mc = m1 - ic < GEMM_MC ? m1 - ic : GEMM_MC;
                for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
                    int mr = (int)(mc - ir < GEMM_MR ? mc - ir : GEMM_MR);
                    pack_a(j, ic + ir, mr, pc, kc, ap + ir * kc);
                }
                for (int64_t q = q0; q < q1; q++) {
                    const int64_t n0 = jc + q * GEMM_NR;
                    const int nr = (int)(j->n - n0 < GEMM_NR ? j->n - n0 : GEMM_NR);
                    for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
                        const int mr = (int)(mc - ir < GEMM_MR ? mc - ir : GEMM_MR);
                        tile(j, ap + ir * kc, b_panel(j, bp, n0, q, pc), bdt, ic + ir, n0, mr,
                             nr, kc, first, last, jc);
                    }
                }
            }
        }
    }
}

/* ---- the GEMV path (M <= GEMM_MR) ---- */

/* Each thread takes whole column panels.  f32 B that is K x N is read in
 * place; any other B is packed one panel at a time for the whole of K, so
 * that the packing reads 8 rows of a transposed B (N x K weights) from end
 * to end: long streams the hardware prefetcher follows, where KB-sized
 * pieces of 32 rows would be too short for it. */
static void gemv_body(void *p, int tid, int nt)
{
    const gemm_job *j = (const gemm_job *)p;
    const lk_tensor *B = &j->g->b;
    const int mr = (int)j->m;
    const int direct = B->dtype == LK_F32 && j->g->tb == LK_NO_TRANS;
    float *bbuf = j->bbuf + (int64_t)tid * j->k * GEMM_NR;
    const int64_t npan = (j->n + GEMM_NR - 1) / GEMM_NR;
    int64_t q0, q1;
    lk_cpu_part(npan, tid, nt, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n0 = q * GEMM_NR;
        const int nr = (int)(j->n - n0 < GEMM_NR ? j->n - n0 : GEMM_NR);
        float t[GEMM_MR * GEMM_NR];
        if (direct && nr == GEMM_NR) {
            ukernel_mr(mr, LK_F32, j->k, j->ap, (const float *)(const void *)j->b + n0, B->ld, t,
                       GEMM_NR, 1);
        } else {
            pack_b(j, n0, nr, 0, j->k, bbuf);
            ukernel_mr(mr, LK_F32, j->k, j->ap, bbuf, GEMM_NR, t, GEMM_NR, 1);
        }
        epilogue(j, t, GEMM_NR, 0, n0, mr, nr);
    }
}

/* The GEMV of a transposed B (N x K: a linear layer's weights W, with
 * y = x W^T): 8 rows of B at a time, 8 x 8 blocks transposed in registers
 * and used at once, so each element of B is loaded once and nothing is
 * stored; the transposed columns serve every row of A.  Columns past the
 * last whole group of 8 go through the packed path. */
LK_INLINE void gemv_t_group(const int mr, const gemm_job *j, int64_t n0, const int es,
                            const int f16)
{
    const lk_tensor *B = &j->g->b;
    const int64_t ldb = B->ld * es, K = j->k;
    const char *rows = j->b + n0 * ldb;
    float tot[GEMM_MR * 8];
    for (int64_t k0 = 0; k0 < K; k0 += LK_KB) {
        const int64_t k1 = K - k0 < LK_KB ? K : k0 + LK_KB;
        __m256 acc[GEMM_MR];
LK_UNROLL(16)
        for (int m = 0; m < mr; m++)
            acc[m] = _mm256_setzero_ps();
        int64_t k = k0;
        for (; k + 8 <= k1; k += 8) {
            __m256 r[8];
LK_UNROLL(8)
            for (int u = 0; u < 8; u++) {
                const char *p = rows + u * ldb + k * es;
                if ((k & 31) == 0)
                    __builtin_prefetch(p + GEMM_PF_BYTES);
                r[u] = lk_x86_load8(p, es, f16);
            }
            lk_x86_transpose8(r);
            const float *a = j->ap + k * mr;
LK_UNROLL(8)
            for (int u = 0; u < 8; u++)
LK_UNROLL(16)
                for (int m = 0; m < mr; m++)
                    acc[m] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + u * mr + m), r[u], acc[m]);
        }
        for (; k < k1; k++) {
            float col[8];
            for (int u = 0; u < 8; u++)
                col[u] = ld1(j->b, B->dtype, (n0 + u) * B->ld + k);
            const __m256 c = _mm256_loadu_ps(col);
            for (int m = 0; m < mr; m++)
                acc[m] = _mm256_fmadd_ps(_mm256_broadcast_ss(j->ap + k * mr + m), c, acc[m]);
        }
        for (int m = 0; m < mr; m++) /* the first block stored, later ones added */
            _mm256_storeu_ps(tot + m * 8, k0 == 0 ? acc[m]
                                                  : _mm256_add_ps(_mm256_loadu_ps(tot + m * 8), acc[m]));
    }
    epilogue(j, tot, 8, 0, n0, mr, 8);
}

static void gemv_t_groups(const gemm_job *j, int64_t g0, int64_t g1)
{
    const int mr = (int)j->m;
    const lk_dtype dt = j->g->b.dtype;
    const int es = (int)dt_size(dt), f16 = dt == LK_F16;
    for (int64_t g = g0; g < g1; g++) {
        if (LK_SIMDE_GENERIC) {
            gemv_t_group(mr, j, g * 8, es, f16);
            continue;
        }
#define GT_CASE(r)                                                                   \
    case r:                                                                          \
        if (es == 4)                                                                 \
            gemv_t_group(r, j, g * 8, 4, 0);                                         \
        else                                                                         \
            gemv_t_group(r, j, g * 8, 2, f16);                                       \
        break;
        switch (mr) {
            GEMM_MR_LIST(GT_CASE)
        default:
            break;
        }
#undef GT_CASE
    }
}

static void gemv_t_body(void *p, int tid, int nt)
{
    const gemm_job *j = (const gemm_job *)p;
    const int64_t groups = j->n / 8;
    int64_t g0, g1;
    lk_cpu_part(groups, tid, nt, &g0, &g1);
    gemv_t_groups(j, g0, g1);
    if (tid == nt - 1 && groups * 8 < j->n) {
        const int64_t n0 = groups * 8;
        const int nr = (int)(j->n - n0);
        float *bbuf = j->bbuf + (int64_t)tid * j->k * GEMM_NR;
        float t[GEMM_MR * GEMM_NR];
        pack_b(j, n0, nr, 0, j->k, bbuf);
        ukernel_mr((int)j->m, LK_F32, j->k, j->ap, bbuf, GEMM_NR, t, GEMM_NR, 1);
        epilogue(j, t, GEMM_NR, 0, n0, (int)j->m, nr);
    }
}

/* ---- prepared weights (prepared.h) ---- */

/* ukernel for one row of A over two prepared panels at once: with a
 * single row, one panel gives only GEMM_NV independent fma chains, fewer
 * than the fma latency times its throughput.  Each column's chain is the
 * one ukernel runs. */
LK_INLINE void ukernel_w1x2(const lk_dtype bdt, int64_t K, const float *ap, const void *bp0,
                            const void *bp1, float *t0, float *t1)
{
    for (int64_t k0 = 0; k0 < K; k0 += LK_KB) {
        const int64_t kb = K - k0 < LK_KB ? K - k0 : LK_KB;
        const float *a = ap + k0;
        int64_t bi = k0 * GEMM_NR;
        vf acc0[GEMM_NV], acc1[GEMM_NV];
LK_UNROLL(4)
        for (int v = 0; v < GEMM_NV; v++)
            acc0[v] = acc1[v] = vf_zero();
        for (int64_t k = 0; k < kb; k++, a++, bi += GEMM_NR) {
            const vf ai = vf_bcast(a);
LK_UNROLL(4)
            for (int v = 0; v < GEMM_NV; v++) {
                acc0[v] = vf_fma(ai, ld_w(bp0, bdt, bi, v), acc0[v]);
                acc1[v] = vf_fma(ai, ld_w(bp1, bdt, bi, v), acc1[v]);
            }
        }
LK_UNROLL(4)
        for (int v = 0; v < GEMM_NV; v++) {
            float *u0 = t0 + v * VW, *u1 = t1 + v * VW;
            vf_store(u0, k0 == 0 ? acc0[v] : vf_add(vf_load(u0), acc0[v]));
            vf_store(u1, k0 == 0 ? acc1[v] : vf_add(vf_load(u1), acc1[v]));
        }
    }
}

static void ukernel_w1x2_dt(lk_dtype bdt, int64_t K, const float *ap, const void *bp0,
                            const void *bp1, float *t0, float *t1)
{
    switch (bdt) {
    case LK_BF16:
        ukernel_w1x2(LK_BF16, K, ap, bp0, bp1, t0, t1);
        break;
    case LK_F16:
        ukernel_w1x2(LK_F16, K, ap, bp0, bp1, t0, t1);
        break;
    default:
        ukernel_w1x2(LK_F32, K, ap, bp0, bp1, t0, t1);
        break;
    }
}

/* GEMV on prepared weights: each thread takes whole panels and streams
 * them from end to end, nothing packed or transposed; a single row of A
 * goes two panels at a time (ukernel_w1x2). */
static void gemv_p_body(void *p, int tid, int nt)
{
    const gemm_job *j = (const gemm_job *)p;
    const lk_cpu_weights *w = j->prep;
    const int mr = (int)j->m;
    const int64_t npan = (j->n + GEMM_NR - 1) / GEMM_NR, es = dt_size(w->dtype);
    const int64_t pbytes = j->k * GEMM_NR * es;
    int64_t q0, q1;
    lk_cpu_part(npan, tid, nt, &q0, &q1);
    if (mr == 1) {
        for (; q0 + 2 <= q1; q0 += 2) {
            const int64_t n0 = q0 * GEMM_NR;
            const int nr = (int)(j->n - n0 - GEMM_NR < GEMM_NR ? j->n - n0 - GEMM_NR : GEMM_NR);
            const char *bp = (const char *)w->data + q0 * pbytes;
            float t[2 * GEMM_NR];
            ukernel_w1x2_dt(w->dtype, j->k, j->ap, bp, bp + pbytes, t, t + GEMM_NR);
            epilogue(j, t, GEMM_NR, 0, n0, 1, GEMM_NR);
            epilogue(j, t + GEMM_NR, GEMM_NR, 0, n0 + GEMM_NR, 1, nr);
        }
    }
    for (int64_t q = q0; q < q1; q++) {
        const int64_t n0 = q * GEMM_NR;
        const int nr = (int)(j->n - n0 < GEMM_NR ? j->n - n0 : GEMM_NR);
        float t[GEMM_MR * GEMM_NR];
        ukernel_mr(mr, w->dtype, j->k, j->ap, (const char *)w->data + q * pbytes, GEMM_NR, t,
                   GEMM_NR, 1);
        epilogue(j, t, GEMM_NR, 0, n0, mr, nr);
    }
}

/* lk_gemm, or with prep the same product on prepared B (N x K). */
static lk_status gemm_run(lk_cpu_queue *q, const lk_gemm_args *g, const lk_cpu_weights *prep)
{
    if (g->m == 0 || g->n == 0)
        return LK_OK;
    if (g->k == 0) /* +0 (+ bias) (+ C): nothing to multiply */
        return lk_ref_gemm(g);

    gemm_job j;
    memset(&j, 0, sizeof j);
    j.g = g;
    j.m = g->m;
    j.n = g->n;
    j.k = g->k;
    j.prep = prep;
    const double flops = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    const int gemv = g->m <= GEMM_MR;
    const int64_t npan = (g->n + GEMM_NR - 1) / GEMM_NR;
    int nt;
    size_t floats, ws = 0;
    if (gemv && prep) {
        nt = lk_cpu_threads_for(q, flops, npan);
        floats = (size_t)(g->m * g->k);
    } else if (gemv) {
        nt = lk_cpu_threads_for(q, flops, g->tb == LK_TRANS ? g->n / 8 + 1 : npan);
        floats = (size_t)(g->m * g->k) + (size_t)nt * (size_t)g->k * GEMM_NR;
    } else {
        const int c_holds = g->c.dtype == LK_F32 && !(g->flags & LK_GEMM_ACCUMULATE);
        j.nc = GEMM_NC;
        if (!c_holds) {
            int64_t w = GEMM_WS_FLOATS / g->m / GEMM_NR * GEMM_NR;
            j.nc = w < GEMM_NR ? GEMM_NR : w < GEMM_NC ? w : GEMM_NC;
        }
        if (j.nc > npan * GEMM_NR)
            j.nc = npan * GEMM_NR;
        nt = lk_cpu_threads_for(q, flops, npan * ((g->m + GEMM_MR - 1) / GEMM_MR));
        ws = c_holds ? 0 : (size_t)g->m * (size_t)j.nc;
        floats = 2 * (size_t)GEMM_KC * (size_t)j.nc + (size_t)nt * GEMM_MC * GEMM_KC + ws;
    }
    float *mem = (float *)lk_cpu_scratch(q, floats * sizeof(float), prep ? "lk_linear" : "lk_gemm");
    if (mem == NULL)
        return LK_ERR_OUT_OF_MEMORY;

    for (int64_t b = 0; b < g->batch; b++) {
        j.a = (const char *)g->a.data + b * g->a.batch_stride * dt_size(g->a.dtype);
        j.b = prep ? NULL
                   : (const char *)g->b.data + b * g->b.batch_stride * dt_size(g->b.dtype);
        j.c = (char *)g->c.data + b * g->c.batch_stride * dt_size(g->c.dtype);
        j.bias = g->bias.data == NULL ? NULL
                 : (const char *)g->bias.data + b * g->bias.batch_stride * dt_size(g->bias.dtype);
        if (gemv) {
            j.ap = mem;
            j.bbuf = prep ? NULL : mem + g->m * g->k;
            pack_a(&j, 0, (int)g->m, 0, g->k, j.ap);
            lk_cpu_team(nt, prep ? gemv_p_body : g->tb == LK_TRANS ? gemv_t_body : gemv_body, &j);
        } else {
            j.bp = mem;
            j.ap = mem + 2 * GEMM_KC * j.nc;
            j.ws = ws ? j.ap + (int64_t)nt * GEMM_MC * GEMM_KC : NULL;
            lk_cpu_team(nt, gemm_body, &j);
        }
    }
    return LK_OK;
}

LK_CPU_DEFINE(gemm, lk_gemm_args) { return gemm_run((lk_cpu_queue *)queue, args, NULL); }

typedef struct wp_job {
    const lk_tensor *w;
    lk_cpu_weights *p;
} wp_job;

static void wp_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const wp_job *j = (const wp_job *)v;
    (void)tid;
    if (j->p->dtype == LK_T2)
        lk_cpu_weights_t2_rows(j->w, j->p, r0, r1);
    else
        lk_cpu_weights_panels(j->w, j->p, r0, r1);
}

/* The weights slots of every variant: the float layout follows this
 * variant's GEMM_NR, the ternary one its vector and tile widths
 * (prepared.h). */
lk_status LK_CPU_KERNEL(weights_prepare)(void *queue, const lk_weights_args *args,
                                         void **prepared);
lk_status LK_CPU_KERNEL(weights_prepare)(void *queue, const lk_weights_args *args,
                                         void **prepared)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const lk_tensor *w = &args->w;
    lk_cpu_weights *p = (lk_cpu_weights *)calloc(1, sizeof *p);
    if (p == NULL)
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY, "lk_weights_prepare: out of host memory");
    p->dtype = w->dtype;
    p->n = w->rows;
    p->k = w->cols;
    p->nr = GEMM_NR;
    p->pair = 2 * VW;
    int64_t items;
    size_t bytes;
    if (w->dtype == LK_T2) {
        p->ldw = ((w->cols + 3) / 4 + 63) / 64 * 64;
        p->il = LK_T2_IL;
        p->ilb = 4 * VW;
        items = (w->rows + p->il - 1) / p->il * p->il;
        bytes = (size_t)items * (size_t)p->ldw;
        p->scale_cols = args->w_scale.cols;
        p->scale = (float *)malloc((size_t)p->scale_cols * sizeof(float));
        if (p->scale != NULL)
            for (int64_t i = 0; i < p->scale_cols; i++)
                p->scale[i] = ((const float *)args->w_scale.data)[i];
    } else {
        items = (w->rows + GEMM_NR - 1) / GEMM_NR;
        bytes = (size_t)items * GEMM_NR * (size_t)w->cols * (size_t)dt_size(w->dtype);
    }
    p->data = lk_cpu_weights_alloc(bytes);
    if (p->data == NULL || (w->dtype == LK_T2 && p->scale == NULL)) {
        lk_cpu_weights_free(p);
        return lk_kernel_error(LK_ERR_OUT_OF_MEMORY,
                               "lk_weights_prepare: %zu bytes of host memory not available", bytes);
    }
    wp_job j = {w, p};
    lk_cpu_for(lk_cpu_threads_for(q, (double)bytes, items), items, wp_rows, &j);
    *prepared = p;
    return LK_OK;
}

void LK_CPU_KERNEL(weights_destroy)(void *dev, void *prepared);
void LK_CPU_KERNEL(weights_destroy)(void *dev, void *prepared)
{
    (void)dev;
    lk_cpu_weights_free((lk_cpu_weights *)prepared);
}

LK_CPU_DEFINE(linear, lk_linear_args)
{
    const lk_cpu_weights *w = (const lk_cpu_weights *)args->prepared;
    if (w->dtype == LK_T2 || w->nr != GEMM_NR)
        return lk_kernel_error(LK_ERR_INTERNAL, "lk_linear: weights prepared for another kernel");
    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    g.ta = LK_NO_TRANS;
    g.tb = LK_TRANS;
    g.m = args->m;
    g.n = args->n;
    g.k = args->k;
    g.batch = 1;
    g.flags = args->flags;
    g.a = args->x;
    g.b = lk_mat(NULL, w->dtype, w->n, w->k);
    g.c = args->y;
    g.bias = args->bias;
    return gemm_run((lk_cpu_queue *)queue, &g, w);
}
