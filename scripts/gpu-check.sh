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
#   comm        the communicator (configure --with-mpi --with-nccl, added by
#               the build where the host has mpicc and nccl.h): one GPU
#               rank beside a CPU rank under mpirun (--tp 2, --pp 2), and
#               with 2+ GPUs `lockstep demo --tp/--pp` at 2 and 4 ranks,
#               batch 1 and 8 (TP also with captured decode graphs),
#               digests against cuda:0 and cpu, the collectives' floor, the
#               70B-class shape's prefill and decode against one GPU, a
#               table last (NCCL_NVLS_ENABLE=0)
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
#   attn        chunked and paged attention: tests/test_attention at full
#               BitNet shapes (4096 and 32768 keys) and tests/test_bitnet
#               against the reference (both CUDA kernels), then the
#               attention benchmark (decode of 30 layers at 4096 and 32768
#               keys, KV read rate against the copy bandwidth, goal >= 60 %;
#               a 2048-token prefill's attention in tokens/s), again with
#               LOCKSTEP_CUDA_ATTENTION_V1=1 for comparison; about 2 to 3
#               minutes
#   layerprof   Nsight Compute durations (ncu locks the clocks) of every kernel of
#               one decode step of a 1-layer demo model, eager (layerprof.log)
#   serve       the BitNet model at real lengths on cuda:0: its invariance test
#               (tests/test_model_invariance, 2B-4T layer shapes), then lockstep
#               demo at 30 layers: decode at batch 1 at a 4096- and a
#               32768-token context, a 2048-token prefill, a ragged decode
#               batch of 64 sequences of 1k-4k tokens, each beside its floor
#               ((weights + KV bytes) / copy bandwidth); a table last
#               (SERVE_TIMEOUT seconds per run, default 150)
#   train       exact-mode training on cuda:0 with the build's liblockstep and
#               the host's python3 (torch, transformers): the per-step
#               parameter digests CPU vs CUDA of a small Llama, BitLinear
#               CPU vs CUDA and deployed == trained, then a training step of
#               a 134M-parameter model, exact vs stock PyTorch (the ratio);
#               logs in $OUT/train/ (TRAIN_BENCH_ARGS)
#   torch       lockstep.torch with the host's python3 (PyTorch): the python
#               suite (exact mode on cuda:0 against the CPU, the DLPack CUDA
#               tests), the transformers models' logits digests on CPU and
#               CUDA (python/examples/exact_transformers.py) and exact mode
#               against stock PyTorch on a 1.2 B Llama-style model
#               (python/tools/bench_exact.py); logs in $OUT/torch/
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
#   COMM_CONFIGURE  configure flags for the communicator (default: --with-mpi
#               where mpicc is, and --with-nccl where nccl.h is too)
#   COMM_TIMEOUT  seconds per run of the comm stage (default 150)
#   COMM_70B    0 leaves out the comm stage's 70B-class runs (2+ GPUs)
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

# The communicator's transports where the host has them (the comm stage).
if test -z "${COMM_CONFIGURE+set}"; then
  COMM_CONFIGURE=""
  if command -v mpicc >/dev/null 2>&1; then
    COMM_CONFIGURE="--with-mpi"
    if test -f /usr/include/nccl.h || test -f "$CUDA_HOME/include/nccl.h"; then
      COMM_CONFIGURE="$COMM_CONFIGURE --with-nccl"
    fi
  fi
fi

# -------------------------------------------------------------- stages

stage_build() {
  t0=$(now)
  want="$(cksum < "$TARBALL") $ARCH $COMM_CONFIGURE"
  if test -f "$STAMP" && test "$(cat "$STAMP")" = "$want" && test -x "$B/tests/test_cuda"; then
    record build ok 0 "reused $B"
    return
  fi
  rm -rf "${BUILD_ROOT:?}/${NAME:?}" "$STAMP"
  ( cd "$BUILD_ROOT" && tar xzf "$TARBALL" ) > "$OUT/build.log" 2>&1 || {
    record build FAIL $(($(now) - t0)) "tar failed (build.log)"; return; }
  mkdir -p "$B"
  if test "$ARCH" = fat; then arch_arg=""; else arch_arg="CUDA_ARCH_FLAGS=$ARCH"; fi
  # shellcheck disable=SC2086
  ( cd "$B" && ../configure --with-cuda="$CUDA_HOME" --disable-dependency-tracking \
      $COMM_CONFIGURE ${arch_arg:+"$arch_arg"} && make -j"$JOBS" && make -j"$JOBS" check TESTS= ) \
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
  tests/test_tc_ternary:scales tests/test_tc_ternary:prepared tests/test_contract
  tests/test_attention tests/test_train_ops tests/test_model_invariance"
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

stage_attn() {
  t0=$(now)
  mkdir -p "$OUT/attn"
  st=0
  for t in test_attention test_bitnet; do
    ( cd "$B" && timeout "$TIMEOUT" "./tests/$t" ) > "$OUT/attn/$t.log" 2>&1 || st=1
  done
  ( cd "$B" && timeout "$TIMEOUT" ./bench/cuda/lockstep-cuda-bench --only "attention" ) \
      > "$OUT/attn/bench.log" 2>&1 || st=1
  # the one-row chunk kernel, for comparison (not a target)
  ( cd "$B" && LOCKSTEP_CUDA_ATTENTION_V1=1 timeout "$TIMEOUT" \
      ./bench/cuda/lockstep-cuda-bench --only "attention" ) > "$OUT/attn/bench-v1.log" 2>&1

  grep -h "^target" "$OUT/attn/bench.log" >> "$OUT/bench.log" 2>/dev/null
  echo "attn: test               ok  not-ok  skip"
  for t in test_attention test_bitnet; do
    printf '      %-18s %3s %6s %5s\n' "$t" "$(grep -c '^ok' "$OUT/attn/$t.log")" \
        "$(grep -c '^not ok' "$OUT/attn/$t.log")" "$(grep -c '# SKIP' "$OUT/attn/$t.log")"
  done
  grep -E "^(D2D copy|attention|target)" "$OUT/attn/bench.log"
  echo "attn: LOCKSTEP_CUDA_ATTENTION_V1=1:"
  grep -E "^(attention|target)" "$OUT/attn/bench-v1.log"
  bad=$(grep -h "^not ok" "$OUT/attn"/test_*.log | wc -l | tr -d ' ')
  if test $st -eq 0; then
    record attn ok $(($(now) - t0)) "$(grep -c MET "$OUT/attn/bench.log") targets met (attn/)"
  else
    record attn FAIL $(($(now) - t0)) "$bad not ok, or a run failed (attn/)"
  fi
}

stage_torch() {
  t0=$(now)
  py=${PYTHON:-python3}
  if ! "$py" -c 'import torch, numpy, pytest' 2>/dev/null; then
    record torch SKIP 0 "$py lacks torch, numpy or pytest"
    return
  fi
  mkdir -p "$OUT/torch"
  S=$BUILD_ROOT/$NAME
  # the build's library and CUDA driver module, the tarball's package
  tenv="LOCKSTEP_LIBRARY=$B/.libs/liblockstep.so.0 LOCKSTEP_DRIVER_PATH=$B/backends/cuda/.libs PYTHONPATH=$S/python PYTHONDONTWRITEBYTECODE=1"
  ( cd "$S" && env $tenv timeout 180 "$py" -m pytest -v -rs -p no:cacheprovider python/tests ) \
      > "$OUT/torch/pytest.log" 2>&1
  st_t=$?
  ( cd "$S" && env $tenv timeout 90 "$py" python/examples/exact_transformers.py --devices cpu,cuda ) \
      > "$OUT/torch/models.log" 2>&1
  st_m=$?
  ( cd "$S" && env $tenv timeout 150 "$py" python/tools/bench_exact.py --quick ) \
      > "$OUT/torch/bench.log" 2>&1
  st_b=$?
  grep -E "FAILED|ERROR" "$OUT/torch/pytest.log" | head -20
  tail -1 "$OUT/torch/pytest.log"
  cat "$OUT/torch/models.log"
  tail -6 "$OUT/torch/bench.log"
  dl=$(grep -c "test_torch_cuda_without_copy PASSED" "$OUT/torch/pytest.log")
  cu=$(grep -c "test_torch_exact.py::test_cuda_.* PASSED" "$OUT/torch/pytest.log")
  detail="pytest: $(tail -1 "$OUT/torch/pytest.log" | tr -d '=' | sed 's/^ *//'); cuda tests passed: $cu, dlpack cuda: $dl; models: $(tail -1 "$OUT/torch/models.log"); $(grep '^ratio' "$OUT/torch/bench.log")"
  if test $st_t -eq 0 && test $st_m -eq 0 && test $st_b -eq 0 && test "$dl" -eq 1; then
    record torch ok $(($(now) - t0)) "$detail"
  else
    record torch FAIL $(($(now) - t0)) "exit $st_t/$st_m/$st_b; $detail (torch/)"
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

stage_serve() {
  t0=$(now)
  mkdir -p "$OUT/serve"
  st=0
  ( cd "$B" && make tests/test_model_invariance >/dev/null 2>&1 &&
      LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "${SERVE_TIMEOUT:-150}" \
      ./tests/test_model_invariance ) > "$OUT/serve/invariance.log" 2>&1 || st=1
  tst="$(grep -c '^ok' "$OUT/serve/invariance.log") ok, $(grep -c '^not ok' "$OUT/serve/invariance.log") not ok"
  # name|demo arguments (cuda:0, 30 layers of BitNet-2B-4T's shapes)
  runs="ctx4k|--prompt-len 4064 --ctx 4096 --chunk 2048 --steps 32 --batch 1
ctx32k|--prompt-len 32736 --ctx 32768 --chunk 4096 --steps 32 --batch 1
prefill2k|--prompt-len 2048 --steps 4 --batch 1
ragged64|--prompt-len 4096 --ctx 4112 --chunk 2048 --ragged 64 --steps 16 --batch 1"
  printf '%s\n' "$runs" | while IFS='|' read -r name args; do
    # shellcheck disable=SC2086 # args is a list of words
    ( cd "$B" && LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" timeout "${SERVE_TIMEOUT:-150}" \
        ./tools/lockstep demo --device cuda:0 --layers 30 $args ) > "$OUT/serve/$name.log" 2>&1 ||
      echo "$name" >> "$OUT/serve/failed"
  done
  test -s "$OUT/serve/failed" && st=1
  # the table: rates from the demo's lines (see docs/demo.md)
  {
    echo "serve: invariance test: $tst"
    for name in ctx4k ctx32k prefill2k ragged64; do
      awk -v n="$name" '
        $1 == "cuda:0" && $2 ~ /^[0-9.]+$/ && !row { pre = $2; dec = $3; row = 1 }
        /^KV cache read per decode step/ { kv = $(NF - 7) }
        $1 == "cuda:0" && $2 == "decode" && $3 == "b1" { fl = $0; sub(/.*floor at its copy bandwidth /, "", fl) }
        $1 == "cuda:0" && $2 == "prefill" && /floor/ { rg = $0; sub(/^ *cuda:0 */, "", rg) }
        /DIFFERENT|BROKEN|failed|cannot run/ { bad = 1 }
        END {
          if (n == "ragged64") printf "  %-9s %s\n", n, rg ? rg : "no result";
          else if (n == "prefill2k") printf "  %-9s prefill %s tokens/s\n", n, pre ? pre : "-";
          else printf "  %-9s decode b1 %s tokens/s, KV %s MB/step, floor %s\n", n, dec ? dec : "-", kv, fl;
          if (bad) printf "  %-9s DIFFERENT, BROKEN or failed: see serve/%s.log\n", n, n
        }' "$OUT/serve/$name.log"
    done
  } | tee "$OUT/serve/table.txt"
  # the figures in the summary line, which is printed last
  fig=$(awk '/^  ctx4k|^  ctx32k/ { printf "%s %s tok/s, ", $1, $4 }
             /^  prefill2k/ { printf "prefill2k %s tok/s, ", $3 }
             /^  ragged64/ && /decode/ { for (i = 1; i < NF; i++) if ($i == "decode") d = $(i + 1);
                                        printf "ragged64 %s tok/s", d }' "$OUT/serve/table.txt")
  if test $st -eq 0; then
    record serve ok $(($(now) - t0)) "$tst; $fig"
  else
    record serve FAIL $(($(now) - t0)) "$tst; failed: $(tr '\n' ' ' < "$OUT/serve/failed" 2>/dev/null); $fig"
  fi
}

# comm_70b_table DIR: the 70B-class runs against one GPU's: digest equal,
# tokens/s, the ratio to one GPU, the goal, the floor; FAIL ends a line
# whose digest differs or whose log lacks the figures.
comm_70b_table() {
  # dg LOG: the digest; rate LOG COLUMN: a field of the split-rate line
  dg() { awk '/^digest of every step/ { getline; print $2; exit }' "$1/$2.log" 2>/dev/null; }
  rate() { awk -v c="$3" '$1 ~ /^(tp|pp)[0-9]/ { print $(c + 1); exit }' "$1/$2.log" 2>/dev/null; }
  printf '%-27s %-6s %9s %9s %6s %-13s %s\n' "70B-class run" digest "tok/s" "1 GPU" ratio goal \
      "floor / note"
  # row DIR NAME BASELINE COLUMN GOAL WHAT [BASE_COLUMN [PIPELINED_BATCH]]: columns
  # of the split-rate line (1 prefill b1, 2 decode b1, 4 decode b16, 6
  # decode b32); PIPELINED_BATCH: the pipelined rate of that batch instead
  row() {
    name=$2 base=$3 col=$4 goal=$5 what=$6 bcol=${7:-$4} pb=${8:-}
    d=$(dg "$1" "$name") d1=$(dg "$1" "$base")
    r=$(rate "$1" "$name" "$col") r1=$(rate "$1" "$base" "$bcol")
    note= bad=
    test "$col" = 2 && note=$(sed -n 's/^decode b1 floor: \([0-9.]*\) us a step.*measured \([0-9.]*\) us (\([0-9]*%\).*/floor \1 us, measured \2 us (\3 of its rate)/p' \
        "$1/$name.log" 2>/dev/null | head -1)
    # PP's steady state: micro-batches of successive steps in flight
    pr= pt=
    if test -n "$pb"; then
      pr=$(sed -n "s/^pipelined decode b$pb: \([0-9.]*\) tokens\/s.*/\1/p" "$1/$name.log" 2>/dev/null | head -1)
      pt=$(sed -n "s/^pipelined decode b$pb: .*tokens \([A-Za-z]*\)\$/\1/p" "$1/$name.log" 2>/dev/null | head -1)
    fi
    if test -n "$pr"; then
      note="pipelined (step by step: $r); its tokens $pt"
      r=$pr
      test "$pt" = identical || bad=1
    fi
    eq=no
    test -n "$d" && test "$d" = "$d1" && eq=yes
    ratio=$(awk -v a="$r" -v b="$r1" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "-" }')
    goaltxt="-"
    test "$goal" != "-" && goaltxt=">=${goal}x "$(awk -v a="$r" -v b="$r1" -v g="$goal" \
        'BEGIN { if (b + 0 > 0 && a / b >= g) print "MET"; else print "MISSED" }')
    line=$(printf '%-27s %-6s %9s %9s %6s %-13s %s' "$name $what" "$eq" "${r:--}" "${r1:--}" \
        "$ratio" "$goaltxt" "$note")
    test "$eq" = yes && test -n "$r" && test -z "$bad" || line="$line FAIL"
    echo "$line"
  }
  for n in 2 4; do
    test -f "$1/70b-tp$n-prefill.log" || continue
    row "$1" "70b-tp$n-prefill" 70b-1gpu-prefill 1 1.6 "prefill2048"
    row "$1" "70b-tp$n-decode" 70b-1gpu-decode 2 - "decode b1"
    row "$1" "70b-tp$n-decode" 70b-1gpu-decode 4 - "decode b16"
    row "$1" "70b-tp$n-decode" 70b-1gpu-decode 6 - "decode b32"
    row "$1" "70b-pp$n-decode" 70b-1gpu-decode 2 - "decode b1"
    row "$1" "70b-pp$n-decode" 70b-1gpu-decode 4 1.7 "decode b16" 4 16
    # twice the sequences (PP=2: each micro-batch one GPU's batch of 16)
    row "$1" "70b-pp$n-decode" 70b-1gpu-decode 6 - "b32 vs 1 GPU b16" 4 32
  done
}

# The communicator: MPI between a GPU rank and a CPU rank on one GPU, NCCL
# between GPUs where there are several; every demo run compares its
# digests with cuda:0's and cpu's itself (exit 1 when they differ).
stage_comm() {
  t0=$(now)
  if ! grep -q "define LK_HAVE_MPI 1" "$B/config.h" 2>/dev/null; then
    record comm SKIP 0 "built without MPI (COMM_CONFIGURE='$COMM_CONFIGURE'; no mpicc?)"
    return
  fi
  NCCL_NVLS_ENABLE=0
  OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  LOCKSTEP_DRIVER_PATH=$B/backends/cuda/.libs
  # shared memory between ranks without CMA (containers often forbid it)
  OMPI_MCA_btl_vader_single_copy_mechanism=none
  export NCCL_NVLS_ENABLE OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM LOCKSTEP_DRIVER_PATH
  export OMPI_MCA_btl_vader_single_copy_mechanism
  L=$OUT/comm
  rm -rf "${L:?}"
  mkdir -p "$L"
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  lim=${COMM_TIMEOUT:-150}
  fails=0
  : > "$L/table.txt"
  # crun NAME NP ARGS...: lockstep demo under mpirun, a line of the table
  crun() {
    name=$1 np=$2
    shift 2
    ( cd "$B" && timeout "$lim" mpirun --oversubscribe --bind-to none -np "$np" \
        -x NCCL_NVLS_ENABLE -x LOCKSTEP_DRIVER_PATH ./tools/lockstep demo "$@" ) \
        > "$L/$name.log" 2>&1
    rc=$?
    verdict=ok
    grep -q "identical logits" "$L/$name.log" || verdict=FAIL
    test $rc -eq 0 || verdict=FAIL
    test $verdict = ok || fails=$((fails + 1))
    tr=$(sed -n 's/.*(transport \([a-z]*\)).*/\1/p' "$L/$name.log" | head -1)
    rates=$(awk '$1 ~ /^(tp|pp)[0-9]/ { $1 = ""; print; exit }' "$L/$name.log" | tr -s ' ')
    ref=$(awk '$1 == "cuda:0" { $1 = ""; print; exit }' "$L/$name.log" | tr -s ' ')
    # PP: the pipelined decode's rate per batch and its tokens' verdict
    pipe=$(sed -n 's/^pipelined decode b\([0-9]*\): \([0-9.]*\) .*tokens \([A-Za-z]*\)$/ b\1 \2 \3/p' \
        "$L/$name.log" | tr -d '\n')
    test -n "$pipe" && pipe=" | pipelined:$pipe"
    printf '%-18s %-5s %-4s rc %-3s split:%s | cuda:0:%s%s\n' "$name" "$tr" "$verdict" "$rc" \
        "$rates" "$ref" "$pipe" >> "$L/table.txt"
  }
  # one GPU: the CPU path's tests, then a GPU rank beside a CPU rank (MPI,
  # device tensors staged through host memory: NCCL takes GPUs only)
  ( cd "$B" && make check TESTS=tests/test_comm.sh ) > "$L/test_comm.log" 2>&1 \
      || fails=$((fails + 1))
  grep -E "^(ok|not ok)" "$B/tests/test_comm.log" > "$L/test_comm.tap" 2>/dev/null
  crun tp2-gpu+cpu 2 --tp 2 --device cuda:0,cpu --layers 2 --batch 1,8 --steps 4
  crun pp2-gpu+cpu 2 --pp 2 --device cuda:0,cpu --layers 2 --batch 1,8 --steps 4
  for n in 2 4; do
    test "$ngpu" -ge $n || continue
    crun "comm-bench-$n" $n --tp $n --layers 2 --batch 1 --steps 2 --ref none --comm-bench
    crun "tp$n-2b4t" $n --tp $n --layers 4 --batch 1,8 --steps 8 --floor-gbs 4800
    crun "pp$n-2b4t" $n --pp $n --layers 4 --batch 1,8 --steps 8 --micro 2
    crun "pp$n-2b4t-graph" $n --pp $n --layers 4 --batch 1,8 --steps 8 --micro $n --graph
    crun "tp$n-2b4t-graph" $n --tp $n --layers 4 --batch 1,8 --steps 8 --graph --floor-gbs 4800
  done
  # the 70B-class shape (each rank draws its share of ~19 GB): one GPU's
  # 2048-token prefill and decode at batch 1 and 16 (once: the baselines),
  # then at 2 and 4 ranks TP prefill, TP decode (batch 1 beside its floor)
  # and PP decode with a micro-batch per stage; every split run's digest
  # must equal one GPU's (the one-device CPU reference would take too long)
  big=70b
  if test "$ngpu" -ge 2 && test "${COMM_70B:-1}" = 1; then
    crun 70b-1gpu-prefill 1 --tp 1 --shape $big --prompt-len 2048 --steps 0 --batch 1 --ref none
    # every decode run: 8 steps at batch 1, 16, 32 (the digests cover them all)
    dec="--prompt-len 16 --steps 8 --batch 1,16,32 --ref none"
    crun 70b-1gpu-decode 1 --tp 1 --shape $big $dec --floor-gbs 4800 --graph
    for n in 2 4; do
      test "$ngpu" -ge $n || continue
      crun "70b-tp$n-prefill" $n --tp $n --shape $big --prompt-len 2048 --steps 0 --batch 1 \
          --ref none
      crun "70b-tp$n-decode" $n --tp $n --shape $big $dec --floor-gbs 4800 --graph
      crun "70b-pp$n-decode" $n --pp $n --micro $n --shape $big $dec --graph
    done
    comm_70b_table "$L" >> "$L/table.txt"
    fails=$((fails + $(grep -c 'FAIL$' "$L/table.txt")))
  fi
  sed -n '/^comm bench/,/^(eager/p' "$L"/comm-bench-*.log 2>/dev/null
  grep -h "floor:" "$L"/*.log 2>/dev/null
  echo "== comm: run, transport, verdict, exit, split rates (prefill/decode per batch), cuda:0's"
  cat "$L/table.txt"
  if test $fails -eq 0; then
    record comm ok $(($(now) - t0)) "$ngpu GPUs; $(wc -l < "$L/table.txt" | tr -d ' ') demo runs (comm/table.txt)"
  else
    record comm FAIL $(($(now) - t0)) "$fails failed (comm/*.log)"
  fi
}

stage_train() {
  t0=$(now)
  mkdir -p "$OUT/train"
  if ! python3 -c "import torch, transformers, pytest; assert torch.cuda.is_available()" \
      > "$OUT/train/python.txt" 2>&1; then
    record train SKIP 0 "python3 lacks torch with CUDA, transformers or pytest"
    return
  fi
  src=$B/..
  st=0
  ( cd "$src/python/tests" && LOCKSTEP_LIBRARY="$B/.libs/liblockstep.so" \
      LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" PYTHONPATH="$src/python" \
      PYTHONDONTWRITEBYTECODE=1 timeout 200 python3 -m pytest -q -s -p no:cacheprovider -k cuda \
      test_train_exact.py test_bitlinear.py ) > "$OUT/train/pytest.log" 2>&1 || st=1
  # shellcheck disable=SC2086 # TRAIN_BENCH_ARGS is a list of words
  ( cd "$src" && LOCKSTEP_LIBRARY="$B/.libs/liblockstep.so" \
      LOCKSTEP_DRIVER_PATH="$B/backends/cuda/.libs" PYTHONPATH="$src/python" \
      PYTHONDONTWRITEBYTECODE=1 timeout 150 python3 python/tools/bench_train.py \
      ${TRAIN_BENCH_ARGS:-} ) > "$OUT/train/bench.log" 2>&1 || st=1
  grep -E "^step |^stock PyTorch|^BitLinear|passed|failed|skipped|Error" "$OUT/train/pytest.log" | tail -40
  cat "$OUT/train/bench.log" | tail -4
  same=$(grep -c "^step .* same$" "$OUT/train/pytest.log")
  steps=$(grep -c "^step " "$OUT/train/pytest.log")
  res=$(grep -E "[0-9]+ (passed|failed)" "$OUT/train/pytest.log" | tail -1)
  ratio=$(sed -n 's/^ratio: exact runs at \([0-9.]*x\).*/\1/p' "$OUT/train/bench.log")
  detail="$same/$steps steps same digests CPU/CUDA; ${ratio:-no} speed vs stock; $res"
  if test $st -eq 0; then
    record train ok $(($(now) - t0)) "$detail"
  else
    record train FAIL $(($(now) - t0)) "$detail (train/)"
  fi
}

for s in $STAGES; do
  case $s in
    serve) stage_serve ;;
    build) stage_build ;;
    check) stage_check ;;
    comm) stage_comm ;;
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
    attn) stage_attn ;;
    torch) stage_torch ;;
    report) stage_report ;;
    train) stage_train ;;
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
