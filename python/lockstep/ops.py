"""Every op of <lockstep/ops.h> and <lockstep/weights.h>, with Pythonic
arguments.  Names follow the C API without the lk_ prefix.

Arguments are any DLPack objects (numpy, PyTorch, CuPy, JAX arrays) or
lockstep.Tensors.  Row-wise ops treat the last dim as columns and every
leading dim as rows.  Each op returns a new lockstep.Tensor on the device
it ran on, or writes into out= (any writable DLPack object or Tensor) and
returns out.  device= picks the device (a name or a Device); without it an
op runs where its Tensor arguments live, on cuda:N for CUDA inputs, or on
the default host device.  Failures raise lockstep.LockstepError
subclasses with lk_last_error()'s text."""

import builtins
import ctypes
import math

from ._lib import LkBitnetConfig, LkBitnetLayer, lib
from ._tensor import (F32, FLOATS, I8, I32, I64, T2, Tensor,
                      dtype_code, resolve_device, view)
from .errors import BadDtypeError, InvalidArgumentError, check

__all__ = [
    "gemm", "matmul", "reduce", "sum", "mean", "max", "min", "var", "argmax",
    "rmsnorm", "layernorm", "softmax", "log_softmax", "unary", "relu", "relu2",
    "sigmoid", "silu", "gelu_tanh", "gelu_erf", "exp", "log", "tanh", "erf",
    "convert", "binary", "add", "mul", "glu", "quantize_act",
    "rmsnorm_quantize", "quantize_ternary", "ternary_pack", "ternary_unpack",
    "ternary_gemm", "int8_gemm", "rope", "attention", "embedding", "set_rows",
    "Weights", "linear", "ternary_linear", "rmsnorm_ternary_linear",
    "BitnetConfig", "BitnetLayer", "bitnet_decode", "bitnet_scratch",
]

_NULL = None
_ref = ctypes.byref


def _p(v):
    return None if v is None else _ref(v.lk)


class _Call:
    """The arguments of one op: their views (kept alive until the call is
    done), the device it runs on and the outputs."""

    def __init__(self, device):
        self.device_arg = device
        self.views = []
        self.outs = []

    def arg(self, obj, what, mode="rows", optional=False):
        if obj is None:
            if optional:
                return None
            raise TypeError(f"{what} is required")
        v = view(obj, what, mode)
        self.views.append(v)
        return v

    def place(self):
        self.dev = resolve_device(self.views, self.device_arg)
        self.q = self.dev.queue
        return self.dev

    def out(self, obj, what, shape, dtype, mode="rows"):
        """The View of an output: out= as given, or a new Tensor."""
        if obj is None:
            t = Tensor(shape, dtype, self.dev)
            v = view(t, what, mode)
            v.keep = t
            self.outs.append(v)
            return t, v
        v = view(obj, what, mode, writable=True)
        self.views.append(v)
        resolve_device([v], self.dev)
        return obj, v

    def run(self, fn, *args):
        check(fn(self.q._handle, *args))
        g = self.q._capture
        if g is not None:
            # a captured call reads its arguments at every launch
            g._keep.extend(v.keep for v in self.views)
            g._keep.extend(v.keep for v in self.outs)
            return
        if not self.dev.host_memory and any(not isinstance(v.keep, Tensor)
                                            for v in self.views):
            # foreign memory is released when this call returns
            self.q.sync()


def _float_dtype(dtype, *views):
    if dtype is not None:
        return dtype_code(dtype)
    for v in views:
        if v is not None and v.dtype in FLOATS:
            return v.dtype
    return F32


def _row_shape(v):
    """The shape of a per-row result of v (one value a row)."""
    return v.shape[:-1] if len(v.shape) >= 2 else (v.lk.rows,)


# ---------------------------------------------------------------- GEMM

_TC = {None: 0, "sm80": 1 << 1, "sm90": 1 << 2}


def gemm(a, b, bias=None, *, out=None, trans_a=False, trans_b=False,
         accumulate=False, tc=None, dtype=None, device=None):
    """C = op(A) . op(B) (+ bias) (+ C with accumulate=True, out= given).
    a: M x K (K x M with trans_a), b: K x N (N x K with trans_b), float;
    3-D arguments (batch, rows, cols) make a batched GEMM (a 2-D one is
    shared by the batch).  tc: None (the default tier), "sm80" or "sm90"
    (the tensor-core tier of that generation: bf16 or f16 inputs).
    dtype: the output's (default: a's when a and b agree, else f32)."""
    c = _Call(device)
    va = c.arg(a, "a", "batched")
    vb = c.arg(b, "b", "batched")
    vbias = c.arg(bias, "bias", optional=True)
    c.place()
    if tc not in _TC:
        raise InvalidArgumentError(2, f"gemm: tc: {tc!r} is not None, 'sm80' or 'sm90'")
    if accumulate and out is None:
        raise InvalidArgumentError(2, "gemm: accumulate=True needs out=")
    m = va.lk.cols if trans_a else va.lk.rows
    n = vb.lk.rows if trans_b else vb.lk.cols
    batch = va.batch if va.batch > 1 else vb.batch
    batched = len(va.shape) >= 3 or len(vb.shape) >= 3
    shape = (batch, m, n) if batched else (m, n)
    if dtype is None:
        dtype = va.dtype if va.dtype == vb.dtype else F32
    res, vc = c.out(out, "out", shape, _float_dtype(dtype), "batched")
    if batched and vc.batch == 1 and batch > 1:
        raise InvalidArgumentError(2, "gemm: out must be 3-D for a batched GEMM")
    if batch > 1 and vc.lk.batch_stride == 0:
        vc.lk.batch_stride = vc.lk.rows * vc.lk.ld
    flags = (1 if accumulate else 0) | _TC[tc]
    c.run(lib.lk_gemm, int(bool(trans_a)), int(bool(trans_b)), _ref(va.lk),
          _ref(vb.lk), _p(vbias), _ref(vc.lk), batch, flags)
    return res


def matmul(a, b, *, out=None, dtype=None, device=None):
    """a @ b (gemm without transposes, bias or accumulation)."""
    return gemm(a, b, out=out, dtype=dtype, device=device)


# ----------------------------------------------------- row reductions

_REDUCE = {"sum": 1, "mean": 2, "max": 3, "min": 4, "var": 5,
           "var_unbiased": 6, "argmax": 7}


def reduce(x, op, *, out=None, dtype=None, device=None):
    """One value per row: op "sum", "mean", "max", "min" (IEEE 754-2019:
    NaN wins, -0 < +0), "var", "var_unbiased", "argmax" (i64, lowest index
    among ties, NaN largest).  The result has x's shape without its last
    dim."""
    if op not in _REDUCE:
        raise InvalidArgumentError(2, f"reduce: op {op!r} is not one of {', '.join(_REDUCE)}")
    c = _Call(device)
    vx = c.arg(x, "x")
    c.place()
    dt = I64 if op == "argmax" else _float_dtype(dtype, vx)
    res, vy = c.out(out, "out", _row_shape(vx), dt, "column")
    c.run(lib.lk_reduce, _REDUCE[op], _ref(vx.lk), _ref(vy.lk))
    return res


def sum(x, **kw):
    return reduce(x, "sum", **kw)


def mean(x, **kw):
    return reduce(x, "mean", **kw)


def max(x, **kw):
    return reduce(x, "max", **kw)


def min(x, **kw):
    return reduce(x, "min", **kw)


def var(x, unbiased=False, **kw):
    return reduce(x, "var_unbiased" if unbiased else "var", **kw)


def argmax(x, **kw):
    return reduce(x, "argmax", **kw)


# -------------------------------------------------- norms and softmax

def _same_shape(fn, x, extra, out, dtype, device, *args):
    c = _Call(device)
    vx = c.arg(x, "x")
    vs = [c.arg(o, name, optional=True) for name, o in extra]
    c.place()
    res, vy = c.out(out, "out", vx.shape, _float_dtype(dtype, vx))
    return c, vx, vs, res, vy


def rmsnorm(x, weight=None, *, eps=1e-6, out=None, dtype=None, device=None):
    """y = x / sqrt(mean(x^2) + eps) * weight per row; weight None or one
    value per column.  eps is rounded to f32."""
    c, vx, (vw,), res, vy = _same_shape(None, x, [("weight", weight)], out, dtype, device)
    c.run(lib.lk_rmsnorm, _ref(vx.lk), _p(vw), float(eps), _ref(vy.lk))
    return res


def layernorm(x, weight=None, bias=None, *, eps=1e-5, out=None, dtype=None, device=None):
    """y = (x - mean) / sqrt(var + eps) * weight + bias per row."""
    c, vx, (vw, vb), res, vy = _same_shape(
        None, x, [("weight", weight), ("bias", bias)], out, dtype, device)
    c.run(lib.lk_layernorm, _ref(vx.lk), _p(vw), _p(vb), float(eps), _ref(vy.lk))
    return res


def softmax(x, *, out=None, dtype=None, device=None):
    c, vx, _, res, vy = _same_shape(None, x, [], out, dtype, device)
    c.run(lib.lk_softmax, _ref(vx.lk), _ref(vy.lk))
    return res


def log_softmax(x, *, out=None, dtype=None, device=None):
    c, vx, _, res, vy = _same_shape(None, x, [], out, dtype, device)
    c.run(lib.lk_log_softmax, _ref(vx.lk), _ref(vy.lk))
    return res


# --------------------------------------------------------- element-wise

_UNARY = {"copy": 1, "relu": 2, "relu2": 3, "sigmoid": 4, "silu": 5,
          "gelu_tanh": 6, "gelu_erf": 7, "exp": 8, "log": 9, "tanh": 10, "erf": 11}


def _unary_code(op):
    if op not in _UNARY:
        raise InvalidArgumentError(2, f"unary op {op!r} is not one of {', '.join(_UNARY)}")
    return _UNARY[op]


def unary(x, op, *, out=None, dtype=None, device=None):
    """y = f(x) element by element: op "copy", "relu", "relu2", "sigmoid",
    "silu", "gelu_tanh", "gelu_erf", "exp", "log", "tanh", "erf" (Lockstep's
    own f32 sequences, the same bits everywhere).  out may be x (in place)."""
    code = _unary_code(op)
    c, vx, _, res, vy = _same_shape(None, x, [], out, dtype, device)
    c.run(lib.lk_unary, code, _ref(vx.lk), _ref(vy.lk))
    return res


def _unary_fn(op):
    def f(x, *, out=None, dtype=None, device=None):
        return unary(x, op, out=out, dtype=dtype, device=device)
    f.__name__ = op
    f.__doc__ = f"unary(x, {op!r})"
    return f


relu = _unary_fn("relu")
relu2 = _unary_fn("relu2")
sigmoid = _unary_fn("sigmoid")
silu = _unary_fn("silu")
gelu_tanh = _unary_fn("gelu_tanh")
gelu_erf = _unary_fn("gelu_erf")
exp = _unary_fn("exp")
log = _unary_fn("log")
tanh = _unary_fn("tanh")
erf = _unary_fn("erf")


def convert(x, dtype=None, *, out=None, device=None):
    """x converted to dtype ("f32", "bf16", "f16"; or out's), rounded to
    nearest even once, NaN canonical."""
    if dtype is None and out is None:
        raise TypeError("convert: give dtype or out")
    c, vx, _, res, vy = _same_shape(None, x, [], out, dtype, device)
    c.run(lib.lk_convert, _ref(vx.lk), _ref(vy.lk))
    return res


_BINARY = {"add": 1, "mul": 2}


def binary(a, b, op, *, out=None, dtype=None, device=None):
    """y = a + b ("add") or a * b ("mul"); b has a's shape or is one row,
    broadcast over a's rows.  out may be a or b (in place)."""
    if op not in _BINARY:
        raise InvalidArgumentError(2, f"binary: op {op!r} is not 'add' or 'mul'")
    c = _Call(device)
    va = c.arg(a, "a")
    vb = c.arg(b, "b")
    c.place()
    res, vy = c.out(out, "out", va.shape, _float_dtype(dtype, va))
    c.run(lib.lk_binary, _BINARY[op], _ref(va.lk), _ref(vb.lk), _ref(vy.lk))
    return res


def add(a, b, **kw):
    return binary(a, b, "add", **kw)


def mul(a, b, **kw):
    return binary(a, b, "mul", **kw)


def glu(gate, up, op="silu", *, out=None, dtype=None, device=None):
    """y = f(gate) * up (SwiGLU: "silu", BitNet: "relu2", GeGLU:
    "gelu_tanh"/"gelu_erf"), the bits of unary then mul in one pass."""
    code = _unary_code(op)
    c = _Call(device)
    vg = c.arg(gate, "gate")
    vu = c.arg(up, "up")
    c.place()
    res, vy = c.out(out, "out", vg.shape, _float_dtype(dtype, vg, vu))
    c.run(lib.lk_glu, code, _ref(vg.lk), _ref(vu.lk), _ref(vy.lk))
    return res


# --------------------------------------------------------- quantisation

def quantize_act(x, *, out=None, scale=None, device=None):
    """BitNet b1.58 activations per row: (xq i8 of x's shape, scale f32
    one per row: s = 127 / max(absmax, 1e-5), x ~ xq / s)."""
    c = _Call(device)
    vx = c.arg(x, "x")
    c.place()
    rq, vq = c.out(out, "out", vx.shape, I8)
    rs, vs = c.out(scale, "scale", _row_shape(vx), F32, "column")
    c.run(lib.lk_quantize_act, _ref(vx.lk), _ref(vq.lk), _ref(vs.lk))
    return rq, rs


def rmsnorm_quantize(x, weight=None, *, eps=1e-6, out=None, scale=None, device=None):
    """rmsnorm into f32 then quantize_act, in one pass: (xq, scale)."""
    c = _Call(device)
    vx = c.arg(x, "x")
    vw = c.arg(weight, "weight", optional=True)
    c.place()
    rq, vq = c.out(out, "out", vx.shape, I8)
    rs, vs = c.out(scale, "scale", _row_shape(vx), F32, "column")
    c.run(lib.lk_rmsnorm_quantize, _ref(vx.lk), _p(vw), float(eps), _ref(vq.lk), _ref(vs.lk))
    return rq, rs


def quantize_ternary(w, *, out=None, scale=None, device=None):
    """BitNet b1.58 weights, whole tensor: (wq t2 of w's shape, scale f32
    of one element: m = max(mean(|w|), 1e-5), w ~ t * m)."""
    c = _Call(device)
    vw = c.arg(w, "w")
    c.place()
    rq, vq = c.out(out, "out", vw.shape, T2)
    rs, vs = c.out(scale, "scale", (1,), F32, "column")
    c.run(lib.lk_quantize_ternary, _ref(vw.lk), _ref(vq.lk), _ref(vs.lk))
    return rq, rs


def ternary_pack(w, *, out=None, device=None):
    """i8 values in {-1, 0, 1} packed to t2 (InvalidValueError, nothing
    written, for any other value)."""
    c = _Call(device)
    vw = c.arg(w, "w")
    c.place()
    res, vq = c.out(out, "out", vw.shape, T2)
    c.run(lib.lk_ternary_pack, _ref(vw.lk), _ref(vq.lk))
    return res


def ternary_unpack(wq, *, out=None, device=None):
    """t2 unpacked to i8 (the reserved code 3 gives 2)."""
    c = _Call(device)
    vq = c.arg(wq, "wq")
    c.place()
    res, vw = c.out(out, "out", vq.shape, I8)
    c.run(lib.lk_ternary_unpack, _ref(vq.lk), _ref(vw.lk))
    return res


# --------------------------------------------------------- integer GEMM

def ternary_gemm(xq, x_scale, w, w_scale, *, out=None, dtype="f32", device=None):
    """y[m, n] = ((float)acc / x_scale[m]) * w_scale[n or 0], acc the exact
    int32 sum of xq[m, k] * w[n, k]; xq i8 M x K, w t2 N x K."""
    c = _Call(device)
    vx = c.arg(xq, "xq")
    vxs = c.arg(x_scale, "x_scale", "column")
    vw = c.arg(w, "w")
    vws = c.arg(w_scale, "w_scale")
    c.place()
    res, vy = c.out(out, "out", (vx.lk.rows, vw.lk.rows), dtype_code(dtype))
    c.run(lib.lk_ternary_gemm, _ref(vx.lk), _ref(vxs.lk), _ref(vw.lk), _ref(vws.lk), _ref(vy.lk))
    return res


def int8_gemm(a, b, a_scale=None, b_scale=None, *, out=None, dtype=None, device=None):
    """acc[m, n] = sum_k a[m, k] * b[n, k] exactly in int32 (i32 result);
    with both scales, ((float)acc / a_scale[m]) * b_scale[n or 0] (float)."""
    c = _Call(device)
    va = c.arg(a, "a")
    vb = c.arg(b, "b")
    vas = c.arg(a_scale, "a_scale", "column", optional=True)
    vbs = c.arg(b_scale, "b_scale", optional=True)
    c.place()
    dt = I32 if a_scale is None and b_scale is None and dtype is None else _float_dtype(dtype)
    res, vc = c.out(out, "out", (va.lk.rows, vb.lk.rows), dt)
    c.run(lib.lk_int8_gemm, _ref(va.lk), _ref(vb.lk), _p(vas), _p(vbs), _ref(vc.lk))
    return res


# ----------------------------------------------------- transformer ops

def rope(x, pos, *, head_dim, theta=10000.0, interleaved=False, out=None,
         dtype=None, device=None):
    """Rotary embedding of every head of every token: x tokens x
    (n_heads * head_dim), pos i32 one per token; NeoX pairs (i, i + d/2)
    unless interleaved (2i, 2i + 1).  out may be x (in place)."""
    c = _Call(device)
    vx = c.arg(x, "x")
    vp = c.arg(pos, "pos", "column")
    c.place()
    res, vy = c.out(out, "out", vx.shape, _float_dtype(dtype, vx))
    c.run(lib.lk_rope, _ref(vx.lk), _ref(vp.lk), int(head_dim), float(theta),
          1 if interleaved else 0, _ref(vy.lk))
    return res


def attention(q, k, v, pos, *, n_head, n_kv=None, scale=None, out=None,
              dtype=None, device=None):
    """Causal grouped-query attention over a KV cache.  q: tokens x
    (n_head * head_dim); k, v: cache_len x (n_kv * head_dim); pos: i32 one
    per token (token t reads cache rows 0 .. pos[t]).  3-D q, k, v, out
    (batch first) and 2-D pos (batch x tokens) run a batch of sequences.
    scale defaults to 1/sqrt(head_dim), computed in double and rounded to
    f32 once: pass it to control the bits."""
    c = _Call(device)
    vq = c.arg(q, "q", "batched")
    vk = c.arg(k, "k", "batched")
    vv = c.arg(v, "v", "batched")
    vp = c.arg(pos, "pos", "batched_column")
    c.place()
    n_kv = n_head if n_kv is None else n_kv
    head_dim = vq.lk.cols // n_head if n_head else 0
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    batch = 1
    for vw in (vq, vk, vv, vp):
        batch = vw.batch if vw.batch > 1 else batch
    batched = len(vq.shape) >= 3
    shape = ((batch,) if batched else ()) + (vq.lk.rows, vq.lk.cols)
    res, vo = c.out(out, "out", shape, _float_dtype(dtype, vq), "batched")
    if batch > 1 and vo.lk.batch_stride == 0:
        vo.lk.batch_stride = vo.lk.rows * vo.lk.ld
    c.run(lib.lk_attention, _ref(vq.lk), _ref(vk.lk), _ref(vv.lk), _ref(vp.lk),
          int(n_head), int(n_kv), float(scale), _ref(vo.lk), batch)
    return res


def embedding(table, ids, *, out=None, dtype=None, device=None):
    """y[r] = table[ids[r]]: table vocab x dim float, ids i32 (RangeError,
    nothing written, for an id outside [0, vocab))."""
    c = _Call(device)
    vt = c.arg(table, "table")
    vi = c.arg(ids, "ids", "column")
    c.place()
    res, vy = c.out(out, "out", (vi.lk.rows, vt.lk.cols), _float_dtype(dtype, vt))
    c.run(lib.lk_embedding, _ref(vt.lk), _ref(vi.lk), _ref(vy.lk))
    return res


def set_rows(src, idx, dst, *, device=None):
    """dst[idx[r]] = src[r] for every row r of src (bits copied unchanged;
    the last of equal indices wins); returns dst."""
    c = _Call(device)
    vs = c.arg(src, "src")
    vi = c.arg(idx, "idx", "column")
    c.place()
    res, vd = c.out(dst, "dst", None, None)
    c.run(lib.lk_set_rows, _ref(vs.lk), _ref(vi.lk), _ref(vd.lk))
    return res


# ----------------------------------------------------- prepared weights

class Weights:
    """Weights prepared once for a device's fastest layout (lk_weights):
    w N x K float, or t2 with w_scale (1 x 1 or 1 x N f32).  The handle
    holds its own copy."""

    def __init__(self, w, w_scale=None, *, device=None):
        c = _Call(device)
        vw = c.arg(w, "w")
        vs = c.arg(w_scale, "w_scale", optional=True)
        dev = c.place()
        h = ctypes.c_void_p()
        check(lib.lk_weights_prepare(c.q._handle, _ref(vw.lk), _p(vs), _ref(h)))
        c.q.sync()
        self._handle = h.value
        self.device = dev
        self.dtype = vw.dtype
        self.shape = (vw.lk.rows, vw.lk.cols)

    def __del__(self):
        from ._device import CTX
        h, self._handle = getattr(self, "_handle", None), None
        if h and CTX.alive:
            if not self.device.host_memory:
                self.device.queue.sync()  # calls that use it must be done
            lib.lk_weights_destroy(h)

    def __repr__(self):
        from ._tensor import NAMES
        return f"<lockstep.Weights {NAMES[self.dtype]}{list(self.shape)} on {self.device.name}>"


def _weights_call(w, device):
    if not isinstance(w, Weights):
        raise TypeError("weights: a lockstep.Weights is required")
    return _Call(w.device if device is None else device)


def linear(x, weights, bias=None, *, out=None, accumulate=False, dtype=None, device=None):
    """y = x . W^T (+ bias) (+ y with accumulate): the bits of gemm(x, w,
    trans_b=True) on prepared float weights."""
    c = _weights_call(weights, device)
    vx = c.arg(x, "x")
    vb = c.arg(bias, "bias", optional=True)
    c.place()
    res, vy = c.out(out, "out", vx.shape[:-1] + (weights.shape[0],), _float_dtype(dtype, vx))
    c.run(lib.lk_linear, _ref(vx.lk), weights._handle, _p(vb), _ref(vy.lk),
          1 if accumulate else 0)
    return res


def ternary_linear(xq, x_scale, weights, *, out=None, accumulate=False, dtype="f32",
                   device=None):
    """The bits of ternary_gemm on prepared t2 weights (accumulate: y + r
    into an f32 out)."""
    c = _weights_call(weights, device)
    vx = c.arg(xq, "xq")
    vs = c.arg(x_scale, "x_scale", "column")
    c.place()
    res, vy = c.out(out, "out", vx.shape[:-1] + (weights.shape[0],), dtype_code(dtype))
    c.run(lib.lk_ternary_linear, _ref(vx.lk), _ref(vs.lk), weights._handle, _ref(vy.lk),
          1 if accumulate else 0)
    return res


def rmsnorm_ternary_linear(x, norm_weight, weights, *, eps=1e-6, out=None, xq=None,
                           xs=None, accumulate=False, dtype="f32", device=None):
    """rmsnorm_quantize then ternary_linear, bit for bit: returns
    (y, xq, xs), the quantised activations and their scales included."""
    c = _weights_call(weights, device)
    vx = c.arg(x, "x")
    vw = c.arg(norm_weight, "norm_weight", optional=True)
    c.place()
    rq, vq = c.out(xq, "xq", vx.shape, I8)
    rs, vs = c.out(xs, "xs", _row_shape(vx), F32, "column")
    res, vy = c.out(out, "out", vx.shape[:-1] + (weights.shape[0],), dtype_code(dtype))
    c.run(lib.lk_rmsnorm_ternary_linear, _ref(vx.lk), _p(vw), float(eps), _ref(vq.lk),
          _ref(vs.lk), weights._handle, _ref(vy.lk), 1 if accumulate else 0)
    return res, rq, rs


# --------------------------------------------------------- BitNet decode

class BitnetConfig:
    """lk_bitnet_config: dim, n_head, n_kv, head_dim, ffn, eps, theta,
    attn_scale (default 1/sqrt(head_dim) in double, rounded to f32 once),
    interleaved (RoPE pairs; default NeoX)."""

    def __init__(self, dim, n_head, n_kv, head_dim, ffn, eps=1e-5, theta=500000.0,
                 attn_scale=None, interleaved=False):
        self.dim, self.n_head, self.n_kv = dim, n_head, n_kv
        self.head_dim, self.ffn, self.eps, self.theta = head_dim, ffn, eps, theta
        self.attn_scale = 1.0 / math.sqrt(head_dim) if attn_scale is None else attn_scale
        self.interleaved = interleaved

    def _c(self):
        return LkBitnetConfig(self.dim, self.n_head, self.n_kv, self.head_dim, self.ffn,
                              self.eps, self.theta, self.attn_scale,
                              1 if self.interleaved else 0)


class BitnetLayer:
    """One layer for bitnet_decode: qkv, o, gate_up, down (t2 Weights
    prepared on the device), the f32 norm weights attn_norm,
    attn_sub_norm, ffn_norm, ffn_sub_norm (None for none) and kv, the f32
    cache (B * ctx rows x 2 * n_kv * head_dim, updated in place)."""

    def __init__(self, qkv, o, gate_up, down, kv, attn_norm=None, attn_sub_norm=None,
                 ffn_norm=None, ffn_sub_norm=None):
        self.qkv, self.o, self.gate_up, self.down, self.kv = qkv, o, gate_up, down, kv
        self.attn_norm, self.attn_sub_norm = attn_norm, attn_sub_norm
        self.ffn_norm, self.ffn_sub_norm = ffn_norm, ffn_sub_norm


def bitnet_scratch(config, batch, *, device=None):
    """A scratch Tensor for bitnet_decode of batch sequences (reuse it)."""
    c = _Call(device)
    c.place()
    n = lib.lk_bitnet_decode_scratch(_ref(config._c()), int(batch))
    if n == 0:
        raise InvalidArgumentError(2, "bitnet_scratch: a bad configuration")
    return Tensor((n,), I8, c.dev)


def bitnet_decode(x, pos, layers, *, config, ctx, scratch=None, device=None):
    """One decode step of a BitNet b1.58 model's layers in one call (the
    bits of the eight ops per layer): x f32 B x dim, updated in place and
    returned; pos i32, one position per sequence in [0, ctx); layers a
    list of BitnetLayer; ctx the cache rows per sequence."""
    c = _Call(device)
    vx = c.arg(x, "x")
    vp = c.arg(pos, "pos", "column")
    keep = []
    for i, L in enumerate(layers):
        for w in (L.qkv, L.o, L.gate_up, L.down):
            if not isinstance(w, Weights):
                raise TypeError(f"bitnet_decode: layers[{i}]: weights must be lockstep.Weights")
        keep.append([c.arg(getattr(L, n), f"layers[{i}].{n}", optional=True)
                     for n in ("attn_norm", "attn_sub_norm", "ffn_norm", "ffn_sub_norm", "kv")])
    c.place()
    arr = (LkBitnetLayer * builtins.max(len(layers), 1))()
    for i, (L, vs) in enumerate(zip(layers, keep)):
        arr[i] = LkBitnetLayer(L.qkv._handle, L.o._handle, L.gate_up._handle, L.down._handle,
                               *[None if v is None else ctypes.pointer(v.lk) for v in vs])
    if scratch is None:
        scratch = bitnet_scratch(config, vx.lk.rows, device=c.dev)
    vs = c.arg(scratch, "scratch", "column")
    if vs.dtype != I8 or vs.lk.ld != 1:
        raise BadDtypeError(6, "bitnet_decode: scratch: a contiguous i8 buffer (bitnet_scratch)")
    nbytes = vs.lk.rows
    c.run(lib.lk_bitnet_decode, _ref(config._c()), arr, len(layers), _ref(vx.lk), _ref(vp.lk),
          int(ctx), vs.lk.data, nbytes)
    return x
