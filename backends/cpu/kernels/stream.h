/* Lockstep CPU kernels: non-temporal stores for outputs that outgrow the
 * cache.  An output of at least LK_STREAM_BYTES goes past the last-level
 * cache (32 MiB on the Zen 4 build machine) and is not read back soon, so
 * the read for ownership of a normal store is memory traffic for nothing:
 * a third of a norm's or softmax's traffic on 4096^2 rows, and the copy
 * loop they are measured against (glibc's memcpy) streams too.  Whole
 * aligned f32 vectors only; the caller ends its share with
 * vf_stream_end() before the team's end publishes y.  SIMDe and NEON
 * builds store normally (LK_STREAM_ALIGN 0).  The values are the same
 * either way: only where they are cached differs. */
#ifndef LK_CPU_KERNELS_STREAM_H
#define LK_CPU_KERNELS_STREAM_H

#include <stdint.h>

#include "backends/cpu/kernels/elem.h"

#define LK_STREAM_BYTES ((int64_t)32 << 20)

#if !defined(LK_SIMDE) && defined(__AVX512F__)
#define LK_STREAM_ALIGN 64
LK_INLINE void vf_stream(float *p, vf v) { _mm512_stream_ps(p, v); }
LK_INLINE void vf_stream_end(void) { _mm_sfence(); }
#elif !defined(LK_SIMDE) && defined(__AVX__)
#define LK_STREAM_ALIGN 32
LK_INLINE void vf_stream(float *p, vf v) { _mm256_stream_ps(p, v); }
LK_INLINE void vf_stream_end(void) { _mm_sfence(); }
#else
#define LK_STREAM_ALIGN 0
LK_INLINE void vf_stream(float *p, vf v) { vf_store(p, v); }
LK_INLINE void vf_stream_end(void) {}
#endif

/* Whether an f32 output of rows x ld is streamed at all. */
LK_INLINE int lk_stream_output(lk_dtype dt, int64_t rows, int64_t ld)
{
    return LK_STREAM_ALIGN > 0 && dt == LK_F32 && rows * ld * (int64_t)sizeof(float) >= LK_STREAM_BYTES;
}

/* Whether the row at p may take vf_stream (its vectors aligned for it). */
LK_INLINE int lk_stream_row(int stream, const void *p)
{
    return stream && (uintptr_t)p % (LK_STREAM_ALIGN > 0 ? LK_STREAM_ALIGN : 1) == 0;
}

#endif
