# LK_PEERS: what `lockstep bench` compares against.  Nothing is linked: the
# bench loads OpenBLAS (libopenblas.so.0) and the ternary peers that
# scripts/get-peers.sh builds at run time, so configure only records
# whether to try OpenBLAS at all.
AC_DEFUN([LK_PEERS], [
  AC_DEFINE([LK_HAVE_BENCH], [1], [Define when bench/ (lockstep bench) is built])
  AC_ARG_WITH([openblas],
    [AS_HELP_STRING([--without-openblas], [do not compare with OpenBLAS in lockstep bench (by default it is loaded at run time where installed)])],
    [], [with_openblas=check])
  lk_peer_summary="streaming loops, ternary kernels from scripts/get-peers.sh (at run time)"
  AS_IF([test "x$with_openblas" = xno], [
    AC_DEFINE([LK_BENCH_NO_OPENBLAS], [1], [Define to keep lockstep bench from loading OpenBLAS])
  ], [
    lk_peer_summary="$lk_peer_summary, OpenBLAS (libopenblas.so.0 at run time)"
  ])
])
