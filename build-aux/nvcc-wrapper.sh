#! /bin/sh
# nvcc-wrapper.sh NVCC [ARGS...]
#
# Lets libtool compile CUDA sources: `libtool --mode=compile` appends the
# host compiler's PIC flags (-fPIC -DPIC) to the command line it is given,
# and nvcc only takes host flags through -Xcompiler.  -D, -I, -c and -o are
# nvcc's own and pass unchanged, as do nvcc options that merely look like
# gcc's (-fmad=false, -ftz=false).  Used by backends/cuda/local.mk.

if test $# -lt 1; then
  echo "usage: $0 NVCC [ARGS...]" >&2
  exit 2
fi
nvcc=$1
shift

# Rebuild the argument list in place: append the translated arguments,
# then drop the originals.
count=$#
for arg
do
  case $arg in
    -fPIC|-fpic|-fPIE|-fpie|-fno-common|-pthread)
      set -- "$@" "-Xcompiler=$arg" ;;
    *)
      set -- "$@" "$arg" ;;
  esac
done
shift $count

exec "$nvcc" "$@"
