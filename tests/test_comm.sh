#!/bin/sh
# The communicator under MPI (TAP): the collectives against the one-device
# reference (tests/test_comm.c) at 1, 2 and 3 ranks; `lockstep demo --tp`
# and `--pp` on the tiny model at 2 and 3 CPU ranks (uneven shares: at 3
# ranks one rank has no attention head), whose digests must equal the
# one-device runs; and failures: a rank that exits ends the whole job with
# an error (never a hang: each run has a time limit), a wrong rank count
# is a usage error.  Without MPI (configure --with-mpi) or mpirun: SKIP.
#
# Run from the build directory (as `make check` does); MPIRUN is
# configure's mpirun.  Open MPI runs as root only when told, and on a
# small machine only oversubscribed: both are set here.
set -u
LC_ALL=C
export LC_ALL
echo "1..10"
. "${srcdir:-.}/tests/tap.sh"
tap_lockstep
tap_tmp comm
mpirun=${MPIRUN:-mpirun}
limit=${LK_COMM_TIMEOUT:-120}
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
export OMPI_MCA_rmaps_base_oversubscribe OMPI_MCA_btl_vader_single_copy_mechanism
# one CPU thread per rank: the ranks share the machine
LOCKSTEP_NUM_THREADS=1
export LOCKSTEP_NUM_THREADS

reason=""
if [ -n "${LOCKSTEP_RUN:-}" ]; then
    reason="a cross build (its programs run under $LOCKSTEP_RUN, not mpirun)"
elif ./tests/test_comm > "$tmp/probe" 2>&1; grep -q "^1..0 # SKIP" "$tmp/probe"; then
    reason=$(sed -n 's/^1..0 # SKIP //p' "$tmp/probe")
elif ! command -v "$mpirun" >/dev/null 2>&1; then
    reason="no $mpirun on PATH"
fi
if [ -n "$reason" ]; then
    i=0
    while [ $i -lt 10 ]; do skip "the communicator under MPI" "$reason"; i=$((i + 1)); done
    exit 0
fi

# mpi NP ARGS...: the job under a time limit (124: it hung)
mpi() {
    np=$1
    shift
    timeout "$limit" "$mpirun" --oversubscribe -np "$np" "$@"
}

for np in 1 2 3; do
    mpi $np ./tests/test_comm > "$tmp/c$np.out" 2> "$tmp/c$np.err"
    rc=$?
    sed 's/^/# /' "$tmp/c$np.out" | grep -v '^# ok' | head -n 20
    [ $rc -eq 0 ] && ! grep -q "^not ok" "$tmp/c$np.out" && [ "$(grep -c '^ok' "$tmp/c$np.out")" -eq 14 ]
    ok $? "collectives at $np rank(s) equal the one-device reference (exit $rc)"
done

for mode in tp pp; do
    for np in 2 3; do
        mpi $np "$lockstep" demo --$mode $np --tiny --layers 3 --steps 2 --prompt-len 4 \
            --batch 1,3 --device cpu > "$tmp/$mode$np.out" 2>&1
        rc=$?
        [ $rc -eq 0 ] && has "$tmp/$mode$np.out" "identical logits" &&
            ! has "$tmp/$mode$np.out" "DIFFERENT"
        ok $? "demo --$mode $np: every step's logits are the one-device bits (exit $rc)"
        [ $rc -eq 0 ] || sed 's/^/# /' "$tmp/$mode$np.out" | tail -n 20
        grep '^  tp\|^  pp\|^  cpu' "$tmp/$mode$np.out" | sed 's/^/#/'
    done
done

# --graph at one rank: the decode layers as captured graphs (the core's
# replay on a CPU), the same bits
mpi 1 "$lockstep" demo --tp 1 --graph --tiny --steps 3 --batch 1,3 --device cpu > "$tmp/g.out" 2>&1
rc=$?
[ $rc -eq 0 ] && has "$tmp/g.out" "decode steps: captured graphs" && has "$tmp/g.out" "identical logits"
ok $? "demo --tp 1 --graph: captured decode steps give the one-device bits (exit $rc)"

# A rank that exits: the job ends, nonzero, before the time limit.
mpi 3 ./tests/test_comm --exit-rank 1 > "$tmp/x.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ]
ok $? "a rank that exits ends every rank (exit $rc, not a hang)"
sed 's/^/# /' "$tmp/x.out" | head -n 8

# --tp 3 under 2 ranks: a usage error on every rank, no hang
mpi 2 "$lockstep" demo --tp 3 --tiny > "$tmp/u.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && has "$tmp/u.out" "needs 3 ranks"
ok $? "--tp 3 under 2 ranks is refused (exit $rc)"
