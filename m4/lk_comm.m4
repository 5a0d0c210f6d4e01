# LK_COMM: --with-mpi and --with-nccl, the communicator's transports
# (include/lockstep/comm.h).  Both are off by default: liblockstep then
# links neither, and lk_comm_create_mpi says it was built without MPI.
#
# --with-mpi[=DIR]: MPI's C flags from pkg-config (mpi-c, ompi-c), else
# from `mpicc --showme`, else DIR/include and DIR/lib with -lmpi.  MPI_CFLAGS
# and MPI_LIBS may be given instead.  liblockstep links MPI.
#
# --with-nccl[=DIR]: the NCCL transport for GPU tensors (needs --with-mpi,
# which bootstraps it, and the CUDA runtime: --with-cuda's toolkit, or
# DIR).  nccl.h is looked for in DIR/include, the CUDA toolkit's include
# and /usr/include; libnccl in DIR/lib, DIR/lib64, the toolkit's lib
# directories and the system's.  liblockstep then links NCCL and the
# CUDA runtime.
AC_DEFUN([LK_COMM], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@], [build the communicator on MPI (lk_comm_create_mpi; default: no)])],
    [], [with_mpi=no])
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@], [move GPU tensors of the communicator with NCCL (needs --with-mpi; default: no)])],
    [], [with_nccl=no])
  AC_ARG_VAR([MPI_CFLAGS], [C compiler flags for MPI (default: pkg-config mpi-c or mpicc --showme)])
  AC_ARG_VAR([MPI_LIBS], [linker flags for MPI])
  AC_ARG_VAR([MPIRUN], [the MPI launcher the tests use (default: mpirun on PATH)])
  lk_have_mpi=no
  lk_have_nccl=no
  NCCL_CFLAGS=""
  NCCL_LIBS=""
  AS_IF([test "x$with_mpi" != xno], [
    AS_IF([test "x$MPI_CFLAGS$MPI_LIBS" = x], [
      AS_CASE(["$with_mpi"],
        [yes], [
          AS_IF([test "x$PKG_CONFIG" = x], [AC_PATH_PROG([PKG_CONFIG], [pkg-config])])
          for lk_p in mpi-c ompi-c mpich; do
            AS_IF([test "x$MPI_LIBS" = x && test "x$PKG_CONFIG" != x && $PKG_CONFIG --exists $lk_p 2>/dev/null], [
              MPI_CFLAGS=`$PKG_CONFIG --cflags $lk_p`
              MPI_LIBS=`$PKG_CONFIG --libs $lk_p`
            ])
          done
          AS_IF([test "x$MPI_LIBS" = x], [
            AC_PATH_PROG([LK_MPICC], [mpicc])
            AS_IF([test "x$LK_MPICC" != x], [
              MPI_CFLAGS=`$LK_MPICC --showme:compile 2>/dev/null`
              MPI_LIBS=`$LK_MPICC --showme:link 2>/dev/null`
            ])
          ])],
        [MPI_CFLAGS="-I$with_mpi/include"; MPI_LIBS="-L$with_mpi/lib -lmpi"])
    ])
    lk_save_CPPFLAGS=$CPPFLAGS
    lk_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
    LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether a C program links with MPI])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                                    [[int p; return MPI_Init_thread(0, 0, MPI_THREAD_FUNNELED, &p);]])],
      [AC_MSG_RESULT([yes]); lk_have_mpi=yes],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--with-mpi: no MPI found (tried pkg-config mpi-c/ompi-c, mpicc --showme; flags '$MPI_CFLAGS' '$MPI_LIBS').
  On Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev; or give MPI_CFLAGS and MPI_LIBS.])])
    CPPFLAGS=$lk_save_CPPFLAGS
    LIBS=$lk_save_LIBS
    AC_DEFINE([LK_HAVE_MPI], [1], [Define to build the communicator on MPI.])
    AS_IF([test "x$MPIRUN" = x], [AC_PATH_PROG([MPIRUN], [mpirun])])
  ])
  AS_IF([test "x$with_nccl" != xno], [
    AS_IF([test "x$lk_have_mpi" != xyes],
      [AC_MSG_ERROR([--with-nccl needs --with-mpi (MPI starts the ranks and hands out NCCL's id)])])
    lk_nccl_dirs=""
    AS_CASE(["$with_nccl"], [yes], [], [lk_nccl_dirs="$with_nccl"])
    AS_IF([test "x$lk_cuda_dir" != x], [lk_nccl_dirs="$lk_nccl_dirs $lk_cuda_dir"])
    lk_nccl_dirs="$lk_nccl_dirs /usr/local/cuda /usr"
    lk_nccl_inc=""
    lk_nccl_lib=""
    for lk_d in $lk_nccl_dirs; do
      AS_IF([test -z "$lk_nccl_inc" && test -f "$lk_d/include/nccl.h"], [lk_nccl_inc="$lk_d/include"])
      for lk_l in "$lk_d/lib64" "$lk_d/lib" "$lk_d/targets/x86_64-linux/lib" "$lk_d/lib/x86_64-linux-gnu" \
                  "$lk_d/targets/sbsa-linux/lib" "$lk_d/lib/aarch64-linux-gnu"; do
        AS_IF([test -z "$lk_nccl_lib" && test -f "$lk_l/libnccl.so"], [lk_nccl_lib="$lk_l"])
      done
    done
    # the CUDA runtime: the toolkit's (with --with-cuda), else next to NCCL
    lk_cudart_lib=""
    for lk_l in "$lk_cuda_libdir" $lk_nccl_dirs; do
      for lk_s in "" /lib64 /lib /targets/x86_64-linux/lib /targets/sbsa-linux/lib; do
        AS_IF([test -z "$lk_cudart_lib" && test -n "$lk_l" && test -f "$lk_l$lk_s/libcudart.so"],
              [lk_cudart_lib="$lk_l$lk_s"])
      done
    done
    lk_cudart_inc=""
    for lk_d in $lk_nccl_dirs; do
      AS_IF([test -z "$lk_cudart_inc" && test -f "$lk_d/include/cuda_runtime_api.h"], [lk_cudart_inc="$lk_d/include"])
    done
    AS_IF([test -z "$lk_nccl_inc" || test -z "$lk_nccl_lib" || test -z "$lk_cudart_lib" || test -z "$lk_cudart_inc"],
      [AC_MSG_ERROR([--with-nccl: nccl.h (${lk_nccl_inc:-not found}), libnccl.so (${lk_nccl_lib:-not found}),
  libcudart.so (${lk_cudart_lib:-not found}) and cuda_runtime_api.h (${lk_cudart_inc:-not found}) are needed
  (searched $lk_nccl_dirs); give --with-nccl=DIR or --with-cuda=DIR.])])
    NCCL_CFLAGS="-I$lk_nccl_inc"
    AS_IF([test "$lk_cudart_inc" != "$lk_nccl_inc"], [NCCL_CFLAGS="$NCCL_CFLAGS -I$lk_cudart_inc"])
    NCCL_LIBS="-L$lk_nccl_lib -lnccl"
    AS_IF([test "$lk_cudart_lib" != "$lk_nccl_lib"], [NCCL_LIBS="$NCCL_LIBS -L$lk_cudart_lib"])
    NCCL_LIBS="$NCCL_LIBS -lcudart"
    lk_save_CPPFLAGS=$CPPFLAGS
    lk_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $NCCL_CFLAGS"
    LIBS="$NCCL_LIBS $LIBS"
    AC_MSG_CHECKING([whether a C program links with NCCL])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>
#include <cuda_runtime_api.h>]],
                                    [[int v = 0; cudaStream_t s = 0; (void)s; return (int)ncclGetVersion(&v);]])],
      [AC_MSG_RESULT([yes]); lk_have_nccl=yes],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--with-nccl: cannot link with $NCCL_LIBS (see config.log)])])
    CPPFLAGS=$lk_save_CPPFLAGS
    LIBS=$lk_save_LIBS
    AC_DEFINE([LK_HAVE_NCCL], [1], [Define to move GPU tensors of the communicator with NCCL.])
  ])
  AC_SUBST([MPI_CFLAGS])
  AC_SUBST([MPI_LIBS])
  AC_SUBST([NCCL_CFLAGS])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([LK_HAVE_MPI], [test "x$lk_have_mpi" = xyes])
  AM_CONDITIONAL([LK_HAVE_NCCL], [test "x$lk_have_nccl" = xyes])
])
