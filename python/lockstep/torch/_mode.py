"""exact(): the modes that route every aten op inside the block.

Two mechanisms work together:
- a TorchDispatchMode sees every aten op after autograd and after
  composite ops are decomposed (linear -> mm/addmm, matmul -> mm/bmm,
  layer_norm -> native_layer_norm).  Each op is looked up in the op table
  (_registry): a covered op runs its Lockstep implementation, an allowed
  op PyTorch's kernel (correctly rounded or exact, so the same bits on
  every device), anything else raises NotCoveredError (warn mode: counted,
  then PyTorch's kernel runs);
- the few torch.nn.functional functions whose aten form differs per
  device (scaled_dot_product_attention becomes a different backend op on
  CPU and on CUDA; rms_norm a fused op on some builds) are wrapped while
  any exact mode is active: inside exact mode the wrapper runs them as one
  Lockstep call, elsewhere it calls the original.  (A TorchFunctionMode
  would catch them too, but it costs a Python call on every torch function
  and attribute read.)  Code that bound the function before entering the
  mode reaches the backend op, which is not covered, and raises.  linear
  is wrapped the same way for speed (one GEMM call, not four aten ops).

The dispatch mode is per thread: other threads are not affected."""

import collections
import functools
import threading
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from .._device import device as _find_device
from ._registry import NotCoveredError, lookup

# (module, name) -> implementation, for the function-level entries
FUNCTIONS = {}
_originals = {}      # (module, name) -> the function the wrapper replaced
_wrap_lock = threading.Lock()
_active = [0]        # exact modes active in the process

_local = threading.local()

TIERS = {None: 0, "sm80": 1 << 1, "sm90": 1 << 2}


def current():
    """The innermost active ExactMode of this thread (None outside)."""
    return getattr(_local, "top", None)


def function(module, name, light=False):
    """Decorator: in exact mode, module.name (a torch.nn.functional
    function) runs as the decorated implementation, which may return
    NotImplemented to let the call go on to its aten ops.  The
    implementation's own PyTorch ops run outside the dispatch mode; a
    light one runs inside it (saving the mode's pop and push) and must
    keep its own ops out of it."""
    def deco(impl):
        if hasattr(module, name):
            FUNCTIONS[(module, name)] = (impl, light)
        return impl
    return deco


def _wrapper(orig, impl, light):
    @functools.wraps(orig)
    def run(*args, **kwargs):
        m = getattr(_local, "top", None)
        if m is not None:
            try:
                if light:
                    r = impl(*args, **kwargs)
                else:
                    # the implementation's own PyTorch ops (views, copies,
                    # index arithmetic) run directly, as inside the handler
                    with _disable_current_modes():
                        r = impl(*args, **kwargs)
                if r is not NotImplemented:
                    return r
            except NotCoveredError as e:
                if m.on_uncovered == "raise":
                    raise
                m._count(e.op, e)
        return orig(*args, **kwargs)
    run._lockstep_original = orig
    return run


def _wrap_functions(enter):
    with _wrap_lock:
        _active[0] += 1 if enter else -1
        if enter and _active[0] == 1:
            for (mod, name), (impl, light) in FUNCTIONS.items():
                orig = getattr(mod, name)
                _originals[(mod, name)] = orig
                setattr(mod, name, _wrapper(orig, impl, light))
        elif not enter and _active[0] == 0:
            for (mod, name), orig in _originals.items():
                setattr(mod, name, orig)
            _originals.clear()


# How __torch_dispatch__ treats an op (the first item of a _handlers entry)
_PASS, _CHECKED, _COVERED, _REFUSED = 0, 1, 2, 3
_NOT_COVERED = ("not covered by Lockstep's exact mode (its bits may differ between "
                "devices)")

# id(OpOverload) -> (OpOverload, how, handler, callable), filled on first
# use.  Keyed by id: an OpOverload's own __hash__ is a Python method (a
# microsecond on every op); the entry keeps the object alive, so its id is
# not reused, and the identity is checked on every hit all the same.
_handlers = {}


def _entry(func):
    kind, h = lookup(func)
    # func._op is the C++ callable OpOverload.__call__ ends in; calling it
    # directly saves a Python frame for every allowed op.  An op with a
    # Python dispatcher of its own goes through __call__.
    call = func
    if getattr(func, "_pyobj_dispatcher", None) is None:
        call = getattr(func, "_op", func)
    if kind == "covered":
        e = (func, _COVERED, h, call)
    elif kind == "allowed":
        e = (func, _PASS if h is None else _CHECKED, h, call)
    else:
        e = (func, _REFUSED, None, call)
    _handlers[id(func)] = e
    return e


class _Dispatch(TorchDispatchMode):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    @classmethod
    def _should_skip_dynamo(cls):
        # exact mode runs eagerly: no torch._disable_dynamo wrapper around
        # __torch_dispatch__ (it costs microseconds on every aten op)
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        # the hot path of every aten op: one dict hit, no allocation
        e = _handlers.get(id(func))
        if e is None or e[0] is not func:
            e = _entry(func)
        how = e[1]
        if how == _PASS:
            return e[3](*args, **kwargs) if kwargs else e[3](*args)
        if kwargs is None:
            kwargs = {}
        if how == _COVERED:
            try:
                return e[2](*args, **kwargs)
            except NotCoveredError as err:
                return self.owner._uncovered(func, err, args, kwargs)
        if how == _CHECKED:
            why = e[2](args, kwargs)
            if why is None:
                return e[3](*args, **kwargs)
            return self.owner._uncovered(func, NotCoveredError(str(func), why), args, kwargs)
        return self.owner._uncovered(func, NotCoveredError(str(func), _NOT_COVERED), args,
                                     kwargs)


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
        dm = _Dispatch(self)
        _wrap_functions(True)
        try:
            dm.__enter__()
        except BaseException:
            _wrap_functions(False)
            raise
        self._modes = dm
        # this thread's queue of the host device, for every CPU op
        self.host_qh = self.host_device.queue._handle
        stack.append(self)
        _local.top = self
        return self

    def __exit__(self, *exc):
        dm = self._modes
        self._modes = None
        stack = _local.stack
        stack.pop()
        _local.top = stack[-1] if stack else None
        dm.__exit__(*exc)
        _wrap_functions(False)
        if self.on_uncovered == "warn" and self.uncovered:
            warnings.warn("lockstep.torch.exact: these ops ran PyTorch's kernels, "
                          "their bits may differ between devices:\n" + self.report(),
                          RuntimeWarning, stacklevel=2)
        return False
