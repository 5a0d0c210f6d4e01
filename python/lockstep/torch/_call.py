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
from ..errors import BadShapeError, LockstepError, WrongDeviceError, check
from ._mode import current
from ._registry import NotCoveredError

LK_DTYPE = {torch.float32: 1, torch.bfloat16: 2, torch.float16: 3,
            torch.int8: 4, torch.int32: 5, torch.int64: 6}
FLOATS = (torch.float32, torch.bfloat16, torch.float16)
# cudaStreamLegacy: PyTorch's default stream is the legacy NULL stream,
# which a NULL native_stream would not name (the queue would make its own)
_LEGACY_STREAM = 1

_cuda_devices = {}   # CUDA ordinal -> lockstep Device
_queues = {}         # (Device, stream handle) -> Queue
_handles = {}        # (CUDA ordinal, stream handle) -> that queue's lk_queue handle
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


def _stream_of(index):
    # the raw handle of PyTorch's current stream, without building a
    # torch.cuda.Stream object (microseconds on every op)
    return torch.cuda.current_stream(index).cuda_stream


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or _stream_of


def _new_queue(index, stream):
    """The Lockstep queue on a CUDA stream, made on first use.  Making one
    allocates (its workspace), which CUDA refuses while the stream is
    being captured into a graph: run the block once on that stream first,
    or call prepare_stream."""
    dev = _cuda_device(index)
    with _lock:
        h = _handles.get((index, stream))
        if h is None:
            try:
                q = Queue(dev, native_stream=stream)
            except LockstepError as e:
                if torch.cuda.is_current_stream_capturing():
                    raise type(e)(e.status, f"{e.message} (a Lockstep queue for this stream "
                                  "is made on its first op, which cannot allocate under "
                                  "CUDA graph capture: call lockstep.torch.prepare_stream"
                                  "(stream) before capturing)") from None
                raise
            _queues[(dev, stream)] = q
            h = _handles[(index, stream)] = q._handle
    return h


def cuda_queue(tdev):
    """The lk_queue handle for a CUDA torch.device: a queue on PyTorch's
    current stream of that device."""
    index = tdev.index
    if index is None:
        index = torch.cuda.current_device()
    stream = _raw_stream(index) or _LEGACY_STREAM
    h = _handles.get((index, stream))
    return h if h is not None else _new_queue(index, stream)


def queue_for(tdev, host_device):
    """The lk_queue handle for a torch.device: the host device's queue for
    CPU tensors, a queue on PyTorch's current stream for CUDA tensors."""
    if tdev.type == "cpu":
        return host_device.queue._handle
    if tdev.type != "cuda":
        raise WrongDeviceError(7, f"exact mode runs CPU and CUDA tensors, not {tdev}")
    return cuda_queue(tdev)


def queue(tdev):
    """queue_for with the active exact mode's host device (the handle of
    its queue for this thread is kept on the mode)."""
    if tdev.type == "cpu":
        return current().host_qh
    return queue_for(tdev, None)


def prepare_stream(stream=None):
    """Make the Lockstep queue of a CUDA stream (default: the current one)
    now, so that exact mode can run under CUDA graph capture on it."""
    if stream is None:
        stream = torch.cuda.current_stream()
    index = stream.device.index
    if index is None:
        index = torch.cuda.current_device()
    h = stream.cuda_stream or _LEGACY_STREAM
    if _handles.get((index, h)) is None:
        _new_queue(index, h)


def run(fn, qh, *args):
    """One C call on a queue handle; a failure raises its LockstepError."""
    st = fn(qh, *args)
    if st:
        check(st)


def ref(t):
    return ctypes.byref(t)


def ptr_or_none(t):
    return None if t is None else ctypes.byref(t)


def empty(shape, dtype, device):
    return torch.empty(shape, dtype=dtype, device=device)


__all__ = ["LK_DTYPE", "FLOATS", "lk_tensor", "float_arg", "same_device", "same_shape",
           "queue_for", "queue", "cuda_queue", "prepare_stream", "run", "ref", "ptr_or_none", "empty", "lib", "LkTensor"]
