"""Finding and loading the installed liblockstep, and the C prototypes.

The binding has no compiled part: ctypes calls the C library directly, so
installing needs no compiler and one pure-Python wheel serves every Python
version.  The library is looked up in this order:

1. ``LOCKSTEP_LIBRARY``: an explicit path (nothing else is tried);
2. ``pkg-config --variable=libdir lockstep`` + ``liblockstep.so.0``;
3. ``ctypes.util.find_library("lockstep")``, then the soname
   ``liblockstep.so.0`` through the dynamic loader's own search.
"""

import ctypes
import ctypes.util
import os
import subprocess

SONAME = "liblockstep.so.0"

_HOWTO = (
    "install the C library (Debian/Ubuntu: apt install liblockstep0; from "
    "source: ./configure && make && make install), or set LOCKSTEP_LIBRARY "
    "to the path of liblockstep.so.0"
)


def _pkg_config_libdir():
    try:
        out = subprocess.run(
            ["pkg-config", "--variable=libdir", "lockstep"],
            capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    return libdir if out.returncode == 0 and libdir else None


def _candidates():
    libdir = _pkg_config_libdir()
    if libdir:
        yield os.path.join(libdir, SONAME)
    found = ctypes.util.find_library("lockstep")
    if found:
        yield found
    yield SONAME


def load():
    """The loaded library (a ctypes.CDLL) with every prototype set."""
    explicit = os.environ.get("LOCKSTEP_LIBRARY")
    if explicit:
        try:
            lib = ctypes.CDLL(explicit)
        except OSError as e:
            raise ImportError(
                f"lockstep: LOCKSTEP_LIBRARY={explicit!r} cannot be loaded ({e})"
            ) from None
        return _declare(lib)
    tried = []
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            tried.append(f"{name}: {e}")
            continue
        return _declare(lib)
    raise ImportError(
        "lockstep: the C library liblockstep was not found (tried "
        + "; ".join(tried) + "). To fix: " + _HOWTO)


# --- the C types -----------------------------------------------------------

c_status = ctypes.c_int
c_dtype = ctypes.c_int
c_int64 = ctypes.c_int64
c_void_p = ctypes.c_void_p


class LkTensor(ctypes.Structure):
    """struct lk_tensor (include/lockstep/types.h)."""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("rows", ctypes.c_int64),
        ("cols", ctypes.c_int64),
        ("ld", ctypes.c_int64),
        ("batch_stride", ctypes.c_int64),
    ]


class LkDeviceProps(ctypes.Structure):
    """struct lk_device_props (include/lockstep/device.h)."""
    _fields_ = [
        ("name", ctypes.c_char * 64),
        ("description", ctypes.c_char * 160),
        ("driver", ctypes.c_char * 32),
        ("kind", ctypes.c_int),
        ("host_memory", ctypes.c_int),
        ("emulated", ctypes.c_int),
        ("numa_node", ctypes.c_int),
        ("priority", ctypes.c_int),
        ("max_threads", ctypes.c_int),
        ("memory_bytes", ctypes.c_uint64),
        ("pci_bus_id", ctypes.c_char * 32),
    ]


class LkQueueOpts(ctypes.Structure):
    _fields_ = [("num_threads", ctypes.c_int), ("native_stream", ctypes.c_void_p)]


class LkDriverInfo(ctypes.Structure):
    """struct lk_driver_info (include/lockstep/info.h)."""
    _fields_ = [
        ("name", ctypes.c_char * 32),
        ("path", ctypes.c_char * 1024),
        ("builtin", ctypes.c_int),
        ("status", ctypes.c_int),
        ("device_count", ctypes.c_int),
        ("message", ctypes.c_char * 512),
    ]


class LkTopologyInfo(ctypes.Structure):
    """struct lk_topology_info (include/lockstep/info.h)."""
    _fields_ = [
        ("hwloc", ctypes.c_int),
        ("cores", ctypes.c_int),
        ("pus", ctypes.c_int),
        ("numa_nodes", ctypes.c_int),
        ("thread_numa_node", ctypes.c_int),
        ("l1d_bytes", ctypes.c_uint64),
        ("l2_bytes", ctypes.c_uint64),
        ("l3_bytes", ctypes.c_uint64),
        ("source", ctypes.c_char * 64),
    ]


class LkBitnetConfig(ctypes.Structure):
    """struct lk_bitnet_config (include/lockstep/bitnet.h)."""
    _fields_ = [
        ("dim", ctypes.c_int64),
        ("n_head", ctypes.c_int64),
        ("n_kv", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("ffn", ctypes.c_int64),
        ("eps", ctypes.c_float),
        ("theta", ctypes.c_float),
        ("attn_scale", ctypes.c_float),
        ("rope_flags", ctypes.c_uint),
    ]


class LkBitnetLayer(ctypes.Structure):
    """struct lk_bitnet_layer (include/lockstep/bitnet.h)."""
    _fields_ = [
        ("qkv", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("gate_up", ctypes.c_void_p),
        ("down", ctypes.c_void_p),
        ("attn_norm", ctypes.POINTER(LkTensor)),
        ("attn_sub_norm", ctypes.POINTER(LkTensor)),
        ("ffn_norm", ctypes.POINTER(LkTensor)),
        ("ffn_sub_norm", ctypes.POINTER(LkTensor)),
        ("kv", ctypes.POINTER(LkTensor)),
    ]


T = ctypes.POINTER(LkTensor)
P = ctypes.c_void_p  # opaque handles: context, device, queue, weights
PP = ctypes.POINTER(ctypes.c_void_p)
F = ctypes.c_float
I64 = ctypes.c_int64
U = ctypes.c_uint
I = ctypes.c_int

# name: (restype, argtypes)
_PROTOS = {
    "lk_status_string": (ctypes.c_char_p, [I]),
    "lk_last_error": (ctypes.c_char_p, []),
    "lk_dtype_name": (ctypes.c_char_p, [I]),
    "lk_dtype_size": (ctypes.c_size_t, [I]),
    "lk_version_string": (ctypes.c_char_p, []),
    "lk_contract_version": (I, []),
    "lk_context_create": (c_status, [PP]),
    "lk_context_destroy": (None, [P]),
    "lk_context_auto_reason": (ctypes.c_char_p, [P]),
    "lk_device_count": (I, [P]),
    "lk_device_get": (c_status, [P, I, PP]),
    "lk_device_find": (c_status, [P, ctypes.c_char_p, PP]),
    "lk_device_props_get": (c_status, [P, ctypes.POINTER(LkDeviceProps)]),
    "lk_device_name": (ctypes.c_char_p, [P]),
    "lk_queue_create": (c_status, [P, ctypes.POINTER(LkQueueOpts), PP]),
    "lk_queue_destroy": (c_status, [P]),
    "lk_queue_sync": (c_status, [P]),
    "lk_malloc": (c_status, [P, ctypes.c_size_t, PP]),
    "lk_free": (c_status, [P, P]),
    "lk_memcpy": (c_status, [P, P, P, ctypes.c_size_t, I]),
    "lk_context_driver_count": (I, [P]),
    "lk_context_driver_info": (c_status, [P, I, ctypes.POINTER(LkDriverInfo)]),
    "lk_context_topology": (c_status, [P, ctypes.POINTER(LkTopologyInfo)]),
    "lk_queue_capture_begin": (c_status, [P]),
    "lk_queue_capture_end": (c_status, [P, PP]),
    "lk_queue_capturing": (I, [P]),
    "lk_graph_launch": (c_status, [P, P]),
    "lk_graph_info": (c_status, [P, ctypes.POINTER(I), ctypes.POINTER(I64)]),
    "lk_graph_destroy": (None, [P]),
    "lk_bitnet_decode_scratch": (ctypes.c_size_t, [ctypes.POINTER(LkBitnetConfig), I64]),
    "lk_bitnet_decode": (c_status, [P, ctypes.POINTER(LkBitnetConfig),
                                    ctypes.POINTER(LkBitnetLayer), I64, T, T, I64, P,
                                    ctypes.c_size_t]),
    "lk_gemm": (c_status, [P, I, I, T, T, T, T, I64, U]),
    "lk_reduce": (c_status, [P, I, T, T]),
    "lk_rmsnorm": (c_status, [P, T, T, F, T]),
    "lk_layernorm": (c_status, [P, T, T, T, F, T]),
    "lk_softmax": (c_status, [P, T, T]),
    "lk_log_softmax": (c_status, [P, T, T]),
    "lk_unary": (c_status, [P, I, T, T]),
    "lk_convert": (c_status, [P, T, T]),
    "lk_binary": (c_status, [P, I, T, T, T]),
    "lk_glu": (c_status, [P, I, T, T, T]),
    "lk_quantize_act": (c_status, [P, T, T, T]),
    "lk_rmsnorm_quantize": (c_status, [P, T, T, F, T, T]),
    "lk_quantize_ternary": (c_status, [P, T, T, T]),
    "lk_ternary_pack": (c_status, [P, T, T]),
    "lk_ternary_unpack": (c_status, [P, T, T]),
    "lk_ternary_gemm": (c_status, [P, T, T, T, T, T]),
    "lk_int8_gemm": (c_status, [P, T, T, T, T, T]),
    "lk_rope": (c_status, [P, T, T, I64, F, U, T]),
    "lk_attention": (c_status, [P, T, T, T, T, I64, I64, F, T, I64]),
    "lk_embedding": (c_status, [P, T, T, T]),
    "lk_set_rows": (c_status, [P, T, T, T]),
    "lk_weights_prepare": (c_status, [P, T, T, PP]),
    "lk_weights_destroy": (None, [P]),
    "lk_weights_info": (c_status, [P, ctypes.POINTER(I), ctypes.POINTER(I64),
                                   ctypes.POINTER(I64)]),
    "lk_linear": (c_status, [P, T, P, T, T, U]),
    "lk_ternary_linear": (c_status, [P, T, T, P, T, U]),
    "lk_rmsnorm_ternary_linear": (c_status, [P, T, T, F, T, T, P, T, U]),
}


def _declare(lib):
    missing = []
    for name, (res, args) in _PROTOS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    if missing:
        raise ImportError(
            f"lockstep: {lib._name} lacks {', '.join(missing)}: it is older "
            f"than this binding. To fix: {_HOWTO}")
    return lib


lib = load()
