/* Lockstep CPU kernels: the row steps of BitNet activation and ternary
 * quantisation (docs/numerics.md section 8), shared by quant.c and the
 * fused RMSNorm + quantisation of norm.c.  Include after elem.h. */
#ifndef LK_CPU_KERNELS_QUANT_ROW_H
#define LK_CPU_KERNELS_QUANT_ROW_H

/* rne(clamp(v, lo, hi)), NaN -> 0, as int32 lanes. */
LK_INLINE vi quantize_v(vf v, float lo, float hi)
{
    v = vf_select(vf_isnan(v), vf_zero(), v);
    return vf_to_vi(vf_minimum(vf_maximum(v, vf_set1(lo)), vf_set1(hi)));
}

static inline int8_t quantize1(float v, float lo, float hi)
{
    if (lk_isnan(v))
        return 0;
    return (int8_t)lk_rne(lk_minimum(lk_maximum(v, lo), hi));
}

/* maximum over |x_i| from +0 (any order; NaN wins). */
static inline float row_absmax(const float *x, int64_t n)
{
    vf a0 = vf_zero(), a1 = vf_zero();
    int64_t i = 0;
    for (; i + 2 * VW <= n; i += 2 * VW) {
        a0 = vf_maximum(a0, vf_abs(vf_load(x + i)));
        a1 = vf_maximum(a1, vf_abs(vf_load(x + i + VW)));
    }
    for (; i < n; i += VW) {
        int part = n - i < VW ? (int)(n - i) : VW;
        a0 = vf_maximum(a0, vf_abs(vf_load_part(x + i, part, vf_zero())));
    }
    float l[VW];
    vf_store(l, vf_maximum(a0, a1));
    float v = l[0];
    for (int j = 1; j < VW; j++)
        v = lk_maximum(v, l[j]);
    return v;
}

/* q[i] = quantize(x[i] * s) (div 0) or quantize(x[i] / s) (div 1). */
static inline void quantize_row(const float *x, int64_t n, float s, int div, float lo, float hi,
                         int8_t *q)
{
    const vf vs = vf_set1(s);
    int64_t i = 0;
    for (; i + VW <= n; i += VW) {
        vf v = vf_load(x + i);
        v = div ? vf_div(v, vs) : vf_mul(v, vs);
        vi_store_u8(q + i, quantize_v(v, lo, hi));
    }
    for (; i < n; i++)
        q[i] = quantize1(div ? x[i] / s : x[i] * s, lo, hi);
}

/* One row of lk_quantize_act: s = 127 / maximum(absmax, 1e-5), q = the
 * row quantised by s, s stored at element si of scale. */
static inline void quantize_act_row(const float *x, int64_t n, int8_t *q, const lk_tensor *scale,
                                    int64_t si)
{
    const float s = 127.0f / lk_maximum(row_absmax(x, n), LK_QUANT_EPS);
    quantize_row(x, n, s, 0, -128.0f, 127.0f, q);
    st1(scale->data, scale->dtype, si, s);
}

#endif
