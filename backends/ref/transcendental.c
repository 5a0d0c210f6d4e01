/* Lockstep reference: the transcendental functions of docs/numerics.md
 * section 7, out of line for the reference kernels (softmax, unary).  The
 * sequences themselves live in backends/transcendental.h. */
#include "backends/ref/transcendental.h"

#include "backends/transcendental.h"

float lk_ref_expf(float x)
{
    return lk_expf(x);
}

float lk_ref_logf(float x)
{
    return lk_logf(x);
}

float lk_ref_tanhf(float x)
{
    return lk_tanhf(x);
}

float lk_ref_erff(float x)
{
    return lk_erff(x);
}

float lk_ref_sigmoidf(float x)
{
    return lk_sigmoidf(x);
}

float lk_ref_siluf(float x)
{
    return lk_siluf(x);
}

float lk_ref_gelu_tanhf(float x)
{
    return lk_gelu_tanhf(x);
}

float lk_ref_gelu_erff(float x)
{
    return lk_gelu_erff(x);
}
