/* Lockstep reference: the library's transcendental functions as out-of-line
 * f32 functions (docs/numerics.md section 7).  Each one is the inline
 * sequence of backends/transcendental.h, so the reference, the scalar
 * tails of the CPU kernels and every vector version compute the same bits.
 *
 * NaN in gives a NaN out (not canonicalised here: the store does that,
 * numerics.md section 3). */
#ifndef LK_REF_TRANSCENDENTAL_H
#define LK_REF_TRANSCENDENTAL_H

float lk_ref_expf(float x);       /* e^x,             7.1 */
float lk_ref_logf(float x);       /* natural log,     7.2 */
float lk_ref_tanhf(float x);      /* tanh,            7.3 */
float lk_ref_erff(float x);       /* erf,             7.4 */
float lk_ref_sigmoidf(float x);   /* 1 / (1 + e^-x),  7.5 */
float lk_ref_siluf(float x);      /* x * sigmoid(x),  7.6 */
float lk_ref_gelu_tanhf(float x); /* tanh GELU,       7.7 */
float lk_ref_gelu_erff(float x);  /* erf GELU,        7.8 */

#endif
