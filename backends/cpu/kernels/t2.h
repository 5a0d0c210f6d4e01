/* Lockstep CPU kernels: rows of the LK_T2 packed ternary format
 * (docs/formats.md) on vectors.  A 32-bit lane holds the four int8 values
 * of one packed byte; the scalar element access of backends/ref/t2.h does
 * the tails (and the padding codes of a row's last byte). */
#ifndef LK_CPU_KERNELS_T2_H
#define LK_CPU_KERNELS_T2_H

#include "backends/ref/t2.h"

/* v[0 .. cols), each in {-1, 0, 1}, into the bytes of row. */
static inline void t2_pack_row(const int8_t *v, int64_t cols, uint8_t *row)
{
    const vi one = vi_set1_8(1);
    int64_t c = 0;
    for (; c + 4 * VW <= cols; c += 4 * VW) {
        vi d = vi_add8(vi_load(v + c), one); /* codes c0 | c1 << 8 | ... */
        vi b = vi_or(vi_or(vi_and(d, vi_set1(0x03)), vi_and(vi_srli(d, 6), vi_set1(0x0c))),
                     vi_or(vi_and(vi_srli(d, 12), vi_set1(0x30)),
                           vi_and(vi_srli(d, 18), vi_set1(0xc0))));
        vi_store_u8(row + c / 4, b);
    }
    if (c < cols)
        lk_t2_pack_row(v + c, cols - c, row + c / 4);
}

/* The values code - 1 of row's first cols elements into out. */
static inline void t2_unpack_row(const uint8_t *row, int64_t cols, int8_t *out)
{
    const vi one = vi_set1_8(1);
    int64_t c = 0;
    for (; c + 4 * VW <= cols; c += 4 * VW) {
        vi d = vi_load_u8(row + c / 4);
        vi o = vi_or(vi_or(vi_and(d, vi_set1(0x03)), vi_and(vi_slli(d, 6), vi_set1(0x300))),
                     vi_or(vi_and(vi_slli(d, 12), vi_set1(0x30000)),
                           vi_and(vi_slli(d, 18), vi_set1(0x3000000))));
        vi_store(out + c, vi_sub8(o, one));
    }
    for (; c < cols; c++)
        out[c] = (int8_t)lk_t2_get(row, c);
}

#endif
