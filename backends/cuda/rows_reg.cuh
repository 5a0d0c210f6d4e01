/* Lockstep CUDA driver (internal): rows held in registers, for the norms
 * and softmax on rows of up to LK_RR_MAX elements.
 *
 * A row of n elements takes C = ceil(n / 4096) chunks (numerics.md
 * section 5) and a block of 64 C threads: thread l of chunk c is the
 * contract's lane l of that chunk and holds its J terms
 * x[4096 c + l + 64 j], j < J, in registers (a warp's loads are 32
 * consecutive elements, so they coalesce).  The lane's sum is then the
 * contract's sequential chain with no data movement; the butterfly's
 * first step (s = 32) pairs the chunk's two warps through shared memory,
 * the rest run on shuffles; the chunk partials form the next level.  The
 * row is read from global memory once and written once, with no shared
 * memory copy of it, so many rows are in flight per SM. */
#ifndef LK_CUDA_ROWS_REG_CUH
#define LK_CUDA_ROWS_REG_CUH

#include "backends/cuda/device.cuh"
#include "backends/cuda/rows.cuh"

#define LK_RR_MAX_CHUNKS 8
#define LK_RR_MAX ((int64_t)LK_RR_MAX_CHUNKS * LK_CHUNK)
/* shared floats a kernel passes to the helpers below */
#define LK_RR_SMEM (LK_RR_MAX_CHUNKS * 64 + 2 * LK_RR_MAX_CHUNKS + 32)

/* J terms per lane: 16 covers rows of up to 1024 elements, 64 a chunk. */
static inline int lk_rr_j(int64_t n) { return n <= 16 * LK_LANES ? 16 : 64; }
static inline unsigned lk_rr_threads(int64_t n)
{
    return (unsigned)(64 * ((n + LK_CHUNK - 1) / LK_CHUNK));
}

/* Element index of term j of this thread's lane (row-relative). */
template <int J> static __device__ __forceinline__ int64_t lk_rr_index(int j)
{
    return (int64_t)(threadIdx.x >> 6) * LK_CHUNK + (threadIdx.x & 63) + 64 * j;
}

/* True when every term of this thread is inside the row. */
template <int J> static __device__ __forceinline__ bool lk_rr_full(int64_t n)
{
    return lk_rr_index<J>(J - 1) < n;
}

template <lk_dtype DX, int J>
static __device__ __forceinline__ void lk_rr_load(float (&v)[J], const typename lk_elem<DX>::T *xr,
                                                  int64_t n)
{
    if (lk_rr_full<J>(n)) {
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = lk_elem<DX>::load(xr, lk_rr_index<J>(j));
    } else {
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = lk_rr_index<J>(j) < n ? lk_elem<DX>::load(xr, lk_rr_index<J>(j)) : 0.0f;
    }
}

/* y_i = f(i, v_j) for the thread's terms inside the row. */
template <lk_dtype DY, int J, class F>
static __device__ __forceinline__ void lk_rr_store(const float (&v)[J], typename lk_elem<DY>::T *yr,
                                                   int64_t n, F f)
{
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int64_t i = lk_rr_index<J>(j);
        if (i < n)
            lk_elem<DY>::store(yr, i, f(i, v[j]));
    }
}

/* v_j = op(v_j, u_i) with u a 1 x n row of dtype dt (a weight or a
 * bias), for the thread's terms inside the row.  The dtype switch sits
 * outside the loop and no store comes between the loads, so all of a
 * thread's loads are in flight at once. */
template <lk_dtype D, int J, class Op>
static __device__ __forceinline__ void lk_rr_apply_t(float (&v)[J], const void *u, int64_t n, Op op)
{
    const typename lk_elem<D>::T *p = (const typename lk_elem<D>::T *)u;
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int64_t i = lk_rr_index<J>(j);
        if (i < n)
            v[j] = op(v[j], lk_elem<D>::load(p, i));
    }
}

template <int J, class Op>
static __device__ __forceinline__ void lk_rr_apply(float (&v)[J], const void *u, lk_dtype dt, int64_t n,
                                                   Op op)
{
    if (dt == LK_BF16)
        lk_rr_apply_t<LK_BF16, J>(v, u, n, op);
    else if (dt == LK_F16)
        lk_rr_apply_t<LK_F16, J>(v, u, n, op);
    else
        lk_rr_apply_t<LK_F32, J>(v, u, n, op);
}

struct lk_rr_mul {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fmul_rn(a, b); }
};
struct lk_rr_add {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

/* The lane sum (SQ: sum of squares) of f(v_j) over the row, to every
 * thread of the block.  sh: LK_RR_SMEM floats. */
template <bool SQ, int J, class F>
static __device__ __forceinline__ float lk_rr_sum(const float (&v)[J], int64_t n, float *sh, F f)
{
    const int c = threadIdx.x >> 6, l = threadIdx.x & 63;
    float acc = -0.0f;
    if (lk_rr_full<J>(n)) {
#pragma unroll
        for (int j = 0; j < J; j++)
            acc = lk_leaf<SQ>(acc, f(v[j]));
    } else {
#pragma unroll
        for (int j = 0; j < J; j++)
            if (lk_rr_index<J>(j) < n)
                acc = lk_leaf<SQ>(acc, f(v[j]));
    }
    /* butterfly, s = 32: lane l of the first warp takes lane l + 32 */
    sh[threadIdx.x] = acc;
    __syncthreads();
    float *part = sh + LK_RR_MAX_CHUNKS * 64;
    if (l < 32) {
        acc = __fadd_rn(acc, sh[threadIdx.x + 32]);
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1)
            acc = __fadd_rn(acc, __shfl_down_sync(LK_FULL_MASK, acc, d));
        if (l == 0)
            part[c] = acc;
    }
    __syncthreads();
    /* the chunk partials are the next level's terms, one per lane from -0
     * (so lane i is p_i); lanes past them stay -0 and add nothing */
    const int nc = (int)((n + LK_CHUNK - 1) / LK_CHUNK);
    float L[LK_RR_MAX_CHUNKS];
#pragma unroll
    for (int i = 0; i < LK_RR_MAX_CHUNKS; i++)
        L[i] = i < nc ? part[i] : -0.0f;
#pragma unroll
    for (int s = LK_RR_MAX_CHUNKS / 2; s >= 1; s >>= 1)
#pragma unroll
        for (int i = 0; i < s; i++)
            L[i] = __fadd_rn(L[i], L[i + s]);
    __syncthreads(); /* sh is reused by the next call */
    return L[0];
}

/* An order-free reduction of the thread's terms inside the row. */
template <int J, class Op>
static __device__ __forceinline__ float lk_rr_fold(const float (&v)[J], int64_t n, float *sh,
                                                   float init, Op op)
{
    float r = init;
#pragma unroll
    for (int j = 0; j < J; j++)
        if (lk_rr_index<J>(j) < n)
            r = op(r, v[j]);
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
        r = op(r, __shfl_xor_sync(LK_FULL_MASK, r, d));
    float *w = sh + LK_RR_MAX_CHUNKS * 64 + LK_RR_MAX_CHUNKS;
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    if ((threadIdx.x & 31) == 0)
        w[warp] = r;
    __syncthreads();
    r = w[0];
    for (int i = 1; i < nwarps; i++)
        r = op(r, w[i]);
    __syncthreads();
    return r;
}

static inline unsigned lk_rr_grid(int64_t rows) { return lk_grid_cap(rows, (int64_t)1 << 20); }

/* The launcher of a row op (norms, softmax) that has both kernels: rows
 * of up to LK_RR_MAX in registers (Op::reg<DX, DY, J>), longer ones one
 * group per row through rows.cuh (Op::cached<DX, DY, VEC>).  Args has the
 * x and y tensors. */
template <class Op, class Args>
static inline lk_status lk_rr_row_op(void *queue, const Args *a, const char *what)
{
    lk_op_scope op(queue, what);
    if (!op.ok())
        return op.status();
    const int64_t n = a->x.cols;
    if (n > LK_ROW_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "%s: rows of more than 2^36 elements", what);
    if (n <= LK_RR_MAX) {
        const dim3 grid(lk_rr_grid(a->x.rows)), block(lk_rr_threads(n));
        LK_FLOAT_SWITCH(a->x.dtype, DX, LK_FLOAT_SWITCH(a->y.dtype, DY, {
            if (lk_rr_j(n) == 16)
                Op::template reg<DX, DY, 16>(grid, block, op.stream(), *a);
            else
                Op::template reg<DX, DY, 64>(grid, block, op.stream(), *a);
        }));
        return op.launched();
    }
    const lk_rows_cfg c = lk_rows_plan(a->x.rows, n, true);
    const bool vec = lk_rows_aligned(a->x, 4 * lk_dtype_bytes(a->x.dtype)) &&
                     lk_rows_aligned(a->y, 4 * lk_dtype_bytes(a->y.dtype));
    LK_FLOAT_SWITCH(a->x.dtype, DX, LK_FLOAT_SWITCH(a->y.dtype, DY, {
        if (vec)
            Op::template cached<DX, DY, true>(c, op.stream(), *a);
        else
            Op::template cached<DX, DY, false>(c, op.stream(), *a);
    }));
    return op.launched();
}

#endif
