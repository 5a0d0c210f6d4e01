"""lockstep.torch.cross_check: a PyTorch function (or model) in exact mode
on several devices, its outputs compared bit for bit."""

import torch

from .._check import CrossCheck, Mismatch
from .._device import device as _find_device, devices as _devices

_UINT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _move(x, dev):
    if isinstance(x, torch.Tensor):
        return x.to(dev)
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_move(v, dev) for v in x)
    if isinstance(x, dict):
        return type(x)((k, _move(v, dev)) for k, v in x.items())
    return x


def _tensors(out):
    """The tensors of an output, in order (tuples, lists, dicts and
    transformers' ModelOutput walked; other objects skipped)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _tensors(v)]
    return []


def _bits(t):
    t = t.detach().to("cpu").contiguous()
    return t.view(_UINT[t.element_size()]).reshape(-1)


def _default_devices():
    out = ["cpu"]
    if torch.cuda.is_available():
        have = set(_devices())
        out += [f"cuda:{i}" for i in range(torch.cuda.device_count()) if f"cuda:{i}" in have]
    return out


def cross_check(fn, *args, devices=None, strict=False, exact=True, tc="sm90", **kwargs):
    """Run fn(*args, **kwargs) inside exact() with every tensor argument on
    each device, and compare every output tensor's bits with the first
    device's.  devices: PyTorch devices ("cpu", "cuda:0", ...) or Lockstep
    host devices ("ref", "cpu:avx2": CPU tensors run by that device);
    default "cpu" and each CUDA GPU that both PyTorch and Lockstep see.
    An nn.Module fn is moved along (and back).  exact=False runs stock
    PyTorch instead (for contrast).  Returns a lockstep.CrossCheck;
    strict=True raises lockstep.Mismatch on a difference."""
    from . import exact as _exact
    names = list(devices) if devices is not None else _default_devices()
    r = CrossCheck()
    ref = None
    home = None
    if isinstance(fn, torch.nn.Module):
        p = next(fn.parameters(), None)
        home = p.device if p is not None else None
    try:
        for name in names:
            tdev, host = (name, "cpu") if str(name).startswith("cuda") or name == "cpu" \
                else ("cpu", name)
            if host != "cpu":
                _find_device(host)                  # NoDeviceError for a bad name
            if isinstance(fn, torch.nn.Module):
                fn.to(tdev)
            a, kw = _move(args, tdev), _move(kwargs, tdev)
            if exact:
                with torch.no_grad(), _exact(tc=tc, host_device=host):
                    out = fn(*a, **kw)
            else:
                with torch.no_grad():
                    out = fn(*a, **kw)
            snaps = [(_bits(t), tuple(t.shape)) for t in _tensors(out)]
            r.ran.append(str(name))
            r.outputs[str(name)] = [s[0].numpy().tobytes() for s in snaps]
            if ref is None:
                ref = snaps
                continue
            for k, ((want, shape), (got, _)) in enumerate(zip(ref, snaps)):
                if want.shape != got.shape:
                    r.mismatches.append((str(name), k, 0, (), f"shape {shape}",
                                         f"{got.numel()} elements"))
                    continue
                diff = (want != got).nonzero()
                if diff.numel():
                    e = int(diff[0])
                    idx = tuple(int(i) for i in torch.unravel_index(torch.tensor(e), shape)) \
                        if shape else ()
                    w = int(want[e]) & ((1 << (8 * want.element_size())) - 1)
                    g = int(got[e]) & ((1 << (8 * got.element_size())) - 1)
                    r.mismatches.append((str(name), k, e, idx, hex(w), hex(g)))
    finally:
        if home is not None:
            fn.to(home)
    if strict and not r.identical:
        raise Mismatch(str(r))
    return r
