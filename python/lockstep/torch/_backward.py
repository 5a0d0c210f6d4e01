"""Exact backward ops: the aten ops autograd runs in loss.backward(),
routed to Lockstep's backward ops (docs/numerics.md section 13) so that
gradients computed inside exact() are the same bits on CPU and CUDA.

- softmax / log_softmax backward, silu / gelu / relu (threshold) backward
  and embedding_dense_backward: one Lockstep call each (the embedding
  gradient adds rows in ascending order: no atomics);
- sigmoid and tanh backward, from the forward's output: a fixed sequence
  of correctly rounded element-wise operations;
- sums over leading dims (a broadcast weight's or a bias's gradient):
  a GEMM with a row of ones, whose order Lockstep fixes;
- slice_backward: zeros and a copy, exact as PyTorch runs it.

What is not here (PyTorch's atomic scatter-adds such as index_add,
scatter_add, index_put with accumulate) stays uncovered: exact mode
raises for it instead of running a kernel whose order depends on the
device."""

import ctypes

import torch

from .._device import device as _find_device
from .._lib import lib
from ..errors import BadShapeError
from .. import train_ops  # noqa: F401 (declares the C prototypes)
from ._call import FLOATS, float_arg, lk_tensor, queue_for, run, same_device
from ._registry import COVERED, NotCoveredError, allow, register

aten = torch.ops.aten

_UNARY = {"relu": 2, "silu": 5, "gelu_tanh": 6, "gelu_erf": 7}


def _host():
    from ._mode import current
    m = current()
    return m.host_device if m is not None else _find_device("cpu")


def _q(dev):
    return queue_for(dev, _host())


def _lk(t, what, mode="rows"):
    return lk_tensor(t, what, mode)[0]


def _rows(t):
    """t as a contiguous rows x last-dim view (a 0-D or 1-D tensor: one row)."""
    t = t if t.is_contiguous() else t.contiguous()
    cols = t.shape[-1] if t.dim() else 1
    return t.reshape(-1, cols)


def _last(op, x, dim):
    d = dim + x.dim() if dim < 0 else dim
    if d != max(x.dim() - 1, 0):
        raise NotCoveredError(op, f"dim {dim} of a {x.dim()}-D tensor: Lockstep's backward "
                              "ops work along the last dim")


# --------------------------------------------------------- element-wise

def _unary_backward(op, code, grad, x):
    float_arg(grad, op, "grad_output")
    float_arg(x, op, "self")
    dev = same_device(op, grad_output=grad, self=x)
    if grad.shape != x.shape:
        raise BadShapeError(3, f"{op}: grad_output {tuple(grad.shape)}, self {tuple(x.shape)}")
    g2, x2 = _rows(grad), _rows(x)
    out = torch.empty(g2.shape, dtype=grad.dtype, device=dev)
    run(lib.lk_unary_backward, _q(dev), code, ctypes.byref(_lk(x2, f"{op}: self")),
        ctypes.byref(_lk(g2, f"{op}: grad_output")), ctypes.byref(_lk(out, f"{op}: out")))
    return out.reshape(x.shape)


@register("aten::silu_backward.default")
def silu_backward(grad_output, self):
    return _unary_backward("aten.silu_backward", _UNARY["silu"], grad_output, self)


@register("aten::gelu_backward.default")
def gelu_backward(grad_output, self, *, approximate="none"):
    code = {"none": _UNARY["gelu_erf"], "tanh": _UNARY["gelu_tanh"]}.get(approximate)
    if code is None:
        raise NotCoveredError("aten.gelu_backward", f"approximate={approximate!r}")
    return _unary_backward("aten.gelu_backward", code, grad_output, self)


@register("aten::threshold_backward.default")
def threshold_backward(grad_output, self, threshold):
    if threshold != 0:
        raise NotCoveredError("aten.threshold_backward", f"threshold {threshold} (relu's 0 "
                              "is covered)")
    return _unary_backward("aten.threshold_backward", _UNARY["relu"], grad_output, self)


@register("aten::sigmoid_backward.default")
def sigmoid_backward(grad_output, output):
    # dy * (y * (1 - y)): three correctly rounded operations in this order
    return grad_output * (output * (1 - output))


@register("aten::tanh_backward.default")
def tanh_backward(grad_output, output):
    # dy * (1 - y * y)
    return grad_output * (1 - output * output)


# --------------------------------------------------------------- softmax

def _softmax_backward(op, log, grad, output, dim, input_dtype):
    float_arg(grad, op, "grad_output")
    float_arg(output, op, "output")
    _last(op, output, dim)
    dev = same_device(op, grad_output=grad, output=output)
    g2, y2 = _rows(grad), _rows(output)
    out = torch.empty(g2.shape, dtype=input_dtype, device=dev)
    run(lib.lk_softmax_backward, _q(dev), ctypes.byref(_lk(y2, f"{op}: output")),
        ctypes.byref(_lk(g2, f"{op}: grad_output")), int(log),
        ctypes.byref(_lk(out, f"{op}: out")))
    return out.reshape(output.shape)


@register("aten::_softmax_backward_data.default")
def softmax_backward(grad_output, output, dim, input_dtype):
    return _softmax_backward("aten._softmax_backward_data", 0, grad_output, output, dim,
                             input_dtype)


@register("aten::_log_softmax_backward_data.default")
def log_softmax_backward(grad_output, output, dim, input_dtype):
    return _softmax_backward("aten._log_softmax_backward_data", 1, grad_output, output, dim,
                             input_dtype)


# ------------------------------------------------------------- embedding

@register("aten::embedding_dense_backward.default")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx,
                             scale_grad_by_freq):
    op = "aten.embedding_dense_backward"
    if scale_grad_by_freq:
        raise NotCoveredError(op, "scale_grad_by_freq=True")
    float_arg(grad_output, op, "grad_output")
    dev = same_device(op, grad_output=grad_output, indices=indices)
    dim = grad_output.shape[-1]
    g2 = _rows(grad_output)
    ids = indices.reshape(-1).to(torch.int32).contiguous()
    if ids.numel() != g2.shape[0]:
        raise BadShapeError(3, f"{op}: {ids.numel()} indices for {g2.shape[0]} gradient rows")
    table = torch.zeros((num_weights, dim), dtype=torch.float32, device=dev)
    run(lib.lk_embedding_backward, _q(dev), ctypes.byref(_lk(g2, f"{op}: grad_output")),
        ctypes.byref(_lk(ids, f"{op}: indices", "column")), ctypes.byref(_lk(table, f"{op}: out")))
    if padding_idx is not None and 0 <= padding_idx < num_weights:
        table[padding_idx] = 0  # PyTorch gives the padding row no gradient
    return table.to(grad_output.dtype)


# ---------------------------------------------- sums over leading dims

def column_sum(x2):
    """The 1 x cols sum over the rows of x2 (f32 result), lk_gemm of a row
    of ones: the rows are added in lk_gemm's K order on every device."""
    dev = x2.device
    ones = torch.ones((1, x2.shape[0]), dtype=torch.float32, device=dev)
    out = torch.empty((1, x2.shape[1]), dtype=torch.float32, device=dev)
    run(lib.lk_gemm, _q(dev), 0, 0, ctypes.byref(_lk(ones, "column_sum: ones")),
        ctypes.byref(_lk(x2, "column_sum: x")), None, ctypes.byref(_lk(out, "column_sum: out")),
        1, 0)
    return out


_sum_last = COVERED.get(aten.sum.dim_IntList) or COVERED.get(aten.sum)


@register("aten::sum.dim_IntList")
def sum_dim(self, dim, keepdim=False, *, dtype=None):
    """Sums over leading dims (what autograd runs for the gradient of a
    broadcast operand) as column sums; the last dim alone goes to the
    row reduction of exact mode's forward ops."""
    nd = self.dim()
    dims = sorted({(d + nd if d < 0 else d) for d in (dim or range(nd))})
    if (nd == 0 or dims == [nd - 1]) and _sum_last is not None:
        return _sum_last(self, dim, keepdim, dtype=dtype)
    keep = [d for d in range(nd) if d not in dims]
    shape = [1 if d in dims else self.shape[d] for d in range(nd)] if keepdim else \
        [self.shape[d] for d in keep]
    if self.dtype not in FLOATS or _sum_last is None:
        raise NotCoveredError("aten.sum", f"dims {dim} of a {nd}-D {self.dtype} tensor")
    if nd - 1 in dims:
        # the summed dims last, as one row each: the row reduction
        x = self.permute(*keep, *dims).contiguous()
        kept = 1
        for d in keep:
            kept *= self.shape[d]
        return _sum_last(x.reshape(kept, -1), [-1], False, dtype=dtype).reshape(shape)
    x = self.permute(*dims, *keep).contiguous()
    rows = 1
    for d in dims:
        rows *= self.shape[d]
    out = column_sum(x.reshape(rows, -1))
    return out.reshape(shape).to(dtype or self.dtype)


# ---------------------------------------------------- exact as PyTorch runs

# zeros, then the gradient copied into the slice: no arithmetic
allow("aten::slice_backward")
allow("aten::select_backward")


# -------------------------------------------------------------- LayerNorm

def _row_mean(x2):
    """lk_reduce MEAN of each row of a contiguous f32 rows x cols tensor
    (rows x 1)."""
    out = torch.empty((x2.shape[0], 1), dtype=torch.float32, device=x2.device)
    run(lib.lk_reduce, _q(x2.device), 2, ctypes.byref(_lk(x2, "layer_norm_backward: x")),
        ctypes.byref(_lk(out, "layer_norm_backward: mean", "column")))
    return out


@register("aten::native_layer_norm_backward.default")
def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    """The sequence of section 13.3 from the forward's own mean and rstd
    (the bits lk_norm_backward recomputes from eps): xh = (x - mean) *
    rstd, g = dy * w, a and b the row means of g and g * xh (lk_reduce),
    dx = ((g - a) - xh * b) * rstd; dw and db column sums."""
    op = "aten.native_layer_norm_backward"
    float_arg(grad_out, op, "grad_out")
    float_arg(input, op, "input")
    if len(normalized_shape) != 1 or input.shape[-1] != normalized_shape[0]:
        raise NotCoveredError(op, f"normalized_shape {list(normalized_shape)} (the last dim "
                              "is covered)")
    same_device(op, grad_out=grad_out, input=input, weight=weight)
    n = input.shape[-1]
    x = _rows(input).float()
    dy = _rows(grad_out).float()
    xh = (x - mean.reshape(-1, 1).float()) * rstd.reshape(-1, 1).float()
    dx = dw = db = None
    if output_mask[0]:
        g = dy * weight.float().reshape(1, n) if weight is not None else dy
        a = _row_mean(g.contiguous())
        b = _row_mean((g * xh).contiguous())
        dx = (((g - a) - xh * b) * rstd.reshape(-1, 1).float()).to(input.dtype)
        dx = dx.reshape(input.shape)
    if output_mask[1] and weight is not None:
        dw = column_sum((dy * xh).contiguous()).reshape(n).to(weight.dtype)
    if output_mask[2] and bias is not None:
        db = column_sum(dy).reshape(n).to(bias.dtype)
    return dx, dw, db


# ------------------------------------------------ autograd's device threads

def _owner_on_every_thread():
    """loss.backward() of CUDA tensors runs on autograd's worker thread for
    that device.  PyTorch carries the dispatch mode there, but not the
    thread-local stack behind _mode.current(), which the covered ops read
    (the host device, the GEMM tier).  While a handler runs on a thread
    whose stack is empty, the mode's own ExactMode is put there."""
    from . import _mode
    cls = _mode._Dispatch
    if getattr(cls, "_lockstep_thread_owner", False):
        return
    inner = cls.__torch_dispatch__

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        stack = getattr(_mode._local, "stack", None)
        if stack:
            return inner(self, func, types, args, kwargs)
        # current() reads the top of the stack, kept beside it
        top = getattr(_mode._local, "top", None)
        _mode._local.stack = [self.owner]
        _mode._local.top = self.owner
        try:
            return inner(self, func, types, args, kwargs)
        finally:
            _mode._local.stack = stack if stack is not None else []
            _mode._local.top = top

    cls.__torch_dispatch__ = __torch_dispatch__
    cls._lockstep_thread_owner = True


_owner_on_every_thread()


__all__ = ["column_sum"]
