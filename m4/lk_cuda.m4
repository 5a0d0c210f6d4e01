# LK_CUDA: --with-cuda[=DIR] builds the CUDA driver module lockstep-cuda.so.
#
# nvcc is looked for in DIR/bin, else on PATH, else in /usr/local/cuda/bin.
# liblockstep itself never links CUDA: only the module (and its test and
# benchmark programs) get CUDA_CFLAGS/CUDA_LIBS.  NVCCFLAGS carries what the
# numerical contract needs (docs/numerics.md section 1): no contraction, no
# flush to zero, IEEE division and square root.  The user may add flags with
# NVCCFLAGS=... (kept after ours) and choose the architectures with
# CUDA_ARCH_FLAGS=... (default: sm_80, sm_86, sm_89, sm_90a -- sm_90 where
# nvcc lacks it -- and compute_90 PTX).
AC_DEFUN([LK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA driver module with the toolkit in DIR (default: nvcc on PATH, then /usr/local/cuda)])],
    [], [with_cuda=no])
  AC_ARG_VAR([NVCC], [CUDA compiler driver (found from --with-cuda)])
  AC_ARG_VAR([NVCCFLAGS], [extra flags for nvcc, added after Lockstep's])
  AC_ARG_VAR([CUDA_ARCH_FLAGS], [nvcc -gencode flags (default: sm_80, sm_86, sm_89, sm_90a (sm_90 if nvcc lacks it) and compute_90 PTX)])
  lk_have_cuda=no
  lk_have_cublas=no
  CUDA_CFLAGS=""
  CUDA_LIBS=""
  CUBLAS_LIBS=""
  LK_NVCCFLAGS=""
  AS_IF([test "x$with_cuda" != xno], [
    lk_cuda_dir=""
    AS_CASE(["$with_cuda"], [yes], [], [lk_cuda_dir=$with_cuda])
    AS_IF([test "x$NVCC" = x], [
      AS_IF([test "x$lk_cuda_dir" != x],
        [AS_IF([test -x "$lk_cuda_dir/bin/nvcc"], [NVCC="$lk_cuda_dir/bin/nvcc"])],
        [AC_PATH_PROG([NVCC], [nvcc], [], [$PATH$PATH_SEPARATOR/usr/local/cuda/bin])])
    ])
    AS_IF([test "x$NVCC" = x || test ! -x "$NVCC"],
      [AC_MSG_ERROR([--with-cuda: nvcc not found (looked in ${lk_cuda_dir:-PATH and /usr/local/cuda}/bin).
  Give the toolkit's directory: --with-cuda=/usr/local/cuda, or set NVCC.])])
    AS_IF([test "x$lk_cuda_dir" = x], [
      lk_nvcc_bin=`AS_DIRNAME(["$NVCC"])`
      lk_cuda_dir=`AS_DIRNAME(["$lk_nvcc_bin"])`
    ])
    AC_MSG_CHECKING([for the CUDA toolkit version])
    lk_cuda_version=`"$NVCC" --version 2>/dev/null | sed -n 's/.*release \([[0-9]][[0-9]]*\.[[0-9]][[0-9]]*\).*/\1/p'`
    AC_MSG_RESULT([${lk_cuda_version:-unknown} in $lk_cuda_dir])
    lk_cuda_major=`echo "$lk_cuda_version" | cut -d. -f1`
    AS_IF([test "x$lk_cuda_major" = x || test "$lk_cuda_major" -lt 11],
      [AC_MSG_ERROR([--with-cuda: CUDA 11.8 or newer is needed (sm_80..sm_90), found '$lk_cuda_version'])])

    CUDA_CFLAGS="-I$lk_cuda_dir/include"
    lk_cuda_libdir=""
    for lk_d in "$lk_cuda_dir/lib64" "$lk_cuda_dir/targets/x86_64-linux/lib" \
                "$lk_cuda_dir/targets/sbsa-linux/lib" "$lk_cuda_dir/lib"; do
      AS_IF([test -z "$lk_cuda_libdir" && test -f "$lk_d/libcudart.so"], [lk_cuda_libdir=$lk_d])
    done
    AS_IF([test "x$lk_cuda_libdir" = x],
      [AC_MSG_ERROR([--with-cuda: libcudart.so not found under $lk_cuda_dir])])
    CUDA_LIBS="-L$lk_cuda_libdir -lcudart"

    lk_save_CPPFLAGS=$CPPFLAGS
    lk_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"
    LIBS="$CUDA_LIBS $LIBS"
    AC_MSG_CHECKING([whether a C program links with the CUDA runtime])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
                                    [[int n = 0; return (int)cudaGetDeviceCount(&n);]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       AC_MSG_ERROR([--with-cuda: cannot link with $CUDA_LIBS (see config.log)])])
    AS_IF([test -f "$lk_cuda_libdir/libcublas.so"], [
      LIBS="-L$lk_cuda_libdir -lcublas $LIBS"
      AC_MSG_CHECKING([whether cuBLAS links (for the CUDA benchmark)])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cublas_v2.h>]],
                                      [[cublasHandle_t h; return (int)cublasCreate(&h);]])],
        [lk_have_cublas=yes; CUBLAS_LIBS="-L$lk_cuda_libdir -lcublas"], [])
      AC_MSG_RESULT([$lk_have_cublas])
    ])
    CPPFLAGS=$lk_save_CPPFLAGS
    LIBS=$lk_save_LIBS

    # The contract's flags.  -Xcompiler=A,B (not "-Xcompiler A", which libtool
    # would take for its own option) passes the host compiler's.
    LK_NVCCFLAGS="-std=c++17 -O3 -fmad=false -ftz=false -prec-div=true -prec-sqrt=true"
    # No C++ runtime: the module links with the C compiler, without libstdc++
    # (no exceptions; the launch stubs' local statics need no guards).
    LK_NVCCFLAGS="$LK_NVCCFLAGS -Xcompiler=-fvisibility=hidden,-ffp-contract=off,-fno-exceptions,-fno-threadsafe-statics"
    AS_IF([test "x$CUDA_ARCH_FLAGS" = x], [
      CUDA_ARCH_FLAGS="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86"
      CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_89,code=sm_89"
      # Hopper as sm_90a where nvcc has it: the wgmma kernels
      # (backends/cuda/tc/wgmma_*.cu) exist only there; plain sm_90 otherwise
      AC_MSG_CHECKING([whether $NVCC builds sm_90a code])
      echo '__global__ void lk_conftest(void) {}' > conftest.cu
      AS_IF([$NVCC -gencode arch=compute_90a,code=sm_90a -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes])
         CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_90a,code=sm_90a"],
        [AC_MSG_RESULT([no])
         CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_90,code=sm_90"])
      rm -f conftest.cu conftest.$OBJEXT
      CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_90,code=compute_90"
    ])
    # Hopper code without sm_90a has no wgmma kernels: the tensor-core tier
    # and the int8 / ternary GEMMs then run on mma.sync, several times slower
    AS_CASE([" $CUDA_ARCH_FLAGS "],
      [*sm_90a*|*compute_90a*], [],
      [*sm_90*|*compute_90*],
      [AC_MSG_WARN([CUDA_ARCH_FLAGS build sm_90 without sm_90a: Hopper GPUs will run the tensor-core kernels on mma.sync instead of wgmma (several times slower); add -gencode arch=compute_90a,code=sm_90a])])
    AC_MSG_CHECKING([whether $NVCC compiles with the contract's flags])
    cat > conftest.cu <<'EOF'
__global__ void lk_conftest(float *p) { p@<:@threadIdx.x@:>@ = __fmaf_rn(p@<:@0@:>@, p@<:@1@:>@, p@<:@2@:>@); }
int main(void) { return 0; }
EOF
    AS_IF([$NVCC $LK_NVCCFLAGS $CUDA_ARCH_FLAGS $NVCCFLAGS -c conftest.cu -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no])
       rm -f conftest.cu conftest.$OBJEXT
       AC_MSG_ERROR([--with-cuda: $NVCC failed on a test kernel with $LK_NVCCFLAGS $CUDA_ARCH_FLAGS $NVCCFLAGS (see config.log)])])
    rm -f conftest.cu conftest.$OBJEXT
    lk_have_cuda="yes (CUDA $lk_cuda_version)"
    AC_DEFINE([LK_HAVE_CUDA], [1], [Define if the CUDA driver module is built])
  ])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([CUBLAS_LIBS])
  AC_SUBST([LK_NVCCFLAGS])
  AM_CONDITIONAL([LK_HAVE_CUDA], [test "x$lk_have_cuda" != xno])
  AM_CONDITIONAL([LK_HAVE_CUBLAS], [test "x$lk_have_cublas" = xyes])
])
