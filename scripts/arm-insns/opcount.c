/* Lockstep ARM instruction counts (scripts/arm-insns.sh): runs one op
 * `reps` times on one device and one thread, so that under qemu with
 * insn_count.so the count of (reps = 5) minus (reps = 1), over 4, is one
 * call without the set-up.
 *   opcount DEVICE OP REPS    OP: gemm ternary_gemv int8_gemm softmax rmsnorm
 * Shapes: gemm f32 64 x 256 by 256 x 64 (NN); ternary_gemv 1 x 2560 int8
 * by 1024 x 2560 LK_T2; int8_gemm 4 x 2560 by 256 x 2560 into int32;
 * softmax and rmsnorm f32 8 x 2560. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lockstep.h>

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

int main(int argc, char **argv)
{
    if (argc < 4) return fprintf(stderr, "usage: opcount DEVICE OP REPS\n"), 2;
    const char *devname = argv[1], *op = argv[2];
    int reps = atoi(argv[3]);
    lk_context *ctx; lk_device *dev; lk_queue *q;
    lk_queue_opts o = {1, NULL};
    if (lk_context_create(&ctx) || lk_device_find(ctx, devname, &dev) || lk_queue_create(dev, &o, &q))
        return fprintf(stderr, "%s\n", lk_last_error()), 1;
    unsigned s = 1;
    const int64_t M = 64, N = 64, K = 256;       /* gemm */
    const int64_t TN = 1024, TK = 2560;          /* ternary gemv */
    const int64_t R = 8, C = 2560;               /* rows */
    size_t big = (size_t)(TN * TK) + (1u << 20);
    float *a = malloc(big * 4), *b = malloc(big * 4), *c = malloc(big * 4);
    int8_t *xq = malloc(big); uint8_t *w = malloc(big);
    for (size_t i = 0; i < big; i++) { a[i] = frand(&s); b[i] = frand(&s); xq[i] = (int8_t)(s >> 9); w[i] = (uint8_t)((s >> 3) & 0xaa) ; }
    float xs[64], ws = 0.5f;
    for (int i = 0; i < 64; i++) xs[i] = 100.0f;
    lk_status st = LK_OK;
    for (int r = 0; r < reps && st == LK_OK; r++) {
        if (!strcmp(op, "gemm")) {
            lk_tensor ta = lk_mat(a, LK_F32, M, K), tb = lk_mat(b, LK_F32, K, N), tc = lk_mat(c, LK_F32, M, N);
            st = lk_gemm(q, LK_NO_TRANS, LK_NO_TRANS, &ta, &tb, NULL, &tc, 1, 0);
        } else if (!strcmp(op, "ternary_gemv")) {
            lk_tensor tx = lk_mat(xq, LK_I8, 1, TK), tsx = lk_mat(xs, LK_F32, 1, 1);
            lk_tensor tw = lk_mat(w, LK_T2, TN, TK), tws = lk_mat(&ws, LK_F32, 1, 1), ty = lk_mat(c, LK_F32, 1, TN);
            st = lk_ternary_gemm(q, &tx, &tsx, &tw, &tws, &ty);
        } else if (!strcmp(op, "int8_gemm")) {
            lk_tensor ta = lk_mat(xq, LK_I8, 4, TK), tb = lk_mat(xq + 4 * TK, LK_I8, 256, TK), tc = lk_mat(c, LK_I32, 4, 256);
            st = lk_int8_gemm(q, &ta, &tb, NULL, NULL, &tc);
        } else if (!strcmp(op, "softmax")) {
            lk_tensor tx = lk_mat(a, LK_F32, R, C), ty = lk_mat(c, LK_F32, R, C);
            st = lk_softmax(q, &tx, &ty);
        } else if (!strcmp(op, "rmsnorm")) {
            lk_tensor tx = lk_mat(a, LK_F32, R, C), ty = lk_mat(c, LK_F32, R, C);
            st = lk_rmsnorm(q, &tx, NULL, 1e-5f, &ty);
        } else return fprintf(stderr, "unknown op\n"), 2;
    }
    lk_queue_sync(q);
    if (st != LK_OK) return fprintf(stderr, "%s: %s\n", op, lk_last_error()), 1;
    printf("%s on %s x%d: %08x\n", op, devname, reps, ((unsigned *)c)[3]);
    lk_queue_destroy(q); lk_context_destroy(ctx);
    return 0;
}
