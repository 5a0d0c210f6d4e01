/* Lockstep contract matrix: the inputs of a case.
 *
 * Values are made from the case's seed alone, so every device of a run (and
 * every run with the same seed) sees the same bytes.  Edge values are given
 * as bit patterns per dtype: they must reach the kernels exactly, NaN
 * payloads and signalling NaNs included. */
#include <stdlib.h>
#include <string.h>

#include "tools/matrix.h"

static uint64_t mx_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float mx_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* 2^e for |e| < 127, exact. */
static float mx_pow2(int e)
{
    return mx_bits_f32((uint32_t)(127 + e) << 23);
}

/* A finite value with a full 24-bit significand, sign random, magnitude in
 * [2^(shift-7), 2^(shift+6)). */
static float mx_normal(uint64_t *s, int shift)
{
    uint64_t r = mx_next(s);
    float m = (float)(int32_t)((r & 0xffffffu) | 0x800000u) * 0x1p-23f; /* [1, 2) */
    int e = (int)((r >> 24) % 13) - 7 + shift;
    float v = m * mx_pow2(e);
    return (r >> 63) ? -v : v;
}

/* Edge values, as bit patterns of each dtype. */
static const uint32_t mx_edge_f32[] = {
    0x7fc00000u, 0x7f800001u, 0xffc12345u, 0x7fbfffffu, /* NaNs: quiet, signalling, payloads */
    0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, /* +-Inf, +-0 */
    0x00000001u, 0x807fffffu, 0x00400000u, 0x00800000u, /* subnormals, smallest normal */
    0x7f7fffffu, 0xff7fffffu, 0x7f61d7c8u, 0xff61d7c8u, /* FLT_MAX, ~3e38 */
    0x477fe000u, 0x477ff000u, 0x477fefffu, 0xc77fe000u, /* 65504, 65520 (f16 Inf), just below */
    0x3f808000u, 0x3f818000u, 0xbf808000u, 0x00008000u, /* bf16 ties (even down / up), subnormal tie */
    0x3f801000u, 0x3f803000u, 0x33000000u, 0x33c00000u, /* f16 ties, f16 subnormal ties */
    0x387fe000u, 0x38800000u, 0x00018000u, 0x0001ffffu,
    0xc2c80000u, 0xc61c4000u, 0x42b17218u, 0x42b17219u, /* -100, -1e4, exp overflow edge */
    0xc2aeac50u, 0xc2cff1b5u, 0xc2d00000u, 0xf149f2cau, /* exp underflow edges, -1e30 */
    0x3f000000u, 0xbf000000u, 0x3f800000u, 0xbf800000u,
};
static const uint16_t mx_edge_bf16[] = {
    0x7fc0u, 0x7f81u, 0xffc1u, 0x7fbfu, 0x7f80u, 0xff80u, 0x0000u, 0x8000u,
    0x0001u, 0x807fu, 0x0040u, 0x0080u, 0x7f7fu, 0xff7fu, 0x7f62u, 0x477fu,
    0x4780u, 0xc2c8u, 0xc61cu, 0x42b1u, 0x42b2u, 0xc2afu, 0xc2d0u, 0xf149u,
    0x3f80u, 0xbf80u, 0x3f81u, 0x3f00u,
};
static const uint16_t mx_edge_f16[] = {
    0x7e00u, 0x7c01u, 0xfe01u, 0x7dffu, 0x7c00u, 0xfc00u, 0x0000u, 0x8000u,
    0x0001u, 0x83ffu, 0x0200u, 0x0400u, 0x7bffu, 0xfbffu, 0x5640u, 0xd640u,
    0x598bu, 0xd98bu, 0xf0e2u, 0x3c00u, 0xbc00u, 0x3c01u, 0x3800u, 0x4100u,
};
#define MX_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void mx_put_float(void *base, lk_dtype dt, int64_t i, float v)
{
    if (dt == LK_F32)
        ((float *)base)[i] = v;
    else if (dt == LK_BF16)
        ((uint16_t *)base)[i] = lk_f32_to_bf16(v);
    else
        ((uint16_t *)base)[i] = lk_f32_to_f16(v);
}

static void mx_put_bits(void *base, lk_dtype dt, int64_t i, uint32_t bits)
{
    if (dt == LK_F32)
        ((uint32_t *)base)[i] = bits;
    else
        ((uint16_t *)base)[i] = (uint16_t)bits;
}

static uint32_t mx_edge(uint64_t *s, lk_dtype dt)
{
    uint64_t r = mx_next(s);
    if (dt == LK_F32)
        return mx_edge_f32[r % MX_COUNT(mx_edge_f32)];
    if (dt == LK_BF16)
        return mx_edge_bf16[r % MX_COUNT(mx_edge_bf16)];
    return mx_edge_f16[r % MX_COUNT(mx_edge_f16)];
}

/* One float element of fill f at (row, index). */
static void mx_fill_float(const lk_mx_buf *b, void *base, int64_t i, int64_t row,
                          uint64_t *s)
{
    lk_dtype dt = b->dtype;
    switch (b->fill) {
    case LK_MX_FILL_EDGE:
        if (mx_next(s) % (uint64_t)(b->fill_param > 0 ? b->fill_param : 4) == 0)
            mx_put_bits(base, dt, i, mx_edge(s, dt));
        else
            mx_put_float(base, dt, i, mx_normal(s, 0));
        break;
    case LK_MX_FILL_WIDE:
        if (mx_next(s) & 1) {
            uint64_t r = mx_next(s);
            mx_put_bits(base, dt, i, dt == LK_F32 ? (uint32_t)r : (uint32_t)(r & 0xffffu));
        } else {
            mx_put_float(base, dt, i, mx_normal(s, (int)(mx_next(s) % 9) - 2));
        }
        break;
    case LK_MX_FILL_ALLBITS:
        if (dt == LK_F32)
            mx_put_bits(base, dt, i, (uint32_t)mx_next(s));
        else
            mx_put_bits(base, dt, i, (uint32_t)(i & 0xffff));
        break;
    case LK_MX_FILL_OFFSET:
        mx_put_float(base, dt, i, 1000.0f + mx_normal(s, -2));
        break;
    case LK_MX_FILL_NEGBIG: {
        uint64_t r = mx_next(s) % 16;
        if (r == 0)
            mx_put_bits(base, dt, i, dt == LK_F32 ? 0xff800000u : dt == LK_BF16 ? 0xff80u : 0xfc00u);
        else
            mx_put_float(base, dt, i, -mx_pow2((int)(r % 14)) * (1.0f + (float)(mx_next(s) & 0xffff) * 0x1p-16f));
        break;
    }
    case LK_MX_FILL_ZEROROWS:
        if (row % 3 == 0)
            mx_put_bits(base, dt, i, (mx_next(s) & 1) ? (dt == LK_F32 ? 0x80000000u : 0x8000u) : 0u);
        else
            mx_put_float(base, dt, i, mx_normal(s, b->fill_param));
        break;
    case LK_MX_FILL_POSITIVE: {
        float v = mx_normal(s, b->fill_param);
        mx_put_float(base, dt, i, v < 0 ? -v : v);
        break;
    }
    case LK_MX_FILL_SCALE_EDGE: {
        static const uint32_t se[] = {0x00000000u, 0x7f800000u, 0x7fc00000u, 0x00000001u,
                                      0x80000000u, 0x7f7fffffu};
        if (mx_next(s) % 3 == 0) {
            uint32_t u = se[mx_next(s) % MX_COUNT(se)];
            if (dt == LK_F32)
                mx_put_bits(base, dt, i, u);
            else
                mx_put_float(base, dt, i, mx_bits_f32(u));
        } else {
            float v = mx_normal(s, 3);
            mx_put_float(base, dt, i, v < 0 ? -v : v);
        }
        break;
    }
    default: /* NORMAL */
        mx_put_float(base, dt, i, mx_normal(s, b->fill_param));
        break;
    }
}

#define MX_NEDGE 10 /* positions in POS_EDGE's list */

static void mx_fill_buf(const lk_mx_buf *b, void *p, size_t bytes, uint64_t *s)
{
    size_t esz = lk_mx_elem_bytes(b->dtype);
    int64_t n = (int64_t)(bytes / esz);
    int64_t ld = b->ld;

    switch (b->fill) {
    case LK_MX_FILL_SENTINEL:
        memset(p, 0xa5, bytes);
        return;
    case LK_MX_FILL_I8:
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = mx_next(s);
            int v = (r % 8 == 0) ? ((r >> 8) & 1 ? 127 : -128) : (int)(int8_t)(r >> 16);
            ((int8_t *)p)[i] = (int8_t)v;
        }
        return;
    case LK_MX_FILL_I8_CONST:
        memset(p, (int)(uint8_t)(int8_t)b->fill_param, bytes);
        return;
    case LK_MX_FILL_TERNARY:
    case LK_MX_FILL_TERNARY_BAD:
        for (int64_t i = 0; i < n; i++)
            ((int8_t *)p)[i] = (int8_t)((int)(mx_next(s) % 3) - 1);
        if (b->fill == LK_MX_FILL_TERNARY_BAD) {
            /* one 2 somewhere inside the matrix (not in ld padding) */
            int64_t r = (int64_t)(mx_next(s) % (uint64_t)b->rows);
            int64_t c = (int64_t)(mx_next(s) % (uint64_t)b->cols);
            ((int8_t *)p)[r * ld + c] = 2;
        }
        return;
    case LK_MX_FILL_T2_RANDOM:
        for (size_t i = 0; i < bytes; i++)
            ((uint8_t *)p)[i] = (uint8_t)mx_next(s);
        return;
    case LK_MX_FILL_T2_ALL3:
        memset(p, 0xff, bytes);
        return;
    case LK_MX_FILL_POS:
    case LK_MX_FILL_POS_EDGE: {
        static const int32_t edge[] = {-1, -7, INT32_MIN, INT32_MAX, 1 << 20, 1 << 22,
                                       (1 << 22) + 1, (1 << 24) + 1, 0, 1};
        int64_t top = b->fill_param > 0 ? b->fill_param : 0;
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = mx_next(s);
            int32_t v = (int32_t)((r >> 8) % (uint64_t)(top + 1));
            if (r % 8 == 0)
                v = (r >> 3) & 1 ? (int32_t)top : 0;
            if (b->fill == LK_MX_FILL_POS_EDGE && r % 4 == 1) {
                int e = (int)((r >> 40) % (MX_NEDGE + 2));
                v = e < MX_NEDGE ? edge[e] : e == MX_NEDGE ? (int32_t)top + 1 : (int32_t)top * 3;
            }
            ((int32_t *)p)[i] = v;
        }
        return;
    }
    case LK_MX_FILL_IDS:
    case LK_MX_FILL_IDS_BAD: {
        int64_t top = b->fill_param > 0 ? b->fill_param : 1;
        for (int64_t i = 0; i < n; i++)
            ((int32_t *)p)[i] = (int32_t)(mx_next(s) % (uint64_t)top);
        if (b->fill == LK_MX_FILL_IDS_BAD && b->rows > 0) {
            uint64_t r = mx_next(s);
            ((int32_t *)p)[(int64_t)(r % (uint64_t)b->rows) * ld] =
                (r >> 32) & 1 ? -1 : (int32_t)top;
        }
        return;
    }
    default:
        break;
    }
    if (b->dtype != LK_F32 && b->dtype != LK_BF16 && b->dtype != LK_F16) {
        memset(p, 0, bytes);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        mx_fill_float(b, p, i, ld > 0 ? (i / ld) % (b->rows > 0 ? b->rows : 1) : 0, s);
}

size_t lk_mx_elem_bytes(lk_dtype dt)
{
    size_t s = lk_dtype_size(dt);
    return s ? s : 1; /* LK_T2: compared byte by byte */
}

/* Bytes a buffer spans: the last matrix ends at its last row's ld. */
static size_t mx_buf_bytes(const lk_mx_buf *b)
{
    int64_t span = b->rows * b->ld;
    if (b->nmat > 1)
        span += (b->nmat - 1) * b->batch_stride;
    if (span <= 0)
        span = 1; /* keep a valid, distinct pointer for empty tensors */
    if (b->dtype == LK_T2)
        return (size_t)((span + 3) / 4);
    return (size_t)span * lk_dtype_size(b->dtype);
}

lk_status lk_mx_data_make(const lk_mx_case *c, lk_mx_data *d)
{
    memset(d, 0, sizeof *d);
    d->nbuf = c->nbuf;
    for (int i = 0; i < c->nbuf; i++) {
        const lk_mx_buf *b = &c->buf[i];
        if (!b->present || b->alias >= 0)
            continue;
        d->bytes[i] = mx_buf_bytes(b);
        d->host[i] = malloc(d->bytes[i]);
        if (!d->host[i]) {
            lk_mx_data_free(d);
            return LK_ERR_OUT_OF_MEMORY;
        }
        /* each buffer its own stream, so adding a buffer to a case does
         * not change the others' values */
        uint64_t s = c->seed ^ (0x51ed2701u * (uint64_t)(i + 1));
        mx_fill_buf(b, d->host[i], d->bytes[i], &s);
    }
    return LK_OK;
}

lk_status lk_mx_data_clone(const lk_mx_data *src, lk_mx_data *dst)
{
    memset(dst, 0, sizeof *dst);
    dst->nbuf = src->nbuf;
    for (int i = 0; i < src->nbuf; i++) {
        if (!src->host[i])
            continue;
        dst->bytes[i] = src->bytes[i];
        dst->host[i] = malloc(src->bytes[i]);
        if (!dst->host[i]) {
            lk_mx_data_free(dst);
            return LK_ERR_OUT_OF_MEMORY;
        }
        memcpy(dst->host[i], src->host[i], src->bytes[i]);
    }
    return LK_OK;
}

void lk_mx_data_free(lk_mx_data *d)
{
    for (int i = 0; i < LK_MX_MAX_BUFS; i++) {
        free(d->host[i]);
        d->host[i] = NULL;
        d->bytes[i] = 0;
    }
}
