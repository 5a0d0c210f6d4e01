"""The aten ops exact mode runs as Lockstep calls: GEMMs, row reductions,
norms, softmax, element-wise functions, embedding.

Each implementation checks its arguments first (dtype, device, shape,
layout: an error names the argument and nothing is written), allocates
its result with torch.empty on the inputs' device and has Lockstep write
it in place."""

import ctypes

import torch
import torch.nn.functional as F

from ..errors import check, BadDtypeError, BadLeadingDimError, BadShapeError, WrongDeviceError
from ._call import (FLOATS, LK_DTYPE, LkTensor, empty, float_arg, lib, lk_tensor,
                    ptr_or_none, queue, ref, run, same_device, same_shape)
from .._tensor import _lk
from ._compose import rsqrt as _rsqrt   # correctly rounded on every device
from ._mode import current, function
from ._registry import NotCoveredError, register

aten = torch.ops.aten
HALF = (torch.bfloat16, torch.float16)


def _queue(dev):
    return queue(dev)


def _out(op, out, shape, dtype, dev):
    """out= checked (device, dtype, shape), or a new tensor."""
    if out is None:
        return empty(shape, dtype, dev)
    if out.device != dev:
        raise _wrong_device(op, "out", out.device, dev)
    if out.dtype != dtype:
        raise BadDtypeError(6, f"{op}: out: dtype {out.dtype}, the result is {dtype}")
    same_shape(op, "out", out, shape, "the result")
    return out


def _wrong_device(op, name, where, dev):
    return WrongDeviceError(7, f"{op}: {name} is on {where}, the inputs on {dev}")


def _last_dim(op, x, dim):
    d = dim + x.dim() if dim < 0 else dim
    if d != max(x.dim() - 1, 0):
        raise NotCoveredError(op, f"dim {dim} of a {x.dim()}-D tensor: Lockstep reduces "
                              "the last dim only")


# ---------------------------------------------------------------- GEMM

def _operand(t, op, name):
    """(LkTensor, transpose flag) of a 2-D or 3-D GEMM operand: its rows
    contiguous (no transpose), or its columns (a transposed view such as
    weight.t(): transposed storage)."""
    mode = "batched" if t.dim() == 3 else "rows"
    code = LK_DTYPE[t.dtype]
    if mode == "rows":
        # the common layouts: rows contiguous, or a transposed contiguous
        # matrix (weight.t())
        r, c = t.shape
        s0, s1 = t.stride()
        if (s1 == 1 or c == 1) and (s0 == c or r == 1):
            return LkTensor(t.data_ptr(), code, r, c, c or 1, 0), 0
        if (s0 == 1 or r == 1) and (s1 == r or c == 1) and r > 0:
            return LkTensor(t.data_ptr(), code, c, r, r, 0), 1
    shape, st = tuple(t.shape), tuple(t.stride())
    try:
        return _lk(t.data_ptr(), code, shape, st, mode, f"{op}: {name}")[0], 0
    except BadLeadingDimError as e:
        first = e
    tshape = shape[:-2] + (shape[-1], shape[-2])
    tst = st[:-2] + (st[-1], st[-2])
    try:
        return _lk(t.data_ptr(), code, tshape, tst, mode, f"{op}: {name}")[0], 1
    except BadLeadingDimError:
        raise first from None


def _gemm2d(op, a, b, bias, names):
    """The common case, checked and run with as little Python as it
    takes: 2-D operands of one float dtype on one device, a new result,
    no bias or a 1-D one.  None when the general path must decide."""
    dt = a.dtype
    dev = a.device
    if (dt not in FLOATS or b.dtype is not dt or a.dim() != 2 or b.dim() != 2
            or b.device != dev):
        return None
    m, k = a.shape
    k2, n = b.shape
    if k2 != k:
        return None
    lbias = None
    if bias is not None:
        if (bias.dtype not in FLOATS or bias.dim() != 1 or bias.shape[0] != n
                or bias.device != dev or (n > 1 and bias.stride(0) != 1)):
            return None
        lbias = ctypes.byref(LkTensor(bias.data_ptr(), LK_DTYPE[bias.dtype], 1, n, n or 1, 0))
    la, ta = _operand(a, op, names[0])
    lb, tb = _operand(b, op, names[1])
    res = torch.empty((m, n), dtype=dt, device=dev)
    lc = LkTensor(res.data_ptr(), LK_DTYPE[dt], m, n, n or 1, 0)
    st = lib.lk_gemm(queue(dev), ta, tb, ctypes.byref(la), ctypes.byref(lb), lbias,
                     ctypes.byref(lc), 1, current().tc_flag if dt in HALF else 0)
    if st:
        check(st)
    return res


def gemm(op, a, b, bias=None, out=None, accumulate_from=None, names=("mat1", "mat2")):
    """a @ b (+ bias) for 2-D or 3-D a and b (bias: N or 1 x N;
    accumulate_from: an M x N tensor added through LK_GEMM_ACCUMULATE)."""
    if out is None and accumulate_from is None and isinstance(a, torch.Tensor) and \
            isinstance(b, torch.Tensor):
        r = _gemm2d(op, a, b, bias, names)
        if r is not None:
            return r
    float_arg(a, op, names[0])
    float_arg(b, op, names[1])
    if bias is not None:
        float_arg(bias, op, "self")
    # one entry per argument: mm's operand is called self, as is addmm's
    # bias, and a dict literal would keep only the last of the two
    extra = {"out": out}
    if bias is not None or accumulate_from is not None:
        extra["self"] = bias if bias is not None else accumulate_from
    dev = same_device(op, **{names[0]: a, names[1]: b}, **extra)
    if a.dim() != b.dim() or a.dim() not in (2, 3):
        raise NotCoveredError(op, f"{names[0]} {a.dim()}-D and {names[1]} {b.dim()}-D "
                              "(2-D or 3-D pairs are covered)")
    if a.dtype != b.dtype:
        raise BadDtypeError(6, f"{op}: {names[1]}: dtype {b.dtype}, {names[0]} is {a.dtype}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    batch = a.shape[0] if a.dim() == 3 else 1
    if k2 != k or (a.dim() == 3 and b.shape[0] != batch):
        raise BadShapeError(3, f"{op}: {names[1]}: shape {tuple(b.shape)} cannot multiply "
                            f"{names[0]} {tuple(a.shape)}")
    shape = (batch, m, n) if a.dim() == 3 else (m, n)
    if bias is not None and tuple(bias.shape) not in ((n,), (1, n)):
        raise NotCoveredError(op, f"self (the bias): shape {tuple(bias.shape)} (N = {n} or "
                              f"1 x {n} is covered)")
    la, ta = _operand(a, op, names[0])
    lb, tb = _operand(b, op, names[1])
    lbias = None if bias is None else lk_tensor(bias, f"{op}: self")[0]
    res = _out(op, out, shape, a.dtype, dev)
    lc = lk_tensor(res, f"{op}: out", "batched" if a.dim() == 3 else "rows")[0]
    if batch > 1 and lc.batch_stride == 0:
        lc.batch_stride = lc.rows * lc.ld
    flags = 0
    if accumulate_from is not None:
        same_shape(op, "self", accumulate_from, shape, "the result")
        if accumulate_from.dtype not in FLOATS:
            raise NotCoveredError(op, f"self: dtype {accumulate_from.dtype}")
        lk_tensor(accumulate_from, f"{op}: self")  # its layout, checked before any write
        res.copy_(accumulate_from)
        flags |= 1
    if a.dtype in HALF:
        flags |= current().tc_flag
    run(lib.lk_gemm, _queue(dev), ta, tb, ref(la), ref(lb), ptr_or_none(lbias), ref(lc),
        batch, flags)
    return res


@register("aten::mm.default", "aten::mm.out")
def mm(self, mat2, *, out=None):
    return gemm("aten.mm", self, mat2, out=out, names=("self", "mat2"))


@register("aten::bmm.default", "aten::bmm.out")
def bmm(self, mat2, *, out=None):
    if self.dim() != 3:
        raise BadShapeError(3, f"aten.bmm: self: {self.dim()}-D, 3-D expected")
    return gemm("aten.bmm", self, mat2, out=out, names=("self", "mat2"))


@register("aten::addmm.default", "aten::addmm.out")
def addmm(self, mat1, mat2, *, beta=1, alpha=1, out=None):
    if beta != 1 or alpha != 1:
        raise NotCoveredError("aten.addmm", f"beta={beta}, alpha={alpha} (1 and 1 are covered)")
    if isinstance(self, torch.Tensor) and self.dim() == 2 and self.shape[0] != 1:
        return gemm("aten.addmm", mat1, mat2, out=out, accumulate_from=self)
    return gemm("aten.addmm", mat1, mat2, bias=self, out=out)


@register("aten::linear.default")
def linear(input, weight, bias=None):
    x = input.reshape(-1, input.shape[-1]) if input.dim() != 2 else input
    y = gemm("aten.linear", x, weight.t(), bias=bias, names=("input", "weight"))
    return y.view(*input.shape[:-1], weight.shape[0])


_PLAIN = (torch.Tensor, torch.nn.Parameter)


@function(F, "linear", light=True)
def linear_function(input, weight, bias=None):
    """F.linear as one Lockstep GEMM: aten would see t, view, mm (or
    addmm) and _unsafe_view, four trips through the dispatch mode.  Runs
    with the mode active (light): it dispatches no aten op itself but the
    result's allocation, made with Python dispatch off.  Anything but
    plain contiguous inference tensors goes on to the aten ops."""
    if (input.__class__ not in _PLAIN or weight.__class__ not in _PLAIN
            or (bias is not None and bias.__class__ not in _PLAIN)
            or _needs_grad(input, weight, bias)):
        return NotImplemented
    dt = input.dtype
    dev = input.device
    if (dt not in FLOATS or weight.dtype is not dt or weight.dim() != 2 or input.dim() == 0
            or weight.device != dev or not input.is_contiguous()
            or not weight.is_contiguous()):
        return NotImplemented
    n, k = weight.shape
    shape = input.shape
    if shape[-1] != k or k == 0 or n == 0:
        return NotImplemented
    m = input.numel() // k
    if m == 0:
        return NotImplemented
    lbias = None
    if bias is not None:
        if (bias.dtype not in FLOATS or bias.dim() != 1 or bias.shape[0] != n
                or bias.device != dev or (n > 1 and bias.stride(0) != 1)):
            return NotImplemented
        lbias = ctypes.byref(LkTensor(bias.data_ptr(), LK_DTYPE[bias.dtype], 1, n, n, 0))
    code = LK_DTYPE[dt]
    qh = queue(dev)
    with _NO_PYTHON_DISPATCH():
        res = torch.empty((*shape[:-1], n), dtype=dt, device=dev)
    la = LkTensor(input.data_ptr(), code, m, k, k, 0)
    lb = LkTensor(weight.data_ptr(), code, n, k, k, 0)   # weight.T: transposed storage
    lc = LkTensor(res.data_ptr(), code, m, n, n, 0)
    st = lib.lk_gemm(qh, 0, 1, ctypes.byref(la), ctypes.byref(lb), lbias, ctypes.byref(lc),
                     1, current().tc_flag if dt in HALF else 0)
    if st:
        check(st)
    return res


# ----------------------------------------------------- row reductions

_SUM, _MEAN, _MAX, _VAR, _VAR_UNBIASED, _ARGMAX = 1, 2, 3, 5, 6, 7


def _dims(dim):
    if dim is None:
        return None
    if isinstance(dim, int):
        return [dim]
    return list(dim) or None


def reduce(op, code, x, dim, keepdim, dtype, out=None):
    """One value per row of x over dim (the last dim, or every dim of a
    contiguous tensor when dim is None or empty)."""
    float_arg(x, op, "self")
    dev = x.device
    dims = _dims(dim)
    if dims is not None:
        norm = sorted(set(d % max(x.dim(), 1) for d in dims))
        if x.dim() > 1 and norm == list(range(x.dim())):
            dims = None
        elif len(norm) != 1:
            raise NotCoveredError(op, f"dims {list(dims)}: Lockstep reduces the last dim only")
    if dims is None or x.dim() == 0:
        if not x.is_contiguous():
            raise BadLeadingDimError(4, f"{op}: self: a reduction over every dim reads a "
                                     "contiguous tensor (copy first)")
        xv = x.reshape(1, -1)
        shape = (1,) * x.dim() if keepdim else ()
    else:
        _last_dim(op, x, dims[0])
        xv = x
        shape = tuple(x.shape[:-1]) + ((1,) if keepdim else ())
    if code == _ARGMAX:
        odt = torch.int64
    else:
        odt = dtype if dtype is not None else x.dtype
        if odt not in FLOATS:
            raise NotCoveredError(op, f"dtype={odt}")
    lx = lk_tensor(xv, f"{op}: self")[0]
    res = _out(op, out, shape, odt, dev)
    ly = lk_tensor(res, f"{op}: out", "column")[0]
    run(lib.lk_reduce, _queue(dev), code, ref(lx), ref(ly))
    return res


def _exact_int(func, x, *a, **kw):
    """Integer and bool reductions are exact: PyTorch's kernel."""
    return func(x, *a, **kw)


@register("aten::sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    if not self.is_floating_point():
        if dtype is not None and dtype.is_floating_point:
            raise NotCoveredError("aten.sum", f"an integer sum into {dtype}")
        return aten.sum.dim_IntList(self, dim, keepdim, dtype=dtype)
    return reduce("aten.sum", _SUM, self, dim, keepdim, dtype)


@register("aten::sum.default")
def sum_all(self, *, dtype=None):
    if not self.is_floating_point():
        if dtype is not None and dtype.is_floating_point:
            raise NotCoveredError("aten.sum", f"an integer sum into {dtype}")
        return aten.sum.default(self, dtype=dtype)
    return reduce("aten.sum", _SUM, self, None, False, dtype)


@register("aten::mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    return reduce("aten.mean", _MEAN, self, dim, keepdim, dtype)


@register("aten::mean.default")
def mean_all(self, *, dtype=None):
    return reduce("aten.mean", _MEAN, self, None, False, dtype)


@register("aten::var.correction")
def var_correction(self, dim=None, *, correction=None, keepdim=False):
    c = 1 if correction is None else correction
    if c not in (0, 1):
        raise NotCoveredError("aten.var", f"correction={correction} (0 and 1 are covered)")
    return reduce("aten.var", _VAR if c == 0 else _VAR_UNBIASED, self, dim, keepdim, None)


@register("aten::var.dim")
def var_dim(self, dim, unbiased=True, keepdim=False):
    return reduce("aten.var", _VAR_UNBIASED if unbiased else _VAR, self, dim, keepdim, None)


@register("aten::var.default")
def var_all(self, unbiased=True):
    return reduce("aten.var", _VAR_UNBIASED if unbiased else _VAR, self, None, False, None)


@register("aten::amax.default")
def amax(self, dim=(), keepdim=False):
    if not self.is_floating_point():
        return aten.amax.default(self, dim, keepdim)
    return reduce("aten.amax", _MAX, self, dim, keepdim, None)


@register("aten::argmax.default")
def argmax(self, dim=None, keepdim=False):
    if not self.is_floating_point():
        return aten.argmax.default(self, dim, keepdim)
    if dim is None and keepdim:
        raise NotCoveredError("aten.argmax", "dim=None with keepdim=True")
    return reduce("aten.argmax", _ARGMAX, self, dim, keepdim, None)


# -------------------------------------------------- norms and softmax

def _rowwise(op, fn, x, dim, out_dtype, *extra):
    float_arg(x, op, "self")
    _last_dim(op, x, dim)
    lx = lk_tensor(x, f"{op}: self")[0]
    res = empty(tuple(x.shape), out_dtype, x.device)
    ly = lk_tensor(res, f"{op}: out")[0]
    run(fn, _queue(x.device), ref(lx), *extra, ref(ly))
    return res


@register("aten::_softmax.default")
def softmax(self, dim, half_to_float):
    dt = torch.float32 if half_to_float and self.dtype in HALF else self.dtype
    return _rowwise("aten._softmax", lib.lk_softmax, self, dim, dt)


@register("aten::_log_softmax.default")
def log_softmax(self, dim, half_to_float):
    dt = torch.float32 if half_to_float and self.dtype in HALF else self.dtype
    return _rowwise("aten._log_softmax", lib.lk_log_softmax, self, dim, dt)


def _norm_args(op, x, normalized_shape, weight, bias):
    float_arg(x, op, "input")
    if len(normalized_shape) != 1 or x.dim() == 0 or x.shape[-1] != normalized_shape[0]:
        raise NotCoveredError(op, f"normalized_shape {list(normalized_shape)} of input "
                              f"{tuple(x.shape)} (the last dim is covered)")
    dev = same_device(op, input=x, weight=weight, bias=bias)
    n = x.shape[-1]
    lw = lb = None
    if weight is not None:
        float_arg(weight, op, "weight")
        same_shape(op, "weight", weight, (n,), "normalized_shape")
        lw = lk_tensor(weight, f"{op}: weight")[0]
    if bias is not None:
        float_arg(bias, op, "bias")
        same_shape(op, "bias", bias, (n,), "normalized_shape")
        lb = lk_tensor(bias, f"{op}: bias")[0]
    lx = lk_tensor(x, f"{op}: input")[0]
    return dev, lx, lw, lb


def _stats(x, eps):
    """mean and rstd = 1 / sqrt(var + eps) per row, f32, shaped as
    native_layer_norm returns them (input's shape with the last dim 1)."""
    mean = reduce("aten.native_layer_norm", _MEAN, x, -1, True, torch.float32)
    var = reduce("aten.native_layer_norm", _VAR, x, -1, True, torch.float32)
    rstd = _rsqrt(var + float(torch.tensor(eps, dtype=torch.float32)))
    return mean, rstd


@register("aten::native_layer_norm.default")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    op = "aten.native_layer_norm"
    dev, lx, lw, lb = _norm_args(op, input, normalized_shape, weight, bias)
    res = empty(tuple(input.shape), input.dtype, dev)
    ly = lk_tensor(res, f"{op}: out")[0]
    run(lib.lk_layernorm, _queue(dev), ref(lx), ptr_or_none(lw), ptr_or_none(lb), float(eps),
        ref(ly))
    mean, rstd = _stats(input, eps)
    return res, mean, rstd


def rms_norm(op, input, normalized_shape, weight, eps):
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    dev, lx, lw, _ = _norm_args(op, input, normalized_shape, weight, None)
    res = empty(tuple(input.shape), input.dtype, dev)
    ly = lk_tensor(res, f"{op}: out")[0]
    run(lib.lk_rmsnorm, _queue(dev), ref(lx), ptr_or_none(lw), float(eps), ref(ly))
    return res


_NO_PYTHON_DISPATCH = torch._C._DisableTorchDispatch


def _needs_grad(*ts):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in ts)


@function(F, "rms_norm")
def rms_norm_function(input, normalized_shape, weight=None, eps=None):
    if _needs_grad(input, weight):
        # autograd needs the aten form: it decomposes into covered and
        # composed ops (pow, mean, rsqrt, mul) with their own gradients
        return NotImplemented
    return rms_norm("rms_norm", input, normalized_shape, weight, eps)


@register("aten::_fused_rms_norm.default")
def fused_rms_norm(input, normalized_shape, weight, eps):
    y = rms_norm("aten._fused_rms_norm", input, normalized_shape, weight, eps)
    ms = reduce("aten._fused_rms_norm", _MEAN, input * input if input.dtype == torch.float32
                else input.float() * input.float(), -1, True, torch.float32)
    e = torch.finfo(input.dtype).eps if eps is None else eps
    rstd = _rsqrt(ms + float(torch.tensor(e, dtype=torch.float32)))
    return y, rstd


# --------------------------------------------------------- element-wise

_UNARY = {"relu": 2, "sigmoid": 4, "silu": 5, "exp": 8, "log": 9, "tanh": 10, "erf": 11}


def unary(op, code, self, out=None):
    if not self.is_floating_point() and op in ("relu",):
        return None
    float_arg(self, f"aten.{op}", "self")
    dev = same_device(f"aten.{op}", self=self, out=out)
    lx = lk_tensor(self, f"aten.{op}: self")[0]
    res = _out(f"aten.{op}", out, tuple(self.shape), self.dtype, dev)
    ly = lx if res is self else lk_tensor(res, f"aten.{op}: out")[0]
    run(lib.lk_unary, _queue(dev), code, ref(lx), ref(ly))
    return res


def _unary_ops(name, code):
    packet = getattr(aten, name)

    @register(f"aten::{name}.default")
    def f(self):
        r = unary(name, code, self)
        return packet.default(self) if r is None else r

    @register(f"aten::{name}_.default")
    def f_(self):
        r = unary(name, code, self, out=self)
        return getattr(aten, name + "_").default(self) if r is None else r

    if hasattr(packet, "out"):
        @register(f"aten::{name}.out")
        def f_out(self, *, out):
            return unary(name, code, self, out=out)


for _name, _code in _UNARY.items():
    _unary_ops(_name, _code)


def _gelu_code(approximate):
    if approximate == "tanh":
        return 6
    if approximate == "none":
        return 7
    raise NotCoveredError("aten.gelu", f"approximate={approximate!r}")


@register("aten::gelu.default")
def gelu(self, *, approximate="none"):
    return unary("gelu", _gelu_code(approximate), self)


@register("aten::gelu_.default")
def gelu_(self, *, approximate="none"):
    return unary("gelu_", _gelu_code(approximate), self, out=self)


@register("aten::gelu.out")
def gelu_out(self, *, approximate="none", out):
    return unary("gelu", _gelu_code(approximate), self, out=out)


# --------------------------------------------------------- embedding

@register("aten::embedding.default")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    op = "aten.embedding"
    float_arg(weight, op, "weight")
    dev = same_device(op, weight=weight, indices=indices)
    if indices.dtype not in (torch.int32, torch.int64):
        raise BadDtypeError(6, f"{op}: indices: dtype {indices.dtype} (int32 or int64)")
    if weight.dim() != 2:
        raise BadShapeError(3, f"{op}: weight: {weight.dim()}-D, a 2-D table expected")
    ids = indices.reshape(-1)
    if ids.dtype == torch.int64:
        # ids outside int32 become -1, which Lockstep refuses (RangeError)
        i32 = ids.to(torch.int32)
        ids = torch.where(ids == i32, i32, torch.full((), -1, dtype=torch.int32, device=dev))
    lt = lk_tensor(weight, f"{op}: weight")[0]
    li = lk_tensor(ids, f"{op}: indices", "column")[0]
    res = empty((ids.shape[0], weight.shape[1]), weight.dtype, dev)
    ly = lk_tensor(res, f"{op}: out")[0]
    run(lib.lk_embedding, _queue(dev), ref(lt), ref(li), ref(ly))
    return res.view(*indices.shape, weight.shape[1])
