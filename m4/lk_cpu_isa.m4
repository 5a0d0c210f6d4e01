# LK_CPU_ISA: which per-ISA kernel sets the compiler can build.
# Each ISA is guarded by a check that compiles a real intrinsic with that
# ISA's flags (as libsodium does); the flags go on that ISA's files only.
# Filled in by the CPU driver (backends/cpu).
AC_DEFUN([LK_CPU_ISA], [
  lk_isa_summary="none (reference only)"
  AM_CONDITIONAL([LK_ISA_X86], [false])
  AM_CONDITIONAL([LK_ISA_ARM], [false])
])
