/* Lockstep: the element-wise formulas of the training ops (docs/numerics.md
 * section 13) as inline f32 sequences (LK_SCALAR: host and, under nvcc,
 * device code), shared by the reference and the CUDA kernels so that both
 * run the very same operations.  Every line is one IEEE operation in the
 * order the contract gives; nothing is fused (-ffp-contract=off,
 * -fmad=false). */
#ifndef LK_BACKENDS_TRAIN_H
#define LK_BACKENDS_TRAIN_H

#include <lockstep/driver.h>

#include "backends/transcendental.h"
#include "numerics/scalar.h"

/* The correctly rounded square root. */
#if defined(__CUDA_ARCH__)
#define LK_TRAIN_SQRT(x) __fsqrt_rn(x)
#else
#define LK_TRAIN_SQRT(x) sqrtf(x)
#endif

#define LK_TRAIN_2_SQRTPI 0x1.20dd76p+0f  /* 2 / sqrt(pi), rounded */
#define LK_TRAIN_1_SQRT2PI 0x1.988454p-2f /* 1 / sqrt(2 pi), rounded */
#define LK_TRAIN_SQRT1_2 0x1.6a09e6p-1f   /* 1 / sqrt(2), rounded */
#define LK_TRAIN_K0 0x1.988454p-1f        /* sqrt(2 / pi), rounded */
#define LK_TRAIN_K1 0x1.6e4e26p-5f        /* 0.044715, rounded */
#define LK_TRAIN_K3 0x1.12ba9ep-3f        /* 3 * 0.044715, rounded */

/* relu with a NaN passed through (lk_unary's) */
LK_SCALAR float lk_train_relu(float x)
{
    if (lk_isnan(x))
        return x;
    return x > 0.0f ? x : 0.0f;
}

/* f'(x), the factor dy is multiplied by (section 13.1). */
LK_SCALAR float lk_unary_grad_factor(lk_unary_op op, float x)
{
    switch (op) {
    case LK_UNARY_RELU:
        if (lk_isnan(x))
            return x;
        return x > 0.0f ? 1.0f : 0.0f;
    case LK_UNARY_RELU2: {
        const float r = lk_train_relu(x);
        return r + r;
    }
    case LK_UNARY_SIGMOID: {
        const float s = lk_sigmoidf(x);
        return s * (1.0f - s);
    }
    case LK_UNARY_SILU: {
        const float s = lk_sigmoidf(x);
        const float t = x * (1.0f - s);
        return s * (1.0f + t);
    }
    case LK_UNARY_GELU_TANH: {
        const float x2 = x * x;
        const float u = LK_TRAIN_K0 * (x + (LK_TRAIN_K1 * x2) * x);
        const float t = lk_tanhf(u);
        const float du = LK_TRAIN_K0 * (1.0f + LK_TRAIN_K3 * x2);
        const float a = 0.5f * (1.0f + t);
        const float b = (0.5f * x) * ((1.0f - t * t) * du);
        return a + b;
    }
    case LK_UNARY_GELU_ERF: {
        const float phi = 0.5f * (1.0f + lk_erff(x * LK_TRAIN_SQRT1_2));
        const float pdf = LK_TRAIN_1_SQRT2PI * lk_expf(-0.5f * (x * x));
        return phi + x * pdf;
    }
    case LK_UNARY_EXP:
        return lk_expf(x);
    case LK_UNARY_TANH: {
        const float t = lk_tanhf(x);
        return 1.0f - t * t;
    }
    case LK_UNARY_ERF:
        return LK_TRAIN_2_SQRTPI * lk_expf(-(x * x));
    default: /* COPY; LOG divides instead (lk_unary_grad) */
        return 1.0f;
    }
}

/* dx = dy * f'(x); LOG: dy / x; RELU: x > 0 ? dy : +0 (NaN x: NaN). */
LK_SCALAR float lk_unary_grad(lk_unary_op op, float x, float dy)
{
    if (op == LK_UNARY_COPY)
        return dy;
    if (op == LK_UNARY_LOG)
        return dy / x;
    if (op == LK_UNARY_RELU)
        return lk_isnan(x) ? x : x > 0.0f ? dy : 0.0f;
    return dy * lk_unary_grad_factor(op, x);
}

/* Softmax backward's element (section 13.2): d = lane sum of dy_i * y_i;
 * log-softmax: d = lane sum of dy_i. */
LK_SCALAR float lk_softmax_grad(int log, float y, float dy, float d)
{
    if (log)
        return dy - lk_expf(y) * d;
    return (dy - d) * y;
}

/* Norm backward, per row (section 13.3).  r is the forward's 1/sqrt(...),
 * g_i = dy_i * w_i (dy_i without a weight). */
LK_SCALAR float lk_norm_grad_g(float dy, const float *w, int64_t i)
{
    return w != NULL ? dy * w[i] : dy;
}

/* RMSNorm: k = (dot / n) * ((r * r) * r), dot the lane sum of g_i * x_i. */
LK_SCALAR float lk_rms_grad_k(float dot, int64_t n, float r)
{
    return (dot / (float)n) * ((r * r) * r);
}

LK_SCALAR float lk_rms_grad_dx(float g, float x, float r, float k)
{
    return g * r - x * k;
}

/* LayerNorm: xh = (x - m) * r; a, b the lane sums of g_i and g_i * xh_i,
 * each divided by n. */
LK_SCALAR float lk_ln_grad_dx(float g, float xh, float a, float b, float r)
{
    return ((g - a) - xh * b) * r;
}

/* One element of an optimizer step (section 13.5); p, s1, s2 in and out. */
LK_SCALAR void lk_sgd_elem(const lk_optim_args *a, float g, float *p, float *buf)
{
    const float lr = a->c[0], mom = a->c[1], damp1 = a->c[2], wd = a->c[3];
    if (wd != 0.0f)
        g = g + wd * *p;
    if (mom != 0.0f) {
        float b;
        if (a->flags & LK_SGD_FIRST)
            b = g;
        else
            b = *buf * mom + damp1 * g;
        *buf = b;
        g = (a->flags & LK_SGD_NESTEROV) ? g + mom * b : b;
    }
    *p = *p - lr * g;
}

LK_SCALAR void lk_adamw_elem(const lk_optim_args *a, float g, float *p, float *m, float *v)
{
    const float step = a->c[0], c1 = a->c[1], beta2 = a->c[2], c2 = a->c[3];
    const float eps = a->c[4], decay = a->c[5], bc2s = a->c[6];
    float pp = *p * decay;
    const float mm = *m + (g - *m) * c1;
    const float vv = *v * beta2 + (g * g) * c2;
    const float den = LK_TRAIN_SQRT(vv) / bc2s + eps;
    pp = pp - (mm / den) * step;
    *p = pp;
    *m = mm;
    *v = vv;
}

#endif
