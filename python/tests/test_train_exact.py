"""Training in exact mode: a small transformers model (config, random init,
no download) trained 20 steps from one seed with lockstep.torch.optim.AdamW
inside lockstep.torch.exact(); every parameter's bytes hashed after each
step.  The same run twice gives the same hashes; on a GPU host the CUDA
run's hashes equal the CPU run's, step by step.  The stock PyTorch run's
divergence is printed for contrast.  Also: the training ops' binding and
the optimizers against PyTorch's (close, not equal: the contract is
Lockstep's own)."""

import contextlib
import hashlib
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
import lockstep  # noqa: E402
import lockstep.torch as lt  # noqa: E402
from lockstep import train_ops  # noqa: E402

STEPS = int(os.environ.get("LOCKSTEP_TRAIN_STEPS", "20"))
V = 128


def _cuda_ok():
    if not torch.cuda.is_available():
        return "no CUDA device for PyTorch"
    if not any(lockstep.device(n).kind == "gpu" for n in lockstep.devices()):
        return "Lockstep has no CUDA device (LOCKSTEP_DRIVER_PATH unset?)"
    return None


def _model():
    tf = pytest.importorskip("transformers", reason="transformers is not installed")
    cfg = tf.LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, attn_implementation="eager",
                         tie_word_embeddings=False)
    torch.manual_seed(1234)
    return tf.LlamaForCausalLM(cfg).eval()  # eval: no dropout; gradients still flow


def _loss(logits, ids):
    # next-token cross entropy from covered ops (one-hot by comparison)
    lp = torch.log_softmax(logits[:, :-1].float().reshape(-1, V), -1)
    tgt = ids[:, 1:].reshape(-1, 1)
    oh = (torch.arange(V, device=ids.device) == tgt).float()
    return -(lp * oh).sum(-1).mean()


def _digest(model):
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def train(device, exact=True, steps=STEPS):
    """(per-step digests, final parameters on the CPU) of one run."""
    model = _model().to(device)
    gen = torch.Generator().manual_seed(99)
    data = torch.randint(0, V, (steps, 2, 12), generator=gen).to(device)
    if exact:
        opt = lt.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    digests = []
    for s in range(steps):
        ctx = lt.exact() if exact else contextlib.nullcontext()
        opt.zero_grad(set_to_none=True)
        with ctx:
            loss = _loss(model(input_ids=data[s]).logits, data[s])
            loss.backward()
        opt.step()
        digests.append(_digest(model))
    final = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    return digests, final


def _max_diff(a, b):
    return max(float((a[n].double() - b[n].double()).abs().max()) for n in a)


def test_train_cpu_twice_identical():
    d1, p1 = train("cpu")
    d2, _ = train("cpu")
    print("exact CPU digests:", " ".join(d1))
    assert d1 == d2
    _, stock = train("cpu", exact=False)
    print(f"stock PyTorch vs exact after {STEPS} steps (CPU): max |diff| "
          f"{_max_diff(p1, stock):.3g} (the contracts differ; both learn)")


@pytest.mark.skipif(_cuda_ok() is not None, reason=str(_cuda_ok()))
def test_train_cuda_equals_cpu():
    dc, pc = train("cpu")
    dg, pg = train("cuda")
    for s, (a, b) in enumerate(zip(dc, dg)):
        print(f"step {s + 1:2d}  cpu {a}  cuda {b}  {'same' if a == b else 'DIFFERENT'}")
    sc, stc = train("cpu", exact=False)
    sg, stg = train("cuda", exact=False)
    same = sum(a == b for a, b in zip(sc, sg))
    print(f"stock PyTorch: {same}/{STEPS} steps with equal CPU/CUDA digests, max |diff| "
          f"after {STEPS} steps {_max_diff(stc, stg):.3g}")
    assert dc == dg
    assert _max_diff(pc, pg) == 0


# ---------------------------------------------------------- the pieces

def test_optimizers_close_to_torch():
    torch.manual_seed(5)
    for make_ours, make_theirs in (
            (lambda p: lt.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
             lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1)),
            (lambda p: lt.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3,
                                    nesterov=True),
             lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3,
                                       nesterov=True))):
        a = torch.nn.Parameter(torch.randn(7, 5))
        b = torch.nn.Parameter(a.detach().clone())
        oa, ob = make_ours([a]), make_theirs([b])
        for _ in range(5):
            g = torch.randn(7, 5)
            a.grad, b.grad = g.clone(), g.clone()
            oa.step()
            ob.step()
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (a - b).abs().max()


def test_backward_ops_close_to_torch():
    torch.manual_seed(6)
    x = torch.randn(6, 33, requires_grad=True)
    gy = torch.randn(6, 33)
    for fn in (torch.nn.functional.silu, torch.nn.functional.gelu, torch.tanh, torch.sigmoid,
               torch.relu, lambda t: torch.softmax(t, -1), lambda t: torch.log_softmax(t, -1)):
        x.grad = None
        fn(x).backward(gy)
        want = x.grad.clone()
        x.grad = None
        with lt.exact():
            fn(x).backward(gy)
        assert torch.allclose(x.grad, want, rtol=1e-4, atol=1e-5), fn


def test_embedding_backward_order_and_padding():
    w = torch.nn.Parameter(torch.randn(10, 4))
    ids = torch.tensor([[1, 3, 1], [0, 1, 9]])
    gy = torch.randn(2, 3, 4)
    with lt.exact():
        torch.nn.functional.embedding(ids, w, padding_idx=0).backward(gy)
    g = gy.reshape(-1, 4)
    want = torch.zeros(10, 4)
    want[1] = (g[0] + g[2]) + g[4]  # rows in ascending order
    want[3], want[9] = g[1], g[5]
    assert torch.equal(w.grad, want)


def test_binding_column_sum_and_norm_backward(rng):
    x = rng.standard_normal((5, 17)).astype(np.float32)
    dy = rng.standard_normal((5, 17)).astype(np.float32)
    w = rng.standard_normal(17).astype(np.float32)
    dx, dwt = train_ops.rmsnorm_backward(x, w, dy, eps=1e-6, want_dwt=True)
    dw = np.from_dlpack(train_ops.column_sum(dwt)).reshape(-1)
    xt = torch.tensor(x, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    y = xt * torch.rsqrt(xt.pow(2).mean(-1, keepdim=True) + 1e-6) * wt
    y.backward(torch.tensor(dy))
    assert np.allclose(np.from_dlpack(dx), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert np.allclose(dw, wt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_layer_norm_backward_close_and_covered():
    torch.manual_seed(9)
    ln = torch.nn.LayerNorm(33)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-1, 1)
    x = torch.randn(2, 5, 33, requires_grad=True)
    gy = torch.randn(2, 5, 33)
    ln(x).backward(gy)
    want = (x.grad.clone(), ln.weight.grad.clone(), ln.bias.grad.clone())
    x.grad = None
    ln.zero_grad()
    with lt.exact():  # raises if any backward op were uncovered
        ln(x).backward(gy)
    for got, w in zip((x.grad, ln.weight.grad, ln.bias.grad), want):
        assert torch.allclose(got, w, rtol=1e-4, atol=1e-5)


def test_atomic_scatter_adds_raise():
    x = torch.zeros(5, 3)
    idx = torch.tensor([0, 2, 0])
    src = torch.ones(3, 3)
    with lt.exact():
        for fn in (lambda: x.index_add(0, idx, src),
                   lambda: x.scatter_add(0, idx.reshape(-1, 1).expand(3, 3), src),
                   lambda: x.index_put((idx,), src, accumulate=True)):
            with pytest.raises(lt.NotCoveredError):
                fn()


def test_bf16_parameters_keep_an_f32_master():
    torch.manual_seed(10)
    a = torch.nn.Parameter(torch.randn(4, 6))
    b = torch.nn.Parameter(a.detach().to(torch.bfloat16))
    oa, ob = lt.optim.AdamW([a], lr=1e-2), lt.optim.AdamW([b], lr=1e-2)
    for _ in range(3):
        g = torch.randn(4, 6)
        a.grad, b.grad = g.clone(), g.to(torch.bfloat16)
        oa.step()
        ob.step()
    master = ob.state[b]["master"]
    assert master.dtype == torch.float32
    assert torch.equal(b.detach(), master.to(torch.bfloat16))
    assert torch.allclose(master, a.detach(), rtol=1e-2, atol=1e-2)
