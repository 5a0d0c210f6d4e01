/* Lockstep core: the communicator (include/lockstep/comm.h) and its
 * collectives, docs/numerics.md section 14.
 *
 * Every collective starts with an agreement: the ranks exchange a small
 * header (their status after the local checks, shapes and dtype), and each
 * rank judges every header the same way, so a bad call on one rank fails
 * on all of them with the same message instead of leaving the others
 * waiting for data that never comes.  The data then moves as bytes; the
 * reductions are computed on the host from every rank's contribution, in
 * rank order, by the contract's definitions (exact integer sums and
 * maxima, the lane sum, the argmax's total order).
 *
 * Transports: host-memory tensors go through MPI directly; tensors in GPU
 * memory are staged through host buffers unless the NCCL transport
 * (core/comm_nccl.c) takes the call. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm_impl.h"
#include "core/core.h"
#include "core/error.h"

#ifdef LK_HAVE_MPI
#include <mpi.h>
#endif

/* ------------------------------------------------------------ common */

int lk_comm_rank(const lk_comm *c)
{
    return c ? c->rank : -1;
}

int lk_comm_size(const lk_comm *c)
{
    return c ? c->size : 0;
}

int lk_comm_local_rank(const lk_comm *c)
{
    return c ? c->local_rank : -1;
}

const char *lk_comm_transport(const lk_comm *c)
{
    if (!c || !c->dev)
        return "none";
    return c->nccl ? "nccl" : "mpi";
}

#ifndef LK_HAVE_MPI

lk_status lk_comm_create_mpi(const void *mpi_comm, lk_comm **comm)
{
    (void)mpi_comm;
    lk_error_clear();
    if (!comm)
        return lk_error(LK_ERR_NULL_POINTER, "lk_comm_create_mpi: comm is NULL");
    return lk_error(LK_ERR_UNSUPPORTED, "lk_comm_create_mpi: this liblockstep was built without "
                                        "MPI (configure --with-mpi)");
}

void lk_comm_destroy(lk_comm *c)
{
    (void)c;
}

void lk_comm_abort(lk_comm *c, int code)
{
    (void)c;
    (void)code;
}

#define NO_MPI(fn)                                                                  \
    do {                                                                            \
        lk_error_clear();                                                           \
        return lk_error(LK_ERR_UNSUPPORTED, fn ": built without MPI (no communicator "  \
                                               "can exist)");                       \
    } while (0)

lk_status lk_comm_attach(lk_comm *c, lk_device *dev)
{
    (void)c, (void)dev;
    NO_MPI("lk_comm_attach");
}
lk_status lk_comm_queue_create(lk_comm *c, int num_threads, lk_queue **q)
{
    (void)c, (void)num_threads, (void)q;
    NO_MPI("lk_comm_queue_create");
}
lk_status lk_comm_all_gather(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    (void)c, (void)q, (void)x, (void)y;
    NO_MPI("lk_comm_all_gather");
}
lk_status lk_comm_broadcast(lk_comm *c, lk_queue *q, const lk_tensor *x, int root)
{
    (void)c, (void)q, (void)x, (void)root;
    NO_MPI("lk_comm_broadcast");
}
lk_status lk_comm_send(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer)
{
    (void)c, (void)q, (void)x, (void)peer;
    NO_MPI("lk_comm_send");
}
lk_status lk_comm_recv(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer)
{
    (void)c, (void)q, (void)x, (void)peer;
    NO_MPI("lk_comm_recv");
}
lk_status lk_comm_all_reduce(lk_comm *c, lk_queue *q, lk_comm_op op, const lk_tensor *x,
                             const lk_tensor *y)
{
    (void)c, (void)q, (void)op, (void)x, (void)y;
    NO_MPI("lk_comm_all_reduce");
}
lk_status lk_comm_sum(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    (void)c, (void)q, (void)x, (void)y;
    NO_MPI("lk_comm_sum");
}
lk_status lk_comm_argmax(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    (void)c, (void)q, (void)x, (void)y;
    NO_MPI("lk_comm_argmax");
}

#else /* LK_HAVE_MPI */

static int lk_mpi_owned;  /* 1: lk_comm_create_mpi initialised MPI */
static int lk_mpi_comms;  /* live communicators (MPI is finalised with the last) */

static lk_status mpi_fail(const char *fn, const char *call, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, s, &n) != MPI_SUCCESS)
        snprintf(s, sizeof s, "error %d", rc);
    return lk_error(LK_ERR_DRIVER, "%s: %s failed: %s", fn, call, s);
}

#define MPI_TRY(fn, call)                                                           \
    do {                                                                            \
        int rc_ = (call);                                                           \
        if (rc_ != MPI_SUCCESS)                                                     \
            return mpi_fail(fn, #call, rc_);                                        \
    } while (0)

lk_status lk_comm_create_mpi(const void *mpi_comm, lk_comm **out)
{
    lk_error_clear();
    if (!out)
        return lk_error(LK_ERR_NULL_POINTER, "lk_comm_create_mpi: comm is NULL");
    int init = 0, fini = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fini);
    if (fini)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_comm_create_mpi: MPI is already finalised");
    if (!init) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return lk_error(LK_ERR_DRIVER, "lk_comm_create_mpi: MPI_Init_thread failed");
        lk_mpi_owned = 1;
    }
    lk_comm *c = calloc(1, sizeof *c);
    if (!c)
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_comm_create_mpi: out of memory");
    MPI_Comm base = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    MPI_Comm mc, node;
    int rc = MPI_Comm_dup(base, &mc);
    if (rc != MPI_SUCCESS) {
        free(c);
        return mpi_fail("lk_comm_create_mpi", "MPI_Comm_dup", rc);
    }
    /* errors come back as return codes (a status here), not as an abort */
    MPI_Comm_set_errhandler(mc, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mc, &c->rank);
    MPI_Comm_size(mc, &c->size);
    c->local_rank = c->rank;
    if (MPI_Comm_split_type(mc, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &c->local_rank);
        MPI_Comm_free(&node);
    }
    c->mpi = malloc(sizeof(MPI_Comm));
    if (!c->mpi) {
        MPI_Comm_free(&mc);
        free(c);
        return lk_error(LK_ERR_OUT_OF_MEMORY, "lk_comm_create_mpi: out of memory");
    }
    *(MPI_Comm *)c->mpi = mc;
    lk_mpi_comms++;
    *out = c;
    return LK_OK;
}

#define MC(c) (*(MPI_Comm *)(c)->mpi)

void lk_comm_destroy(lk_comm *c)
{
    if (!c)
        return;
    lk_comm_nccl_destroy(c);
    MPI_Comm_free((MPI_Comm *)c->mpi);
    free(c->mpi);
    free(c->stage[0]);
    free(c->stage[1]);
    free(c);
    if (--lk_mpi_comms == 0 && lk_mpi_owned) {
        int fini = 0;
        MPI_Finalized(&fini);
        if (!fini)
            MPI_Finalize();
        lk_mpi_owned = 0;
    }
}

void lk_comm_abort(lk_comm *c, int code)
{
    MPI_Abort(c ? MC(c) : MPI_COMM_WORLD, code);
}

/* ------------------------------------------------------------ agreement */


static void hdr_set(lk_hdr *h, const lk_tensor *x, const lk_tensor *y, int64_t aux)
{
    memset(h, 0, sizeof *h);
    h->dtype = x ? (int32_t)x->dtype : 0;
    h->rows = x ? x->rows : -1;
    h->cols = x ? x->cols : -1;
    h->yrows = y ? y->rows : -1;
    h->ycols = y ? y->cols : -1;
    h->aux = aux;
}

/* Local checks of a tensor argument: 0 or a status with h->msg set. */
static lk_status check_tensor(lk_hdr *h, const char *fn, const char *name, const lk_tensor *t,
                              int any_dtype)
{
    lk_status st = LK_OK;
    if (!t)
        st = LK_ERR_NULL_POINTER, snprintf(h->msg, sizeof h->msg, "%s: %s is NULL", fn, name);
    else if (t->rows < 0 || t->cols < 0)
        st = LK_ERR_BAD_SHAPE, snprintf(h->msg, sizeof h->msg, "%s: %s is %lld x %lld", fn, name,
                                        (long long)t->rows, (long long)t->cols);
    else if (t->ld != 0 && t->ld < t->cols)
        st = LK_ERR_BAD_LEADING_DIM,
        snprintf(h->msg, sizeof h->msg, "%s: %s's ld %lld < cols %lld", fn, name,
                 (long long)t->ld, (long long)t->cols);
    else if (lk_dtype_size(t->dtype) == 0 || t->dtype == LK_T2 ||
             (!any_dtype && t->dtype != LK_F32))
        st = LK_ERR_BAD_DTYPE,
        snprintf(h->msg, sizeof h->msg, "%s: %s's dtype %s is not taken here", fn, name,
                 lk_dtype_name(t->dtype));
    else if (!t->data && t->rows * t->cols > 0)
        st = LK_ERR_NULL_POINTER, snprintf(h->msg, sizeof h->msg, "%s: %s's data is NULL", fn, name);
    if (st && !h->st)
        h->st = st;
    return st;
}

/* Everyone's headers into all[size]; then the first rank whose status is
 * not LK_OK fails every rank's call. */
static lk_status agree(lk_comm *c, const char *fn, lk_hdr *mine, lk_hdr *all)
{
    MPI_TRY(fn, MPI_Allgather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine,
                              MPI_BYTE, MC(c)));
    for (int r = 0; r < c->size; r++)
        if (all[r].st != LK_OK) {
            all[r].msg[sizeof all[r].msg - 1] = 0;
            return lk_error((lk_status)all[r].st, "%s: rank %d of %d: %s", fn, r, c->size,
                            all[r].msg);
        }
    return LK_OK;
}

static lk_hdr *hdrs(lk_comm *c, const char *fn, lk_status *st)
{
    lk_hdr *a = calloc((size_t)c->size, sizeof *a);
    *st = a ? LK_OK : lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    return a;
}

/* ------------------------------------------------------------ host copies */

static int on_host(lk_queue *q)
{
    return q->dev->props.host_memory;
}

static void *stage(lk_comm *c, int i, size_t bytes)
{
    if (bytes > c->stage_cap[i]) {
        void *p = realloc(c->stage[i], bytes);
        if (!p)
            return NULL;
        c->stage[i] = p;
        c->stage_cap[i] = bytes;
    }
    return c->stage[i] ? c->stage[i] : (c->stage[i] = malloc(1), c->stage[i]);
}

static int64_t ld_of(const lk_tensor *t)
{
    return t->ld ? t->ld : t->cols;
}

/* t's rows packed into buf (rows * cols elements). */
static lk_status read_tensor(lk_comm *c, lk_queue *q, const lk_tensor *t, void *buf,
                             const char *fn)
{
    const size_t es = lk_dtype_size(t->dtype), rb = (size_t)t->cols * es;
    if (t->rows == 0 || t->cols == 0)
        return LK_OK;
    const size_t ldb = (size_t)ld_of(t) * es, span = (size_t)(t->rows - 1) * ldb + rb;
    const char *src = t->data;
    if (!on_host(q)) {
        if (ldb == rb) {
            lk_status st = lk_memcpy(q, buf, src, span, LK_COPY_DEVICE_TO_HOST);
            return st ? st : lk_queue_sync(q);
        }
        char *tmp = stage(c, 1, span);
        if (!tmp)
            return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        lk_status st = lk_memcpy(q, tmp, src, span, LK_COPY_DEVICE_TO_HOST);
        if (st || (st = lk_queue_sync(q)))
            return st;
        src = tmp;
    }
    for (int64_t r = 0; r < t->rows; r++)
        memcpy((char *)buf + (size_t)r * rb, src + (size_t)r * ldb, rb);
    return LK_OK;
}

/* buf (rows * cols elements, packed) into t's rows. */
static lk_status write_tensor(lk_queue *q, const lk_tensor *t, const void *buf)
{
    const size_t es = lk_dtype_size(t->dtype), rb = (size_t)t->cols * es;
    const size_t ldb = (size_t)ld_of(t) * es;
    if (t->rows == 0 || t->cols == 0)
        return LK_OK;
    if (on_host(q)) {
        for (int64_t r = 0; r < t->rows; r++)
            memmove((char *)t->data + (size_t)r * ldb, (const char *)buf + (size_t)r * rb, rb);
        return LK_OK;
    }
    if (ldb == rb) {
        lk_status st = lk_memcpy(q, t->data, buf, (size_t)t->rows * rb, LK_COPY_HOST_TO_DEVICE);
        return st ? st : lk_queue_sync(q);
    }
    for (int64_t r = 0; r < t->rows; r++) {
        lk_status st = lk_memcpy(q, (char *)t->data + (size_t)r * ldb,
                                 (const char *)buf + (size_t)r * rb, rb, LK_COPY_HOST_TO_DEVICE);
        if (st)
            return st;
    }
    return lk_queue_sync(q);
}

static lk_status check_queue(lk_comm *c, lk_queue *q, lk_hdr *h, const char *fn)
{
    if (!c)
        return lk_error(LK_ERR_NULL_POINTER, "%s: comm is NULL", fn);
    lk_error_clear();
    if (!q) {
        h->st = LK_ERR_NULL_POINTER;
        snprintf(h->msg, sizeof h->msg, "%s: q is NULL", fn);
    } else if (c->dev && q->dev != c->dev && !q->dev->props.host_memory) {
        h->st = LK_ERR_WRONG_DEVICE;
        snprintf(h->msg, sizeof h->msg, "%s: q belongs to %s, the communicator to %s (a "
                 "queue of a host-memory device takes host tensors anywhere)", fn,
                 lk_device_name(q->dev), lk_device_name(c->dev));
    }
    return LK_OK;
}

/* ------------------------------------------------------------ attach */

lk_status lk_comm_attach(lk_comm *c, lk_device *dev)
{
    const char *fn = "lk_comm_attach";
    lk_error_clear();
    if (!c)
        return lk_error(LK_ERR_NULL_POINTER, "%s: comm is NULL", fn);
    lk_status st;
    lk_hdr h, *all = hdrs(c, fn, &st);
    if (!all)
        return st;
    memset(&h, 0, sizeof h);
    if (!dev) {
        h.st = LK_ERR_NULL_POINTER;
        snprintf(h.msg, sizeof h.msg, "%s: dev is NULL", fn);
    } else {
        /* aux: 1 where this rank can use NCCL on its device */
        h.aux = lk_comm_nccl_possible(dev);
        snprintf(h.msg, sizeof h.msg, "%s", lk_device_name(dev));
    }
    st = agree(c, fn, &h, all);
    int nccl = st == LK_OK;
    for (int r = 0; r < c->size && nccl; r++)
        nccl = all[r].aux == 1;
    free(all);
    if (st)
        return st;
    lk_comm_nccl_destroy(c);
    c->dev = dev;
    /* every rank reached the same verdict: all set up NCCL, or none */
    if (nccl && (st = lk_comm_nccl_create(c)) != LK_OK)
        return st;
    return LK_OK;
}

lk_status lk_comm_queue_create(lk_comm *c, int num_threads, lk_queue **q)
{
    lk_error_clear();
    if (!c || !q)
        return lk_error(LK_ERR_NULL_POINTER, "lk_comm_queue_create: %s is NULL", c ? "q" : "comm");
    if (!c->dev)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "lk_comm_queue_create: no device attached "
                        "(lk_comm_attach)");
    lk_queue_opts o = {num_threads, lk_comm_nccl_stream(c)};
    return lk_queue_create(c->dev, &o, q);
}

/* ------------------------------------------------------------ all-gather */

lk_status lk_comm_all_gather(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    const char *fn = "lk_comm_all_gather";
    lk_hdr h, *all;
    lk_status st = LK_OK;
    hdr_set(&h, x, y, 0);
    if ((st = check_queue(c, q, &h, fn)))
        return st;
    if (!h.st && !check_tensor(&h, fn, "x", x, 1) && !check_tensor(&h, fn, "y", y, 1) &&
        (x->dtype != y->dtype || x->rows != y->rows)) {
        h.st = LK_ERR_BAD_SHAPE;
        snprintf(h.msg, sizeof h.msg, "%s: x (%lld x %lld %s) and y (%lld x %lld %s) differ in "
                 "rows or dtype", fn, (long long)x->rows, (long long)x->cols,
                 lk_dtype_name(x->dtype), (long long)y->rows, (long long)y->cols,
                 lk_dtype_name(y->dtype));
    }
    if (!(all = hdrs(c, fn, &st)))
        return st;
    if ((st = agree(c, fn, &h, all)))
        goto out;
    int64_t total = 0, off = 0;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            off = total;
        total += all[r].cols;
    }
    for (int r = 0; r < c->size && !st; r++)
        if (all[r].rows != all[0].rows || all[r].dtype != all[0].dtype || all[r].ycols != total)
            st = lk_error(LK_ERR_BAD_SHAPE, "%s: rank %d has x %lld x %lld %s and y %lld wide, "
                          "rank 0 x %lld x %lld %s; y must be %lld wide on every rank", fn, r,
                          (long long)all[r].rows, (long long)all[r].cols,
                          lk_dtype_name((lk_dtype)all[r].dtype), (long long)all[r].ycols,
                          (long long)all[0].rows, (long long)all[0].cols,
                          lk_dtype_name((lk_dtype)all[0].dtype), (long long)total);
    if (st)
        goto out;
    if (c->nccl && !on_host(q)) {
        st = lk_comm_nccl_all_gather(c, q, x, y, all, off);
        goto out;
    }
    {
        const size_t es = lk_dtype_size(x->dtype), rows = (size_t)x->rows;
        const size_t tb = rows * (size_t)total * es;
        if (tb > (size_t)0x7fffffff) {
            st = lk_error(LK_ERR_RANGE, "%s: %zu bytes in one call (2^31 - 1 at most)", fn, tb);
            goto out;
        }
        int *cnt = malloc((size_t)c->size * 2 * sizeof *cnt);
        char *mine = stage(c, 0, rows * (size_t)x->cols * es + tb);
        if (!cnt || !mine) {
            free(cnt);
            st = lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            goto out;
        }
        char *got = mine + rows * (size_t)x->cols * es;
        int *dsp = cnt + c->size;
        int64_t o = 0;
        for (int r = 0; r < c->size; r++) {
            cnt[r] = (int)(rows * (size_t)all[r].cols * es);
            dsp[r] = (int)o;
            o += cnt[r];
        }
        if (!(st = read_tensor(c, q, x, mine, fn))) {
            int rc = MPI_Allgatherv(mine, cnt[c->rank], MPI_BYTE, got, cnt, dsp, MPI_BYTE, MC(c));
            if (rc != MPI_SUCCESS)
                st = mpi_fail(fn, "MPI_Allgatherv", rc);
        }
        if (!st) {
            /* rank-major blocks into y's rows, packed in the second stage
             * (read_tensor is done with it) */
            char *packed = stage(c, 1, tb ? tb : 1);
            if (!packed) {
                st = lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
            } else {
                int64_t c0 = 0;
                for (int r = 0; r < c->size; r++) {
                    const size_t w = (size_t)all[r].cols * es;
                    for (size_t i = 0; i < rows; i++)
                        memcpy(packed + (i * (size_t)total + (size_t)c0) * es,
                               got + dsp[r] + i * w, w);
                    c0 += all[r].cols;
                }
                st = write_tensor(q, y, packed);
            }
        }
        free(cnt);
    }
out:
    free(all);
    return st;
}

/* ------------------------------------------------------------ broadcast */

lk_status lk_comm_broadcast(lk_comm *c, lk_queue *q, const lk_tensor *x, int root)
{
    const char *fn = "lk_comm_broadcast";
    lk_hdr h, *all;
    lk_status st;
    hdr_set(&h, x, NULL, root);
    if ((st = check_queue(c, q, &h, fn)))
        return st;
    if (!h.st && !check_tensor(&h, fn, "x", x, 1) && (root < 0 || root >= c->size)) {
        h.st = LK_ERR_INVALID_ARGUMENT;
        snprintf(h.msg, sizeof h.msg, "%s: root %d is not a rank (0 .. %d)", fn, root,
                 c->size - 1);
    }
    if (!(all = hdrs(c, fn, &st)))
        return st;
    if ((st = agree(c, fn, &h, all)))
        goto out;
    for (int r = 0; r < c->size && !st; r++)
        if (all[r].rows != all[0].rows || all[r].cols != all[0].cols ||
            all[r].dtype != all[0].dtype || all[r].aux != all[0].aux)
            st = lk_error(LK_ERR_BAD_SHAPE, "%s: rank %d has %lld x %lld %s from root %lld, "
                          "rank 0 %lld x %lld %s from root %lld", fn, r, (long long)all[r].rows,
                          (long long)all[r].cols, lk_dtype_name((lk_dtype)all[r].dtype),
                          (long long)all[r].aux, (long long)all[0].rows,
                          (long long)all[0].cols, lk_dtype_name((lk_dtype)all[0].dtype),
                          (long long)all[0].aux);
    if (st)
        goto out;
    if (c->nccl && !on_host(q)) {
        st = lk_comm_nccl_broadcast(c, q, x, root);
        goto out;
    }
    {
        const size_t bytes = (size_t)(x->rows * x->cols) * lk_dtype_size(x->dtype);
        char *buf = stage(c, 0, bytes);
        if (bytes > (size_t)0x7fffffff || !buf) {
            st = lk_error(bytes > 0x7fffffff ? LK_ERR_RANGE : LK_ERR_OUT_OF_MEMORY,
                          "%s: %zu bytes", fn, bytes);
            goto out;
        }
        if (c->rank == root)
            st = read_tensor(c, q, x, buf, fn);
        /* the root's read failing would leave the others waiting: say so */
        int ok = st == LK_OK, all_ok = 0;
        int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MC(c));
        if (rc != MPI_SUCCESS) {
            st = mpi_fail(fn, "MPI_Allreduce", rc);
            goto out;
        }
        if (!all_ok) {
            if (!st)
                st = lk_error(LK_ERR_DRIVER, "%s: root %d could not read its tensor", fn, root);
            goto out;
        }
        rc = MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MC(c));
        if (rc != MPI_SUCCESS)
            st = mpi_fail(fn, "MPI_Bcast", rc);
        else if (c->rank != root)
            st = write_tensor(q, x, buf);
    }
out:
    free(all);
    return st;
}

/* ------------------------------------------------------------ send / recv */

/* Both sides exchange headers, judge both, then the data moves. */
static lk_status p2p(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer, int sending)
{
    const char *fn = sending ? "lk_comm_send" : "lk_comm_recv";
    lk_hdr h[2];
    lk_status st;
    hdr_set(&h[0], x, NULL, sending);
    if ((st = check_queue(c, q, &h[0], fn)))
        return st;
    if (peer < 0 || peer >= c->size || peer == c->rank)
        /* no peer to tell: this call alone fails */
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: peer %d is not another rank (0 .. %d, "
                        "this is %d)", fn, peer, c->size - 1, c->rank);
    if (!h[0].st)
        check_tensor(&h[0], fn, "x", x, 1);
    const int tag = 0x4c4b;
    int rc = MPI_Sendrecv(&h[0], (int)sizeof h[0], MPI_BYTE, peer, tag, &h[1], (int)sizeof h[1],
                          MPI_BYTE, peer, tag, MC(c), MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_fail(fn, "MPI_Sendrecv", rc);
    for (int i = 0; i < 2; i++)
        if (h[i].st) {
            h[i].msg[sizeof h[i].msg - 1] = 0;
            return lk_error((lk_status)h[i].st, "%s: rank %d: %s", fn, i ? peer : c->rank,
                            h[i].msg);
        }
    if (h[1].aux == sending)
        return lk_error(LK_ERR_INVALID_ARGUMENT, "%s: rank %d %s too (one side sends, the other "
                        "receives)", fn, peer, sending ? "sends" : "receives");
    if (h[0].rows != h[1].rows || h[0].cols != h[1].cols || h[0].dtype != h[1].dtype)
        return lk_error(LK_ERR_BAD_SHAPE, "%s: rank %d has %lld x %lld %s, rank %d %lld x %lld "
                        "%s", fn, c->rank, (long long)h[0].rows, (long long)h[0].cols,
                        lk_dtype_name((lk_dtype)h[0].dtype), peer, (long long)h[1].rows,
                        (long long)h[1].cols, lk_dtype_name((lk_dtype)h[1].dtype));
    if (c->nccl && !on_host(q))
        return lk_comm_nccl_p2p(c, q, x, peer, sending);
    const size_t bytes = (size_t)(x->rows * x->cols) * lk_dtype_size(x->dtype);
    char *buf = stage(c, 0, bytes);
    if (bytes > (size_t)0x7fffffff || !buf)
        return lk_error(bytes > 0x7fffffff ? LK_ERR_RANGE : LK_ERR_OUT_OF_MEMORY, "%s: %zu bytes",
                        fn, bytes);
    if (sending) {
        /* a failed read still sends (the peer is waiting), then fails */
        lk_status rst = read_tensor(c, q, x, buf, fn);
        rc = MPI_Send(buf, (int)bytes, MPI_BYTE, peer, tag + 1, MC(c));
        return rst ? rst : rc != MPI_SUCCESS ? mpi_fail(fn, "MPI_Send", rc) : LK_OK;
    }
    rc = MPI_Recv(buf, (int)bytes, MPI_BYTE, peer, tag + 1, MC(c), MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS)
        return mpi_fail(fn, "MPI_Recv", rc);
    return write_tensor(q, x, buf);
}

lk_status lk_comm_send(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer)
{
    return p2p(c, q, x, peer, 1);
}

lk_status lk_comm_recv(lk_comm *c, lk_queue *q, const lk_tensor *x, int peer)
{
    return p2p(c, q, x, peer, 0);
}

/* ------------------------------------------------------------ reductions */

/* Every rank's x (packed, rank-major) into *out, and the headers. */
static lk_status gather_all(lk_comm *c, lk_queue *q, const char *fn, lk_hdr *h,
                            const lk_tensor *x, lk_hdr **allp, char **out, int64_t *total)
{
    lk_status st;
    lk_hdr *all = hdrs(c, fn, &st);
    *allp = all;
    *out = NULL;
    if (!all || (st = agree(c, fn, h, all)))
        return st;
    const size_t es = lk_dtype_size(x->dtype);
    int *cnt = malloc((size_t)c->size * 2 * sizeof *cnt);
    int64_t o = 0;
    for (int r = 0; r < c->size; r++)
        o += all[r].rows * all[r].cols;
    *total = o;
    if (o * (int64_t)es > 0x7fffffff) {
        free(cnt);
        return lk_error(LK_ERR_RANGE, "%s: %lld bytes in one call (2^31 - 1 at most)", fn,
                        (long long)(o * (int64_t)es));
    }
    char *got = malloc((size_t)o * es + 1);
    char *mine = malloc((size_t)(x->rows * x->cols) * es + 1);
    if (!cnt || !got || !mine) {
        free(cnt), free(got), free(mine);
        return lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    int *dsp = cnt + c->size;
    o = 0;
    for (int r = 0; r < c->size; r++) {
        cnt[r] = (int)((size_t)(all[r].rows * all[r].cols) * es);
        dsp[r] = (int)o;
        o += cnt[r];
    }
    st = read_tensor(c, q, x, mine, fn);
    int ok = st == LK_OK, all_ok = 0;
    int rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MC(c));
    if (rc == MPI_SUCCESS && all_ok)
        rc = MPI_Allgatherv(mine, cnt[c->rank], MPI_BYTE, got, cnt, dsp, MPI_BYTE, MC(c));
    free(mine);
    free(cnt);
    if (!st && rc != MPI_SUCCESS)
        st = mpi_fail(fn, "MPI_Allgatherv", rc);
    else if (!st && !all_ok)
        st = lk_error(LK_ERR_DRIVER, "%s: another rank could not read its tensor", fn);
    if (st) {
        free(got);
        return st;
    }
    *out = got;
    return LK_OK;
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* IEEE maximum (docs/numerics.md section 1): NaN wins, -0 < +0. */
static float maximum(float a, float b)
{
    if (a != a || b != b)
        return NAN;
    if (a == b)
        return (f32_bits(a) >> 31) ? b : a;
    return a > b ? a : b;
}

lk_status lk_comm_all_reduce(lk_comm *c, lk_queue *q, lk_comm_op op, const lk_tensor *x,
                             const lk_tensor *y)
{
    const char *fn = "lk_comm_all_reduce";
    lk_hdr h, *all = NULL;
    lk_status st;
    char *got = NULL;
    int64_t total = 0;
    hdr_set(&h, x, y, op);
    if ((st = check_queue(c, q, &h, fn)))
        return st;
    if (!h.st && !check_tensor(&h, fn, "x", x, 1) && !check_tensor(&h, fn, "y", y, 1)) {
        const int okd = op == LK_COMM_SUM ? (x->dtype == LK_I32 || x->dtype == LK_I64)
                        : op == LK_COMM_MAX ? (x->dtype == LK_F32 || x->dtype == LK_I32 ||
                                               x->dtype == LK_I64)
                                            : -1;
        if (okd < 0)
            h.st = LK_ERR_INVALID_ARGUMENT,
            snprintf(h.msg, sizeof h.msg, "%s: op %d is not an lk_comm_op", fn, (int)op);
        else if (!okd)
            h.st = LK_ERR_BAD_DTYPE,
            snprintf(h.msg, sizeof h.msg, "%s: %s of %s is not exact (docs/numerics.md "
                     "section 14: lk_comm_sum for floats)", fn, op ? "MAX" : "SUM",
                     lk_dtype_name(x->dtype));
        else if (y->dtype != x->dtype || y->rows != x->rows || y->cols != x->cols)
            h.st = LK_ERR_BAD_SHAPE,
            snprintf(h.msg, sizeof h.msg, "%s: y is not x's shape and dtype", fn);
    }
    if ((st = gather_all(c, q, fn, &h, x, &all, &got, &total)))
        goto out;
    for (int r = 1; r < c->size && !st; r++)
        if (all[r].rows != all[0].rows || all[r].cols != all[0].cols ||
            all[r].dtype != all[0].dtype || all[r].aux != all[0].aux)
            st = lk_error(LK_ERR_BAD_SHAPE, "%s: rank %d reduces %lld x %lld %s with op %lld, "
                          "rank 0 %lld x %lld %s with op %lld", fn, r, (long long)all[r].rows,
                          (long long)all[r].cols, lk_dtype_name((lk_dtype)all[r].dtype),
                          (long long)all[r].aux, (long long)all[0].rows,
                          (long long)all[0].cols, lk_dtype_name((lk_dtype)all[0].dtype),
                          (long long)all[0].aux);
    if (st)
        goto out;
    {
        const size_t n = (size_t)(x->rows * x->cols);
        /* the result into rank 0's block, in rank order */
        if (x->dtype == LK_F32) {
            float *v = (float *)got;
            for (int r = 1; r < c->size; r++)
                for (size_t i = 0; i < n; i++)
                    v[i] = maximum(v[i], v[(size_t)r * n + i]);
            for (size_t i = 0; i < n; i++)
                if (v[i] != v[i]) {
                    uint32_t cn = 0x7fc00000u; /* canonical NaN at the store */
                    memcpy(&v[i], &cn, 4);
                }
        } else if (x->dtype == LK_I32) {
            int32_t *v = (int32_t *)got;
            for (size_t i = 0; i < n && !st; i++) {
                int64_t a = v[i];
                for (int r = 1; r < c->size; r++) {
                    int64_t b = v[(size_t)r * n + i];
                    a = op == LK_COMM_SUM ? a + b : (b > a ? b : a);
                }
                if (a < INT32_MIN || a > INT32_MAX)
                    st = lk_error(LK_ERR_RANGE, "%s: element %zu's sum %lld overflows int32", fn,
                                  i, (long long)a);
                v[i] = (int32_t)a;
            }
        } else {
            int64_t *v = (int64_t *)got;
            for (size_t i = 0; i < n && !st; i++) {
                int64_t a = v[i];
                for (int r = 1; r < c->size && !st; r++) {
                    int64_t b = v[(size_t)r * n + i];
                    if (op == LK_COMM_MAX)
                        a = b > a ? b : a;
                    else if (__builtin_add_overflow(a, b, &a))
                        st = lk_error(LK_ERR_RANGE, "%s: element %zu's sum overflows int64", fn,
                                      i);
                }
                v[i] = a;
            }
        }
        if (!st)
            st = write_tensor(q, y, got);
    }
out:
    free(got);
    free(all);
    return st;
}

/* The lane sum of docs/numerics.md section 5, literally (plain sums);
 * scratch holds n / 4096 + 16 floats (the chunk partials of each level). */
static float lane_sum(const float *t, int64_t n, float *scratch)
{
    if (n <= 4096) {
        float lane[64];
        for (int l = 0; l < 64; l++)
            lane[l] = -0.0f;
        for (int64_t i = 0; i < n; i++)
            lane[i % 64] = lane[i % 64] + t[i];
        for (int s = 32; s >= 1; s /= 2)
            for (int l = 0; l < s; l++)
                lane[l] = lane[l] + lane[l + s];
        return lane[0];
    }
    const int64_t nc = (n + 4095) / 4096;
    for (int64_t j = 0; j < nc; j++)
        scratch[j] = lane_sum(t + j * 4096, n - j * 4096 < 4096 ? n - j * 4096 : 4096, NULL);
    return lane_sum(scratch, nc, scratch + nc);
}

/* The ranks' blocks of row i side by side, into row (n floats). */
static void concat_row(const char *got, const lk_hdr *all, int size, int64_t i, float *row)
{
    int64_t o = 0, c0 = 0;
    for (int r = 0; r < size; r++) {
        memcpy(row + c0, got + (o + i * all[r].cols) * 4, (size_t)all[r].cols * 4);
        o += all[r].rows * all[r].cols;
        c0 += all[r].cols;
    }
}

/* The checks lk_comm_sum and lk_comm_argmax share. */
static lk_status row_op(lk_comm *c, lk_queue *q, const char *fn, const lk_tensor *x,
                        const lk_tensor *y, lk_dtype ydt, int argmax)
{
    lk_hdr h, *all = NULL;
    lk_status st;
    char *got = NULL;
    float *row = NULL;
    void *res = NULL;
    int64_t total = 0;
    hdr_set(&h, x, y, 0);
    if ((st = check_queue(c, q, &h, fn)))
        return st;
    if (!h.st && !check_tensor(&h, fn, "x", x, 0) && !check_tensor(&h, fn, "y", y, 1) &&
        (y->dtype != ydt || y->rows != x->rows || y->cols != 1))
        h.st = LK_ERR_BAD_SHAPE,
        snprintf(h.msg, sizeof h.msg, "%s: y must be %lld x 1 %s", fn, (long long)x->rows,
                 lk_dtype_name(ydt));
    if ((st = gather_all(c, q, fn, &h, x, &all, &got, &total)))
        goto out;
    int64_t n = 0;
    for (int r = 0; r < c->size; r++)
        n += all[r].cols;
    for (int r = 1; r < c->size && !st; r++)
        if (all[r].rows != all[0].rows)
            st = lk_error(LK_ERR_BAD_SHAPE, "%s: rank %d has %lld rows, rank 0 %lld", fn, r,
                          (long long)all[r].rows, (long long)all[0].rows);
    if (!st && n == 0)
        st = lk_error(LK_ERR_BAD_SHAPE, "%s: the rows are empty on every rank", fn);
    if (st)
        goto out;
    row = malloc((size_t)(n + n / 4096 + 16) * 4);
    res = malloc((size_t)x->rows * 8 + 1);
    if (!row || !res) {
        st = lk_error(LK_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    for (int64_t i = 0; i < x->rows; i++) {
        concat_row(got, all, c->size, i, row);
        if (!argmax) {
            ((float *)res)[i] = lane_sum(row, n, row + n);
            continue;
        }
        /* the total order NaN > +Inf > ... > +0 > -0 > ... > -Inf as
         * unsigned keys; the first of the largest */
        int64_t best = 0;
        uint32_t bk = 0;
        for (int64_t j = 0; j < n; j++) {
            uint32_t u = f32_bits(row[j]);
            uint32_t k = row[j] != row[j] ? 0xffffffffu : (u >> 31) ? ~u : u | 0x80000000u;
            if (j == 0 || k > bk)
                best = j, bk = k;
            if (k == 0xffffffffu)
                break;
        }
        ((int64_t *)res)[i] = best;
    }
    st = write_tensor(q, y, res);
out:
    free(row);
    free(res);
    free(got);
    free(all);
    return st;
}

lk_status lk_comm_sum(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    return row_op(c, q, "lk_comm_sum", x, y, LK_F32, 0);
}

lk_status lk_comm_argmax(lk_comm *c, lk_queue *q, const lk_tensor *x, const lk_tensor *y)
{
    return row_op(c, q, "lk_comm_argmax", x, y, LK_I64, 1);
}

#endif /* LK_HAVE_MPI */
