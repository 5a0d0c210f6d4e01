#! /bin/sh
# scripts/gpu-check.sh [STAGE...] -- build a `make dist` tarball with CUDA on
# the GPU test host and run everything that needs the GPU.
#
# Run from the repository root, where lockstep-*.tar.gz lies (made here by
# `make dist`; the GPU host needs neither libtool nor network: the tarball
# has configure and ltmain.sh).  Stages, in order (default: all of them):
#
#   build       unpack into $BUILD_ROOT, configure --with-cuda
#               --disable-dependency-tracking, make
#   check       make check (the contract test runs cuda:0 against ref)
#   lockcheck   lockstep check (every op on every device, bits compared)
#   memcheck    compute-sanitizer --tool memcheck on every test that runs on
#               the GPU (SANITIZE_TESTS), LOCKSTEP_CUDA_TEST_SMALL=1; fails on
#               any error or a test's failure (API errors not reported:
#               test_cuda provokes cudaMalloc out-of-memory on purpose)
#   racecheck   the same with --tool racecheck; fails on any hazard, error or
#               warning.  Each test's log goes to $OUT/TOOL/, its verdict,
#               seconds, count (errors or hazards) and summary line to
#               $OUT/TOOL.log, printed as a table; a test with a count
#               other than 0 prints a "FAIL:" line and fails the stage
#   sanitize-new  racecheck on $SANITIZE_NEW alone: the tensor-core tests
#               (in their small mode) and the contract test, about 3 to 6
#               minutes under racecheck on an H200 (build with the raised
#               wgmma stall limit, see ARCH)
#   memcheck-new  memcheck on $SANITIZE_NEW
#   bench       bench/cuda/lockstep-cuda-bench, then PyTorch's figures
#               for the same work when python3 has torch
#   tcbench     bench/cuda/lockstep-tc-bench (tensor-core tier vs cuBLAS)
#   cpubench    lockstep bench on the host's CPU devices (OpenBLAS, stream peers)
#   demo        lockstep demo (BitNet b1.58 shapes) on cuda:0, the CPU and ref:
#               identical logits hashes, tokens/s (DEMO_ARGS)
#   profile     Nsight Compute on a few kernels of lockstep-cuda-bench (ncu)
#   pdl         lockstep demo on cuda:0 alone, LOCKSTEP_CUDA_PDL=0 then 1, twice
#               each (PDL_DEMO_ARGS): what programmatic dependent launch gives
#   layers      lockstep demo on cuda:0 at 30 layers, the layers of a decode
#               step op by op and as one lk_bitnet_decode call (--layers-op),
#               twice each, beside the copy bandwidth and the decode target
#               (the weights streamed at 60 % of it; LAYERS_DEMO_ARGS,
#               LAYERS_REPS)
#   layerprof   Nsight Compute durations (ncu locks the clocks) of every kernel of
#               one decode step of a 1-layer demo model, eager (layerprof.log)
#   report      make bench-report: lockstep bench on the CPU devices and
#               lockstep-cuda-bench on cuda:0, the page, plots and JSON copied
#               to $OUT/bench-report (without gnuplot on the host, the JSON
#               and tables: plot them with scripts/bench-report.sh -j);
#               REPORT_DEVICES, REPORT_FLAGS, REPORT_TIMEOUT seconds
#               (default 560)
#
# Environment:
#   OUT         logs go there (default /tmp/out)
#   BUILD_ROOT  where the tarball is unpacked (default /tmp/lockstep-gpu-check);
#               an existing build of the same tarball is reused
#   JOBS        make -j (default: the number of CPUs)
#   CUDA_HOME   the toolkit (default: nvcc on PATH, else /usr/local/cuda)
#   ARCH        nvcc -gencode flags; default: only this GPU's architecture
#               (fast; sm_90a on compute capability 9.0, for the wgmma
#               kernels); ARCH=fat builds the shipped fat binary.  For racecheck
#               of the sm_90 tensor-core tests add -DWG_STALL_NS=900000000000ull
#               (the tool slows a wgmma pipeline wait past its 4 s trap)
#   BENCH_ARGS  extra arguments for the benchmark (e.g. --quick)
#   LOCKCHECK_ARGS  extra arguments for lockstep check (e.g. --full)
#   TIMEOUT     seconds per benchmark or demo run (default 270)
#   SANITIZE_TESTS  the tests memcheck and racecheck run, in order (default:
#               every test that runs on a CUDA device, $SANITIZE_ALL below;
#               sanitize-new and memcheck-new: $SANITIZE_NEW);
#               TEST:PART runs PART of it (LOCKSTEP_TC_TEST_ONLY=PART:
#               tests/test_tc_ternary:prepared)
#   SANITIZE_BUDGET  seconds a memcheck or racecheck stage may take (default
#               540): the tests it leaves are listed as not run and fail the
#               stage; run them in another call with SANITIZE_TESTS
#   SANITIZE_TIMEOUT  seconds per test under the sanitizer (default 540,
#               within the budget)
#
# The summary table is printed last; the exit status is the number of
# failed stages.

OUT=${OUT:-/tmp/out}
BUILD_ROOT=${BUILD_ROOT:-/tmp/lockstep-gpu-check}
JOBS=${JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 4)}
TIMEOUT=${TIMEOUT:-270}
STAGES=${*:-build check lockcheck memcheck racecheck bench tcbench cpubench}
mkdir -p "$OUT" "$BUILD_ROOT" || exit 1
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
FAILED=0
SRC_ROOT=$(pwd)

note() { printf '%s\n' "$*" | tee -a "$OUT/gpu-check.log"; }

# record STAGE STATUS SECONDS DETAIL
record() {
  printf '%-12s %-7s %6ss  %s\n' "$1" "$2" "$3" "$4" >> "$SUMMARY"
  case $2 in FAIL) FAILED=$((FAILED + 1)) ;; esac
}

now() { date +%s; }

# ------------------------------------------------------------ environment

if test -n "$CUDA_HOME"; then :
elif command -v nvcc >/dev/null 2>&1; then CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")")
else CUDA_HOME=/usr/local/cuda
fi
PATH=$CUDA_HOME/bin:$PATH
export PATH
SANITIZER=$CUDA_HOME/bin/compute-sanitizer
test -x "$SANITIZER" || SANITIZER=$(command -v compute-sanitizer 2>/dev/null)

{
  echo "== gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) stages: $STAGES"
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  "$CUDA_HOME/bin/nvcc" --version 2>&1 | tail -2
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

if test -z "$ARCH"; then
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  case $cc in
    # Hopper: sm_90a, where the wgmma kernels are (plain sm_90 runs the
    # tensor-core tier on mma.sync, several times slower)
    90) ARCH="-gencode arch=compute_90a,code=sm_90a" ;;
    [0-9][0-9]|[0-9][0-9][0-9]) ARCH="-gencode arch=compute_$cc,code=sm_$cc" ;;
    *) ARCH=fat ;;
  esac
fi

TARBALL=$(ls -t "$SRC_ROOT"/lockstep-*.tar.gz 2>/dev/null | head -1)
if test -z "$TARBALL"; then
  note "no lockstep-*.tar.gz in $SRC_ROOT (run make dist first)"
  record tarball FAIL 0 "no tarball"
  cat "$SUMMARY"
  exit 1
fi
NAME=$(basename "$TARBALL" .tar.gz)
B=$BUILD_ROOT/$NAME/_build
STAMP=$BUILD_ROOT/$NAME.stamp

# -------------------------------------------------------------- stages

stage_build() {
  t0=$(now)
  want="$(cksum < "$TARBALL") $ARCH"
  if test -f "$STAMP" && test "$(cat "$STAMP")" = "$want" && test -x "$B/tests/test_cuda"; then
    record build ok 0 "reused $B"
    return
  fi
  rm -rf "${BUILD_ROOT:?}/${NAME:?}" "$STAMP"
  ( cd "$BUILD_ROOT" && tar xzf "$TARBALL" ) > "$OUT/build.log" 2>&1 || {
    record build FAIL $(($(now) - t0)) "tar failed (build.log)"; return; }
  mkdir -p "$B"
  if test "$ARCH" = fat; then arch_arg=""; else arch_arg="CUDA_ARCH_FLAGS=$ARCH"; fi
  ( cd "$B" && ../configure --with-cuda="$CUDA_HOME" --disable-dependency-tracking \
      ${arch_arg:+"$arch_arg"} && make -j"$JOBS" && make -j"$JOBS" check TESTS= ) \
      >> "$OUT/build.log" 2>&1
  st=$?
  grep -E "warning:" "$OUT/build.log" > "$OUT/build-warnings.log"
  nwarn=$(wc -l < "$OUT/build-warnings.log" | tr -d ' ')
  if test $st -eq 0; then
    echo "$want" > "$STAMP"
    record build ok $(($(now) - t0)) "$nwarn warning lines; ARCH=$ARCH"
  else
    record build FAIL $(($(now) - t0)) "see build.log"
  fi
}

stage_check() {
  t0=$(now)
  ( cd "$B" && make -j"$JOBS" check ) > "$OUT/check.log" 2>&1
  st=$?
  # the logs of failed tests, and every failed line, in one file
  : > "$OUT/check-failures.txt"
  for t in "$B"/tests/*.trs; do
    test -f "$t" || continue
    if grep -q '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$t"; then
      l=${t%.trs}.log
      { echo "==== $(basename "$l")"; grep -E '^(not ok|Bail out|#)' "$l" | grep -v '^# \(seed\|SKIP\)' | head -60
        tail -15 "$l"; } >> "$OUT/check-failures.txt"
    fi
  done
  cp "$B/tests/test_contract.log" "$B/tests/test_cuda.log" "$B/tests/test_tc.log" "$OUT/" 2>/dev/null
  res=$(grep -E "^# (TOTAL|PASS|SKIP|FAIL|ERROR):" "$OUT/check.log" | tr -s ' ' | tr '\n' ' ')
  cuda_lines=$(grep -c "on cuda:0" "$B/tests/test_contract.log" 2>/dev/null)
  cuda_bad=$(grep -E "^not ok" "$B/tests/test_contract.log" 2>/dev/null | grep -c "cuda:0")
  if test $st -eq 0; then
    record check ok $(($(now) - t0)) "$res; contract: $cuda_lines cuda:0 lines, $cuda_bad not ok"
  else
    record check FAIL $(($(now) - t0)) "$res; contract cuda:0 not ok: $cuda_bad (check.log)"
  fi
}

stage_lockcheck() {
  t0=$(now)
  # shellcheck disable=SC2086 # LOCKCHECK_ARGS is a list of words
  ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" ./tools/lockstep info &&
    LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" ./tools/lockstep check $LOCKCHECK_ARGS ) \
      > "$OUT/lockstep-check.log" 2>&1
  st=$?
  last=$(tail -3 "$OUT/lockstep-check.log" | tr -s ' \n' ' ')
  if test $st -eq 0; then
    record lockcheck ok $(($(now) - t0)) "$last"
  else
    record lockcheck FAIL $(($(now) - t0)) "$last"
  fi
}

# Every test that runs on a CUDA device, the fused decode kernel's and the
# quick ones first; tests/test_tc_ternary in its four parts (the whole of it
# takes minutes under a sanitizer).  The stages set LOCKSTEP_CUDA_TEST_SMALL=1:
# the tests' small mode (fewer, smaller cases that still launch every kernel
# variant; each test says which mode it is in on a "# mode:" line).
SANITIZE_ALL="tests/test_bitnet tests/test_cuda tests/test_stream tests/test_graph
  tests/test_demo tests/test_glu tests/test_rmsnorm_quantize tests/test_norm_linear
  tests/test_softmax tests/test_model_ops tests/test_weights tests/test_api tests/test_hostile
  tests/test_invariance tests/test_tc tests/test_tc_ternary:ops tests/test_tc_ternary:extremes
  tests/test_tc_ternary:scales tests/test_tc_ternary:prepared tests/test_contract"
# The tests that timed out or were left out under racecheck before their
# small modes: sanitize-new and memcheck-new run these alone.
SANITIZE_NEW="tests/test_tc tests/test_tc_ternary:ops tests/test_tc_ternary:extremes
  tests/test_tc_ternary:scales tests/test_tc_ternary:prepared tests/test_contract"

# The count a sanitizer log's summary lines give: the first number after
# "SUMMARY:" on each ("ERROR SUMMARY: 2 errors", "RACECHECK SUMMARY: 3 hazards
# displayed (1 error, 2 warnings)"), summed; empty when there is none.
sanitize_count() { # LOG
  grep -E "(ERROR|RACECHECK) SUMMARY:" "$1" | sed 's/.*SUMMARY: *\([0-9][0-9]*\).*/\1/' |
    awk '/^[0-9]+$/ { n += $1; seen = 1 } END { if (seen) print n }'
}

sanitize() { # TOOL (memcheck or racecheck) [STAGE-NAME [TESTS]]
  t0=$(now)
  tool=$1
  stage=${2:-$1}
  list=${3:-${SANITIZE_TESTS:-$SANITIZE_ALL}}
  if test -z "$SANITIZER"; then
    record "$stage" SKIP 0 "compute-sanitizer not found"
    return
  fi
  # the line a clean run prints ("SUMMARY: 10 ..." does not match it); a
  # summary line with any count other than 0 (warnings too) fails the test
  case $tool in
    racecheck) clean='RACECHECK SUMMARY: 0 hazards' ;;
    *) clean='ERROR SUMMARY: 0 errors' ;;
  esac
  budget=${SANITIZE_BUDGET:-540}
  rm -rf "${OUT:?}/$stage"
  mkdir -p "$OUT/$stage"
  printf '%-42s %-18s %6s %6s  %s\n' test verdict time count "sanitizer summary" > "$OUT/$stage.log"
  ntests=0 bad="" notrun="" total=0
  case $tool in racecheck) what=hazards ;; *) what=errors ;; esac
  # shellcheck disable=SC2086 # the list is words
  for spec in $list; do
    t=${spec%%:*} part=""
    test "$t" = "$spec" || part=${spec#*:}
    name=$(basename "$t")${part:+-$part}
    left=$((budget - ($(now) - t0)))
    if test "$left" -lt 10; then
      notrun="$notrun $spec"
      continue
    fi
    lim=${SANITIZE_TIMEOUT:-540}
    test "$left" -lt "$lim" && lim=$left
    ntests=$((ntests + 1))
    log=$OUT/$stage/$name.log
    s0=$(now)
    if test -x "$B/$t"; then
      ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/tests/drivers/.libs:$B/backends/cuda/.libs" \
          LOCKSTEP_CUDA_TEST_SMALL=1 LOCKSTEP_TC_TEST_ONLY="$part" \
          timeout "$lim" ./libtool --mode=execute "$SANITIZER" --tool "$tool" \
          --report-api-errors no --error-exitcode 99 --print-limit "${SANITIZE_PRINT_LIMIT:-200}" \
          "$t" ) > "$log" 2>&1
      st=$?
    else
      echo "$B/$t: not built" > "$log"
      st=127
    fi
    summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | sed 's/^=* *//' | tr '\n' ';' | sed 's/;$//')
    count=$(sanitize_count "$log")
    notok=$(grep -c "^not ok" "$log")
    mode=$(grep -m1 "^# mode: " "$log" | sed 's/^# mode: \([a-z]*\).*/\1/')
    if test -n "$count" && test "$count" -ne 0; then verdict="$count $what"
    elif test $st -eq 124; then verdict="timed out (${lim}s)"
    elif test $st -eq 127; then verdict="not built"
    elif test $st -ne 0; then verdict="exit $st"
    elif ! grep -q "$clean" "$log"; then verdict="no clean summary"
    elif test "$notok" -ne 0; then verdict="$notok not ok"
    else verdict=ok
    fi
    test -n "$count" && total=$((total + count))
    printf '%-42s %-18s %5ss %6s  %s\n' "$spec${mode:+ ($mode)}" "$verdict" $(($(now) - s0)) \
        "${count:--}" "${summary:-no summary}" >> "$OUT/$stage.log"
    if test "$verdict" != ok; then
      bad="$bad $spec"
      note "FAIL: $stage: $spec: $verdict ($log)"
    fi
  done
  printf '%-42s %-18s %5ss %6s\n' "total ($ntests tests)" "" $(($(now) - t0)) "$total" \
      >> "$OUT/$stage.log"
  cat "$OUT/$stage.log"
  detail="$ntests tests run, $total $what ($OUT/$stage.log)"
  test -n "$bad" && detail="$detail; failed:$bad"
  test -n "$notrun" && detail="$detail; not run (budget ${budget}s):$notrun"
  if test -z "$bad" && test -z "$notrun"; then
    record "$stage" ok $(($(now) - t0)) "$detail, every one clean"
  else
    note "FAIL: $stage: $total $what;${bad:+ failed:$bad;}${notrun:+ not run:$notrun}"
    record "$stage" FAIL $(($(now) - t0)) "$detail"
  fi
}

stage_bench() {
  t0=$(now)
  # shellcheck disable=SC2086 # BENCH_ARGS is a list of words
  ( cd "$B" && ./bench/cuda/lockstep-cuda-bench $BENCH_ARGS ) > "$OUT/bench.log" 2>&1
  st=$?
  cat "$OUT/bench.log"
  if command -v python3 >/dev/null 2>&1 && python3 -c "import torch; assert torch.cuda.is_available()" \
      >/dev/null 2>&1; then
    python3 - > "$OUT/bench-torch.log" 2>&1 <<'PY'
import itertools, torch, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
# as lockstep-cuda-bench: calls rotate through buffer sets of >= 3 L2s
L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
def sets(nbytes): return 1 if nbytes >= 3 * L2 else min(128, 3 * L2 // nbytes + 1)
def med(f, n=11):
    f(); f(); torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    inner = 1
    while True:
        s.record()
        for _ in range(inner): f()
        e.record(); e.synchronize()
        ms = s.elapsed_time(e)
        if ms >= 2.0 or inner >= 16384: break
        inner *= int(2.0 / ms) + 1 if ms > 0.2 else 10
    t = []
    for _ in range(n):
        s.record()
        for _ in range(inner): f()
        e.record(); e.synchronize()
        t.append(1000.0 * s.elapsed_time(e) / inner)
    return sorted(t)[n // 2]
x = torch.randn(1 << 28, device="cuda")
print("torch sum f32 1x268435456 %.1f us" % med(lambda: x.sum()))
del x
for r, c in ((4096, 4096), (16384, 8192)):
    A = [torch.randn(r, c, device="cuda") for _ in range(sets(8 * r * c))]
    a = itertools.cycle(A); w = torch.randn(c, device="cuda"); b = torch.randn(c, device="cuda")
    if hasattr(F, "rms_norm"):
        print("torch rmsnorm f32 %dx%d %.1f us" % (r, c, med(lambda: F.rms_norm(next(a), (c,), w, 1e-6))))
    print("torch layernorm f32 %dx%d %.1f us" % (r, c, med(lambda: F.layer_norm(next(a), (c,), w, b, 1e-5))))
    print("torch softmax f32 %dx%d %.1f us" % (r, c, med(lambda: torch.softmax(next(a), -1))))
    del A, a
for n, k in ((6912, 2560), (2560, 6912), (2560, 2560), (128256, 2560)):
    Ws = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(sets(2 * n * k))]
    W = itertools.cycle(Ws); v = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
    print("torch gemv bf16 %dx%d %.1f us" % (n, k, med(lambda: F.linear(v, next(W)))))
    del Ws, W
PY
    cat "$OUT/bench-torch.log"
    ours=$(sed -n 's/^sum f32 1x268435456 *\([0-9.]*\) us.*/\1/p' "$OUT/bench.log")
    theirs=$(sed -n 's/^torch sum f32 1x268435456 \([0-9.]*\) us/\1/p' "$OUT/bench-torch.log")
    if test -n "$ours" && test -n "$theirs"; then
      awk -v a="$ours" -v b="$theirs" 'BEGIN { r = b / a; printf "target  %-58s %6.2f (goal >= 0.95)  %s\n", "sum f32 2^28 vs torch.sum", r, (r >= 0.95 ? "MET" : "MISSED") }' \
          | tee -a "$OUT/bench.log"
    fi
  else
    echo "(no PyTorch with CUDA in python3: torch figures skipped)" > "$OUT/bench-torch.log"
  fi
  missed=$(grep -c "MISSED" "$OUT/bench.log")
  met=$(grep -c " MET$" "$OUT/bench.log")
  if test $st -eq 0; then
    record bench ok $(($(now) - t0)) "targets met $met, missed $missed (bench.log)"
  else
    record bench FAIL $(($(now) - t0)) "exit $st (bench.log)"
  fi
}

stage_tcbench() {
  t0=$(now)
  if ! test -x "$B/bench/cuda/lockstep-tc-bench"; then
    record tcbench SKIP 0 "lockstep-tc-bench not built (no cuBLAS?)"
    return
  fi
  # shellcheck disable=SC2086 # BENCH_ARGS is a list of words
  ( cd "$B" && timeout "$TIMEOUT" ./bench/cuda/lockstep-tc-bench $BENCH_ARGS ) > "$OUT/tcbench.log" 2>&1
  st=$?
  cat "$OUT/tcbench.log"
  if test $st -eq 0; then
    record tcbench ok $(($(now) - t0)) "targets met $(grep -c ': met)' "$OUT/tcbench.log"), missed $(grep -c ': NOT met)' "$OUT/tcbench.log")"
  else
    record tcbench FAIL $(($(now) - t0)) "exit $st (tcbench.log)"
  fi
}

stage_cpubench() {
  t0=$(now)
  # shellcheck disable=SC2086 # CPUBENCH_ARGS is a list of words
  # JSON (cpu.json: `scripts/bench-report.sh -j` plots it elsewhere), shown as a table
  ( cd "$B" && timeout "$TIMEOUT" ./tools/lockstep bench --device cpu --json $CPUBENCH_ARGS ) \
      > "$OUT/cpu.json" 2> "$OUT/cpubench.log"
  st=$?
  sed -n 's/.*"name": "\([^"]*\)", "lockstep_ms": \([0-9.]*\), "peer": "\([^"]*\)", "peer_ms": \([0-9.]*\), "ratio": \([0-9.]*\).*/\1 \2 ms | \3 \4 ms | ratio \5/p' \
      "$OUT/cpu.json" | tee -a "$OUT/cpubench.log"
  if test $st -eq 0; then
    record cpubench ok $(($(now) - t0)) "$(nproc) CPUs (cpubench.log)"
  else
    record cpubench FAIL $(($(now) - t0)) "exit $st (cpubench.log)"
  fi
}

stage_report() {
  t0=$(now)
  rm -rf "$B/bench-report" # only this run's are copied back
  ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "${REPORT_TIMEOUT:-560}" \
      make bench-report BENCH_DEVICES="$REPORT_DEVICES" BENCH_FLAGS="$REPORT_FLAGS" ) \
      > "$OUT/report.log" 2>&1
  st=$?
  mkdir -p "$OUT/bench-report"
  cp "$B"/bench-report/index.md "$B"/bench-report/*.png "$B"/bench-report/*.json \
      "$OUT/bench-report/" 2>/dev/null
  grep -E "^bench-report|^## |^\| (gemm|ternary|gemv|sum|rmsnorm)[^|]*\| " "$OUT/bench-report/index.md" \
      2>/dev/null | head -60
  ndev=$(ls "$OUT"/bench-report/*.json 2>/dev/null | wc -l)
  if test $st -eq 0; then
    record report ok $(($(now) - t0)) "$ndev devices (bench-report/, report.log)"
  elif grep -q "no plots (no gnuplot here)" "$OUT/report.log"; then
    # the benchmarks ran; the plots are drawn elsewhere from the JSON
    record report ok $(($(now) - t0)) "$ndev devices, no gnuplot here: scripts/bench-report.sh -j bench-report/ plots them"
  else
    record report FAIL $(($(now) - t0)) "exit $st (report.log)"
  fi
}

stage_demo() {
  t0=$(now)
  # shellcheck disable=SC2086 # DEMO_ARGS is a list of words
  ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "$TIMEOUT" ./tools/lockstep demo \
      ${DEMO_ARGS:---device cuda:0 --device cpu --device ref} ) > "$OUT/demo.log" 2>&1
  st=$?
  tail -40 "$OUT/demo.log"
  if test $st -eq 0; then
    record demo ok $(($(now) - t0)) "$(grep -ci 'identical' "$OUT/demo.log") identical lines (demo.log)"
  else
    record demo FAIL $(($(now) - t0)) "exit $st (demo.log)"
  fi
}

stage_profile() {
  t0=$(now)
  NCU=$CUDA_HOME/bin/ncu
  test -x "$NCU" || NCU=$(command -v ncu 2>/dev/null)
  if test -z "$NCU"; then
    record profile SKIP 0 "ncu not found"
    return
  fi
  : > "$OUT/profile.log"
  # KERNEL-REGEX:BENCH-CASE, one per line
  specs=${PROFILE_SPECS:-"gemv_stream:gemv bf16 6912x2560
t2_gemv:ternary gemv 6912x2560
softmax_reg:softmax f32 4096x4096
gemm_kernel:gemm f32 2048x3072x768"}
  printf '%s\n' "$specs" | while IFS= read -r spec; do
    k=${spec%%:*}; case_name=${spec#*:}
    ( cd "$B" && timeout 120 "$NCU" -k "regex:$k" --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
        --section MemoryWorkloadAnalysis ./bench/cuda/lockstep-cuda-bench --no-graph --only "$case_name" ) \
        >> "$OUT/profile.log" 2>&1
  done
  grep -E "^  [a-z_].*\(|Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Memory Throughput|L2 Hit|Dynamic Shared" "$OUT/profile.log" | head -120
  record profile ok $(($(now) - t0)) "profile.log"
}

stage_pdl() {
  t0=$(now)
  : > "$OUT/pdl.log"
  st=0
  for rep in 1 2; do
    for p in 0 1; do
      echo "== LOCKSTEP_CUDA_PDL=$p (run $rep)" >> "$OUT/pdl.log"
      # shellcheck disable=SC2086 # PDL_DEMO_ARGS is a list of words
      ( cd "$B" && LOCKSTEP_CUDA_PDL=$p LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" \
          timeout "$TIMEOUT" ./tools/lockstep demo \
          ${PDL_DEMO_ARGS:---device cuda:0 --layers 30 --steps 32} ) >> "$OUT/pdl.log" 2>&1 || st=1
    done
  done
  grep -E "^==|tok/s|decode|prefill" "$OUT/pdl.log" | head -60
  if test $st -eq 0; then
    record pdl ok $(($(now) - t0)) "pdl.log"
  else
    record pdl FAIL $(($(now) - t0)) "a demo run failed (pdl.log)"
  fi
}

stage_layers() {
  t0=$(now)
  : > "$OUT/layers.log"
  st=0
  ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" \
      ./bench/cuda/lockstep-cuda-bench --only none-but-the-copy ) >> "$OUT/layers.log" 2>&1
  for rep in $(seq "${LAYERS_REPS:-2}"); do
    for mode in ops --layers-op; do
      echo "== demo $mode (run $rep)" >> "$OUT/layers.log"
      flag=""
      test "$mode" = ops || flag=$mode
      # shellcheck disable=SC2086 # LAYERS_DEMO_ARGS is a list of words
      ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "$TIMEOUT" \
          ./tools/lockstep demo ${LAYERS_DEMO_ARGS:---device cuda:0 --layers 30 --steps 32} \
          $flag ) >> "$OUT/layers.log" 2>&1 || st=1
    done
  done
  grep -E "^==|D2D copy|^cuda:0|weights read|streams them|same|DIFFERENT" "$OUT/layers.log" | head -60
  # the decode target: the weights of a step read at 60 % of the copy's rate
  awk '/D2D copy 256 MiB/ { for (i = 1; i <= NF; i++) if ($(i + 1) == "GB/s") gbs = $i }
       /weights read per decode step/ { mb = $6 }
       END { if (gbs && mb) printf "target: %.0f tok/s (%.1f MB a step at 0.6 x %.0f GB/s)\n",
               0.6 * gbs * 1e3 / mb, mb, gbs }' "$OUT/layers.log" | tee -a "$OUT/layers.log"
  if test $st -eq 0; then
    record layers ok $(($(now) - t0)) "layers.log"
  else
    record layers FAIL $(($(now) - t0)) "a demo run failed (layers.log)"
  fi
}

stage_layerprof() {
  t0=$(now)
  NCU=$CUDA_HOME/bin/ncu
  test -x "$NCU" || NCU=$(command -v ncu 2>/dev/null)
  if test -z "$NCU"; then
    record layerprof SKIP 0 "ncu not found"
    return
  fi
  ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "$TIMEOUT" "$NCU" \
      --metrics gpu__time_duration.sum \
      ./tools/lockstep demo --device cuda:0 --layers 1 --steps 2 --batch 1 --no-graph ) \
      > "$OUT/layerprof.log" 2>&1
  st=$?
  # kernel name and duration, in launch order, for the last decode step
  awk '/^  [a-zA-Z_].*\(/ {k=$1} /gpu__time_duration.sum/ {print k, $(NF)}' "$OUT/layerprof.log" \
      | tail -25
  if test $st -eq 0; then
    record layerprof ok $(($(now) - t0)) "layerprof.log"
  else
    record layerprof FAIL $(($(now) - t0)) "exit $st (layerprof.log)"
  fi
}

for s in $STAGES; do
  case $s in
    build) stage_build ;;
    check) stage_check ;;
    lockcheck) stage_lockcheck ;;
    memcheck) sanitize memcheck ;;
    racecheck) sanitize racecheck ;;
    sanitize-new) sanitize racecheck sanitize-new "${SANITIZE_TESTS:-$SANITIZE_NEW}" ;;
    memcheck-new) sanitize memcheck memcheck-new "${SANITIZE_TESTS:-$SANITIZE_NEW}" ;;
    bench) stage_bench ;;
    tcbench) stage_tcbench ;;
    cpubench) stage_cpubench ;;
    demo) stage_demo ;;
    profile) stage_profile ;;
    pdl) stage_pdl ;;
    layers) stage_layers ;;
    layerprof) stage_layerprof ;;
    report) stage_report ;;
    *) note "unknown stage $s"; record "$s" FAIL 0 "unknown stage" ;;
  esac
  if test "$s" = build && grep -q "^build *FAIL" "$SUMMARY"; then
    break
  fi
done

# Every log in one archive, so that a harness that fetches only a few files
# gets them all (GPU_CHECK_PACK=0 keeps them loose).
if test "${GPU_CHECK_PACK:-1}" = 1; then
  ( cd "$OUT" || exit
    mkdir -p logs && cp "$B"/tests/*.log logs/ 2>/dev/null
    for f in *; do
      case $f in logs|logs.tar.gz|summary.txt|bench.log|check-failures.txt|all.txt) ;; *) mv "$f" logs/ ;; esac
    done
    tar czf logs.tar.gz logs && rm -rf logs )
fi

echo
echo "== gpu-check summary ($NAME on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1); logs in $OUT)"
printf '%-12s %-7s %7s  %s\n' stage status time detail
cat "$SUMMARY"
grep -h "^target" "$OUT/bench.log" "$OUT/tcbench.log" 2>/dev/null
exit $FAILED
