/* Lockstep contract matrix: the list of cases.
 *
 * Every op, every dtype combination of it, each flag, and the awkward
 * inputs: shapes drawn from sizes that are multiples of no vector width or
 * tile (1, 3, 7, 17, 63, 65, 127, 129, 255, 257, 1000, and long rows past
 * one 4096-element chunk or with K = 4099), ld padding, batches with shared
 * operands, and edge values (NaN payloads, +-Inf, +-0, subnormals, rounding
 * ties, near-overflow, large negative exponents).  Shapes come from the
 * case's own seed, so the list has the same structure for every seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/matrix.h"

static const int64_t mx_sizes[] = {1, 3, 7, 17, 63, 65, 127, 129, 255, 257, 1000};
static const int64_t mx_rows[] = {1, 3, 7, 17, 33};
static const int64_t mx_long[] = {4097, 4099, 8200, 12289};
static const lk_dtype mx_float[3] = {LK_F32, LK_BF16, LK_F16};
#define MX_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

typedef struct mx_list {
    lk_mx_case *v;
    int n, cap;
    uint64_t seed;
    int full;
    int failed;
    uint64_t rng; /* shape choices of the case being built */
} mx_list;

static uint64_t mx_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t mx_rand(mx_list *L)
{
    L->rng = mx_mix(L->rng);
    return L->rng;
}

static int64_t mx_pick(mx_list *L, const int64_t *set, int n)
{
    return set[mx_rand(L) % (uint64_t)n];
}

static const char *mx_dt(lk_dtype dt)
{
    return lk_dtype_name(dt);
}

static lk_mx_case *mx_add(mx_list *L, lk_mx_kind kind, const char *op)
{
    static lk_mx_case dummy;
    if (L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 256;
        lk_mx_case *v = realloc(L->v, (size_t)cap * sizeof *v);
        if (!v) {
            L->failed = 1;
            return memset(&dummy, 0, sizeof dummy);
        }
        L->v = v;
        L->cap = cap;
    }
    lk_mx_case *c = &L->v[L->n];
    memset(c, 0, sizeof *c);
    c->id = L->n++;
    c->kind = kind;
    snprintf(c->op, sizeof c->op, "%s", op);
    c->seed = mx_mix(L->seed ^ mx_mix((uint64_t)c->id));
    c->expect = LK_OK;
    c->batch = 1;
    for (int i = 0; i < LK_MX_MAX_BUFS; i++)
        c->buf[i].alias = -1;
    L->rng = c->seed ^ 0x5a5a5a5a5a5a5a5aull;
    return c;
}

static lk_mx_buf *mx_set(lk_mx_case *c, int i, const char *name, lk_dtype dt, int64_t rows,
                         int64_t cols, lk_mx_role role, lk_mx_axis ax, lk_mx_fill fill,
                         int param)
{
    lk_mx_buf *b = &c->buf[i];
    b->name = name;
    b->present = 1;
    b->alias = -1;
    b->dtype = dt;
    b->rows = rows;
    b->cols = cols;
    b->ld = dt == LK_T2 ? (cols + 3) / 4 * 4 : cols;
    if (b->ld == 0)
        b->ld = dt == LK_T2 ? 4 : 1;
    b->nmat = 1;
    b->batch_stride = 0;
    b->role = role;
    b->m_axis = ax;
    b->fill = role == LK_MX_OUT ? LK_MX_FILL_SENTINEL : fill;
    b->fill_param = param;
    if (i >= c->nbuf)
        c->nbuf = i + 1;
    return b;
}

/* Absent optional tensor at slot i. */
static void mx_absent(lk_mx_case *c, int i, const char *name)
{
    c->buf[i].name = name;
    c->buf[i].present = 0;
    c->buf[i].alias = -1;
    if (i >= c->nbuf)
        c->nbuf = i + 1;
}

static const char *mx_fill_tag(lk_mx_fill f)
{
    switch (f) {
    case LK_MX_FILL_EDGE: return " edge";
    case LK_MX_FILL_WIDE: return " wide";
    case LK_MX_FILL_ALLBITS: return " allbits";
    case LK_MX_FILL_OFFSET: return " offset";
    case LK_MX_FILL_NEGBIG: return " negbig";
    case LK_MX_FILL_ZEROROWS: return " zerorows";
    case LK_MX_FILL_SCALE_EDGE: return " scale-edge";
    case LK_MX_FILL_I8_CONST: return " extreme";
    case LK_MX_FILL_TERNARY_BAD: return " bad-value";
    case LK_MX_FILL_T2_ALL3: return " code3";
    default: return "";
    }
}

/* ------------------------------------------------------------------ GEMM */

typedef struct mx_gemm_spec {
    lk_dtype a, b, c, bias;  /* bias 0: none */
    lk_transpose ta, tb;
    unsigned flags;
    int64_t batch;
    int shared;              /* 1: A shared by the batch, 2: B shared */
    int pad;                 /* ld larger than cols */
    int64_t m, n, k;         /* < 0: drawn */
    lk_mx_fill fill;
    int param;
} mx_gemm_spec;

static void mx_gemm(mx_list *L, mx_gemm_spec s)
{
    lk_mx_case *c = mx_add(L, LK_MX_GEMM, "gemm");
    int64_t budget = L->full ? (int64_t)1 << 23 : (int64_t)1 << 20;
    int64_t batch = s.batch > 0 ? s.batch : 1;
    int64_t m = s.m, n = s.n, k = s.k;
    for (int tries = 0; tries < 1000; tries++) {
        m = s.m >= 0 ? s.m : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        n = s.n >= 0 ? s.n : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        k = s.k >= 0 ? s.k : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        if (m * n * k * batch <= budget)
            break;
    }
    c->ta = s.ta;
    c->tb = s.tb;
    c->flags = s.flags;
    c->batch = batch;
    c->m = m;
    lk_mx_fill f = s.fill ? s.fill : LK_MX_FILL_NORMAL;
    int64_t gap = s.pad ? 5 : 0;
    lk_mx_buf *a = s.ta == LK_NO_TRANS
                       ? mx_set(c, 0, "a", s.a, m, k, LK_MX_IN, LK_MX_AXIS_ROWS, f, s.param)
                       : mx_set(c, 0, "a", s.a, k, m, LK_MX_IN, LK_MX_AXIS_COLS, f, s.param);
    lk_mx_buf *b = s.tb == LK_NO_TRANS
                       ? mx_set(c, 1, "b", s.b, k, n, LK_MX_IN, LK_MX_AXIS_NONE, f, s.param)
                       : mx_set(c, 1, "b", s.b, n, k, LK_MX_IN, LK_MX_AXIS_NONE, f, s.param);
    if (s.bias)
        mx_set(c, 2, "bias", s.bias, 1, n, LK_MX_IN, LK_MX_AXIS_NONE, f, s.param);
    else
        mx_absent(c, 2, "bias");
    lk_mx_buf *cc = mx_set(c, 3, "c", s.c, m, n,
                           (s.flags & LK_GEMM_ACCUMULATE) ? LK_MX_INOUT : LK_MX_OUT,
                           LK_MX_AXIS_ROWS, f, s.param);
    a->ld += gap;
    b->ld += gap;
    cc->ld += gap ? 3 : 0;
    if (batch > 1) {
        lk_mx_buf *mats[3] = {a, b, cc};
        for (int i = 0; i < 3; i++) {
            int shared = (i == 0 && s.shared == 1) || (i == 1 && s.shared == 2);
            mats[i]->nmat = shared ? 1 : batch;
            mats[i]->batch_stride = shared ? 0 : mats[i]->rows * mats[i]->ld + 2;
        }
    }
    snprintf(c->label, sizeof c->label, "%s*%s->%s %c%c%s%s%s%s%s %lldx%lldx%lld%s%s",
             mx_dt(s.a), mx_dt(s.b), mx_dt(s.c), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N',
             s.bias ? " bias:" : "", s.bias ? mx_dt(s.bias) : "",
             (s.flags & LK_GEMM_ACCUMULATE) ? " acc" : "",
             s.shared == 1 ? " sharedA" : s.shared == 2 ? " sharedB" : "",
             s.pad ? " ld+" : "", (long long)m, (long long)n, (long long)k,
             batch > 1 ? " batch" : "", mx_fill_tag(f));
    if (batch > 1) {
        size_t len = strlen(c->label);
        snprintf(c->label + len, sizeof c->label - len, "%lld", (long long)batch);
    }
}

static mx_gemm_spec mx_gspec(lk_dtype a, lk_dtype b, lk_dtype c)
{
    mx_gemm_spec s;
    memset(&s, 0, sizeof s);
    s.a = a;
    s.b = b;
    s.c = c;
    s.m = s.n = s.k = -1;
    s.batch = 1;
    return s;
}

static void mx_gemm_cases(mx_list *L)
{
    /* every dtype combination; flags drawn (all of them with --full) */
    for (int ia = 0; ia < 3; ia++)
        for (int ib = 0; ib < 3; ib++)
            for (int ic = 0; ic < 3; ic++) {
                int variants = L->full ? 16 : 1;
                for (int v = 0; v < variants; v++) {
                    mx_gemm_spec s = mx_gspec(mx_float[ia], mx_float[ib], mx_float[ic]);
                    uint64_t r = L->full ? (uint64_t)v : mx_mix(L->seed + (uint64_t)(ia * 9 + ib * 3 + ic));
                    s.ta = (lk_transpose)(r & 1);
                    s.tb = (lk_transpose)((r >> 1) & 1);
                    s.bias = (r >> 2) & 1 ? mx_float[(r >> 8) % 3] : (lk_dtype)0;
                    s.flags = (r >> 3) & 1 ? LK_GEMM_ACCUMULATE : 0;
                    mx_gemm(L, s);
                }
            }
    for (int t = 0; t < 4; t++) {
        mx_gemm_spec s = mx_gspec(LK_BF16, LK_BF16, LK_F32);
        s.ta = (lk_transpose)(t & 1);
        s.tb = (lk_transpose)(t >> 1);
        mx_gemm(L, s);
    }
    for (int i = 0; i < 3; i++) {
        mx_gemm_spec s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.bias = mx_float[i];
        mx_gemm(L, s);
        s = mx_gspec(LK_F16, LK_BF16, mx_float[i]);
        s.flags = LK_GEMM_ACCUMULATE;
        s.bias = LK_F32;
        mx_gemm(L, s);
    }
    { /* batches: strided, and an operand shared by every matrix */
        mx_gemm_spec s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.batch = 3;
        s.bias = LK_F32;
        mx_gemm(L, s);
        s = mx_gspec(LK_BF16, LK_BF16, LK_F32);
        s.batch = 4;
        s.shared = 2;
        mx_gemm(L, s);
        s = mx_gspec(LK_F16, LK_F32, LK_BF16);
        s.batch = 2;
        s.shared = 1;
        s.ta = LK_TRANS;
        s.flags = LK_GEMM_ACCUMULATE;
        mx_gemm(L, s);
        /* ld padding */
        s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.pad = 1;
        mx_gemm(L, s);
        s = mx_gspec(LK_BF16, LK_BF16, LK_BF16);
        s.pad = 1;
        s.ta = s.tb = LK_TRANS;
        s.batch = 2;
        mx_gemm(L, s);
    }
    { /* long K (many KB blocks, a ragged last one), GEMV, block edges */
        mx_gemm_spec s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.m = 3, s.n = 17, s.k = 4099;
        mx_gemm(L, s);
        s = mx_gspec(LK_BF16, LK_BF16, LK_BF16);
        s.m = 1, s.n = 65, s.k = 4099;
        s.tb = LK_TRANS;
        mx_gemm(L, s);
        s = mx_gspec(LK_F16, LK_F16, LK_F32);
        s.m = 7, s.n = 3, s.k = 4099;
        s.ta = s.tb = LK_TRANS;
        mx_gemm(L, s);
        s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.m = 1, s.n = 257, s.k = 1000;
        s.tb = LK_TRANS;
        mx_gemm(L, s);
        s = mx_gspec(LK_BF16, LK_BF16, LK_BF16);
        s.m = 1, s.n = 129, s.k = 2560;
        s.tb = LK_TRANS;
        s.bias = LK_BF16;
        mx_gemm(L, s);
        static const int64_t ks[] = {1, 127, 128, 129, 256, 257};
        for (int i = 0; i < MX_COUNT(ks); i++) {
            s = mx_gspec(LK_F32, LK_BF16, LK_F32);
            s.m = 5, s.n = 9, s.k = ks[i];
            mx_gemm(L, s);
        }
        /* K = 0 gives +0 (then bias, then C); M = 0 is a no-op */
        s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.m = 3, s.n = 5, s.k = 0;
        s.bias = LK_F32;
        mx_gemm(L, s);
        s.bias = 0;
        s.flags = LK_GEMM_ACCUMULATE;
        mx_gemm(L, s);
        s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.m = 0, s.n = 5, s.k = 7;
        mx_gemm(L, s);
    }
    { /* edge values: sparse enough that most outputs stay finite */
        for (int i = 0; i < 3; i++) {
            mx_gemm_spec s = mx_gspec(mx_float[i], mx_float[i], mx_float[i]);
            s.fill = LK_MX_FILL_EDGE;
            s.param = 97;
            s.bias = mx_float[i];
            mx_gemm(L, s);
        }
        mx_gemm_spec s = mx_gspec(LK_F32, LK_F32, LK_F32);
        s.fill = LK_MX_FILL_EDGE;
        s.param = 3;
        s.flags = LK_GEMM_ACCUMULATE;
        mx_gemm(L, s);
        /* large magnitudes: f16 and bf16 stores overflow to Inf */
        s = mx_gspec(LK_F32, LK_F32, LK_F16);
        s.param = 6;
        mx_gemm(L, s);
        s = mx_gspec(LK_F32, LK_F32, LK_BF16);
        s.param = 57;
        mx_gemm(L, s);
    }
}

/* ------------------------------------------------------------ reductions */

static const char *mx_reduce_name(lk_reduce_op op)
{
    switch (op) {
    case LK_REDUCE_SUM: return "reduce.sum";
    case LK_REDUCE_MEAN: return "reduce.mean";
    case LK_REDUCE_MAX: return "reduce.max";
    case LK_REDUCE_MIN: return "reduce.min";
    case LK_REDUCE_VAR: return "reduce.var";
    case LK_REDUCE_VAR_UNBIASED: return "reduce.var_unbiased";
    default: return "reduce.argmax";
    }
}

/* rows/cols < 0: drawn (cols < -1: from the long sizes). */
static void mx_rows_cols(mx_list *L, int64_t *rows, int64_t *cols, int64_t budget)
{
    int64_t r = *rows, c = *cols;
    for (int tries = 0; tries < 1000; tries++) {
        r = *rows >= 0 ? *rows : mx_pick(L, mx_rows, MX_COUNT(mx_rows));
        c = *cols >= 0 ? *cols
                       : *cols == -1 ? mx_pick(L, mx_sizes, MX_COUNT(mx_sizes))
                                     : mx_pick(L, mx_long, MX_COUNT(mx_long));
        if (r * c <= budget)
            break;
    }
    *rows = r;
    *cols = c;
}

static int64_t mx_row_budget(const mx_list *L)
{
    return L->full ? (int64_t)1 << 20 : (int64_t)1 << 17;
}

static void mx_reduce(mx_list *L, lk_reduce_op op, lk_dtype xd, lk_dtype yd, int64_t rows,
                      int64_t cols, lk_mx_fill fill, int param, int64_t ystride)
{
    lk_mx_case *c = mx_add(L, LK_MX_REDUCE, mx_reduce_name(op));
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    c->sub = (int)op;
    c->m = rows;
    mx_set(c, 0, "x", xd, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, param);
    lk_mx_buf *y = mx_set(c, 1, "y", yd, rows, 1, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    y->ld = ystride > 0 ? ystride : 1;
    snprintf(c->label, sizeof c->label, "%s->%s %lldx%lld%s%s", mx_dt(xd), mx_dt(yd),
             (long long)rows, (long long)cols, ystride > 1 ? " y-stride" : "",
             mx_fill_tag(fill));
}

static void mx_reduce_cases(mx_list *L)
{
    static const lk_reduce_op ops[] = {LK_REDUCE_SUM, LK_REDUCE_MEAN, LK_REDUCE_MAX,
                                       LK_REDUCE_MIN, LK_REDUCE_VAR, LK_REDUCE_VAR_UNBIASED};
    for (int o = 0; o < MX_COUNT(ops); o++) {
        int var = ops[o] == LK_REDUCE_VAR || ops[o] == LK_REDUCE_VAR_UNBIASED;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                mx_reduce(L, ops[o], mx_float[i], mx_float[j], -1, -1,
                          var && j == 0 ? LK_MX_FILL_OFFSET : LK_MX_FILL_NORMAL, 0, 1);
        for (int i = 0; i < 3; i++)
            mx_reduce(L, ops[o], mx_float[i], i == 1 ? LK_F32 : mx_float[i], -1, -1,
                      LK_MX_FILL_EDGE, 64, 1);
        mx_reduce(L, ops[o], LK_F32, LK_F32, 2, -2, LK_MX_FILL_NORMAL, 0, 1);
        mx_reduce(L, ops[o], LK_BF16, LK_F32, 3, 1, LK_MX_FILL_NORMAL, 0, 2);
    }
    for (int i = 0; i < 3; i++) {
        mx_reduce(L, LK_REDUCE_ARGMAX, mx_float[i], LK_I64, -1, -1, LK_MX_FILL_NORMAL, 0, 1);
        mx_reduce(L, LK_REDUCE_ARGMAX, mx_float[i], LK_I64, -1, -1, LK_MX_FILL_EDGE, 16, 1);
    }
    mx_reduce(L, LK_REDUCE_ARGMAX, LK_F32, LK_I64, 7, 65, LK_MX_FILL_ZEROROWS, 0, 3);
    mx_reduce(L, LK_REDUCE_ARGMAX, LK_BF16, LK_I64, 2, -2, LK_MX_FILL_NORMAL, 0, 1);
    mx_reduce(L, LK_REDUCE_SUM, LK_F32, LK_F32, 5, 17, LK_MX_FILL_WIDE, 0, 1);
    mx_reduce(L, LK_REDUCE_VAR, LK_F32, LK_F32, 7, 63, LK_MX_FILL_ZEROROWS, 0, 1);
    if (L->full) /* more than 4096 chunks: the partials are lane-summed again */
        mx_reduce(L, LK_REDUCE_SUM, LK_F32, LK_F32, 1, (int64_t)4096 * 4097 + 3,
                  LK_MX_FILL_NORMAL, 0, 1);
}

/* ------------------------------------------------------ norms, softmax */

static void mx_norm(mx_list *L, lk_mx_kind kind, lk_dtype xd, lk_dtype yd, lk_dtype wd,
                    lk_dtype bd, float eps, int64_t rows, int64_t cols, lk_mx_fill fill,
                    int param)
{
    int ln = kind == LK_MX_LAYERNORM;
    lk_mx_case *c = mx_add(L, kind, ln ? "layernorm" : "rmsnorm");
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    c->m = rows;
    c->eps = eps;
    mx_set(c, 0, "x", xd, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, param);
    if (wd)
        mx_set(c, 1, "weight", wd, 1, cols, LK_MX_IN, LK_MX_AXIS_NONE, LK_MX_FILL_NORMAL, 0);
    else
        mx_absent(c, 1, "weight");
    if (ln && bd)
        mx_set(c, 2, "bias", bd, 1, cols, LK_MX_IN, LK_MX_AXIS_NONE, LK_MX_FILL_NORMAL, 0);
    else
        mx_absent(c, 2, "bias");
    mx_set(c, 3, "y", yd, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    snprintf(c->label, sizeof c->label, "%s->%s%s%s%s%s eps=%g %lldx%lld%s", mx_dt(xd),
             mx_dt(yd), wd ? " w:" : "", wd ? mx_dt(wd) : "", ln && bd ? " b:" : "",
             ln && bd ? mx_dt(bd) : "", (double)eps, (long long)rows, (long long)cols,
             mx_fill_tag(fill));
}

static void mx_norm_cases(mx_list *L, lk_mx_kind kind)
{
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            uint64_t r = mx_mix(L->seed ^ (uint64_t)(kind * 16 + i * 3 + j));
            lk_dtype wd = r % 4 ? mx_float[(r >> 4) % 3] : (lk_dtype)0;
            lk_dtype bd = (r >> 8) % 4 ? mx_float[(r >> 12) % 3] : (lk_dtype)0;
            mx_norm(L, kind, mx_float[i], mx_float[j], wd, bd, eps[(r >> 16) % 3], -1, -1,
                    LK_MX_FILL_NORMAL, 0);
        }
    for (int i = 0; i < 3; i++) {
        mx_norm(L, kind, mx_float[i], mx_float[i], mx_float[i], mx_float[i], 1e-5f, -1, -1,
                LK_MX_FILL_EDGE, 32);
        mx_norm(L, kind, LK_F32, LK_F32, mx_float[i], mx_float[(i + 1) % 3], 1e-6f, -1, -1,
                LK_MX_FILL_NORMAL, 0);
    }
    mx_norm(L, kind, LK_F32, LK_F32, 0, 0, 0.0f, 7, -1, LK_MX_FILL_ZEROROWS, 0);
    mx_norm(L, kind, LK_BF16, LK_BF16, LK_BF16, 0, 1e-6f, 7, -1, LK_MX_FILL_ZEROROWS, 0);
    mx_norm(L, kind, LK_F32, LK_BF16, LK_F32, LK_F32, 1e-5f, -1, -1, LK_MX_FILL_OFFSET, 0);
    mx_norm(L, kind, LK_F32, LK_F16, 0, 0, 1e-5f, -1, -1, LK_MX_FILL_NORMAL, 20);
    mx_norm(L, kind, LK_BF16, LK_F32, LK_BF16, LK_BF16, 1e-5f, 2, -2, LK_MX_FILL_NORMAL, 0);
}

static void mx_softmax(mx_list *L, lk_mx_kind kind, lk_dtype xd, lk_dtype yd, int64_t rows,
                       int64_t cols, lk_mx_fill fill, int param)
{
    lk_mx_case *c = mx_add(L, kind, kind == LK_MX_SOFTMAX ? "softmax" : "log_softmax");
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    c->m = rows;
    mx_set(c, 0, "x", xd, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, param);
    mx_set(c, 1, "y", yd, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    snprintf(c->label, sizeof c->label, "%s->%s %lldx%lld%s", mx_dt(xd), mx_dt(yd),
             (long long)rows, (long long)cols, mx_fill_tag(fill));
}

static void mx_softmax_cases(mx_list *L, lk_mx_kind kind)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            mx_softmax(L, kind, mx_float[i], mx_float[j], -1, -1, LK_MX_FILL_NORMAL, 2);
    for (int i = 0; i < 3; i++)
        mx_softmax(L, kind, mx_float[i], LK_F32, -1, -1, LK_MX_FILL_NEGBIG, 0);
    mx_softmax(L, kind, LK_F32, LK_F32, -1, -1, LK_MX_FILL_EDGE, 40);
    mx_softmax(L, kind, LK_F16, LK_F16, -1, -1, LK_MX_FILL_EDGE, 40);
    mx_softmax(L, kind, LK_F32, LK_F32, 17, 65, LK_MX_FILL_WIDE, 0);
    mx_softmax(L, kind, LK_BF16, LK_F32, 2, -2, LK_MX_FILL_NORMAL, 4);
}

/* --------------------------------------------------------- element-wise */

static const char *mx_unary_name(lk_unary_op op)
{
    switch (op) {
    case LK_UNARY_COPY: return "convert";
    case LK_UNARY_RELU: return "unary.relu";
    case LK_UNARY_RELU2: return "unary.relu2";
    case LK_UNARY_SIGMOID: return "unary.sigmoid";
    case LK_UNARY_SILU: return "unary.silu";
    case LK_UNARY_GELU_TANH: return "unary.gelu_tanh";
    case LK_UNARY_GELU_ERF: return "unary.gelu_erf";
    case LK_UNARY_EXP: return "unary.exp";
    case LK_UNARY_LOG: return "unary.log";
    case LK_UNARY_TANH: return "unary.tanh";
    default: return "unary.erf";
    }
}

static int64_t mx_elem_budget(const mx_list *L)
{
    return L->full ? (int64_t)1 << 19 : (int64_t)1 << 16;
}

static void mx_unary(mx_list *L, lk_unary_op op, lk_dtype xd, lk_dtype yd, lk_mx_fill fill,
                     int inplace, int pad)
{
    lk_mx_case *c = mx_add(L, op == LK_UNARY_COPY ? LK_MX_CONVERT : LK_MX_UNARY,
                           mx_unary_name(op));
    int64_t rows = -1, cols = -1;
    if (fill == LK_MX_FILL_ALLBITS) /* every 16-bit pattern once or more */
        rows = 129, cols = 511;
    mx_rows_cols(L, &rows, &cols, mx_elem_budget(L));
    c->sub = (int)op;
    c->m = rows;
    lk_mx_buf *x = mx_set(c, 0, "x", xd, rows, cols, inplace ? LK_MX_INOUT : LK_MX_IN,
                          LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *y = mx_set(c, 1, "y", yd, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    if (pad) {
        x->ld += 3;
        y->ld += 1;
    }
    if (inplace) {
        y->alias = 0;
        y->ld = x->ld;
    }
    snprintf(c->label, sizeof c->label, "%s->%s %lldx%lld%s%s%s", mx_dt(xd), mx_dt(yd),
             (long long)rows, (long long)cols, inplace ? " in-place" : "", pad ? " ld+" : "",
             mx_fill_tag(fill));
}

static void mx_unary_cases(mx_list *L)
{
    for (int op = LK_UNARY_RELU; op <= LK_UNARY_ERF; op++) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                mx_unary(L, (lk_unary_op)op, mx_float[i], mx_float[j], LK_MX_FILL_WIDE, 0, 0);
        mx_unary(L, (lk_unary_op)op, LK_BF16, LK_F32, LK_MX_FILL_ALLBITS, 0, 0);
        mx_unary(L, (lk_unary_op)op, LK_F16, LK_F32, LK_MX_FILL_ALLBITS, 0, 0);
        mx_unary(L, (lk_unary_op)op, LK_F32, LK_F32, LK_MX_FILL_EDGE, 0, 0);
        mx_unary(L, (lk_unary_op)op, LK_F32, LK_F32, LK_MX_FILL_WIDE, 1, 0);
        mx_unary(L, (lk_unary_op)op, LK_BF16, LK_BF16, LK_MX_FILL_WIDE, 1, 0);
        mx_unary(L, (lk_unary_op)op, LK_F16, LK_BF16, LK_MX_FILL_NORMAL, 0, 1);
    }
}

static void mx_convert_cases(mx_list *L)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            mx_unary(L, LK_UNARY_COPY, mx_float[i], mx_float[j], LK_MX_FILL_WIDE, 0, 0);
    for (int i = 1; i < 3; i++)
        for (int j = 0; j < 3; j++)
            mx_unary(L, LK_UNARY_COPY, mx_float[i], mx_float[j], LK_MX_FILL_ALLBITS, 0, 0);
    mx_unary(L, LK_UNARY_COPY, LK_F32, LK_BF16, LK_MX_FILL_EDGE, 0, 0);
    mx_unary(L, LK_UNARY_COPY, LK_F32, LK_F16, LK_MX_FILL_EDGE, 0, 0);
    mx_unary(L, LK_UNARY_COPY, LK_F32, LK_F32, LK_MX_FILL_EDGE, 1, 0);
    mx_unary(L, LK_UNARY_COPY, LK_F32, LK_BF16, LK_MX_FILL_NORMAL, 0, 1);
}

static void mx_binary(mx_list *L, lk_binary_op op, lk_dtype ad, lk_dtype bd, lk_dtype yd,
                      int bcast, int inplace, lk_mx_fill fill)
{
    lk_mx_case *c = mx_add(L, LK_MX_BINARY, op == LK_BINARY_ADD ? "binary.add" : "binary.mul");
    int64_t rows = -1, cols = -1;
    mx_rows_cols(L, &rows, &cols, mx_elem_budget(L));
    if (bcast && rows == 1)
        rows = 7;
    c->sub = (int)op;
    c->m = rows;
    mx_set(c, 0, "a", ad, rows, cols, inplace ? LK_MX_INOUT : LK_MX_IN, LK_MX_AXIS_ROWS, fill,
           0);
    mx_set(c, 1, "b", bd, bcast ? 1 : rows, cols, LK_MX_IN,
           bcast ? LK_MX_AXIS_NONE : LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *y = mx_set(c, 2, "y", yd, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    if (inplace)
        y->alias = 0;
    snprintf(c->label, sizeof c->label, "%s,%s->%s %lldx%lld%s%s%s", mx_dt(ad), mx_dt(bd),
             mx_dt(yd), (long long)rows, (long long)cols, bcast ? " broadcast" : "",
             inplace ? " in-place" : "", mx_fill_tag(fill));
}

static void mx_binary_cases(mx_list *L)
{
    for (int op = LK_BINARY_ADD; op <= LK_BINARY_MUL; op++) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 3; k++) {
                    uint64_t r = mx_mix(L->seed ^ (uint64_t)(op * 32 + i * 3 + k));
                    if (!L->full && j != (int)(r % 3))
                        continue; /* one b dtype per (a, y) unless --full */
                    mx_binary(L, (lk_binary_op)op, mx_float[i], mx_float[j], mx_float[k],
                              (int)((r >> 8) & 1), 0, LK_MX_FILL_WIDE);
                }
        for (int i = 0; i < 3; i++)
            mx_binary(L, (lk_binary_op)op, mx_float[i], mx_float[(i + 1) % 3], mx_float[i], 1,
                      0, LK_MX_FILL_NORMAL);
        mx_binary(L, (lk_binary_op)op, LK_F32, LK_F32, LK_F32, 0, 1, LK_MX_FILL_NORMAL);
        mx_binary(L, (lk_binary_op)op, LK_BF16, LK_F32, LK_BF16, 1, 1, LK_MX_FILL_NORMAL);
        mx_binary(L, (lk_binary_op)op, LK_F32, LK_F32, LK_F32, 0, 0, LK_MX_FILL_EDGE);
        mx_binary(L, (lk_binary_op)op, LK_F16, LK_BF16, LK_F16, 1, 0, LK_MX_FILL_EDGE);
    }
}

/* ------------------------------------------------------------ quantisation */

static void mx_quant_act(mx_list *L, lk_dtype xd, lk_mx_fill fill, int64_t cols,
                         int64_t sstride)
{
    lk_mx_case *c = mx_add(L, LK_MX_QUANT_ACT, "quantize_act");
    int64_t rows = -1;
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    c->m = rows;
    mx_set(c, 0, "x", xd, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, 16);
    mx_set(c, 1, "q", LK_I8, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *s = mx_set(c, 2, "scale", LK_F32, rows, 1, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    s->ld = sstride;
    snprintf(c->label, sizeof c->label, "%s %lldx%lld%s%s", mx_dt(xd), (long long)rows,
             (long long)cols, sstride > 1 ? " scale-stride" : "", mx_fill_tag(fill));
}

static void mx_quant_ternary(mx_list *L, lk_dtype wd, lk_mx_fill fill, int64_t rows,
                             int64_t cols)
{
    lk_mx_case *c = mx_add(L, LK_MX_QUANT_TERNARY, "quantize_ternary");
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    mx_set(c, 0, "w", wd, rows, cols, LK_MX_IN, LK_MX_AXIS_NONE, fill, 0);
    mx_set(c, 1, "wq", LK_T2, rows, cols, LK_MX_OUT, LK_MX_AXIS_NONE, fill, 0);
    mx_set(c, 2, "scale", LK_F32, 1, 1, LK_MX_OUT, LK_MX_AXIS_NONE, fill, 0);
    snprintf(c->label, sizeof c->label, "%s %lldx%lld%s", mx_dt(wd), (long long)rows,
             (long long)cols, mx_fill_tag(fill));
}

static void mx_pack(mx_list *L, lk_mx_kind kind, lk_mx_fill fill, int pad)
{
    lk_mx_case *c = mx_add(L, kind, kind == LK_MX_PACK ? "ternary_pack" : "ternary_unpack");
    int64_t rows = -1, cols = -1;
    mx_rows_cols(L, &rows, &cols, mx_elem_budget(L));
    c->m = rows;
    lk_mx_buf *i8, *t2;
    if (kind == LK_MX_PACK) {
        i8 = mx_set(c, 0, "w", LK_I8, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, 0);
        t2 = mx_set(c, 1, "wq", LK_T2, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
        if (fill == LK_MX_FILL_TERNARY_BAD)
            c->expect = LK_ERR_INVALID_VALUE;
    } else {
        t2 = mx_set(c, 0, "wq", LK_T2, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, 0);
        i8 = mx_set(c, 1, "w", LK_I8, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    }
    if (pad) {
        i8->ld += 5;
        t2->ld += 8;
    }
    snprintf(c->label, sizeof c->label, "%lldx%lld%s%s", (long long)rows, (long long)cols,
             pad ? " ld+" : "", mx_fill_tag(fill));
}

static void mx_qgemm(mx_list *L, lk_mx_kind kind, lk_dtype yd, int wscale_n, int64_t m,
                     int64_t n, int64_t k, lk_mx_fill xfill, int xparam, lk_mx_fill wfill,
                     int wparam, lk_mx_fill sfill)
{
    int tern = kind == LK_MX_TERNARY_GEMM;
    lk_mx_case *c = mx_add(L, kind, tern ? "ternary_gemm" : "int8_gemm");
    int64_t budget = L->full ? (int64_t)1 << 24 : (int64_t)1 << 21;
    int64_t mm = m, nn = n, kk = k;
    for (int tries = 0; tries < 1000; tries++) {
        mm = m >= 0 ? m : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        nn = n >= 0 ? n : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        kk = k >= 0 ? k : mx_pick(L, mx_sizes, MX_COUNT(mx_sizes));
        if (mm * nn * kk <= budget)
            break;
    }
    c->m = mm;
    int scaled = yd != LK_I32;
    mx_set(c, 0, "x", LK_I8, mm, kk, LK_MX_IN, LK_MX_AXIS_ROWS, xfill, xparam);
    if (scaled)
        mx_set(c, 1, "x_scale", LK_F32, mm, 1, LK_MX_IN, LK_MX_AXIS_ROWS, sfill, 5);
    else
        mx_absent(c, 1, "x_scale");
    mx_set(c, 2, "w", tern ? LK_T2 : LK_I8, nn, kk, LK_MX_IN, LK_MX_AXIS_NONE, wfill, wparam);
    if (scaled)
        mx_set(c, 3, "w_scale", LK_F32, 1, wscale_n ? nn : 1, LK_MX_IN, LK_MX_AXIS_NONE, sfill,
               -4);
    else
        mx_absent(c, 3, "w_scale");
    mx_set(c, 4, "y", yd, mm, nn, LK_MX_OUT, LK_MX_AXIS_ROWS, xfill, 0);
    snprintf(c->label, sizeof c->label, "->%s%s %lldx%lldx%lld%s%s%s", mx_dt(yd),
             scaled ? (wscale_n ? " w_scale:1xN" : " w_scale:1x1") : "", (long long)mm,
             (long long)nn, (long long)kk, mx_fill_tag(xfill),
             wfill == LK_MX_FILL_T2_ALL3 ? mx_fill_tag(wfill) : "",
             sfill == LK_MX_FILL_SCALE_EDGE ? mx_fill_tag(sfill) : "");
}

/* lk_rmsnorm_quantize: x, weight (absent when wd is 0), xq, scale. */
static void mx_norm_quant(mx_list *L, lk_dtype xd, lk_dtype wd, float eps, int64_t rows,
                          int64_t cols, lk_mx_fill fill, int param, int64_t sstride)
{
    lk_mx_case *c = mx_add(L, LK_MX_RMSNORM_QUANT, "rmsnorm_quantize");
    mx_rows_cols(L, &rows, &cols, mx_row_budget(L));
    c->m = rows;
    c->eps = eps;
    mx_set(c, 0, "x", xd, rows, cols, LK_MX_IN, LK_MX_AXIS_ROWS, fill, param);
    if (wd)
        mx_set(c, 1, "weight", wd, 1, cols, LK_MX_IN, LK_MX_AXIS_NONE, LK_MX_FILL_NORMAL, 0);
    else
        mx_absent(c, 1, "weight");
    mx_set(c, 2, "q", LK_I8, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *s = mx_set(c, 3, "scale", LK_F32, rows, 1, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    s->ld = sstride;
    snprintf(c->label, sizeof c->label, "%s%s%s eps=%g %lldx%lld%s%s", mx_dt(xd),
             wd ? " w:" : "", wd ? mx_dt(wd) : "", (double)eps, (long long)rows,
             (long long)cols, sstride > 1 ? " scale-stride" : "", mx_fill_tag(fill));
}

static void mx_norm_quant_cases(mx_list *L)
{
    static const float eps[] = {1e-5f, 1e-6f, 0.0f};
    for (int i = 0; i < 3; i++) {
        uint64_t r = mx_mix(L->seed ^ (uint64_t)(977 + i));
        lk_dtype wd = r % 4 ? mx_float[(r >> 4) % 3] : (lk_dtype)0;
        mx_norm_quant(L, mx_float[i], wd, eps[(r >> 16) % 3], -1, -1, LK_MX_FILL_NORMAL, 0, 1);
        mx_norm_quant(L, mx_float[i], mx_float[i], 1e-5f, -1, -1, LK_MX_FILL_EDGE, 32, 1);
    }
    /* zero rows: with eps 0, r = 1 / sqrt(0) = Inf and y = 0 * Inf = NaN */
    mx_norm_quant(L, LK_F32, LK_F32, 0.0f, -1, -1, LK_MX_FILL_ZEROROWS, 0, 1);
    mx_norm_quant(L, LK_BF16, (lk_dtype)0, 1e-6f, -1, -1, LK_MX_FILL_ZEROROWS, 0, 2);
    mx_norm_quant(L, LK_F32, LK_BF16, 1e-6f, -1, -1, LK_MX_FILL_WIDE, 0, 1);
    mx_norm_quant(L, LK_F32, LK_F32, 1e-5f, -1, -2, LK_MX_FILL_NORMAL, 0, 1);
    /* BitNet-2B decode rows (2560, 6912) and every register path of the
     * CUDA kernel, then rows past it (two passes through the workspace) */
    static const int64_t widths[] = {2560, 6912, 1000, 1024, 4096, 4097, 8192, 8193, 20000};
    for (int i = 0; i < (int)MX_COUNT(widths); i++)
        mx_norm_quant(L, i % 3 == 2 ? LK_BF16 : LK_F32, i % 2 ? LK_BF16 : LK_F32, 1e-5f,
                      1 + i % 3, widths[i], i == 1 ? LK_MX_FILL_EDGE : LK_MX_FILL_NORMAL,
                      i == 1 ? 32 : 0, 1);
}

static void mx_quant_cases(mx_list *L)
{
    for (int i = 0; i < 3; i++) {
        mx_quant_act(L, mx_float[i], LK_MX_FILL_NORMAL, -1, 1);
        mx_quant_act(L, mx_float[i], LK_MX_FILL_EDGE, -1, 1);
    }
    mx_quant_act(L, LK_F32, LK_MX_FILL_ZEROROWS, -1, 1);
    mx_quant_act(L, LK_BF16, LK_MX_FILL_WIDE, -1, 2);
    mx_quant_act(L, LK_F32, LK_MX_FILL_NORMAL, -2, 1);

    for (int i = 0; i < 3; i++)
        mx_quant_ternary(L, mx_float[i], LK_MX_FILL_NORMAL, -1, -1);
    mx_quant_ternary(L, LK_F32, LK_MX_FILL_EDGE, -1, -1);
    mx_quant_ternary(L, LK_F32, LK_MX_FILL_ZEROROWS, 1, -1);
    mx_quant_ternary(L, LK_BF16, LK_MX_FILL_NORMAL, 3, -2);

    for (int i = 0; i < 3; i++)
        mx_pack(L, LK_MX_PACK, LK_MX_FILL_TERNARY, i == 2);
    mx_pack(L, LK_MX_PACK, LK_MX_FILL_TERNARY_BAD, 0);
    for (int i = 0; i < 3; i++)
        mx_pack(L, LK_MX_UNPACK, LK_MX_FILL_T2_RANDOM, i == 2);

    for (int i = 0; i < 3; i++)
        for (int wn = 0; wn < 2; wn++)
            mx_qgemm(L, LK_MX_TERNARY_GEMM, mx_float[i], wn, -1, -1, -1, LK_MX_FILL_I8, 0,
                     LK_MX_FILL_T2_RANDOM, 0, LK_MX_FILL_POSITIVE);
    mx_qgemm(L, LK_MX_TERNARY_GEMM, LK_F32, 1, 3, 17, 4099, LK_MX_FILL_I8, 0,
             LK_MX_FILL_T2_RANDOM, 0, LK_MX_FILL_POSITIVE);
    mx_qgemm(L, LK_MX_TERNARY_GEMM, LK_F32, 0, 1, 257, 1000, LK_MX_FILL_I8, 0,
             LK_MX_FILL_T2_RANDOM, 0, LK_MX_FILL_POSITIVE);
    mx_qgemm(L, LK_MX_TERNARY_GEMM, LK_F32, 0, 2, 3, 4099, LK_MX_FILL_I8_CONST, -128,
             LK_MX_FILL_T2_ALL3, 0, LK_MX_FILL_POSITIVE);
    mx_qgemm(L, LK_MX_TERNARY_GEMM, LK_BF16, 1, -1, -1, -1, LK_MX_FILL_I8, 0,
             LK_MX_FILL_T2_RANDOM, 0, LK_MX_FILL_SCALE_EDGE);
    if (L->full) /* the K limit: acc reaches -2^31 exactly */
        mx_qgemm(L, LK_MX_TERNARY_GEMM, LK_F32, 0, 1, 1, LK_TERNARY_MAX_K, LK_MX_FILL_I8_CONST,
                 -128, LK_MX_FILL_T2_ALL3, 0, LK_MX_FILL_POSITIVE);

    for (int i = 0; i < 3; i++)
        mx_qgemm(L, LK_MX_INT8_GEMM, LK_I32, 0, -1, -1, -1, LK_MX_FILL_I8, 0, LK_MX_FILL_I8, 0,
                 LK_MX_FILL_NONE);
    for (int i = 0; i < 3; i++)
        for (int wn = 0; wn < 2; wn++)
            mx_qgemm(L, LK_MX_INT8_GEMM, mx_float[i], wn, -1, -1, -1, LK_MX_FILL_I8, 0,
                     LK_MX_FILL_I8, 0, LK_MX_FILL_POSITIVE);
    mx_qgemm(L, LK_MX_INT8_GEMM, LK_I32, 0, 3, 5, 4099, LK_MX_FILL_I8, 0, LK_MX_FILL_I8, 0,
             LK_MX_FILL_NONE);
    /* the K limit with the extreme products: acc reaches 2^31 - 2^14 and
     * -16256 * K */
    mx_qgemm(L, LK_MX_INT8_GEMM, LK_I32, 0, 1, 2, LK_INT8_MAX_K, LK_MX_FILL_I8_CONST, -128,
             LK_MX_FILL_I8_CONST, -128, LK_MX_FILL_NONE);
    mx_qgemm(L, LK_MX_INT8_GEMM, LK_I32, 0, 1, 1, LK_INT8_MAX_K, LK_MX_FILL_I8_CONST, -128,
             LK_MX_FILL_I8_CONST, 127, LK_MX_FILL_NONE);
    mx_qgemm(L, LK_MX_INT8_GEMM, LK_F16, 1, -1, -1, -1, LK_MX_FILL_I8, 0, LK_MX_FILL_I8, 0,
             LK_MX_FILL_SCALE_EDGE);
}

/* -------------------------------------------------------- transformer ops */

static void mx_rope(mx_list *L, lk_dtype xd, lk_dtype yd, int64_t hd, int64_t heads,
                    float theta, unsigned flags, lk_mx_fill pfill, int pmax, int inplace,
                    int pad, lk_mx_fill xfill)
{
    lk_mx_case *c = mx_add(L, LK_MX_ROPE, "rope");
    int64_t rows = mx_pick(L, mx_rows, MX_COUNT(mx_rows));
    c->m = rows;
    c->head_dim = hd;
    c->theta = theta;
    c->flags = flags;
    lk_mx_buf *x = mx_set(c, 0, "x", xd, rows, hd * heads, inplace ? LK_MX_INOUT : LK_MX_IN,
                          LK_MX_AXIS_ROWS, xfill, 8);
    lk_mx_buf *p = mx_set(c, 1, "pos", LK_I32, rows, 1, LK_MX_IN, LK_MX_AXIS_ROWS, pfill, pmax);
    lk_mx_buf *y = mx_set(c, 2, "y", yd, rows, hd * heads, LK_MX_OUT, LK_MX_AXIS_ROWS, xfill, 0);
    if (pad) {
        x->ld += 3;
        y->ld += 1;
        p->ld = 2;
    }
    if (inplace) {
        y->alias = 0;
        y->ld = x->ld;
    }
    snprintf(c->label, sizeof c->label, "%s->%s %lldx(%lldx%lld) theta=%g %s pos<=%d%s%s%s%s",
             mx_dt(xd), mx_dt(yd), (long long)rows, (long long)heads, (long long)hd,
             (double)theta, flags & LK_ROPE_INTERLEAVED ? "interleaved" : "neox", pmax,
             pfill == LK_MX_FILL_POS_EDGE ? " pos-edge" : "", inplace ? " in-place" : "",
             pad ? " ld+" : "", mx_fill_tag(xfill));
}

static void mx_rope_cases(mx_list *L)
{
    static const int64_t hds[] = {64, 128, 2, 6, 130};
    for (int i = 0; i < 3; i++)
        for (unsigned f = 0; f < 2; f++)
            mx_rope(L, mx_float[i], mx_float[i], hds[(i + (int)f) % 5], 1 + i, 500000.0f, f,
                    LK_MX_FILL_POS, 4096, 0, 0, LK_MX_FILL_NORMAL);
    mx_rope(L, LK_F32, LK_F32, 128, 2, 10000.0f, 0, LK_MX_FILL_POS, 1 << 20, 0, 0,
            LK_MX_FILL_NORMAL);
    mx_rope(L, LK_F32, LK_F32, 64, 3, 500000.0f, 0, LK_MX_FILL_POS_EDGE, 1 << 20, 0, 1,
            LK_MX_FILL_NORMAL);
    mx_rope(L, LK_BF16, LK_F32, 6, 5, 1e6f, 1, LK_MX_FILL_POS_EDGE, 100000, 0, 0,
            LK_MX_FILL_NORMAL);
    mx_rope(L, LK_F32, LK_F32, 128, 2, 500000.0f, 0, LK_MX_FILL_POS, 8191, 1, 0,
            LK_MX_FILL_NORMAL);
    mx_rope(L, LK_F16, LK_F16, 64, 2, 10000.0f, 1, LK_MX_FILL_POS, 2047, 1, 1,
            LK_MX_FILL_NORMAL);
    mx_rope(L, LK_F32, LK_F16, 130, 1, 10000.0f, 0, LK_MX_FILL_POS, 65535, 0, 0,
            LK_MX_FILL_EDGE);
    mx_rope(L, LK_F32, LK_BF16, 2, 7, 3.0f, 1, LK_MX_FILL_POS, 1 << 21, 0, 0,
            LK_MX_FILL_WIDE);
}

typedef struct mx_attn_spec {
    lk_dtype qd, kd, yd;
    int64_t hd, n_head, n_kv, tokens, cache, batch;
    lk_mx_fill pfill, qfill;
    int pad;
} mx_attn_spec;

static void mx_attention(mx_list *L, mx_attn_spec s)
{
    lk_mx_case *c = mx_add(L, LK_MX_ATTENTION, "attention");
    c->m = s.tokens;
    c->batch = s.batch;
    c->n_head = s.n_head;
    c->n_kv = s.n_kv;
    c->head_dim = s.hd;
    c->scale = (float)(1.0 / sqrt((double)s.hd));
    int64_t qc = s.n_head * s.hd, kc = s.n_kv * s.hd;
    lk_mx_fill qf = s.qfill ? s.qfill : LK_MX_FILL_NORMAL;
    lk_mx_buf *b[5];
    b[0] = mx_set(c, 0, "q", s.qd, s.tokens, qc, LK_MX_IN, LK_MX_AXIS_ROWS, qf, 2);
    b[1] = mx_set(c, 1, "k", s.kd, s.cache, kc, LK_MX_IN, LK_MX_AXIS_NONE, LK_MX_FILL_NORMAL, 2);
    b[2] = mx_set(c, 2, "v", s.kd, s.cache, kc, LK_MX_IN, LK_MX_AXIS_NONE, LK_MX_FILL_NORMAL, 0);
    b[3] = mx_set(c, 3, "pos", LK_I32, s.tokens, 1, LK_MX_IN, LK_MX_AXIS_ROWS, s.pfill,
                  (int)(s.cache - 1));
    b[4] = mx_set(c, 4, "out", s.yd, s.tokens, qc, LK_MX_OUT, LK_MX_AXIS_ROWS, qf, 0);
    if (s.pad) {
        b[0]->ld += 2;
        b[1]->ld += 3;
        b[2]->ld += 5;
        b[4]->ld += 1;
    }
    if (s.batch > 1)
        for (int i = 0; i < 5; i++) {
            b[i]->nmat = s.batch;
            b[i]->batch_stride = b[i]->rows * b[i]->ld + 3;
        }
    snprintf(c->label, sizeof c->label,
             "q:%s kv:%s->%s hd=%lld heads=%lld/%lld tokens=%lld cache=%lld batch=%lld%s%s%s",
             mx_dt(s.qd), mx_dt(s.kd), mx_dt(s.yd), (long long)s.hd, (long long)s.n_head,
             (long long)s.n_kv, (long long)s.tokens, (long long)s.cache, (long long)s.batch,
             s.pfill == LK_MX_FILL_POS_EDGE ? " pos-edge" : "", s.pad ? " ld+" : "",
             mx_fill_tag(qf));
}

static mx_attn_spec mx_aspec(lk_dtype qd, lk_dtype kd, lk_dtype yd, int64_t hd, int64_t nh,
                             int64_t nkv, int64_t tokens, int64_t cache, int64_t batch)
{
    mx_attn_spec s;
    memset(&s, 0, sizeof s);
    s.qd = qd, s.kd = kd, s.yd = yd;
    s.hd = hd, s.n_head = nh, s.n_kv = nkv, s.tokens = tokens, s.cache = cache;
    s.batch = batch;
    s.pfill = LK_MX_FILL_POS;
    return s;
}

static void mx_attention_cases(mx_list *L)
{
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 64, 4, 4, 1, 17, 1));
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 128, 8, 2, 5, 300, 1));
    mx_attention(L, mx_aspec(LK_F32, LK_BF16, LK_BF16, 3, 2, 1, 7, 9, 1));
    mx_attention(L, mx_aspec(LK_BF16, LK_F16, LK_F32, 129, 4, 2, 3, 33, 1));
    mx_attention(L, mx_aspec(LK_F32, LK_F16, LK_F16, 64, 6, 3, 1, 1, 1));
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 64, 4, 2, 1, 70, 3));
    mx_attention(L, mx_aspec(LK_F16, LK_BF16, LK_F32, 32, 4, 1, 4, 257, 2));
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 16, 1, 1, 2, 4099, 1));
    /* around attention's chunks of 64 keys (numerics.md 12.3) */
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 16, 2, 2, 5, 63, 1));
    mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_F32, 64, 2, 1, 6, 65, 2));
    mx_attention(L, mx_aspec(LK_F32, LK_BF16, LK_F32, 32, 4, 2, 12, 197, 1));
    mx_attn_spec s = mx_aspec(LK_F32, LK_F32, LK_F32, 20, 4, 2, 9, 40, 2);
    s.pfill = LK_MX_FILL_POS_EDGE;
    s.pad = 1;
    mx_attention(L, s);
    s = mx_aspec(LK_F32, LK_F32, LK_F32, 64, 2, 2, 5, 130, 1);
    s.qfill = LK_MX_FILL_EDGE;
    mx_attention(L, s);
    s = mx_aspec(LK_F32, LK_BF16, LK_F32, 128, 20, 5, 1, 129, 1); /* BitNet-2B-4T heads */
    s.qfill = LK_MX_FILL_WIDE;
    mx_attention(L, s);
    if (L->full) {
        mx_attention(L, mx_aspec(LK_F32, LK_BF16, LK_F32, 128, 20, 5, 1, 4100, 2));
        mx_attention(L, mx_aspec(LK_F32, LK_F32, LK_BF16, 128, 20, 5, 33, 1000, 1));
    }
}

static void mx_embedding(mx_list *L, lk_dtype td, lk_dtype yd, int64_t vocab, int64_t dim,
                         lk_mx_fill ifill, int pad, lk_mx_fill tfill)
{
    lk_mx_case *c = mx_add(L, LK_MX_EMBEDDING, "embedding");
    int64_t rows = mx_pick(L, mx_rows, MX_COUNT(mx_rows));
    c->m = rows;
    lk_mx_buf *t = mx_set(c, 0, "table", td, vocab, dim, LK_MX_IN, LK_MX_AXIS_NONE, tfill, 0);
    lk_mx_buf *ids = mx_set(c, 1, "ids", LK_I32, rows, 1, LK_MX_IN, LK_MX_AXIS_ROWS, ifill,
                            (int)vocab);
    lk_mx_buf *y = mx_set(c, 2, "y", yd, rows, dim, LK_MX_OUT, LK_MX_AXIS_ROWS, tfill, 0);
    if (pad) {
        t->ld += 3;
        ids->ld = 3;
        y->ld += 2;
    }
    if (ifill == LK_MX_FILL_IDS_BAD)
        c->expect = LK_ERR_RANGE;
    snprintf(c->label, sizeof c->label, "%s->%s vocab=%lld dim=%lld n=%lld%s%s%s", mx_dt(td),
             mx_dt(yd), (long long)vocab, (long long)dim, (long long)rows,
             ifill == LK_MX_FILL_IDS_BAD ? " bad-id" : "", pad ? " ld+" : "",
             mx_fill_tag(tfill));
}

static void mx_embedding_cases(mx_list *L)
{
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            mx_embedding(L, mx_float[i], mx_float[j], 1000, 65, LK_MX_FILL_IDS, 0,
                         LK_MX_FILL_WIDE);
    mx_embedding(L, LK_BF16, LK_F32, 7, 2560, LK_MX_FILL_IDS, 1, LK_MX_FILL_NORMAL);
    mx_embedding(L, LK_F32, LK_F32, 1, 3, LK_MX_FILL_IDS, 0, LK_MX_FILL_EDGE);
    mx_embedding(L, LK_F16, LK_F16, 50, 17, LK_MX_FILL_IDS_BAD, 0, LK_MX_FILL_NORMAL);
    mx_embedding(L, LK_F32, LK_BF16, 300, 9, LK_MX_FILL_IDS_BAD, 1, LK_MX_FILL_NORMAL);
}

/* n source rows scattered into R rows of C; idx in [0, R), so n > R
 * always repeats indices (the last must win). No batch axis: a slice of
 * the rows would let an earlier duplicate win. */
static void mx_set_rows(mx_list *L, lk_dtype dt, int64_t n, int64_t R, int64_t C,
                        lk_mx_fill ifill, int pad, lk_mx_fill fill)
{
    lk_mx_case *c = mx_add(L, LK_MX_SET_ROWS, "set_rows");
    lk_mx_fill f = fill;
    if (dt == LK_I8)
        f = LK_MX_FILL_I8;
    else if (dt == LK_I32)
        f = LK_MX_FILL_IDS; /* int32 in [0, 2^30) */
    lk_mx_buf *s = mx_set(c, 0, "src", dt, n, C, LK_MX_IN, LK_MX_AXIS_NONE, f, 1 << 30);
    lk_mx_buf *i = mx_set(c, 1, "idx", LK_I32, n, 1, LK_MX_IN, LK_MX_AXIS_NONE, ifill, (int)R);
    lk_mx_buf *d = mx_set(c, 2, "dst", dt, R, C, LK_MX_OUT, LK_MX_AXIS_NONE, f, 1 << 30);
    if (pad) {
        s->ld += 1;
        i->ld = 2;
        d->ld += 5;
    }
    if (ifill == LK_MX_FILL_IDS_BAD)
        c->expect = LK_ERR_RANGE;
    snprintf(c->label, sizeof c->label, "%s n=%lld -> R=%lld C=%lld%s%s%s", mx_dt(dt),
             (long long)n, (long long)R, (long long)C,
             ifill == LK_MX_FILL_IDS_BAD ? " bad-idx" : "", pad ? " ld+" : "",
             mx_fill_tag(f));
}

static void mx_set_rows_cases(mx_list *L)
{
    for (int i = 0; i < 3; i++)
        mx_set_rows(L, mx_float[i], 17, 40, 65, LK_MX_FILL_IDS, i == 1, LK_MX_FILL_WIDE);
    mx_set_rows(L, LK_F32, 33, 5, 130, LK_MX_FILL_IDS, 1, LK_MX_FILL_EDGE); /* duplicates */
    mx_set_rows(L, LK_BF16, 64, 3, 7, LK_MX_FILL_IDS, 0, LK_MX_FILL_ALLBITS);
    mx_set_rows(L, LK_I8, 9, 4, 33, LK_MX_FILL_IDS, 0, LK_MX_FILL_NORMAL);
    mx_set_rows(L, LK_I32, 7, 100, 5, LK_MX_FILL_IDS, 1, LK_MX_FILL_NORMAL);
    mx_set_rows(L, LK_F32, 2, 1024, 2560, LK_MX_FILL_IDS, 0, LK_MX_FILL_NORMAL); /* KV rows */
    mx_set_rows(L, LK_F16, 12, 30, 9, LK_MX_FILL_IDS_BAD, 0, LK_MX_FILL_NORMAL);
    mx_set_rows(L, LK_F32, 5, 6, 3, LK_MX_FILL_IDS_BAD, 1, LK_MX_FILL_NORMAL);
}

/* ------------------------------------------------------------------ glu */

/* lk_glu: inplace 1 writes over gate, 2 over up; lds 1 lays gate and up
 * out as the demo's [gate | up] rows (ld = 2 * cols), 2 pads every ld. */
static void mx_glu(mx_list *L, lk_unary_op op, lk_dtype gd, lk_dtype ud, lk_dtype yd,
                   int inplace, int lds, lk_mx_fill fill, int64_t rows, int64_t cols)
{
    char name[24];
    snprintf(name, sizeof name, "glu.%s",
             op == LK_UNARY_COPY ? "copy" : mx_unary_name(op) + strlen("unary."));
    lk_mx_case *c = mx_add(L, LK_MX_GLU, name);
    mx_rows_cols(L, &rows, &cols, mx_elem_budget(L));
    c->sub = (int)op;
    c->m = rows;
    lk_mx_buf *g = mx_set(c, 0, "gate", gd, rows, cols, inplace == 1 ? LK_MX_INOUT : LK_MX_IN,
                          LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *u = mx_set(c, 1, "up", ud, rows, cols, inplace == 2 ? LK_MX_INOUT : LK_MX_IN,
                          LK_MX_AXIS_ROWS, fill, 0);
    lk_mx_buf *y = mx_set(c, 2, "y", yd, rows, cols, LK_MX_OUT, LK_MX_AXIS_ROWS, fill, 0);
    if (lds == 1) {
        g->ld = u->ld = 2 * cols;
    } else if (lds == 2) {
        g->ld += 3;
        u->ld += 1;
        y->ld += 2;
    }
    if (inplace) {
        y->alias = inplace - 1;
        y->ld = inplace == 1 ? g->ld : u->ld;
    }
    snprintf(c->label, sizeof c->label, "%s,%s->%s %lldx%lld%s%s%s", mx_dt(gd), mx_dt(ud),
             mx_dt(yd), (long long)rows, (long long)cols,
             inplace == 1 ? " over gate" : inplace == 2 ? " over up" : "",
             lds == 1 ? " [gate|up]" : lds == 2 ? " ld+" : "", mx_fill_tag(fill));
}

static void mx_glu_cases(mx_list *L)
{
    for (int op = LK_UNARY_COPY; op <= LK_UNARY_ERF; op++) {
        for (int i = 0; i < 3; i++)
            mx_glu(L, (lk_unary_op)op, mx_float[i], mx_float[i], mx_float[i], 0, 0,
                   LK_MX_FILL_WIDE, -1, -1);
        mx_glu(L, (lk_unary_op)op, LK_BF16, LK_F32, LK_F16, 0, 2, LK_MX_FILL_WIDE, -1, -1);
        mx_glu(L, (lk_unary_op)op, LK_F32, LK_F32, LK_F32, 0, 0, LK_MX_FILL_EDGE, -1, -1);
        mx_glu(L, (lk_unary_op)op, LK_F16, LK_BF16, LK_F32, 0, 1, LK_MX_FILL_NORMAL, -1, -1);
    }
    /* the demo's gating: one token and a few, ffn 6912, [gate | up] rows */
    mx_glu(L, LK_UNARY_RELU2, LK_F32, LK_F32, LK_F32, 0, 1, LK_MX_FILL_NORMAL, 1, 6912);
    mx_glu(L, LK_UNARY_RELU2, LK_F32, LK_F32, LK_F32, 0, 1, LK_MX_FILL_EDGE, 3, 6912);
    mx_glu(L, LK_UNARY_SILU, LK_BF16, LK_BF16, LK_BF16, 0, 1, LK_MX_FILL_NORMAL, 2, 1001);
    /* in place, over gate and over up, dense and padded */
    mx_glu(L, LK_UNARY_RELU2, LK_F32, LK_F32, LK_F32, 1, 0, LK_MX_FILL_WIDE, -1, -1);
    mx_glu(L, LK_UNARY_SILU, LK_F32, LK_F32, LK_F32, 2, 0, LK_MX_FILL_WIDE, -1, -1);
    mx_glu(L, LK_UNARY_GELU_TANH, LK_BF16, LK_F32, LK_BF16, 1, 2, LK_MX_FILL_EDGE, -1, -1);
    mx_glu(L, LK_UNARY_GELU_ERF, LK_F32, LK_F16, LK_F16, 2, 2, LK_MX_FILL_EDGE, -1, -1);
    mx_glu(L, LK_UNARY_RELU2, LK_BF16, LK_BF16, LK_F32, 0, 0, LK_MX_FILL_ALLBITS, 129, 511);
}

/* ------------------------------------------------------------------ list */

int lk_mx_build(uint64_t seed, int full, lk_mx_case **cases)
{
    mx_list L;
    memset(&L, 0, sizeof L);
    L.seed = seed;
    L.full = full;
    mx_gemm_cases(&L);
    mx_reduce_cases(&L);
    mx_norm_cases(&L, LK_MX_RMSNORM);
    mx_norm_cases(&L, LK_MX_LAYERNORM);
    mx_softmax_cases(&L, LK_MX_SOFTMAX);
    mx_softmax_cases(&L, LK_MX_LOG_SOFTMAX);
    mx_unary_cases(&L);
    mx_convert_cases(&L);
    mx_binary_cases(&L);
    mx_quant_cases(&L);
    mx_norm_quant_cases(&L);
    mx_rope_cases(&L);
    mx_attention_cases(&L);
    mx_embedding_cases(&L);
    mx_set_rows_cases(&L);
    mx_glu_cases(&L); /* last: earlier case ids stay */
    if (L.failed) {
        free(L.v);
        *cases = NULL;
        return 0;
    }
    *cases = L.v;
    return L.n;
}

static const char *const mx_names[] = {
    "gemm", "reduce", "reduce.sum", "reduce.mean", "reduce.max", "reduce.min", "reduce.var",
    "reduce.var_unbiased", "reduce.argmax", "rmsnorm", "layernorm", "softmax", "log_softmax",
    "unary", "unary.relu", "unary.relu2", "unary.sigmoid", "unary.silu", "unary.gelu_tanh",
    "unary.gelu_erf", "unary.exp", "unary.log", "unary.tanh", "unary.erf", "convert", "binary",
    "binary.add", "binary.mul", "quantize_act", "quantize_ternary", "ternary_pack",
    "ternary_unpack", "ternary_gemm", "int8_gemm", "rope", "attention", "embedding", "rmsnorm_quantize", "set_rows",
    "glu", "glu.copy", "glu.relu", "glu.relu2", "glu.sigmoid", "glu.silu", "glu.gelu_tanh",
    "glu.gelu_erf", "glu.exp", "glu.log", "glu.tanh", "glu.erf", NULL};

const char *const *lk_mx_op_names(void)
{
    return mx_names;
}

int lk_mx_op_matches(const lk_mx_case *c, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(c->op, name, n) != 0)
        return 0;
    return c->op[n] == '\0' || c->op[n] == '.';
}
