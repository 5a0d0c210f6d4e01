"""The training ops of <lockstep/ops.h> (docs/numerics.md section 13):
backward ops and optimizer steps, with the conventions of lockstep.ops
(DLPack or lockstep.Tensor arguments, out=, device=).

Column sums over rows (a weight's or a bias's gradient) are column_sum,
an lk_gemm with a row of ones: section 4 fixes their order too."""

import ctypes

from ._lib import lib
from ._tensor import F32
from .errors import InvalidArgumentError
from .ops import _Call, _float_dtype, _p, _ref, _unary_code, gemm

__all__ = ["unary_backward", "softmax_backward", "log_softmax_backward",
           "norm_backward", "rmsnorm_backward", "layernorm_backward",
           "embedding_backward", "column_sum", "sgd_step", "adamw_step"]

_P = ctypes.c_void_p
_F = ctypes.c_float
_I = ctypes.c_int
_U = ctypes.c_uint
_I64 = ctypes.c_int64


def _declare():
    from ._lib import LkTensor, c_status
    T = ctypes.POINTER(LkTensor)
    protos = {
        "lk_unary_backward": [_P, _I, T, T, T],
        "lk_softmax_backward": [_P, T, T, _I, T],
        "lk_norm_backward": [_P, _I, T, T, T, _F, T, T],
        "lk_embedding_backward": [_P, T, T, T],
        "lk_sgd_step": [_P, T, T, T, _F, _F, _F, _F, _U],
        "lk_adamw_step": [_P, T, T, T, T, _F, _F, _F, _F, _F, _I64],
    }
    for name, args in protos.items():
        fn = getattr(lib, name, None)
        if fn is None:
            raise ImportError(f"lockstep: {lib._name} lacks {name}: it is older than "
                              "this binding (rebuild or reinstall liblockstep)")
        fn.restype = c_status
        fn.argtypes = args


_declare()


def unary_backward(x, dy, op, *, out=None, dtype=None, device=None):
    """dx = dy * f'(x) element by element, f the lk_unary op ("copy",
    "relu", "relu2", "sigmoid", "silu", "gelu_tanh", "gelu_erf", "exp",
    "log", "tanh", "erf").  out may be dy (in place)."""
    code = _unary_code(op)
    c = _Call(device)
    vx = c.arg(x, "x")
    vd = c.arg(dy, "dy")
    c.place()
    res, vo = c.out(out, "out", vx.shape, _float_dtype(dtype, vd))
    c.run(lib.lk_unary_backward, code, _ref(vx.lk), _ref(vd.lk), _ref(vo.lk))
    return res


def softmax_backward(y, dy, *, log=False, out=None, dtype=None, device=None):
    """The input gradient of softmax (log=False: dx = (dy - sum(dy*y)) * y)
    or log_softmax (log=True: dx = dy - exp(y) * sum(dy)) per row, from
    the forward's output y."""
    c = _Call(device)
    vy = c.arg(y, "y")
    vd = c.arg(dy, "dy")
    c.place()
    res, vo = c.out(out, "out", vy.shape, _float_dtype(dtype, vd))
    c.run(lib.lk_softmax_backward, _ref(vy.lk), _ref(vd.lk), int(bool(log)), _ref(vo.lk))
    return res


def log_softmax_backward(y, dy, **kw):
    return softmax_backward(y, dy, log=True, **kw)


def norm_backward(x, weight, dy, *, layer=False, eps=1e-6, out=None, dwt=None,
                  want_dwt=False, dtype=None, device=None):
    """The gradients of rmsnorm (layer=False) or layernorm (layer=True):
    dx, and with want_dwt=True (or dwt= given) also dwt, the rows x cols
    terms dy * xhat whose column_sum is the weight's gradient.  Returns dx,
    or (dx, dwt)."""
    c = _Call(device)
    vx = c.arg(x, "x")
    vw = c.arg(weight, "weight", optional=True)
    vd = c.arg(dy, "dy")
    c.place()
    res, vo = c.out(out, "out", vx.shape, _float_dtype(dtype, vd))
    rw = vt = None
    if want_dwt or dwt is not None:
        rw, vt = c.out(dwt, "dwt", vx.shape, F32)
    c.run(lib.lk_norm_backward, int(bool(layer)), _ref(vx.lk), _p(vw), _ref(vd.lk),
          float(eps), _ref(vo.lk), _p(vt))
    return (res, rw) if vt is not None else res


def rmsnorm_backward(x, weight, dy, **kw):
    return norm_backward(x, weight, dy, layer=False, **kw)


def layernorm_backward(x, weight, dy, **kw):
    return norm_backward(x, weight, dy, layer=True, **kw)


def embedding_backward(dy, ids, dtable, *, device=None):
    """dtable[ids[r]] += dy[r] for r in ascending order (dtable f32 vocab x
    dim, accumulated into; RangeError, nothing written, for an id outside
    [0, vocab)); returns dtable."""
    c = _Call(device)
    vd = c.arg(dy, "dy")
    vi = c.arg(ids, "ids", "column")
    c.place()
    res, vt = c.out(dtable, "dtable", None, None)
    c.run(lib.lk_embedding_backward, _ref(vd.lk), _ref(vi.lk), _ref(vt.lk))
    return res


def column_sum(x, *, ones=None, out=None, accumulate=False, dtype=None, device=None):
    """The 1 x cols sum over the rows of x (rows in lk_gemm's K order): a
    GEMM of a 1 x rows row of ones (ones=, f32, reused if given) and x.
    accumulate=True adds it to out."""
    rows = x.shape[0] if not hasattr(x, "lk") else x.lk.rows
    if ones is None:
        import numpy as np
        ones = np.ones((1, rows), dtype=np.float32)
    return gemm(ones, x, out=out, accumulate=accumulate, dtype=dtype or F32, device=device)


def sgd_step(param, grad, buf=None, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
             nesterov=False, first=False, device=None):
    """One torch.optim.SGD step on param (f32, in place) with grad and the
    momentum buffer buf (f32, needed when momentum != 0; first=True sets it
    to the gradient, as PyTorch's first step does).  Returns param."""
    c = _Call(device)
    vg = c.arg(grad, "grad")
    c.place()
    res, vp = c.out(param, "param", None, None)
    vb = None
    if buf is not None:
        _, vb = c.out(buf, "buf", None, None)
    flags = (1 if nesterov else 0) | (2 if first else 0)
    c.run(lib.lk_sgd_step, _ref(vp.lk), _ref(vg.lk), _p(vb), float(lr), float(momentum),
          float(dampening), float(weight_decay), flags)
    return res


def adamw_step(param, grad, m, v, *, lr, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=1e-2, step, device=None):
    """One torch.optim.AdamW step (amsgrad off) on param (f32, in place)
    with grad and the moments m and v (f32, in place); step counts from 1
    and includes this one.  Returns param."""
    if step < 1:
        raise InvalidArgumentError(2, f"adamw_step: step {step} (steps count from 1)")
    c = _Call(device)
    vg = c.arg(grad, "grad")
    c.place()
    res, vp = c.out(param, "param", None, None)
    _, vm = c.out(m, "m", None, None)
    _, vv = c.out(v, "v", None, None)
    c.run(lib.lk_adamw_step, _ref(vp.lk), _ref(vg.lk), _ref(vm.lk), _ref(vv.lk), float(lr),
          float(beta1), float(beta2), float(eps), float(weight_decay), int(step))
    return res
