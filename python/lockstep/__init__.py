"""Lockstep for Python: the same bits on every device.

A binding of the installed C library liblockstep through ctypes (no
compiled part).  Tensors come and go through DLPack without copies: pass
numpy, PyTorch, CuPy or JAX arrays; results are lockstep.Tensors that
numpy.from_dlpack and torch.from_dlpack accept.  See python/README.md."""

from ._version import __version__
from ._lib import lib as _lib
from .errors import (LockstepError, NullPointerError, InvalidArgumentError,
                     BadShapeError, BadLeadingDimError, SizeOverflowError,
                     BadDtypeError, WrongDeviceError, AliasingError,
                     UnsupportedError, RangeError, InvalidValueError,
                     NoDeviceError, OutOfMemoryError, DriverError,
                     AbiMismatchError, InternalError)
from ._device import (Device, Queue, Graph, devices, device, auto_reason,
                      set_default_device, default_device, drivers, topology)
from ._tensor import Tensor, Typed, bf16, f16, t2, tensor, empty
from .ops import *  # noqa: F401,F403 (the ops, named as in ops.h)
from .ops import __all__ as _ops_all
from ._check import cross_check, CrossCheck, Mismatch
from . import train_ops  # backward ops and optimizer steps


def library_version():
    """The version of the liblockstep actually loaded."""
    return _lib.lk_version_string().decode()


def contract_version():
    """The numerical contract's version: equal versions give equal bits."""
    return _lib.lk_contract_version()


def library_path():
    """The path (or name) the C library was loaded from."""
    return _lib._name


__all__ = [
    "__version__", "library_version", "contract_version", "library_path",
    "LockstepError", "NullPointerError", "InvalidArgumentError", "BadShapeError",
    "BadLeadingDimError", "SizeOverflowError", "BadDtypeError", "WrongDeviceError",
    "AliasingError", "UnsupportedError", "RangeError", "InvalidValueError",
    "NoDeviceError", "OutOfMemoryError", "DriverError", "AbiMismatchError",
    "InternalError", "Device", "Queue", "Graph", "drivers", "topology", "devices", "device", "auto_reason",
    "set_default_device", "default_device", "Tensor", "Typed", "bf16", "f16",
    "t2", "tensor", "empty", "cross_check", "CrossCheck", "Mismatch",
] + list(_ops_all)
