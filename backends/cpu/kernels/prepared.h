/* Lockstep CPU kernels: prepared weights (include/lockstep/weights.h), the
 * layouts the CPU kernels read without repacking.
 *
 * Float weights (N x K, f32/bf16/f16): panels of `nr` rows (the variant's
 * GEMM_NR), each panel k-major, element (k, r) of panel p at
 * (p * K + k) * nr + r, in the weights' own dtype (bits copied, widened
 * when used exactly as the unprepared path widens them), rows past N zero.
 * That is the B panel of the GEMM micro-kernel for the whole of K: an f32
 * GEMM reads it in place, a bf16/f16 GEMV streams half the bytes.
 * bf16 rows of a panel are kept in chunks of `pair` (two f32 vectors'
 * worth) with the chunk's two halves interleaved: column c + i at 2 i and
 * column c + pair / 2 + i at 2 i + 1, so that one integer vector load
 * widens to both halves with a shift and a mask, no lane shuffles (a
 * shuffle port bounds the plain widening at about 50 GB/s per Zen 4 core).
 *
 * Ternary weights (LK_T2): the canonical packed rows, each padded with
 * zero bytes to `ldw` bytes (a multiple of 64), so that every row is whole
 * vectors (x is zero past K, so the padding codes add nothing) and the
 * kernels need no tail copies, then interleaved in blocks of `il` rows
 * (LK_T2_IL, a GEMM tile's weight rows): the vector of `ilb` bytes c of
 * row r lies at (r / il * il * ldw) + (c * il + r % il) * ilb, rows past N
 * zero.  A tile's rows are then one stream in memory order, which is what
 * the hardware prefetchers follow from memory, and the GEMV loads each
 * vector of x once for `il` rows instead of once per row.  The scale is
 * copied. */
#ifndef LK_CPU_KERNELS_PREPARED_H
#define LK_CPU_KERNELS_PREPARED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep/driver.h>

#include "backends/ref/t2.h"

typedef struct lk_cpu_weights {
    lk_dtype dtype;
    int64_t n, k;
    int nr;             /* float: rows per panel */
    int pair;           /* bf16: elements per interleaved chunk (above) */
    int64_t ldw;        /* LK_T2: bytes per row */
    int il, ilb;        /* LK_T2: rows per interleaved block, bytes per vector */
    void *data;         /* 64-byte aligned */
    float *scale;       /* LK_T2: w_scale, scale_cols values */
    int64_t scale_cols;
} lk_cpu_weights;

static inline void lk_cpu_weights_free(lk_cpu_weights *w)
{
    if (!w)
        return;
    free(w->data);
    free(w->scale);
    free(w);
}

/* 64-byte aligned, n rounded up to a multiple of 64 (aligned_alloc). */
static inline void *lk_cpu_weights_alloc(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

/* A GEMM tile's weight rows on this variant's vectors (qgemm.h's QG_NT):
 * the ternary blocks interleave this many rows. */
#define LK_T2_IL (VW == 16 ? 4 : 2)

/* Rows [r0, r1) of the canonical packed w into the interleaved layout;
 * rows from w->rows up to a whole block are zero. */
static inline void lk_cpu_weights_t2_rows(const lk_tensor *w, lk_cpu_weights *p, int64_t r0,
                                          int64_t r1)
{
    const int64_t rowbytes = (w->cols + 3) / 4, ilb = p->ilb, nv = p->ldw / ilb;
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *d = (uint8_t *)p->data + r / p->il * p->il * p->ldw + r % p->il * ilb;
        const uint8_t *s = r < w->rows ? lk_t2_row(w, r) : NULL;
        for (int64_t c = 0; c < nv; c++, d += p->il * ilb) {
            const int64_t have = s == NULL ? 0 : rowbytes - c * ilb;
            const int64_t cnt = have < 0 ? 0 : have > ilb ? ilb : have;
            if (cnt > 0)
                memcpy(d, s + c * ilb, (size_t)cnt);
            memset(d + cnt, 0, (size_t)(ilb - cnt));
        }
    }
}

/* Panels [p0, p1) of the float w (element size es) into the panel layout. */
static inline void lk_cpu_weights_panels(const lk_tensor *w, lk_cpu_weights *p, int64_t p0,
                                         int64_t p1)
{
    const int nr = p->nr;
    const int64_t K = w->cols, es = w->dtype == LK_F32 ? 4 : 2;
    for (int64_t q = p0; q < p1; q++) {
        char *d = (char *)p->data + q * K * nr * es;
        for (int r = 0; r < nr; r++) {
            const int64_t n = q * nr + r;
            int at = r; /* r's place in its k-row: interleaved chunks for bf16 */
            if (w->dtype == LK_BF16) {
                const int h = p->pair / 2, c = r / p->pair * p->pair, i = r - c;
                at = c + (i < h ? 2 * i : 2 * (i - h) + 1);
            }
            if (n >= w->rows) {
                for (int64_t k = 0; k < K; k++)
                    memset(d + (k * nr + at) * es, 0, (size_t)es);
                continue;
            }
            const char *s = (const char *)w->data + n * w->ld * es;
            if (es == 4)
                for (int64_t k = 0; k < K; k++)
                    ((uint32_t *)(void *)d)[k * nr + r] = ((const uint32_t *)(const void *)s)[k];
            else
                for (int64_t k = 0; k < K; k++)
                    ((uint16_t *)(void *)d)[k * nr + at] = ((const uint16_t *)(const void *)s)[k];
        }
    }
}

#endif
