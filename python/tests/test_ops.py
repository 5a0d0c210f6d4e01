"""Every bound op: the same bits on ref and on every CPU variant, values
close to numpy's, and the Pythonic arguments (out=, dtype=, eps=)."""

import numpy as np
import pytest

import lockstep
from conftest import assert_same_bits, host_devices

DEVICES = host_devices()


def on_all(fn, *args, **kw):
    """fn run on every host device: the ref result, after asserting that
    every device gave its bits."""
    ref = fn(*args, device="ref", **kw)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for d in DEVICES:
        got = fn(*args, device=d, **kw)
        gots = got if isinstance(got, tuple) else (got,)
        for a, b in zip(refs, gots):
            assert_same_bits(a, b)
    return ref


def f32(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def test_gemm(rng):
    a, b, bias = f32(rng, 7, 33), f32(rng, 33, 5), f32(rng, 5)
    c = on_all(lockstep.gemm, a, b, bias)
    assert isinstance(c, lockstep.Tensor) and c.shape == (7, 5) and c.dtype_name == "f32"
    np.testing.assert_allclose(c.numpy(), a @ b + bias, rtol=1e-4, atol=1e-4)
    ct = on_all(lockstep.gemm, a.T.copy(), b.T.copy(), trans_a=True, trans_b=True)
    assert_same_bits(ct, lockstep.matmul(a, b))


def test_gemm_accumulate_out_and_batch(rng):
    a, b = f32(rng, 3, 4, 6), f32(rng, 6, 2)
    out = f32(rng, 3, 4, 2)
    want = out + np.einsum("bmk,kn->bmn", a, b)
    r = lockstep.gemm(a, b, out=out, accumulate=True)
    assert r is out
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    c = on_all(lockstep.gemm, a, b)
    assert c.shape == (3, 4, 2)


def test_gemm_tensor_core_tier_on_cpu(rng):
    a = lockstep.convert(f32(rng, 4, 16), "bf16")
    b = lockstep.convert(f32(rng, 16, 3), "bf16")
    for tc in ("sm80", "sm90"):
        on_all(lockstep.gemm, a, b, tc=tc, dtype="f32")
    with pytest.raises(lockstep.BadDtypeError):
        lockstep.gemm(f32(rng, 2, 2), f32(rng, 2, 2), tc="sm90")


def test_reductions(rng):
    x = f32(rng, 6, 40)
    for op, want in [("sum", x.sum(1)), ("mean", x.mean(1)), ("max", x.max(1)),
                     ("min", x.min(1)), ("var", x.var(1))]:
        r = on_all(lockstep.reduce, x, op)
        assert r.shape == (6,)
        np.testing.assert_allclose(r.numpy(), want, rtol=1e-4, atol=1e-5)
    am = on_all(lockstep.argmax, x)
    assert am.dtype_name == "i64"
    assert (am.numpy() == x.argmax(1)).all()
    np.testing.assert_allclose(lockstep.var(x, unbiased=True).numpy(), x.var(1, ddof=1), rtol=1e-4)
    out = np.zeros(6, np.float32)
    assert lockstep.sum(x, out=out) is out and np.allclose(out, x.sum(1), atol=1e-4)


def test_norms_softmax(rng):
    x, w, b = f32(rng, 5, 64), f32(rng, 64), f32(rng, 64)
    y = on_all(lockstep.rmsnorm, x, w, eps=1e-5)
    want = x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
    y = on_all(lockstep.layernorm, x, w, b, eps=1e-5)
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4)
    s = on_all(lockstep.softmax, x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(s.numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    ls = on_all(lockstep.log_softmax, x)
    np.testing.assert_allclose(ls.numpy(), np.log(e / e.sum(1, keepdims=True)), atol=1e-5)


def test_leading_dims_are_rows(rng):
    x = f32(rng, 2, 3, 16)
    y = on_all(lockstep.rmsnorm, x)
    assert y.shape == (2, 3, 16)
    assert_same_bits(y.numpy().reshape(6, 16), lockstep.rmsnorm(x.reshape(6, 16)))


def test_unary_and_dtypes(rng):
    x = f32(rng, 9, 31, scale=3)
    for op in ("relu", "relu2", "sigmoid", "silu", "gelu_tanh", "gelu_erf", "exp",
               "tanh", "erf"):
        on_all(lockstep.unary, x, op)
        on_all(getattr(lockstep, op), x, dtype="bf16")
    on_all(lockstep.log, np.abs(x) + 1)
    np.testing.assert_allclose(lockstep.exp(x).numpy(), np.exp(x), rtol=1e-5)
    h = on_all(lockstep.convert, x, "f16")
    assert (h.numpy() == x.astype(np.float16)).all()  # both round to nearest even
    hb = on_all(lockstep.convert, x, "bf16")
    assert hb.numpy().dtype == np.uint16
    back = lockstep.convert(hb, "f32").numpy()
    np.testing.assert_allclose(back, x, rtol=1 / 128)


def test_in_place(rng):
    x = f32(rng, 4, 8)
    want = np.maximum(x, 0)
    assert lockstep.relu(x, out=x) is x
    assert (x == want).all()


def test_binary_glu(rng):
    a, b, row = f32(rng, 6, 20), f32(rng, 6, 20), f32(rng, 20)
    assert (on_all(lockstep.add, a, b).numpy() == a + b).all()
    assert (on_all(lockstep.mul, a, row).numpy() == a * row).all()
    g = on_all(lockstep.glu, a, b, "silu")
    silu = lockstep.silu(a).numpy()
    assert_same_bits(g, lockstep.mul(silu, b))


def test_numpy_float16_and_bf16_inputs(rng):
    x = f32(rng, 3, 10)
    xh = x.astype(np.float16)
    assert_same_bits(on_all(lockstep.rmsnorm, xh), lockstep.rmsnorm(lockstep.convert(x, "f16")))
    xb = lockstep.convert(x, "bf16").numpy()  # uint16 bits
    y1 = on_all(lockstep.rmsnorm, lockstep.bf16(xb), dtype="f32")
    y2 = lockstep.rmsnorm(lockstep.convert(x, "bf16"), dtype="f32")
    assert_same_bits(y1, y2)
    with pytest.raises(lockstep.BadDtypeError, match="lockstep.bf16"):
        lockstep.rmsnorm(xb)


def test_quantisation_and_ternary(rng):
    x = f32(rng, 5, 24)
    xq, s = on_all(lockstep.quantize_act, x)
    assert xq.dtype_name == "i8" and s.shape == (5,)
    ref = np.clip(np.rint(x * s.numpy()[:, None]), -128, 127)
    assert (np.abs(xq.numpy() - ref) <= 1).all()
    xq2, s2 = on_all(lockstep.rmsnorm_quantize, x, None, eps=1e-6)
    xq3, s3 = lockstep.quantize_act(lockstep.rmsnorm(x, eps=1e-6))
    assert_same_bits(xq2, xq3)
    assert_same_bits(s2, s3)
    w = f32(rng, 7, 24)
    wq, ws = on_all(lockstep.quantize_ternary, w)
    assert wq.dtype_name == "t2" and wq.shape == (7, 24) and ws.shape == (1,)
    t = on_all(lockstep.ternary_unpack, wq)
    assert set(np.unique(t.numpy())) <= {-1, 0, 1}
    assert_same_bits(lockstep.ternary_pack(t), wq)
    y = on_all(lockstep.ternary_gemm, xq, s, wq, ws)
    acc = xq.numpy().astype(np.int64) @ t.numpy().astype(np.int64).T
    want = (acc.astype(np.float32) / s.numpy()[:, None]) * ws.numpy()[0]
    assert_same_bits(y, want.astype(np.float32))


def test_ternary_bytes_from_numpy(rng):
    # formats.md's example row [+1, -1, 0, +1, +1] -> 0x92 0x56
    w = np.array([[1, -1, 0, 1, 1]], np.int8)
    packed = lockstep.ternary_pack(w)
    assert packed.numpy().tolist() == [[0x92, 0x56]]
    raw = np.array([[0x92, 0x56]], np.uint8)
    assert (lockstep.ternary_unpack(lockstep.t2(raw, cols=5)).numpy() == w).all()


def test_int8_gemm(rng):
    a = rng.integers(-128, 128, (4, 50), dtype=np.int8)
    b = rng.integers(-128, 128, (3, 50), dtype=np.int8)
    c = on_all(lockstep.int8_gemm, a, b)
    assert c.dtype_name == "i32"
    assert (c.numpy() == a.astype(np.int32) @ b.astype(np.int32).T).all()
    sa, sb = np.full(4, 2, np.float32), np.full(3, 0.5, np.float32)
    y = on_all(lockstep.int8_gemm, a, b, sa, sb)
    assert_same_bits(y, ((c.numpy().astype(np.float32) / 2) * 0.5).astype(np.float32))


def test_rope_attention_embedding(rng):
    tokens, n_head, n_kv, hd = 5, 4, 2, 8
    x = f32(rng, tokens, n_head * hd)
    pos = np.arange(tokens, dtype=np.int32)
    on_all(lockstep.rope, x, pos, head_dim=hd, theta=10000.0)
    on_all(lockstep.rope, x, pos, head_dim=hd, theta=500000.0, interleaved=True)
    k, v = f32(rng, tokens, n_kv * hd), f32(rng, tokens, n_kv * hd)
    o = on_all(lockstep.attention, x, k, v, pos, n_head=n_head, n_kv=n_kv)
    assert o.shape == x.shape
    # token 0 sees only cache row 0: its output is v's row 0 for each head
    v0 = v[0].reshape(n_kv, hd)
    np.testing.assert_allclose(o.numpy()[0].reshape(n_head, hd),
                               np.repeat(v0, n_head // n_kv, 0), rtol=1e-6)
    qb, kb, vb = f32(rng, 2, 3, n_head * hd), f32(rng, 2, 4, n_kv * hd), f32(rng, 2, 4, n_kv * hd)
    pb = np.array([[0, 1, 2], [1, 2, 3]], np.int32)
    ob = on_all(lockstep.attention, qb, kb, vb, pb, n_head=n_head, n_kv=n_kv)
    assert ob.shape == (2, 3, n_head * hd)
    one = lockstep.attention(qb[1], kb[1], vb[1], pb[1], n_head=n_head, n_kv=n_kv)
    assert_same_bits(ob.numpy()[1], one)
    table = f32(rng, 10, 6)
    ids = np.array([3, 0, 9, 3], np.int32)
    e = on_all(lockstep.embedding, table, ids)
    assert (e.numpy() == table[ids]).all()
    dst = np.zeros((10, 6), np.float32)
    assert lockstep.set_rows(table[:2], np.array([7, 1], np.int32), dst) is dst
    assert (dst[7] == table[0]).all() and (dst[1] == table[1]).all() and not dst[0].any()


def test_prepared_weights(rng):
    x, w, bias = f32(rng, 3, 32), f32(rng, 12, 32), f32(rng, 12)
    for d in DEVICES:
        W = lockstep.Weights(w, device=d)
        assert_same_bits(lockstep.linear(x, W, bias),
                         lockstep.gemm(x, w, bias, trans_b=True, device="ref"))
    wq, ws = lockstep.quantize_ternary(w)
    W = lockstep.Weights(wq, ws)
    xq, xs = lockstep.quantize_act(x)
    assert_same_bits(lockstep.ternary_linear(xq, xs, W), lockstep.ternary_gemm(xq, xs, wq, ws))
    y, q2, s2 = lockstep.rmsnorm_ternary_linear(x, None, W, eps=1e-5)
    q3, s3 = lockstep.rmsnorm_quantize(x, eps=1e-5)
    assert_same_bits(q2, q3)
    assert_same_bits(s2, s3)
    assert_same_bits(y, lockstep.ternary_gemm(q3, s3, wq, ws))


def test_cross_check(rng):
    x = f32(rng, 4, 100)
    r = lockstep.cross_check(lockstep.softmax, x, devices=DEVICES)
    assert r and r.identical and r.ran[0] == "ref" and not r.mismatches
    assert "identical" in str(r)
    r = lockstep.cross_check(lockstep.quantize_act, x, devices=DEVICES, strict=True)
    assert len(r.outputs["ref"]) == 2

    # a function that differs by device: the first differing element is named
    def noisy(a, device=None):
        y = lockstep.relu(a, device=device).numpy().copy()
        if device.name != "ref":
            y[2, 5] = np.nextafter(y[2, 5], np.float32(np.inf))
        return y
    r = lockstep.cross_check(noisy, np.abs(x), devices=["ref", "cpu"])
    assert not r
    dev, out, i, idx, want, got = r.mismatches[0]
    assert (dev, out, i, idx) == ("cpu", 0, 2 * 100 + 5, (2, 5))
    with pytest.raises(lockstep.Mismatch, match="element 205"):
        r.check()


def _bitnet_by_ops(x, pos, layers, w, cfg, ctx, device):
    """The eight ops a layer that lk_bitnet_decode is defined as."""
    qd, kvd = cfg.n_head * cfg.head_dim, cfg.n_kv * cfg.head_dim
    B = x.shape[0]
    for L, W in zip(layers, w):
        qkv = lockstep.rmsnorm_ternary_linear(x, L.attn_norm, W["qkv"], eps=cfg.eps,
                                              device=device)[0].numpy()
        lockstep.rope(qkv[:, :qd + kvd], pos, head_dim=cfg.head_dim, theta=cfg.theta,
                      out=qkv[:, :qd + kvd], device=device)
        rows = (np.arange(B) * ctx + pos).astype(np.int32)
        lockstep.set_rows(qkv[:, qd:], rows, L.kv, device=device)
        cache = L.kv.reshape(B, ctx, 2 * kvd)
        att = lockstep.attention(qkv[:, :qd].reshape(B, 1, qd), cache[:, :, :kvd],
                                 cache[:, :, kvd:], pos.reshape(B, 1), n_head=cfg.n_head,
                                 n_kv=cfg.n_kv, scale=cfg.attn_scale, device=device)
        lockstep.rmsnorm_ternary_linear(att.numpy().reshape(B, qd), L.attn_sub_norm, W["o"],
                                        eps=cfg.eps, out=x, accumulate=True, device=device)
        gu = lockstep.rmsnorm_ternary_linear(x, L.ffn_norm, W["gate_up"], eps=cfg.eps,
                                             device=device)[0].numpy()
        g = lockstep.glu(gu[:, :cfg.ffn], gu[:, cfg.ffn:], "relu2", device=device)
        lockstep.rmsnorm_ternary_linear(g, L.ffn_sub_norm, W["down"], eps=cfg.eps, out=x,
                                        accumulate=True, device=device)
    return x


def test_bitnet_decode_is_the_composition(rng):
    cfg = lockstep.BitnetConfig(dim=16, n_head=4, n_kv=2, head_dim=4, ffn=24, eps=1e-5,
                                theta=10000.0)
    qd, kvd, B, ctx = 16, 8, 2, 5
    shapes = {"qkv": (qd + 2 * kvd, 16), "o": (16, qd), "gate_up": (48, 16), "down": (16, 24)}
    for d in DEVICES:
        r = np.random.default_rng(7)   # the same model on every device
        w, layers_a, layers_b = [], [], []
        for _ in range(2):
            W = {}
            for name, shp in shapes.items():
                wq, ws = lockstep.quantize_ternary(f32(r, *shp), device=d)
                W[name] = lockstep.Weights(wq, ws, device=d)
            w.append(W)
            norms = [f32(r, n) for n in (16, qd, 16, 24)]
            kv = f32(r, B * ctx, 2 * kvd)
            for out in (layers_a, layers_b):
                out.append(lockstep.BitnetLayer(W["qkv"], W["o"], W["gate_up"], W["down"],
                                                kv.copy(), *norms))
        x = f32(r, B, 16)
        pos = np.array([3, 1], np.int32)
        xa = x.copy()
        assert lockstep.bitnet_decode(xa, pos, layers_a, config=cfg, ctx=ctx, device=d) is xa
        xb = _bitnet_by_ops(x.copy(), pos, layers_b, w, cfg, ctx, d)
        assert_same_bits(xa, xb)
        for la, lb in zip(layers_a, layers_b):
            assert_same_bits(la.kv, lb.kv)
        if d == "ref":
            first = xa
        else:
            assert_same_bits(xa, first)
    same = x.copy()
    lockstep.bitnet_decode(same, pos, [], config=cfg, ctx=ctx)   # no layers: nothing
    assert_same_bits(same, x)
    with pytest.raises(lockstep.RangeError):
        lockstep.bitnet_decode(x, np.array([5, 0], np.int32), layers_a, config=cfg, ctx=ctx,
                               device=DEVICES[-1])


def test_threads_get_the_same_bits(rng):
    import threading
    x = f32(rng, 32, 200)
    want = lockstep.softmax(x, device="ref")
    got, errors = [], []

    def work():
        try:
            for _ in range(5):
                got.append(lockstep.softmax(x, device="cpu"))   # each thread its own queue
        except Exception as e:  # reported below, not lost in the thread
            errors.append(e)
    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and len(got) == 20
    for g in got:
        assert_same_bits(g, want)
