/* Lockstep CPU kernels: element-wise add and mul (docs/numerics.md
 * section 7), one rounding at the store.  b is broadcast over rows when it
 * has one row and a more; y may be a or b itself (each vector is read
 * before it is written).  Threads take whole rows. */
#include "backends/cpu/kernels/elem.h"
#include "backends/cpu/threads.h"

LK_INLINE vf bin_op(const int mul, vf x, vf z) { return mul ? vf_mul(x, z) : vf_add(x, z); }

/* One row of n elements; the all-f32 case with direct loads. */
LK_INLINE void bin_row(const int mul, const int f32, const lk_binary_args *p, int64_t ai,
                       int64_t bi, int64_t yi, int64_t n)
{
    const lk_dtype ad = p->a.dtype, bd = p->b.dtype, yd = p->y.dtype;
    int64_t c = 0;
    for (; c + VW <= n; c += VW) {
        vf x = f32 ? vf_load((const float *)p->a.data + ai + c) : ld_dt(p->a.data, ad, ai + c);
        vf z = f32 ? vf_load((const float *)p->b.data + bi + c) : ld_dt(p->b.data, bd, bi + c);
        vf v = bin_op(mul, x, z);
        if (f32)
            vf_store((float *)p->y.data + yi + c, vf_canon(v));
        else
            st_dt(p->y.data, yd, yi + c, v);
    }
    if (c < n) {
        const int r = (int)(n - c);
        vf v = bin_op(mul, ld_dt_part(p->a.data, ad, ai + c, r, vf_zero()),
                      ld_dt_part(p->b.data, bd, bi + c, r, vf_zero()));
        st_dt_part(p->y.data, yd, yi + c, r, v);
    }
}

static void bin_rows(void *v, int64_t r0, int64_t r1, int tid)
{
    const lk_binary_args *p = (const lk_binary_args *)v;
    const int broadcast = p->b.rows == 1 && p->a.rows > 1;
    const int mul = p->op == LK_BINARY_MUL;
    const int f32 = p->a.dtype == LK_F32 && p->b.dtype == LK_F32 && p->y.dtype == LK_F32;
    (void)tid;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ai = r * p->a.ld, bi = (broadcast ? 0 : r) * p->b.ld, yi = r * p->y.ld;
        if (f32)
            mul ? bin_row(1, 1, p, ai, bi, yi, p->a.cols) : bin_row(0, 1, p, ai, bi, yi, p->a.cols);
        else
            mul ? bin_row(1, 0, p, ai, bi, yi, p->a.cols) : bin_row(0, 0, p, ai, bi, yi, p->a.cols);
    }
}

LK_CPU_DEFINE(binary, lk_binary_args)
{
    lk_cpu_queue *q = (lk_cpu_queue *)queue;
    const int64_t rows = args->a.rows;
    const int nt = lk_cpu_threads_for(q, 12.0 * (double)rows * (double)args->a.cols, rows);
    lk_cpu_for(nt, rows, bin_rows, (void *)args);
    return LK_OK;
}
