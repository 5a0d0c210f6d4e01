/* Test-only stand-in for the libraries scripts/get-peers.sh builds, so that
 * `make check` runs lockstep bench's peer path (dlopen, the layout checks,
 * the adapters, the bit-exact check before timing) without downloading
 * anything: the parts of ggml's CPU interface the bench uses, and an I2_S
 * dot product, each a plain loop over the block layouts that
 * bench/peers/ggml_abi.h describes.  Never installed. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bench/peers/ggml_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* What the bench looks up (ggml_abi.h gives their types). */
EXPORT const lk_ggml_type_traits_cpu *ggml_get_type_traits_cpu(int type);
EXPORT size_t ggml_type_size(int type);
EXPORT int64_t ggml_blck_size(int type);
EXPORT const char *ggml_version(void);
EXPORT void ggml_cpu_init(void);
EXPORT void ggml_vec_dot_i2_i8_s(int n, float *s, size_t bs, const void *vx, size_t bx,
                                 const void *vy, size_t by, int nrc);

/* IEEE half to float (finite values: all a scale can be) */
static float half_to_float(uint16_t h)
{
    const uint32_t e = h >> 10 & 31, m = h & 1023;
    float v;
    if (e == 0) {
        v = (float)m * 0x1p-24f;
    } else {
        const uint32_t bits = (e - 15 + 127) << 23 | m << 13;
        memcpy(&v, &bits, sizeof v);
    }
    return h & 0x8000 ? -v : v;
}

/* sum over blocks of d_x d_y sum (code - 1) y */
static void dot_tq2_0_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy,
                           size_t by, int nrc)
{
    const lk_ggml_block_tq2_0 *x = vx;
    const lk_ggml_block_q8_K *y = vy;
    float sum = 0.0f;
    (void)bs, (void)bx, (void)by, (void)nrc;
    for (int b = 0; b < n / LK_GGML_QK_K; b++) {
        int32_t acc = 0;
        for (int e = 0; e < LK_GGML_QK_K; e++) {
            const int code = x[b].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32)) & 3;
            acc += (code - 1) * y[b].qs[e];
        }
        sum += (float)acc * y[b].d * half_to_float(x[b].d);
    }
    *s = sum;
}

static const lk_ggml_type_traits_cpu tq2_0_traits = {NULL, dot_tq2_0_q8_K, LK_GGML_TYPE_Q8_K, 1};

EXPORT const lk_ggml_type_traits_cpu *ggml_get_type_traits_cpu(int type)
{
    return type == LK_GGML_TYPE_TQ2_0 ? &tq2_0_traits : NULL;
}

EXPORT size_t ggml_type_size(int type)
{
    return type == LK_GGML_TYPE_TQ2_0 ? sizeof(lk_ggml_block_tq2_0)
           : type == LK_GGML_TYPE_Q8_K ? sizeof(lk_ggml_block_q8_K)
                                       : 0;
}

EXPORT int64_t ggml_blck_size(int type)
{
    return type == LK_GGML_TYPE_TQ2_0 || type == LK_GGML_TYPE_Q8_K ? LK_GGML_QK_K : 1;
}

EXPORT const char *ggml_version(void) { return "stand-in"; }

EXPORT void ggml_cpu_init(void) {}

/* sum of code * y, codes in blocks of LK_BITNET_QK_I2_S values */
EXPORT void ggml_vec_dot_i2_i8_s(int n, float *s, size_t bs, const void *vx, size_t bx,
                                 const void *vy, size_t by, int nrc)
{
    const uint8_t *x = vx;
    const int8_t *y = vy;
    int32_t acc = 0;
    (void)bs, (void)bx, (void)by, (void)nrc;
    const int qb = LK_BITNET_QK_I2_S / 4; /* bytes in a block */
    for (int i = 0; i < n; i++) {
        const int b = i / (4 * qb), j = i % (4 * qb);
        acc += (x[qb * b + j % qb] >> (6 - 2 * (j / qb)) & 3) * y[i];
    }
    *s = (float)acc;
}
