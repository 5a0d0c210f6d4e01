"""scaled_dot_product_attention as one lk_attention call.

Covered: q (B, H, S, D), k and v (B, Hkv, L, D) of one float dtype (3-D
without B too), Hkv dividing H (enable_gqa, or Hkv == H), dropout_p 0, and
a mask that lets every query row see one window of the keys: no mask (every
key), is_causal (query i sees keys 0..i, PyTorch's top-left alignment), or
a bool mask (True: attend) or additive float mask (0: attend; finfo.min or
-inf: masked) of shape (B or 1, 1, S or 1, L) whose rows each see one
window of keys that starts where the sequence's other rows start --
causal masks with right or left padding do (left padding: one call per
sequence, its keys read from the first unpadded row).  Sliding windows,
per-head masks and biases (ALiBi) raise NotCoveredError.  A row that sees
no key gives +0.

Layout: q, k and v are read head-major ((B, H, S, D) contiguous, made so
with an exact copy when they are not); the g = H / Hkv query heads of one
kv head are g * S rows of one sequence of the batch of B * Hkv that
lk_attention computes (n_head = n_kv = 1), so one call covers every head.
The scale defaults to 1 / sqrt(D) in double, rounded once to f32.

A mask's windows are checked once per mask (a host read on CUDA),
then kept while the mask's memory lives unchanged: a model's layers share
the mask of one forward pass, each through a view of its own."""

import math
import weakref

import torch
import torch.nn.functional as F

from ..errors import BadDtypeError, BadShapeError, InvalidArgumentError
from ._call import LK_DTYPE, LkTensor, empty, float_arg, lib, queue, ref, run, same_device
from ._mode import function
from ._registry import NotCoveredError

OP = "scaled_dot_product_attention"
_I32 = 5
_mask_cache = {}     # (memory, layout, shapes) -> (weakref to the base, version, positions)
_shared_cache = {}   # (device, S, L, causal, g) -> positions


def _positions_from_mask(mask, B, S, L, dev):
    m = mask
    while m.dim() < 4:
        m = m.unsqueeze(0)
    mb, mh, ms, ml = m.shape
    if ml != L or ms not in (1, S) or mb not in (1, B):
        raise BadShapeError(3, f"{OP}: attn_mask: shape {tuple(mask.shape)} does not broadcast "
                            f"to ({B}, heads, {S}, {L})")
    if mh != 1:
        raise NotCoveredError(OP, f"attn_mask: a mask per head (shape {tuple(mask.shape)})")
    m = m[:, 0].expand(mb, S, L)
    if m.dtype == torch.bool:
        allowed = m
        bad_values = None
    elif m.is_floating_point():
        allowed = m == 0
        bad_values = (~allowed) & (m > torch.finfo(m.dtype).min)
    else:
        raise BadDtypeError(6, f"{OP}: attn_mask: dtype {m.dtype} (bool or float)")
    # every query row must see one window of keys, [start, start + count),
    # with one start per sequence (0 for right padding, the padding's
    # length for left padding); rows that see no key give +0
    idx = torch.arange(L, device=dev)
    count = allowed.sum(-1)                                      # (mb, S)
    first = torch.where(allowed, idx, L).amin(-1)                # (mb, S), L: none
    start = torch.where(count > 0, first, L).amin(-1)            # (mb,)
    want = (idx >= start.view(mb, 1, 1)) & (idx < (start.view(mb, 1) + count).unsqueeze(-1))
    bad = (want != allowed).any()
    if bad_values is not None:
        bad = bad | bad_values.any()
    host = torch.cat([bad.view(1).long(), start]).tolist()      # one host read
    if host[0]:
        raise NotCoveredError(OP, "attn_mask: a query row sees keys that are not one window "
                              "starting where its sequence's other rows start (a sliding "
                              "window, holes) or has additive values other than 0 and "
                              "-inf/finfo.min")
    starts = tuple(0 if v >= L else v for v in host[1:])
    return (count - 1).to(torch.int32), (starts if any(starts) else None)


def _positions(mask, is_causal, B, S, L, dev):
    """(positions, per_sequence, starts): i32 positions (S,) shared by
    the batch, or (B, S) per sequence; starts: the first key row of each
    sequence (None: all 0)."""
    if mask is None:
        key = (str(dev), S, L, bool(is_causal))
        p = _shared_cache.get(key)
        if p is None:
            if is_causal:
                p = torch.arange(S, dtype=torch.int32, device=dev)
            else:
                p = torch.full((S,), L - 1, dtype=torch.int32, device=dev)
            if len(_shared_cache) > 64:
                _shared_cache.clear()
            _shared_cache[key] = p
        return p, False, None
    if is_causal:
        raise InvalidArgumentError(2, f"{OP}: attn_mask and is_causal are both set")
    # views of one mask (each layer slices it anew) share its base and
    # version counter: the same memory, shape, strides and version are
    # the same contents while the base lives
    base = mask._base if mask._base is not None else mask
    key = (mask.data_ptr(), tuple(mask.shape), tuple(mask.stride()), mask.dtype, B, S, L,
           str(dev))
    hit = _mask_cache.get(key)
    if hit is not None and hit[0]() is base and hit[1] == mask._version:
        p, starts = hit[2]
    else:
        p, starts = _positions_from_mask(mask, B, S, L, dev)
        if len(_mask_cache) > 16:
            _mask_cache.clear()
        _mask_cache[key] = (weakref.ref(base), mask._version, (p, starts))
    if p.shape[0] == 1:
        return p[0], False, (None if starts is None else starts * B)
    return p, True, starts


def _repeated(pos, g):
    """pos repeated g times (one column for the g query heads of a kv
    head), kept with the shared positions it was made from."""
    if g == 1:
        return pos
    key = (pos.data_ptr(), pos.shape[0], g, str(pos.device))
    p = _shared_cache.get(key)
    if p is None or p[0]() is not pos:
        if len(_shared_cache) > 64:
            _shared_cache.clear()
        p = (weakref.ref(pos), pos.repeat(g))
        _shared_cache[key] = p
    return p[1]


def _needs_grad(*ts):
    return torch.is_grad_enabled() and any(t.requires_grad for t in ts
                                           if isinstance(t, torch.Tensor))


@function(F, "scaled_dot_product_attention")
def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
         enable_gqa=False):
    if _needs_grad(query, key, value, attn_mask):
        raise NotCoveredError(OP, "a gradient through attention (inference only)")
    if dropout_p != 0.0:
        raise NotCoveredError(OP, f"dropout_p={dropout_p}")
    for name, t in (("query", query), ("key", key), ("value", value)):
        float_arg(t, OP, name)
    dev = same_device(OP, query=query, key=key, value=value, attn_mask=attn_mask)
    if key.dtype != query.dtype or value.dtype != query.dtype:
        raise BadDtypeError(6, f"{OP}: key/value dtype {key.dtype}/{value.dtype}, query "
                            f"{query.dtype}")
    squeeze = query.dim() == 3
    q, k, v = (t.unsqueeze(0) if t.dim() == 3 else t for t in (query, key, value))
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise NotCoveredError(OP, f"query {query.dim()}-D (3-D and 4-D are covered)")
    B, H, S, D = q.shape
    Bk, Hk, L, Dk = k.shape
    if tuple(v.shape) != tuple(k.shape):
        raise NotCoveredError(OP, f"value: shape {tuple(value.shape)} differs from key "
                              f"{tuple(key.shape)} (a head size of its own is not covered)")
    if Bk != B or Dk != D:
        raise BadShapeError(3, f"{OP}: key: shape {tuple(key.shape)} does not match query "
                            f"{tuple(query.shape)}")
    if Hk == 0 or H % Hk or (Hk != H and not enable_gqa):
        raise BadShapeError(3, f"{OP}: key: {Hk} heads for {H} query heads"
                            + ("" if enable_gqa else " (enable_gqa=False)"))
    g = H // Hk
    pos, per_seq, starts = _positions(attn_mask, is_causal, B, S, L, dev)
    code = LK_DTYPE[q.dtype]
    qc, kc, vc = q.contiguous(), k.contiguous(), v.contiguous()
    out = empty((B, H, S, D), q.dtype, dev)
    rows = g * S
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    qh = queue(dev)
    if starts is None:
        lq = LkTensor(qc.data_ptr(), code, rows, D, D, rows * D)
        lk = LkTensor(kc.data_ptr(), code, L, D, D, L * D)
        lv = LkTensor(vc.data_ptr(), code, L, D, D, L * D)
        lo = LkTensor(out.data_ptr(), code, rows, D, D, rows * D)
        if per_seq:
            # one column of g * S positions per (sequence, kv head)
            pr = pos.view(B, 1, 1, S).expand(B, Hk, g, S).contiguous()
            lp = LkTensor(pr.data_ptr(), _I32, rows, 1, 1, rows)
        else:
            pr = _repeated(pos, g)
            lp = LkTensor(pr.data_ptr(), _I32, rows, 1, 1, 0)
        run(lib.lk_attention, qh, ref(lq), ref(lk), ref(lv), ref(lp), 1, 1, float(scale),
            ref(lo), B * Hk)
    else:
        # sequences whose keys start later (left padding): one call per
        # sequence, its k and v read from its first key row on
        es = q.element_size()
        prs = [pos[b].repeat(g) if per_seq else _repeated(pos, g) for b in range(B)]
        for b in range(B):
            s0 = starts[b]
            qo, ko = b * Hk * rows * D * es, (b * Hk * L + s0) * D * es
            lq = LkTensor(qc.data_ptr() + qo, code, rows, D, D, rows * D)
            lk = LkTensor(kc.data_ptr() + ko, code, L - s0, D, D, L * D)
            lv = LkTensor(vc.data_ptr() + ko, code, L - s0, D, D, L * D)
            lo = LkTensor(out.data_ptr() + qo, code, rows, D, D, rows * D)
            lp = LkTensor(prs[b].data_ptr(), _I32, rows, 1, 1, 0)
            run(lib.lk_attention, qh, ref(lq), ref(lk), ref(lv), ref(lp), 1, 1, float(scale),
                ref(lo), Hk)
    return out[0] if squeeze else out
