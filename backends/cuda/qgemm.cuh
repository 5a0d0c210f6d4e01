/* Lockstep CUDA driver (internal): the integer GEMMs' tile kernel and
 * epilogue (docs/numerics.md section 9), shared by int8_gemm.cu and
 * ternary.cu.
 *
 * acc[m, n] = sum_k x[m, k] * w[n, k] in int32 with dp4a.  Integer
 * addition is exact and associative, so any order gives the same acc; the
 * core's K limits keep every partial sum inside int32.  A block computes a
 * 64 x 64 tile in 64-k slices; the weight slice is int8 (int8 GEMM) or
 * decoded from LK_T2 codes as code - 1 (ternary GEMM), zero past K. */
#ifndef LK_CUDA_QGEMM_CUH
#define LK_CUDA_QGEMM_CUH

#include "backends/cuda/device.cuh"

/* dp4a of unsigned bytes a (masked LK_T2 codes, 4^e code, up to 192)
 * with signed bytes b: the ternary GEMVs' dot products (ternary.cu,
 * bitnet.cu) */
static __device__ __forceinline__ int lk_dp4a_us(uint32_t a, int b, int c)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

#define QBM 64
#define QBN 64
#define QBK 64 /* bytes of k per slice: 16 words */
#define QBKW (QBK / 4)

/* The float store of every integer kernel: v, or with LK_GEMM_ACCUMULATE
 * (lk_ternary_linear; the core allows it on f32 y only) y's old value
 * `old` plus v, one rounding: the bits of lk_binary ADD after the plain
 * store.  The element is read and written by the same thread, after
 * lk_pdl_wait(). */
static __device__ __forceinline__ void lk_qgemm_put_old(const lk_qgemm_args &q, int64_t yi, float v,
                                                        float old)
{
    if (q.flags & LK_GEMM_ACCUMULATE)
        v = __fadd_rn(old, v);
    lk_store_any(q.y.data, q.y.dtype, yi, v);
}

/* The dequantised value (numerics.md section 9): (float)acc / x_scale,
 * times w_scale, each step rounded to nearest. */
static __device__ __forceinline__ float lk_qgemm_value(int32_t acc, float xs, float ws)
{
    return __fmul_rn(__fdiv_rn(__int2float_rn(acc), xs), ws);
}

/* The same quotient for many acc over one x_scale b, without a division
 * each (tc/wgmma_int.cuh's epilogue: a column of a tile shares its scale).
 * With r = RN(1 / b) (__frcp_rn, once per scale), q = RN(a r) (within
 * 2^-23 |a / b|) and two corrections q = RN(q + RN(a - b q) r), each
 * residual and correction an fma, give RN(a / b): the first brings q
 * within 1/2 ulp + 2^-46 |a / b|, so q is faithful, and then
 * Markstein's theorem (y within 1/2 ulp of 1 / b and q faithful: the
 * residual is exact and q + r y rounds to a / b) makes the second exact.
 * It needs no underflow or overflow on the way: a is an int32's float
 * (0 or 1 <= |a| <= 2^31), and lk_qdiv_ok keeps 2^-40 <= |b| <= 2^40 (the
 * quotients, residuals and corrections stay normal); other scales (0,
 * subnormal, huge, inf, NaN) take __fdiv_rn.  The bits are __fdiv_rn's
 * (tests/test_tc_ternary.c checks odd scales against the reference).
 * 5 operations instead of a reciprocal, five fmas and a range check with
 * a branch per element. */
static __device__ __forceinline__ bool lk_qdiv_ok(float b)
{
    const float m = fabsf(b); /* NaN: false */
    return m >= 0x1p-40f && m <= 0x1p40f;
}

static __device__ __forceinline__ float lk_qdiv(float a, float b, float r)
{
    float q = __fmul_rn(a, r);
    q = __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
    return __fmaf_rn(__fmaf_rn(-b, q, a), r, q);
}

/* lk_qgemm_value with r = __frcp_rn(xs), where lk_qdiv_ok(xs) */
static __device__ __forceinline__ float lk_qgemm_value_r(int32_t acc, float xs, float r, float ws)
{
    return __fmul_rn(lk_qdiv(__int2float_rn(acc), xs, r), ws);
}

/* The epilogue's loads for y[m, n]: the scales, and y's old value under
 * LK_GEMM_ACCUMULATE.  A kernel may issue them before its dot products
 * (after lk_pdl_wait(): x_scale and y come from earlier ops), so that
 * they are not one more round trip after the last dp4a. */
struct lk_qepi {
    float xs, ws, y;
};

static __device__ __forceinline__ lk_qepi lk_qgemm_pre(const lk_qgemm_args &q, int64_t m, int64_t n)
{
    lk_qepi p = {1.0f, 1.0f, 0.0f};
    if (q.x_scale.data == nullptr)
        return p;
    p.xs = ((const float *)q.x_scale.data)[m * q.x_scale.ld];
    p.ws = ((const float *)q.w_scale.data)[q.w_scale.cols == 1 ? 0 : n];
    if (q.flags & LK_GEMM_ACCUMULATE)
        p.y = ((const float *)q.y.data)[m * q.y.ld + n];
    return p;
}

/* y[m, n] = acc (int32 output), or ((float)acc / x_scale[m]) * w_scale[n
 * or 0], rounded once at the store, plus y's old value in one more
 * rounding under LK_GEMM_ACCUMULATE (lk_qgemm_put_old), from p. */
static __device__ __forceinline__ void lk_qgemm_store_pre(const lk_qgemm_args &q, int64_t m,
                                                          int64_t n, int32_t acc, const lk_qepi &p)
{
    const int64_t yi = m * q.y.ld + n;
    if (q.x_scale.data == nullptr) {
        ((int32_t *)q.y.data)[yi] = acc;
        return;
    }
    lk_qgemm_put_old(q, yi, lk_qgemm_value(acc, p.xs, p.ws), p.y);
}

/* The same with the loads where the store is. */
static __device__ __forceinline__ void lk_qgemm_store(const lk_qgemm_args &q, int64_t m,
                                                      int64_t n, int32_t acc)
{
    lk_qgemm_store_pre(q, m, n, acc, lk_qgemm_pre(q, m, n));
}

/* Four LK_T2 codes (one byte) as four int8 values code - 1, in the byte
 * order of k; codes at k >= valid (0..4 of them valid) decode to 0. */
static __device__ __forceinline__ uint32_t lk_t2_decode(uint32_t byte, int valid)
{
    uint32_t s = (byte & 0x03u) | (byte & 0x0cu) << 6 | (byte & 0x30u) << 12 | (byte & 0xc0u) << 18;
    uint32_t v = __vsub4(s, 0x01010101u); /* per byte, no borrow: 0 -> 0xff = -1 */
    if (valid < 4)
        v &= valid <= 0 ? 0u : 0xffffffffu >> (8 * (4 - valid));
    return v;
}

/* A slice of an int8 matrix of `rows` rows of K bytes (x, or int8 weights):
 * row r0 + t / 4 of it, bytes k0 .. k0 + 63, zero outside. */
static __device__ __forceinline__ void lk_q_load_i8(const lk_tensor &mat, int64_t rows, int64_t K,
                                                    bool vec, int64_t r0, int64_t k0,
                                                    uint32_t (*S)[QBKW + 1])
{
    const int t = threadIdx.x, row = t >> 2, w0 = (t & 3) * 4;
    const int64_t r = r0 + row, k = k0 + w0 * 4;
    const int8_t *p = (const int8_t *)mat.data + r * mat.ld;
    if (r < rows && vec && k + 16 <= K) {
        uint4 u = *reinterpret_cast<const uint4 *>(p + k);
        S[row][w0] = u.x, S[row][w0 + 1] = u.y, S[row][w0 + 2] = u.z, S[row][w0 + 3] = u.w;
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        uint32_t word = 0;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t kk = k + 4 * j + e;
            if (r < rows && kk < K)
                word |= (uint32_t)(uint8_t)p[kk] << (8 * e);
        }
        S[row][w0 + j] = word;
    }
}

/* The ternary weight slice: row n of the LK_T2 matrix, codes k0 .. k0 + 63
 * (16 bytes), decoded; bytes at or past ceil(K / 4) are never read. */
static __device__ __forceinline__ void lk_q_load_w_t2(const lk_qgemm_args &q, bool wvec,
                                                      int64_t n0, int64_t k0,
                                                      uint32_t (*Ws)[QBKW + 1])
{
    const int t = threadIdx.x, row = t >> 2, w0 = (t & 3) * 4;
    const int64_t n = n0 + row;
    const int64_t byte0 = k0 / 4 + w0; /* first of this thread's four bytes */
    const int64_t nbytes = (q.k + 3) / 4;
    const uint8_t *w = (const uint8_t *)q.w.data + n * (q.w.ld / 4);
    uint32_t bytes = 0;
    if (n < q.n) {
        if (wvec && byte0 + 4 <= nbytes) {
            bytes = *reinterpret_cast<const uint32_t *>(w + byte0);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                if (byte0 + j < nbytes)
                    bytes |= (uint32_t)w[byte0 + j] << (8 * j);
        }
    }
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const int64_t valid = n < q.n ? q.k - 4 * (byte0 + j) : 0;
        Ws[row][w0 + j] = lk_t2_decode((bytes >> (8 * j)) & 0xffu,
                                       valid > 4 ? 4 : (int)(valid < 0 ? 0 : valid));
    }
}

/* 256 threads, a 64 x 64 tile, 4 x 4 outputs per thread at rows ty + 16 i
 * and columns tx + 16 j (conflict-free reads of the padded slices). */
template <bool T2>
__global__ void __launch_bounds__(256) lk_qgemm_tile_kernel(lk_qgemm_args q, int xvec, int wvec)
{
    lk_pdl_wait();
    lk_pdl_trigger();
    __shared__ uint32_t Xs[QBM][QBKW + 1];
    __shared__ uint32_t Ws[QBN][QBKW + 1];
    const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
    const int64_t m0 = (int64_t)blockIdx.y * QBM, n0 = (int64_t)blockIdx.x * QBN;
    int32_t acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
            acc[i][j] = 0;
    for (int64_t k0 = 0; k0 < q.k; k0 += QBK) {
        lk_q_load_i8(q.x, q.m, q.k, xvec, m0, k0, Xs);
        if (T2)
            lk_q_load_w_t2(q, wvec, n0, k0, Ws);
        else
            lk_q_load_i8(q.w, q.n, q.k, wvec, n0, k0, Ws);
        __syncthreads();
#pragma unroll
        for (int kw = 0; kw < QBKW; kw++) {
            int a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; i++)
                a[i] = (int)Xs[ty + 16 * i][kw];
#pragma unroll
            for (int j = 0; j < 4; j++)
                b[j] = (int)Ws[tx + 16 * j][kw];
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int64_t m = m0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t n = n0 + tx + 16 * j;
            if (m < q.m && n < q.n)
                lk_qgemm_store(q, m, n, acc[i][j]);
        }
    }
}

/* Enqueue the tile kernel, in slices of at most 65535 tile rows. */
template <bool T2> static inline void lk_qgemm_tiled(const lk_qgemm_args &q, cudaStream_t st)
{
    const int64_t gx = (q.n + QBN - 1) / QBN;
    const int xvec = (uintptr_t)q.x.data % 16 == 0 && q.x.ld % 16 == 0;
    const int wvec = T2 ? (uintptr_t)q.w.data % 4 == 0 && (q.w.ld / 4) % 4 == 0
                        : (uintptr_t)q.w.data % 16 == 0 && q.w.ld % 16 == 0;
    const int64_t rows_per_launch = (int64_t)65535 * QBM;
    for (int64_t m0 = 0; m0 < q.m; m0 += rows_per_launch) {
        lk_qgemm_args s = q;
        s.m = q.m - m0 < rows_per_launch ? q.m - m0 : rows_per_launch;
        s.x.data = (int8_t *)q.x.data + m0 * q.x.ld;
        s.y.data = (char *)q.y.data + m0 * q.y.ld * (int64_t)lk_dtype_bytes(q.y.dtype);
        if (q.x_scale.data)
            s.x_scale.data = (float *)q.x_scale.data + m0 * q.x_scale.ld;
        const int64_t gy = (s.m + QBM - 1) / QBM;
        lk_launch(lk_qgemm_tile_kernel<T2>, dim3((unsigned)gx, (unsigned)gy), 256, 0, st, s, xvec,
                  wvec);
    }
}

#endif
