"""Tensors: lockstep.Tensor (memory the binding owns, exported through
DLPack) and the translation of any DLPack object into an lk_tensor."""

import ctypes
import weakref

from . import _dlpack as dl
from ._device import CTX, Device, default_device, device as _find_device
from ._lib import lib, LkTensor
from .errors import (BadDtypeError, BadLeadingDimError, BadShapeError,
                     WrongDeviceError, check)

F32, BF16, F16, I8, I32, I64, T2 = 1, 2, 3, 4, 5, 6, 7
DTYPES = {"f32": F32, "bf16": BF16, "f16": F16, "i8": I8, "i32": I32,
          "i64": I64, "t2": T2}
NAMES = {v: k for k, v in DTYPES.items()}
ALIASES = {"float32": "f32", "bfloat16": "bf16", "float16": "f16",
           "int8": "i8", "int32": "i32", "int64": "i64", "ternary": "t2"}
ITEMSIZE = {F32: 4, BF16: 2, F16: 2, I8: 1, I32: 4, I64: 8, T2: 1}
FLOATS = (F32, BF16, F16)
# (DLPack code, bits) <-> lk_dtype
_DL_TO_LK = {(dl.KDL_FLOAT, 32): F32, (dl.KDL_BFLOAT, 16): BF16,
             (dl.KDL_FLOAT, 16): F16, (dl.KDL_INT, 8): I8,
             (dl.KDL_INT, 32): I32, (dl.KDL_INT, 64): I64}
_LK_TO_DL = {v: k for k, v in _DL_TO_LK.items()}
_LK_TO_DL[T2] = (dl.KDL_UINT, 8)  # packed bytes, 4 codes each
# the storage of each dtype as unsigned bits (Tensor.bits(), numpy views)
_LK_TO_UINT = {F32: (dl.KDL_UINT, 32), BF16: (dl.KDL_UINT, 16),
               F16: (dl.KDL_UINT, 16), I8: (dl.KDL_UINT, 8),
               I32: (dl.KDL_UINT, 32), I64: (dl.KDL_UINT, 64), T2: (dl.KDL_UINT, 8)}


def dtype_code(d):
    """lk_dtype of "f32", "bf16", "f16", "i8", "i32", "i64", "t2" (or the
    long names float32, bfloat16, ...)."""
    if isinstance(d, int) and d in NAMES:
        return d
    s = str(d)
    s = s.rsplit(".", 1)[-1]  # numpy.float32, torch.bfloat16
    s = ALIASES.get(s, s)
    if s not in DTYPES:
        raise BadDtypeError(6, f"unknown dtype {d!r} (one of {', '.join(DTYPES)})")
    return DTYPES[s]


# --- typed views of foreign memory ----------------------------------------

class Typed:
    """Another object's memory read as an lk dtype DLPack cannot name:
    bf16 held in a uint16/int16 array (numpy has no bfloat16), f16 in
    uint16, or packed ternary ("t2") in a uint8 array of rows x bytes
    with cols the logical column count (default: 4 per byte)."""

    __slots__ = ("obj", "dtype", "cols")

    def __init__(self, obj, dtype, cols=None):
        self.obj = obj
        self.dtype = dtype_code(dtype)
        self.cols = cols


def bf16(obj):
    """obj (a uint16 array of bfloat16 bits) read as bf16."""
    return Typed(obj, BF16)


def f16(obj):
    """obj (a float16 or uint16 array) read as f16."""
    return Typed(obj, F16)


def t2(obj, cols=None):
    """obj (uint8, rows x ceil(cols / 4) bytes or wider) read as packed
    ternary with cols columns (docs/formats.md)."""
    return Typed(obj, T2, cols)


# --- an lk_tensor from shape and strides -----------------------------------

class View:
    """What an op needs of one argument: the lk_tensor, the logical shape,
    where the memory is, and what keeps it alive during the call."""

    __slots__ = ("lk", "shape", "device", "dtype", "batch", "keep", "readonly")

    @property
    def rows(self):
        return self.lk.rows

    @property
    def cols(self):
        return self.lk.cols


def _lk(data, dtype, shape, strides, mode, what, t2_cols=None):
    """(LkTensor, batch) for memory of a shape and element strides.

    mode "rows": the last dim is cols, the others collapse into rows (they
    must be evenly strided); "batched": the same after a leading batch dim
    (when ndim >= 3); "column": all elements one column (rows x 1, ld the
    uniform stride), for per-row scalars (scales, positions, ids);
    "batched_column": a leading batch dim, then a column."""
    n = len(shape)
    if mode == "rows" and dtype != T2 and n <= 2:
        # the common layouts, decided without the general walk below
        if n == 2:
            r, c = shape
            if strides is None:
                return LkTensor(data, dtype, r, c, c if c > 0 else 1, 0), 1
            s0, s1 = strides
            if (s1 == 1 or c <= 1) and s0 >= c and s0 >= 0:
                return LkTensor(data, dtype, r, c, s0 if r > 1 else (c if c > 0 else 1), 0), 1
        elif n == 1:
            c = shape[0]
            if strides is None or strides[0] == 1 or c <= 1:
                return LkTensor(data, dtype, 1, c, c if c > 0 else 1, 0), 1
    if strides is None:
        strides, acc = [0] * n, 1
        for i in range(n - 1, -1, -1):
            strides[i] = acc
            acc *= shape[i]
    strides = list(strides)
    for s, e in zip(shape, strides):
        if e < 0 and s > 1:
            raise BadLeadingDimError(
                4, f"{what}: negative strides {tuple(strides)} (lk_tensor has none): copy first")
    batch, bstride = 1, 0
    if mode in ("batched", "batched_column") and n >= (3 if mode == "batched" else 2):
        batch, bstride = shape[0], strides[0] if shape[0] > 1 else 0
        shape, strides = shape[1:], strides[1:]
        n -= 1
    if mode in ("column", "batched_column"):
        total, step = 1, None
        for s, e in zip(shape, strides):
            total *= s
        # the elements must lie at one uniform step, row-major
        live = [(s, e) for s, e in zip(shape, strides) if s > 1]
        for i in range(len(live) - 1):
            if live[i][1] != live[i + 1][1] * live[i + 1][0]:
                raise BadLeadingDimError(
                    4, f"{what}: shape {tuple(shape)} with strides {tuple(strides)} "
                    "is not one evenly strided column: copy first")
        step = live[-1][1] if live else 1
        t = LkTensor(data, dtype, total, 1, max(step, 1), bstride)
        return t, batch
    if n == 0:
        rows, cols, ld = 1, 1, 1
        inner = 1
    else:
        cols, inner = shape[-1], strides[-1]
        lead = list(zip(shape[:-1], strides[:-1]))
        rows = 1
        for s, _ in lead:
            rows *= s
        live = [(s, e) for s, e in lead if s > 1]
        for i in range(len(live) - 1):
            if live[i][1] != live[i + 1][1] * live[i + 1][0]:
                raise BadLeadingDimError(
                    4, f"{what}: leading dims {tuple(shape[:-1])} with strides "
                    f"{tuple(strides[:-1])} do not collapse into rows: copy first")
        ld = live[-1][1] if live else None
    if cols > 1 and inner != 1:
        raise BadLeadingDimError(
            4, f"{what}: the last dim has stride {inner}; lk_tensor rows are "
            "contiguous (a transposed view? use trans_a/trans_b or copy first)")
    if dtype == T2:  # shape and strides count bytes here
        nbytes = cols
        cols = nbytes * 4 if t2_cols is None else t2_cols
        if cols > nbytes * 4:
            raise BadShapeError(3, f"{what}: cols {cols} do not fit {nbytes} bytes a row")
        ld = ld * 4 if ld is not None else nbytes * 4
        bstride *= 4
    if ld is None:
        ld = max(cols, 1)
    if rows > 1 and ld < cols:
        raise BadLeadingDimError(4, f"{what}: rows overlap (stride {ld} < cols {cols})")
    return LkTensor(data, dtype, rows, cols, ld, bstride), batch


def view(obj, what, mode="rows", writable=False, stream=None):
    """The View of an argument: a lockstep.Tensor, a Typed wrapper or any
    object with __dlpack__ (a list or scalar goes through numpy as f32)."""
    v = View()
    v.readonly = False
    t2_cols = None
    want = None
    if isinstance(obj, Typed):
        want, t2_cols, obj = obj.dtype, obj.cols, obj.obj
    if want is None and type(obj) is Tensor:
        # the common case, cached per mode: no DLPack round trip
        if obj._freed:
            raise ValueError(f"{what}: the tensor's memory is gone (context destroyed)")
        c = obj._views.get(mode)
        if c is None:
            t, b = _lk(obj._ptr, obj.dtype, obj._store_shape, None, mode, what,
                       obj.shape[-1] if obj.dtype == T2 else None)
            c = obj._views[mode] = (bytes(t), b)
        v.lk = LkTensor.from_buffer_copy(c[0])
        v.batch = c[1]
        v.keep = obj
        v.device = obj.device
        v.dtype = obj.dtype
        v.shape = obj.shape
        return v
    if isinstance(obj, Tensor):
        if obj._freed:
            raise ValueError(f"{what}: the tensor's memory is gone (context destroyed)")
        v.keep = obj
        v.device = obj.device
        data, shape, strides, dtype = obj._ptr, obj._store_shape, None, obj.dtype
        if dtype == T2 and t2_cols is None:
            t2_cols = obj.shape[-1]
        if want is not None and want != dtype:
            if ITEMSIZE[want] != ITEMSIZE[dtype]:
                raise BadDtypeError(6, f"{what}: {NAMES[dtype]} cannot be read as {NAMES[want]}")
            dtype = want
    else:
        if not hasattr(obj, "__dlpack__"):
            try:
                import numpy
            except ImportError:
                raise TypeError(f"{what}: {type(obj).__name__} has no __dlpack__") from None
            obj = numpy.ascontiguousarray(obj, dtype=numpy.float32)
        try:
            imp = dl.import_dlpack(obj, _import_stream(obj) if stream is None else stream)
        except BufferError:
            # numpy < 2 refuses to export read-only arrays through DLPack:
            # an input may still be read through __array_interface__
            ai = getattr(obj, "__array_interface__", None)
            if ai is None or writable:
                raise
            imp = _ArrayInterface(obj, ai, what)
        v.keep = imp
        v.readonly = imp.readonly
        v.device = imp.device
        code, bits, lanes = imp.dtype
        if lanes != 1:
            raise BadDtypeError(6, f"{what}: vector dtypes (lanes {lanes}) are not supported")
        dtype = _DL_TO_LK.get((code, bits))
        if want is not None:
            if bits != ITEMSIZE[want] * 8 or code not in (dl.KDL_INT, dl.KDL_UINT,
                                                          dl.KDL_FLOAT, dl.KDL_BFLOAT):
                raise BadDtypeError(
                    6, f"{what}: a {bits}-bit element cannot hold {NAMES[want]}")
            dtype = want
        if dtype is None:
            hint = {16: " (wrap bfloat16 bits with lockstep.bf16(x))",
                    8: " (wrap packed ternary bytes with lockstep.t2(x, cols))"}.get(bits, "")
            raise BadDtypeError(
                6, f"{what}: DLPack dtype code {code}, {bits} bits has no lk_dtype{hint}")
        data, shape, strides = imp.data, imp.shape, imp.strides
    if writable and v.readonly:
        raise ValueError(f"{what}: the output is read-only")
    v.lk, v.batch = _lk(data, dtype, shape, strides, mode, what, t2_cols)
    v.dtype = dtype
    v.shape = tuple(shape) if dtype != T2 else tuple(shape[:-1]) + (v.lk.cols,)
    return v


_TYPESTR = {"f4": (dl.KDL_FLOAT, 32), "f2": (dl.KDL_FLOAT, 16), "i1": (dl.KDL_INT, 8),
            "u1": (dl.KDL_UINT, 8), "i2": (dl.KDL_INT, 16), "u2": (dl.KDL_UINT, 16),
            "i4": (dl.KDL_INT, 32), "u4": (dl.KDL_UINT, 32), "i8": (dl.KDL_INT, 64),
            "u8": (dl.KDL_UINT, 64), "f8": (dl.KDL_FLOAT, 64)}


class _ArrayInterface:
    """A read-only host array seen through __array_interface__, with the
    attributes of dl.Imported."""

    def __init__(self, obj, ai, what):
        ts = ai["typestr"]
        if ts[0] == ">" or ts[1:] not in _TYPESTR:
            raise BadDtypeError(6, f"{what}: array type {ts!r} has no lk_dtype")
        size = int(ts[2:])
        self.keep = obj
        self.data = ai["data"][0] + ai.get("offset", 0)
        self.device = (dl.KDL_CPU, 0)
        self.shape = tuple(ai["shape"])
        st = ai.get("strides")
        if st is not None and any(s % size for s in st):
            raise BadLeadingDimError(4, f"{what}: strides {st} are not whole elements")
        self.strides = None if st is None else tuple(s // size for s in st)
        self.dtype = _TYPESTR[ts[1:]] + (1,)
        self.readonly = True


_cudart = []


def _cuda_runtime():
    """The CUDA runtime library (loaded once), or None without one."""
    if not _cudart:
        for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
            try:
                _cudart.append(ctypes.CDLL(name))
                break
            except OSError:
                continue
        else:
            _cudart.append(None)
    return _cudart[0]


def _import_stream(obj):
    """The stream= to give a producer: None for host memory.  For CUDA
    memory the producer orders its work before the legacy default stream
    (DLPack's stream 1) and the binding waits for that stream through the
    CUDA runtime, since a Lockstep queue's own stream is not ordered
    after it."""
    try:
        kind, ordinal = obj.__dlpack_device__()
    except (AttributeError, TypeError, ValueError):
        return None
    if kind != dl.KDL_CUDA:
        return None
    return _CudaLegacy(ordinal)


class _CudaLegacy(int):
    """stream=1 for the producer; after the export, wait for that stream."""

    def __new__(cls, ordinal):
        self = super().__new__(cls, 1)
        self.ordinal = ordinal
        return self

    def wait(self):
        rt = _cuda_runtime()
        if rt is None:
            return
        cur = ctypes.c_int(0)
        rt.cudaGetDevice(ctypes.byref(cur))
        rt.cudaSetDevice(self.ordinal)
        rt.cudaStreamSynchronize(ctypes.c_void_p(1))  # cudaStreamLegacy
        rt.cudaSetDevice(cur.value)


def resolve_device(views, device):
    """The Device an op runs on: device= if given, else the device of a
    lockstep.Tensor argument, else cuda:N for a CUDA DLPack input, else the
    default host device.  Foreign memory the device cannot reach is
    refused here with WrongDeviceError."""
    if device is not None:
        dev = device if isinstance(device, Device) else _find_device(device)
    else:
        dev = None
        for v in views:
            if isinstance(v.device, Device):
                dev = v.device
                break
        if dev is None:
            for v in views:
                if v.device[0] == dl.KDL_CUDA:
                    dev = _find_device(f"cuda:{v.device[1]}")
                    break
        if dev is None:
            dev = default_device(host=True)
    for v in views:
        if isinstance(v.device, tuple):
            host = v.device[0] in (dl.KDL_CPU, dl.KDL_CUDA_HOST)
            if dev.host_memory and not host:
                raise WrongDeviceError(
                    7, f"{dev.name} reads host memory; an argument lives on DLPack "
                    f"device {v.device}")
    return dev


# --- tensors the binding owns ----------------------------------------------

def _cuda_ordinal(dev):
    """The CUDA ordinal of a GPU device, for __dlpack_device__: found
    through its PCI bus id with the CUDA runtime when it can be loaded,
    else the number in its name."""
    rt = _cuda_runtime()
    n = ctypes.c_int(-1)
    if rt is not None and dev.pci_bus_id and rt.cudaDeviceGetByPCIBusId(
            ctypes.byref(n), dev.pci_bus_id.encode()) == 0:
        return n.value
    tail = dev.name.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _free_device(handle, ptr):
    if CTX.alive:
        lib.lk_free(handle, ptr)


class Tensor:
    """Memory the binding allocated for a result: host memory (a ctypes
    buffer, 64-byte aligned) for host-memory devices, lk_malloc'd memory
    on a GPU.  Export it without copying through DLPack
    (numpy.from_dlpack(t), torch.from_dlpack(t)); the memory lives as long
    as this object or any array made from it.

    shape is the logical shape; t2 tensors export their packed bytes
    (rows x ld/4 uint8).  numpy has no bfloat16: t.numpy() gives bf16 bits
    as uint16."""

    def __init__(self, shape, dtype, device):
        dev = _find_device(device)
        self.dtype = dtype_code(dtype)
        self.shape = tuple(int(s) for s in shape)
        self.device = dev
        self._freed = False
        self._views = {}
        if self.dtype == T2:
            rows = 1
            for s in self.shape[:-1]:
                rows *= s
            cols = self.shape[-1] if self.shape else 1
            self._store_shape = self.shape[:-1] + ((cols + 3) // 4,)
        else:
            self._store_shape = self.shape
        n = 1
        for s in self._store_shape:
            n *= s
        self.nbytes = n * ITEMSIZE[self.dtype]
        want = max(self.nbytes, 1)
        if dev.host_memory:
            self._buf = (ctypes.c_uint8 * (want + 63))()
            base = ctypes.addressof(self._buf)
            self._ptr = (base + 63) // 64 * 64
        else:
            p = ctypes.c_void_p()
            check(lib.lk_malloc(dev._handle, want, ctypes.byref(p)))
            self._buf = None
            self._ptr = p.value
            self._fin = weakref.finalize(self, _free_device, dev._handle, p.value)

    @property
    def data_ptr(self):
        return self._ptr

    @property
    def dtype_name(self):
        return NAMES[self.dtype]

    @property
    def _freed(self):
        return self.__dict__.get("_gone", False) or (
            not self.device.host_memory and not CTX.alive)

    @_freed.setter
    def _freed(self, value):
        self.__dict__["_gone"] = value

    def __repr__(self):
        return (f"<lockstep.Tensor {NAMES[self.dtype]}{list(self.shape)} "
                f"on {self.device.name}>")

    def _strides(self):
        st, acc = [0] * len(self._store_shape), 1
        for i in range(len(st) - 1, -1, -1):
            st[i] = acc
            acc *= self._store_shape[i]
        return st

    def __dlpack_device__(self):
        if self.device.host_memory:
            return (dl.KDL_CPU, 0)
        return (dl.KDL_CUDA, _cuda_ordinal(self.device))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._export(_LK_TO_DL[self.dtype], stream, max_version, dl_device, copy)

    def _export(self, dtype, stream, max_version, dl_device, copy):
        if self._freed:
            raise BufferError("lockstep: the tensor's memory is gone (context destroyed)")
        mine = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != mine:
            raise BufferError(f"lockstep: the tensor lives on {mine}, not {tuple(dl_device)}")
        if copy:
            raise BufferError("lockstep: Tensor exports its own memory only (copy=True)")
        if not self.device.host_memory:
            # the consumer may read on any stream: our queue's work first
            self.device.queue.sync()
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dl.export(self, self._ptr, mine, dtype, self._store_shape,
                         self._strides(), versioned)

    def bits(self):
        """A DLPack view of the same memory as unsigned integers of the
        element's width (uint16 for bf16 and f16, uint32 for f32, ...)."""
        return _Bits(self)

    def to_host(self):
        """This tensor on the host: itself on a host-memory device, a copy
        otherwise."""
        if self.device.host_memory:
            return self
        return copy_to(self, _find_device("cpu"))

    def to(self, device):
        """A copy on device (itself if it already lives there)."""
        dev = _find_device(device)
        return self if dev == self.device else copy_to(self, dev)

    def tobytes(self):
        h = self.to_host()
        return ctypes.string_at(h._ptr, h.nbytes)

    def numpy(self):
        """A numpy array of the memory (no copy on host-memory devices);
        bf16 as uint16 bits, t2 as its packed bytes."""
        import numpy
        h = self.to_host()
        a = numpy.from_dlpack(h.bits() if h.dtype == BF16 else h)
        if not a.flags.writeable:
            # numpy < 2 marks every DLPack import read-only; this memory is
            # ours to hand out writable: the same bytes through a ctypes
            # array that keeps the tensor alive
            buf = (ctypes.c_uint8 * h.nbytes).from_address(h._ptr)
            buf._owner = h
            a = numpy.frombuffer(buf, dtype=a.dtype).reshape(a.shape)
        return a


class _Bits:
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.t._export(_LK_TO_UINT[self.t.dtype], stream, max_version, dl_device, copy)


def copy_to(src, dev):
    """A Tensor on dev with src's bytes: src a Tensor, or a compact host
    DLPack object (copied in, for devices without host memory)."""
    dev = _find_device(dev)
    if isinstance(src, Tensor):
        out = Tensor(src.shape, src.dtype, dev)
        if src.device.host_memory and dev.host_memory:
            ctypes.memmove(out._ptr, src._ptr, src.nbytes)
            return out
        if src.device.host_memory:
            kind, q = 1, dev.queue
        elif dev.host_memory:
            kind, q = 2, src.device.queue
        elif src.device == dev:
            kind, q = 3, dev.queue
        else:  # GPU to GPU of two devices: through the host
            return copy_to(copy_to(src, _find_device("cpu")), dev)
        check(lib.lk_memcpy(q._handle, out._ptr, src._ptr, src.nbytes, kind))
        q.sync()
        return out
    v = view(src, "tensor")
    if isinstance(v.device, tuple) and v.device[0] not in (dl.KDL_CPU, dl.KDL_CUDA_HOST):
        raise WrongDeviceError(7, "lockstep.tensor copies from host memory only")
    t = v.lk
    compact = t.rows <= 1 or t.ld == t.cols or (t.dtype == T2 and t.ld == (t.cols + 3) // 4 * 4)
    host = Tensor(v.shape, v.dtype, _find_device("cpu"))
    if compact and v.batch == 1:
        ctypes.memmove(host._ptr, t.data, host.nbytes)
    else:
        raise BadLeadingDimError(4, "lockstep.tensor: copy a strided array with numpy first")
    del v
    return host if dev.host_memory else copy_to(host, dev)


def tensor(obj, device=None, dtype=None):
    """A lockstep.Tensor holding a copy of obj (any DLPack object or a
    list, compact, on the host) on device (default: the host device).
    dtype reinterprets the bits (bf16 for uint16, t2 for uint8)."""
    dev = default_device() if device is None else _find_device(device)
    if dtype is not None:
        obj = Typed(obj, dtype)
    return copy_to(obj, dev)


def empty(shape, dtype="f32", device=None):
    """An uninitialised Tensor."""
    dev = default_device() if device is None else _find_device(device)
    if isinstance(shape, int):
        shape = (shape,)
    return Tensor(shape, dtype, dev)
