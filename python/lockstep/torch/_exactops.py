"""The aten ops exact mode lets PyTorch run: their results are exact
(views, copies, selections, integer arithmetic) or correctly rounded IEEE
operations (add, sub, mul, div of two tensors, casts), which give
the same bits on every device as long as each runs as its own kernel
(no fused multiply-add across ops: exact mode runs eagerly) and type
promotion is the same (it does not depend on the device).

Argument checks refuse the forms that are not exact: add/sub with an
alpha other than +-1 (a fused a + alpha * b), float arange with fractional
bounds (accumulated in double on CPUs, in float on GPUs), float cumsum,
floor/trunc division of floats, index_put with accumulate on floats, and
index_put, index_copy and scatter whose indices repeat (which write wins
is up to the device; checked with one host read on a GPU).
tests/test_torch_exact.py's CPU-vs-CUDA check runs each of them on both
devices and compares the bits."""

import torch

from ._compose import _mixed_half
from ._registry import allow

# views and metadata: no arithmetic at all
allow("aten::view", "aten::_unsafe_view", "aten::reshape", "aten::_reshape_alias",
      "aten::as_strided", "aten::slice", "aten::select", "aten::narrow", "aten::split",
      "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::squeeze",
      "aten::unsqueeze", "aten::permute", "aten::transpose", "aten::t", "aten::expand",
      "aten::alias", "aten::detach", "aten::lift_fresh", "aten::lift_fresh_copy",
      "aten::unfold", "aten::view_as", "aten::expand_as", "aten::flatten",
      "aten::unflatten", "aten::movedim", "aten::diagonal",
      "aten::sym_size", "aten::sym_stride", "aten::sym_numel", "aten::sym_storage_offset",
      "aten::_local_scalar_dense", "aten::is_nonzero", "aten::equal", "aten::nonzero",
      "aten::_assert_async", "aten::_assert_tensor_metadata", "aten::record_stream",
      "aten::is_same_size", "aten::resize_", "aten::set_")

# new tensors and copies (casts round to nearest even on every device)
allow("aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
      "aten::new_empty_strided", "aten::zeros", "aten::zeros_like", "aten::new_zeros",
      "aten::ones", "aten::ones_like", "aten::new_ones", "aten::full", "aten::full_like",
      "aten::new_full", "aten::scalar_tensor", "aten::fill", "aten::fill_", "aten::zero_",
      "aten::clone", "aten::copy_", "aten::_to_copy", "aten::contiguous", "aten::_copy_from",
      "aten::_copy_from_and_resize", "aten::to")

# selections and data movement
allow("aten::cat", "aten::stack", "aten::where", "aten::masked_fill", "aten::masked_fill_",
      "aten::index", "aten::index_select", "aten::gather", "aten::take",
      "aten::slice_scatter", "aten::select_scatter", "aten::diagonal_scatter",
      "aten::index_fill", "aten::index_fill_",
      "aten::masked_select", "aten::triu", "aten::triu_", "aten::tril", "aten::tril_",
      "aten::flip", "aten::roll", "aten::repeat", "aten::repeat_interleave",
      "aten::constant_pad_nd",
      "aten::masked_scatter", "aten::masked_scatter_")

# comparisons, logic, classification, integer-valued rounding
allow("aten::eq", "aten::ne", "aten::lt", "aten::le", "aten::gt", "aten::ge",
      "aten::logical_and", "aten::logical_or", "aten::logical_not", "aten::logical_xor",
      "aten::bitwise_and", "aten::bitwise_or", "aten::bitwise_xor", "aten::bitwise_not",
      "aten::bitwise_and_", "aten::bitwise_or_", "aten::bitwise_not_",
      "aten::__and__", "aten::__or__", "aten::__xor__", "aten::__lshift__", "aten::__rshift__",
      "aten::any", "aten::all", "aten::isnan", "aten::isinf", "aten::isfinite",
      "aten::isin", "aten::isneginf", "aten::isposinf", "aten::signbit", "aten::sign",
      "aten::floor", "aten::ceil", "aten::trunc", "aten::neg", "aten::neg_", "aten::abs",
      "aten::abs_", "aten::eq_", "aten::ne_", "aten::lt_", "aten::le_", "aten::gt_",
      "aten::ge_", "aten::logical_not_", "aten::nan_to_num")


def _alpha_one(args, kwargs):
    a = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    if a not in (1, -1):
        return f"alpha={a} (a fused a + alpha * b; +-1 is exact)"
    if len(args) > 1 and _mixed_half(args[0], args[1]):
        return ("a bf16/f16 operand with a number or another dtype into out= (the "
                "functional form is covered)")
    return None


# correctly rounded arithmetic; the functional and in-place forms of
# add, sub, rsub and mul are _compose's (bf16/f16 with a scalar), these
# checks are for the out= forms
allow("aten::add", "aten::add_", "aten::sub", "aten::sub_", "aten::rsub", check=_alpha_one)
allow("aten::mul", "aten::mul_", check=lambda args, kwargs: _alpha_one(args[:2], kwargs))
# sqrt and reciprocal: _compose (PyTorch's CUDA f32 sqrt is not correctly
# rounded)


def _round(args, kwargs):
    if kwargs.get("decimals", 0) != 0:
        return f"decimals={kwargs['decimals']} (a scaled rounding)"
    return None


allow("aten::round", "aten::round_", check=_round)


def _integral(v):
    return isinstance(v, bool) or isinstance(v, int) or (isinstance(v, float) and v.is_integer())


def _arange(args, kwargs):
    dt = kwargs.get("dtype")
    vals = [a for a in args if isinstance(a, (int, float))]
    if dt is not None and not dt.is_floating_point:
        return None
    if all(_integral(v) and abs(v) <= 2 ** 24 for v in vals):
        return None
    return f"arange with bounds {vals} (a float arange is exact with whole bounds up to 2^24)"


allow("aten::arange", check=_arange)


def _integers_only(name, why):
    def check(args, kwargs):
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                return f"{name} of floats ({why})"
            if isinstance(a, float):
                return f"{name} with a float operand ({why})"
        return None
    return check


_WHY = {"cumsum": "the order of the sums", "remainder": "not correctly rounded",
        "fmod": "not correctly rounded", "floor_divide": "not correctly rounded",
        "prod": "the order of the products"}
for _op in ("cumsum", "remainder", "fmod", "floor_divide", "prod"):
    allow(f"aten::{_op}", f"aten::{_op}_", check=_integers_only(_op, _WHY[_op]))
for _op in ("clamp", "clamp_min", "clamp_max", "maximum", "minimum", "max", "min"):
    allow(f"aten::{_op}", f"aten::{_op}_", check=_integers_only(
        _op, "the zero of max(-0, +0) and the index of a tie differ between devices"))


def _duplicates(index, dim=None):
    """Whether an integer index tensor repeats a value (along dim: within
    one slice): which of the writes wins is then up to the device.  One
    host read on a GPU."""
    if index.numel() < 2:
        return False
    if dim is None:
        v = index.reshape(-1).sort().values
        return bool((v[1:] == v[:-1]).any())
    v = index.sort(dim).values
    n = v.shape[dim]
    return n > 1 and bool((v.narrow(dim, 1, n - 1) == v.narrow(dim, 0, n - 1)).any())


_DUP = "an index repeats: which write wins differs between devices"


def _index_put(args, kwargs):
    acc = kwargs.get("accumulate", args[3] if len(args) > 3 else False)
    if acc and args[0].is_floating_point():
        return "index_put with accumulate=True on floats (the order of the sums)"
    if acc:
        return None
    idx = [t for t in args[1] if t is not None]
    ints = [t for t in idx if t.dtype != torch.bool]
    if not ints:
        return None                      # boolean masks name each element once
    if len(idx) > 1:
        return "index_put with several index tensors (their uniqueness is not checked)"
    return _DUP if _duplicates(ints[0]) else None


allow("aten::index_put", "aten::index_put_", "aten::_index_put_impl_", check=_index_put)


def _index_copy(args, kwargs):
    return _DUP if _duplicates(args[2]) else None


allow("aten::index_copy", "aten::index_copy_", check=_index_copy)


def _scatter(args, kwargs):
    if "reduce" in kwargs or len(args) > 4:
        return "scatter with a reduction (the order of the updates)"
    return _DUP if _duplicates(args[2], args[1]) else None


allow("aten::scatter", "aten::scatter_", check=_scatter)
