"""BitLinear: the ternary linear layer of BitNet b1.58, trained with the
straight-through estimator and deployed on Lockstep's ternary kernels.

Forward (training and deployed alike), per call:
- weights: m = max(mean |W|, 1e-5), t = clamp(rne(W / m), -1, 1)
  (lk_quantize_ternary: packed LK_T2 codes and the scale m);
- activations, per token (row): s = 127 / max(absmax, 1e-5),
  q = clamp(rne(x * s), -128, 127) (lk_quantize_act);
- y = (acc / s) * m with acc = sum_k q * t exactly in int32
  (lk_ternary_gemm), then + bias.
So the training forward is exactly what the deployed layer computes:
deploy() keeps the packed weights and their scale and runs the same two
ops, and its outputs equal the training layer's bit for bit, on CPU and
CUDA alike.

Backward (straight-through estimator, as BitNet trains): the gradient
flows as if the forward were x_q @ w_q^T with the dequantised operands
x_q = q / s and w_q = t * m (each one correctly rounded f32 operation, so
the same bits everywhere): grad_x = dy @ w_q, grad_w = dy^T @ x_q and
grad_b = the column sum of dy, all Lockstep GEMMs (docs/numerics.md
section 4 fixes their order), so gradients are identical on every
device too."""

import ctypes

import torch

from .._device import device as _find_device
from .._lib import LkTensor, lib
from ..errors import BadShapeError
from ._call import lk_tensor, queue_for, run

T2 = 7
LK_TRANS = 1


def _host():
    from ._mode import current
    m = current()
    return m.host_device if m is not None else _find_device("cpu")


def _q(dev):
    return queue_for(dev, _host())


def _lk(t, what, mode="rows"):
    return lk_tensor(t, f"BitLinear: {what}", mode)[0]


def _t2(buf, rows, cols, ld):
    return LkTensor(buf.data_ptr(), T2, rows, cols, ld, 0)


def _ld4(k):
    return (k + 3) // 4 * 4


def quantize_weight(weight):
    """(packed, scale): the LK_T2 codes of weight (N x K) as uint8 N x
    ceil(K/4) and its f32 1 x 1 scale m (lk_quantize_ternary)."""
    n, k = weight.shape
    ld = _ld4(k)
    w = weight.detach()
    if not w.is_contiguous():
        w = w.contiguous()
    packed = torch.empty((n, ld // 4), dtype=torch.uint8, device=w.device)
    scale = torch.empty((1, 1), dtype=torch.float32, device=w.device)
    run(lib.lk_quantize_ternary, _q(w.device), ctypes.byref(_lk(w, "weight")),
        ctypes.byref(_t2(packed, n, k, ld)), ctypes.byref(_lk(scale, "scale")))
    return packed, scale


def unpack_weight(packed, k):
    """The int8 values {-1, 0, +1} (N x K) of packed codes."""
    n = packed.shape[0]
    out = torch.empty((n, k), dtype=torch.int8, device=packed.device)
    run(lib.lk_ternary_unpack, _q(packed.device), ctypes.byref(_t2(packed, n, k, packed.shape[1] * 4)),
        ctypes.byref(_lk(out, "unpacked")))
    return out


def pack_weight(values):
    """The LK_T2 codes of int8 values in {-1, 0, +1} (lk_ternary_pack)."""
    n, k = values.shape
    ld = _ld4(k)
    packed = torch.empty((n, ld // 4), dtype=torch.uint8, device=values.device)
    run(lib.lk_ternary_pack, _q(values.device), ctypes.byref(_lk(values.contiguous(), "values")),
        ctypes.byref(_t2(packed, n, k, ld)))
    return packed


def quantize_act(x2):
    """(q int8 M x K, s f32 M x 1) of activations x2 (M x K), per row."""
    m, k = x2.shape
    q = torch.empty((m, k), dtype=torch.int8, device=x2.device)
    s = torch.empty((m, 1), dtype=torch.float32, device=x2.device)
    run(lib.lk_quantize_act, _q(x2.device), ctypes.byref(_lk(x2, "x")),
        ctypes.byref(_lk(q, "xq")), ctypes.byref(_lk(s, "x_scale", "column")))
    return q, s


def ternary_matmul(q, s, packed, scale, k):
    """y (f32 M x N) = ((float)acc / s) * m (lk_ternary_gemm)."""
    m = q.shape[0]
    n = packed.shape[0]
    y = torch.empty((m, n), dtype=torch.float32, device=q.device)
    run(lib.lk_ternary_gemm, _q(q.device), ctypes.byref(_lk(q, "xq")),
        ctypes.byref(_lk(s, "x_scale", "column")),
        ctypes.byref(_t2(packed, n, k, packed.shape[1] * 4)), ctypes.byref(_lk(scale, "w_scale")),
        ctypes.byref(_lk(y, "y")))
    return y


def _gemm(a, b, ta=0, tb=0):
    """op(a) @ op(b) in f32, Lockstep's IEEE tier."""
    m = a.shape[1] if ta else a.shape[0]
    n = b.shape[0] if tb else b.shape[1]
    c = torch.empty((m, n), dtype=torch.float32, device=a.device)
    run(lib.lk_gemm, _q(a.device), ta, tb, ctypes.byref(_lk(a, "a")), ctypes.byref(_lk(b, "b")),
        None, ctypes.byref(_lk(c, "c")), 1, 0)
    return c


def _forward(x2, packed, scale, k, bias, out_dtype):
    xf = x2 if x2.dtype in (torch.float32, torch.bfloat16, torch.float16) else x2.float()
    if not xf.is_contiguous():
        xf = xf.contiguous()
    q, s = quantize_act(xf)
    y = ternary_matmul(q, s, packed, scale, k)
    if bias is not None:
        y = y + bias.float()
    return y.to(out_dtype), q, s


class _BitLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, weight, bias):
        packed, scale = quantize_weight(weight)
        y, q, s = _forward(x2, packed, scale, weight.shape[1], bias, x2.dtype)
        ctx.save_for_backward(q, s, packed, scale)
        ctx.k = weight.shape[1]
        ctx.meta = (x2.dtype, weight.dtype, None if bias is None else bias.dtype)
        return y

    @staticmethod
    def backward(ctx, dy):
        q, s, packed, scale = ctx.saved_tensors
        xdt, wdt, bdt = ctx.meta
        dyf = dy.float().contiguous()
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            w_q = unpack_weight(packed, ctx.k).float() * scale  # t * m, one rounding
            gx = _gemm(dyf, w_q).to(xdt)
        if ctx.needs_input_grad[1]:
            x_q = q.float() / s  # q / s, one rounding
            gw = _gemm(dyf, x_q, ta=LK_TRANS).to(wdt)
        if bdt is not None and ctx.needs_input_grad[2]:
            ones = torch.ones((1, dyf.shape[0]), dtype=torch.float32, device=dyf.device)
            gb = _gemm(ones, dyf).reshape(-1).to(bdt)
        return gx, gw, gb


class BitLinear(torch.nn.Linear):
    """nn.Linear with BitNet b1.58 ternary weights and int8 per-token
    activations (module docstring).  Trains with the straight-through
    estimator in or out of exact mode (the same bits on CPU and CUDA);
    deploy() freezes it into the packed ternary form."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.deployed = False

    @classmethod
    def from_linear(cls, lin):
        """A BitLinear sharing lin's weight and bias parameters."""
        m = cls.__new__(cls)
        torch.nn.Module.__init__(m)
        m.in_features, m.out_features = lin.in_features, lin.out_features
        m.weight = lin.weight
        m.bias = lin.bias
        m.deployed = False
        return m

    def forward(self, x):
        shape = x.shape
        if shape[-1] != self.in_features:
            raise BadShapeError(3, f"BitLinear: input has {shape[-1]} features, the layer "
                                f"{self.in_features}")
        x2 = x.reshape(-1, self.in_features)
        if self.deployed:
            y, _, _ = _forward(x2, self.packed, self.w_scale, self.in_features, self.bias,
                               x2.dtype)
        else:
            y = _BitLinearFn.apply(x2, self.weight, self.bias)
        return y.reshape(*shape[:-1], self.out_features)

    @torch.no_grad()
    def deploy(self):
        """Pack the weights into LK_T2 (buffers .packed, uint8 N x ceil(K/4),
        and .w_scale, f32 1 x 1) and drop the float weight: from now on
        forward runs lk_quantize_act and lk_ternary_gemm on the packed
        weights, on the module's device.  Returns self."""
        packed, scale = quantize_weight(self.weight)
        del self.weight
        self.register_buffer("packed", packed)
        self.register_buffer("w_scale", scale)
        if self.bias is not None:
            b = self.bias.detach().clone()
            del self.bias
            self.register_buffer("bias", b)
        self.deployed = True
        return self

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, deployed={self.deployed}")


def bitlinear_swap(model, *, skip=("lm_head",)):
    """Replace every nn.Linear of model (in place) by a BitLinear sharing
    its parameters, except modules whose name ends with one of skip (the
    output head usually stays full precision, as in BitNet).  Returns the
    number of layers swapped."""
    swapped = 0
    for name, mod in list(model.named_modules()):
        for child_name, child in list(mod.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if type(child) is torch.nn.Linear and not any(full.endswith(s) for s in skip):
                setattr(mod, child_name, BitLinear.from_linear(child))
                swapped += 1
    return swapped


__all__ = ["BitLinear", "bitlinear_swap", "quantize_weight", "unpack_weight", "pack_weight",
           "quantize_act", "ternary_matmul"]
