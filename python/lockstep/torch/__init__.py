"""lockstep.torch: PyTorch in exact mode, the same bits on CPU and CUDA.

    import lockstep.torch
    with lockstep.torch.exact():
        logits = model(input_ids)        # CPU or CUDA tensors, f32/bf16/f16

Inside the block every aten op is one of:
- covered: run by Lockstep on the tensors' own memory, without copies
  (mm, addmm, bmm, linear and matmul through them, sum/mean/var/amax/
  argmax over the last dim, softmax, log_softmax, rms_norm, layer_norm,
  silu, gelu, relu, sigmoid, exp, log, tanh, erf, embedding,
  scaled_dot_product_attention with padding masks), on CUDA on PyTorch's
  current stream;
- composed: a fixed sequence of exact ops for what Lockstep has no op for
  (rsqrt = 1 / sqrt, pow by 2 or 3 = x * x (* x), cos and sin from a
  double-precision reduction and polynomial, division by a scalar as true
  division);
- allowed: PyTorch's kernel, for ops whose results are exact or correctly
  rounded on every device (views, copies, casts, cat, where, comparisons,
  add, sub, mul, div, neg, sqrt, ...);
- anything else raises NotCoveredError naming the op (or, with
  exact(on_uncovered="warn"), is counted, reported at exit and run by
  PyTorch): exact mode never loses its guarantee silently.

GEMMs of bf16/f16 operands use the tensor-core tier tc ("sm90" by
default: Hopper's MMA arithmetic, which every CPU reproduces exactly);
tc=None uses the IEEE tier for every GEMM.  See python/README.md.

Extending: lockstep.torch.register / allow (see _registry) add aten ops."""

from ._registry import NotCoveredError, register, allow, COVERED, ALLOWED
from ._mode import ExactMode, current, function
from . import _ops  # noqa: F401 (registers the covered ops)
from . import _compose  # noqa: F401 (registers the compositions)
from . import _exactops  # noqa: F401 (registers the allowed ops)
from . import _attention  # noqa: F401 (registers attention)
from ._check import cross_check
from ._optim import optim, BitLinear, bitlinear_swap  # noqa: F401 (training: backward ops, optimizers)
from ._call import prepare_stream


def exact(*, on_uncovered="raise", tc="sm90", host_device="cpu"):
    """A context manager: aten ops inside it run with the same bits on
    every device, or raise.

    on_uncovered: "raise" (default) or "warn" (count uncovered ops, run
    PyTorch's kernel, warn at exit with the list; the mode object's
    .uncovered and .report() give it).  tc: the GEMM tier of bf16/f16
    products, "sm90" (default), "sm80" or None (IEEE; f32 GEMMs always use
    it).  Every CUDA GPU in the process must produce the tier's bits (it
    is checked on entry).  host_device: the Lockstep device that runs CPU
    tensors ("cpu", "ref", "cpu:avx2", ...: all give the same bits)."""
    return ExactMode(on_uncovered=on_uncovered, tc=tc, host_device=host_device)


def covered_ops():
    """The names of the aten ops exact mode runs as Lockstep calls or
    compositions (overload packets cover every overload)."""
    return sorted(str(op) for op in COVERED)


def allowed_ops():
    """The names of the aten ops exact mode lets PyTorch run."""
    return sorted(str(op) for op in ALLOWED)


__all__ = ["exact", "ExactMode", "NotCoveredError", "register", "allow", "function",
           "current", "covered_ops", "allowed_ops", "cross_check", "prepare_stream"]
