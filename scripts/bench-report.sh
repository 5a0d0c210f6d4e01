#!/bin/sh
# Lockstep: `make bench-report`.  Runs `lockstep bench --json` on each CPU
# device of this machine, and the CUDA driver's benchmark (lockstep-cuda-bench
# --json: cuBLAS as the peer, a device-to-device copy as the floor) on each
# CUDA device, and writes a Markdown page and PNG plots (gnuplot) to the
# output directory (bench-report/ in the current directory, the build tree
# under make, by default; `make bench-snapshot` then copies the plots to
# docs/performance/ in the source tree, the README's snapshot):
#   index.md             the machine, and one table per device
#   ratio.png            peer time / Lockstep time per case and CPU device
#                        (1 = as fast as the peer; against a streaming floor,
#                        the fraction of the machine's bandwidth reached;
#                        compute-bound cases timed against a read floor are
#                        left out: that ratio says nothing)
#   ratio-gpu.png        the same for the GPUs (their cases are others)
#   compute.png          GFLOP/s of the compute-bound cases, Lockstep and its
#                        peer (OpenBLAS, cuBLAS) per device, and each GPU's
#                        FP32 peak (PEAK_GFLOPS=N adds one for the CPU)
#   bandwidth.png        GB/s of the bandwidth-bound cases, Lockstep and its
#                        peer or floor (the streaming read or copy loop, cuBLAS)
#                        per device, and each GPU's copy rate
#   <device>.json        the raw output
#
# Usage: scripts/bench-report.sh [-l LOCKSTEP] [-c CUDA_BENCH] [-o OUTDIR]
#                                [-d "DEV ..."] [-f "BENCH FLAGS"] [-j DIR]
#   -l  the lockstep binary (default: tools/lockstep, then lockstep on PATH)
#   -c  lockstep-cuda-bench (default: bench/cuda/lockstep-cuda-bench, else
#       backends/cuda/lockstep-cuda-bench, of a build configured with CUDA);
#       without it CUDA devices are skipped
#   -d  devices (default: every non-emulated device `lockstep info` lists,
#       except the reference, which is the specification, not a fast path,
#       and plain "cpu", which is one of the cpu:<isa> devices again)
#   -f  flags for `lockstep bench` (default: none; "--quick" for a short run,
#       which lockstep-cuda-bench takes too)
#   -j  re-plot the <device>.json files already in DIR (no benchmarking)
#   A peer that was not there (OpenBLAS, the ternary peers that
#   scripts/get-peers.sh builds) is a "skip" row with the bench's reason.
#   PEAK_GFLOPS=N in the environment draws the compute peak on compute.png;
#   BENCH_NOTE="..." adds a line about the conditions of the run to index.md.
# Needs: sh, awk, gnuplot (scripts/deps.sh installs it).
set -eu

LOCKSTEP=""
CUDA_BENCH=""
OUT="bench-report"
DEVICES=""
FLAGS=""
JSONDIR=""
while getopts "l:c:o:d:f:j:h" opt; do
    case $opt in
    l) LOCKSTEP=$OPTARG ;;
    c) CUDA_BENCH=$OPTARG ;;
    o) OUT=$OPTARG ;;
    d) DEVICES=$OPTARG ;;
    f) FLAGS=$OPTARG ;;
    j) JSONDIR=$OPTARG ;;
    h) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) exit 2 ;;
    esac
done

# Without gnuplot the benchmarks still run and their JSON and tables are
# written (a GPU host may have no gnuplot and no network): -j plots them
# where gnuplot is, and the run exits 1 so that nothing mistakes it for a
# whole report.
NOPLOT=""
if ! command -v gnuplot >/dev/null 2>&1; then
    if [ -n "$JSONDIR" ]; then
        echo "bench-report: gnuplot not found (scripts/deps.sh gnuplot-nox installs it)" >&2
        exit 1
    fi
    echo "bench-report: gnuplot not found: benchmarking and writing the tables and JSON only" >&2
    NOPLOT=1
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

if [ -n "$JSONDIR" ]; then
    for j in "$JSONDIR"/*.json; do
        [ -f "$j" ] && cp "$j" "$TMP/"
    done
else
    if [ -z "$LOCKSTEP" ]; then
        if [ -x tools/lockstep ]; then LOCKSTEP=tools/lockstep
        else LOCKSTEP=$(command -v lockstep || true); fi
    fi
    [ -n "$LOCKSTEP" ] && [ -x "$LOCKSTEP" ] || {
        echo "bench-report: no lockstep binary (give -l PATH)" >&2
        exit 1
    }
    if [ -z "$DEVICES" ]; then
        # `lockstep info` lists devices as "  name  kind ... [emulated]";
        # keep the first word of lines naming a cpu or cuda device.
        DEVICES=$("$LOCKSTEP" info 2>/dev/null | awk '
            /emulat|simde/ { next }
            { for (i = 1; i <= NF; i++) if ($i ~ /^(cpu(:[a-z0-9-]+)?|cuda:[0-9]+)$/) { print $i; break } }' |
            awk '!seen[$0]++ { d[++n] = $0; if ($0 ~ /^cpu:/) named = 1 }
                 END { for (i = 1; i <= n; i++) if (!(named && d[i] == "cpu")) print d[i] }' |
            tr '\n' ' ')
        [ -n "$DEVICES" ] || DEVICES="cpu"
    fi
    if [ -z "$CUDA_BENCH" ]; then
        for c in bench/cuda/lockstep-cuda-bench backends/cuda/lockstep-cuda-bench; do
            if [ -x "$c" ]; then CUDA_BENCH=$c; break; fi
        done
    fi
    for d in $DEVICES; do
        f=$(echo "$d" | tr ':@/' '___')
        case $d in
        cuda:*)
            # `lockstep bench` times host-memory cases against CPU peers; a
            # GPU's peers (cuBLAS, the copy) are in the driver's own bench
            if [ -z "$CUDA_BENCH" ] || [ ! -x "$CUDA_BENCH" ]; then
                echo "bench-report: skipping $d: no lockstep-cuda-bench (give -c PATH; a build configured --with-cuda makes it)" >&2
                continue
            fi
            cf=""
            case " $FLAGS " in *" --quick "*) cf="--quick" ;; esac
            echo "bench-report: $CUDA_BENCH --json $cf --device $d" >&2
            # shellcheck disable=SC2086
            "$CUDA_BENCH" --json $cf --device "$d" >"$TMP/$f.json" ||
                echo "bench-report: lockstep-cuda-bench on $d reported a failure (kept what it printed)" >&2
            continue
            ;;
        esac
        echo "bench-report: lockstep bench --device $d $FLAGS" >&2
        # shellcheck disable=SC2086
        if ! "$LOCKSTEP" bench --device "$d" --json $FLAGS >"$TMP/$f.json"; then
            echo "bench-report: bench on $d reported a failure (kept what it printed)" >&2
        fi
    done
fi

# One line per case: device name lk_ms peer peer_ms ratio gflops gbps skip
# (skip: why the peer was not there; a case that exists for its peer alone
# then has no times, and is in the tables but in no plot).
# The bench prints one case per line, so a line-wise awk parse suffices.
for j in "$TMP"/*.json; do
    [ -f "$j" ] || continue
    awk '
    function str(k,   m) { if (match($0, "\"" k "\": \"[^\"]*\"")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\": \"", "", m); sub("\"$", "", m); return m } return "" }
    function num(k,   m) { if (match($0, "\"" k "\": -?[0-9.eE+-]+")) { m = substr($0, RSTART, RLENGTH); sub("^\"" k "\": ", "", m); return m + 0 } return 0 }
    NR == 1 { dev = str("device"); desc = str("description"); thr = num("threads"); printf "#dev\t%s\t%s\t%d\t%g\t%g\n", dev, desc, thr, num("copy_gbps"), num("peak_gflops") }
    /"name":/ && !/"error"/ { printf "%s\t%s\t%g\t%s\t%g\t%g\t%g\t%g\t%s\n", dev, str("name"), num("lockstep_ms"), str("peer"), num("peer_ms"), num("ratio"), num("gflops"), num("gbps"), str("skipped") }
    ' "$j"
done >"$TMP/all.tsv"

grep -v '^#' "$TMP/all.tsv" >"$TMP/rows.tsv" || true
awk -F'\t' '$3 > 0' "$TMP/rows.tsv" >"$TMP/cases.tsv"
[ -s "$TMP/cases.tsv" ] || { echo "bench-report: no results to plot" >&2; exit 1; }
devs=$(grep '^#dev' "$TMP/all.tsv" | cut -f2)

# Per device, the data files gnuplot reads: case, value(s).  Compute-bound
# cases report GFLOP/s (their peer is OpenBLAS, or cuBLAS on a GPU); the
# others only GB/s (their peer is a streaming loop over the same bytes, the
# bandwidth floor, or on a GPU cuBLAS's GEMV or the copy).
for d in $devs; do
    f=$(echo "$d" | tr ':@/' '___')
    r=ratio
    case $d in cuda:*) r=ratio-gpu ;; esac
    awk -F'\t' -v d="$d" '$1 == d && !($7 > 0 && $4 ~ /floor/) { print $2, $6 }' \
        "$TMP/cases.tsv" >"$TMP/${r}_$f.dat"
    awk -F'\t' -v d="$d" '$1 == d && $7 > 0 { pr = $5 > 0 ? $7 * $3 / $5 : 0; print $2, $7, pr }' \
        "$TMP/cases.tsv" >"$TMP/compute_$f.dat"
    awk -F'\t' -v d="$d" '$1 == d && $7 == 0 && $8 > 0 { pr = $5 > 0 ? $8 * $3 / $5 : 0; print $2, $8, pr }' \
        "$TMP/cases.tsv" >"$TMP/bandwidth_$f.dat"
done

# plot KIND TITLE YLABEL LOG PEERTITLE EXTRA: one PNG, the cases of KIND on
# the x axis in first-seen order, one marker per device (filled: Lockstep;
# open: its peer, for the throughput plots).
plot() {
    kind=$1
    [ -z "$NOPLOT" ] || return 0
    cat "$TMP"/${kind}_*.dat 2>/dev/null | awk '!seen[$1]++ { print $1 }' >"$TMP/order_$kind.txt"
    ncases=$(wc -l <"$TMP/order_$kind.txt")
    [ "$ncases" -gt 0 ] || return 0
    xtics=$(awk '{ printf "%s\"%s\" %d", (NR > 1 ? ", " : ""), $1, NR - 1 }' "$TMP/order_$kind.txt")
    width=$((400 + ncases * 34))
    [ "$width" -gt 4000 ] && width=4000
    series=""
    i=0
    j=0 # the place among the devices with cases of this kind
    n=0
    for d in $devs; do
        f=$(echo "$d" | tr ':@/' '___')
        if [ -s "$TMP/${kind}_$f.dat" ]; then n=$((n + 1)); fi
    done
    for d in $devs; do
        f=$(echo "$d" | tr ':@/' '___')
        i=$((i + 1))
        [ -s "$TMP/${kind}_$f.dat" ] || continue
        awk 'NR == FNR { idx[$1] = NR - 1; next } ($1 in idx) { print idx[$1], $0 }' \
            "$TMP/order_$kind.txt" "$TMP/${kind}_$f.dat" >"$TMP/${kind}_$f.idx"
        off=$(awk -v i="$j" -v n="$n" 'BEGIN { printf "%.3f", (i - (n - 1) / 2) * 0.8 / n }')
        # marker and colour by the device's place in the list (the same in every plot)
        series="$series, \"$TMP/${kind}_$f.idx\" using (\$1+$off):3 with points pt $((3 + 2 * i)) lc $i ps 1.4 title \"$d\""
        if [ -n "$5" ]; then
            series="$series, \"$TMP/${kind}_$f.idx\" using (\$1+$off):(\$4 > 0 ? \$4 : 1/0) with points pt $((2 + 2 * i)) lc $i ps 1.4 title \"$d $5\""
        fi
        j=$((j + 1))
    done
    gnuplot <<GP
set terminal pngcairo noenhanced size $width,600 font 'sans,9'
set output '$OUT/$kind.png'
set grid ytics
set key outside top center horizontal
set xtics rotate by 60 right ($xtics)
set xrange [-0.7:$ncases - 0.3]
set bmargin 14
set format y '%g'
set logscale y $4
set title "$2"
set ylabel '$3'
plot $6 ${series#, }
GP
}

rm -f "$OUT/ratio.png" "$OUT/ratio-gpu.png" "$OUT/compute.png" "$OUT/bandwidth.png"
plot ratio "CPU devices: peer time / Lockstep time per case (above 1: Lockstep faster; against a floor: fraction of the bandwidth reached)" \
    ratio 2 "" "1 with lines lc rgb '#888888' dt 2 title 'as fast as the peer / at the floor',"
plot ratio-gpu "GPUs: peer time / Lockstep time per case (cuBLAS, or the copy: above 1 Lockstep is faster)" \
    ratio 2 "" "1 with lines lc rgb '#888888' dt 2 title 'as fast as the peer / at the floor',"
# The floors a device's JSON names (a GPU's FP32 peak and copy rate), as
# dashed lines; PEAK_GFLOPS adds one for the CPU.
peak=""
[ -n "${PEAK_GFLOPS:-}" ] && peak="$PEAK_GFLOPS with lines lc rgb '#aa0000' dt 2 title 'CPU compute peak',"
copy=""
c=0
while IFS='	' read -r _ d _ _ cg pg; do
    c=$((c + 1))
    if [ "${pg:-0}" != 0 ]; then peak="$peak $pg with lines lc $c dt 2 title '$d FP32 peak',"; fi
    if [ "${cg:-0}" != 0 ]; then copy="$copy $cg with lines lc $c dt 2 title '$d copy (read + write)',"; fi
done <<EOF
$(grep '^#dev' "$TMP/all.tsv")
EOF
plot compute "Compute-bound cases: GFLOP/s of Lockstep (filled) and of its peer, OpenBLAS or cuBLAS (open), per device" \
    GFLOP/s 10 "peer" "$peak"
plot bandwidth "Bandwidth-bound cases: GB/s of Lockstep (filled) and of the streaming floor or peer (open) per device" \
    GB/s 10 "floor or peer" "$copy"

# The page.
{
    echo "# Benchmark report"
    echo
    echo "Written by \`make bench-report\` (scripts/bench-report.sh) on $(date -u '+%Y-%m-%d %H:%M UTC')."
    if [ -z "$JSONDIR" ]; then
        cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
        echo "Machine: $(uname -sm), ${cpu:-unknown CPU}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') logical CPUs."
        echo "$("$LOCKSTEP" --version 2>/dev/null || true)"
    else
        echo "Re-plotted from the saved JSON of each device (the machine is in each device's line below)."
    fi
    [ -n "${BENCH_NOTE:-}" ] && echo && echo "$BENCH_NOTE"
    echo
    echo "Ratio = peer time / Lockstep time: above 1 Lockstep is faster; against a floor"
    echo "(a streaming read or copy loop on the same threads) it is the fraction of the"
    echo "machine's bandwidth reached.  docs/performance.md explains the cases, peers and floors."
    echo
    [ -f "$OUT/ratio.png" ] && echo "![ratio per case and CPU device](ratio.png)" && echo
    [ -f "$OUT/ratio-gpu.png" ] && echo "![ratio per case and GPU](ratio-gpu.png)" && echo
    [ -f "$OUT/compute.png" ] && echo "![compute-bound throughput](compute.png)" && echo
    [ -f "$OUT/bandwidth.png" ] && echo "![bandwidth-bound throughput](bandwidth.png)" && echo
    grep '^#dev' "$TMP/all.tsv" | while IFS='	' read -r _ d desc thr cg pg; do
        echo "## $d"
        echo
        if [ "$thr" -gt 0 ]; then echo "$desc, $thr threads."; else echo "$desc."; fi
        if [ "${cg:-0}" != 0 ]; then
            echo "Device-to-device copy: $cg GB/s (read + write); FP32 peak: $pg GFLOP/s."
        fi
        echo
        echo "| case | Lockstep | peer | peer time | ratio | rate |"
        echo "| --- | --- | --- | --- | --- | --- |"
        awk -F'\t' -v d="$d" '
        function t(ms) { return ms >= 1 ? sprintf("%.3f ms", ms) : ms >= 0.01 ? sprintf("%.1f us", ms * 1e3) : sprintf("%.2f us", ms * 1e3) }
        $1 == d && $3 <= 0 { printf "| %s | - | skip: %s | - | - | - |\n", $2, $9; next }
        $1 == d {
            rate = $7 > 0 ? sprintf("%.1f GFLOP/s", $7) : sprintf("%.1f GB/s", $8)
            pt = $5 > 0 ? t($5) : $9 != "" ? "skip: " $9 : "-"
            r = $5 > 0 ? sprintf("%.2f", $6) : "-"
            printf "| %s | %s | %s | %s | %s | %s |\n", $2, t($3), $4, pt, r, rate }' "$TMP/rows.tsv"
        echo
    done
} >"$OUT/index.md"
for j in "$TMP"/*.json; do
    cp "$j" "$OUT/"
done
if [ -n "$NOPLOT" ]; then
    echo "bench-report: wrote $OUT/index.md and the JSON, no plots (no gnuplot here): scripts/bench-report.sh -j $OUT -o DIR plots them where gnuplot is" >&2
    exit 1
fi
echo "bench-report: wrote $OUT/index.md and its plots" >&2
