/* Lockstep CUDA driver (internal): what every kernel file shares.
 *
 * - element loads and stores of docs/numerics.md section 3 (widen exactly,
 *   round once at the store, canonical NaN), per dtype as templates;
 * - the contract's lane sum (section 5) mapped onto a warp: thread t holds
 *   lanes 2t and 2t + 1 of the 64, so a chunk is read as 32 coalesced pairs
 *   per step and the butterfly is five shuffles and one add;
 * - the launch scope of an op (device switch, launch error mapping).
 *
 * Every float operation that the contract orders is written with the
 * explicit round-to-nearest intrinsics (__fadd_rn, __fmul_rn, __fmaf_rn,
 * __fdiv_rn, __fsqrt_rn); the module is also compiled with -fmad=false, so
 * plain operators are never contracted either. */
#ifndef LK_CUDA_DEVICE_CUH
#define LK_CUDA_DEVICE_CUH

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "numerics/contract.h"
#include "backends/cuda/driver.h"
#include "backends/cuda/launch.cuh"
#include "numerics/scalar.h"

#define LK_FULL_MASK 0xffffffffu
#define LK_WARP 32

/* ------------------------------------------------------ loads and stores */

template <lk_dtype D> struct lk_elem;

template <> struct lk_elem<LK_F32> {
    typedef float T;
    static __device__ __forceinline__ float load(const T *p, int64_t i) { return p[i]; }
    static __device__ __forceinline__ T cvt(float v)
    {
        return lk_isnan(v) ? __uint_as_float(LK_NAN_F32_BITS) : v;
    }
    static __device__ __forceinline__ void store(T *p, int64_t i, float v) { p[i] = cvt(v); }
    /* terms i and i + 1 (i even), when the row start is 8-byte aligned */
    static __device__ __forceinline__ float2 load2(const T *p, int64_t i)
    {
        return *reinterpret_cast<const float2 *>(p + i);
    }
    /* elements i .. i + 3 (i a multiple of 4, row start 16-byte aligned) */
    static __device__ __forceinline__ float4 load4(const T *p, int64_t i)
    {
        return *reinterpret_cast<const float4 *>(p + i);
    }
    static __device__ __forceinline__ void store4(T *p, int64_t i, float4 v)
    {
        *reinterpret_cast<float4 *>(p + i) = make_float4(cvt(v.x), cvt(v.y), cvt(v.z), cvt(v.w));
    }
    /* the same for data touched once: evict-first in the caches, so that
     * what is reused (a weight row) stays */
    static __device__ __forceinline__ float4 load4s(const T *p, int64_t i)
    {
        return __ldcs(reinterpret_cast<const float4 *>(p + i));
    }
    static __device__ __forceinline__ void store4s(T *p, int64_t i, float4 v)
    {
        __stcs(reinterpret_cast<float4 *>(p + i), make_float4(cvt(v.x), cvt(v.y), cvt(v.z), cvt(v.w)));
    }
    static __device__ __forceinline__ float2 load2s(const T *p, int64_t i)
    {
        return __ldcs(reinterpret_cast<const float2 *>(p + i));
    }
};

/* The 16-bit types move four elements as one 8-byte word. */
template <class E> struct lk_elem16 {
    static __device__ __forceinline__ float4 load4(const uint16_t *p, int64_t i)
    {
        uint2 u = *reinterpret_cast<const uint2 *>(p + i);
        return make_float4(E::load_bits(u.x & 0xffffu), E::load_bits(u.x >> 16),
                           E::load_bits(u.y & 0xffffu), E::load_bits(u.y >> 16));
    }
    static __device__ __forceinline__ void store4(uint16_t *p, int64_t i, float4 v)
    {
        uint2 u;
        u.x = (uint32_t)E::cvt(v.x) | (uint32_t)E::cvt(v.y) << 16;
        u.y = (uint32_t)E::cvt(v.z) | (uint32_t)E::cvt(v.w) << 16;
        *reinterpret_cast<uint2 *>(p + i) = u;
    }
    static __device__ __forceinline__ float2 load2(const uint16_t *p, int64_t i)
    {
        uint32_t u = *reinterpret_cast<const uint32_t *>(p + i);
        return make_float2(E::load_bits(u & 0xffffu), E::load_bits(u >> 16));
    }
    static __device__ __forceinline__ float4 load4s(const uint16_t *p, int64_t i)
    {
        uint2 u = __ldcs(reinterpret_cast<const uint2 *>(p + i));
        return make_float4(E::load_bits(u.x & 0xffffu), E::load_bits(u.x >> 16),
                           E::load_bits(u.y & 0xffffu), E::load_bits(u.y >> 16));
    }
    static __device__ __forceinline__ void store4s(uint16_t *p, int64_t i, float4 v)
    {
        uint2 u;
        u.x = (uint32_t)E::cvt(v.x) | (uint32_t)E::cvt(v.y) << 16;
        u.y = (uint32_t)E::cvt(v.z) | (uint32_t)E::cvt(v.w) << 16;
        __stcs(reinterpret_cast<uint2 *>(p + i), u);
    }
    static __device__ __forceinline__ float2 load2s(const uint16_t *p, int64_t i)
    {
        uint32_t u = __ldcs(reinterpret_cast<const unsigned int *>(p + i));
        return make_float2(E::load_bits(u & 0xffffu), E::load_bits(u >> 16));
    }
};

template <> struct lk_elem<LK_BF16> : lk_elem16<lk_elem<LK_BF16> > {
    typedef uint16_t T;
    static __device__ __forceinline__ float load_bits(uint32_t h)
    {
        return __uint_as_float(h << 16);
    }
    static __device__ __forceinline__ float load(const T *p, int64_t i) { return load_bits(p[i]); }
    static __device__ __forceinline__ T cvt(float v) { return lk_to_bf16(v); }
    static __device__ __forceinline__ void store(T *p, int64_t i, float v) { p[i] = cvt(v); }
};

template <> struct lk_elem<LK_F16> : lk_elem16<lk_elem<LK_F16> > {
    typedef uint16_t T;
    /* f16 -> f32 is exact (cvt.f32.f16) */
    static __device__ __forceinline__ float load_bits(uint32_t h)
    {
        return __half2float(__ushort_as_half((unsigned short)h));
    }
    static __device__ __forceinline__ float load(const T *p, int64_t i) { return load_bits(p[i]); }
    /* cvt.rn.f16.f32 is the contract's RNE with subnormals on every non-NaN */
    static __device__ __forceinline__ T cvt(float v)
    {
        return lk_isnan(v) ? (T)LK_NAN_F16_BITS : __half_as_ushort(__float2half_rn(v));
    }
    static __device__ __forceinline__ void store(T *p, int64_t i, float v) { p[i] = cvt(v); }
};

/* Run-time dtype versions, for paths where a switch per element is cheap. */
static __device__ __forceinline__ float lk_load_any(const void *p, lk_dtype d, int64_t i)
{
    switch (d) {
    case LK_BF16:
        return lk_elem<LK_BF16>::load((const uint16_t *)p, i);
    case LK_F16:
        return lk_elem<LK_F16>::load((const uint16_t *)p, i);
    default:
        return lk_elem<LK_F32>::load((const float *)p, i);
    }
}

static __device__ __forceinline__ void lk_store_any(void *p, lk_dtype d, int64_t i, float v)
{
    switch (d) {
    case LK_BF16:
        lk_elem<LK_BF16>::store((uint16_t *)p, i, v);
        break;
    case LK_F16:
        lk_elem<LK_F16>::store((uint16_t *)p, i, v);
        break;
    default:
        lk_elem<LK_F32>::store((float *)p, i, v);
        break;
    }
}

/* Instantiate BODY once per float dtype with D bound to the dtype. */
#define LK_FLOAT_SWITCH(dt, D, ...)                                                          \
    do {                                                                                    \
        switch (dt) {                                                                       \
        case LK_BF16: {                                                                     \
            constexpr lk_dtype D = LK_BF16;                                                 \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        case LK_F16: {                                                                      \
            constexpr lk_dtype D = LK_F16;                                                  \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        default: {                                                                          \
            constexpr lk_dtype D = LK_F32;                                                  \
            __VA_ARGS__;                                                                    \
        } break;                                                                            \
        }                                                                                   \
    } while (0)

static inline size_t lk_dtype_bytes(lk_dtype d)
{
    return d == LK_F32 || d == LK_I32 ? 4 : d == LK_I64 ? 8 : d == LK_I8 || d == LK_T2 ? 1 : 2;
}

/* Row r of a tensor starts `align` bytes aligned for every r. */
static inline bool lk_rows_aligned(const lk_tensor &t, size_t align)
{
    size_t es = lk_dtype_bytes(t.dtype);
    return (uintptr_t)t.data % align == 0 && ((size_t)t.ld * es) % align == 0;
}

/* ------------------------------------------------------------ lane sums */

/* One leaf step of a lane: `lane + t` (sums) or `fma(t, t, lane)` (sums of
 * squares, numerics.md section 5). */
template <bool SQ> static __device__ __forceinline__ float lk_leaf(float lane, float t)
{
    return SQ ? __fmaf_rn(t, t, lane) : __fadd_rn(lane, t);
}

/* The butterfly over the 64 lanes of a warp (thread t: a = lane 2t,
 * b = lane 2t + 1): for s = 32 ... 1, lane[l] = lane[l] + lane[l + s].
 * Lanes l and l + s live in threads l / 2 and l / 2 + s / 2 for s >= 2,
 * in the same slot; s = 1 adds the two slots of thread 0.  The result is
 * valid in thread 0 only. */
static __device__ __forceinline__ float lk_butterfly(float a, float b)
{
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1) {
        a = __fadd_rn(a, __shfl_down_sync(LK_FULL_MASK, a, d));
        b = __fadd_rn(b, __shfl_down_sync(LK_FULL_MASK, b, d));
    }
    return __fadd_rn(a, b);
}

/* The partial of one chunk of `len` (1 <= len <= LK_CHUNK) terms starting at
 * term `base`, computed by the whole warp: term i of the chunk goes to lane
 * i mod 64, in ascending i, each lane from -0.  Src gives term(i) and
 * pair(i) = terms i, i + 1 for even i.  Valid in lane 0 of the warp. */
template <bool SQ, class Src>
static __device__ __forceinline__ float lk_warp_chunk(const Src &src, int64_t base, int len)
{
    const int t2 = 2 * (threadIdx.x & (LK_WARP - 1));
    float a = -0.0f, b = -0.0f;
    const int full = len & ~(LK_LANES - 1);
    int j = 0;
    constexpr int U = 8; /* pairs in flight per thread */
    for (; j + U * LK_LANES <= full; j += U * LK_LANES) {
        float2 v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            v[u] = src.pair(base + j + u * LK_LANES + t2);
#pragma unroll
        for (int u = 0; u < U; u++) {
            a = lk_leaf<SQ>(a, v[u].x);
            b = lk_leaf<SQ>(b, v[u].y);
        }
    }
    for (; j < full; j += LK_LANES) {
        float2 v = src.pair(base + j + t2);
        a = lk_leaf<SQ>(a, v.x);
        b = lk_leaf<SQ>(b, v.y);
    }
    if (full < len) {
        int i = full + t2;
        if (i < len)
            a = lk_leaf<SQ>(a, src(base + i));
        if (i + 1 < len)
            b = lk_leaf<SQ>(b, src(base + i + 1));
    }
    return lk_butterfly(a, b);
}

/* Terms read from an f32 array (shared or global memory, 8-byte aligned). */
struct lk_f32_src {
    const float *p;
    __device__ __forceinline__ float operator()(int64_t i) const { return p[i]; }
    __device__ __forceinline__ float2 pair(int64_t i) const
    {
        return *reinterpret_cast<const float2 *>(p + i);
    }
};

/* Terms f(x_i) of a row in global memory; VEC: pairs are read as one load
 * (the row start is aligned to two elements). */
template <lk_dtype D, bool VEC, class F> struct lk_row_src {
    typedef typename lk_elem<D>::T T;
    const T *p;
    F f;
    __device__ __forceinline__ float operator()(int64_t i) const
    {
        return f(lk_elem<D>::load(p, i));
    }
    __device__ __forceinline__ float2 pair(int64_t i) const
    {
        if (VEC) {
            float2 v = lk_elem<D>::load2(p, i);
            return make_float2(f(v.x), f(v.y));
        }
        return make_float2(f(lk_elem<D>::load(p, i)), f(lk_elem<D>::load(p, i + 1)));
    }
};

/* The same for a row read exactly once (evict-first loads). */
template <lk_dtype D, bool VEC, class F> struct lk_stream_src {
    typedef typename lk_elem<D>::T T;
    const T *p;
    F f;
    __device__ __forceinline__ float operator()(int64_t i) const
    {
        return f(lk_elem<D>::load(p, i));
    }
    __device__ __forceinline__ float2 pair(int64_t i) const
    {
        if (VEC) {
            float2 v = lk_elem<D>::load2s(p, i);
            return make_float2(f(v.x), f(v.y));
        }
        return make_float2(f(lk_elem<D>::load(p, i)), f(lk_elem<D>::load(p, i + 1)));
    }
};

struct lk_identity {
    __device__ __forceinline__ float operator()(float x) const { return x; }
};

/* ------------------------------------------------------ order-free ops */

/* Position in the total order NaN > +Inf > ... > +0 > -0 > ... > -Inf, as an
 * unsigned key (every NaN equal).  The largest key of a set is that of its
 * lk_maximum, in any order: an unsigned maximum (a warp's in one redux). */
static __device__ __forceinline__ uint32_t lk_order_key(float x)
{
    uint32_t u = __float_as_uint(x);
    if (lk_isnan(x))
        return 0xffffffffu;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* The value of a key, every NaN's the canonical NaN (lk_maximum's). */
static __device__ __forceinline__ float lk_order_key_value(uint32_t k)
{
    if (k == 0xffffffffu)
        return __uint_as_float(LK_NAN_F32_BITS);
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

static __device__ __forceinline__ float lk_warp_maximum(float v)
{
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
        v = lk_maximum(v, __shfl_xor_sync(LK_FULL_MASK, v, d));
    return v;
}

static __device__ __forceinline__ float lk_warp_minimum(float v)
{
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1)
        v = lk_minimum(v, __shfl_xor_sync(LK_FULL_MASK, v, d));
    return v;
}

/* --------------------------------------------------------- launching */

static inline unsigned lk_grid_cap(int64_t blocks, int64_t cap)
{
    return (unsigned)(blocks < 1 ? 1 : blocks < cap ? blocks : cap);
}

/* One op's stay on the device: the queue's device is current from the
 * constructor to the destructor, and launched() turns the launch status
 * into the op's.
 *     lk_op_scope op(queue, "lk_unary");
 *     if (!op.ok()) return op.status();
 *     lk_launch(kernel, grid, block, 0, op.stream(), ...);
 *     return op.launched();
 * (lk_launch: launch.cuh; the kernel calls lk_pdl_wait() first) */
struct lk_op_scope {
    lk_cuda_queue *q;
    lk_cuda_scope sc;
    lk_status entered;
    const char *what;
    lk_pdl_scope pdl; /* lk_launch of this op uses the device's PDL setting */
    lk_op_scope(void *queue, const char *w)
        : q((lk_cuda_queue *)queue), what(w), pdl(((lk_cuda_queue *)queue)->dev->pdl)
    {
        entered = lk_cuda_enter(q->dev, &sc);
    }
    ~lk_op_scope()
    {
        if (entered == LK_OK)
            lk_cuda_leave(&sc);
    }
    lk_op_scope(const lk_op_scope &) = delete;
    lk_op_scope &operator=(const lk_op_scope &) = delete;
    bool ok() const { return entered == LK_OK; }
    lk_status status() const { return entered; }
    cudaStream_t stream() const { return q->stream; }
    lk_status launched() { return lk_cuda_launched(q, what); }
    /* a message and a status for a failure found by the launcher itself */
    lk_status fail(lk_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)))
    {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        q->dev->host->set_error("%s", msg);
        return st;
    }
};

#endif
