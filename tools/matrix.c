/* Lockstep contract matrix: running a case on a device and comparing the
 * result with the reference's, byte for byte.
 *
 * Every buffer of a case is compared, inputs and ld padding included: a
 * kernel that writes outside its output or into an input differs from the
 * reference even when its own outputs are right. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/matrix.h"

static size_t mx_offset_bytes(const lk_mx_buf *b, int64_t elems)
{
    if (b->dtype == LK_T2)
        return (size_t)(elems / 4);
    return (size_t)elems * lk_dtype_size(b->dtype);
}

lk_status lk_mx_exec(lk_queue *q, const lk_mx_case *c, void *const ptr[], lk_mx_slice slice)
{
    lk_tensor t[LK_MX_MAX_BUFS];
    const lk_tensor *p[LK_MX_MAX_BUFS];

    for (int i = 0; i < LK_MX_MAX_BUFS; i++) {
        const lk_mx_buf *b = &c->buf[i];
        p[i] = NULL;
        if (i >= c->nbuf || !b->present)
            continue;
        char *data = ptr[b->alias >= 0 ? b->alias : i];
        int64_t rows = b->rows, cols = b->cols;
        if (slice.m_len >= 0 && b->m_axis == LK_MX_AXIS_ROWS) {
            data += mx_offset_bytes(b, slice.m_off * b->ld);
            rows = slice.m_len;
        } else if (slice.m_len >= 0 && b->m_axis == LK_MX_AXIS_COLS) {
            data += mx_offset_bytes(b, slice.m_off);
            cols = slice.m_len;
        }
        t[i] = lk_mat_ld(data, b->dtype, rows, cols, b->ld);
        t[i].batch_stride = b->batch_stride;
        p[i] = &t[i];
    }

    lk_status st;
    switch (c->kind) {
    case LK_MX_GEMM:
        st = lk_gemm(q, c->ta, c->tb, p[0], p[1], p[2], p[3], c->batch, c->flags);
        break;
    case LK_MX_REDUCE:
        st = lk_reduce(q, (lk_reduce_op)c->sub, p[0], p[1]);
        break;
    case LK_MX_RMSNORM:
        st = lk_rmsnorm(q, p[0], p[1], c->eps, p[3]);
        break;
    case LK_MX_LAYERNORM:
        st = lk_layernorm(q, p[0], p[1], p[2], c->eps, p[3]);
        break;
    case LK_MX_SOFTMAX:
        st = lk_softmax(q, p[0], p[1]);
        break;
    case LK_MX_LOG_SOFTMAX:
        st = lk_log_softmax(q, p[0], p[1]);
        break;
    case LK_MX_UNARY:
        st = lk_unary(q, (lk_unary_op)c->sub, p[0], p[1]);
        break;
    case LK_MX_CONVERT:
        st = lk_convert(q, p[0], p[1]);
        break;
    case LK_MX_BINARY:
        st = lk_binary(q, (lk_binary_op)c->sub, p[0], p[1], p[2]);
        break;
    case LK_MX_QUANT_ACT:
        st = lk_quantize_act(q, p[0], p[1], p[2]);
        break;
    case LK_MX_RMSNORM_QUANT:
        st = lk_rmsnorm_quantize(q, p[0], p[1], c->eps, p[2], p[3]);
        break;
    case LK_MX_QUANT_TERNARY:
        st = lk_quantize_ternary(q, p[0], p[1], p[2]);
        break;
    case LK_MX_PACK:
        st = lk_ternary_pack(q, p[0], p[1]);
        break;
    case LK_MX_UNPACK:
        st = lk_ternary_unpack(q, p[0], p[1]);
        break;
    case LK_MX_TERNARY_GEMM:
        st = lk_ternary_gemm(q, p[0], p[1], p[2], p[3], p[4]);
        break;
    case LK_MX_INT8_GEMM:
        st = lk_int8_gemm(q, p[0], p[2], p[1], p[3], p[4]);
        break;
    case LK_MX_ROPE:
        st = lk_rope(q, p[0], p[1], c->head_dim, c->theta, c->flags, p[2]);
        break;
    case LK_MX_ATTENTION:
        st = lk_attention(q, p[0], p[1], p[2], p[3], c->n_head, c->n_kv, c->scale, p[4],
                          c->batch);
        break;
    case LK_MX_EMBEDDING:
        st = lk_embedding(q, p[0], p[1], p[2]);
        break;
    case LK_MX_SET_ROWS:
        st = lk_set_rows(q, p[0], p[1], p[2]);
        break;
    case LK_MX_GLU:
        st = lk_glu(q, (lk_unary_op)c->sub, p[0], p[1], p[2]);
        break;
    default:
        return LK_ERR_INVALID_ARGUMENT;
    }
    if (st == LK_OK)
        st = lk_queue_sync(q);
    return st;
}

static void mx_msg(char *msg, size_t size)
{
    if (msg && size)
        snprintf(msg, size, "%s", lk_last_error());
}

lk_status lk_mx_run(lk_queue *q, const lk_mx_case *c, const lk_mx_data *in, lk_mx_data *out,
                    lk_mx_slice slice, const lk_mx_hook *hook, lk_status *op_status,
                    char *msg, size_t msgsize)
{
    lk_device *dev = lk_queue_device(q);
    lk_device_props props;
    void *dptr[LK_MX_MAX_BUFS] = {NULL};
    lk_status st;

    *op_status = LK_ERR_INTERNAL;
    memset(out, 0, sizeof *out);
    if (msg && msgsize)
        msg[0] = '\0';
    st = lk_device_props_get(dev, &props);
    if (st != LK_OK) {
        mx_msg(msg, msgsize);
        return st;
    }
    st = lk_mx_data_clone(in, out);
    if (st != LK_OK) {
        if (msg && msgsize)
            snprintf(msg, msgsize, "out of host memory");
        return st;
    }

    if (props.host_memory) {
        if (hook && hook->before)
            hook->before(hook->user);
        *op_status = lk_mx_exec(q, c, out->host, slice);
        if (hook && hook->after)
            hook->after(hook->user);
        if (*op_status != LK_OK)
            mx_msg(msg, msgsize);
        return LK_OK;
    }

    /* device memory: every buffer goes over and every buffer comes back */
    for (int i = 0; i < out->nbuf && st == LK_OK; i++) {
        if (!out->host[i])
            continue;
        st = lk_malloc(dev, out->bytes[i], &dptr[i]);
        if (st == LK_OK)
            st = lk_memcpy(q, dptr[i], out->host[i], out->bytes[i], LK_COPY_HOST_TO_DEVICE);
    }
    if (st == LK_OK)
        st = lk_queue_sync(q);
    if (st == LK_OK) {
        if (hook && hook->before)
            hook->before(hook->user);
        *op_status = lk_mx_exec(q, c, dptr, slice);
        if (hook && hook->after)
            hook->after(hook->user);
        if (*op_status != LK_OK)
            mx_msg(msg, msgsize);
        for (int i = 0; i < out->nbuf && st == LK_OK; i++)
            if (out->host[i])
                st = lk_memcpy(q, out->host[i], dptr[i], out->bytes[i], LK_COPY_DEVICE_TO_HOST);
        if (st == LK_OK)
            st = lk_queue_sync(q);
    }
    if (st != LK_OK && msg && msgsize)
        snprintf(msg, msgsize, "harness: %s: %s", lk_status_string(st), lk_last_error());
    for (int i = 0; i < LK_MX_MAX_BUFS; i++)
        if (dptr[i])
            lk_free(dev, dptr[i]);
    return st;
}

const char *lk_mx_verdict_name(lk_mx_verdict v)
{
    switch (v) {
    case LK_MX_IDENTICAL: return "identical";
    case LK_MX_DIFFERS: return "differs";
    case LK_MX_UNSUPPORTED: return "unsupported";
    case LK_MX_SKIPPED: return "skipped";
    default: return "error";
    }
}

static uint64_t mx_elem_bits(const void *p, size_t esz, int64_t i)
{
    const unsigned char *b = (const unsigned char *)p + (size_t)i * esz;
    uint64_t v = 0;
    for (size_t k = 0; k < esz; k++) /* little-endian (configure insists) */
        v |= (uint64_t)b[k] << (8 * k);
    return v;
}

int lk_mx_compare(const lk_mx_case *c, const lk_mx_data *ref, const lk_mx_data *dev,
                  lk_mx_result *r)
{
    for (int i = 0; i < c->nbuf; i++) {
        const lk_mx_buf *b = &c->buf[i];
        if (!ref->host[i] || !dev->host[i])
            continue;
        if (memcmp(ref->host[i], dev->host[i], ref->bytes[i]) == 0)
            continue;
        size_t esz = lk_mx_elem_bytes(b->dtype);
        int64_t n = (int64_t)(ref->bytes[i] / esz), e = 0;
        while (e < n && memcmp((const char *)ref->host[i] + (size_t)e * esz,
                               (const char *)dev->host[i] + (size_t)e * esz, esz) == 0)
            e++;
        r->verdict = LK_MX_DIFFERS;
        r->buf = i;
        r->index = e;
        r->ref_bits = mx_elem_bits(ref->host[i], esz, e);
        r->dev_bits = mx_elem_bits(dev->host[i], esz, e);

        /* where: matrix, row, column (T2: bytes, so columns come in fours) */
        int64_t lde = b->dtype == LK_T2 ? b->ld / 4 : b->ld, rest = e, mat = 0;
        if (b->nmat > 1 && b->batch_stride > 0) {
            int64_t bs = b->dtype == LK_T2 ? b->batch_stride / 4 : b->batch_stride;
            mat = rest / bs;
            rest -= mat * bs;
        }
        int64_t row = rest / lde, col = rest % lde;
        int inside = row < b->rows && col < (b->dtype == LK_T2 ? (b->cols + 3) / 4 : b->cols);
        char where[96];
        if (b->nmat > 1)
            snprintf(where, sizeof where, "%s[%lld][%lld, %lld]", b->name, (long long)mat,
                     (long long)row, (long long)col);
        else
            snprintf(where, sizeof where, "%s[%lld, %lld]", b->name, (long long)row,
                     (long long)col);
        int hex = (int)(2 * esz);
        snprintf(r->detail, sizeof r->detail, "%s%s%s (element %lld): reference 0x%0*" PRIx64
                 ", device 0x%0*" PRIx64,
                 b->role == LK_MX_IN ? "input modified at " : "", where,
                 inside ? "" : " (padding)", (long long)e, hex, r->ref_bits, hex, r->dev_bits);
        return 1;
    }
    return 0;
}

static void mx_result(lk_mx_result *r, lk_mx_verdict v, lk_status st, const char *fmt,
                      const char *a, const char *b)
{
    memset(r, 0, sizeof *r);
    r->verdict = v;
    r->status = st;
    r->buf = -1;
    if (fmt)
        snprintf(r->detail, sizeof r->detail, fmt, a ? a : "", b ? b : "");
}

void lk_mx_check_case(const lk_mx_case *c, lk_queue *ref_q, lk_queue *const *qs, int nq,
                      lk_mx_result *ref_res, lk_mx_result *res)
{
    lk_mx_data in, ref_out, out;
    lk_status st, ost;
    char msg[160];

    if (lk_mx_data_make(c, &in) != LK_OK) {
        mx_result(ref_res, LK_MX_SKIPPED, LK_OK, "out of host memory%s%s", NULL, NULL);
        for (int i = 0; i < nq; i++)
            res[i] = *ref_res;
        return;
    }
    st = lk_mx_run(ref_q, c, &in, &ref_out, LK_MX_WHOLE, NULL, &ost, msg, sizeof msg);
    if (st != LK_OK) {
        mx_result(ref_res, LK_MX_SKIPPED, st, "%s%s", msg, NULL);
    } else if (ost == LK_ERR_UNSUPPORTED && c->expect != LK_ERR_UNSUPPORTED) {
        mx_result(ref_res, LK_MX_UNSUPPORTED, ost, "%s%s", msg, NULL);
    } else if (ost != c->expect) {
        mx_result(ref_res, LK_MX_ERROR, ost, "reference returned %s: %s",
                  lk_status_string(ost), msg);
    } else {
        mx_result(ref_res, LK_MX_IDENTICAL, ost, NULL, NULL, NULL);
        /* the harness checks itself: an output the reference never wrote
         * would make every device look identical */
        for (int i = 0; i < c->nbuf && ost == LK_OK; i++) {
            const lk_mx_buf *b = &c->buf[i];
            if (!in.host[i] || b->role != LK_MX_OUT || b->rows == 0 || b->cols == 0)
                continue;
            if (memcmp(in.host[i], ref_out.host[i], in.bytes[i]) == 0) {
                mx_result(ref_res, LK_MX_ERROR, ost, "reference returned LK_OK but wrote "
                          "nothing to %s%s", b->name, NULL);
                break;
            }
        }
    }
    if (ref_res->verdict != LK_MX_IDENTICAL) {
        for (int i = 0; i < nq; i++)
            mx_result(&res[i], LK_MX_SKIPPED, LK_OK, "no reference result (%s%s)",
                      lk_mx_verdict_name(ref_res->verdict), NULL);
        lk_mx_data_free(&ref_out);
        lk_mx_data_free(&in);
        return;
    }

    for (int i = 0; i < nq; i++) {
        st = lk_mx_run(qs[i], c, &in, &out, LK_MX_WHOLE, NULL, &ost, msg, sizeof msg);
        if (st != LK_OK) {
            mx_result(&res[i], LK_MX_SKIPPED, st, "%s%s", msg, NULL);
        } else if (ost == LK_ERR_UNSUPPORTED && c->expect != LK_ERR_UNSUPPORTED) {
            mx_result(&res[i], LK_MX_UNSUPPORTED, ost, "%s%s", msg, NULL);
        } else if (ost != ref_res->status) {
            mx_result(&res[i], LK_MX_DIFFERS, ost, "returned %s (%s)", lk_status_string(ost),
                      msg);
            size_t len = strlen(res[i].detail);
            snprintf(res[i].detail + len, sizeof res[i].detail - len, ", reference %s",
                     lk_status_string(ref_res->status));
        } else {
            mx_result(&res[i], LK_MX_IDENTICAL, ost, NULL, NULL, NULL);
            lk_mx_compare(c, &ref_out, &out, &res[i]);
        }
        lk_mx_data_free(&out);
    }
    lk_mx_data_free(&ref_out);
    lk_mx_data_free(&in);
}
