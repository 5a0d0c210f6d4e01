"""Shared fixtures: a seeded generator (the seed printed), the devices to
compare, and bit-level comparison."""

import os

import numpy as np
import pytest

import lockstep

SEED = int(os.environ.get("LOCKSTEP_TEST_SEED", "20261128"))


def pytest_report_header(config):
    return [f"lockstep: {lockstep.library_path()} (version {lockstep.library_version()}), "
            f"seed {SEED} (LOCKSTEP_TEST_SEED)",
            f"devices: {', '.join(lockstep.devices())}"]


@pytest.fixture
def rng(request):
    # one stream per test, reproducible from the printed seed and its name
    seed = (SEED + sum(request.node.name.encode())) % (2 ** 32)
    print(f"seed {seed} (LOCKSTEP_TEST_SEED={SEED})")
    return np.random.default_rng(seed)


def host_devices():
    """ref, cpu and every CPU variant of this build (emulated ones too)."""
    out = []
    for name in lockstep.devices():
        d = lockstep.device(name)
        if d.host_memory and d.kind in ("reference", "cpu"):
            out.append(name)
    if "cpu" not in out:
        out.append("cpu")
    return out


def bits(a):
    """The memory of an array or Tensor as unsigned integers of its width."""
    if isinstance(a, lockstep.Tensor):
        return np.from_dlpack(a.to_host().bits()).copy()
    a = np.ascontiguousarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.itemsize])


def assert_same_bits(a, b):
    x, y = bits(a), bits(b)
    assert x.shape == y.shape
    diff = np.flatnonzero(x.ravel() != y.ravel())
    assert diff.size == 0, f"first difference at element {diff[0]}: {x.ravel()[diff[0]]:#x} != {y.ravel()[diff[0]]:#x}"
