/* Lockstep CPU kernels: int8 x int8 GEMM (docs/numerics.md section 9),
 * acc[m, n] = sum_k a[m, k] * b[n, k] exactly in int32.
 *
 * With VNNI, vpdpbusd multiplies unsigned by signed bytes: a is flipped to
 * a + 128 (a ^ 0x80), so the dot is sum a * b + 128 * sum b, and the
 * second term (sum b per row, from one more vpdpbusd against ones) is
 * taken off at the end.  Without VNNI the bytes are widened to int16 and
 * vpmaddwd adds pairs of products into int32; vpmaddubsw, which saturates,
 * is not used.  Intermediates wrap modulo 2^32 and the true acc is in the
 * int32 range (K <= LK_INT8_MAX_K), so the result is exact. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/kernels/qgemm.h"

#if LK_VEC_VNNI
#define I8_STEP (4 * VW) /* bytes per step: one vector */
#else
#define I8_STEP 16       /* bytes per step: widened to 16-bit lanes */
#endif

typedef struct i8_ctx {
    int64_t steps, full; /* steps over K; those that lie inside every row */
    const int32_t *bsum; /* VNNI: 128 * sum_k b[n, k], mod 2^32 */
} i8_ctx;

/* One step of I8_STEP bytes at a + m * lda and b[n]. */
LK_INLINE void i8_step(const int mt, const int nt, vi acc[QG_MT][QG_NT], const int8_t *a,
                       int64_t lda, const int8_t *const *b)
{
#if LK_VEC_VNNI
    const vi flip = vi_set1_8((int8_t)0x80);
    vi bv[QG_NT];
LK_UNROLL(4)
    for (int n = 0; n < nt; n++)
        bv[n] = vi_load(b[n]);
LK_UNROLL(4)
    for (int m = 0; m < mt; m++) {
        const vi av = vi_xor(vi_load(a + m * lda), flip);
LK_UNROLL(4)
        for (int n = 0; n < nt; n++)
            acc[m][n] = vi_dot_u8s8(acc[m][n], av, bv[n]);
    }
#else
LK_UNROLL(4)
    for (int m = 0; m < mt; m++)
LK_UNROLL(4)
        for (int n = 0; n < nt; n++)
            acc[m][n] = vi_dot16_s8s8(acc[m][n], a + m * lda, b[n]);
#endif
}

LK_INLINE void i8_tile_mn(const int mt, const int nt, const qg_job *j, int64_t m0, int64_t n0,
                          int32_t *out, int64_t ldo)
{
    const i8_ctx *c = (const i8_ctx *)j->ctx;
    const lk_qgemm_args *q = j->q;
    const int64_t lda = q->x.ld, ldb = q->w.ld, k = q->k;
    const int8_t *a = (const int8_t *)q->x.data + m0 * lda;
    const int8_t *b0 = (const int8_t *)q->w.data + n0 * ldb;
    vi acc[QG_MT][QG_NT];
    for (int m = 0; m < QG_MT; m++)
        for (int n = 0; n < QG_NT; n++)
            acc[m][n] = vi_zero();
    const int8_t *b[QG_NT];
    int64_t s = 0;
    for (; s < c->full; s++) {
        for (int n = 0; n < nt; n++)
            b[n] = b0 + n * ldb + s * I8_STEP;
        i8_step(mt, nt, acc, a + s * I8_STEP, lda, b);
    }
    if (s < c->steps) { /* the rows' last bytes, copied and zero-padded */
        const int64_t left = k - s * I8_STEP;
        int8_t ta[QG_MT][I8_STEP], tb[QG_NT][I8_STEP];
        memset(ta, 0, sizeof ta);
        memset(tb, 0, sizeof tb);
        for (int m = 0; m < mt; m++)
            memcpy(ta[m], a + m * lda + s * I8_STEP, (size_t)left);
        for (int n = 0; n < nt; n++) {
            memcpy(tb[n], b0 + n * ldb + s * I8_STEP, (size_t)left);
            b[n] = tb[n];
        }
        i8_step(mt, nt, acc, &ta[0][0], I8_STEP, b);
    }
    for (int m = 0; m < mt; m++)
        for (int n = 0; n < nt; n++) {
            uint32_t v = (uint32_t)vi_hsum(acc[m][n]);
#if LK_VEC_VNNI
            v -= (uint32_t)c->bsum[n0 + n];
#endif
            out[m * ldo + n] = (int32_t)v;
        }
}

QG_DEFINE_TILE(i8_tile, i8_tile_mn)

#if LK_VEC_VNNI
/* 128 * sum_k b[n, k] for the rows n0 .. n1 - 1 (exact: |sum| <= 2^24). */
static void i8_bsum_rows(void *p, int64_t n0, int64_t n1, int tid)
{
    const qg_job *j = (const qg_job *)p;
    const lk_qgemm_args *q = j->q;
    int32_t *bsum = (int32_t *)((const i8_ctx *)j->ctx)->bsum;
    const vi ones = vi_set1_8(1);
    (void)tid;
    for (int64_t n = n0; n < n1; n++) {
        const int8_t *b = (const int8_t *)q->w.data + n * q->w.ld;
        vi acc = vi_zero();
        int64_t k = 0;
        for (; k + I8_STEP <= q->k; k += I8_STEP)
            acc = vi_dot_u8s8(acc, ones, vi_load(b + k));
        int32_t s = vi_hsum(acc);
        for (; k < q->k; k++)
            s += b[k];
        bsum[n] = (int32_t)((uint32_t)s * 128u);
    }
}
#endif

LK_CPU_DEFINE(int8_gemm, lk_qgemm_args)
{
    lk_cpu_queue *cq = (lk_cpu_queue *)queue;
    const lk_qgemm_args *q = args;
    if (q->m == 0 || q->n == 0)
        return LK_OK;
    i8_ctx c;
    c.steps = (q->k + I8_STEP - 1) / I8_STEP;
    c.full = q->k / I8_STEP;
    c.bsum = NULL;
    qg_job j = {q, i8_tile, q->k, 0, &c};
#if LK_VEC_VNNI
    c.bsum = (const int32_t *)lk_cpu_scratch(cq, (size_t)q->n * sizeof(int32_t), "lk_int8_gemm");
    if (c.bsum == NULL)
        return LK_ERR_OUT_OF_MEMORY;
    lk_cpu_for(lk_cpu_threads_for(cq, (double)q->n * (double)q->k, q->n), q->n, i8_bsum_rows,
               &j);
#endif
    qg_run(cq, &j);
    return LK_OK;
}
