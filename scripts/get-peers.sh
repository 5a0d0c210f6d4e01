#!/bin/sh
# Lockstep: fetch and build the ternary peers that `lockstep bench` compares
# lk_ternary_gemm with, outside the source tree.  Nothing of theirs is in
# Lockstep's tree or in the lockstep binary: the bench finds these libraries
# at run time (dlopen) in the same directory.
#
#   llama.cpp's TQ2_0 kernel: ggml's CPU library, built from the llama.cpp
#       that the PyPI package llama-cpp-python vendors (its source
#       distribution, pinned below), shared, CPU only.  With it, llama.cpp's
#       own library (libllama) and lockstep-llama-logits, a small driver
#       (tests/peers/llama_logits.c) that prints a model's logits, and the
#       vocabulary-only GGUF files with their test vectors
#       (models/ggml-vocab-*), for tests/test_llama_fidelity.c and
#       tests/test_tokenizer_vectors.c.  On x86 it is built
#       for AVX2 (+FMA, F16C, BMI2), the kernel the bench compares with; on
#       ARM for the baseline with NEON.  --native builds it for this CPU
#       instead (-march=native: on AVX-512 or dot-product hosts, their
#       kernels).
#   bitnet.cpp's I2_S kernel: no package ships it; give a checkout of
#       https://github.com/microsoft/BitNet (with its submodules) as
#       --bitnet-src DIR or BITNET_SRC=DIR and its ggml is built the same
#       way.  Without one it is skipped, and said so.
#
# Usage: scripts/get-peers.sh [--dir DIR] [--bitnet-src DIR] [--native]
#                             [--jobs N] [--force]
#   --dir DIR   where to put them (default: $LOCKSTEP_PEERS_DIR, else
#               ~/.cache/lockstep/peers); `lockstep bench` looks in the
#               same place, so set LOCKSTEP_PEERS_DIR for both.
#   --force     rebuild even when the same version is already there
# Needs: python3 with pip, cmake, a C and C++ compiler, network to PyPI.
# Running it again does nothing for what is already built.
set -eu

LLAMA_CPP_PYTHON_VERSION=0.3.36 # vendors llama.cpp 0c1e570, ggml 0.25.3

DIR="${LOCKSTEP_PEERS_DIR:-$HOME/.cache/lockstep/peers}"
BITNET="${BITNET_SRC:-}"
NATIVE=""
FORCE=""
JOBS=$(nproc 2>/dev/null || echo 2)
while [ $# -gt 0 ]; do
    case $1 in
    --dir) DIR=$2; shift 2 ;;
    --bitnet-src) BITNET=$2; shift 2 ;;
    --native) NATIVE=1; shift ;;
    --jobs) JOBS=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "get-peers: unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done

die() { echo "get-peers: $*" >&2; exit 1; }
for tool in python3 cmake cc c++; do
    command -v $tool >/dev/null 2>&1 || die "$tool not found (scripts/deps.sh installs the build tools; cmake: apt-get install cmake)"
done
python3 -m pip --version >/dev/null 2>&1 || die "python3 -m pip not found (apt-get install python3-pip)"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

# The flags of ggml's CPU library: a fixed ISA unless --native.
arch=$(uname -m)
if [ -n "$NATIVE" ]; then
    variant=native
    isa_flags="-DGGML_NATIVE=ON"
else
    case $arch in
    x86_64 | amd64 | i?86)
        variant=avx2
        isa_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF" ;;
    aarch64 | arm64)
        variant=neon
        isa_flags="-DGGML_NATIVE=OFF" ;;
    *)
        variant=generic
        isa_flags="-DGGML_NATIVE=OFF" ;;
    esac
fi
# Shared, CPU only, no tests or examples; the libraries find each other next
# to themselves ($ORIGIN), wherever the directory is moved.
common_flags="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_BACKEND_DL=OFF
 -DGGML_CPU=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENCL=OFF
 -DGGML_BLAS=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_CCACHE=OFF
 -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_RPATH=\$ORIGIN -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON"

# ---- llama.cpp (TQ2_0) ----
want="llama-cpp-python $LLAMA_CPP_PYTHON_VERSION $variant +llama +vocab"
dest="$DIR/llama.cpp"
driver="$(cd "$(dirname "$0")/.." && pwd)/tests/peers/llama_logits.c"
[ -f "$driver" ] || die "no $driver (run this script from a Lockstep source tree)"
if [ -z "$FORCE" ] && [ -f "$dest/BUILT" ] && [ "$(cat "$dest/BUILT")" = "$want" ] &&
    [ -f "$dest/lib/libllama.so" ] && [ -f "$dest/include/llama.h" ]; then
    echo "get-peers: llama.cpp: already built ($want) in $dest"
else
    src="$DIR/src"
    sdist="$src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
    mkdir -p "$src"
    if [ ! -f "$sdist" ]; then
        echo "get-peers: downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (source) from PyPI"
        python3 -m pip download --disable-pip-version-check --no-deps --no-binary :all: \
            "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$src.part" >"$src/pip.log" 2>&1 ||
            { rm -rf "$src.part"; false; } ||
            die "could not download llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION from PyPI (no network, or a proxy pip is not configured for?); pip said: $(tail -n 3 "$src/pip.log" | tr '\n' ' ')"
        mv "$src.part/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" "$sdist"
        rm -rf "$src.part"
    fi
    tree="$src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
    if [ ! -f "$tree/vendor/llama.cpp/ggml/CMakeLists.txt" ]; then
        rm -rf "$tree"
        tar -xzf "$sdist" -C "$src" || die "could not unpack $sdist (remove it and run again)"
        [ -f "$tree/vendor/llama.cpp/ggml/CMakeLists.txt" ] ||
            die "$sdist holds no vendor/llama.cpp/ggml: not the source distribution this script knows"
    fi
    build="$DIR/build/llama.cpp-$variant"
    # the same flags every time: an earlier build of this variant is reused
    [ -z "$FORCE" ] || rm -rf "$build"
    rm -rf "$dest"
    mkdir -p "$DIR/build"
    echo "get-peers: building ggml's CPU library and libllama ($variant) from $tree/vendor/llama.cpp"
    # From llama.cpp's top level (the sdist leaves out what ggml's own needs
    # when built alone), ggml's libraries and libllama only.
    log="$DIR/build/llama.cpp-$variant.log"
    # shellcheck disable=SC2086 # the flag lists split on purpose
    cmake -S "$tree/vendor/llama.cpp" -B "$build" $common_flags $isa_flags \
        -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
        -DLLAMA_CURL=OFF >"$log" 2>&1 &&
        cmake --build "$build" -j "$JOBS" --target ggml-cpu llama >>"$log" 2>&1 ||
        die "building ggml failed: see $log"
    mkdir -p "$dest/lib" "$dest/bin" "$dest/vocab"
    find "$build" \( -name 'libggml*.so*' -o -name 'libllama.so*' \) \( -type f -o -type l \) \
        -exec cp -P {} "$dest/lib/" \;
    [ -f "$dest/lib/libggml-cpu.so" ] || die "no libggml-cpu.so in $dest/lib after the build"
    [ -f "$dest/lib/libllama.so" ] || die "no libllama.so in $dest/lib after the build"
    lt="$tree/vendor/llama.cpp"
    cp "$lt"/models/ggml-vocab-*.gguf* "$dest/vocab/" 2>/dev/null ||
        die "$tree has no models/ggml-vocab-*.gguf"
    cp "$lt/LICENSE" "$dest/LICENSE"
    mkdir -p "$dest/include"
    cp "$lt"/include/llama*.h "$lt"/ggml/include/*.h "$dest/include/"
    echo "$want" >"$dest/BUILT"
    echo "get-peers: llama.cpp: built ($want)"
fi

# The logits driver, compiled again whenever its source is newer.
if [ ! -x "$dest/bin/lockstep-llama-logits" ] ||
    [ -n "$(find "$driver" -newer "$dest/bin/lockstep-llama-logits")" ]; then
    mkdir -p "$dest/bin"
    # shellcheck disable=SC2016 # $ORIGIN is for the dynamic linker
    cc -O2 -I"$dest/include" "$driver" -L"$dest/lib" -lllama -lggml -lggml-base \
        -Wl,-rpath,'$ORIGIN/../lib' -o "$dest/bin/lockstep-llama-logits" ||
        die "compiling $driver against libllama failed"
    echo "get-peers: compiled $dest/bin/lockstep-llama-logits"
fi

# ---- bitnet.cpp (I2_S) ----
bdest="$DIR/bitnet"
bitnet_status=""
if [ -z "$BITNET" ]; then
    if [ -e "$bdest/lib/libbitnet-peer.so" ]; then
        bitnet_status="kept the one built before in $bdest"
    else
        bitnet_status="skipped: no package ships bitnet.cpp's I2_S kernel; clone https://github.com/microsoft/BitNet with --recursive and run this script with --bitnet-src DIR (or BITNET_SRC=DIR)"
    fi
else
    [ -f "$BITNET/src/ggml-bitnet-mad.cpp" ] ||
        die "$BITNET is not a bitnet.cpp checkout (no src/ggml-bitnet-mad.cpp)"
    [ -f "$BITNET/3rdparty/llama.cpp/ggml/CMakeLists.txt" ] ||
        die "$BITNET/3rdparty/llama.cpp is empty: git -C $BITNET submodule update --init --recursive"
    BITNET=$(cd "$BITNET" && pwd)
    rev=$(git -C "$BITNET" rev-parse --short HEAD 2>/dev/null || echo unknown)
    bwant="bitnet.cpp $rev $variant"
    if [ -z "$FORCE" ] && [ -f "$bdest/BUILT" ] && [ "$(cat "$bdest/BUILT")" = "$bwant" ] &&
        [ -e "$bdest/lib/libbitnet-peer.so" ]; then
        bitnet_status="already built ($bwant) in $bdest"
    else
        bbuild="$DIR/build/bitnet-$variant"
        rm -rf "$bbuild" "$bdest"
        mkdir -p "$bdest/lib" "$DIR/build"
        echo "get-peers: building bitnet.cpp's ggml ($variant, I2_S only) from $BITNET"
        # bitnet.cpp's own CMakeLists adds its kernels to the ggml it vendors;
        # the lookup-table kernels (TL1/TL2) are not compared, so left off.
        # shellcheck disable=SC2086
        cmake -S "$BITNET" -B "$bbuild" $common_flags $isa_flags -DBITNET_X86_TL2=OFF \
            -DBITNET_ARM_TL1=OFF -DBITNET_BUILD_TESTS=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=OFF >"$DIR/build/bitnet-$variant.log" 2>&1 &&
            cmake --build "$bbuild" -j "$JOBS" --target ggml >>"$DIR/build/bitnet-$variant.log" 2>&1 ||
            die "building bitnet.cpp failed: see $DIR/build/bitnet-$variant.log"
        find "$bbuild" -name 'lib*.so*' \( -type f -o -type l \) -exec cp -P {} "$bdest/lib/" \;
        lib=""
        for f in "$bdest"/lib/lib*.so; do
            if nm -D --defined-only "$f" 2>/dev/null | grep -q ' ggml_vec_dot_i2_i8_s$'; then
                lib=$f
                break
            fi
        done
        [ -n "$lib" ] || die "no library built from $BITNET exports ggml_vec_dot_i2_i8_s"
        ln -sf "$(basename "$lib")" "$bdest/lib/libbitnet-peer.so"
        echo "$bwant" >"$bdest/BUILT"
        bitnet_status="built ($bwant) in $bdest"
    fi
fi

echo
echo "get-peers: in $DIR:"
echo "  llama.cpp TQ2_0: $dest/lib/libggml-cpu.so ($(cat "$dest/BUILT"))"
echo "  llama.cpp logits: $dest/bin/lockstep-llama-logits; vocabularies: $dest/vocab"
echo "  bitnet.cpp I2_S: $bitnet_status"
if [ "$DIR" != "$(cd "${LOCKSTEP_PEERS_DIR:-$HOME/.cache/lockstep/peers}" 2>/dev/null && pwd)" ]; then
    echo "  lockstep bench looks there with: export LOCKSTEP_PEERS_DIR=$DIR"
fi
echo "  see them: lockstep bench --case ternary.6912x2560.m1.tq2_0 --case ternary.6912x2560.m1.i2_s"
