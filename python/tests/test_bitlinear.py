"""lockstep.torch.BitLinear: the training forward is exactly the deployed
layer's (lk_quantize_act + lk_ternary_gemm on the packed weights), bit for
bit; the packed weights round-trip (pack(unpack(w)) == w, the values those
of PyTorch's own absmean quantisation); straight-through gradients match
a PyTorch reference closely; on a GPU host forward and backward are the
same bits on CPU and CUDA; bitlinear_swap swaps a model's nn.Linear
layers and the model still trains in exact mode."""

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
import lockstep  # noqa: E402
import lockstep.torch as lt  # noqa: E402
from lockstep.torch import bitlinear as bl  # noqa: E402


def _cuda_ok():
    if not torch.cuda.is_available():
        return "no CUDA device for PyTorch"
    if not any(lockstep.device(n).kind == "gpu" for n in lockstep.devices()):
        return "Lockstep has no CUDA device (LOCKSTEP_DRIVER_PATH unset?)"
    return None


def _layer(seed=3, k=70, n=24, bias=True):
    torch.manual_seed(seed)
    return lt.BitLinear(k, n, bias=bias)


def _run(layer, x, gy):
    """(y, grad_x, grad_w, grad_b) of one forward and backward."""
    x = x.clone().requires_grad_(True)
    layer.zero_grad(set_to_none=True)
    y = layer(x)
    y.backward(gy)
    return (y.detach(), x.grad, layer.weight.grad,
            None if layer.bias is None else layer.bias.grad)


def _bits(t):
    t = t.detach().cpu().contiguous()
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


def test_deployed_equals_training_forward():
    layer = _layer()
    torch.manual_seed(4)
    x = torch.randn(2, 9, 70)
    with torch.no_grad():
        y_train = layer(x)
    layer.deploy()
    assert layer.deployed and "weight" not in dict(layer.named_parameters())
    y_dep = layer(x)
    assert torch.equal(_bits(y_train), _bits(y_dep))


def test_packed_weights_round_trip():
    layer = _layer(k=37, n=5)  # K not a multiple of 4: padded bytes
    packed, scale = bl.quantize_weight(layer.weight)
    vals = bl.unpack_weight(packed, 37)
    assert set(vals.unique().tolist()) <= {-1, 0, 1}
    assert torch.equal(bl.pack_weight(vals), packed)
    m = layer.weight.detach().abs().mean().clamp_min(1e-5)
    want = (layer.weight.detach() / scale).round().clamp(-1, 1).to(torch.int8)
    assert torch.equal(vals, want)
    assert abs(float(scale) - float(m)) <= 1e-6 * float(m)


def test_ste_gradients_close_to_reference():
    layer = _layer()
    torch.manual_seed(5)
    x = torch.randn(6, 70)
    gy = torch.randn(6, 24)
    y, gx, gw, gb = _run(layer, x, gy)
    # the BitNet formulation with .detach() (PyTorch arithmetic)
    w = layer.weight.detach().clone().requires_grad_(True)
    b = layer.bias.detach().clone().requires_grad_(True)
    xr = x.clone().requires_grad_(True)
    m = w.abs().mean().clamp_min(1e-5)
    wq = w + ((w / m).round().clamp(-1, 1) * m - w).detach()
    s = 127.0 / xr.abs().amax(-1, keepdim=True).clamp_min(1e-5)
    xq = xr + ((xr * s).round().clamp(-128, 127) / s - xr).detach()
    yr = torch.nn.functional.linear(xq, wq, b)
    yr.backward(gy)
    assert torch.allclose(y, yr.detach(), rtol=1e-4, atol=1e-4)
    assert torch.allclose(gx, xr.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(gw, w.grad, rtol=1e-4, atol=1e-5)
    assert torch.allclose(gb, b.grad, rtol=1e-5, atol=1e-6)


def test_bitlinear_same_bits_in_and_out_of_exact_mode():
    layer = _layer()
    torch.manual_seed(6)
    x, gy = torch.randn(4, 70), torch.randn(4, 24)
    a = _run(layer, x, gy)
    with lt.exact():
        b = _run(layer, x, gy)
    for u, v in zip(a, b):
        assert torch.equal(_bits(u), _bits(v))


@pytest.mark.skipif(_cuda_ok() is not None, reason=str(_cuda_ok()))
def test_bitlinear_cuda_equals_cpu():
    layer = _layer(k=300, n=130)
    torch.manual_seed(7)
    x, gy = torch.randn(33, 300), torch.randn(33, 130)
    c = _run(layer, x, gy)
    g = _run(layer.to("cuda"), x.to("cuda"), gy.to("cuda"))
    names = ("forward", "grad_x", "grad_w", "grad_b")
    for name, u, v in zip(names, c, g):
        same = torch.equal(_bits(u), _bits(v))
        print(f"BitLinear {name}: CPU == CUDA: {same}")
        assert same, name
    layer.deploy()
    yd = layer(x.to("cuda"))
    print(f"BitLinear deployed on CUDA == training forward on CPU: "
          f"{torch.equal(_bits(yd), _bits(c[0]))}")
    assert torch.equal(_bits(yd), _bits(c[0]))


def test_bitlinear_swap_trains():
    tf = pytest.importorskip("transformers", reason="transformers is not installed")
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         attn_implementation="eager", tie_word_embeddings=False)
    torch.manual_seed(8)
    model = tf.LlamaForCausalLM(cfg).eval()
    n = lt.bitlinear_swap(model)
    assert n == 7  # q, k, v, o, gate, up, down; lm_head stays
    opt = lt.optim.AdamW(model.parameters(), lr=1e-2)
    ids = torch.randint(0, 64, (2, 10))
    before = model.model.layers[0].mlp.up_proj.weight.detach().clone()
    with lt.exact():
        out = model(input_ids=ids).logits
        loss = torch.log_softmax(out.reshape(-1, 64), -1).mean().neg()
        loss.backward()
    opt.step()
    assert not torch.equal(before, model.model.layers[0].mlp.up_proj.weight)
