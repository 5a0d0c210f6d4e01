"""exact(): the modes that route every aten op inside the block.

Two PyTorch modes work together:
- a TorchDispatchMode sees every aten op after autograd and after
  composite ops are decomposed (linear -> mm/addmm, matmul -> mm/bmm,
  layer_norm -> native_layer_norm).  Each op is looked up in the op table
  (_registry): a covered op runs its Lockstep implementation, an allowed
  op PyTorch's kernel (correctly rounded or exact, so the same bits on
  every device), anything else raises NotCoveredError (warn mode: counted,
  then PyTorch's kernel runs);
- a TorchFunctionMode catches the few functions whose aten form differs
  per device (scaled_dot_product_attention becomes a different
  backend op on CPU and on CUDA; rms_norm a fused op on some builds) and
  runs them as one Lockstep call.

Modes are per thread: other threads are not affected, and nothing is
registered with PyTorch process-wide."""

import collections
import threading
import warnings

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .._device import device as _find_device
from ._registry import NotCoveredError, lookup

# torch function -> implementation, for the function-level entries
FUNCTIONS = {}

_local = threading.local()

TIERS = {None: 0, "sm80": 1 << 1, "sm90": 1 << 2}


def current():
    """The innermost active ExactMode of this thread (None outside)."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


def function(*fns):
    """Decorator: run these torch functions (torch.nn.functional.*) as the
    decorated implementation in exact mode (which may return NotImplemented
    to let the call go on to its aten ops)."""
    def deco(impl):
        for f in fns:
            FUNCTIONS[f] = impl
        return impl
    return deco


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind, h = lookup(func)
        if kind == "covered":
            try:
                return h(*args, **kwargs)
            except NotCoveredError as e:
                return self.owner._uncovered(func, e, args, kwargs)
        if kind == "allowed":
            why = None if h is None else h(args, kwargs)
            if why is None:
                return func(*args, **kwargs)
            return self.owner._uncovered(func, NotCoveredError(str(func), why), args, kwargs)
        return self.owner._uncovered(
            func, NotCoveredError(str(func), "not covered by Lockstep's exact mode (its "
                                  "bits may differ between devices)"), args, kwargs)


class _Functions(TorchFunctionMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        impl = FUNCTIONS.get(func)
        if impl is not None:
            try:
                r = impl(*args, **kwargs)
                if r is not NotImplemented:
                    return r
            except NotCoveredError as e:
                if self.owner.on_uncovered == "raise":
                    raise
                self.owner._count(e.op, e)
        return func(*args, **kwargs)


class ExactMode:
    """The state of one exact() block: its options and, in warn mode, what
    ran uncovered (.uncovered: Counter of op name -> calls, .reasons: op
    name -> the first reason)."""

    def __init__(self, on_uncovered="raise", tc="sm90", host_device="cpu"):
        if on_uncovered not in ("raise", "warn"):
            raise ValueError(f"exact: on_uncovered={on_uncovered!r} is not 'raise' or 'warn'")
        if tc not in TIERS:
            raise ValueError(f"exact: tc={tc!r} is not None, 'sm80' or 'sm90'")
        self.on_uncovered = on_uncovered
        self.tc = tc
        self.tc_flag = TIERS[tc]
        self.host_device = _find_device(host_device)
        if not self.host_device.host_memory:
            raise ValueError(f"exact: host_device={host_device!r} is not a host-memory device")
        self.uncovered = collections.Counter()
        self.reasons = {}
        self._modes = None

    def _check_tier(self):
        # a CUDA device runs the tier of its own generation only: every
        # GPU PyTorch sees must produce the bits of the chosen tier
        if self.tc is None or not torch.cuda.is_available():
            return
        want = {"sm80": (8,), "sm90": (9,)}[self.tc]
        for i in range(torch.cuda.device_count()):
            major, minor = torch.cuda.get_device_capability(i)
            if major not in want:
                raise ValueError(
                    f"exact: tc={self.tc!r}: cuda:{i} is sm_{major}{minor}, which cannot "
                    f"produce that tier's bits; pass tc='sm80' (sm_80/86/89), "
                    f"tc='sm90' (sm_90) or tc=None (the IEEE tier, every device)")

    def _count(self, op, err):
        self.uncovered[op] += 1
        self.reasons.setdefault(op, err.message)

    def _uncovered(self, func, err, args, kwargs):
        if self.on_uncovered == "raise":
            raise err
        self._count(str(func), err)
        return func(*args, **kwargs)

    def report(self):
        """One line per op that ran uncovered (warn mode), most calls first."""
        return "\n".join(f"{n:6d}  {op}: {self.reasons[op]}"
                         for op, n in self.uncovered.most_common())

    def __enter__(self):
        if self._modes is not None:
            raise RuntimeError("exact: this mode is already active")
        self._check_tier()
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        fm, dm = _Functions(self), _Dispatch(self)
        fm.__enter__()
        try:
            dm.__enter__()
        except BaseException:
            fm.__exit__(None, None, None)
            raise
        self._modes = (fm, dm)
        stack.append(self)
        return self

    def __exit__(self, *exc):
        fm, dm = self._modes
        self._modes = None
        _local.stack.pop()
        dm.__exit__(*exc)
        fm.__exit__(*exc)
        if self.on_uncovered == "warn" and self.uncovered:
            warnings.warn("lockstep.torch.exact: these ops ran PyTorch's kernels, "
                          "their bits may differ between devices:\n" + self.report(),
                          RuntimeWarning, stacklevel=2)
        return False
