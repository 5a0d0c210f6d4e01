/* Lockstep: the per-pair steps of RoPE (docs/numerics.md section 12), as
 * inline f32 sequences (LK_SCALAR: host and CUDA device code) shared by the
 * reference, the CPU driver and the CUDA kernels. */
#ifndef LK_BACKENDS_ROPE_H
#define LK_BACKENDS_ROPE_H

#include <stdint.h>

#include "backends/transcendental.h"

/* theta^(-2i/d) = exp(-((float)(2i) / (float)d) * log(theta)), the library's
 * exp and log (log_theta = lk_logf(theta), computed once per call). */
LK_SCALAR float lk_rope_inv_freq(int64_t i, int64_t head_dim, float log_theta)
{
    float e = (float)(2 * i) / (float)head_dim;
    return lk_expf(-(e * log_theta));
}

/* The angle of pair i at position pos, and its sine and cosine. */
LK_SCALAR void lk_rope_sincos(int32_t pos, float inv_freq, float *s, float *c)
{
    lk_sincosf((float)pos * inv_freq, s, c);
}

/* y0 = x0 c - x1 s, y1 = x1 c + x0 s: every product rounded, no fma (the
 * order of HF's q * cos + rotate_half(q) * sin). */
LK_SCALAR void lk_rope_rotate(float x0, float x1, float s, float c, float *y0, float *y1)
{
    *y0 = x0 * c - x1 * s;
    *y1 = x1 * c + x0 * s;
}

/* Offsets within a head of the two elements of pair i. */
LK_SCALAR int64_t lk_rope_i0(int64_t i, int interleaved)
{
    return interleaved ? 2 * i : i;
}

LK_SCALAR int64_t lk_rope_i1(int64_t i, int64_t head_dim, int interleaved)
{
    return interleaved ? 2 * i + 1 : i + head_dim / 2;
}

#endif
