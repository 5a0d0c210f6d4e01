# LK_CUDA: --with-cuda[=DIR] builds the CUDA driver module when nvcc is found.
# Filled in by the CUDA driver (backends/cuda).
AC_DEFUN([LK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA driver module with the toolkit in DIR])],
    [], [with_cuda=no])
  lk_have_cuda=no
  AM_CONDITIONAL([LK_HAVE_CUDA], [test "x$lk_have_cuda" = xyes])
])
