/* Lockstep reference: element access to the LK_T2 packed ternary format
 * (docs/formats.md).  Element k of row r lives in byte r * ld / 4 + k / 4,
 * bits 2 * (k % 4) and 2 * (k % 4) + 1, as the code w + 1; code 3 is
 * reserved and decodes to 2.  The codes after a row's last element, in its
 * last byte, are 1 (value 0).  ld is counted in elements, a multiple of 4. */
#ifndef LK_REF_T2_H
#define LK_REF_T2_H

#include <stdint.h>

#include <lockstep/types.h>

#define LK_T2_PAD_CODE 1u /* value 0 */

static inline uint8_t *lk_t2_row(const lk_tensor *t, int64_t r)
{
    return (uint8_t *)t->data + r * (t->ld / 4);
}

/* The value of element k: code - 1, in {-1, 0, 1, 2}. */
static inline int lk_t2_get(const uint8_t *row, int64_t k)
{
    return (int)((row[k / 4] >> (2 * (k % 4))) & 3u) - 1;
}

/* Pack v[0 .. cols), each in {-1, 0, 1}, into the (cols + 3) / 4 bytes of
 * row, padding codes included; the bytes after those are left alone. */
static inline void lk_t2_pack_row(const int8_t *v, int64_t cols, uint8_t *row)
{
    for (int64_t c0 = 0; c0 < cols; c0 += 4) {
        unsigned byte = 0;
        for (int j = 0; j < 4; j++) {
            unsigned code = c0 + j < cols ? (unsigned)(v[c0 + j] + 1) : LK_T2_PAD_CODE;
            byte |= code << (2 * j);
        }
        row[c0 / 4] = (uint8_t)byte;
    }
}

#endif
