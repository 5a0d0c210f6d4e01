/* Lockstep (internal): lk_bitnet_decode's scratch memory, shared by the
 * core (which sizes it) and the drivers (which use it), and the
 * composition every driver without a fused kernel runs (bitnet.c).
 *
 * Layout, in this order, each region starting on a 256-byte boundary:
 *   sync  256 bytes      the CUDA kernel's grid barrier (it zeroes them)
 *   idx   int32 batch    the cache row of each sequence: b ctx + pos[b]
 *   xs    f32 batch      the activation scales
 *   xq    int8 batch x kq   (kq = the widest K: max(dim, qd, ffn), rounded
 *                         up to 16)
 *   qkv   f32 batch x (qd + 2 kvd)
 *   att   f32 batch x qd
 *   gu    f32 batch x 2 ffn
 *   g     f32 batch x ffn
 * with qd = n_head head_dim, kvd = n_kv head_dim. */
#ifndef LK_BACKENDS_BITNET_H
#define LK_BACKENDS_BITNET_H

#include <stddef.h>
#include <stdint.h>

#include <lockstep/driver.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lk_bitnet_layout {
    size_t sync, idx, xs, xq, qkv, att, gu, g; /* byte offsets */
    size_t total;                                   /* bytes in all */
    int64_t kq;                                     /* xq's row pitch */
} lk_bitnet_layout;

/* a * b into *r, 0 on overflow (both >= 0) */
static inline int lk_bitnet_mul(size_t a, size_t b, size_t *r)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *r = a * b;
    return 1;
}

/* The layout for this shape; 0 when a size overflows or a dimension is
 * not positive. */
static inline int lk_bitnet_layout_of(int64_t batch, int64_t dim, int64_t n_head, int64_t n_kv,
                                      int64_t head_dim, int64_t ffn, lk_bitnet_layout *L)
{
    const int64_t lim = (int64_t)1 << 40;
    if (batch <= 0 || dim <= 0 || n_head <= 0 || n_kv <= 0 || head_dim <= 0 || ffn <= 0 ||
        batch > lim || dim > lim || n_head > lim || n_kv > lim || head_dim > lim || ffn > lim)
        return 0;
    size_t qd, kvd, kq, sz[8];
    if (!lk_bitnet_mul((size_t)n_head, (size_t)head_dim, &qd) ||
        !lk_bitnet_mul((size_t)n_kv, (size_t)head_dim, &kvd) || qd > (size_t)lim ||
        kvd > (size_t)lim)
        return 0;
    kq = (size_t)dim > qd ? (size_t)dim : qd;
    kq = kq > (size_t)ffn ? kq : (size_t)ffn;
    kq = (kq + 15) / 16 * 16;
    const size_t b = (size_t)batch;
    sz[0] = 256;
    if (!lk_bitnet_mul(b, 4, &sz[1]) || !lk_bitnet_mul(b, 4, &sz[2]) ||
        !lk_bitnet_mul(b, kq, &sz[3]) || !lk_bitnet_mul(b, 4 * (qd + 2 * kvd), &sz[4]) ||
        !lk_bitnet_mul(b, 4 * qd, &sz[5]) || !lk_bitnet_mul(b, 8 * (size_t)ffn, &sz[6]) ||
        !lk_bitnet_mul(b, 4 * (size_t)ffn, &sz[7]))
        return 0;
    size_t off[8], at = 0;
    for (int i = 0; i < 8; i++) {
        off[i] = at;
        if (sz[i] > SIZE_MAX - at - 255)
            return 0;
        at = (at + sz[i] + 255) / 256 * 256;
    }
    L->sync = off[0], L->idx = off[1], L->xs = off[2], L->xq = off[3], L->qkv = off[4];
    L->att = off[5], L->gu = off[6], L->g = off[7];
    L->total = at;
    L->kq = (int64_t)kq;
    return 1;
}

/* The composition of include/lockstep/bitnet.h on the kernel table k
 * (every kernel it names must be non-NULL: rmsnorm_quantize, rope,
 * set_rows, attention, glu, and ternary_linear for prepared weights or
 * ternary_gemm and binary for the core's copies), in the scratch memory.
 * idx_ready = 0: the positions and the scratch are host memory and the
 * cache rows are written into idx here; 1: the caller has written them
 * (a GPU driver, on its queue).  Each call to a kernel is one of the ops
 * of the composition, with the arguments the core would give it. */
lk_status lk_bitnet_compose(const lk_kernels *k, void *queue, const lk_bitnet_args *a,
                            int idx_ready);

#ifdef __cplusplus
}
#endif

#endif
