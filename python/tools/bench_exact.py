"""Exact mode against stock PyTorch on a GPU: a Llama-style causal LM of
about 1.2 B parameters (Llama 3.2 1B's shapes, random weights, bf16),
batch-1 decode and a 512-token prefill.  Not a test: it prints times, the
ratio (exact mode's speed / stock's; target >= 0.85) and the floors:
decode, the weights' bytes over the HBM bandwidth; prefill, the flops over
the bf16 tensor-core peak.

    PYTHONPATH=python python3 python/tools/bench_exact.py [--quick]

--hbm-gbs and --peak-tflops set the floors' figures (default: an H200's
4800 GB/s and 989 dense bf16 TFLOP/s).  --layers makes the model smaller;
--device cpu --tiny is a trial run of the script on a toy model."""

import argparse
import time

import torch

import lockstep.torch as lt


def build(layers, device, tiny=False):
    import transformers
    transformers.logging.set_verbosity_error()
    dims = dict(vocab_size=1024, hidden_size=128, intermediate_size=256) if tiny else \
        dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192)
    cfg = transformers.LlamaConfig(
        **dims, num_hidden_layers=layers, num_attention_heads=32 if not tiny else 4,
        num_key_value_heads=8 if not tiny else 2,
        max_position_embeddings=4096, rope_theta=500000.0, tie_word_embeddings=True,
        attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return model, cfg


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, reps):
    fn()                                   # warm-up (allocations, caches)
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def decode_steps(model, ids, steps):
    """The prompt ids in the cache, then steps decode steps."""
    def run():
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            tok = out.logits[:, -1:].argmax(-1)
            t0 = time.perf_counter()
            for _ in range(steps):
                out = model(input_ids=tok, past_key_values=past, use_cache=True)
                past = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
            sync()
            return time.perf_counter() - t0
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer steps and repetitions")
    ap.add_argument("--hbm-gbs", type=float, default=4800.0)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--device", default="cuda", help="cpu: a trial run of the script itself")
    ap.add_argument("--tiny", action="store_true", help="a toy model (a trial run)")
    a = ap.parse_args()
    if a.quick:
        a.steps, a.reps = 16, 2
    if a.device == "cuda" and not torch.cuda.is_available():
        print("bench_exact: no CUDA device, nothing to measure")
        return 0
    dev = a.device
    model, cfg = build(a.layers, dev, a.tiny)
    n_params = sum(p.numel() for p in model.parameters())
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    print(f"model: Llama-style, {a.layers} layers, {n_params / 1e9:.2f} B parameters, "
          f"bf16 ({wbytes / 1e9:.2f} GB), "
          f"{torch.cuda.get_device_name() if dev == 'cuda' else 'cpu'}")
    ids = torch.randint(0, cfg.vocab_size, (1, a.prefill), device=dev)
    prompt = torch.randint(0, cfg.vocab_size, (1, 64), device=dev)

    def prefill():
        with torch.no_grad():
            model(input_ids=ids, use_cache=False)

    rows = []
    for label, make in (("stock", lambda: torch.no_grad()), ("exact", lambda: lt.exact())):
        with make():
            tp = timed(prefill, a.reps)
            run = decode_steps(model, prompt, a.steps)
            run()
            td = min(run() for _ in range(a.reps)) / a.steps
        rows.append((label, tp, td))
        print(f"{label}: prefill {a.prefill} tokens {tp * 1e3:.1f} ms, "
              f"decode {td * 1e3:.2f} ms/token ({1 / td:.1f} tok/s)")
    (_, sp, sd), (_, ep, ed) = rows
    floor_d = wbytes / (a.hbm_gbs * 1e9)
    floor_p = 2 * n_params * a.prefill / (a.peak_tflops * 1e12)
    print()
    print(f"{'':8} {'stock':>10} {'exact':>10} {'ratio':>7} {'floor':>10}")
    print(f"{'prefill':8} {sp * 1e3:8.1f}ms {ep * 1e3:8.1f}ms {sp / ep:7.2f} "
          f"{floor_p * 1e3:8.2f}ms")
    print(f"{'decode':8} {sd * 1e3:8.2f}ms {ed * 1e3:8.2f}ms {sd / ed:7.2f} "
          f"{floor_d * 1e3:8.2f}ms")
    print(f"ratio = stock time / exact time (target >= 0.85): prefill {sp / ep:.2f}, "
          f"decode {sd / ed:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
