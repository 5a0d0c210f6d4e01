/* Lockstep: the floating-point environment guard (numerics.md, 2).
 *
 * Every public entry point and every worker task runs
 *     lk_fpenv saved; lk_fpenv_enter(&saved); ...; lk_fpenv_leave(&saved);
 * so a caller's FTZ/DAZ or rounding mode cannot change a bit, and the
 * caller gets its own state back.  Inline so workers pay two register
 * moves. */
#ifndef LK_NUMERICS_FPENV_H
#define LK_NUMERICS_FPENV_H

#include <stdint.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
typedef struct lk_fpenv { unsigned int mxcsr; } lk_fpenv;
#define LK_FPENV_CANONICAL 0x1F80u /* all exceptions masked, RNE, no FTZ/DAZ */
/* MXCSR holds the sticky exception flags too: the caller's register is
 * restored whole, so flags our arithmetic raises never reach the caller
 * (and the caller's own flags are kept). */
static inline void lk_fpenv_enter(lk_fpenv *saved)
{
    saved->mxcsr = _mm_getcsr();
    _mm_setcsr(LK_FPENV_CANONICAL);
}
static inline void lk_fpenv_leave(const lk_fpenv *saved)
{
    _mm_setcsr(saved->mxcsr);
}
#elif defined(__aarch64__)
/* FPCR holds the controls, FPSR the sticky flags: both come back whole. */
typedef struct lk_fpenv { uint64_t fpcr, fpsr; } lk_fpenv;
static inline void lk_fpenv_enter(lk_fpenv *saved)
{
    uint64_t c, s;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    __asm__ __volatile__("mrs %0, fpsr" : "=r"(s));
    saved->fpcr = c;
    saved->fpsr = s;
    /* FPCR = 0: RMode RNE, FZ = FZ16 = AH = FIZ = DN = AHP = 0 (no flush,
     * IEEE half precision), no trap enabled.  AH/FIZ (FEAT_AFP) and FZ16
     * are RES0 where not implemented, so 0 is right on every core. */
    if (c != 0)
        __asm__ __volatile__("msr fpcr, %0" : : "r"((uint64_t)0));
}
static inline void lk_fpenv_leave(const lk_fpenv *saved)
{
    uint64_t c;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(c));
    if (c != saved->fpcr)
        __asm__ __volatile__("msr fpcr, %0" : : "r"(saved->fpcr));
    __asm__ __volatile__("msr fpsr, %0" : : "r"(saved->fpsr));
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

/* `return expr;` with expr evaluated inside the guard: the body of a public
 * entry point that only forwards to its unguarded twin. */
#define LK_FP_GUARDED_RETURN(expr)                                                 \
    do {                                                                           \
        lk_fpenv fe_;                                                              \
        lk_fpenv_enter(&fe_);                                                      \
        lk_status st_ = (expr);                                                    \
        lk_fpenv_leave(&fe_);                                                      \
        return st_;                                                                \
    } while (0)

#endif
