/* Lockstep example: run one GEMM on every device this machine has and
 * compare the results bit for bit with the reference device's.
 *
 * Build: cc cross_check.c $(pkg-config --cflags --libs lockstep)
 * Run:   ./cross_check        (exit status 0: every device gave the same bits) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>

enum { M = 5, N = 7, K = 300 };

/* C = A . B^T with bf16 A (M x K) and B (N x K), f32 C, on one device.
 * Device memory and copies make it work on GPUs as well as on CPUs. */
static lk_status run_gemm(lk_device *dev, const uint16_t *a, const uint16_t *b, float *c)
{
    lk_queue *q = NULL;
    void *da = NULL, *db = NULL, *dc = NULL;
    lk_status st = lk_queue_create(dev, NULL, &q);
    if (!st) st = lk_malloc(dev, M * K * sizeof *a, &da);
    if (!st) st = lk_malloc(dev, N * K * sizeof *b, &db);
    if (!st) st = lk_malloc(dev, M * N * sizeof *c, &dc);
    if (!st) st = lk_memcpy(q, da, a, M * K * sizeof *a, LK_COPY_HOST_TO_DEVICE);
    if (!st) st = lk_memcpy(q, db, b, N * K * sizeof *b, LK_COPY_HOST_TO_DEVICE);
    if (!st) {
        lk_tensor ta = lk_mat(da, LK_BF16, M, K);
        lk_tensor tb = lk_mat(db, LK_BF16, N, K);
        lk_tensor tc = lk_mat(dc, LK_F32, M, N);
        st = lk_gemm(q, LK_NO_TRANS, LK_TRANS, &ta, &tb, NULL, &tc, 1, 0);
    }
    if (!st) st = lk_memcpy(q, c, dc, M * N * sizeof *c, LK_COPY_DEVICE_TO_HOST);
    if (!st) st = lk_queue_sync(q);
    if (st) fprintf(stderr, "  %s: %s: %s\n", lk_device_name(dev), lk_status_string(st),
                    lk_last_error());
    if (dc) lk_free(dev, dc);
    if (db) lk_free(dev, db);
    if (da) lk_free(dev, da);
    if (q) lk_queue_destroy(q);
    return st;
}

/* [-1, 1) from a linear congruential generator */
static float uniform(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) * 0x1p-23f - 1.0f;
}

int main(void)
{
    static uint16_t a[M * K], b[N * K];
    float ref[M * N], c[M * N];
    uint32_t seed = 12345; /* fixed: the same inputs on every run */
    for (int i = 0; i < M * K; i++)
        a[i] = lk_f32_to_bf16(uniform(&seed));
    for (int i = 0; i < N * K; i++)
        b[i] = lk_f32_to_bf16(uniform(&seed));

    lk_context *ctx;
    lk_device *dev;
    if (lk_context_create(&ctx) || lk_device_find(ctx, "ref", &dev)) {
        fprintf(stderr, "lockstep: %s\n", lk_last_error());
        return 1;
    }
    if (run_gemm(dev, a, b, ref)) {
        lk_context_destroy(ctx);
        return 1;
    }
    printf("gemm bf16 x bf16^T -> f32, %d x %d x %d; reference C[0,0] = %a\n", M, N, K, ref[0]);

    int bad = 0;
    for (int d = 0; d < lk_device_count(ctx); d++) {
        lk_device *other;
        if (lk_device_get(ctx, d, &other) || other == dev)
            continue;
        lk_status st = run_gemm(other, a, b, c);
        if (st == LK_ERR_UNSUPPORTED) {
            printf("  %-24s unsupported\n", lk_device_name(other));
        } else if (st) {
            printf("  %-24s failed\n", lk_device_name(other));
            bad = 1;
        } else if (memcmp(ref, c, sizeof ref) == 0) {
            printf("  %-24s identical\n", lk_device_name(other));
        } else {
            int i = 0;
            while (!memcmp(&ref[i], &c[i], sizeof *c)) i++;
            uint32_t rb, cb;
            memcpy(&rb, &ref[i], 4);
            memcpy(&cb, &c[i], 4);
            printf("  %-24s DIFFERS at element %d: 0x%08x vs reference 0x%08x\n",
                   lk_device_name(other), i, (unsigned)cb, (unsigned)rb);
            bad = 1;
        }
    }
    lk_context_destroy(ctx);
    return bad;
}
