/* Lockstep core: the floating-point environment guard (numerics.md, 2).
 *
 * Every public entry point and every worker task runs
 *     lk_fpenv saved; lk_fpenv_enter(&saved); ...; lk_fpenv_leave(&saved);
 * so a caller's FTZ/DAZ or rounding mode cannot change a bit, and the
 * caller gets its own state back.  Inline so workers pay two register
 * moves. */
#ifndef LK_CORE_FPENV_H
#define LK_CORE_FPENV_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef struct lk_fpenv { unsigned int mxcsr; } lk_fpenv;
#define LK_FPENV_CANONICAL 0x1F80u /* all exceptions masked, RNE, no FTZ/DAZ */
static inline void lk_fpenv_enter(lk_fpenv *saved)
{
    saved->mxcsr = _mm_getcsr();
    if (saved->mxcsr != LK_FPENV_CANONICAL)
        _mm_setcsr(LK_FPENV_CANONICAL);
}
static inline void lk_fpenv_leave(const lk_fpenv *saved)
{
    if (saved->mxcsr != LK_FPENV_CANONICAL)
        _mm_setcsr(saved->mxcsr);
}
#elif defined(__aarch64__)
typedef struct lk_fpenv { uint64_t fpcr; } lk_fpenv;
static inline void lk_fpenv_enter(lk_fpenv *saved)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
    saved->fpcr = v;
    if (v != 0) /* RNE, FZ = FZ16 = AH = FIZ = DN = 0 */
        __asm__ __volatile__("msr fpcr, %0" : : "r"((uint64_t)0));
}
static inline void lk_fpenv_leave(const lk_fpenv *saved)
{
    if (saved->fpcr != 0)
        __asm__ __volatile__("msr fpcr, %0" : : "r"(saved->fpcr));
}
#else
#include <fenv.h>
typedef struct lk_fpenv { fenv_t env; } lk_fpenv;
static inline void lk_fpenv_enter(lk_fpenv *saved)
{
    fegetenv(&saved->env);
    fesetenv(FE_DFL_ENV);
}
static inline void lk_fpenv_leave(const lk_fpenv *saved) { fesetenv(&saved->env); }
#endif

#endif
