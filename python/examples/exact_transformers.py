"""transformers causal LMs in Lockstep's exact mode: the same logits bits on
CPU and CUDA, alone or inside a padded batch.

    PYTHONPATH=python python3 python/examples/exact_transformers.py [--devices cpu,cuda]

Builds small GPT-2 and Llama-style models from configs with random
weights (seeded; nothing is downloaded), runs 8 sequences of different
lengths one at a time and as one right-padded batch with an attention
mask (padded on the right, then on the left), in f32 and bf16, inside
lockstep.torch.exact() on each device, and prints a digest (SHA-256 of the logits' bytes of the real tokens) per
run.  Exit status 1 if any digest differs from the first device's
batch-1 one.  The same models outside exact mode are printed for contrast
(their digests usually differ between devices and batch sizes)."""

import argparse
import hashlib
import sys

import torch

import lockstep.torch as lt

VOCAB = 512


def build(kind, dtype):
    import transformers
    transformers.logging.set_verbosity_error()
    torch.manual_seed(1234)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=128, n_layer=2, n_head=4,
                                      n_positions=128, bos_token_id=0, eos_token_id=0,
                                      attn_implementation="sdpa")
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                                       num_hidden_layers=2, num_attention_heads=8,
                                       num_key_value_heads=2, max_position_embeddings=128,
                                       bos_token_id=0, eos_token_id=0, pad_token_id=0,
                                       attn_implementation="sdpa")
        model = transformers.LlamaForCausalLM(cfg)
    return model.eval().to(dtype)


def sequences(n=8, seed=7):
    g = torch.Generator().manual_seed(seed)
    lens = [5 + (3 * i) % 11 for i in range(n)]
    return [torch.randint(1, VOCAB, (L,), generator=g) for L in lens]


def logits_bytes(model, seqs, device, batch, exact):
    """The logits of every real token of every sequence, concatenated.
    batch: "1" (one sequence at a time), "8R" or "8L" (all of them in one
    batch, padded on the right or on the left, with an attention mask and
    the positions of the real tokens)."""
    out = []
    ctx = lt.exact() if exact else torch.no_grad()
    with torch.no_grad(), ctx:
        if batch == "1":
            for s in seqs:
                lg = model(input_ids=s[None].to(device)).logits
                out.append(lg[0].float().cpu())
            return torch.cat(out)
        L = max(len(s) for s in seqs)
        ids = torch.zeros(len(seqs), L, dtype=torch.long)
        mask = torch.zeros(len(seqs), L, dtype=torch.long)
        pos = torch.zeros(len(seqs), L, dtype=torch.long)
        spans = []
        for i, s in enumerate(seqs):
            a = 0 if batch == "8R" else L - len(s)
            ids[i, a:a + len(s)] = s
            mask[i, a:a + len(s)] = 1
            pos[i, a:a + len(s)] = torch.arange(len(s))
            spans.append((a, a + len(s)))
        lg = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                   position_ids=pos.to(device)).logits
        for i, (a, b) in enumerate(spans):
            out.append(lg[i, a:b].float().cpu())
    return torch.cat(out)


def digest(t):
    return hashlib.sha256(t.contiguous().view(torch.int32).numpy().tobytes()).hexdigest()[:16]


BATCHES = ("1", "8R", "8L")


def run(kinds, dtypes, devices, log=print):
    """{(kind, dtype, exact, device, batch): (digest, logits)}; prints a table."""
    res = {}
    seqs = sequences()
    for kind in kinds:
        for dtype in dtypes:
            model = build(kind, dtype)
            for device in devices:
                model.to(device)
                for exact in (True, False):
                    for batch in BATCHES:
                        lg = logits_bytes(model, seqs, device, batch, exact)
                        res[(kind, str(dtype).split(".")[-1], exact, device, batch)] = \
                            (digest(lg), lg)
            model.to("cpu")
    log(f"{'model':6} {'dtype':9} {'mode':6} {'device':7} {'batch 1':17} "
        f"{'batch 8, right':17} {'batch 8, left':17}")
    for (kind, dt, exact, dev, batch), (d, _) in res.items():
        if batch != "1":
            continue
        dr = res[(kind, dt, exact, dev, "8R")][0]
        dl = res[(kind, dt, exact, dev, "8L")][0]
        log(f"{kind:6} {dt:9} {'exact' if exact else 'stock':6} {dev:7} {d:17} {dr:17} {dl:17}")
    return res


def check(res):
    """The exact runs' mismatches: [(key, reference key)]."""
    bad = []
    refs = {}
    for key, (d, _) in res.items():
        kind, dt, exact, dev, batch = key
        if not exact:
            continue
        ref = refs.setdefault((kind, dt), (key, d))
        if d != ref[1]:
            bad.append((key, ref[0]))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="cpu,cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--models", default="gpt2,llama")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    a = ap.parse_args()
    res = run(a.models.split(","), [getattr(torch, d) for d in a.dtypes.split(",")],
              a.devices.split(","))
    bad = check(res)
    for key, ref in bad:
        print(f"DIFFERS: {key} from {ref}")
    print("exact mode: identical logits on " + a.devices + " at batch 1 and 8 (both paddings)"
          if not bad else f"exact mode: {len(bad)} runs differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
