# LK_COMPILER_FLAGS: warnings, the numeric flags of the contract, visibility.
#
# The user's CFLAGS are honoured; what the contract needs goes into
# LK_CFLAGS (added to AM_CFLAGS), so a user cannot lose it by setting CFLAGS.

# LK_TRY_CFLAG(FLAG, VAR): append FLAG to VAR when the compiler accepts it.
AC_DEFUN([LK_TRY_CFLAG], [
  AS_VAR_PUSHDEF([lk_cv], [lk_cv_cflag_$1])
  AC_CACHE_CHECK([whether $CC accepts $1], [lk_cv], [
    lk_save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $1"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])], [AS_VAR_SET([lk_cv], [yes])],
                      [AS_VAR_SET([lk_cv], [no])])
    CFLAGS=$lk_save_CFLAGS])
  AS_VAR_IF([lk_cv], [yes], [$2="$$2 $1"])
  AS_VAR_POPDEF([lk_cv])
])

AC_DEFUN([LK_COMPILER_FLAGS], [
  AC_REQUIRE([AC_PROG_CC])
  LK_CFLAGS=""
  # The contract: no contraction of a*b+c into fma behind our back.
  LK_TRY_CFLAG([-ffp-contract=off], [LK_CFLAGS])
  AS_CASE([" $LK_CFLAGS "], [*" -ffp-contract=off "*], [],
    [AC_MSG_ERROR([$CC does not accept -ffp-contract=off, which the numerical contract needs])])
  LK_TRY_CFLAG([-fno-math-errno], [LK_CFLAGS])
  LK_TRY_CFLAG([-fvisibility=hidden], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wall], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wextra], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wshadow], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wstrict-prototypes], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wmissing-prototypes], [LK_CFLAGS])
  LK_TRY_CFLAG([-Wno-unused-parameter], [LK_CFLAGS])
  AC_ARG_ENABLE([werror],
    [AS_HELP_STRING([--enable-werror], [turn warnings into errors])],
    [], [enable_werror=no])
  AS_IF([test "x$enable_werror" = xyes], [LK_CFLAGS="$LK_CFLAGS -Werror"])
  # -ffast-math in the user's CFLAGS is refused here and again at compile
  # time by numerics/contract.h.
  AS_CASE([" $CFLAGS "], [*" -ffast-math "*|*" -Ofast "*],
    [AC_MSG_ERROR([CFLAGS contains -ffast-math/-Ofast: Lockstep's bit-exact contract cannot hold under it])])
  AC_SUBST([LK_CFLAGS])
])
