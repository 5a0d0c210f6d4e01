/* Lockstep core: argument validation (see validate.h).
 *
 * Each failure has its own status and a message "fn: argument: reason",
 * e.g. "lk_gemm: b: rows (5) != K (4)".  Size arithmetic is done with
 * overflow-checked builtins: a size that does not fit int64 (or wraps the
 * address space) is LK_ERR_OVERFLOW, never a wrapped value a kernel would
 * trust. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <string.h>

#include "core/memory.h"
#include "core/validate.h"

lk_status lk_v_begin(lk_validator *v, const char *fn, lk_queue *q)
{
    lk_error_clear();
    memset(v, 0, sizeof *v);
    v->fn = fn;
    if (!q)
        return lk_error(LK_ERR_NULL_POINTER, "%s: q is NULL", fn);
    v->q = q;
    v->dev = q->dev;
    return LK_OK;
}

/* "f32, bf16 or f16" */
static void lk_dtype_list(unsigned mask, char *buf, size_t n)
{
    int k = 0, total = 0;
    for (int d = LK_F32; d <= LK_T2; d++)
        total += (mask >> d) & 1u;
    buf[0] = '\0';
    for (int d = LK_F32; d <= LK_T2; d++) {
        if (!((mask >> d) & 1u))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", k == 0 ? "" : (k == total - 1 ? " or " : ", "),
                 lk_dtype_name((lk_dtype)d));
        k++;
    }
}

lk_status lk_v_tensor(lk_validator *v, const char *name, const lk_tensor *src,
                      lk_tensor *dst, unsigned dtypes, unsigned flags, int64_t batch)
{
    const char *fn = v->fn;
    if (!src) {
        memset(dst, 0, sizeof *dst);
        if (flags & LK_V_OPTIONAL)
            return LK_OK;
        return lk_error(LK_ERR_NULL_POINTER, "%s: %s is NULL", fn, name);
    }
    lk_tensor t = *src;
    if (!lk_dtype_valid((int)t.dtype))
        return lk_error(LK_ERR_BAD_DTYPE, "%s: %s: dtype %d is not an lk_dtype", fn, name,
                        (int)t.dtype);
    if (!(dtypes & LK_DT(t.dtype))) {
        char want[64];
        lk_dtype_list(dtypes, want, sizeof want);
        return lk_error(LK_ERR_BAD_DTYPE, "%s: %s: dtype %s not allowed here (want %s)", fn,
                        name, lk_dtype_name(t.dtype), want);
    }
    if (t.rows < 0)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: rows (%lld) < 0", fn, name,
                        (long long)t.rows);
    if (t.cols < 0)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: cols (%lld) < 0", fn, name,
                        (long long)t.cols);
    if (t.ld < 0)
        return lk_error(LK_ERR_BAD_LEADING_DIM, "%s: %s: ld (%lld) < 0", fn, name,
                        (long long)t.ld);
    if (t.ld == 0)
        t.ld = t.cols;
    if (t.ld < t.cols)
        return lk_error(LK_ERR_BAD_LEADING_DIM, "%s: %s: ld (%lld) < cols (%lld)", fn, name,
                        (long long)t.ld, (long long)t.cols);
    int t2 = t.dtype == LK_T2;
    if (t2 && t.ld % 4 != 0)
        return lk_error(LK_ERR_BAD_LEADING_DIM,
                        "%s: %s: ld (%lld) of a t2 tensor is not a multiple of 4", fn, name,
                        (long long)t.ld);
    int64_t rows_ld;
    if (__builtin_mul_overflow(t.rows, t.ld, &rows_ld))
        return lk_error(LK_ERR_OVERFLOW, "%s: %s: rows (%lld) * ld (%lld) overflows int64",
                        fn, name, (long long)t.rows, (long long)t.ld);
    int batched = (flags & LK_V_BATCHED) && batch > 1;
    if (!batched) {
        t.batch_stride = 0;
    } else {
        if (t.batch_stride < 0)
            return lk_error(LK_ERR_BAD_LEADING_DIM, "%s: %s: batch_stride (%lld) < 0", fn,
                            name, (long long)t.batch_stride);
        if ((flags & LK_V_OUT) && t.batch_stride < rows_ld)
            return lk_error(LK_ERR_BAD_LEADING_DIM,
                            "%s: %s: batch_stride (%lld) < rows * ld (%lld): the outputs of "
                            "the batch would overlap",
                            fn, name, (long long)t.batch_stride, (long long)rows_ld);
        if (t2 && t.batch_stride % 4 != 0)
            return lk_error(LK_ERR_BAD_LEADING_DIM,
                            "%s: %s: batch_stride (%lld) of a t2 tensor is not a multiple "
                            "of 4",
                            fn, name, (long long)t.batch_stride);
    }
    /* elements spanned: (rows - 1) * ld + cols, plus (batch - 1) * batch_stride */
    int64_t bytes = 0;
    if (t.rows > 0 && t.cols > 0) {
        int64_t e, s;
        if (__builtin_mul_overflow(t.rows - 1, t.ld, &e) || __builtin_add_overflow(e, t.cols, &e) ||
            (batched && (__builtin_mul_overflow(batch - 1, t.batch_stride, &s) ||
                         __builtin_add_overflow(e, s, &e))))
            return lk_error(LK_ERR_OVERFLOW, "%s: %s: its extent overflows int64", fn, name);
        if (t2)
            bytes = e / 4 + (e % 4 != 0);
        else if (__builtin_mul_overflow(e, (int64_t)lk_dtype_size(t.dtype), &bytes))
            return lk_error(LK_ERR_OVERFLOW, "%s: %s: its size in bytes overflows int64", fn,
                            name);
    }
    if (bytes > 0 && !t.data)
        return lk_error(LK_ERR_NULL_POINTER, "%s: %s->data is NULL", fn, name);
    uintptr_t lo = (uintptr_t)t.data;
    if ((uint64_t)bytes > (uint64_t)(UINTPTR_MAX - lo))
        return lk_error(LK_ERR_OVERFLOW, "%s: %s: its extent wraps the address space", fn,
                        name);
    if (v->n >= LK_V_MAX)
        return lk_error(LK_ERR_INTERNAL, "%s: too many tensors", fn);
    *dst = t;
    lk_vtensor *r = &v->t[v->n++];
    r->name = name;
    r->flags = flags;
    r->t = dst;
    r->lo = lo;
    r->hi = lo + (uintptr_t)bytes;
    return LK_OK;
}

lk_status lk_v_dims(lk_validator *v, const char *name, const lk_tensor *t, int64_t rows,
                    const char *what_rows, int64_t cols, const char *what_cols)
{
    if (rows >= 0 && t->rows != rows) {
        if (what_rows)
            return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: rows (%lld) != %s (%lld)", v->fn, name,
                            (long long)t->rows, what_rows, (long long)rows);
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: rows (%lld) != %lld", v->fn, name,
                        (long long)t->rows, (long long)rows);
    }
    if (cols >= 0 && t->cols != cols) {
        if (what_cols)
            return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: cols (%lld) != %s (%lld)", v->fn, name,
                            (long long)t->cols, what_cols, (long long)cols);
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: cols (%lld) != %lld", v->fn, name,
                        (long long)t->cols, (long long)cols);
    }
    return LK_OK;
}

lk_status lk_v_nonempty_rows(lk_validator *v, const char *name, const lk_tensor *t)
{
    if (t->cols < 1)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: cols (%lld) < 1: rows must not be empty",
                        v->fn, name, (long long)t->cols);
    return LK_OK;
}

/* In place: the output is the input element for element. */
static int lk_same_view(const lk_tensor *a, const lk_tensor *b)
{
    return a->data == b->data && a->ld == b->ld && a->rows == b->rows &&
           a->cols == b->cols && lk_dtype_size(a->dtype) == lk_dtype_size(b->dtype) &&
           lk_dtype_size(a->dtype) != 0;
}

lk_status lk_v_finish(lk_validator *v)
{
    for (int i = 0; i < v->n; i++) {
        const lk_vtensor *o = &v->t[i];
        if (!(o->flags & LK_V_OUT) || o->lo == o->hi)
            continue;
        for (int j = 0; j < v->n; j++) {
            const lk_vtensor *x = &v->t[j];
            if (j == i || x->lo == x->hi || ((x->flags & LK_V_OUT) && j > i))
                continue;
            if (!(o->lo < x->hi && x->lo < o->hi))
                continue;
            if (!(x->flags & LK_V_OUT) && (o->flags & LK_V_INPLACE) && lk_same_view(o->t, x->t))
                continue;
            if (o->flags & LK_V_INPLACE && !(x->flags & LK_V_OUT))
                return lk_error(LK_ERR_ALIASING,
                                "%s: %s overlaps %s (in place needs the same data, shape, "
                                "ld and element size)",
                                v->fn, o->name, x->name);
            return lk_error(LK_ERR_ALIASING, "%s: %s overlaps %s", v->fn, o->name, x->name);
        }
    }
    for (int i = 0; i < v->n; i++) {
        lk_status st = lk_mem_check(v->dev, v->fn, v->t[i].name, v->t[i].lo, v->t[i].hi);
        if (st != LK_OK)
            return st;
    }
    return LK_OK;
}

lk_status lk_v_supported(lk_validator *v, lk_op op, const char *opname, int has_kernel,
                         const void *args)
{
    lk_device *d = v->dev;
    if (!has_kernel)
        return lk_error(LK_ERR_UNSUPPORTED, "%s: device %s does not implement %s", v->fn,
                        d->props.name, opname);
    if (d->iface->supports) {
        lk_error_clear();
        if (!d->iface->supports(d->state, op, args)) {
            if (lk_last_error()[0])
                return lk_error(LK_ERR_UNSUPPORTED, "%s: device %s: %s", v->fn, d->props.name,
                                lk_last_error());
            return lk_error(LK_ERR_UNSUPPORTED, "%s: device %s does not support this call",
                            v->fn, d->props.name);
        }
        lk_error_clear();
    }
    return LK_OK;
}

lk_status lk_v_result(lk_validator *v, lk_status st)
{
    if (st == LK_OK) {
        lk_error_clear();
        return LK_OK;
    }
    const char *m = lk_last_error();
    size_t fl = strlen(v->fn);
    if (!m[0])
        return lk_error(st, "%s: device %s failed (%s)", v->fn, v->dev->props.name,
                        lk_status_string(st));
    if (strncmp(m, v->fn, fl) == 0 && m[fl] == ':')
        return st;
    return lk_error(st, "%s: %s", v->fn, m);
}
