"""What a call through the binding costs: one tiny op (relu of one f32
element) called N times (the fastest of three runs each) from C, through raw ctypes, and through the
lockstep API with lockstep.Tensors and with numpy arrays.

    python3 tools/call_overhead.py [--device cpu] [-n 100000]

The C loop is compiled with $CC and `pkg-config --cflags --libs lockstep`
(or $LOCKSTEP_CFLAGS / $LOCKSTEP_LIBS for a build tree); without a
compiler it is left out."""

import argparse
import ctypes
import os
import shlex
import subprocess
import tempfile
import time

import lockstep
from lockstep._lib import LkTensor, lib

C_LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <lockstep.h>
int main(int argc, char **argv)
{
    long n = atol(argv[2]);
    float x = -1.5f, y = 0;
    lk_context *ctx; lk_device *dev; lk_queue *q;
    if (lk_context_create(&ctx) || lk_device_find(ctx, argv[1], &dev) ||
        lk_queue_create(dev, NULL, &q))
        return fprintf(stderr, "%s\n", lk_last_error()), 1;
    lk_tensor tx = lk_mat(&x, LK_F32, 1, 1), ty = lk_mat(&y, LK_F32, 1, 1);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        if (lk_unary(q, LK_UNARY_RELU, &tx, &ty)) return 1;
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.9f\n", (b.tv_sec - a.tv_sec) + 1e-9 * (b.tv_nsec - a.tv_nsec));
    lk_queue_destroy(q);
    lk_context_destroy(ctx);
    return 0;
}
"""


def c_loop(device, n):
    cc = os.environ.get("CC", "cc")
    flags = os.environ.get("LOCKSTEP_CFLAGS")
    libs = os.environ.get("LOCKSTEP_LIBS")
    if flags is None or libs is None:
        try:
            flags = subprocess.run(["pkg-config", "--cflags", "lockstep"], capture_output=True,
                                   text=True, check=True).stdout
            libs = subprocess.run(["pkg-config", "--libs", "lockstep"], capture_output=True,
                                  text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "loop.c"), os.path.join(d, "loop")
        with open(src, "w") as f:
            f.write(C_LOOP)
        try:
            subprocess.run([cc, "-O2", "-o", exe, src] + shlex.split(flags) + shlex.split(libs),
                           check=True)
            out = subprocess.run([exe, device, str(n)], capture_output=True, text=True,
                                 check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
    return float(out)


def timed(fn, n, repeat=3):
    """The fastest of repeat runs of n calls (the others met more noise)."""
    fn()
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        t = time.perf_counter() - t
        best = t if best is None else min(best, t)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("-n", type=int, default=100000)
    a = ap.parse_args()
    dev = lockstep.device(a.device)
    q = dev.queue
    rows = []
    c = c_loop(dev.name, a.n)
    c = min(c, c_loop(dev.name, a.n), c_loop(dev.name, a.n)) if c is not None else None
    if c is not None:
        rows.append(("C loop (lk_unary)", c))
    x, y = ctypes.c_float(-1.5), ctypes.c_float(0)
    tx = LkTensor(ctypes.addressof(x), 1, 1, 1, 1, 0)
    ty = LkTensor(ctypes.addressof(y), 1, 1, 1, 1, 0)
    bx, by, h, f = ctypes.byref(tx), ctypes.byref(ty), q._handle, lib.lk_unary
    rows.append(("raw ctypes lk_unary", timed(lambda: f(h, 2, bx, by), a.n)))
    t = lockstep.tensor([[-1.5]], device=dev)
    u = lockstep.empty((1, 1), device=dev)
    rows.append(("lockstep.relu(Tensor, out=Tensor)",
                 timed(lambda: lockstep.relu(t, out=u, device=dev), a.n)))
    rows.append(("lockstep.relu(Tensor) (new result)",
                 timed(lambda: lockstep.relu(t, device=dev), a.n)))
    try:
        import numpy as np
        xn, yn = np.array([[-1.5]], np.float32), np.zeros((1, 1), np.float32)
        rows.append(("lockstep.relu(ndarray, out=ndarray)",
                     timed(lambda: lockstep.relu(xn, out=yn, device=dev), a.n)))
    except ImportError:
        pass
    print(f"{a.n} calls of relu on one f32 element, device {dev.name} "
          f"(library {lockstep.library_path()}):")
    for name, s in rows:
        print(f"  {name:40s} {s / a.n * 1e6:8.3f} us/call")


if __name__ == "__main__":
    main()
