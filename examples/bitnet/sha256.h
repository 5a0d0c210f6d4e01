/* BitNet example: SHA-256 (FIPS 180-4), to print a short fingerprint of a
 * step's logits that can be compared across devices and machines. */
#ifndef LK_EXAMPLES_BITNET_SHA256_H
#define LK_EXAMPLES_BITNET_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct lk_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t nbuf;
} lk_sha256;

void lk_sha256_init(lk_sha256 *s);
void lk_sha256_update(lk_sha256 *s, const void *data, size_t n);
void lk_sha256_final(lk_sha256 *s, uint8_t out[32]);
/* out: 65 bytes, lowercase hex and a NUL. */
void lk_sha256_hex(const void *data, size_t n, char out[65]);
void lk_sha256_tohex(const uint8_t d[32], char out[65]);

#endif
