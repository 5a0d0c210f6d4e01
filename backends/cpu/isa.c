/* Lockstep CPU driver: ISA detection from CPUID and XGETBV (x86), or
 * getauxval(AT_HWCAP) (AArch64).
 *
 * A feature counts only when the OS has enabled its register state in
 * XCR0 (YMM for AVX2, opmask and both ZMM halves for AVX-512): a CPU that
 * has AVX-512 under an OS or hypervisor that does not save ZMM would fault
 * on the first instruction. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <string.h>

#include "backends/cpu/isa.h"

#if !defined(__x86_64__) && !defined(__i386__)
int lk_cpu_prefetch;
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static char lk_brand[49];

int lk_cpu_prefetch;

static unsigned long long lk_xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static unsigned lk_x86_detect(void)
{
    unsigned a, b, c, d, max;
    unsigned isas = 1u << LK_CPU_ISA_REF;

    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        unsigned *w = (unsigned *)(void *)lk_brand;
        for (unsigned leaf = 0; leaf < 3; leaf++, w += 4)
            __get_cpuid(0x80000002u + leaf, &w[0], &w[1], &w[2], &w[3]);
    }
    max = __get_cpuid_max(0, NULL);
    __cpuid(0, a, b, c, d);
    lk_cpu_prefetch = b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu; /* GenuineIntel */
    if (max < 7 || !__get_cpuid(1, &a, &b, &c, &d))
        return isas;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    int f16c = (c >> 29) & 1;
    if (!osxsave || !avx)
        return isas;
    unsigned long long xcr0 = lk_xgetbv0();
    int os_ymm = (xcr0 & 0x6) == 0x6;           /* SSE and AVX state */
    int os_zmm = (xcr0 & 0xe6) == 0xe6;         /* + opmask, ZMM_Hi256, Hi16_ZMM */

    __cpuid_count(7, 0, a, b, c, d);
    unsigned leaf7_max = a;
    int avx2 = (b >> 5) & 1;
    int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    int avx512vnni = (c >> 11) & 1;
    int avxvnni = 0;
    if (leaf7_max >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        avxvnni = (a >> 4) & 1;
    }
    int base = os_ymm && avx2 && fma && f16c;
    if (base)
        isas |= 1u << LK_CPU_ISA_AVX2;
    if (base && avxvnni)
        isas |= 1u << LK_CPU_ISA_AVX_VNNI;
    if (base && os_zmm && avx512f && avx512bw && avx512vl && avx512vnni)
        isas |= 1u << LK_CPU_ISA_AVX512_VNNI;
    return isas;
}
#endif

#if defined(__aarch64__)
#include <sys/auxv.h>
/* The kernel's HWCAP bits (asm/hwcap.h), spelled out for C libraries
 * whose headers lack them. */
#define LK_HWCAP_FP (1ul << 0)
#define LK_HWCAP_ASIMD (1ul << 1)
#define LK_HWCAP_ASIMDDP (1ul << 20)

/* Advanced SIMD with its FP (both are in every Linux AArch64 system, but
 * the kernel says so), and DotProd where the CPU has it. */
static unsigned lk_arm_detect(void)
{
    unsigned isas = 1u << LK_CPU_ISA_REF;
    unsigned long hw = getauxval(AT_HWCAP);
    if ((hw & LK_HWCAP_FP) && (hw & LK_HWCAP_ASIMD)) {
        isas |= 1u << LK_CPU_ISA_NEON;
        if (hw & LK_HWCAP_ASIMDDP)
            isas |= 1u << LK_CPU_ISA_NEON_DOTPROD;
    }
    return isas;
}
#endif

static unsigned lk_isas;
static pthread_once_t lk_isa_once = PTHREAD_ONCE_INIT;

static void lk_isa_detect(void)
{
#if defined(__x86_64__) || defined(__i386__)
    lk_isas = lk_x86_detect();
#elif defined(__aarch64__)
    lk_isas = lk_arm_detect();
#else
    lk_isas = 1u << LK_CPU_ISA_REF;
#endif
}

unsigned lk_cpu_isa_supported(void)
{
    pthread_once(&lk_isa_once, lk_isa_detect);
    return lk_isas;
}

const char *lk_cpu_isa_name(lk_cpu_isa isa)
{
    static const char *const names[LK_CPU_ISA_COUNT_] = {"ref",         "avx2", "avx-vnni",
                                                         "avx512-vnni", "neon", "neon-dotprod"};
    return (unsigned)isa < LK_CPU_ISA_COUNT_ ? names[isa] : "?";
}

const char *lk_cpu_brand(void)
{
    lk_cpu_isa_supported();
#if defined(__x86_64__) || defined(__i386__)
    /* trim the leading blanks some vendors put in */
    const char *s = lk_brand;
    while (*s == ' ')
        s++;
    return s;
#else
    return "";
#endif
}
