"""DLPack in ctypes: the C structs of dlpack.h (v1.0), reading a producer's
capsule and making capsules of our own.

Consuming follows the protocol: call ``__dlpack__`` (asking for a versioned
capsule, falling back to the legacy one), rename the capsule to
``used_dltensor[_versioned]`` so that its destructor leaves the tensor
alone, and call the producer's deleter once we are done with the memory.

Producing: a DLManagedTensor (or DLManagedTensorVersioned) whose
manager_ctx keeps the owning Python object alive until the consumer calls
the deleter; a capsule nobody consumed calls the deleter from its own
destructor."""

import ctypes

# DLDeviceType
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13
# DLDataTypeCode
KDL_INT = 0
KDL_UINT = 1
KDL_FLOAT = 2
KDL_BFLOAT = 4

FLAG_READ_ONLY = 1 << 0
VERSION = (1, 0)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


# The deleters take the managed tensor's address.
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# --- the capsule API of the running interpreter ---------------------------

_api = ctypes.pythonapi
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = _api.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR]
_capsule_is_valid = _api.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_pointer = _api.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = _api.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
# the same two, called from a capsule destructor on a borrowed PyObject *
_capsule_name_raw = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_GetName", _api))
_capsule_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p,
                                         ctypes.c_char_p)(("PyCapsule_GetPointer", _api))

# Capsule names must outlive their capsules: module constants.
_NAME = b"dltensor"
_NAME_V = b"dltensor_versioned"
_USED = b"used_dltensor"
_USED_V = b"used_dltensor_versioned"


# --- consuming -------------------------------------------------------------

class Imported:
    """A producer's tensor, held until this object goes: data (address,
    byte_offset applied), device (type, id), shape, strides (elements, or
    None for compact row-major), dtype (code, bits, lanes), readonly."""

    __slots__ = ("data", "device", "shape", "strides", "dtype", "readonly",
                 "_addr", "_deleter", "__weakref__")

    def __init__(self, capsule):
        self._deleter = None
        if _capsule_is_valid(capsule, _NAME_V):
            addr = _capsule_get_pointer(capsule, _NAME_V)
            m = DLManagedTensorVersioned.from_address(addr)
            if m.version.major != VERSION[0]:
                raise BufferError(
                    f"lockstep: DLPack version {m.version.major}.{m.version.minor} "
                    f"is not understood (this binding reads {VERSION[0]}.x)")
            _capsule_set_name(capsule, _USED_V)
            self.readonly = bool(m.flags & FLAG_READ_ONLY)
        elif _capsule_is_valid(capsule, _NAME):
            addr = _capsule_get_pointer(capsule, _NAME)
            m = DLManagedTensor.from_address(addr)
            _capsule_set_name(capsule, _USED)
            self.readonly = False
        else:
            raise BufferError("lockstep: __dlpack__ returned no unused DLPack capsule")
        self._addr = addr
        self._deleter = m.deleter if m.deleter else None
        t = m.dl_tensor
        self.data = (t.data or 0) + t.byte_offset
        d = t.device
        self.device = (d.device_type, d.device_id)
        n = t.ndim
        self.shape = tuple(t.shape[:n])
        self.strides = tuple(t.strides[:n]) if t.strides else None
        d = t.dtype
        self.dtype = (d.code, d.bits, d.lanes)

    def release(self):
        d, self._deleter = self._deleter, None
        if d is not None:
            d(self._addr)

    def __del__(self):
        self.release()


def import_dlpack(obj, stream=None):
    """Imported for any object with __dlpack__ (numpy >= 1.22, PyTorch,
    CuPy, JAX, a lockstep.Tensor)."""
    kw = {} if stream is None else {"stream": int(stream)}
    try:
        cap = obj.__dlpack__(max_version=VERSION, **kw)
    except TypeError:  # a producer older than DLPack 1.0's keyword
        cap = obj.__dlpack__(**kw)
    imp = Imported(cap)
    if hasattr(stream, "wait"):
        stream.wait()
    return imp


# --- producing -------------------------------------------------------------

# address of a managed tensor we made -> what it keeps alive
_exports = {}


@DELETER
def _deleter(addr):
    try:
        _exports.pop(addr, None)
    except Exception:  # interpreter shutting down: nothing left to release
        pass


@_DESTRUCTOR
def _capsule_destructor(capsule):
    # An unconsumed capsule still carries its own name: the tensor is ours
    # to release.  A consumed one was renamed and belongs to the consumer.
    try:
        name = _capsule_name_raw(capsule)
        if name in (_NAME, _NAME_V):
            addr = _capsule_pointer_raw(capsule, name)
            _deleter(addr)
    except Exception:
        pass


def export(owner, data, device, dtype, shape, strides, versioned, readonly=False):
    """A DLPack capsule of the memory at data, kept alive by owner until the
    consumer calls the deleter.  dtype is (code, bits); shape and strides in
    elements."""
    n = len(shape)
    shp = (ctypes.c_int64 * max(n, 1))(*shape)
    std = (ctypes.c_int64 * max(n, 1))(*strides)
    if versioned:
        m = DLManagedTensorVersioned()
        m.version.major, m.version.minor = VERSION
        m.flags = FLAG_READ_ONLY if readonly else 0
        name = _NAME_V
    else:
        m = DLManagedTensor()
        name = _NAME
    t = m.dl_tensor
    t.data = data
    t.device.device_type, t.device.device_id = device
    t.ndim = n
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype[0], dtype[1], 1
    t.shape = shp
    t.strides = std
    t.byte_offset = 0
    m.deleter = _deleter
    addr = ctypes.addressof(m)
    _exports[addr] = (m, shp, std, owner)
    return _capsule_new(addr, name, _capsule_destructor)
