/* Lockstep reference: causal attention with grouped KV heads over a KV
 * cache (docs/numerics.md section 12.3): per (sequence, token, head), the
 * scores by the GEMM contract's dot (section 4) times scale, the softmax of
 * section 6 over the keys the token sees, then P.V by the GEMM contract's
 * dot, one rounding at the store.  Keys beyond the causal limit are never
 * read. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/host.h"
#include "backends/ref/lanes.h"
#include "backends/ref/load_store.h"
#include "backends/ref/ref.h"
#include "backends/ref/transcendental.h"
#include "numerics/contract.h"
#include "numerics/scalar.h"

/* Element (r, c) of matrix b of t. */
static float at(const lk_tensor *t, int64_t b, int64_t r, int64_t c)
{
    return lk_ref_load(t->data, t->dtype, b * t->batch_stride + r * t->ld + c);
}

lk_status lk_ref_attention(const lk_attention_args *a)
{
    const int64_t hd = a->head_dim, group = a->n_head / a->n_kv, L = a->cache_len;
    float *e = NULL;
    if (L > 0) {
        e = (uint64_t)L <= SIZE_MAX / sizeof *e ? malloc((size_t)L * sizeof *e) : NULL;
        if (e == NULL)
            return lk_kernel_error(LK_ERR_OUT_OF_MEMORY,
                                   "lk_attention: no memory for %lld scores", (long long)L);
    }
    for (int64_t b = 0; b < a->batch; b++) {
        for (int64_t t = 0; t < a->tokens; t++) {
            int64_t p = ((const int32_t *)a->pos.data)[b * a->pos.batch_stride + t * a->pos.ld];
            int64_t n = p < 0 ? 0 : (p + 1 < L ? p + 1 : L); /* keys seen */
            for (int64_t h = 0; h < a->n_head; h++) {
                const int64_t qc = h * hd, kc = (h / group) * hd;
                const int64_t yi = b * a->y.batch_stride + t * a->y.ld + qc;
                if (n == 0) {
                    for (int64_t d = 0; d < hd; d++)
                        lk_ref_store(a->y.data, a->y.dtype, yi + d, 0.0f);
                    continue;
                }
                /* s_j = dot(q, k_j) * scale; mx = maximum of s_j */
                float mx = 0.0f;
                for (int64_t j = 0; j < n; j++) {
                    float total = 0.0f;
                    for (int64_t d0 = 0; d0 < hd; d0 += LK_KB) {
                        int64_t d1 = hd - d0 < LK_KB ? hd : d0 + LK_KB;
                        float acc = 0.0f;
                        for (int64_t d = d0; d < d1; d++)
                            acc = fmaf(at(&a->q, b, t, qc + d), at(&a->k, b, j, kc + d), acc);
                        total = d0 == 0 ? acc : total + acc;
                    }
                    e[j] = total * a->scale;
                    mx = j == 0 ? e[j] : lk_maximum(mx, e[j]);
                }
                for (int64_t j = 0; j < n; j++)
                    e[j] = lk_ref_expf(e[j] - mx);
                float rs = 1.0f / lk_ref_lane_sum(e, n); /* softmax's reciprocal */
                for (int64_t j = 0; j < n; j++)
                    e[j] = e[j] * rs; /* p_j */
                /* out_d = dot over j of p_j * v_j,d */
                for (int64_t d = 0; d < hd; d++) {
                    float total = 0.0f;
                    for (int64_t j0 = 0; j0 < n; j0 += LK_KB) {
                        int64_t j1 = n - j0 < LK_KB ? n : j0 + LK_KB;
                        float acc = 0.0f;
                        for (int64_t j = j0; j < j1; j++)
                            acc = fmaf(e[j], at(&a->v, b, j, kc + d), acc);
                        total = j0 == 0 ? acc : total + acc;
                    }
                    lk_ref_store(a->y.data, a->y.dtype, yi + d, total);
                }
            }
        }
    }
    free(e);
    return LK_OK;
}
