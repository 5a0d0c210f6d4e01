/* Lockstep core: prepared weights (include/lockstep/weights.h).
 *
 * A device that implements the weights slots of lk_kernels keeps its own
 * layout.  Any other device (or one that answers LK_ERR_UNSUPPORTED) gets
 * the fallback: the core copies the weights in their interchange layout
 * into memory of the device and runs the ordinary gemm / ternary_gemm
 * kernel on the copy, through the same validation, so every device takes
 * prepared weights from the start and gives the unprepared bits. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "core/validate.h"

struct lk_weights {
    lk_device *dev;
    lk_dtype dtype;
    int64_t n, k;
    void *prepared;     /* the driver's object; NULL: the fallback copy below */
    void *w_mem, *s_mem;
    lk_tensor w, w_scale;
};

/* The bytes [lo, hi) of a validated tensor into fresh memory of the device,
 * *dst the same view of the copy. */
static lk_status lk_weights_copy(lk_queue *q, const lk_vtensor *src, lk_tensor *dst,
                                 void **mem)
{
    size_t bytes = (size_t)(src->hi - src->lo);
    *dst = *src->t;
    *mem = NULL;
    if (bytes == 0) {
        dst->data = NULL;
        return LK_OK;
    }
    lk_status st = lk_malloc(q->dev, bytes, mem);
    if (st != LK_OK)
        return st;
    st = lk_memcpy(q, *mem, src->t->data, bytes, LK_COPY_DEVICE_TO_DEVICE);
    if (st != LK_OK) {
        lk_free(q->dev, *mem);
        *mem = NULL;
        return st;
    }
    dst->data = *mem;
    return LK_OK;
}

static void lk_weights_free(lk_weights *h)
{
    if (h->prepared && h->dev->iface->kernels.weights_destroy) {
        lk_fpenv fe; /* a driver's free may touch the FP flags */
        lk_fpenv_enter(&fe);
        h->dev->iface->kernels.weights_destroy(h->dev->state, h->prepared);
        lk_fpenv_leave(&fe);
    }
    if (h->w_mem)
        lk_free(h->dev, h->w_mem);
    if (h->s_mem)
        lk_free(h->dev, h->s_mem);
    free(h);
}

LK_API lk_status lk_weights_prepare(lk_queue *q, const lk_tensor *w, const lk_tensor *w_scale,
                                    lk_weights **out)
{
    static const char fn[] = "lk_weights_prepare";
    lk_validator v;
    lk_weights_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_begin(&v, fn, q));
    if (q->cap) /* it allocates and copies: not work a graph can replay */
        return lk_error(LK_ERR_UNSUPPORTED,
                        "%s: cannot be captured in a graph (prepare before "
                        "lk_queue_capture_begin; the capture goes on)", fn);
    if (!out)
        return lk_error(LK_ERR_NULL_POINTER, "%s: out is NULL", fn);
    LK_V_TRY(lk_v_tensor(&v, "w", w, &a.w, LK_DT_FLOAT | LK_DT(LK_T2), LK_V_IN, 1));
    const int t2 = a.w.dtype == LK_T2;
    if (t2) {
        LK_V_TRY(lk_v_tensor(&v, "w_scale", w_scale, &a.w_scale, LK_DT(LK_F32), LK_V_IN, 1));
        LK_V_TRY(lk_v_dims(&v, "w_scale", &a.w_scale, 1, NULL, -1, NULL));
        if (a.w_scale.cols != 1 && a.w_scale.cols != a.w.rows)
            return lk_error(LK_ERR_BAD_SHAPE, "%s: w_scale: cols (%lld) != 1 or N (%lld)", fn,
                            (long long)a.w_scale.cols, (long long)a.w.rows);
        if (a.w.cols > LK_TERNARY_MAX_K)
            return lk_error(LK_ERR_RANGE,
                            "%s: w: K (%lld) > %lld: the exact int32 accumulation could "
                            "overflow",
                            fn, (long long)a.w.cols, (long long)LK_TERNARY_MAX_K);
    } else if (w_scale) {
        return lk_error(LK_ERR_INVALID_ARGUMENT,
                        "%s: w_scale is given but w is %s: only t2 weights take a scale", fn,
                        lk_dtype_name(a.w.dtype));
    }
    LK_V_TRY(lk_v_finish(&v));

    lk_weights *h = calloc(1, sizeof *h);
    if (!h)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
    h->dev = q->dev;
    h->dtype = a.w.dtype;
    h->n = a.w.rows;
    h->k = a.w.cols;
    const lk_kernels *kt = &q->dev->iface->kernels;
    lk_status st = LK_ERR_UNSUPPORTED;
    /* Empty weights have nothing to rearrange: the fallback covers them. */
    if (kt->weights_prepare && kt->weights_destroy && (t2 ? kt->ternary_linear : kt->linear) &&
        h->n > 0 && h->k > 0) {
        lk_fpenv fe;
        lk_error_clear();
        lk_fpenv_enter(&fe);
        st = kt->weights_prepare(q->state, &a, &h->prepared);
        lk_fpenv_leave(&fe);
        if (st == LK_OK && !h->prepared)
            st = LK_ERR_DRIVER;
        if (st != LK_OK && st != LK_ERR_UNSUPPORTED) {
            h->prepared = NULL;
            free(h);
            return lk_v_result(&v, st);
        }
    }
    if (st != LK_OK) {
        h->prepared = NULL;
        st = lk_weights_copy(q, &v.t[0], &h->w, &h->w_mem);
        if (st == LK_OK && t2)
            st = lk_weights_copy(q, &v.t[1], &h->w_scale, &h->s_mem);
        /* the handle owns its copy when this returns: the caller may
         * overwrite w at once, from any queue (GPU queues do not wait for
         * each other) */
        if (st == LK_OK && !q->dev->props.host_memory)
            st = lk_queue_sync(q);
        if (st != LK_OK) {
            lk_weights_free(h);
            return lk_v_result(&v, st);
        }
    }
    lk_error_clear();
    *out = h;
    return LK_OK;
}

LK_API void lk_weights_destroy(lk_weights *w)
{
    if (w)
        lk_weights_free(w);
}

LK_API lk_status lk_weights_info(const lk_weights *w, lk_dtype *dtype, int64_t *n, int64_t *k)
{
    lk_error_clear();
    if (!w)
        return lk_error(LK_ERR_NULL_POINTER, "lk_weights_info: w is NULL");
    if (dtype)
        *dtype = w->dtype;
    if (n)
        *n = w->n;
    if (k)
        *k = w->k;
    return LK_OK;
}

LK_API lk_device *lk_weights_device(const lk_weights *w) { return w ? w->dev : NULL; }

/* The handle suits this call: given, of the right kind, on the queue's
 * device. */
static lk_status lk_weights_check(lk_validator *v, const lk_weights *w, int t2)
{
    if (!w)
        return lk_error(LK_ERR_NULL_POINTER, "%s: w is NULL", v->fn);
    if ((w->dtype == LK_T2) != t2)
        return lk_error(LK_ERR_BAD_DTYPE, "%s: w: holds %s weights (use %s)", v->fn,
                        lk_dtype_name(w->dtype), t2 ? "lk_linear" : "lk_ternary_linear");
    if (w->dev != v->dev)
        return lk_error(LK_ERR_WRONG_DEVICE,
                        "%s: w: prepared on device %s, the queue runs on %s", v->fn,
                        w->dev->props.name, v->dev->props.name);
    return LK_OK;
}

/* A driver's linear or ternary_linear, with LK_V_RUN's tail (there is no
 * supports() question: weights_prepare accepted the weights). */
static lk_status lk_weights_run(lk_validator *v, const lk_linear_args *a, int t2)
{
    const lk_kernels *kt = &v->dev->iface->kernels;
    lk_status (*kern)(void *, const lk_linear_args *) = t2 ? kt->ternary_linear : kt->linear;
    if (a->m == 0 || a->n == 0)
        return LK_OK;
    if (lk_capture_hosted(v->q))
        return lk_capture_record(v->q, v->fn, t2 ? LK_KSLOT_ternary_linear : LK_KSLOT_linear, a,
                                 sizeof *a);
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    lk_status st = kern(v->q->state, a);
    lk_fpenv_leave(&fe);
    st = lk_v_result(v, st);
    if (st == LK_OK)
        lk_capture_count(v->q);
    return st;
}

LK_API lk_status lk_linear(lk_queue *q, const lk_tensor *x, const lk_weights *w,
                           const lk_tensor *bias, const lk_tensor *y, unsigned flags)
{
    lk_validator v;
    LK_V_TRY(lk_v_begin(&v, "lk_linear", q));
    LK_V_TRY(lk_weights_check(&v, w, 0));
    if (flags & ~(unsigned)LK_GEMM_ACCUMULATE)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_linear: flags: unknown bits 0x%x",
                        flags & ~(unsigned)LK_GEMM_ACCUMULATE);
    lk_linear_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "bias", bias, &a.bias, LK_DT_FLOAT, LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.y, LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "x", &a.x, -1, NULL, w->k, "K"));
    if (bias)
        LK_V_TRY(lk_v_dims(&v, "bias", &a.bias, 1, NULL, w->n, "N"));
    LK_V_TRY(lk_v_dims(&v, "y", &a.y, a.x.rows, "M", w->n, "N"));
    a.m = a.x.rows;
    a.n = w->n;
    a.k = w->k;
    a.flags = flags;
    a.w_dtype = w->dtype;
    if (w->prepared) {
        LK_V_TRY(lk_v_finish(&v));
        a.prepared = w->prepared;
        return lk_weights_run(&v, &a, 0);
    }
    lk_gemm_args g;
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_tensor(&v, "w", &w->w, &g.b, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_finish(&v));
    g.ta = LK_NO_TRANS;
    g.tb = LK_TRANS;
    g.m = a.m;
    g.n = a.n;
    g.k = a.k;
    g.batch = 1;
    g.flags = flags;
    g.a = a.x;
    g.c = a.y;
    g.bias = a.bias;
    LK_V_RUN(&v, LK_OP_GEMM, gemm, g, g.m == 0 || g.n == 0);
}

LK_API lk_status lk_ternary_linear(lk_queue *q, const lk_tensor *xq, const lk_tensor *x_scale,
                                   const lk_weights *w, const lk_tensor *y, unsigned flags)
{
    lk_validator v;
    LK_V_TRY(lk_v_begin(&v, "lk_ternary_linear", q));
    LK_V_TRY(lk_weights_check(&v, w, 1));
    if (flags & ~(unsigned)LK_GEMM_ACCUMULATE)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_ternary_linear: flags: unknown bits 0x%x",
                        flags & ~(unsigned)LK_GEMM_ACCUMULATE);
    /* accumulate promises lk_binary ADD's bits after the plain call: with a
     * narrow y that would be two roundings, so only f32 y takes it */
    const int acc = (flags & LK_GEMM_ACCUMULATE) != 0;
    lk_linear_args a;
    memset(&a, 0, sizeof a);
    LK_V_TRY(lk_v_tensor(&v, "xq", xq, &a.x, LK_DT(LK_I8), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "x_scale", x_scale, &a.x_scale, LK_DT(LK_F32), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.y, acc ? LK_DT(LK_F32) : LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_dims(&v, "xq", &a.x, -1, NULL, w->k, "K"));
    LK_V_TRY(lk_v_dims(&v, "x_scale", &a.x_scale, a.x.rows, "M", 1, NULL));
    LK_V_TRY(lk_v_dims(&v, "y", &a.y, a.x.rows, "M", w->n, "N"));
    a.m = a.x.rows;
    a.n = w->n;
    a.k = w->k;
    a.flags = flags;
    a.w_dtype = LK_T2;
    if (w->prepared) {
        LK_V_TRY(lk_v_finish(&v));
        a.prepared = w->prepared;
        return lk_weights_run(&v, &a, 1);
    }
    lk_qgemm_args g;
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_tensor(&v, "w", &w->w, &g.w, LK_DT(LK_T2), LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "w_scale", &w->w_scale, &g.w_scale, LK_DT(LK_F32), LK_V_IN, 1));
    LK_V_TRY(lk_v_finish(&v));
    g.m = a.m;
    g.n = a.n;
    g.k = a.k;
    g.x = a.x;
    g.x_scale = a.x_scale;
    g.y = a.y;
    g.flags = flags;
    LK_V_RUN(&v, LK_OP_TERNARY_GEMM, ternary_gemm, g, g.m == 0 || g.n == 0);
}

/* One step of lk_rmsnorm_ternary_linear's composition: what LK_V_RUN does
 * after its supports() question (asked for every step before the first
 * one runs). */
static lk_status lk_nl_step(lk_validator *v, lk_kslot slot, const void *args, size_t size)
{
    const lk_kernels *kt = &v->dev->iface->kernels;
    if (lk_capture_hosted(v->q))
        return lk_capture_record(v->q, v->fn, slot, args, size);
    lk_fpenv fe;
    lk_fpenv_enter(&fe);
    lk_status st = LK_ERR_INTERNAL;
    if (slot == LK_KSLOT_rmsnorm_quantize)
        st = kt->rmsnorm_quantize(v->q->state, (const lk_norm_quant_args *)args);
    else if (slot == LK_KSLOT_ternary_gemm)
        st = kt->ternary_gemm(v->q->state, (const lk_qgemm_args *)args);
    else if (slot == LK_KSLOT_rmsnorm_ternary_linear)
        st = kt->rmsnorm_ternary_linear(v->q->state, (const lk_norm_linear_args *)args);
    lk_fpenv_leave(&fe);
    st = lk_v_result(v, st);
    if (st == LK_OK)
        lk_capture_count(v->q);
    return st;
}

LK_API lk_status lk_rmsnorm_ternary_linear(lk_queue *q, const lk_tensor *x,
                                           const lk_tensor *norm_weight, float eps,
                                           const lk_tensor *xq, const lk_tensor *xs,
                                           const lk_weights *w, const lk_tensor *y,
                                           unsigned flags)
{
    static const char fn[] = "lk_rmsnorm_ternary_linear";
    lk_validator v;
    lk_norm_linear_args a;
    lk_qgemm_args g;
    memset(&a, 0, sizeof a);
    memset(&g, 0, sizeof g);
    LK_V_TRY(lk_v_begin(&v, fn, q));
    LK_V_TRY(lk_weights_check(&v, w, 1));
    if (flags & ~(unsigned)LK_GEMM_ACCUMULATE)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: flags: unknown bits 0x%x", fn,
                        flags & ~(unsigned)LK_GEMM_ACCUMULATE);
    const int acc = (flags & LK_GEMM_ACCUMULATE) != 0;
    /* every tensor in one validator: lk_v_finish then keeps the outputs
     * apart from each other and from x and the norm weight, which a kernel
     * that writes xq, xs and y while other blocks still read x needs */
    LK_V_TRY(lk_v_tensor(&v, "x", x, &a.norm.x, LK_DT_FLOAT, LK_V_IN, 1));
    LK_V_TRY(lk_v_tensor(&v, "norm_weight", norm_weight, &a.norm.weight, LK_DT_FLOAT,
                         LK_V_IN | LK_V_OPTIONAL, 1));
    LK_V_TRY(lk_v_tensor(&v, "xq", xq, &a.norm.q, LK_DT(LK_I8), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "xs", xs, &a.norm.scale, LK_DT(LK_F32), LK_V_OUT, 1));
    LK_V_TRY(lk_v_tensor(&v, "y", y, &a.lin.y, acc ? LK_DT(LK_F32) : LK_DT_FLOAT, LK_V_OUT, 1));
    LK_V_TRY(lk_v_nonempty_rows(&v, "x", &a.norm.x));
    LK_V_TRY(lk_v_dims(&v, "x", &a.norm.x, -1, NULL, w->k, "K"));
    const int64_t m = a.norm.x.rows;
    if (norm_weight)
        LK_V_TRY(lk_v_dims(&v, "norm_weight", &a.norm.weight, 1, NULL, w->k, "K"));
    LK_V_TRY(lk_v_dims(&v, "xq", &a.norm.q, m, "M", w->k, "K"));
    LK_V_TRY(lk_v_dims(&v, "xs", &a.norm.scale, m, "M", 1, NULL));
    LK_V_TRY(lk_v_dims(&v, "y", &a.lin.y, m, "M", w->n, "N"));
    if (!w->prepared) {
        LK_V_TRY(lk_v_tensor(&v, "w", &w->w, &g.w, LK_DT(LK_T2), LK_V_IN, 1));
        LK_V_TRY(lk_v_tensor(&v, "w_scale", &w->w_scale, &g.w_scale, LK_DT(LK_F32), LK_V_IN, 1));
    }
    LK_V_TRY(lk_v_finish(&v));
    a.norm.eps = eps;
    a.lin.m = m;
    a.lin.n = w->n;
    a.lin.k = w->k;
    a.lin.flags = flags;
    a.lin.w_dtype = LK_T2;
    a.lin.prepared = w->prepared;
    a.lin.x = a.norm.q;
    a.lin.x_scale = a.norm.scale;

    const lk_kernels *kt = &q->dev->iface->kernels;
    if (w->prepared && a.lin.n > 0 && kt->rmsnorm_ternary_linear) {
        if (lk_v_supported(&v, LK_OP_RMSNORM_TERNARY_LINEAR, "rmsnorm_ternary_linear", 1, &a) ==
            LK_OK) {
            if (m == 0)
                return LK_OK;
            return lk_nl_step(&v, LK_KSLOT_rmsnorm_ternary_linear, &a, sizeof a);
        }
        lk_error_clear(); /* refused: the composition gives the same bits */
    }
    LK_V_TRY(lk_v_supported(&v, LK_OP_RMSNORM_QUANTIZE, "rmsnorm_quantize",
                            kt->rmsnorm_quantize != NULL, &a.norm));
    if (!w->prepared) {
        g.m = m;
        g.n = a.lin.n;
        g.k = a.lin.k;
        g.x = a.lin.x;
        g.x_scale = a.lin.x_scale;
        g.y = a.lin.y;
        g.flags = flags;
        LK_V_TRY(lk_v_supported(&v, LK_OP_TERNARY_GEMM, "ternary_gemm", kt->ternary_gemm != NULL,
                                &g));
    }
    if (m == 0)
        return LK_OK;
    LK_V_TRY(lk_nl_step(&v, LK_KSLOT_rmsnorm_quantize, &a.norm, sizeof a.norm));
    if (w->prepared)
        return lk_weights_run(&v, &a.lin, 1);
    if (g.n == 0)
        return LK_OK;
    return lk_nl_step(&v, LK_KSLOT_ternary_gemm, &g, sizeof g);
}

/* lk_bitnet_decode (core/ops_bitnet.c): one projection's handle, checked
 * as lk_ternary_linear checks it plus its exact N x K, and what the
 * driver's kernel needs of it (the prepared object, or the copy and its
 * scale for ternary_gemm). */
lk_status lk_weights_bitnet(lk_validator *v, const char *name, const lk_weights *w, int64_t n,
                            int64_t k, lk_bitnet_weight_args *out)
{
    memset(out, 0, sizeof *out);
    if (!w)
        return lk_error(LK_ERR_NULL_POINTER, "%s: %s is NULL", v->fn, name);
    if (w->dtype != LK_T2)
        return lk_error(LK_ERR_BAD_DTYPE, "%s: %s: holds %s weights (want t2)", v->fn, name,
                        lk_dtype_name(w->dtype));
    if (w->dev != v->dev)
        return lk_error(LK_ERR_WRONG_DEVICE,
                        "%s: %s: prepared on device %s, the queue runs on %s", v->fn, name,
                        w->dev->props.name, v->dev->props.name);
    if (w->n != n || w->k != k)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: %s: %lld x %lld weights, want %lld x %lld", v->fn,
                        name, (long long)w->n, (long long)w->k, (long long)n, (long long)k);
    if (k > LK_TERNARY_MAX_K)
        return lk_error(LK_ERR_RANGE,
                        "%s: %s: K (%lld) > %lld: the exact int32 accumulation could overflow",
                        v->fn, name, (long long)k, (long long)LK_TERNARY_MAX_K);
    out->prepared = w->prepared;
    if (!w->prepared) {
        out->w = w->w;
        out->w_scale = w->w_scale;
    }
    return LK_OK;
}
