# What the shell tests share (sourced, POSIX sh; automake exports srcdir):
# a scratch directory removed at exit, numbered TAP lines, a text search.
# The sourcing script prints its own plan ("1..N") first.

# tap_tmp NAME: $tmp, a fresh directory under TMPDIR, gone at exit
tap_tmp() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/lk-$1.XXXXXX") || {
        echo "Bail out! mktemp failed"
        exit 1
    }
    trap 'rm -rf "$tmp"' EXIT
}

n=0
# ok CONDITION-STATUS DESCRIPTION: the next test line, from a status (0: ok)
ok() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
    fi
}
# skip DESCRIPTION REASON: the next test line, skipped
skip() {
    n=$((n + 1))
    echo "ok $n - $1 # SKIP $2"
}
# has FILE TEXT: FILE holds TEXT (a fixed string)
has() { grep -F -e "$2" "$1" >/dev/null 2>&1; }

# tap_lockstep: $lockstep, the `lockstep` binary under test (LOCKSTEP, by
# default ./tools/lockstep of the build directory); bails out without it
tap_lockstep() {
    lockstep=${LOCKSTEP:-./tools/lockstep}
    if [ ! -x "$lockstep" ]; then
        echo "Bail out! no $lockstep (run from the build directory)"
        exit 1
    fi
}
# lk ARGS...: run $lockstep, through LOCKSTEP_RUN when make sets it (a
# cross build's tests run the target's programs under qemu-user)
lk() {
    if [ -n "${LOCKSTEP_RUN:-}" ]; then
        eval "$LOCKSTEP_RUN \"\$lockstep\" \"\$@\""
    else
        "$lockstep" "$@"
    fi
}
