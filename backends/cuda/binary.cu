/* Lockstep CUDA: element-wise add and mul (docs/numerics.md section 7):
 * y = a + b or a * b, widened, one rounding at the store.  b is broadcast
 * over rows when it has one row and a more.  y may be a or b itself: each
 * element is read before it is written, by the same thread. */
#include "backends/cuda/elementwise.cuh"

namespace {

template <lk_dtype DA, lk_dtype DB, lk_dtype DY, bool VEC>
__global__ void __launch_bounds__(256)
    binary_kernel(lk_ew_shape s, lk_binary_op op, const void *a, int64_t lda, const void *b,
                  int64_t ldb, void *y, int64_t ldy)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    typedef typename lk_elem<DA>::T TA;
    typedef typename lk_elem<DB>::T TB;
    typedef typename lk_elem<DY>::T TY;
    const bool mul = op == LK_BINARY_MUL;
    auto f = [=](float x, float z) { return mul ? __fmul_rn(x, z) : __fadd_rn(x, z); };
    LK_EW_FOR(s, VEC, r, i) {
        const TA *ar = (const TA *)a + r * lda;
        const TB *br = (const TB *)b + r * ldb; /* ldb = 0: broadcast */
        TY *yr = (TY *)y + r * ldy;
        if (VEC && i + 4 <= s.cols) {
            float4 u = lk_elem<DA>::load4(ar, i), v = lk_elem<DB>::load4(br, i);
            lk_elem<DY>::store4(yr, i, make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z),
                                                   f(u.w, v.w)));
        } else {
            for (int64_t e = i; e < s.cols && e < i + (VEC ? 4 : 1); e++)
                lk_elem<DY>::store(yr, e, f(lk_elem<DA>::load(ar, e), lk_elem<DB>::load(br, e)));
        }
    }
}

template <lk_dtype DA, lk_dtype DB>
void launch(const lk_binary_args *p, const lk_ew_shape &s, int64_t lda, int64_t ldb,
            int64_t ldy, cudaStream_t st)
{
    LK_FLOAT_SWITCH(p->y.dtype, DY, {
        if (s.vec)
            lk_launch(binary_kernel<DA, DB, DY, true>, s.grid, 256, 0, st, s, p->op, p->a.data,
                      lda, p->b.data, ldb, p->y.data, ldy);
        else
            lk_launch(binary_kernel<DA, DB, DY, false>, s.grid, 256, 0, st, s, p->op, p->a.data,
                      lda, p->b.data, ldb, p->y.data, ldy);
    });
}

} // namespace

extern "C" lk_status lk_cuda_binary(void *queue, const lk_binary_args *p)
{
    lk_op_scope op(queue, "lk_binary");
    if (!op.ok())
        return op.status();
    const bool broadcast = p->b.rows == 1 && p->a.rows > 1;
    const lk_tensor *ts[3] = {&p->a, &p->y, &p->b};
    /* a broadcast b keeps the shape two-dimensional; its one row is still
     * checked for alignment (its ld does not matter) */
    lk_ew_shape s = lk_ew_plan(ts, broadcast ? 2 : 3, p->a.rows, p->a.cols, !broadcast);
    if (broadcast) {
        size_t al = 4 * lk_dtype_bytes(p->b.dtype);
        if ((uintptr_t)p->b.data % al != 0) {
            s = lk_ew_plan(ts, 2, p->a.rows, p->a.cols, false);
            s.vec = 0;
            s.grid.x = lk_grid_cap((s.cols + 255) / 256, (int64_t)1 << 30);
        }
    }
    const int64_t lda = s.flat ? s.cols : p->a.ld;
    const int64_t ldy = s.flat ? s.cols : p->y.ld;
    const int64_t ldb = broadcast ? 0 : s.flat ? s.cols : p->b.ld;
    LK_FLOAT_SWITCH(p->a.dtype, DA, LK_FLOAT_SWITCH(p->b.dtype, DB, {
        launch<DA, DB>(p, s, lda, ldb, ldy, op.stream());
    }));
    return op.launched();
}
