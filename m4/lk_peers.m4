# LK_PEERS: the libraries `lockstep bench` compares against (optional).
AC_DEFUN([LK_PEERS], [
  AC_DEFINE([LK_HAVE_BENCH], [1], [Define when bench/ (lockstep bench) is built])
  AC_ARG_WITH([openblas],
    [AS_HELP_STRING([--without-openblas], [do not compare with OpenBLAS in lockstep bench])],
    [], [with_openblas=check])
  lk_peer_summary="streaming loops"
  OPENBLAS_CFLAGS=""
  OPENBLAS_LIBS=""
  AS_IF([test "x$with_openblas" != xno], [
    PKG_CHECK_MODULES([OPENBLAS], [openblas], [
      AC_DEFINE([LK_HAVE_OPENBLAS], [1], [Define if lockstep bench can compare with OpenBLAS])
      lk_peer_summary="$lk_peer_summary, OpenBLAS"], [
      AS_IF([test "x$with_openblas" = xyes], [AC_MSG_ERROR([OpenBLAS not found (apt-get install libopenblas-dev)])])])
  ])
  AC_SUBST([OPENBLAS_CFLAGS])
  AC_SUBST([OPENBLAS_LIBS])
])
