"""One training step of a Llama-shaped model (about 134M parameters by
default: 12 layers, hidden 768, vocabulary 32000; random init, no
download) in Lockstep's exact mode against stock PyTorch, on CUDA:
forward, backward and the AdamW step timed apart (median of --steps after
--warmup), the speed ratio stock / exact printed with the phase that
dominates the exact step.

    python3 python/tools/bench_train.py [--device cuda] [--small]

--small runs a tiny model (a smoke test, e.g. on a CPU)."""

import argparse
import contextlib
import statistics
import time

import torch

import lockstep.torch as lt


def build(small, device):
    from transformers import LlamaConfig, LlamaForCausalLM
    if small:
        cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                          attn_implementation="eager", tie_word_embeddings=False)
    else:
        cfg = LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                          num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                          max_position_embeddings=2048, attn_implementation="eager",
                          tie_word_embeddings=False)
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).eval().to(device), cfg.vocab_size


def loss_fn(logits, ids, vocab):
    lp = torch.log_softmax(logits[:, :-1].float().reshape(-1, vocab), -1)
    oh = (torch.arange(vocab, device=ids.device) == ids[:, 1:].reshape(-1, 1)).float()
    return -(lp * oh).sum(-1).mean()


def sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run(mode, args):
    model, vocab = build(args.small, args.device)
    ids = torch.randint(0, vocab, (args.batch, args.seq), generator=torch.Generator()
                        .manual_seed(1)).to(args.device)
    if mode == "exact":
        opt = lt.optim.AdamW(model.parameters(), lr=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    times = {"forward": [], "backward": [], "optimizer": []}
    for i in range(args.warmup + args.steps):
        opt.zero_grad(set_to_none=True)
        ctx = lt.exact() if mode == "exact" else contextlib.nullcontext()
        sync(args.device)
        t0 = time.perf_counter()
        with ctx:
            loss = loss_fn(model(input_ids=ids).logits, ids, vocab)
            sync(args.device)
            t1 = time.perf_counter()
            loss.backward()
            sync(args.device)
        t2 = time.perf_counter()
        opt.step()
        sync(args.device)
        t3 = time.perf_counter()
        if i >= args.warmup:
            times["forward"].append(t1 - t0)
            times["backward"].append(t2 - t1)
            times["optimizer"].append(t3 - t2)
    nparam = sum(p.numel() for p in model.parameters())
    med = {k: statistics.median(v) for k, v in times.items()}
    return nparam, med, float(loss.detach())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    if args.small:
        args.seq = min(args.seq, 32)
    res = {}
    for mode in ("stock", "exact"):
        res[mode] = run(mode, args)
        n, med, loss = res[mode]
        print(f"{mode:5s}  {n / 1e6:.1f}M params, batch {args.batch} x {args.seq} on "
              f"{args.device}: forward {med['forward'] * 1e3:.1f} ms, backward "
              f"{med['backward'] * 1e3:.1f} ms, optimizer {med['optimizer'] * 1e3:.1f} ms, "
              f"step {sum(med.values()) * 1e3:.1f} ms (loss {loss:.4f})")
    s, e = sum(res["stock"][1].values()), sum(res["exact"][1].values())
    dom = max(res["exact"][1], key=res["exact"][1].get)
    print(f"ratio: exact runs at {s / e:.2f}x stock PyTorch's speed (target >= 0.7); "
          f"the exact step is dominated by {dom} "
          f"({res['exact'][1][dom] / e * 100:.0f} %, stock: "
          f"{res['stock'][1][dom] / s * 100:.0f} %)")


if __name__ == "__main__":
    main()
