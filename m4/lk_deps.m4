# Dependencies: dlopen, thread-local storage, hwloc, OpenMP, SIMDe.

AC_DEFUN([LK_DLOPEN], [
  AC_SEARCH_LIBS([dlopen], [dl], [],
    [AC_MSG_ERROR([dlopen not found: Lockstep loads driver modules with it])])
  AC_SEARCH_LIBS([pthread_create], [pthread])
  AC_SEARCH_LIBS([sqrt], [m])
])

AC_DEFUN([LK_THREADS_TLS], [
  AC_MSG_CHECKING([for _Thread_local])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([static _Thread_local int x;], [x = 1; return x;])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([a C11 compiler with _Thread_local is required])])
])

# hwloc: topology (cores, NUMA, caches, PCI locality).  --without-hwloc
# gives a build for minimal systems that counts CPUs with sysconf.
AC_DEFUN([LK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--without-hwloc], [build without hwloc (no NUMA/PCI locality, no thread binding)])],
    [], [with_hwloc=yes])
  lk_have_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [lk_have_hwloc=yes],
      [AC_MSG_ERROR([hwloc >= 2.0 not found through pkg-config.
  On Debian/Ubuntu: apt-get install libhwloc-dev pkg-config
  Or configure --without-hwloc for a build without topology support.])])
    AC_DEFINE([LK_HAVE_HWLOC], [1], [Define if hwloc is used])
    LK_PC_REQUIRES_PRIVATE="hwloc"
  ])
  AC_SUBST([LK_PC_REQUIRES_PRIVATE])
  AM_CONDITIONAL([LK_HAVE_HWLOC], [test "x$lk_have_hwloc" = xyes])
])

AC_DEFUN([LK_OPENMP], [
  AC_OPENMP
  lk_have_openmp=no
  AS_IF([test "x$ac_cv_prog_c_openmp" != "x" && test "x$ac_cv_prog_c_openmp" != "xunsupported"],
    [lk_have_openmp=yes
     AC_DEFINE([LK_HAVE_OPENMP], [1], [Define if OpenMP is used])],
    [AS_IF([test "x$enable_openmp" != xno],
      [AC_MSG_WARN([OpenMP not found: the CPU driver will run on one thread])])])
  AM_CONDITIONAL([LK_HAVE_OPENMP], [test "x$lk_have_openmp" = xyes])
])

# SIMDe: the emulated ISA variants (--enable-emulated-isa) are built from
# the same kernel sources against SIMDe's portable intrinsics.
AC_DEFUN([LK_SIMDE], [
  AC_ARG_WITH([simde],
    [AS_HELP_STRING([--with-simde=DIR], [SIMDe headers are in DIR (DIR/simde/...)])],
    [], [with_simde=check])
  SIMDE_CPPFLAGS=""
  AS_CASE(["$with_simde"], [yes|no|check], [], [SIMDE_CPPFLAGS="-I$with_simde"])
  lk_have_simde=no
  AS_IF([test "x$with_simde" != xno], [
    lk_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $SIMDE_CPPFLAGS"
    AC_CHECK_HEADER([simde/x86/avx512.h], [lk_have_simde=yes])
    CPPFLAGS=$lk_save_CPPFLAGS
  ])
  AC_ARG_ENABLE([emulated-isa],
    [AS_HELP_STRING([--enable-emulated-isa], [also build every ISA variant against SIMDe, as cpu:<isa>@simde devices])],
    [], [enable_emulated_isa=no])
  AS_IF([test "x$enable_emulated_isa" = xyes && test "x$lk_have_simde" != xyes],
    [AC_MSG_ERROR([--enable-emulated-isa needs the SIMDe headers.
  On Debian/Ubuntu: apt-get install libsimde-dev, or --with-simde=DIR])])
  AS_IF([test "x$lk_have_simde" != xyes && test "x$with_simde" = xyes],
    [AC_MSG_ERROR([SIMDe headers not found (apt-get install libsimde-dev, or --with-simde=DIR)])])
  AS_IF([test "x$lk_have_simde" != xyes],
    [AC_MSG_NOTICE([SIMDe headers not found: emulated ISA variants unavailable (apt-get install libsimde-dev)])])
  AC_SUBST([SIMDE_CPPFLAGS])
  AM_CONDITIONAL([LK_EMULATED_ISA], [test "x$enable_emulated_isa" = xyes])
  AS_IF([test "x$enable_emulated_isa" = xyes],
    [AC_DEFINE([LK_EMULATED_ISA], [1], [Define to build the SIMDe-emulated ISA variants])])
])
