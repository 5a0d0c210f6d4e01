/* Lockstep reference: the fixed-shape row sum of docs/numerics.md section 5
 * (64 lanes per 4096-term chunk, butterfly, the same scheme over chunk
 * partials).  Every sum inside reductions, norms, softmax and quantisation
 * goes through here. */
#ifndef LK_REF_LANES_H
#define LK_REF_LANES_H

#include <stdint.h>

/* sum of t[0..n), n >= 1: leaves `lane = lane + t_i`. */
float lk_ref_lane_sum(const float *t, int64_t n);

/* sum of squares of d[0..n), n >= 1: leaves `lane = fma(d_i, d_i, lane)`;
 * the chunk partials are then summed with plain additions. */
float lk_ref_lane_sumsq(const float *d, int64_t n);

#endif
