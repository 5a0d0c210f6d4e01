#!/bin/sh
# CI: the Python suite once more with PyTorch and transformers (CPU): exact
# mode (lockstep.torch) and the transformers model tests, against _build's
# library (scripts/test.sh builds it), in a venv of its own.
#
# pip's install of torch, numpy, pytest and transformers from PyPI took
# 2 min 10 s on a 2-core VM (the torch wheel alone, 540 MB: 18 s; with
# its CUDA libraries the venv is 5.6 GB).  TORCH_INDEX_URL takes torch
# from another index instead (https://download.pytorch.org/whl/cpu: the
# CPU-only wheel, smaller); TORCH_VENV reuses a venv.
# Without python3's venv module the step is skipped, saying why.
set -e
cd "$(dirname "$0")/.."
venv=${TORCH_VENV:-${TMPDIR:-/tmp}/lockstep-torch-venv}
if ! [ -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || {
        echo "ci-torch: SKIP: python3 -m venv failed (apt install python3-venv)"
        exit 0
    }
fi
start=$(date +%s)
"$venv/bin/pip" install -q ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"} torch
"$venv/bin/pip" install -q numpy pytest transformers
echo "ci-torch: pip install took $(( $(date +%s) - start )) s"
cd _build
make check TESTS=tests/test_python.sh PYTHON="$venv/bin/python" || {
    cat tests/test_python.log
    exit 1
}
grep -E "^(ok|not ok).*torch" tests/test_python.log | head -80
