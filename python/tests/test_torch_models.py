"""transformers causal LMs (GPT-2 and Llama-style, random weights, built
from configs: nothing downloaded) in exact mode: the same logits bits for
each sequence alone and inside a batch of 8 padded on the right or on the
left, and on a GPU the
same bits from CUDA as from the CPU.  The stock model's digests are
printed for contrast (pytest -s shows them)."""

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
pytest.importorskip("transformers", reason="transformers is not installed")
pytest.importorskip("lockstep.torch", reason="lockstep.torch needs PyTorch")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import exact_transformers as ex  # noqa: E402


def _devices():
    if torch.cuda.is_available():
        import lockstep
        if "cuda:0" in lockstep.devices():
            return ["cpu", "cuda"]
    return ["cpu"]


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_model_logits_identical(kind):
    devs = _devices()
    res = ex.run([kind], [torch.float32, torch.bfloat16], devs)
    bad = ex.check(res)
    assert not bad, f"exact-mode digests differ: {bad}"
    # at least one device and batch size was run per dtype and mode
    assert len(res) == 2 * len(devs) * 2 * len(ex.BATCHES)
    if len(devs) == 1:
        print("CUDA part skipped: PyTorch or Lockstep sees no CUDA device")


def test_model_exact_close_to_stock():
    """Exact mode computes the same function: its logits are close to
    PyTorch's own (f32)."""
    res = ex.run(["llama"], [torch.float32], ["cpu"], log=lambda *a: None)
    e = res[("llama", "float32", True, "cpu", "1")][1]
    s = res[("llama", "float32", False, "cpu", "1")][1]
    assert float((e - s).abs().max()) < 1e-3


def test_model_cross_check_host_devices():
    """The reference device gives the CPU driver's bits for a whole model."""
    import lockstep.torch as lt
    model = ex.build("llama", torch.bfloat16)
    ids = ex.sequences()[0][None]
    devs = ["cpu", "ref"] + (["cuda:0"] if _devices() == ["cpu", "cuda"] else [])
    r = lt.cross_check(model, input_ids=ids, devices=devs)
    assert r.identical and r.ran == devs, str(r)


def test_generate_left_padded_batch_equals_alone():
    """transformers' generate() in exact mode: a left-padded batch picks
    the tokens each prompt picks alone (greedy, bf16)."""
    import lockstep.torch as lt
    model = ex.build("llama", torch.bfloat16)
    seqs = ex.sequences()[:3]
    L = max(len(s) for s in seqs)
    ids = torch.zeros(3, L, dtype=torch.long)
    mask = torch.zeros(3, L, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, L - len(s):] = s
        mask[i, L - len(s):] = 1
    kw = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    with lt.exact():
        batch = model.generate(input_ids=ids, attention_mask=mask, **kw)[:, -4:].tolist()
        alone = [model.generate(input_ids=s[None], attention_mask=torch.ones(1, len(s),
                                dtype=torch.long), **kw)[0, -4:].tolist() for s in seqs]
    assert batch == alone
