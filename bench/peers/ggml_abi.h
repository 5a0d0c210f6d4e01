/* Lockstep benchmarks: the few parts of ggml's public interface that the
 * ternary peers use, declared here so that the bench builds without ggml
 * and loads it at run time (bench/peers/ternary_peers.c).  Written from
 * ggml's headers as of ggml 0.25.3 (what scripts/get-peers.sh builds):
 *
 *   enum ggml_type          GGML_TYPE_Q8_K = 15, GGML_TYPE_TQ2_0 = 35
 *   ggml_type_size(type)    bytes of one block; ggml_blck_size: its values
 *   ggml_version()          "0.25.3"
 *   ggml_cpu_init()         the CPU library's tables, before any kernel
 *   ggml_get_type_traits_cpu(type)->vec_dot
 *                           the dot product of one row of `type` with one
 *                           row of vec_dot_type, nrc = 1
 *
 * The blocks (from ggml's format, not its code):
 *   TQ2_0  256 values: 64 bytes of 2-bit codes (value - -1: 0, 1, 2), then
 *          the scale d as IEEE half; value e of the block is in byte
 *          32 (e / 128) + e % 32 at bits 2 ((e % 128) / 32)
 *   Q8_K   256 values: the scale d as float, 256 int8 values, then the 16
 *          sums of 16 consecutive values as int16
 * ternary_peers.c checks the block sizes and vec_dot_type against what the
 * loaded library reports before using it, so that another ggml whose
 * layout moved is a skipped peer, not a wrong one. */
#ifndef LK_BENCH_PEERS_GGML_ABI_H
#define LK_BENCH_PEERS_GGML_ABI_H

#include <stddef.h>
#include <stdint.h>

enum { LK_GGML_TYPE_Q8_K = 15, LK_GGML_TYPE_TQ2_0 = 35 };

#define LK_GGML_QK_K 256

typedef struct lk_ggml_block_tq2_0 {
    uint8_t qs[LK_GGML_QK_K / 4];
    uint16_t d; /* IEEE half */
} lk_ggml_block_tq2_0;

typedef struct lk_ggml_block_q8_K {
    float d;
    int8_t qs[LK_GGML_QK_K];
    int16_t bsums[LK_GGML_QK_K / 16];
} lk_ggml_block_q8_K;

typedef void (*lk_ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx,
                                   const void *y, size_t by, int nrc);
typedef void (*lk_ggml_from_float_fn)(const float *x, void *y, int64_t k);

typedef struct lk_ggml_type_traits_cpu {
    lk_ggml_from_float_fn from_float;
    lk_ggml_vec_dot_fn vec_dot;
    int vec_dot_type; /* enum ggml_type */
    int64_t nrows;
} lk_ggml_type_traits_cpu;

typedef const lk_ggml_type_traits_cpu *(*lk_ggml_get_type_traits_cpu_fn)(int type);
typedef size_t (*lk_ggml_type_size_fn)(int type);
typedef int64_t (*lk_ggml_blck_size_fn)(int type);
typedef const char *(*lk_ggml_version_fn)(void);
typedef void (*lk_ggml_cpu_init_fn)(void);

/* bitnet.cpp's I2_S dot product (its src/ggml-bitnet-mad.cpp): n values
 * of 2-bit codes, codes 0, 1, 2 for -1, 0, +1, in blocks of QK values
 * (QK / 4 bytes; value j of a block at bits 6 - 2 (j / (QK / 4)) of byte
 * j % (QK / 4)) against n int8 values; *s = sum of code * value, as a
 * float.  QK is its QK_I2_S: 128 where it is built for x86, 64 for ARM. */
#if defined(__aarch64__) || defined(__arm__)
#define LK_BITNET_QK_I2_S 64
#else
#define LK_BITNET_QK_I2_S 128
#endif

#endif
