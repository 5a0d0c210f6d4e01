/* libFuzzer target: the argument validator of every public op.
 *
 * The input picks an op, a device ("ref" or the CPU driver's "cpu"), the
 * op's scalar arguments and up to eight tensor descriptors: data NULL or
 * a buffer of its own, any dtype value (valid or not), rows, cols, ld and
 * batch_stride small or extreme, then which arguments are NULL, then the
 * buffers' bytes.  Each buffer is exactly as long as the
 * descriptor says (so AddressSanitizer sees any read or write beyond the
 * documented extent) and filled from the input (ids, positions and codes
 * are whatever the input says).  A descriptor whose extent is absurd but
 * does not overflow gets a NULL pointer: the library has to refuse it
 * without touching memory.  An op that returns an error must have left
 * every buffer as it was (the canary copy).
 *
 * Built with LK_FUZZ_VALIDATE 1 (tests/fuzz/fuzz_validate.c) it is the
 * validator's fast target: dimensions 0..5 or an edge value, buffers of at
 * most 64 KiB, the "ref" device alone on one thread, so that nearly every
 * call is refused or runs on a few elements in microseconds and a run
 * reaches 10^7 inputs in hours, not weeks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lockstep.h>
#include "tests/fuzz/fuzz.h"

#ifndef LK_FUZZ_VALIDATE
#define LK_FUZZ_VALIDATE 0
#endif

#define NT 8
#define MAX_BYTES ((int64_t)1 << (LK_FUZZ_VALIDATE ? 16 : 20))
/* the ordinary dimensions are 0 .. SMALL_DIM - 1 */
#define SMALL_DIM (LK_FUZZ_VALIDATE ? 6 : 70)

typedef struct input {
    const uint8_t *p;
    size_t n;
} input;

static uint64_t take(input *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v |= (uint64_t)(in->n ? *in->p : 0) << 8 * i;
        if (in->n)
            in->p++, in->n--;
    }
    return v;
}

/* A dimension: mostly small, sometimes a value at an edge (1 in 16). */
static int64_t dim(input *in)
{
    static const int64_t edge[16] = {0, -1, 1, 2, 3, 4, 255, 256, 257, 4096, (int64_t)1 << 31,
                                     ((int64_t)1 << 32) + 1, INT64_MAX, INT64_MIN,
                                     ((int64_t)1 << 62) + 3, 1024};
    unsigned b = (unsigned)take(in, 1);
    if (b < 0xf0)
        return b % SMALL_DIM;
    return edge[b & 15];
}

static float fval(input *in)
{
    static const float pick[8] = {1e-5f, 0.0f, -1.0f, 10000.0f, 0.125f, 1e30f, -0.0f, 500000.0f};
    unsigned b = (unsigned)take(in, 1);
    if (b < 0xc0)
        return pick[b & 7];
    uint32_t u = (uint32_t)take(in, 4);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int64_t esize(int dt)
{
    switch (dt) {
    case LK_F32: case LK_I32: return 4;
    case LK_BF16: case LK_F16: return 2;
    case LK_I8: return 1;
    case LK_I64: return 8;
    default: return 0;
    }
}

typedef struct buf {
    uint8_t *p, *copy;
    size_t n;
} buf;

static lk_tensor T[NT];
static buf B[NT];
static int64_t batch;

/* Bytes the view spans for `batch` matrices, -1 when that overflows or a
 * field is out of range (the library must refuse it: it gets a small
 * buffer, so any access beyond is caught). */
static int64_t extent(const lk_tensor *t, int64_t nb)
{
    int64_t rows = t->rows, cols = t->cols, ld = t->ld ? t->ld : t->cols, bs = t->batch_stride;
    if (rows < 0 || cols < 0 || ld < 0 || nb < 1)
        return -1;
    /* ops without a batch ignore batch_stride, so the buffer holds matrix 0
     * whatever it says; a batched op must refuse a negative one (the
     * matrices it would reach lie outside the buffer) */
    if (bs < 0)
        bs = 0;
    if (rows == 0 || cols == 0)
        return 0;
    int64_t last, tmp, with;
    if (__builtin_mul_overflow(rows - 1, ld, &last) || __builtin_add_overflow(last, cols, &last))
        return -1;
    int64_t es = t->dtype == LK_T2 ? 0 : esize((int)t->dtype), bytes;
    if (t->dtype != LK_T2 && (es == 0 || __builtin_mul_overflow(last, es, &bytes)))
        return -1;
    if (t->dtype == LK_T2)
        bytes = last / 4 + 1;
    /* likewise a batch stride that overflows, in elements or in bytes:
     * room for matrix 0 only (an op without a batch ignores the stride
     * and rightly writes all of matrix 0) */
    if (!__builtin_mul_overflow(nb - 1, bs, &tmp) && !__builtin_add_overflow(last, tmp, &with)) {
        int64_t wb;
        if (t->dtype == LK_T2)
            return with / 4 + 1;
        if (!__builtin_mul_overflow(with, es, &wb))
            return wb;
    }
    return bytes;
}

static void make_tensor(input *in, int i)
{
    lk_tensor *t = &T[i];
    unsigned kind = (unsigned)take(in, 1);
    unsigned dt = (unsigned)take(in, 1) % 10; /* 0 and 8, 9: no dtype */
    t->dtype = (lk_dtype)dt;
    t->rows = dim(in);
    t->cols = dim(in);
    int64_t pad = dim(in), ld;
    if (kind & 1 && !__builtin_add_overflow(t->cols, pad % 8, &ld))
        t->ld = ld; /* a few elements past cols, usually */
    else
        t->ld = kind & 2 ? pad : 0;
    int64_t bs = dim(in), step;
    if (kind & 4 && !__builtin_mul_overflow(bs, t->ld ? t->ld : t->cols, &step))
        bs = step; /* whole matrices apart, usually */
    t->batch_stride = kind & 12 ? bs : 0;
    int64_t bytes = extent(t, batch);
    B[i].n = 0;
    B[i].p = NULL;
    if (kind >> 5 == 7) {
        t->data = NULL; /* asked for */
        return;
    }
    if (bytes < 0)
        bytes = 64; /* must be refused */
    else if (bytes > MAX_BYTES) {
        t->data = NULL; /* too big to give: must be refused as NULL */
        return;
    }
    B[i].n = (size_t)bytes;
    B[i].p = malloc(B[i].n ? B[i].n : 1);
    t->data = B[i].p;
}

/* the buffers' contents: the rest of the input, then a pattern */
static void fill(input *in)
{
    for (int i = 0; i < NT; i++)
        for (size_t k = 0; k < B[i].n; k++)
            B[i].p[k] = in->n ? (uint8_t)take(in, 1) : (uint8_t)(k * 37 + (size_t)i);
}

static const lk_tensor *tp(input *in, int i)
{
    /* 1 in 16: the argument is a NULL pointer */
    return (take(in, 1) & 15) == 0 ? NULL : &T[i];
}

static lk_queue *queues[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const names[2] = {"ref", "cpu"};
    lk_context *ctx;
    if (lk_context_create(&ctx) != LK_OK)
        abort();
    /* the validator's target: ref alone, one thread (queues[1] stays NULL,
     * so the device byte picks ref either way) */
    for (int d = 0; d < (LK_FUZZ_VALIDATE ? 1 : 2); d++) {
        lk_device *dev;
        lk_queue_opts o = {LK_FUZZ_VALIDATE ? 1 : 2, NULL};
        if (lk_device_find(ctx, names[d], &dev) != LK_OK || lk_queue_create(dev, &o, &queues[d]) != LK_OK)
            queues[d] = NULL;
    }
    if (!queues[0])
        abort();
    return 0;
}

#define NOPS 27

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size};
    int op = (int)(take(&in, 1) % NOPS);
    lk_queue *q = queues[take(&in, 1) & 1];
    if (!q)
        q = queues[0];
    batch = (int64_t)(take(&in, 1) % 4);
    if (batch == 3)
        batch = -1;
    int64_t nb = batch < 1 ? 1 : batch;
    unsigned e1 = (unsigned)take(&in, 1), e2 = (unsigned)take(&in, 1);
    unsigned flags = (unsigned)take(&in, 1);
    float f1 = fval(&in), f2 = fval(&in);
    int64_t i1 = dim(&in), i2 = dim(&in);
    int64_t saved = batch;
    batch = nb;
    for (int i = 0; i < NT; i++)
        make_tensor(&in, i);
    batch = saved;
    const lk_tensor *a[NT];
    for (int i = 0; i < NT; i++)
        a[i] = tp(&in, i);
    fill(&in);
    for (int i = 0; i < NT; i++) {
        B[i].copy = B[i].n ? malloc(B[i].n) : NULL;
        if (B[i].n)
            memcpy(B[i].copy, B[i].p, B[i].n);
    }
    if (getenv("LK_FUZZ_DEBUG")) { /* what this input asks for */
        fprintf(stderr, "op %d on %s, batch %lld, e1 %u e2 %u flags %u f1 %a f2 %a i1 %lld i2 %lld\n",
                op, lk_device_name(lk_queue_device(q)), (long long)batch, e1, e2, flags,
                (double)f1, (double)f2, (long long)i1, (long long)i2);
        for (int i = 0; i < NT; i++)
            fprintf(stderr, "  t%d%s: %s dtype %d %lld x %lld ld %lld bs %lld, %zu bytes\n", i,
                    a[i] ? "" : " (NULL arg)", T[i].data ? "data" : "NULL", (int)T[i].dtype,
                    (long long)T[i].rows, (long long)T[i].cols, (long long)T[i].ld,
                    (long long)T[i].batch_stride, B[i].n);
    }
    lk_weights *w = NULL;
    lk_status st = LK_OK;
    int e = (int)(e1 % 10), u = (int)(e2 % 20);
    switch (op) {
    case 0: st = lk_gemm(q, (lk_transpose)(e1 % 3), (lk_transpose)(e2 % 3), a[0], a[1], a[2], a[3], batch, flags); break;
    case 1: st = lk_reduce(q, (lk_reduce_op)e, a[0], a[1]); break;
    case 2: st = lk_rmsnorm(q, a[0], a[1], f1, a[2]); break;
    case 3: st = lk_layernorm(q, a[0], a[1], a[2], f1, a[3]); break;
    case 4: st = lk_softmax(q, a[0], a[1]); break;
    case 5: st = lk_log_softmax(q, a[0], a[1]); break;
    case 6: st = lk_unary(q, (lk_unary_op)u, a[0], a[1]); break;
    case 7: st = lk_convert(q, a[0], a[1]); break;
    case 8: st = lk_binary(q, (lk_binary_op)(e1 % 4), a[0], a[1], a[2]); break;
    case 9: st = lk_glu(q, (lk_unary_op)u, a[0], a[1], a[2]); break;
    case 10: st = lk_quantize_act(q, a[0], a[1], a[2]); break;
    case 11: st = lk_rmsnorm_quantize(q, a[0], a[1], f1, a[2], a[3]); break;
    case 12: st = lk_quantize_ternary(q, a[0], a[1], a[2]); break;
    case 13: st = lk_ternary_pack(q, a[0], a[1]); break;
    case 14: st = lk_ternary_unpack(q, a[0], a[1]); break;
    case 15: st = lk_ternary_gemm(q, a[0], a[1], a[2], a[3], a[4]); break;
    case 16: st = lk_int8_gemm(q, a[0], a[1], a[2], a[3], a[4]); break;
    case 17: st = lk_rope(q, a[0], a[1], i1, f1, flags, a[2]); break;
    case 18: st = lk_attention(q, a[0], a[1], a[2], a[3], i1, i2, f1, a[4], batch); break;
    case 19: st = lk_embedding(q, a[0], a[1], a[2]); break;
    case 20: st = lk_set_rows(q, a[0], a[1], a[2]); break;
    case 21:
    case 22:
    case 23:
    case 24:
        st = lk_weights_prepare(q, a[0], a[1], e1 & 1 ? NULL : &w);
        if (st == LK_OK && w) {
            if (op == 22)
                st = lk_linear(q, a[2], w, a[3], a[4], flags);
            else if (op == 23)
                st = lk_ternary_linear(q, a[2], a[3], w, a[4], flags);
            else if (op == 24)
                st = lk_rmsnorm_ternary_linear(q, a[2], a[3], f2, a[4], a[5], w, a[6], flags);
        }
        break;
    case 25: {
        lk_bitnet_config c = {i1, i2, dim(&in), dim(&in), dim(&in), f1, f2, fval(&in), flags};
        (void)lk_bitnet_decode_scratch(&c, batch);
        /* layers without weights: the config and tensors are what is checked */
        lk_bitnet_layer L;
        memset(&L, 0, sizeof L);
        L.attn_norm = a[2];
        L.attn_sub_norm = a[3];
        L.ffn_norm = a[4];
        L.ffn_sub_norm = a[5];
        L.kv = a[6];
        st = lk_bitnet_decode(q, e1 & 1 ? NULL : &c, e2 & 1 ? NULL : &L, (int64_t)(e2 % 3),
                              a[0], a[1], i1, B[7].p, B[7].n);
        break;
    }
    default: {
        /* the queue and device entry points with hostile arguments */
        void *p = NULL;
        lk_device *dev = lk_queue_device(q);
        if (i1 >= 0 && i1 < 4096 && lk_malloc(dev, (size_t)i1, &p) == LK_OK)
            lk_free(dev, p);
        st = lk_memcpy(q, a[0] ? T[0].data : NULL, a[1] ? T[1].data : NULL,
                       B[0].n < B[1].n ? B[0].n : B[1].n, (lk_copy_kind)(e1 % 5));
        break;
    }
    }
    if (st != LK_OK) {
        if (lk_last_error()[0] == '\0')
            abort(); /* an error without a message */
        for (int i = 0; i < NT; i++)
            if (B[i].n && memcmp(B[i].p, B[i].copy, B[i].n) != 0)
                abort(); /* an error that wrote into a buffer */
    }
    lk_weights_destroy(w);
    for (int i = 0; i < NT; i++) {
        free(B[i].p);
        free(B[i].copy);
        B[i].p = B[i].copy = NULL;
        B[i].n = 0;
    }
    return 0;
}
