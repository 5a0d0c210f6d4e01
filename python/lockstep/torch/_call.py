"""PyTorch tensors as lk_tensors, and the queue an op runs on.

No DLPack round trip: an lk_tensor is built from the tensor's data_ptr,
shape and strides (the binding's own layout rules, lockstep._tensor._lk),
and outputs are torch.empty tensors that Lockstep writes in place.  CPU
tensors run on the host device exact mode was given ("cpu" by default);
CUDA tensors on the Lockstep device of the same GPU, through a queue that
adopts PyTorch's current stream (lk_queue_opts.native_stream), so Lockstep
kernels are ordered with PyTorch's without any synchronisation."""

import ctypes
import math
import threading

import torch

from .._device import Queue, device as _find_device, devices as _devices
from .._lib import LkTensor, lib
from .._tensor import _cuda_ordinal, _lk
from ..errors import BadShapeError, WrongDeviceError, check
from ._registry import NotCoveredError

LK_DTYPE = {torch.float32: 1, torch.bfloat16: 2, torch.float16: 3,
            torch.int8: 4, torch.int32: 5, torch.int64: 6}
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
# cudaStreamLegacy: PyTorch's default stream is the legacy NULL stream,
# which a NULL native_stream would not name (the queue would make its own)
_LEGACY_STREAM = 1

_cuda_devices = {}   # CUDA ordinal -> lockstep Device
_queues = {}         # (Device, stream handle) -> Queue
_lock = threading.Lock()


def lk_tensor(t, what, mode="rows"):
    """(LkTensor, batch) of a torch tensor: rows x cols with ld (mode
    "rows"), a batch of those ("batched"), or one evenly strided column
    ("column").  BadLeadingDimError names what for layouts lk_tensor
    cannot express; NotCoveredError for dtypes without an lk_dtype."""
    code = LK_DTYPE.get(t.dtype)
    if code is None:
        raise NotCoveredError(what.split(":")[0], f"{what.split(': ')[-1]}: dtype {t.dtype} "
                              "has no Lockstep equivalent")
    if mode != "batched" and t.is_contiguous():
        # the common case, without the general walk of _lk
        if mode == "column":
            return LkTensor(t.data_ptr(), code, t.numel(), 1, 1, 0), 1
        shape = t.shape
        cols = shape[-1] if shape else 1
        return LkTensor(t.data_ptr(), code, math.prod(shape[:-1]), cols, cols or 1, 0), 1
    return _lk(t.data_ptr(), code, tuple(t.shape), tuple(t.stride()), mode, what)


def float_arg(t, op, name):
    """Check t is a float tensor Lockstep takes (f32, bf16, f16)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name}: a tensor is required, not {type(t).__name__}")
    if t.dtype not in FLOATS:
        raise NotCoveredError(op, f"{name}: dtype {t.dtype} (Lockstep computes f32, bf16 and "
                              "f16 tensors)")
    return t


def same_device(op, **tensors):
    """The torch.device every tensor argument lives on; WrongDeviceError
    names the first one elsewhere."""
    dev = None
    first = None
    for name, t in tensors.items():
        if t is None:
            continue
        if dev is None:
            dev, first = t.device, name
        elif t.device != dev:
            raise WrongDeviceError(7, f"{op}: {name} is on {t.device}, {first} on {dev}")
    return dev


def same_shape(op, name, t, shape, other):
    if tuple(t.shape) != tuple(shape):
        raise BadShapeError(3, f"{op}: {name}: shape {tuple(t.shape)} does not match "
                            f"{other} {tuple(shape)}")


def _cuda_device(index):
    d = _cuda_devices.get(index)
    if d is None:
        with _lock:
            for name in _devices():
                dev = _find_device(name)
                if dev.kind == "gpu" and not dev.host_memory:
                    _cuda_devices.setdefault(_cuda_ordinal(dev), dev)
        d = _cuda_devices.get(index)
        if d is None:
            raise WrongDeviceError(7, f"Lockstep has no device for cuda:{index} (devices: "
                                   f"{', '.join(_devices())}; is LOCKSTEP_DRIVER_PATH set to "
                                   "the CUDA driver module's directory?)")
    return d


def queue_for(tdev, host_device):
    """The lk_queue handle for a torch.device: the host device's queue for
    CPU tensors, a queue on PyTorch's current stream for CUDA tensors."""
    if tdev.type == "cpu":
        return host_device.queue._handle
    if tdev.type != "cuda":
        raise WrongDeviceError(7, f"exact mode runs CPU and CUDA tensors, not {tdev}")
    index = tdev.index if tdev.index is not None else torch.cuda.current_device()
    dev = _cuda_device(index)
    stream = torch.cuda.current_stream(index).cuda_stream or _LEGACY_STREAM
    q = _queues.get((dev, stream))
    if q is None:
        with _lock:
            q = _queues.get((dev, stream))
            if q is None:
                q = _queues[(dev, stream)] = Queue(dev, native_stream=stream)
    return q._handle


def run(fn, qh, *args):
    """One C call on a queue handle; a failure raises its LockstepError."""
    check(fn(qh, *args))


def ref(t):
    return ctypes.byref(t)


def ptr_or_none(t):
    return None if t is None else ctypes.byref(t)


def empty(shape, dtype, device):
    return torch.empty(shape, dtype=dtype, device=device)


__all__ = ["LK_DTYPE", "FLOATS", "lk_tensor", "float_arg", "same_device", "same_shape",
           "queue_for", "run", "ref", "ptr_or_none", "empty", "lib", "LkTensor"]
