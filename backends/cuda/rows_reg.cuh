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

/* J terms per lane: 16 covers rows of up to 1024 elements, 64 a chunk
 * (lk_rr_row_op gives rows of one chunk past 1024 two threads per lane of
 * J = 32 terms each). */
static inline int lk_rr_j(int64_t n) { return n <= 16 * LK_LANES ? 16 : 64; }
static inline unsigned lk_rr_threads(int64_t n)
{
    return (unsigned)(64 * ((n + LK_CHUNK - 1) / LK_CHUNK));
}

/* Element index of term j of this thread's lane (row-relative).  H = 1:
 * thread 64 c + l is lane l of chunk c with all its terms.  H > 1 (J H =
 * 64): H threads share a lane, thread 64 (H c + h) + l holding terms
 * J h .. J h + J - 1 of lane l of chunk c, and lk_rr_sum passes the lane's
 * running sum from h to h + 1, so the chain is still the contract's one.
 * Fewer registers per thread let more warps run per SM. */
template <int J, int H = 1> static __device__ __forceinline__ int64_t lk_rr_index(int j)
{
    return H == 1 ? (int64_t)(threadIdx.x >> 6) * LK_CHUNK + (threadIdx.x & 63) + 64 * j
                  : (int64_t)((threadIdx.x >> 6) * (64 * J) + (threadIdx.x & 63) + 64 * j);
}

/* True when every term of this thread is inside the row. */
template <int J, int H = 1> static __device__ __forceinline__ bool lk_rr_full(int64_t n)
{
    return lk_rr_index<J, H>(J - 1) < n;
}

template <lk_dtype DX, int J, int H = 1>
static __device__ __forceinline__ void lk_rr_load(float (&v)[J], const typename lk_elem<DX>::T *xr,
                                                  int64_t n)
{
    if (lk_rr_full<J, H>(n)) {
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = lk_elem<DX>::load(xr, lk_rr_index<J, H>(j));
    } else {
#pragma unroll
        for (int j = 0; j < J; j++)
            v[j] = lk_rr_index<J, H>(j) < n ? lk_elem<DX>::load(xr, lk_rr_index<J, H>(j)) : 0.0f;
    }
}

/* y_i = f(i, v_j) for the thread's terms inside the row. */
template <lk_dtype DY, int J, int H = 1, class F>
static __device__ __forceinline__ void lk_rr_store(const float (&v)[J], typename lk_elem<DY>::T *yr,
                                                   int64_t n, F f)
{
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int64_t i = lk_rr_index<J, H>(j);
        if (i < n)
            lk_elem<DY>::store(yr, i, f(i, v[j]));
    }
}

/* v_j = op(v_j, u_i) with u a 1 x n row of dtype dt (a weight or a
 * bias), for the thread's terms inside the row.  The dtype switch sits
 * outside the loop and no store comes between the loads, so all of a
 * thread's loads are in flight at once. */
template <lk_dtype D, int J, int H, class Op>
static __device__ __forceinline__ void lk_rr_apply_t(float (&v)[J], const void *u, int64_t n, Op op)
{
    const typename lk_elem<D>::T *p = (const typename lk_elem<D>::T *)u;
#pragma unroll
    for (int j = 0; j < J; j++) {
        const int64_t i = lk_rr_index<J, H>(j);
        if (i < n)
            v[j] = op(v[j], lk_elem<D>::load(p, i));
    }
}

template <int J, int H = 1, class Op>
static __device__ __forceinline__ void lk_rr_apply(float (&v)[J], const void *u, lk_dtype dt, int64_t n,
                                                   Op op)
{
    if (dt == LK_BF16)
        lk_rr_apply_t<LK_BF16, J, H>(v, u, n, op);
    else if (dt == LK_F16)
        lk_rr_apply_t<LK_F16, J, H>(v, u, n, op);
    else
        lk_rr_apply_t<LK_F32, J, H>(v, u, n, op);
}

/* u_j = the thread's terms of u, a 1 x n row of dtype dt (0 past the
 * row): a weight loaded before the reductions, its loads in flight with
 * the row's. */
template <int J, int H = 1>
static __device__ __forceinline__ void lk_rr_load_any(float (&u)[J], const void *p, lk_dtype dt,
                                                      int64_t n)
{
    if (dt == LK_BF16)
        lk_rr_load<LK_BF16, J, H>(u, (const typename lk_elem<LK_BF16>::T *)p, n);
    else if (dt == LK_F16)
        lk_rr_load<LK_F16, J, H>(u, (const typename lk_elem<LK_F16>::T *)p, n);
    else
        lk_rr_load<LK_F32, J, H>(u, (const typename lk_elem<LK_F32>::T *)p, n);
}

struct lk_rr_mul {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fmul_rn(a, b); }
};
struct lk_rr_add {
    __device__ __forceinline__ float operator()(float a, float b) const { return __fadd_rn(a, b); }
};

/* lk_rr_sum for H > 1 threads per lane (J H = 64): thread
 * 64 (H c + h) + l continues the chain of lane l of chunk c where thread
 * 64 (H c + h - 1) + l left it, in turn; then the first warp of each chunk
 * runs the butterfly and the chunk partials go through the chunk tree as
 * in lk_rr_sum. */
template <bool SQ, int J, int H, class F>
static __device__ __forceinline__ float lk_rr_sum_split(const float (&v)[J], int64_t n, float *sh,
                                                        F f)
{
    const int c = threadIdx.x / (64 * H), h = (threadIdx.x >> 6) % H, l = threadIdx.x & 63;
    float *lane = sh + 64 * c;
    const bool full = lk_rr_full<J, H>(n);
    float acc = -0.0f;
#pragma unroll
    for (int k = 0; k < H; k++) {
        if (h == k) {
            if (k > 0)
                acc = lane[l];
            if (full) {
#pragma unroll
                for (int j = 0; j < J; j++)
                    acc = lk_leaf<SQ>(acc, f(v[j]));
            } else {
#pragma unroll
                for (int j = 0; j < J; j++)
                    if (lk_rr_index<J, H>(j) < n)
                        acc = lk_leaf<SQ>(acc, f(v[j]));
            }
            lane[l] = acc;
        }
        __syncthreads();
    }
    /* lane[l] is lane l's sum; butterfly, s = 32 first */
    float *part = sh + LK_RR_MAX_CHUNKS * 64;
    if (h == 0 && l < 32) {
        float b = __fadd_rn(lane[l], lane[l + 32]);
#pragma unroll
        for (int d = 16; d >= 1; d >>= 1)
            b = __fadd_rn(b, __shfl_down_sync(LK_FULL_MASK, b, d));
        if (l == 0)
            part[c] = b;
    }
    __syncthreads();
    const int nc = (int)((n + LK_CHUNK - 1) / LK_CHUNK);
    float r;
    if (nc == 1) {
        r = part[0];
    } else {
        /* the chunk tree, as in lk_rr_sum */
        float L[LK_RR_MAX_CHUNKS];
#pragma unroll
        for (int i = 0; i < LK_RR_MAX_CHUNKS; i++)
            L[i] = i < nc ? part[i] : -0.0f;
#pragma unroll
        for (int s = LK_RR_MAX_CHUNKS / 2; s >= 1; s >>= 1)
#pragma unroll
            for (int i = 0; i < s; i++)
                L[i] = __fadd_rn(L[i], L[i + s]);
        r = L[0];
    }
    __syncthreads(); /* sh is reused by the next call */
    return r;
}

/* The lane sum (SQ: sum of squares) of f(v_j) over the row, to every
 * thread of the block.  sh: LK_RR_SMEM floats. */
template <bool SQ, int J, int H = 1, class F>
static __device__ __forceinline__ float lk_rr_sum(const float (&v)[J], int64_t n, float *sh, F f)
{
    if (H > 1)
        return lk_rr_sum_split<SQ, J, H>(v, n, sh, f);
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

/* An order-free reduction of the thread's terms inside the row; init is
 * op's identity.  Four chains, not one, so that the ops overlap. */
template <int J, int H = 1, class Op>
static __device__ __forceinline__ float lk_rr_fold(const float (&v)[J], int64_t n, float *sh,
                                                   float init, Op op)
{
    float q[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        q[k] = init;
#pragma unroll
    for (int j = 0; j < J; j++)
        if (lk_rr_index<J, H>(j) < n)
            q[j & 3] = op(q[j & 3], v[j]);
#pragma unroll
    for (int s = 2; s >= 1; s >>= 1)
#pragma unroll
        for (int k = 0; k < s; k++)
            q[k] = op(q[k], q[k + s]);
    float r = q[0];
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

/* Activation quantisation (numerics.md section 8) in few instructions, for
 * the decode-sized kernels, whose time is their critical path.
 *
 * The absmax on bit patterns: with the sign cleared, the patterns of the
 * non-NaN |x| order as their values, +0 is 0 and every NaN lies above +inf,
 * so an unsigned maximum over them (from 0) followed by lk_qa_amax is
 * lk_maximum's fold of |x_i| from +0, NaN winning, bit for bit: one integer
 * op per term, and one REDUX per warp. */
static __device__ __forceinline__ unsigned lk_qa_bits(float x)
{
    return __float_as_uint(x) & 0x7fffffffu;
}

static __device__ __forceinline__ float lk_qa_amax(unsigned m)
{
    return m > 0x7f800000u ? __uint_as_float(LK_NAN_F32_BITS) : __uint_as_float(m);
}

static __device__ __forceinline__ unsigned lk_qa_warp_max(unsigned m)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(LK_FULL_MASK, m);
#else
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
        m = max(m, __shfl_xor_sync(LK_FULL_MASK, m, d));
    return m;
#endif
}

/* q = isnan(v) ? 0 : rne(minimum(maximum(v, -128), 127)): for non-NaN v
 * fmaxf/fminf clamp as maximum/minimum do (the sign of a zero is lost in
 * the integer anyway) and cvt.rni rounds half to even, exact on
 * [-128, 127]. */
static __device__ __forceinline__ int lk_qa_q8(float v)
{
    return lk_isnan(v) ? 0 : __float2int_rn(fminf(fmaxf(v, -128.0f), 127.0f));
}

/* Four codes as the little-endian bytes of one word. */
static __device__ __forceinline__ uint32_t lk_qa_pack4(int a, int b, int c, int d)
{
    return __byte_perm(__byte_perm((uint32_t)a, (uint32_t)b, 0x0040),
                       __byte_perm((uint32_t)c, (uint32_t)d, 0x0040), 0x5410);
}

/* Rows of 2 .. SC chunks on two threads per lane (H = 2, J = 32, 128 C
 * threads): Op::reg<DX, DY, 32, 2, SC>, whose kernel takes blocks of up to
 * 128 SC threads.  SC = 1 (the default) keeps such rows on H = 1 and never
 * names the five-parameter reg. */
template <int SC> struct lk_rr_multi {
    template <class Op, lk_dtype DX, lk_dtype DY, class Args>
    static void launch(dim3 grid, dim3 block, cudaStream_t st, const Args &a)
    {
        Op::template reg<DX, DY, 32, 2, SC>(grid, block, st, a);
    }
};
template <> struct lk_rr_multi<1> {
    template <class Op, lk_dtype DX, lk_dtype DY, class Args>
    static void launch(dim3, dim3, cudaStream_t, const Args &)
    {
    }
};

/* The launcher of a row op (norms, softmax) that has both kernels: rows
 * of up to LK_RR_MAX in registers (Op::reg<DX, DY, J, H>), longer ones one
 * group per row through rows.cuh (Op::cached<DX, DY, VEC>).  Args has the
 * x and y tensors.  SC: see lk_rr_multi. */
template <class Op, int SC = 1, class Args>
static inline lk_status lk_rr_row_op(void *queue, const Args *a, const char *what)
{
    lk_op_scope op(queue, what);
    if (!op.ok())
        return op.status();
    const int64_t n = a->x.cols;
    if (n > LK_ROW_MAX)
        return op.fail(LK_ERR_UNSUPPORTED, "%s: rows of more than 2^36 elements", what);
    if (n <= LK_RR_MAX) {
        const dim3 grid(lk_rr_grid(a->x.rows));
        /* rows of one chunk past 1024: two threads per lane (H = 2) */
        const bool split = n > 16 * LK_LANES && n <= LK_CHUNK;
        const bool multi = n > LK_CHUNK && n <= (int64_t)SC * LK_CHUNK;
        const dim3 block(split ? 2 * 64 : multi ? 2 * lk_rr_threads(n) : lk_rr_threads(n));
        LK_FLOAT_SWITCH(a->x.dtype, DX, LK_FLOAT_SWITCH(a->y.dtype, DY, {
            if (multi)
                lk_rr_multi<SC>::template launch<Op, DX, DY>(grid, block, op.stream(), *a);
            else if (split)
                Op::template reg<DX, DY, 32, 2>(grid, block, op.stream(), *a);
            else if (lk_rr_j(n) == 16)
                Op::template reg<DX, DY, 16, 1>(grid, block, op.stream(), *a);
            else
                Op::template reg<DX, DY, 64, 1>(grid, block, op.stream(), *a);
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
