"""An independent pure-PyTorch reference of DESIGN.md section 3.

Written from the spec only (not from the C++): Philox4x32-10 in Python ints,
the counter/key layout, below(), and shift / crop / overlay applied per sample
with a Python loop over the batch (pixels vectorized with torch indexing).
Observations are [B, S*C, H, W] uint8 or float32; the pool is [P, C, Hp, Wp] uint8.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

import torch

MASK32 = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57   # Philox4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85   # Weyl key increments


def philox4x32_10(counter: Sequence[int], key: Sequence[int]) -> tuple:
    """Random123's philox4x32 with 10 rounds on 4 counter words and 2 key words."""
    c0, c1, c2, c3 = (int(c) & MASK32 for c in counter)
    k0, k1 = (int(k) & MASK32 for k in key)
    for rnd in range(10):
        if rnd:
            k0, k1 = (k0 + _W0) & MASK32, (k1 + _W1) & MASK32
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
    return c0, c1, c2, c3


def draw(seed: int, step: int, b: int, k: int, s: int = 0) -> tuple:
    """The block (r0, r1, r2, r3) of sample b, op position k, frame s."""
    counter = (step & MASK32, step >> 32, b, k | (s << 16))
    key = (seed & MASK32, seed >> 32)
    return philox4x32_10(counter, key)


def below(r: int, n: int) -> int:
    return (r * n) >> 32


def weight(alpha: float) -> int:
    """round(alpha * 256), half up, in double: from the exact fraction, since adding
    0.5 first would round 0.49999999999999994 up to 1."""
    x = float(alpha) * 256.0
    w = math.floor(x)
    return w + (1 if x - w >= 0.5 else 0)


# ---------------------------------------------------------------- single ops

def shift_params(seed, step, b, pad, op_index=0):
    r = draw(seed, step, b, op_index)
    n = 2 * pad + 1
    return below(r[0], n) - pad, below(r[1], n) - pad          # dx, dy


def crop_params(seed, step, b, in_hw, out_hw, center=False, op_index=0):
    (hi, wi), (ho, wo) = in_hw, out_hw
    if center:
        return (wi - wo) // 2, (hi - ho) // 2
    r = draw(seed, step, b, op_index)
    return below(r[0], wi - wo + 1), below(r[1], hi - ho + 1)  # ox, oy


def overlay_params(seed, step, b, s, pool_size, alpha, alpha_max=None, per_frame=False,
                   op_index=0):
    r = draw(seed, step, b, op_index, s if per_frame else 0)
    w_lo = weight(alpha)
    w_hi = weight(alpha if alpha_max is None else alpha_max)
    return below(r[0], pool_size), w_lo + below(r[1], w_hi - w_lo + 1)  # idx, w


def shift(obs, *, seed, step, pad=4, padding="replicate", op_index=0):
    B, _, H, W = obs.shape
    out = torch.empty_like(obs, memory_format=torch.contiguous_format)
    for b in range(B):
        dx, dy = shift_params(seed, step, b, pad, op_index)
        ys = torch.arange(H) + dy
        xs = torch.arange(W) + dx
        img = obs[b][:, ys.clamp(0, H - 1)][:, :, xs.clamp(0, W - 1)]
        if padding == "zeros":
            inside = ((ys >= 0) & (ys < H))[:, None] & ((xs >= 0) & (xs < W))[None, :]
            img = torch.where(inside, img, torch.zeros((), dtype=obs.dtype))
        else:
            assert padding == "replicate", padding
        out[b] = img
    return out


def crop(obs, *, seed, step, size, center=False, op_index=0):
    B, SC, H, W = obs.shape
    ho, wo = (size, size) if isinstance(size, int) else tuple(size)
    out = obs.new_empty((B, SC, ho, wo))
    for b in range(B):
        ox, oy = crop_params(seed, step, b, (H, W), (ho, wo), center, op_index)
        out[b] = obs[b, :, oy:oy + ho, ox:ox + wo]
    return out


def blend(x: torch.Tensor, d: torch.Tensor, w: int) -> torch.Tensor:
    """Overlay blend of one frame x with distractor d (uint8) at weight w / 256."""
    if x.dtype == torch.uint8:
        v = (x.to(torch.int32) * (256 - w) + d.to(torch.int32) * w + 128) >> 8
        return v.to(torch.uint8)
    # float32: t = w * 2^-8, (1 - t) * x + t * d as two rounded products and one sum
    t = torch.tensor(w * 2.0 ** -8, dtype=torch.float32)
    return (torch.tensor(1.0) - t) * x + t * d.to(x.dtype)


def overlay(obs, pool, *, seed, step, alpha=0.5, alpha_max=None, per_frame=False,
            op_index=0):
    B, SC, H, W = obs.shape
    P, C = pool.shape[:2]
    assert SC % C == 0 and tuple(pool.shape[2:]) == (H, W)
    out = obs.clone(memory_format=torch.contiguous_format)
    for b in range(B):
        for s in range(SC // C):
            idx, w = overlay_params(seed, step, b, s, P, alpha, alpha_max, per_frame, op_index)
            out[b, s * C:(s + 1) * C] = blend(obs[b, s * C:(s + 1) * C], pool[idx], w)
    return out


# ----------------------------------------------------------------- pipeline

def apply_op(obs, pool, op: Mapping[str, Any], *, seed, step, op_index):
    kw = {k: v for k, v in op.items() if k != "op"}
    name = op["op"]
    if name == "shift":
        return shift(obs, seed=seed, step=step, op_index=op_index, **kw)
    if name == "crop":
        return crop(obs, seed=seed, step=step, op_index=op_index, **kw)
    if name == "overlay":
        return overlay(obs, pool, seed=seed, step=step, op_index=op_index, **kw)
    raise ValueError(name)


def augment(obs, pool: Optional[torch.Tensor], *, ops, seed, step, out_dtype=None,
            scale=1.0, bias=0.0):
    """The ops one after another (op k uses op_index k), then the output affine."""
    v = obs
    for k, op in enumerate(ops):
        v = apply_op(v, pool, op, seed=seed, step=step, op_index=k)
    return to_output(v, out_dtype, scale, bias)


def to_output(v, out_dtype=None, scale=1.0, bias=0.0):
    """float32 output: v * scale, rounded to float32, then + bias, rounded to float32."""
    if out_dtype is None or out_dtype == torch.uint8:
        return v.contiguous()
    assert out_dtype == torch.float32, out_dtype
    s = torch.tensor(scale, dtype=torch.float32)
    c = torch.tensor(bias, dtype=torch.float32)
    return torch.add(torch.mul(v.float(), s), c)
