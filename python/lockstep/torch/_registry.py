"""The op table of exact mode: which aten ops run as Lockstep calls, which
run as PyTorch's own kernels (their results are the same bits on every
device), and the error raised for everything else.

Other modules add to it at import time:

    from lockstep.torch._registry import register, allow

    @register("aten::silu_backward")          # every overload of the op
    def silu_backward(grad_output, self):     # the aten schema's arguments
        ...                                   # Lockstep calls; return tensors

    allow("aten::abs")                        # PyTorch's kernel is exact

An implementation receives the op's arguments as aten passes them (after
autograd: it is never asked for a gradient itself) and returns what the op
returns.  It raises NotCoveredError for an argument combination it does
not cover: exact mode then raises it, or in warn mode counts it and runs
PyTorch's kernel.  A check given to allow() returns None when the call is
exact, else the reason it is not (treated the same way)."""

import torch

from ..errors import UnsupportedError

# OpOverload or OpOverloadPacket -> implementation (covered ops)
COVERED = {}
# OpOverload or OpOverloadPacket -> check (None: always exact)
ALLOWED = {}


class NotCoveredError(UnsupportedError):
    """An aten op, or an argument combination of one, that exact mode
    does not cover: it would have run a kernel whose bits depend on the
    device.  .op names the aten op."""

    def __init__(self, op, reason):
        self.op = op
        super().__init__(9, f"{op}: {reason}")


def _resolve(op):
    """An OpOverload or OpOverloadPacket of "aten::name[.overload]" or of
    the object itself."""
    if not isinstance(op, str):
        return op
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, overload) if overload else packet
    except AttributeError:
        return None  # not in this PyTorch version


def register(*ops):
    """Decorator: the function runs these aten ops in exact mode (names
    "aten::mm", "aten::add.Tensor", or torch.ops objects; a name without
    an overload covers every overload)."""
    def deco(fn):
        for op in ops:
            r = _resolve(op)
            if r is not None:
                COVERED[r] = fn
        _changed()
        return fn
    return deco


def allow(*ops, check=None):
    """These aten ops run as PyTorch's kernels in exact mode: their results
    are correctly rounded (or exact) and so the same bits on every device.
    check(args, kwargs) returns None, or why this call is not exact."""
    for op in ops:
        r = _resolve(op)
        if r is not None:
            ALLOWED[r] = check
    _changed()


def _changed():
    # the dispatch mode caches lookups per OpOverload
    from . import _mode
    _mode._handlers.clear()


def lookup(func):
    """(kind, handler) of an OpOverload: ("covered", impl), ("allowed",
    check) or (None, None)."""
    fn = COVERED.get(func)
    if fn is None:
        fn = COVERED.get(func.overloadpacket)
    if fn is not None:
        return "covered", fn
    if func in ALLOWED:
        return "allowed", ALLOWED[func]
    if func.overloadpacket in ALLOWED:
        return "allowed", ALLOWED[func.overloadpacket]
    return None, None
