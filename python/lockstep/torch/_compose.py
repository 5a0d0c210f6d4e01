"""Ops Lockstep has no C op for, composed of exact steps in a fixed order.

Every step is one PyTorch element-wise op whose result is correctly
rounded (or exact) on every device, so the composition gives the same
bits everywhere; it is not PyTorch's own result for the op (which may
differ per device) but a documented function of the input:

- sqrt(x) and reciprocal(x) of f32 (and of bf16/f16, widened to f32):
  computed in double and rounded to f32, which is the correctly rounded
  f32 result (53 >= 2 * 24 + 2 bits: the double rounding is innocuous),
  then rounded once to the input's dtype.  PyTorch's own f32 sqrt kernel
  is not correctly rounded on CUDA (1 ulp off for some inputs); double
  sqrt and division are, on both devices;
- rsqrt(x) = 1 / sqrt(x): sqrt then reciprocal, each as above;
- pow(x, n) for n in {2, 3, -1, -2, 0.5, -0.5, 1, 0}: x*x, (x*x)*x,
  1/x, 1/(x*x), sqrt(x), 1/sqrt(x), x, 1 (f32 steps for bf16/f16);
- cos(x), sin(x): in double: k = round(x * 2/pi), r = (x - k*P1) - k*P2
  (pi/2 split in two, Cody-Waite), fdlibm's degree-13/14 polynomials in
  Horner form, the quadrant k mod 4 picks +-sin(r) or +-cos(r); then
  rounded to f32 (and to bf16/f16 from there); NaN results canonical;
- x / s for a scalar s: true division x / (float)s in f32 (PyTorch's CUDA
  kernel multiplies by the reciprocal of a CPU scalar instead, one ulp
  off at times), rounded once to the result dtype;
- add, sub, rsub, mul and div with a bf16/f16 result whose operands are
  not two tensors of that one dtype (a Python number, a 0-dim tensor of
  another dtype, a tensor of another dtype): each operand widened to f32
  (a number rounded to the nearest f32), one f32 operation, one rounding
  to the result dtype.  PyTorch's CUDA kernels compute so; its CPU
  kernels differ in the last bit at times.  Two tensors of one dtype go
  to PyTorch's kernel (f32 holds the exact result's correct rounding to
  bf16/f16: 24 >= 2 * 11 + 2 bits)."""

import math

import numpy as np
import torch

from ._registry import NotCoveredError, register

aten = torch.ops.aten
HALF = (torch.bfloat16, torch.float16)


def _f32(x):
    return x.float() if x.dtype in HALF else x


def _back(y, dtype):
    return y if y.dtype == dtype else y.to(dtype)


def _check_float(op, x):
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return False
    if x.dtype not in (torch.float32, torch.float64) + HALF:
        raise NotCoveredError(op, f"self: dtype {x.dtype}")
    return True


def _sqrt32(xf):
    """The correctly rounded sqrt of an f32 (or f64) tensor."""
    if xf.dtype == torch.float64:
        return torch.sqrt(xf)
    return torch.sqrt(xf.double()).float()


def _recip32(xf):
    """The correctly rounded 1 / x of an f32 (or f64) tensor."""
    if xf.dtype == torch.float64:
        return torch.reciprocal(xf)
    return torch.reciprocal(xf.double()).float()


def rsqrt(x):
    return _back(_recip32(_sqrt32(_f32(x))), x.dtype)


def _float_input(op, self):
    """self as a float tensor: integers become the default float dtype,
    as PyTorch's own sqrt and reciprocal do."""
    if not isinstance(self, torch.Tensor):
        raise NotCoveredError(op, f"self: {type(self).__name__}")
    if not self.is_floating_point():
        return self.to(torch.get_default_dtype())
    _check_float(op, self)
    return self


@register("aten::sqrt.default")
def sqrt_op(self):
    x = _float_input("aten.sqrt", self)
    return _back(_sqrt32(_f32(x)), x.dtype)


@register("aten::sqrt_.default")
def sqrt_op_(self):
    return self.copy_(sqrt_op(self))


@register("aten::reciprocal.default")
def reciprocal_op(self):
    x = _float_input("aten.reciprocal", self)
    return _back(_recip32(_f32(x)), x.dtype)


@register("aten::reciprocal_.default")
def reciprocal_op_(self):
    return self.copy_(reciprocal_op(self))


@register("aten::rsqrt.default")
def rsqrt_op(self):
    if not _check_float("aten.rsqrt", self):
        raise NotCoveredError("aten.rsqrt", f"self: dtype {self.dtype}")
    return rsqrt(self)


@register("aten::rsqrt_.default")
def rsqrt_op_(self):
    return self.copy_(rsqrt_op(self))


def pow_scalar(x, e):
    xf = _f32(x)
    if e == 2:
        y = xf * xf
    elif e == 3:
        y = xf * xf * xf
    elif e == -1:
        y = _recip32(xf)
    elif e == -2:
        y = _recip32(xf * xf)
    elif e == 0.5:
        y = _sqrt32(xf)
    elif e == -0.5:
        y = _recip32(_sqrt32(xf))
    elif e == 1:
        y = xf.clone()
    elif e == 0:
        y = torch.ones_like(xf)
    else:
        raise NotCoveredError("aten.pow", f"exponent {e!r} (2, 3, -1, -2, 0.5, -0.5, 1 and 0 "
                              "are covered)")
    return _back(y, x.dtype)


@register("aten::pow.Tensor_Scalar")
def pow_ts(self, exponent):
    if not self.is_floating_point() and not isinstance(exponent, float):
        return aten.pow.Tensor_Scalar(self, exponent)    # integers: exact
    if not _check_float("aten.pow", self):
        raise NotCoveredError("aten.pow", f"self: dtype {self.dtype} with exponent {exponent!r}")
    return pow_scalar(self, exponent)


@register("aten::pow_.Scalar")
def pow_ts_(self, exponent):
    return self.copy_(pow_ts(self, exponent))


@register("aten::pow.Tensor_Tensor", "aten::pow.Scalar")
def pow_other(self, exponent):
    a = [t for t in (self, exponent) if isinstance(t, torch.Tensor)]
    if all(not t.is_floating_point() for t in a) and not any(
            isinstance(t, float) for t in (self, exponent)):
        return aten.pow(self, exponent)
    raise NotCoveredError("aten.pow", "a tensor exponent (pow(x, n) for a scalar n in "
                          "2, 3, -1, -2, 0.5, -0.5 is covered)")


# ---------------------------------------------------------------- sin, cos

_TWO_OVER_PI = 2.0 / math.pi
_P1 = 1.57079632673412561417e+00   # the first 33 bits of pi/2
_P2 = 6.07710050650619224932e-11   # pi/2 - _P1
_S = (-1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04,
      2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10)
_C = (4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05,
      -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11)


def _horner(z, coef):
    p = torch.full_like(z, coef[-1])
    for c in reversed(coef[:-1]):
        p = p * z
        p = p + c
    return p


def _sincos(x, want_sin):
    d = x.to(torch.float64)
    k = torch.round(d * _TWO_OVER_PI)
    r = d - k * _P1
    r = r - k * _P2
    z = r * r
    s = r + (r * z) * _horner(z, _S)
    c = (1.0 - 0.5 * z) + (z * z) * _horner(z, _C)
    n = torch.remainder(torch.nan_to_num(k, nan=0.0, posinf=0.0, neginf=0.0)
                        .to(torch.int64), 4)
    if want_sin:
        y = torch.where(n == 0, s, torch.where(n == 1, c, torch.where(n == 2, -s, -c)))
    else:
        y = torch.where(n == 0, c, torch.where(n == 1, -s, torch.where(n == 2, -c, s)))
    y = y.to(torch.float32)
    y = torch.where(torch.isnan(y), torch.full_like(y, math.nan), y)
    return _back(y, x.dtype)


@register("aten::cos.default")
def cos(self):
    if not _check_float("aten.cos", self):
        raise NotCoveredError("aten.cos", f"self: dtype {self.dtype}")
    return _sincos(self, False) if self.dtype != torch.float64 else \
        _sincos(self, False).to(torch.float64)


@register("aten::sin.default")
def sin(self):
    if not _check_float("aten.sin", self):
        raise NotCoveredError("aten.sin", f"self: dtype {self.dtype}")
    return _sincos(self, True) if self.dtype != torch.float64 else \
        _sincos(self, True).to(torch.float64)


# ------------------------------------------------------- division by scalars

def _scalar(other, device):
    """A Python number, or the value of a 0-dim tensor on the CPU while
    the dividend is elsewhere (PyTorch's CUDA kernel special-cases both)."""
    if isinstance(other, (int, float, bool)):
        return other
    if (isinstance(other, torch.Tensor) and other.dim() == 0 and other.device.type == "cpu"
            and device.type != "cpu"):
        return other.item()
    return None


def div(self, other):
    s = _scalar(other, self.device) if isinstance(self, torch.Tensor) else None
    if s is None:
        if isinstance(other, torch.Tensor) and _mixed_half(self, other):
            rt = torch.result_type(self, other)
            return _back(self.to(torch.float32) / other.to(torch.float32), rt)
        return aten.div.Tensor(self, other)
    rt = torch.result_type(self, other)
    if not rt.is_floating_point:
        raise NotCoveredError("aten.div", f"result dtype {rt}")
    if rt == torch.float64:
        q = self.to(torch.float64) / torch.full((), float(s), dtype=torch.float64,
                                                device=self.device)
        return q
    xf = self.to(torch.float32)
    q = xf / torch.full((), float(s), dtype=torch.float32, device=self.device)
    return _back(q, rt)


@register("aten::div.Tensor", "aten::div.Scalar")
def div_op(self, other):
    return div(self, other)


@register("aten::div_.Tensor", "aten::div_.Scalar")
def div_op_(self, other):
    return self.copy_(div(self, other))


@register("aten::div.Tensor_mode", "aten::div.Scalar_mode")
def div_mode(self, other, *, rounding_mode=None):
    t = [x for x in (self, other) if isinstance(x, torch.Tensor)]
    if rounding_mode is None:
        return div(self, other)
    if any(x.is_floating_point() for x in t) or isinstance(other, float):
        raise NotCoveredError("aten.div", f"rounding_mode={rounding_mode!r} on floats")
    return aten.div.Tensor_mode(self, other, rounding_mode=rounding_mode)


# ------------------------------------- bf16/f16 arithmetic with a scalar

def _f32_scalar(v):
    """A Python number rounded to the nearest f32 (Inf beyond its range)."""
    if isinstance(v, complex):
        return None
    with np.errstate(over="ignore"):
        return float(np.float32(float(v)))


def _widen(v, device):
    """An operand of the f32 path: a tensor converted to f32 (exact for
    bf16/f16, rounded once for f64 and integers), a number rounded to f32."""
    if isinstance(v, torch.Tensor):
        return v if v.dtype == torch.float32 else v.to(torch.float32)
    return _f32_scalar(v)


def _mixed_half(self, other):
    """Whether self (op) other has a bf16/f16 operand next to a number, a
    0-dim tensor or a tensor of another dtype, with a bf16/f16 result.
    PyTorch's kernels differ there: CUDA widens both to f32 and rounds
    once, the CPU does not always.  Exact mode takes CUDA's route on every
    device, written out (see _arith)."""
    # cheap tests first: this runs on every add, sub and mul
    st, ot = isinstance(self, torch.Tensor), isinstance(other, torch.Tensor)
    if st and ot and self.dtype is other.dtype:
        return False
    if st and self.dtype in HALF:
        return True
    if not (ot and other.dtype in HALF):
        return False
    return torch.result_type(self, other) in HALF


def _arith(name, f32_op, self, other, alpha, rt):
    """self (op) other computed in f32 (each operand widened to f32, a
    number rounded to f32; one correctly rounded f32 operation) and
    rounded once to rt."""
    if alpha not in (1, -1):
        raise NotCoveredError(f"aten.{name}", f"alpha={alpha} (a fused a + alpha * b; +-1 is "
                              "exact)")
    dev = self.device if isinstance(self, torch.Tensor) else other.device
    a, b = _widen(self, dev), _widen(other, dev)
    if a is None or b is None:
        raise NotCoveredError(f"aten.{name}", "a complex operand")
    return _back(f32_op(a, b, alpha), rt)


_F32_OPS = {
    "add": lambda a, b, al: torch.add(a, b, alpha=al),
    "sub": lambda a, b, al: torch.sub(a, b, alpha=al),
    "mul": lambda a, b, al: torch.mul(a, b),
    "rsub": lambda a, b, al: torch.rsub(a, b, alpha=al),
}


def _arith_ops(name):
    f32_op = _F32_OPS[name]
    packet = getattr(aten, name)
    inplace = getattr(aten, name + "_", None)
    takes_alpha = name != "mul"

    def functional(overload):
        op = getattr(packet, overload)

        def f(self, other, *args, **kwargs):
            alpha = (args[0] if args else kwargs.get("alpha", 1)) if takes_alpha else 1
            if not _mixed_half(self, other):
                if alpha not in (1, -1):
                    raise NotCoveredError(f"aten.{name}", f"alpha={alpha} (a fused a + alpha "
                                          "* b; +-1 is exact)")
                return op(self, other, *args, **kwargs)
            return _arith(name, f32_op, self, other, alpha, torch.result_type(self, other))
        return f

    def in_place(overload):
        op = getattr(inplace, overload)

        def f_(self, other, *args, **kwargs):
            alpha = (args[0] if args else kwargs.get("alpha", 1)) if takes_alpha else 1
            if not _mixed_half(self, other):
                if alpha not in (1, -1):
                    raise NotCoveredError(f"aten.{name}_", f"alpha={alpha} (a fused a + alpha "
                                          "* b; +-1 is exact)")
                return op(self, other, *args, **kwargs)
            return self.copy_(_arith(name, f32_op, self, other, alpha, self.dtype))
        return f_

    for ov in ("Tensor", "Scalar"):
        if hasattr(packet, ov):
            register(f"aten::{name}.{ov}")(functional(ov))
        if inplace is not None and hasattr(inplace, ov):
            register(f"aten::{name}_.{ov}")(in_place(ov))


for _n in _F32_OPS:
    _arith_ops(_n)
