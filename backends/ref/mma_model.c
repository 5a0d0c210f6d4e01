/* Lockstep reference: the tensor-core tier (docs/numerics.md, "Tensor-core
 * tier") -- an exact CPU model of the GPUs' MMA arithmetic.
 *
 * A tensor core does not chain IEEE fmas.  Per instruction step it adds n
 * exact products and the accumulator in one go: every term is aligned to
 * the largest exponent among them and truncated to F fractional bits, the
 * truncated terms are summed exactly, and the sum is rounded toward zero to
 * f32.  Everything here is integer arithmetic on significands and
 * exponents, so the host FPU's rounding (or its FTZ/DAZ state) plays no
 * part.  The model follows MMA-Sim (arXiv 2511.10909, nv_fused_dot_add),
 * special values included. */
#include <stdint.h>

#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "numerics/contract.h"
#include "numerics/scalar.h"

/* A decoded finite number: value = (neg ? -1 : 1) * sig * 2^(exp - frac),
 * exp the unbiased exponent clamped to the type's minimum (subnormals keep
 * exp = emin with no hidden bit), frac the type's fraction bits. */
typedef struct {
    int neg;
    uint32_t sig;
    int exp;
} lk_mma_num;

enum { LK_MMA_FINITE = 0, LK_MMA_INF = 1, LK_MMA_NAN = 2 };

/* 16-bit input: returns its class; fills *x for a finite one. */
static int lk_mma_decode16(uint16_t h, lk_dtype dt, lk_mma_num *x)
{
    int ebits = dt == LK_BF16 ? 8 : 5;
    int frac = dt == LK_BF16 ? 7 : 10;
    int bias = (1 << (ebits - 1)) - 1;
    uint32_t e = ((uint32_t)h >> frac) & ((1u << ebits) - 1u);
    uint32_t m = (uint32_t)h & ((1u << frac) - 1u);
    x->neg = (h >> 15) & 1;
    x->sig = 0;
    x->exp = 0;
    if (e == (1u << ebits) - 1u)
        return m ? LK_MMA_NAN : LK_MMA_INF;
    if (e == 0) {
        x->sig = m;
        x->exp = 1 - bias;
    } else {
        x->sig = m | (1u << frac);
        x->exp = (int)e - bias;
    }
    return LK_MMA_FINITE;
}

static int lk_mma_decode32(float f, lk_mma_num *x)
{
    uint32_t u = lk_f32_bits(f);
    uint32_t e = (u >> 23) & 0xffu;
    uint32_t m = u & 0x7fffffu;
    x->neg = (int)(u >> 31);
    x->sig = 0;
    x->exp = 0;
    if (e == 0xffu)
        return m ? LK_MMA_NAN : LK_MMA_INF;
    if (e == 0) {
        x->sig = m;
        x->exp = -126;
    } else {
        x->sig = m | 0x800000u;
        x->exp = (int)e - 127;
    }
    return LK_MMA_FINITE;
}

/* sig * 2^shift, truncated toward zero (a magnitude). */
static uint64_t lk_mma_shift(uint64_t sig, int shift)
{
    if (shift >= 0)
        return sig << shift; /* shift <= F - 14 <= 11 here */
    if (shift <= -64)
        return 0;
    return sig >> -shift;
}

/* (neg ? -1 : 1) * mag * 2^(e - f) rounded toward zero to f32, mag != 0
 * and below 2^40.  Overflow gives Inf, as MMA-Sim's conversion does. */
static float lk_mma_rz_f32(int neg, uint64_t mag, int e, int f)
{
    int l = 63 - __builtin_clzll(mag); /* msb */
    int ex = l + e - f;               /* exponent of the leading bit */
    uint32_t sign = neg ? 0x80000000u : 0u;
    if (ex > 127)
        return lk_bits_f32(sign | 0x7f800000u);
    if (ex >= -126) {
        uint64_t mant = l >= 23 ? mag >> (l - 23) : mag << (23 - l);
        return lk_bits_f32(sign | ((uint32_t)(ex + 127) << 23) | ((uint32_t)mant & 0x7fffffu));
    }
    /* below 2^-126: the subnormal grid 2^-149, truncated (to -0 if need be) */
    uint64_t mant = lk_mma_shift(mag, e - f + 149);
    return lk_bits_f32(sign | (uint32_t)mant);
}

float lk_mma_fdpa(lk_dtype dt, const uint16_t *a, const uint16_t *b, int n, float c,
                  int frac_bits)
{
    lk_mma_num ta[LK_MMA_MAX_TERMS], tb[LK_MMA_MAX_TERMS], tc;
    int pos_inf = 0, neg_inf = 0, nan = 0;
    int cc = lk_mma_decode32(c, &tc);
    if (cc == LK_MMA_NAN)
        nan = 1;
    else if (cc == LK_MMA_INF && tc.neg)
        neg_inf = 1;
    else if (cc == LK_MMA_INF)
        pos_inf = 1;
    for (int i = 0; i < n; i++) {
        int ca = lk_mma_decode16(a[i], dt, &ta[i]);
        int cb = lk_mma_decode16(b[i], dt, &tb[i]);
        if (ca == LK_MMA_NAN || cb == LK_MMA_NAN) {
            nan = 1;
        } else if (ca == LK_MMA_INF || cb == LK_MMA_INF) {
            /* Inf times zero is NaN; Inf times anything else an Inf */
            if ((ca == LK_MMA_FINITE && ta[i].sig == 0) || (cb == LK_MMA_FINITE && tb[i].sig == 0))
                nan = 1;
            else if (ta[i].neg ^ tb[i].neg)
                neg_inf = 1;
            else
                pos_inf = 1;
        }
    }
    if (nan || (pos_inf && neg_inf))
        return lk_bits_f32(LK_NAN_F32_BITS);
    if (pos_inf || neg_inf)
        return lk_bits_f32(pos_inf ? 0x7f800000u : 0xff800000u);

    /* The exponent a term is aligned by: a product's is the sum of its
     * factors' (its significand lies in [1, 4) or below); zeros take no
     * part, as in the hardware. */
    int frac = dt == LK_BF16 ? 7 : 10;
    int have = 0, emax = 0;
    if (tc.sig) {
        emax = tc.exp;
        have = 1;
    }
    for (int i = 0; i < n; i++) {
        if (ta[i].sig == 0 || tb[i].sig == 0)
            continue;
        int e = ta[i].exp + tb[i].exp;
        if (!have || e > emax)
            emax = e;
        have = 1;
    }
    if (!have)
        return 0.0f; /* every term is zero: +0 */

    /* Each term as an integer multiple of 2^(emax - F), truncated. */
    int64_t sum = 0;
    if (tc.sig) {
        int64_t t = (int64_t)lk_mma_shift(tc.sig, frac_bits - 23 - (emax - tc.exp));
        sum += tc.neg ? -t : t;
    }
    for (int i = 0; i < n; i++) {
        if (ta[i].sig == 0 || tb[i].sig == 0)
            continue;
        uint64_t p = (uint64_t)ta[i].sig * tb[i].sig;
        int e = ta[i].exp + tb[i].exp;
        int64_t t = (int64_t)lk_mma_shift(p, frac_bits - 2 * frac - (emax - e));
        sum += ta[i].neg ^ tb[i].neg ? -t : t;
    }
    if (sum == 0)
        return 0.0f; /* exact cancellation gives +0 */
    int neg = sum < 0;
    return lk_mma_rz_f32(neg, (uint64_t)(neg ? -sum : sum), emax, frac_bits);
}

float lk_mma_step(unsigned tier, lk_dtype dt, const uint16_t *a, const uint16_t *b, float c)
{
    if (tier == LK_GEMM_TC_SM80) {
        /* Ampere/Ada run the k = 16 instruction as two k = 8 halves */
        c = lk_mma_fdpa(dt, a, b, LK_MMA_K / 2, c, LK_MMA_F_SM80);
        return lk_mma_fdpa(dt, a + LK_MMA_K / 2, b + LK_MMA_K / 2, LK_MMA_K / 2, c,
                           LK_MMA_F_SM80);
    }
    return lk_mma_fdpa(dt, a, b, LK_MMA_K, c, LK_MMA_F_SM90);
}

/* The raw 16-bit element i of a bf16/f16 tensor. */
static uint16_t lk_mma_raw(const void *base, int64_t i)
{
    return ((const uint16_t *)base)[i];
}

static float lk_mma_dot(const lk_gemm_args *g, unsigned tier, int64_t b, int64_t m, int64_t n)
{
    uint16_t av[LK_MMA_K], bv[LK_MMA_K];
    int64_t abase = b * g->a.batch_stride, bbase = b * g->b.batch_stride;
    float acc = 0.0f;
    /* K padded with zeros to a whole number of steps: the GPU's tiles are */
    for (int64_t k0 = 0; k0 < g->k; k0 += LK_MMA_K) {
        for (int j = 0; j < LK_MMA_K; j++) {
            int64_t k = k0 + j;
            if (k >= g->k) {
                av[j] = bv[j] = 0;
                continue;
            }
            int64_t ia = g->ta == LK_TRANS ? k * g->a.ld + m : m * g->a.ld + k;
            int64_t ib = g->tb == LK_TRANS ? n * g->b.ld + k : k * g->b.ld + n;
            av[j] = lk_mma_raw(g->a.data, abase + ia);
            bv[j] = lk_mma_raw(g->b.data, bbase + ib);
        }
        acc = lk_mma_step(tier, g->a.dtype, av, bv, acc);
    }
    return acc;
}

lk_status lk_ref_gemm_tc(const lk_gemm_args *g)
{
    unsigned tier = g->flags & (LK_GEMM_TC_SM80 | LK_GEMM_TC_SM90);
    for (int64_t b = 0; b < g->batch; b++) {
        int64_t cbase = b * g->c.batch_stride;
        for (int64_t m = 0; m < g->m; m++) {
            for (int64_t n = 0; n < g->n; n++) {
                int64_t ci = cbase + m * g->c.ld + n;
                float t = lk_mma_dot(g, tier, b, m, n);
                /* the epilogue of section 4, unchanged */
                if (g->bias.data != NULL)
                    t = t + lk_ref_load(g->bias.data, g->bias.dtype,
                                        b * g->bias.batch_stride + n);
                if (g->flags & LK_GEMM_ACCUMULATE)
                    t = t + lk_ref_load(g->c.data, g->c.dtype, ci);
                lk_ref_store(g->c.data, g->c.dtype, ci, t);
            }
        }
    }
    return LK_OK;
}
