"""DLPack both ways without copies, strides, ownership."""

import gc
import weakref

import numpy as np
import pytest

import lockstep
from conftest import assert_same_bits


def test_result_to_numpy_without_copy(rng):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    t = lockstep.rmsnorm(x)
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.shape == (3, 7)
    assert a.ctypes.data == t.data_ptr          # the same memory
    assert t.data_ptr % 64 == 0
    assert_same_bits(a, t.numpy())
    n = t.numpy()                                   # writable, the same memory
    n[0, 0] = 42
    assert n.ctypes.data == t.data_ptr and np.from_dlpack(t)[0, 0] == 42


def test_result_outlives_tensor_until_consumer_frees():
    t = lockstep.relu(np.arange(-3, 5, dtype=np.float32))
    ref = weakref.ref(t)
    a = np.from_dlpack(t)
    del t
    gc.collect()
    assert ref() is not None                    # kept alive by the array
    assert a.tolist() == [0, 0, 0, 0, 1, 2, 3, 4]
    del a
    gc.collect()
    assert ref() is None                        # the deleter released it


def test_unconsumed_capsule_releases_memory():
    t = lockstep.relu(np.ones(4, np.float32))
    ref = weakref.ref(t)
    for mv in (None, (1, 0)):
        cap = t.__dlpack__(max_version=mv)
        del cap
    del t
    gc.collect()
    assert ref() is None


def test_legacy_and_versioned_capsules():
    t = lockstep.relu(np.ones((2, 2), np.float32))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(t.__dlpack__())
    assert t.__dlpack_device__() == (1, 0)


def test_numpy_input_and_out_without_copy(rng):
    x = rng.standard_normal((4, 9)).astype(np.float32)
    out = np.empty_like(x)
    p = out.ctypes.data
    assert lockstep.softmax(x, out=out) is out
    assert out.ctypes.data == p
    assert_same_bits(out, lockstep.softmax(x))


def test_consumed_capsule_is_renamed_and_deleted():
    x = np.ones((2, 3), np.float32)
    from lockstep import _dlpack
    cap = x.__dlpack__()
    imp = _dlpack.Imported(cap)
    assert imp.shape == (2, 3) and imp.data == x.ctypes.data
    assert "used_dltensor" in repr(cap)
    imp.release()
    imp.release()                               # once only


def test_strided_rows_are_honoured(rng):
    big = rng.standard_normal((6, 20)).astype(np.float32)
    sub = big[1:5, 3:11]                        # ld 20, offset
    y = lockstep.rmsnorm(sub)
    assert_same_bits(y, lockstep.rmsnorm(np.ascontiguousarray(sub)))
    out = np.zeros((4, 40), np.float32)
    lockstep.rmsnorm(sub, out=out[:, ::1][:, 10:18])
    assert_same_bits(out[:, 10:18], y)
    assert not out[:, :10].any() and not out[:, 18:].any()


def test_unsupported_layouts_are_refused(rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    with pytest.raises(lockstep.BadLeadingDimError, match="stride"):
        lockstep.rmsnorm(x.T)
    with pytest.raises(lockstep.BadLeadingDimError, match="negative"):
        lockstep.rmsnorm(x[::-1])
    with pytest.raises(lockstep.BadLeadingDimError, match="collapse"):
        lockstep.rmsnorm(np.zeros((3, 4, 8), np.float32)[:, :2, :])
    with pytest.raises(lockstep.BadDtypeError):
        lockstep.rmsnorm(x.astype(np.float64))


def test_readonly_output_refused():
    x = np.ones((2, 2), np.float32)
    out = np.zeros((2, 2), np.float32)
    out.flags.writeable = False
    with pytest.raises((ValueError, BufferError)):
        lockstep.relu(x, out=out)


def test_bf16_export_and_bits():
    t = lockstep.convert(np.array([1.0, -2.5, 3.0], np.float32), "bf16")
    assert t.__dlpack__  # exported as DLPack bfloat16
    bits = np.from_dlpack(t.bits())
    assert bits.dtype == np.uint16 and bits.tolist() == [0x3F80, 0xC020, 0x4040]


def test_tensor_copies_and_empty():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lockstep.tensor(a)
    assert t.shape == (3, 4) and t.data_ptr != a.ctypes.data
    assert (t.numpy() == a).all()
    e = lockstep.empty((2, 5), "f16")
    assert e.nbytes == 20 and e.numpy().dtype == np.float16


def test_torch_round_trip(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    x = torch.from_numpy(rng.standard_normal((3, 8)).astype(np.float32))
    y = lockstep.rmsnorm(x)
    ty = torch.from_dlpack(y)
    assert ty.data_ptr() == y.data_ptr
    xb = x.to(torch.bfloat16)
    yb = lockstep.rmsnorm(xb)
    assert yb.dtype_name == "bf16"
    tb = torch.from_dlpack(yb)
    assert tb.dtype == torch.bfloat16
    out = torch.empty(3, 8)
    assert lockstep.rmsnorm(x, out=out) is out
    assert torch.equal(out.view(torch.int32), ty.view(torch.int32))


def test_torch_cuda_without_copy(rng):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    if "cuda:0" not in lockstep.devices():
        why = [f"{d['name']}: {d['status']} {d.get('message', '')}" for d in lockstep.drivers()
               if d["name"] == "cuda" or "cuda" in d.get("path", "")]
        pytest.skip("Lockstep has no cuda:0 (" + ("; ".join(why) or "no CUDA driver module found") + ")")
    a = rng.standard_normal((5, 300)).astype(np.float32)
    x = torch.from_numpy(a).to("cuda:0")
    out = torch.empty_like(x)
    assert lockstep.rmsnorm(x, out=out) is out          # PyTorch's memory in and out
    torch.cuda.synchronize()
    assert_same_bits(out.cpu().numpy(), lockstep.rmsnorm(a, device="ref"))
    y = lockstep.rmsnorm(x[1:])                          # a view one row in
    ty = torch.from_dlpack(y)
    assert ty.device.type == "cuda" and ty.data_ptr() == y.data_ptr
    assert_same_bits(ty.cpu().numpy(), lockstep.rmsnorm(a[1:], device="ref"))
    with pytest.raises(lockstep.WrongDeviceError):       # host memory on the GPU
        lockstep.rmsnorm(torch.from_numpy(a), device="cuda:0", out=out)


def test_readonly_input_is_read(rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    ro = x.copy()
    ro.flags.writeable = False
    assert_same_bits(lockstep.softmax(ro), lockstep.softmax(x))


class _NoReadonlyExport:
    """What numpy < 2 does with a read-only array: __dlpack__ refuses."""

    def __init__(self, a):
        self.a = a
        self.__array_interface__ = a.__array_interface__

    def __dlpack__(self, **kw):
        raise BufferError("Cannot export readonly array")

    def __dlpack_device__(self):
        return (1, 0)


def test_readonly_fallback_through_array_interface(rng):
    x = rng.standard_normal((4, 12)).astype(np.float32)
    sub = x[:, 2:9]
    assert_same_bits(lockstep.rmsnorm(_NoReadonlyExport(sub)), lockstep.rmsnorm(sub))
    with pytest.raises(BufferError):
        lockstep.relu(x, out=_NoReadonlyExport(x))


def test_queues_and_threads():
    import threading
    d = lockstep.device("cpu")
    seen = []
    t = threading.Thread(target=lambda: seen.append(d.queue))
    t.start()
    t.join()
    assert seen[0] is not d.queue            # one default queue per thread
    q = d.new_queue(num_threads=1)
    q.sync()


def test_jax_round_trip(rng):
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    jnp = jax.numpy
    a = rng.standard_normal((3, 8)).astype(np.float32)
    x = jax.device_put(a, jax.devices("cpu")[0])    # JAX's default may be a GPU
    y = lockstep.rmsnorm(x)
    assert_same_bits(y, lockstep.rmsnorm(a))
    j = jnp.from_dlpack(y)
    assert j.unsafe_buffer_pointer() == y.data_ptr   # no copy
    yb = lockstep.rmsnorm(x.astype(jnp.bfloat16))   # DLPack bfloat16 in
    assert yb.dtype_name == "bf16"
    jb = jnp.from_dlpack(yb)                         # and out
    assert jb.dtype == jnp.bfloat16
    assert_same_bits(np.asarray(jb).view(np.uint16), yb)


class _FakeCuda:
    """A producer that says its memory is CUDA device 0 (host memory in
    truth: nothing may read it), recording what it was asked."""

    def __init__(self, a):
        self.a = a
        self.asked = []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None, **kw):
        from lockstep import _dlpack
        self.asked.append(stream)
        return _dlpack.export(self, self.a.ctypes.data, (2, 0), (2, 32), self.a.shape,
                              [s // 4 for s in self.a.strides], max_version is not None)


def test_cuda_producer_protocol_without_a_gpu():
    fake = _FakeCuda(np.ones((2, 3), np.float32))
    with pytest.raises(lockstep.WrongDeviceError, match="DLPack device"):
        lockstep.relu(fake, device="ref")     # host devices refuse GPU memory
    assert fake.asked == [1]                  # DLPack's legacy default stream
    if "cuda:0" not in lockstep.devices():
        with pytest.raises(lockstep.NoDeviceError):
            lockstep.relu(fake)               # CUDA memory picks cuda:0
