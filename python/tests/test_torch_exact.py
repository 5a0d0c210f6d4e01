"""lockstep.torch.exact(): each covered op against Lockstep's own op (bits),
the compositions, the raise rule, warn mode, bad input, and on a GPU the
same bits from CUDA tensors as from CPU tensors."""

import math

import numpy as np
import pytest

import lockstep

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
lt = pytest.importorskip("lockstep.torch", reason="lockstep.torch needs PyTorch")
F = torch.nn.functional

DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def cuda_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no CUDA device")
    if "cuda:0" not in lockstep.devices():
        pytest.skip("Lockstep has no cuda:0 (LOCKSTEP_DRIVER_PATH: the CUDA driver module)")


def tbits(t):
    """A torch tensor's bits as a numpy array of unsigned integers."""
    t = t.detach().cpu().contiguous()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.view(view).numpy()


def lbits(t):
    """A lockstep.Tensor's bits, comparable with tbits."""
    b = np.from_dlpack(t.to_host().bits()).copy()
    return b.view({2: np.int16, 4: np.int32, 8: np.int64, 1: np.uint8}[b.itemsize])


def same(a, b):
    x = tbits(a) if isinstance(a, torch.Tensor) else lbits(a)
    y = tbits(b) if isinstance(b, torch.Tensor) else lbits(b)
    assert x.shape == y.shape or x.size == y.size, (x.shape, y.shape)
    x, y = x.ravel(), y.ravel()
    d = np.flatnonzero(x != y)
    assert d.size == 0, f"{d.size} elements differ, first at {d[0]}: {x[d[0]]:#x} != {y[d[0]]:#x}"


def rand(gen, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


@pytest.fixture
def gen(rng):
    return torch.Generator().manual_seed(int(rng.integers(2 ** 31)))


# ------------------------------------------------------------ covered ops

@pytest.mark.parametrize("dtype", DTYPES)
def test_mm_addmm_bmm_linear(gen, dtype):
    a, b, bias = rand(gen, 9, 33, dtype=dtype), rand(gen, 33, 17, dtype=dtype), \
        rand(gen, 17, dtype=dtype)
    w = rand(gen, 17, 33, dtype=dtype)
    x3, y3 = rand(gen, 3, 5, 33, dtype=dtype), rand(gen, 3, 33, 7, dtype=dtype)
    tc = "sm90" if dtype != torch.float32 else None
    with lt.exact():
        mm = a @ b
        addmm = torch.addmm(bias, a, b)
        lin = F.linear(x3, w, bias)
        bmm = torch.bmm(x3, y3)
        mat3 = torch.matmul(x3, y3)
    same(mm, lockstep.gemm(a, b, tc=tc, device="cpu"))
    same(addmm, lockstep.gemm(a, b, bias, tc=tc, device="cpu"))
    same(lin, lockstep.gemm(x3.reshape(15, 33), w, bias, trans_b=True, tc=tc, device="cpu"))
    same(bmm, lockstep.gemm(x3, y3, tc=tc, device="cpu"))
    same(mat3, bmm)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_one_call_equals_aten_path(gen, dtype):
    # F.linear of plain inference tensors is one Lockstep GEMM; with a
    # gradient or a strided weight it goes through aten's
    # t/view/mm/addmm: every route gives the same bits
    x3, w, bias = rand(gen, 2, 3, 40, dtype=dtype), rand(gen, 24, 40, dtype=dtype), \
        rand(gen, 24, dtype=dtype)
    wg = w.clone().requires_grad_(True)
    ws = w.t().contiguous().t()   # the same values, column-major
    with lt.exact():
        with torch.no_grad():
            fast = F.linear(x3, w, bias)
            fast_nobias = F.linear(x3, w)
            strided = F.linear(x3, ws, bias)
        grad = F.linear(x3, wg, bias)
        two_d = F.linear(x3.reshape(6, 40), w)
    assert not fast.requires_grad and grad.requires_grad
    same(fast, strided)
    same(fast, grad.detach())
    same(fast_nobias.reshape(6, 24), two_d)


def test_tier_option(gen):
    a, b = rand(gen, 4, 40, dtype=torch.bfloat16), rand(gen, 40, 6, dtype=torch.bfloat16)
    with lt.exact(tc=None):
        ieee = a @ b
    same(ieee, lockstep.gemm(a, b, device="cpu"))
    # a GPU runs the tier of its own generation only (sm_90's mma.sync
    # does not compute sm_80's two k = 8 halves): with a GPU of another
    # generation than sm_8x in the process, tc="sm80" is refused
    other = [i for i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0)
             if torch.cuda.get_device_capability(i)[0] != 8]
    if other:
        with pytest.raises(ValueError, match=f"tc='sm80': cuda:{other[0]} is sm_"):
            with lt.exact(tc="sm80"):
                pass
        return
    with lt.exact(tc="sm80"):
        sm80 = a @ b
    same(sm80, lockstep.gemm(a, b, tc="sm80", device="cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions(gen, dtype):
    x = rand(gen, 4, 6, 50, dtype=dtype)
    with lt.exact():
        r = {"sum": x.sum(-1), "mean": x.mean(-1, keepdim=True), "var": x.var(-1),
             "var0": x.var(-1, correction=0), "max": x.amax(-1), "argmax": x.argmax(-1),
             "all": x.sum(), "f32": x.sum(-1, dtype=torch.float32)}
    assert r["mean"].shape == (4, 6, 1) and r["argmax"].dtype == torch.int64
    same(r["sum"], lockstep.sum(x, device="cpu"))
    same(r["mean"], lockstep.mean(x, device="cpu"))
    same(r["var"], lockstep.var(x, unbiased=True, device="cpu"))
    same(r["var0"], lockstep.var(x, device="cpu"))
    same(r["max"], lockstep.max(x, device="cpu"))
    same(r["argmax"], lockstep.argmax(x, device="cpu"))
    same(r["all"], lockstep.sum(x.reshape(1, -1), device="cpu"))
    same(r["f32"], lockstep.sum(x, dtype="f32", device="cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_softmax(gen, dtype):
    x, w, b = rand(gen, 7, 64, dtype=dtype), rand(gen, 64, dtype=dtype), rand(gen, 64, dtype=dtype)
    with lt.exact():
        sm = torch.softmax(x, -1)
        lsm = torch.log_softmax(x, dim=-1)
        rms = F.rms_norm(x, (64,), w, 1e-6)
        ln = F.layer_norm(x, (64,), w, b, 1e-5)
        sm32 = torch.softmax(x, -1, dtype=torch.float32)
    same(sm, lockstep.softmax(x, device="cpu"))
    same(lsm, lockstep.log_softmax(x, device="cpu"))
    same(rms, lockstep.rmsnorm(x, w, eps=1e-6, device="cpu"))
    same(ln, lockstep.layernorm(x, w, b, eps=1e-5, device="cpu"))
    same(sm32, lockstep.softmax(x.float(), device="cpu"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unary(gen, dtype):
    x = rand(gen, 5, 40, dtype=dtype)
    pos = x.abs() + 0.25
    with lt.exact():
        got = {"silu": F.silu(x), "gelu_erf": F.gelu(x), "gelu_tanh": F.gelu(x, approximate="tanh"),
               "relu": torch.relu(x), "sigmoid": torch.sigmoid(x), "exp": torch.exp(x),
               "log": torch.log(pos), "tanh": torch.tanh(x), "erf": torch.erf(x)}
        inplace = x.clone()
        F.silu(inplace, inplace=True)
    for op, y in got.items():
        same(y, lockstep.unary(pos if op == "log" else x, op, device="cpu"))
    same(inplace, got["silu"])


def test_embedding(gen):
    table = rand(gen, 50, 16, dtype=torch.bfloat16)
    ids = torch.tensor([[3, 0, 49], [7, 7, 1]])
    with lt.exact():
        y = F.embedding(ids, table)
    assert y.shape == (2, 3, 16)
    same(y, lockstep.embedding(table, ids.reshape(-1).int(), device="cpu"))
    with lt.exact(), pytest.raises(lockstep.RangeError):
        F.embedding(torch.tensor([50]), table)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_attention(gen, dtype, kv_heads):
    B, H, S, D = 2, 4, 6, 8
    q = rand(gen, B, H, S, D, dtype=dtype)
    k, v = rand(gen, B, kv_heads, S, D, dtype=dtype), rand(gen, B, kv_heads, S, D, dtype=dtype)
    gqa = kv_heads != H
    mask = torch.ones(B, 1, S, S, dtype=torch.bool).tril()
    mask[1, :, :, 4:] = False                  # right padding of sequence 1
    with lt.exact():
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)
        fmask = torch.zeros(B, 1, S, S, dtype=dtype).masked_fill(~mask, torch.finfo(dtype).min)
        fmasked = F.scaled_dot_product_attention(q, k, v, attn_mask=fmask, enable_gqa=gqa)
    tok = lambda t: t.transpose(1, 2).reshape(B, S, -1).contiguous()   # noqa: E731
    pos = torch.arange(S, dtype=torch.int32).expand(B, S).contiguous()
    want = lockstep.attention(tok(q), tok(k), tok(v), pos, n_head=H, n_kv=kv_heads, device="cpu")
    same(tok(causal), want)
    pos2 = pos.clone()
    pos2[1] = torch.clamp(pos2[1], max=3)
    want2 = lockstep.attention(tok(q), tok(k), tok(v), pos2, n_head=H, n_kv=kv_heads, device="cpu")
    same(tok(masked), want2)
    same(fmasked, masked)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_left_padding(gen, dtype):
    """A left-padded sequence gives the bits of the same sequence alone."""
    B, H, Hkv, S, D, pad = 2, 4, 2, 6, 8, 2
    q = rand(gen, B, H, S, D, dtype=dtype)
    k, v = rand(gen, B, Hkv, S, D, dtype=dtype), rand(gen, B, Hkv, S, D, dtype=dtype)
    mask = torch.ones(B, 1, S, S, dtype=torch.bool).tril()
    mask[1, ..., :pad] = False
    with lt.exact():
        got = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        alone = F.scaled_dot_product_attention(q[1:, :, pad:], k[1:, :, pad:], v[1:, :, pad:],
                                               is_causal=True, enable_gqa=True)
        first = F.scaled_dot_product_attention(q[:1], k[:1], v[:1], is_causal=True,
                                               enable_gqa=True)
    same(got[1:, :, pad:], alone)
    same(got[:1], first)
    assert bool((got[1, :, :pad] == 0).all())          # rows that see no key


def test_attention_sliding_window_raises(gen):
    q = rand(gen, 1, 2, 4, 8)
    mask = torch.ones(1, 1, 4, 4, dtype=torch.bool).tril().triu(-1)   # a window of 2
    with lt.exact(), pytest.raises(lt.NotCoveredError, match="window"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask)


# ------------------------------------------------------------ compositions

def test_compositions(gen):
    x = rand(gen, 6, 30)
    p = x.abs() + 0.01
    with lt.exact():
        r = torch.rsqrt(p)
        sq, cu = x.pow(2), x.pow(3)
        c, s = torch.cos(x * 40), torch.sin(x * 40)
        d = x / 7.0
        rb = torch.rsqrt(p.bfloat16())
    # PyTorch's own f32 sqrt is not a reference: not correctly rounded on
    # every CPU nor on CUDA; double sqrt and division are
    sqrt32 = p.double().sqrt().float()
    same(r, sqrt32.double().reciprocal().float())
    same(sq, x * x)
    same(cu, x * x * x)
    same(d, x / torch.tensor(7.0))
    pb = p.bfloat16().double()
    same(rb, pb.sqrt().float().double().reciprocal().float().bfloat16())
    ang = (x * 40).double()
    # within one f32 ulp of the double-precision value
    for got, ref in ((c, torch.cos(ang)), (s, torch.sin(ang))):
        err = (got.double() - ref).abs()
        ulp = torch.finfo(torch.float32).eps * ref.abs().clamp(min=2 ** -20)
        assert bool((err <= ulp).all()), float((err / ulp).max())


def test_sqrt_correctly_rounded(gen):
    # sqrt and reciprocal of f32: the correctly rounded result (double,
    # then one rounding to f32), whatever PyTorch's f32 kernel gives
    x = (torch.randn(4096, generator=gen) * torch.exp2(
        torch.randint(-60, 60, (4096,), generator=gen))).abs()
    x[:4] = torch.tensor([0.0, 1e-40, math.inf, 3.4e38])
    with lt.exact():
        r, q, rs = torch.sqrt(x), torch.reciprocal(x), torch.rsqrt(x)
        h, p = torch.sqrt(x.bfloat16()), x.pow(-0.5)
    same(r, x.double().sqrt().float())
    same(q, x.double().reciprocal().float())
    same(rs, x.double().sqrt().float().double().reciprocal().float())
    same(p, rs)
    same(h, x.bfloat16().double().sqrt().float().bfloat16())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_arithmetic_with_scalars(gen, dtype):
    # a bf16/f16 result from a number, a 0-dim tensor or another dtype:
    # both operands in f32 (a number rounded to f32), one f32 operation,
    # one rounding
    x, y = rand(gen, 4096, dtype=dtype), rand(gen, 4096)
    f = x.float()
    s = float(np.float32(1e-6))
    with lt.exact():
        got = {"add": x + 1e-6, "sub": x - 0.3, "rsub": 1.0 - x, "mul": x * 0.7,
               "div": x / 3.0, "add_0dim": x + torch.tensor(0.3),
               "div_0dim": x / torch.tensor(0.3), "mul_f64_0dim": x * torch.tensor(0.3).double(),
               "iadd": x.clone().add_(1e-6), "imul_f32": x.clone().mul_(y),
               "add_f32": x + y, "same_dtype": x + x.flip(0)}
    want = {"add": f + s, "sub": f - float(np.float32(0.3)), "rsub": float(np.float32(1.0)) - f,
            "mul": f * float(np.float32(0.7)), "div": f / float(np.float32(3.0)),
            "add_0dim": f + torch.tensor(0.3), "div_0dim": f / torch.tensor(0.3),
            "mul_f64_0dim": f * torch.tensor(0.3), "iadd": f + s, "imul_f32": f * y,
            "add_f32": f + y, "same_dtype": f + f.flip(0)}
    for k, w in want.items():
        w = w if k == "add_f32" else w.to(dtype)
        assert got[k].dtype == w.dtype, k
        try:
            same(got[k], w)
        except AssertionError as e:
            raise AssertionError(f"{k}: {e}") from None
    with lt.exact(), pytest.raises(lt.NotCoveredError, match="alpha"):
        torch.add(x, 1.0, alpha=2)


# ------------------------------------------------------- the raise rule

def test_uncovered_ops_raise(gen):
    x = rand(gen, 4, 8)
    with lt.exact():
        with pytest.raises(lt.NotCoveredError, match="cumsum"):
            torch.cumsum(x, 0)
        with pytest.raises(lt.NotCoveredError, match="erfinv"):
            torch.erfinv(x * 0)
        with pytest.raises(lt.NotCoveredError, match="alpha"):
            torch.add(x, x, alpha=2)
        with pytest.raises(lt.NotCoveredError, match="last dim"):
            x.mean(0)
        with pytest.raises(lt.NotCoveredError, match="exponent"):
            x.pow(2.5)
        with pytest.raises(lt.NotCoveredError, match="float64"):
            x.double() @ x.double().t()
        y = x + x                              # exact ops still run
    same(y, x * 2)


def test_warn_mode_counts_and_runs(gen):
    x = rand(gen, 4, 8)
    with pytest.warns(RuntimeWarning, match="cumsum"):
        with lt.exact(on_uncovered="warn") as m:
            y = torch.cumsum(x, 0)
            torch.cumsum(x, 1)
            z = torch.softmax(x, -1)
    assert m.uncovered["aten.cumsum.default"] == 2 and "cumsum" in m.report()
    same(y, torch.cumsum(x, 0))
    same(z, lockstep.softmax(x, device="cpu"))


def test_register_new_op(gen):
    x = rand(gen, 3, 5)
    calls = []

    @lt.register("aten::erfinv.default")
    def erfinv(self):
        calls.append(self.shape)
        return torch.zeros_like(self)
    try:
        with lt.exact():
            y = torch.erfinv(x)
        assert calls == [(3, 5)] and bool((y == 0).all())
    finally:
        del lt.COVERED[torch.ops.aten.erfinv.default]
        lt._registry._changed()


# ------------------------------------------------------------ bad input

def test_bad_input_names_argument_and_writes_nothing(gen):
    a, b, b53, x12 = rand(gen, 4, 6), rand(gen, 6, 3), rand(gen, 5, 3), rand(gen, 4, 12)
    out = torch.full((4, 3), 7.0)
    with lt.exact():
        with pytest.raises(lockstep.BadShapeError, match="mat2"):
            torch.mm(a, b53, out=out)
        with pytest.raises(lockstep.BadDtypeError, match="mat2"):
            torch.mm(a, b.bfloat16(), out=out)
        with pytest.raises(lockstep.WrongDeviceError, match="mat2"):
            torch.mm(a, torch.empty(6, 3, device="meta"), out=out)
        # the first operand elsewhere: refused before any pointer reaches C
        with pytest.raises(lockstep.WrongDeviceError, match="mat2 is on cpu, self on meta"):
            torch.mm(torch.empty(4, 6, device="meta"), b)
        with pytest.raises(lockstep.WrongDeviceError, match="self is on meta"):
            torch.addmm(torch.empty(3, device="meta"), a, b)
        with pytest.raises(lockstep.BadLeadingDimError, match="self"):
            torch.softmax(x12[:, ::2], -1)
        with pytest.raises(lockstep.BadLeadingDimError, match="aten.mm: self"):
            torch.mm(x12[:, ::2].t().t(), b, out=out)
        with pytest.raises(lt.NotCoveredError, match="int32"):
            torch.mm(a.int(), b.int())
        with pytest.raises(lockstep.BadShapeError, match="out"):
            torch.mm(a, b, out=torch.empty(3, 3))
    assert bool((out == 7.0).all())
    with lt.exact():
        torch.mm(a, b, out=out)
    same(out, lockstep.gemm(a, b, device="cpu"))


def test_tier_refused_for_missing_gpu_generation():
    with pytest.raises(ValueError, match="tc"):
        lt.exact(tc="sm70")


def test_other_threads_unaffected(gen):
    import threading
    x = rand(gen, 3, 4)
    seen = []
    with lt.exact():
        t = threading.Thread(target=lambda: seen.append(torch.cumsum(x, 0)))
        t.start()
        t.join()
    assert len(seen) == 1


# ------------------------------------------------------------ CUDA

def _ops_cases(gen, dtype):
    x = rand(gen, 6, 48, dtype=dtype)
    w, b = rand(gen, 24, 48, dtype=dtype), rand(gen, 24, dtype=dtype)
    q = rand(gen, 2, 4, 5, 16, dtype=dtype)
    kv = rand(gen, 2, 2, 5, 16, dtype=dtype)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    mask[1, ..., 3:] = False
    return [
        ("linear", lambda d: F.linear(x.to(d), w.to(d), b.to(d))),
        ("bmm", lambda d: torch.bmm(q[0].to(d), q[1].to(d).transpose(1, 2))),
        ("sum", lambda d: x.to(d).sum(-1)), ("mean", lambda d: x.to(d).mean(-1)),
        ("var", lambda d: x.to(d).var(-1)), ("amax", lambda d: x.to(d).amax(-1)),
        ("argmax", lambda d: x.to(d).argmax(-1)),
        ("softmax", lambda d: torch.softmax(x.to(d), -1)),
        ("log_softmax", lambda d: torch.log_softmax(x.to(d), -1)),
        ("rms_norm", lambda d: F.rms_norm(x.to(d), (48,), x[0].to(d), 1e-6)),
        ("layer_norm", lambda d: F.layer_norm(x.to(d), (48,), x[0].to(d), x[1].to(d))),
        ("silu", lambda d: F.silu(x.to(d))), ("gelu", lambda d: F.gelu(x.to(d))),
        ("gelu_tanh", lambda d: F.gelu(x.to(d), approximate="tanh")),
        ("sigmoid", lambda d: torch.sigmoid(x.to(d))), ("exp", lambda d: torch.exp(x.to(d))),
        ("tanh", lambda d: torch.tanh(x.to(d))), ("log", lambda d: torch.log(x.to(d).abs())),
        ("erf", lambda d: torch.erf(x.to(d))),
        ("rsqrt", lambda d: torch.rsqrt(x.to(d).abs())),
        ("pow3", lambda d: x.to(d).pow(3)), ("cos", lambda d: torch.cos(x.to(d) * 100)),
        ("sin", lambda d: torch.sin(x.to(d) * 100)), ("div", lambda d: x.to(d) / 3.0),
        ("embedding", lambda d: F.embedding(torch.tensor([5, 0, 2], device=d), x.to(d))),
        ("sdpa", lambda d: F.scaled_dot_product_attention(
            q.to(d), kv.to(d), kv.to(d), attn_mask=mask.to(d), enable_gqa=True)),
    ]


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_matches_cpu(gen, dtype):
    cuda_or_skip()
    for name, fn in _ops_cases(gen, dtype):
        with lt.exact():
            c = fn("cpu")
            g = fn("cuda")
        torch.cuda.synchronize()
        assert g.device.type == "cuda", name
        try:
            same(c, g)
        except AssertionError as e:
            raise AssertionError(f"{name} ({dtype}): {e}") from None


def _specials(gen, n, dtype):
    x = torch.randn(n, generator=gen) * torch.exp2(torch.randint(-30, 30, (n,), generator=gen))
    x[:8] = torch.tensor([0.0, -0.0, math.inf, -math.inf, 1e-40, -1e-40, 3.4e38, 1.0])
    return x.to(dtype)


def _elementwise_cases():
    """The element-wise forms models use: each runs as PyTorch's kernel
    (allowed), as a composition or as a Lockstep call in exact mode."""
    return {
        "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
        "div": lambda x, y: x / y, "div_scalar": lambda x, y: x / 3.0,
        "mul_scalar": lambda x, y: x * 0.7, "add_scalar": lambda x, y: x + 1e-6,
        "add_int": lambda x, y: x + 1, "rsub": lambda x, y: 1.0 - x,
        "sub_scalar": lambda x, y: x - 0.3, "add_alpha_neg": lambda x, y: torch.add(x, y, alpha=-1),
        "mul_0dim": lambda x, y: x * torch.tensor(0.3),
        "mul_0dim_same_device": lambda x, y: x * torch.tensor(0.3, device=x.device),
        "add_0dim_same_device": lambda x, y: x + torch.tensor(0.3, device=x.device),
        "div_0dim_same_device": lambda x, y: x / torch.tensor(0.3, device=x.device),
        "add_f32": lambda x, y: x + y.float(), "mul_f32_0dim": lambda x, y: x * y[:1].float()[0],
        "add_inplace_scalar": lambda x, y: x.clone().add_(0.1),
        "mul_inplace_f32": lambda x, y: x.clone().mul_(y.float()),
        "sqrt": lambda x, y: torch.sqrt(x.abs()), "rsqrt": lambda x, y: torch.rsqrt(x.abs()),
        "pow_half": lambda x, y: x.abs().pow(0.5), "pow_m_half": lambda x, y: x.abs().pow(-0.5),
        "reciprocal": lambda x, y: torch.reciprocal(x), "neg": lambda x, y: -x,
        "abs": lambda x, y: x.abs(),
        "to_f32": lambda x, y: x.float(), "to_bf16": lambda x, y: x.float().bfloat16(),
        "to_f16": lambda x, y: x.float().half(),
        "where": lambda x, y: torch.where(x > y, x, y),
        "masked_fill": lambda x, y: x.masked_fill(y > 0, torch.finfo(x.dtype).min),
        "cat": lambda x, y: torch.cat([x, y]), "f64_mul_add": lambda x, y: x.double() * 0.3 + y,
    }


def _elementwise_differences(a, b):
    """name -> (elements that differ, the first as 'cpu bits != cuda bits')
    for every case of _elementwise_cases whose CPU and CUDA bits differ."""
    bad = {}
    for name, fn in _elementwise_cases().items():
        with lt.exact():
            c = fn(a, b)
            g = fn(a.cuda(), b.cuda())
        nan = torch.isnan(c)
        c, g = c.masked_fill(nan, 0), g.cpu().masked_fill(nan, 0)   # NaN payloads aside
        x, y = tbits(c).ravel(), tbits(g).ravel()
        d = np.flatnonzero(x != y)
        if d.size:
            bad[name] = f"{d.size} of {x.size} differ, first at {d[0]}: {x[d[0]]:#x} != {y[d[0]]:#x}"
    return bad


@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_allowed_ops_match_cpu(gen, dtype):
    """The element-wise ops exact mode runs give the same bits on CUDA as
    on the CPU; every op that differs is reported, not only the first."""
    cuda_or_skip()
    a, b = _specials(gen, 4096, dtype), _specials(gen, 4096, dtype)
    bad = _elementwise_differences(a, b)
    for name, what in bad.items():
        print(f"DIFFERS {name} ({dtype}): {what}")
    assert not bad, f"{dtype}: " + "; ".join(f"{n}: {w}" for n, w in bad.items())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_cuda_stock_half_ops_match_cpu(gen, dtype):
    """Outside exact mode: which of PyTorch's own bf16/f16 kernels give the
    same bits on CUDA as on the CPU.  Those exact mode lets run (two
    tensors of one dtype: add, sub, mul, div; neg, abs, casts) must; the
    others are printed (exact mode computes them itself)."""
    cuda_or_skip()
    a, b = _specials(gen, 4096, dtype), _specials(gen, 4096, dtype)
    allowed = ("add", "sub", "mul", "div", "add_alpha_neg", "neg", "abs", "to_f32", "to_bf16",
               "to_f16", "where", "masked_fill", "cat")
    bad = {}
    for name, fn in _elementwise_cases().items():
        c, g = fn(a, b), fn(a.cuda(), b.cuda()).cpu()
        nan = torch.isnan(c)
        x, y = tbits(c.masked_fill(nan, 0)).ravel(), tbits(g.masked_fill(nan, 0)).ravel()
        d = np.flatnonzero(x != y)
        if d.size:
            bad[name] = f"{d.size} differ"
            print(f"stock {name} ({dtype}): {d.size} of {x.size} differ CPU vs CUDA")
    wrong = {n: w for n, w in bad.items() if n in allowed}
    assert not wrong, f"{dtype}: allowed kernels differ: {wrong}"


def test_cuda_runs_on_current_stream(gen):
    cuda_or_skip()
    x = rand(gen, 64, 256).cuda()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s), lt.exact():
        y = torch.softmax(x * 2, -1)           # mul and softmax ordered on s
    s.synchronize()
    with lt.exact():
        same(y, torch.softmax(x.cpu() * 2, -1))


def test_cuda_graph_capture_replays_the_same_bits(gen):
    """Exact mode's GEMM, norm, softmax and element-wise ops captured in a
    CUDA graph (the stream's Lockstep queue made first by prepare_stream)
    give the eager results' bits on every replay."""
    cuda_or_skip()
    x = rand(gen, 4, 64, dtype=torch.bfloat16).cuda()
    w = rand(gen, 96, 64, dtype=torch.bfloat16).cuda()
    nw = rand(gen, 96, dtype=torch.bfloat16).cuda()

    def step(x):
        h = F.linear(x, w)
        h = F.rms_norm(h, (96,), nw, 1e-6)
        return torch.softmax(F.silu(h) * 2, -1) @ w

    with torch.no_grad(), lt.exact():
        want = step(x)
        s = torch.cuda.Stream()
        lt.prepare_stream(s)
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step(x)                           # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            got = step(x)
    for _ in range(3):
        g.replay()
        torch.cuda.synchronize()
        same(got, want)


def test_cuda_queue_per_stream_logic(monkeypatch):
    """The CUDA queue lookup without a GPU: one queue per (ordinal, stream),
    the legacy default stream as handle 1, and a queue that cannot be made
    under graph capture names prepare_stream."""
    from lockstep.torch import _call
    made = []

    class FakeQueue:
        def __init__(self, dev, native_stream):
            if fail:
                raise lockstep.OutOfMemoryError(8, "cudaMalloc (queue workspace)")
            made.append((dev, native_stream))
            self._handle = 1000 + len(made)

    fail = False
    stream = [0]
    monkeypatch.setattr(_call, "_handles", {})
    monkeypatch.setattr(_call, "_queues", {})
    monkeypatch.setattr(_call, "Queue", FakeQueue)
    monkeypatch.setattr(_call, "_cuda_device", lambda index: f"gpu{index}")
    monkeypatch.setattr(_call, "_raw_stream", lambda index: stream[0])
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    dev = torch.device("cuda", 0)
    assert _call.cuda_queue(dev) == 1001 and made == [("gpu0", 1)]
    assert _call.cuda_queue(dev) == 1001 and len(made) == 1
    stream[0] = 77
    assert _call.cuda_queue(dev) == 1002 and made[-1] == ("gpu0", 77)
    assert _call.cuda_queue(torch.device("cuda", 1)) == 1003 and made[-1] == ("gpu1", 77)
    fail, stream[0] = True, 78
    with pytest.raises(lockstep.OutOfMemoryError, match="prepare_stream"):
        _call.cuda_queue(dev)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    with pytest.raises(lockstep.OutOfMemoryError) as e:
        _call.cuda_queue(dev)
    assert "prepare_stream" not in str(e.value)


def test_cuda_wrong_device_names_argument(gen):
    cuda_or_skip()
    a = rand(gen, 4, 4)
    with lt.exact(), pytest.raises(lockstep.WrongDeviceError, match="mat2"):
        torch.mm(a.cuda(), a)


# ------------------------------------------------------------ cross_check

def test_cross_check_torch_function(gen):
    x, w = rand(gen, 4, 32, dtype=torch.bfloat16), rand(gen, 16, 32, dtype=torch.bfloat16)

    def f(x, w):
        return torch.softmax(F.linear(x, w), -1), F.silu(x)
    hosts = [d for d in ("ref", "cpu") if d in lockstep.devices()]
    r = lt.cross_check(f, x, w, devices=hosts + (["cuda:0"] if torch.cuda.is_available()
                                                 and "cuda:0" in lockstep.devices() else []))
    assert r.identical, str(r)
    assert len(r.outputs[r.ran[0]]) == 2
    # a function whose result depends on the device: the difference is found
    bad = lt.cross_check(lambda x: x + float(lt.current().host_device.name == "ref"), x,
                         devices=["cpu", "ref"])
    assert not bad.identical and bad.mismatches[0][:3] == ("ref", 0, 0), str(bad)
    with pytest.raises(lockstep.Mismatch):
        bad.check()
    model = torch.nn.Sequential(torch.nn.Linear(32, 8), torch.nn.GELU())
    assert lt.cross_check(model, x.float(), devices=hosts).identical


def test_cross_check_lockstep_op_with_torch_tensors(gen):
    x = rand(gen, 3, 40)
    r = lockstep.cross_check(lockstep.rmsnorm, x, eps=1e-6)
    assert r.identical, str(r)
    if torch.cuda.is_available() and "cuda:0" in lockstep.devices():
        r = lockstep.cross_check(lockstep.rmsnorm, x.cuda(), eps=1e-6,
                                 devices=["cuda:0", "cpu", "ref"])
        assert r.identical and r.ran == ["cuda:0", "cpu", "ref"], str(r)


def test_functions_wrapped_only_inside(gen):
    orig = F.scaled_dot_product_attention
    with lt.exact():
        assert F.scaled_dot_product_attention is not orig
        with lt.exact(on_uncovered="warn"):       # nested modes share the wrappers
            pass
        assert F.scaled_dot_product_attention is not orig
    assert F.scaled_dot_product_attention is orig and F.rms_norm.__name__ == "rms_norm"
    assert not hasattr(F.rms_norm, "_lockstep_original")


def test_attention_mask_checked_once_per_mask(gen, monkeypatch):
    from lockstep.torch import _attention
    q = rand(gen, 2, 2, 4, 8)
    mask = torch.ones(2, 1, 4, 6, dtype=torch.bool).tril()
    calls = []
    real = _attention._positions_from_mask
    monkeypatch.setattr(_attention, "_positions_from_mask",
                        lambda *a: calls.append(1) or real(*a))
    with lt.exact():
        first = F.scaled_dot_product_attention(q, q, q, attn_mask=mask[..., :4])
        again = F.scaled_dot_product_attention(q, q, q, attn_mask=mask[..., :4])  # a new view
        assert len(calls) == 1
        mask[1, 0, 3, 1] = False               # a hole, made in place: checked again
        with pytest.raises(lt.NotCoveredError):
            F.scaled_dot_product_attention(q, q, q, attn_mask=mask[..., :4])
    assert len(calls) == 2
    same(first, again)


def test_indexed_writes_refused_when_indices_repeat(gen):
    x, src = torch.zeros(5, 3), rand(gen, 2, 3)
    with lt.exact():
        x.index_copy_(0, torch.tensor([4, 1]), src)            # distinct: allowed
        x[torch.tensor([0, 2])] = src
        with pytest.raises(lt.NotCoveredError, match="repeats"):
            x.index_copy_(0, torch.tensor([3, 3]), src)
        with pytest.raises(lt.NotCoveredError, match="repeats"):
            x[torch.tensor([1, 1])] = src
        with pytest.raises(lt.NotCoveredError, match="repeats"):
            x.scatter_(0, torch.tensor([[0, 0, 1], [0, 2, 1]]), src)
        y = torch.zeros(5, 3).scatter_(0, torch.tensor([[0, 0, 1], [1, 2, 3]]), src)
    same(y[1, 0], src[1, 0])
    same(x[4], src[0])
    same(x[[0, 2]], src)
