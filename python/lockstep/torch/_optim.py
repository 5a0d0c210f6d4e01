"""lockstep.torch.optim: SGD and AdamW whose steps are Lockstep calls
(lk_sgd_step, lk_adamw_step: docs/numerics.md section 13.5), so the same
gradients give the same weights on CPU and CUDA.  They take the
arguments of torch.optim.SGD and torch.optim.AdamW (amsgrad, maximize,
foreach, fused and capturable are not offered); the state is f32, the
gradients f32, bf16 or f16; bf16 and f16 parameters get an f32 master
copy in the state (state["master"]) that the step updates and rounds back
into the parameter.

This module also loads the rest of the training support: the exact
backward ops (_backward) and BitLinear."""

import ctypes
import sys
import types

import torch

from ..errors import BadDtypeError, BadLeadingDimError
from ._call import lk_tensor, queue_for, run
from .._lib import lib
from . import _backward  # noqa: F401 (registers the backward ops)
from .bitlinear import BitLinear, bitlinear_swap


def _host():
    from ._mode import current
    from .._device import device
    m = current()
    return m.host_device if m is not None else device("cpu")


def _flat(t, what):
    """t as a 1 x numel lk_tensor (contiguous tensors only)."""
    if not t.is_contiguous():
        raise BadLeadingDimError(4, f"{what}: a contiguous tensor is required")
    return lk_tensor(t.view(1, -1), what)[0]


def _master(p, st, opt):
    """The f32 tensor the step updates: p itself, or for a bf16/f16
    parameter an f32 master copy kept in the state (made from p on the
    first step; after each step p receives it rounded to nearest even,
    the same conversion on every device)."""
    if p.dtype == torch.float32:
        return p
    if p.dtype not in (torch.bfloat16, torch.float16):
        raise BadDtypeError(6, f"{opt}: parameters must be f32, bf16 or f16, not {p.dtype}")
    m = st.get("master")
    if m is None:
        m = st["master"] = p.detach().float()
    return m


def _write_back(p, master):
    if master is not p:
        p.copy_(master)


class SGD(torch.optim.Optimizer):
    """torch.optim.SGD's step (momentum, dampening, weight decay,
    Nesterov) as lk_sgd_step."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: lr {lr}, momentum {momentum}, weight_decay {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum needs a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                w = _master(p, st, "SGD")
                buf = st.get("momentum_buffer")
                first = False
                if g["momentum"] != 0 and buf is None:
                    buf = st["momentum_buffer"] = torch.empty_like(w)
                    first = True
                flags = (1 if g["nesterov"] else 0) | (2 if first else 0)
                lb = None if buf is None or g["momentum"] == 0 else ctypes.byref(
                    _flat(buf, "SGD: momentum_buffer"))
                run(lib.lk_sgd_step, queue_for(p.device, _host()),
                    ctypes.byref(_flat(w, "SGD: param")),
                    ctypes.byref(_flat(p.grad, "SGD: grad")), lb, float(g["lr"]),
                    float(g["momentum"]), float(g["dampening"]), float(g["weight_decay"]),
                    flags)
                _write_back(p, w)
        return loss


class AdamW(torch.optim.Optimizer):
    """torch.optim.AdamW's step (decoupled weight decay, bias corrections)
    as lk_adamw_step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"AdamW: betas {betas} are not in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            b1, b2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                w = _master(p, st, "AdamW")
                if "step" not in st:
                    st["step"] = 0
                    st["exp_avg"] = torch.zeros_like(w)
                    st["exp_avg_sq"] = torch.zeros_like(w)
                st["step"] += 1
                run(lib.lk_adamw_step, queue_for(p.device, _host()),
                    ctypes.byref(_flat(w, "AdamW: param")),
                    ctypes.byref(_flat(p.grad, "AdamW: grad")),
                    ctypes.byref(_flat(st["exp_avg"], "AdamW: exp_avg")),
                    ctypes.byref(_flat(st["exp_avg_sq"], "AdamW: exp_avg_sq")),
                    float(g["lr"]), float(b1), float(b2), float(g["eps"]),
                    float(g["weight_decay"]), int(st["step"]))
                _write_back(p, w)
        return loss


def _declare():
    from .. import train_ops  # noqa: F401 (declares the C prototypes)


_declare()

# lockstep.torch.optim, importable as a module
optim = types.ModuleType("lockstep.torch.optim", "Exact optimizers: SGD and AdamW "
                         "(lockstep.torch._optim).")
optim.SGD, optim.AdamW = SGD, AdamW
sys.modules.setdefault("lockstep.torch.optim", optim)

__all__ = ["SGD", "AdamW", "optim", "BitLinear", "bitlinear_swap"]
