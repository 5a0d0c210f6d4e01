"""Loading, devices, errors."""

import os
import subprocess
import sys

import numpy as np
import pytest

import lockstep


def test_versions():
    assert lockstep.library_version().count(".") == 2
    assert lockstep.contract_version() >= 1
    assert lockstep.__version__


def test_devices_and_names():
    names = lockstep.devices()
    assert "ref" in names
    for name in names:
        assert lockstep.device(name).name == name
    ref = lockstep.device("ref")
    assert ref.kind == "reference" and ref.host_memory
    assert lockstep.device("cpu").kind == "cpu"
    assert lockstep.device("auto").name in names
    assert lockstep.auto_reason()
    assert lockstep.device("ref") is ref  # one object per device
    assert lockstep.device(ref) is ref


def test_no_device():
    with pytest.raises(lockstep.NoDeviceError) as e:
        lockstep.device("no-such-device")
    assert e.value.status == 12
    assert e.value.status_name == "LK_ERR_NO_DEVICE"
    assert isinstance(e.value, LookupError)


def test_error_carries_last_error():
    x = np.ones((2, 5), np.float32)
    y = np.zeros((3, 5), np.float32)
    with pytest.raises(lockstep.BadShapeError) as e:
        lockstep.rmsnorm(x, out=y, device="ref")
    assert e.value.status == 3
    assert "lk_rmsnorm" in e.value.message
    assert isinstance(e.value, ValueError) and isinstance(e.value, lockstep.LockstepError)
    assert not y.any()  # nothing written on error


def test_error_classes_cover_every_status():
    from lockstep.errors import BY_STATUS
    assert sorted(BY_STATUS) == list(range(1, 17))
    for st, cls in BY_STATUS.items():
        assert cls.status == st
        assert issubclass(cls, lockstep.LockstepError)
        assert lockstep._lib.lk_status_string(st).decode().startswith("LK_ERR_")


def test_invalid_value_and_range():
    w = np.array([[1, 0, -1, 2]], np.int8)
    with pytest.raises(lockstep.InvalidValueError):
        lockstep.ternary_pack(w)
    table = np.zeros((4, 3), np.float32)
    with pytest.raises(lockstep.RangeError):
        lockstep.embedding(table, np.array([0, 4], np.int32))


def test_aliasing():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(lockstep.AliasingError):
        lockstep.softmax(x[:, :4], out=x[:, 2:6])


def test_bad_library_path_is_import_error():
    env = dict(os.environ, LOCKSTEP_LIBRARY="/nonexistent/liblockstep.so.0")
    p = subprocess.run([sys.executable, "-c", "import lockstep"], env=env,
                       capture_output=True, text=True)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "LOCKSTEP_LIBRARY" in p.stderr


def test_missing_library_names_what_to_install(tmp_path):
    # no LOCKSTEP_LIBRARY, no pkg-config, no loader path: the message says
    # what to install
    code = ("import ctypes, ctypes.util, subprocess\n"
            "ctypes.util.find_library = lambda n: None\n"
            "orig = ctypes.CDLL.__init__\n"
            "def no(self, name, *a, **k):\n"
            "    if 'lockstep' in str(name): raise OSError(name + ': not found')\n"
            "    orig(self, name, *a, **k)\n"
            "ctypes.CDLL.__init__ = no\n"
            "import lockstep\n")
    env = {k: v for k, v in os.environ.items() if k != "LOCKSTEP_LIBRARY"}
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert p.returncode != 0
    assert "apt install liblockstep0" in p.stderr and "make install" in p.stderr


def test_drivers_and_topology():
    ds = lockstep.drivers()
    names = [d["name"] for d in ds]
    assert "ref" in names and "cpu" in names
    ref = ds[names.index("ref")]
    assert ref["builtin"] and ref["status"] == "LK_OK" and ref["device_count"] >= 1
    topo = lockstep.topology()
    assert topo["cores"] >= 1 and topo["pus"] >= topo["cores"] and topo["source"]


def test_graph_capture_and_launch(rng):
    dev = lockstep.device("cpu")
    x = rng.standard_normal((3, 16)).astype(np.float32)
    y = np.zeros_like(x)
    with dev.queue.capture() as g:
        lockstep.rmsnorm(x, out=y, device=dev)
        s = lockstep.softmax(y, device=dev)   # a new Tensor, written at launch
    assert not y.any()                        # nothing ran while capturing
    assert g.ops == 2 and g.native is False
    for _ in range(2):
        x[:] = rng.standard_normal(x.shape)
        g.launch()
        want = lockstep.rmsnorm(x, device="ref")
        assert (y.view(np.uint32) == want.numpy().view(np.uint32)).all()
        assert (s.numpy().view(np.uint32) ==
                lockstep.softmax(want, device="ref").numpy().view(np.uint32)).all()
    with pytest.raises(lockstep.BadShapeError):   # validated at capture
        with dev.queue.capture():
            lockstep.rmsnorm(x, out=np.zeros((2, 16), np.float32), device=dev)
    assert not lockstep._lib.lk_queue_capturing(dev.queue._handle)
