#!/bin/sh
# scripts/bench-report.sh (`make bench-report`) end to end (TAP), on saved
# JSON and on stand-ins for `lockstep` and `lockstep-cuda-bench`, so that no
# benchmark runs: the page has a section per device with its floors, the
# four plots are PNG files (the GPU's ratios apart from the CPU's), a CUDA
# device runs the CUDA bench (cuda:N through its --device) and never
# `lockstep bench`, a peer that was not there is a skip row with its
# reason, the report goes to bench-report/ in the current directory unless
# told otherwise, and the failures say what is wrong: no gnuplot, no CUDA
# bench, no results.  Everything is written under a scratch directory.
#
# Run from the build directory (as `make check` does); srcdir is the
# source tree (automake sets it).
set -u
LC_ALL=C
export LC_ALL
# absolute: some checks run it from another directory
report=$(cd "${srcdir:-.}" && pwd)/scripts/bench-report.sh

echo "1..22"
if [ ! -f "$report" ]; then
    echo "Bail out! no $report (srcdir=${srcdir:-unset})"
    exit 1
fi
. "${srcdir:-.}/tests/tap.sh"
tap_tmp bench-report

# png FILE: FILE starts with the PNG signature
png() { [ -s "$1" ] && [ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = 89504e470d0a1a0a ]; }

# Saved runs: a CPU device as `lockstep bench --json` prints it (a
# bandwidth-bound case, a compute-bound one, a compute-bound case timed
# against a read floor, and a case whose peer was not there) and a GPU as
# `lockstep-cuda-bench --json` does.
mkdir "$tmp/json"
cat >"$tmp/json/cpu_avx2.json" <<'EOF'
{"device": "cpu:avx2", "description": "Test CPU, avx2 kernels", "threads": 2, "reps": 5, "openblas": true, "cases": [
  {"name": "gemm.f32.512", "lockstep_ms": 0.6214, "peer": "openblas sgemm", "peer_ms": 0.3669, "ratio": 0.590, "gflops": 431.95, "gbps": 0.00},
  {"name": "ternary.2560x2560.m1.tq2_0", "lockstep_ms": 0.0124, "peer": "llama.cpp TQ2_0", "peer_ms": 0.0130, "ratio": 1.048, "gflops": 0.00, "gbps": 132.10},
  {"name": "ternary.640x2560.m128", "lockstep_ms": 0.8080, "peer": "read floor (same bytes)", "peer_ms": 0.0040, "ratio": 0.005, "gflops": 519.20, "gbps": 0.00},
  {"name": "ternary.2560x2560.m1.i2_s", "peer": "bitnet.cpp I2_S", "skipped": "bitnet.cpp I2_S: not found in /peers; run scripts/get-peers.sh"},
  {"name": "broken.case", "error": "unsupported"}
]}
EOF
cat >"$tmp/json/cuda_0.json" <<'EOF'
{"device": "cuda:0", "description": "Test GPU, sm_90, 132 SMs", "threads": 0, "reps": 11, "copy_gbps": 4145.7, "peak_gflops": 66908.2, "cases": [
  {"name": "gemm.f32.4096x4096x4096", "lockstep_ms": 3.10173, "peer": "cuBLAS SGEMM (no TF32)", "peer_ms": 2.68186, "ratio": 0.865, "gflops": 44310.45, "gbps": 0.00},
  {"name": "ternary.gemv.6912x2560.prep", "lockstep_ms": 0.00249, "peer": "cuBLAS bf16 GEMV (same)", "peer_ms": 0.00890, "ratio": 3.570, "gflops": 0.00, "gbps": 1774.50}
]}
EOF

if command -v gnuplot >/dev/null 2>&1; then
    sh "$report" -j "$tmp/json" -o "$tmp/out" >"$tmp/r1.out" 2>&1
    ok $? "saved JSON of a CPU and a GPU plot (-j)"
    page=$tmp/out/index.md
    has "$page" "## cpu:avx2" && has "$page" "Test CPU, avx2 kernels, 2 threads."
    ok $? "the CPU device's section names its threads"
    has "$page" "## cuda:0" && has "$page" "Test GPU, sm_90, 132 SMs." &&
        has "$page" "Device-to-device copy: 4145.7 GB/s (read + write); FP32 peak: 66908.2 GFLOP/s."
    ok $? "the GPU's section names its copy rate and FP32 peak"
    has "$page" "| ternary.gemv.6912x2560.prep | 2.49 us | cuBLAS bf16 GEMV (same) | 8.90 us | 3.57 | 1774.5 GB/s |"
    ok $? "a GPU case's row, its times in us"
    has "$page" "| gemm.f32.4096x4096x4096 | 3.102 ms | cuBLAS SGEMM (no TF32) | 2.682 ms | 0.86 | 44310.4 GFLOP/s |"
    ok $? "a case over 1 ms in ms"
    ! has "$page" "broken.case"
    ok $? "a case that failed is not in the tables"
    has "$page" "| ternary.2560x2560.m1.i2_s | - | skip: bitnet.cpp I2_S: not found in /peers; run scripts/get-peers.sh | - | - | - |"
    ok $? "a case whose peer was not there is a skip row with the reason"
    png "$tmp/out/ratio.png" && png "$tmp/out/ratio-gpu.png" &&
        png "$tmp/out/compute.png" && png "$tmp/out/bandwidth.png"
    ok $? "ratio.png, ratio-gpu.png, compute.png and bandwidth.png are PNG files"
    has "$page" "(ratio.png)" && has "$page" "(ratio-gpu.png)" && has "$page" "(compute.png)" &&
        has "$page" "(bandwidth.png)"
    ok $? "the page shows the four plots"
    [ -f "$tmp/out/cpu_avx2.json" ] && [ -f "$tmp/out/cuda_0.json" ]
    ok $? "the JSON of each device is kept beside the page"

    # a CPU-only run has no GPU ratio plot
    mkdir "$tmp/cpuonly" && cp "$tmp/json/cpu_avx2.json" "$tmp/cpuonly/"
    sh "$report" -j "$tmp/cpuonly" -o "$tmp/out2" >"$tmp/r2.out" 2>&1 &&
        png "$tmp/out2/ratio.png" && [ ! -f "$tmp/out2/ratio-gpu.png" ] &&
        ! has "$tmp/out2/index.md" "ratio-gpu.png"
    ok $? "without a GPU there is no ratio-gpu.png and the page does not show one"

    # (without gnuplot, -j stops before it looks: check 18)
    mkdir "$tmp/empty"
    sh "$report" -j "$tmp/empty" -o "$tmp/out3" >"$tmp/r3.out" 2>&1
    st=$?
    [ $st -eq 1 ] && has "$tmp/r3.out" "no results to plot"
    ok $? "no JSON: exit 1, \"no results to plot\""
else
    for d in "saved JSON plots" "CPU section" "GPU section" "GPU row" "ms row" "failed case" \
        "skip row" "PNG files" "page shows plots" "JSON kept" "CPU only" "no JSON"; do
        skip "$d" "no gnuplot on this machine"
    done
fi

# Stand-ins: `lockstep bench` and `lockstep-cuda-bench` print saved JSON and
# log how they were called.
cat >"$tmp/lockstep" <<EOF
#!/bin/sh
echo "lockstep \$*" >>"$tmp/calls"
case \$1 in
--version) echo "lockstep (stand-in)" ;;
bench) cat "$tmp/json/cpu_avx2.json" ;;
*) exit 2 ;;
esac
EOF
# The CUDA stand-in names the device it was given, as lockstep-cuda-bench
# --device does.  The script must leave CUDA_VISIBLE_DEVICES as it finds
# it: unset here, whatever the environment running the test holds.
unset CUDA_VISIBLE_DEVICES
cat >"$tmp/cudabench" <<EOF
#!/bin/sh
echo "cudabench \$* CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES:-unset}" >>"$tmp/calls"
echo "the text goes to stderr" >&2
dev=cuda:0
while [ \$# -gt 0 ]; do
    [ "\$1" = --device ] && dev=\$2
    shift
done
sed "1s/\"device\": \"cuda:0\"/\"device\": \"\$dev\"/" "$tmp/json/cuda_0.json"
EOF
chmod +x "$tmp/lockstep" "$tmp/cudabench"

: >"$tmp/calls"
sh "$report" -l "$tmp/lockstep" -c "$tmp/cudabench" -d "cpu:avx2 cuda:0 cuda:1" -f "--quick" \
    -o "$tmp/out4" >"$tmp/r4.out" 2>&1
st=$?
if command -v gnuplot >/dev/null 2>&1; then
    ok $st "benchmarking a CPU and two GPUs through the stand-ins"
else
    skip "benchmarking through the stand-ins" "no gnuplot on this machine"
fi
has "$tmp/calls" "lockstep bench --device cpu:avx2 --json --quick"
ok $? "a CPU device runs lockstep bench --json with the flags"
has "$tmp/calls" "cudabench --json --quick --device cuda:0 CUDA_VISIBLE_DEVICES=unset" &&
    has "$tmp/calls" "cudabench --json --quick --device cuda:1 CUDA_VISIBLE_DEVICES=unset" &&
    ! has "$tmp/calls" "lockstep bench --device cuda"
ok $? "cuda:0 and cuda:1 run the CUDA bench with --device (CUDA_VISIBLE_DEVICES untouched), never lockstep bench"
has "$tmp/out4/cuda_1.json" '{"device": "cuda:1"' && has "$tmp/out4/index.md" "## cuda:1"
ok $? "cuda:1's JSON and section carry its name"
! has "$tmp/out4/cuda_0.json" "the text goes to stderr"
ok $? "the CUDA bench's text stays out of its JSON"

# Without -o the report goes to bench-report/ in the current directory (the
# build tree under make), and without -c the CUDA bench is looked for where
# a build puts it: bench/cuda/, else backends/cuda/.
mkdir -p "$tmp/build/bench/cuda"
(cd "$tmp/build" && sh "$report" -l "$tmp/lockstep" -d "cpu:avx2" >"$tmp/r8.out" 2>&1)
[ -f "$tmp/build/bench-report/index.md" ] && [ -f "$tmp/build/bench-report/cpu_avx2.json" ]
ok $? "without -o the page and JSON go to ./bench-report/"
cp "$tmp/cudabench" "$tmp/build/bench/cuda/lockstep-cuda-bench"
: >"$tmp/calls"
(cd "$tmp/build" && sh "$report" -l "$tmp/lockstep" -d "cuda:0" -o "$tmp/out9" >"$tmp/r9.out" 2>&1)
has "$tmp/calls" "cudabench --json --device cuda:0" && [ -f "$tmp/out9/cuda_0.json" ]
ok $? "without -c the CUDA bench is found in bench/cuda/"

sh "$report" -l "$tmp/lockstep" -c "$tmp/nowhere" -d "cuda:0" -o "$tmp/out5" >"$tmp/r5.out" 2>&1
st=$?
[ $st -eq 1 ] && has "$tmp/r5.out" "skipping cuda:0: no lockstep-cuda-bench"
ok $? "no CUDA bench: cuda:0 is skipped with a reason, exit 1"

# No gnuplot: a PATH with the tools the script needs but not gnuplot.
mkdir "$tmp/bin"
for t in sh awk sed grep cat cp rm mv mkdir mktemp tr cut wc date uname getconf head tail od; do
    p=$(command -v "$t" 2>/dev/null) && ln -s "$p" "$tmp/bin/$t"
done
PATH=$tmp/bin sh "$report" -j "$tmp/json" -o "$tmp/out6" >"$tmp/r6.out" 2>&1
st=$?
[ $st -eq 1 ] && has "$tmp/r6.out" "gnuplot not found"
ok $? "no gnuplot and -j: exit 1, \"gnuplot not found\""
PATH=$tmp/bin sh "$report" -l "$tmp/lockstep" -c "$tmp/cudabench" -d "cpu:avx2 cuda:0" \
    -o "$tmp/out7" >"$tmp/r7.out" 2>&1
st=$?
[ $st -eq 1 ] && has "$tmp/r7.out" "no plots" && [ -f "$tmp/out7/cpu_avx2.json" ] &&
    [ -f "$tmp/out7/cuda_0.json" ] && has "$tmp/out7/index.md" "## cuda:0" &&
    [ ! -f "$tmp/out7/ratio.png" ] && ! has "$tmp/out7/index.md" ".png"
ok $? "no gnuplot: the benchmarks run, JSON and tables written, no plots, exit 1"
