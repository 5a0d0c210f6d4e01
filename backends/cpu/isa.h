/* Lockstep CPU driver: which instruction sets this CPU and its OS support
 * (internal).  Detected once, from CPUID and XGETBV (the OS must save the
 * YMM/ZMM/opmask state, or the instructions fault), or on AArch64 from
 * getauxval(AT_HWCAP), never /proc/cpuinfo. */
#ifndef LK_CPU_ISA_H
#define LK_CPU_ISA_H

typedef enum lk_cpu_isa {
    LK_CPU_ISA_REF = 0,         /* the threaded reference: every CPU */
    LK_CPU_ISA_AVX2 = 1,        /* AVX2 + FMA + F16C */
    LK_CPU_ISA_AVX_VNNI = 2,    /* the above + AVX-VNNI (vpdpbusd on YMM) */
    LK_CPU_ISA_AVX512_VNNI = 3, /* AVX-512 F/BW/VL/VNNI + FMA + F16C */
    LK_CPU_ISA_NEON = 4,        /* AArch64 Advanced SIMD */
    LK_CPU_ISA_NEON_DOTPROD = 5, /* the above + DotProd (sdot) */
    LK_CPU_ISA_COUNT_
} lk_cpu_isa;

/* Bit (1u << isa) is set for every ISA the CPU and the OS support
 * natively; LK_CPU_ISA_REF always. */
unsigned lk_cpu_isa_supported(void);

/* "ref", "avx2", "avx-vnni", "avx512-vnni", "neon", "neon-dotprod": the
 * device-name suffix and
 * the LOCKSTEP_CPU_ISA value. */
const char *lk_cpu_isa_name(lk_cpu_isa isa);

/* 1 where streaming kernels should prefetch ahead in software, on top of
 * the hardware prefetchers; set by lk_cpu_isa_supported().  Measured: on
 * Intel Xeon it took the ternary GEMV from memory from 0.65 to 0.90 of the
 * streaming read; on AMD Zen 4 the same prefetches slowed the AVX-512
 * stream to half (docs/internals/cpu-kernels.md), so only Intel gets them. */
extern int lk_cpu_prefetch;

/* The CPU's brand string ("AMD EPYC 9B14"), "" when unknown. */
const char *lk_cpu_brand(void);

#endif
