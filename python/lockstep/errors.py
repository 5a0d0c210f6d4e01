"""Lockstep's statuses as exceptions.

Every failed C call raises the LockstepError subclass of its status, with
the text of lk_last_error() (which names the function, the argument and the
reason).  Checks the binding makes itself before calling C (a layout
lk_tensor cannot express, a dtype without an lk_dtype) raise the class of
the status the C library would have given.  Each class also derives from
the closest built-in exception, so ``except ValueError`` works too."""

from ._lib import lib


class LockstepError(Exception):
    """A Lockstep status other than LK_OK: .status (int), .status_name
    ("LK_ERR_BAD_SHAPE") and .message (lk_last_error()'s text)."""

    status = None

    def __init__(self, status, message):
        self.status = int(status)
        self.message = message
        super().__init__(f"{self.status_name}: {message}")

    @property
    def status_name(self):
        return lib.lk_status_string(self.status).decode()


class NullPointerError(LockstepError, ValueError): pass
class InvalidArgumentError(LockstepError, ValueError): pass
class BadShapeError(LockstepError, ValueError): pass
class BadLeadingDimError(LockstepError, ValueError): pass
class SizeOverflowError(LockstepError, OverflowError): pass
class BadDtypeError(LockstepError, TypeError): pass
class WrongDeviceError(LockstepError, ValueError): pass
class AliasingError(LockstepError, ValueError): pass
class UnsupportedError(LockstepError, NotImplementedError): pass
class RangeError(LockstepError, ValueError): pass
class InvalidValueError(LockstepError, ValueError): pass
class NoDeviceError(LockstepError, LookupError): pass
class OutOfMemoryError(LockstepError, MemoryError): pass
class DriverError(LockstepError, RuntimeError): pass
class AbiMismatchError(LockstepError, RuntimeError): pass
class InternalError(LockstepError, RuntimeError): pass


# lk_status value -> class (include/lockstep/status.h)
BY_STATUS = {
    1: NullPointerError,
    2: InvalidArgumentError,
    3: BadShapeError,
    4: BadLeadingDimError,
    5: SizeOverflowError,
    6: BadDtypeError,
    7: WrongDeviceError,
    8: AliasingError,
    9: UnsupportedError,
    10: RangeError,
    11: InvalidValueError,
    12: NoDeviceError,
    13: OutOfMemoryError,
    14: DriverError,
    15: AbiMismatchError,
    16: InternalError,
}
for _st, _cls in BY_STATUS.items():
    _cls.status = _st


def error(status, message):
    """The exception for a status (LockstepError itself for an unknown one)."""
    return BY_STATUS.get(int(status), LockstepError)(status, message)


def check(status):
    """Raise the exception of a failed C call, with lk_last_error()."""
    if status:
        raise error(status, lib.lk_last_error().decode(errors="replace"))
