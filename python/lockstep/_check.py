"""lockstep.cross_check: one op on several devices, compared bit for bit."""

import ctypes

from . import _dlpack as dl
from ._device import device as _find_device, devices as _devices
from ._tensor import ITEMSIZE, T2, Tensor, Typed, copy_to, view
from .errors import UnsupportedError


class Mismatch(AssertionError):
    """Raised by cross_check(..., strict=True) and CrossCheck.check()."""


def _foreign_gpu(obj):
    """Whether obj is a GPU array of another library with a .cpu() (a
    PyTorch CUDA tensor)."""
    if isinstance(obj, (Tensor, Typed)) or not hasattr(obj, "__dlpack_device__"):
        return False
    try:
        kind = obj.__dlpack_device__()[0]
    except (TypeError, ValueError, BufferError):
        return False
    return kind not in (dl.KDL_CPU, dl.KDL_CUDA_HOST) and callable(getattr(obj, "cpu", None))


def _on_host(obj):
    """A GPU array of another library copied to the host through its own
    .cpu(); anything else as it is."""
    return obj.cpu() if _foreign_gpu(obj) else obj


def _snapshot(obj):
    """(bytes, lk dtype, shape) of an op's output, read on the host."""
    if isinstance(obj, Tensor):
        return obj.tobytes(), obj.dtype, obj.shape
    obj = _on_host(obj)
    if hasattr(obj, "is_contiguous") and callable(getattr(obj, "contiguous", None)):
        obj = obj.contiguous()
    v = view(obj, "output")
    t = v.lk
    if isinstance(v.device, tuple) and v.device[0] not in (dl.KDL_CPU, dl.KDL_CUDA_HOST):
        raise TypeError("cross_check: compare lockstep.Tensors or host arrays")
    size = ITEMSIZE[t.dtype]
    if t.dtype == T2:
        row = (t.cols + 3) // 4
        step = t.ld // 4
    else:
        row, step = t.cols * size, t.ld * size
    data = b"".join(ctypes.string_at(t.data + r * step, row) for r in range(t.rows))
    return data, t.dtype, v.shape


def _first_difference(a, b):
    if len(a) != len(b):
        return min(len(a), len(b))
    for lo in range(0, len(a), 4096):
        if a[lo:lo + 4096] != b[lo:lo + 4096]:
            for i in range(lo, min(lo + 4096, len(a))):
                if a[i] != b[i]:
                    return i
    return None


def _unravel(i, shape):
    idx = []
    for s in reversed(shape):
        idx.append(i % s if s else 0)
        i = i // s if s else 0
    return tuple(reversed(idx))


class CrossCheck:
    """What cross_check found.  identical: every device that ran gave the
    first device's bits for every output; ran: device names; unsupported:
    {name: message} of devices that lack the op (not a mismatch);
    mismatches: [(device, output number, flat element index, index tuple,
    reference bits, device bits)] against the first device; outputs:
    {name: [bytes of each output]}.  bool(result) is identical."""

    def __init__(self):
        self.ran, self.unsupported, self.mismatches, self.outputs = [], {}, [], {}

    @property
    def identical(self):
        return not self.mismatches and bool(self.ran)

    def __bool__(self):
        return self.identical

    def check(self):
        """Raise Mismatch unless identical; return self."""
        if not self.identical:
            raise Mismatch(str(self))
        return self

    def __str__(self):
        if not self.ran:
            return "cross_check: no device ran the op"
        if self.identical:
            s = f"identical on {', '.join(self.ran)}"
        else:
            d, o, i, idx, want, got = self.mismatches[0]
            s = (f"{d} differs from {self.ran[0]}: output {o}, first at element {i} "
                 f"{idx}: {want} != {got}")
        if self.unsupported:
            s += f" (unsupported on {', '.join(self.unsupported)})"
        return s

    __repr__ = lambda self: f"<lockstep.CrossCheck {self}>"


def _onto(x, dev):
    """x copied to a device without host memory, when it is a tensor."""
    if isinstance(x, (Tensor, Typed)) or hasattr(x, "__dlpack__"):
        if _foreign_gpu(x):
            return x      # already GPU memory: the op reads it in place
        return copy_to(x, dev)
    return x


def _default_devices():
    out = []
    for name in _devices():
        if _find_device(name).kind in ("reference", "cpu", "gpu"):
            out.append(name)
    return out


def cross_check(fn, *args, devices=None, strict=False, **kwargs):
    """Run fn(*args, device=d, **kwargs) on each device (default: every
    reference, CPU and GPU device) and compare every output's bits with
    the first device's.  Host inputs are copied to devices without host
    memory; GPU arrays of other libraries (PyTorch CUDA tensors) are read
    in place by GPU devices and copied to the host for host devices.  A
    device that lacks the op (UnsupportedError) is reported, not counted
    as a mismatch.  Returns a CrossCheck; strict=True raises
    Mismatch on any difference."""
    names = list(devices) if devices is not None else _default_devices()
    r = CrossCheck()
    ref = None
    for name in names:
        dev = _find_device(name)
        a, kw = args, kwargs
        if dev.host_memory:
            # GPU arrays of other libraries (PyTorch CUDA tensors) come to the host
            a = tuple(_on_host(x) for x in args)
            kw = {k: _on_host(x) for k, x in kwargs.items()}
        else:
            a = tuple(_onto(x, dev) for x in args)
            kw = {k: _onto(x, dev) for k, x in kwargs.items()}
        try:
            res = fn(*a, device=dev, **kw)
        except UnsupportedError as e:
            r.unsupported[dev.name] = e.message
            continue
        outs = res if isinstance(res, tuple) else (res,)
        snaps = [_snapshot(o) for o in outs]
        r.ran.append(dev.name)
        r.outputs[dev.name] = [s[0] for s in snaps]
        if ref is None:
            ref = snaps
            continue
        for k, ((want, dt, shape), (got, _, _)) in enumerate(zip(ref, snaps)):
            b = _first_difference(want, got)
            if b is None:
                continue
            size = ITEMSIZE[dt]
            if dt == T2:
                e = b * 4 + next((j for j in range(4) if ((want[b] ^ got[b]) >> (2 * j)) & 3), 0)
                wbits, gbits = (want[b] >> (2 * (e % 4))) & 3, (got[b] >> (2 * (e % 4))) & 3
            else:
                e = b // size
                lo = e * size
                wbits = "0x" + want[lo:lo + size][::-1].hex()
                gbits = "0x" + got[lo:lo + size][::-1].hex()
            r.mismatches.append((dev.name, k, e, _unravel(e, shape), wbits, gbits))
    if strict:
        r.check()
    return r
