"""An independent pure-PyTorch reference of DESIGN.md section 3a (the second family).

Written from the spec's text only: flip, rotate, translate, cutout, grayscale,
color_jitter and random_conv on ``[B, S*C, H, W]`` uint8 or float32
observations, plus ``augment`` / ``gather_augment`` for pipelines that mix them
with section 3's shift, crop and overlay (reference.py).

Draws are Python ints (reference.philox4x32_10). Pixels are torch tensors,
vectorized over the batch and the pixels but sequential in the terms of every
sum, so each float32 operation is one correctly rounded IEEE operation in the
order the spec writes (torch's CPU add/mul/div/sqrt on float32 tensors do not
contract to FMA). Scalars are Python floats rounded to float32 after every
operation (``f32``): for +, -, *, / and sqrt, rounding the double result to
float32 gives the correctly rounded float32 result (53 >= 2 * 24 + 2).

Two variants of the ops that use exp/log/sin/cos or long float chains:
- ``math="f32"``: bit-exact, float32 in the written order, exp/log/sin/cos from
  obsaug's own implementations (``obsaug._C.float_math``);
- ``math="f64"``: the same formulas in float64 with torch's exp/log/sin/cos and
  unrounded constants, for the "within one uint8 level (float: 1e-4 relative)"
  check; it returns uint8 (rounded in double) or float64.
"""
from __future__ import annotations

import math
import struct
from typing import Any, Mapping, Optional

import torch

import reference as R

TWO24 = 1 << 24
NEW_OPS = ("flip", "rotate", "translate", "cutout", "grayscale", "color_jitter", "random_conv")
XAVIER_STD_BITS = 0x3E4511A3  # float32(sqrt(2 / 54)), written in DESIGN.md
# (the ops' keyword `math` selects a variant, so the module's functions get names)
math_pi, math_sqrt, math_log, math_cos, math_sin = math.pi, math.sqrt, math.log, math.cos, math.sin


# ------------------------------------------------------------------ draws

def draw_sup(seed: int, step: int, b: int, k: int, j: int) -> tuple:
    """Supplementary block j of sample b, op position k: counter word 3 = k | ((0x8000 + j) << 16)."""
    assert 0 <= j <= 0x7FFF and 0 <= k <= 0x7FFF
    counter = (step & R.MASK32, step >> 32, b, k | ((0x8000 + j) << 16))
    return R.philox4x32_10(counter, (seed & R.MASK32, seed >> 32))


def unit(r: int) -> float:
    """(r >> 8) * 2^-24: exact in float32 and in double."""
    return (r >> 8) * 2.0 ** -24


def gate_threshold(p: float) -> int:
    """T = min(2^24, ceil(p * 2^24)) in double."""
    return min(TWO24, math.ceil(float(p) * TWO24))


def gate(r: int, p: float) -> bool:
    return (r >> 8) < gate_threshold(p)


# --------------------------------------------------------------- float32

def f32(x: float) -> float:
    """x rounded to the nearest float32 (ties to even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def factor(lo: float, span: float, r: int) -> float:
    """lo + unit(r) * span in float32, lo and span already float32."""
    return f32(lo + f32(unit(r) * span))


def strength_range(x: float) -> tuple:
    """[lo, hi] = [max(0, 1 - x), 1 + x] in double: (lo, span) rounded once to float32."""
    lo, hi = max(0.0, 1.0 - x), 1.0 + x
    return f32(lo), f32(hi - lo)


def _float_math(name: str, x: torch.Tensor) -> torch.Tensor:
    import obsaug
    fm = getattr(obsaug._C, "float_math", None)
    if fm is None:
        raise NotImplementedError("obsaug._C.float_math is not built (the bit-exact variant needs it)")
    return fm(name, x.contiguous())


def has_float_math() -> bool:
    import obsaug
    return hasattr(obsaug._C, "float_math")


def clamp(v: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """fminf(fmaxf(v, lo), hi): NaN gives lo."""
    return torch.fmin(torch.fmax(v, torch.tensor(lo, dtype=v.dtype)), torch.tensor(hi, dtype=v.dtype))


def to_u8(v: torch.Tensor) -> torch.Tensor:
    """uint8(floor(clamp(v, 0, 255) + 0.5)), the addition in v's float type."""
    return torch.floor(clamp(v, 0.0, 255.0) + 0.5).to(torch.uint8)


def finish(v: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The end of an op computed in float: uint8 pipelines round, float pipelines keep."""
    if dtype == torch.uint8:
        return to_u8(v)
    return v


def frames(obs: torch.Tensor, c: int) -> torch.Tensor:
    """[B, S*C, H, W] -> [B, S, C, H, W] (a copy, contiguous)."""
    b, sc, h, w = obs.shape
    assert sc % c == 0, (sc, c)
    return obs.reshape(b, sc // c, c, h, w).clone()


def frame_channels(obs: torch.Tensor, pool: Optional[torch.Tensor]) -> int:
    """C: the pool's when given, else 3 when S*C is a multiple of 3, else 1."""
    if pool is not None:
        return pool.shape[1]
    return 3 if obs.shape[1] % 3 == 0 else 1


def _mask(flags, shape) -> torch.Tensor:
    """Per-sample booleans as a tensor broadcasting over `shape` ([B, ...])."""
    return torch.tensor(flags, dtype=torch.bool).view(-1, *([1] * (len(shape) - 1)))


# ------------------------------------------------------------- geometry

def flip(obs, *, seed, step, p=0.5, axis="horizontal", op_index=0):
    """Gate r0; out[y][x] = in[y][W-1-x] (horizontal) or in[H-1-y][x] (vertical)."""
    assert axis in ("horizontal", "vertical"), axis
    out = obs.clone(memory_format=torch.contiguous_format)
    dim = -1 if axis == "horizontal" else -2
    for b in range(obs.shape[0]):
        if gate(R.draw(seed, step, b, op_index)[0], p):
            out[b] = obs[b].flip(dim)
    return out


def rotate_frame(x: torch.Tensor, q: int) -> torch.Tensor:
    """q quarter turns of [..., H, W] by the spec's index formulas (H == W)."""
    h, w = x.shape[-2:]
    assert h == w
    ys = torch.arange(h).view(h, 1).expand(h, w)
    xs = torch.arange(w).view(1, w).expand(h, w)
    if q == 0:
        return x.clone()
    if q == 1:
        sy, sx = xs, w - 1 - ys            # out[y][x] = in[x][W-1-y]
    elif q == 2:
        sy, sx = h - 1 - ys, w - 1 - xs    # in[H-1-y][W-1-x]
    else:
        sy, sx = h - 1 - xs, ys            # in[H-1-x][y]
    return x[..., sy, sx]


def rotate_params(seed, step, b, p, op_index=0):
    """q quarter turns (0 when the gate is closed)."""
    r = R.draw(seed, step, b, op_index)
    q = 1 + R.below(r[1], 3)
    return q if gate(r[0], p) else 0


def rotate(obs, *, seed, step, p=0.5, op_index=0):
    assert obs.shape[-1] == obs.shape[-2], "rotate needs a square frame"
    out = obs.clone(memory_format=torch.contiguous_format)
    for b in range(obs.shape[0]):
        out[b] = rotate_frame(obs[b], rotate_params(seed, step, b, p, op_index))
    return out


def _hw(size):
    return (size, size) if isinstance(size, int) else tuple(size)


def translate(obs, *, seed, step, size, op_index=0):
    """A zero canvas of Hc x Wc with the frame at x1 = below(r0, Wc-W+1), y1 = below(r1, Hc-H+1)."""
    bsz, sc, h, w = obs.shape
    hc, wc = _hw(size)
    assert hc >= h and wc >= w
    out = torch.zeros((bsz, sc, hc, wc), dtype=obs.dtype)
    for b in range(bsz):
        r = R.draw(seed, step, b, op_index)
        x1, y1 = R.below(r[0], wc - w + 1), R.below(r[1], hc - h + 1)
        out[b, :, y1:y1 + h, x1:x1 + w] = obs[b]
    return out


def cutout_params(seed, step, b, h, w, lo, hi, p, op_index=0):
    """(x0, y0, sw, sh, applies, colour (3 ints))."""
    r = R.draw(seed, step, b, op_index)
    s = draw_sup(seed, step, b, op_index, 0)
    sw = min(lo + R.below(r[0], hi - lo + 1), w)
    sh = min(lo + R.below(r[1], hi - lo + 1), h)
    x0, y0 = R.below(r[2], w - sw + 1), R.below(r[3], h - sh + 1)
    colour = tuple(R.below(s[c], 256) for c in range(3))
    return x0, y0, sw, sh, gate(s[3], p), colour


def cutout(obs, *, seed, step, min=10, max=30, fill="zeros", p=1.0, op_index=0, channels=None):
    assert fill in ("zeros", "color"), fill
    lo, hi = min, max
    assert 1 <= lo <= hi
    bsz, sc, h, w = obs.shape
    c = channels or frame_channels(obs, None)
    out = frames(obs, c)
    for b in range(bsz):
        x0, y0, sw, sh, applies, colour = cutout_params(seed, step, b, h, w, lo, hi, p, op_index)
        if not applies:
            continue
        for ch in range(c):
            # three colours drawn; with C > 3 channel ch takes colour ch % 3 (docs/ops.md)
            out[b, :, ch, y0:y0 + sh, x0:x0 + sw] = colour[ch % 3] if fill == "color" else 0
    return out.view(obs.shape)


# ------------------------------------------------------------- colour

GRAY_F32 = tuple(f32(k) for k in (0.299, 0.587, 0.114))


def gray_f32(v: torch.Tensor) -> torch.Tensor:
    """0.299 R + 0.587 G + 0.114 B on [..., 3, H, W] float32, float32 constants, left to right."""
    kr, kg, kb = (torch.tensor(k, dtype=torch.float32) for k in GRAY_F32)
    return (kr * v[..., 0, :, :] + kg * v[..., 1, :, :]) + kb * v[..., 2, :, :]


def gray_f64(v: torch.Tensor) -> torch.Tensor:
    return 0.299 * v[..., 0, :, :] + 0.587 * v[..., 1, :, :] + 0.114 * v[..., 2, :, :]


def grayscale(obs, *, seed, step, p=1.0, op_index=0):
    """Gate r0; uint8 (19595 R + 38470 G + 7471 B + 32768) >> 16, float the float formula."""
    x = frames(obs, 3)
    if obs.dtype == torch.uint8:
        i = x.to(torch.int64)
        g = ((19595 * i[:, :, 0] + 38470 * i[:, :, 1] + 7471 * i[:, :, 2] + 32768) >> 16).to(torch.uint8)
    else:
        g = gray_f32(x)
    applies = [gate(R.draw(seed, step, b, op_index)[0], p) for b in range(obs.shape[0])]
    out = torch.where(_mask(applies, x.shape), g.unsqueeze(2).expand_as(x), x)
    return out.reshape(obs.shape).contiguous()


def jitter_params(seed, step, b, brightness, contrast, saturation, hue, p, op_index=0, math="f32"):
    """(b, c, s, h, applies): float32 factors (math f32) or doubles (math f64)."""
    r = R.draw(seed, step, b, op_index)
    s = draw_sup(seed, step, b, op_index, 0)
    out = []
    for x, word in ((brightness, r[0]), (contrast, r[1]), (saturation, r[2])):
        if math == "f32":
            out.append(factor(*strength_range(x), word))
        else:
            lo = max(0.0, 1.0 - x)
            out.append(lo + unit(word) * ((1.0 + x) - lo))
    if math == "f32":
        out.append(factor(f32(-hue), f32(2.0 * hue), r[3]))
    else:
        out.append(-hue + unit(r[3]) * 2.0 * hue)
    return (*out, gate(s[0], p))


def _hue_shift(v: torch.Tensor, h: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """The spec's RGB -> HSV -> hue + h -> RGB on [B, S, 3, H, W] values 0..255 in dtype dt."""
    def k(c):
        return torch.tensor(c, dtype=dt)

    c = v / k(255.0)
    r, g, b = c[:, :, 0], c[:, :, 1], c[:, :, 2]
    mx = torch.maximum(torch.maximum(r, g), b)
    mn = torch.minimum(torch.minimum(r, g), b)
    d = mx - mn
    flat = d == 0
    safe_d = torch.where(flat, k(1.0), d)
    safe_mx = torch.where(flat, k(1.0), mx)
    sat = torch.where(flat, k(0.0), d / safe_mx)
    h_r = (mx - b) / safe_d - (mx - g) / safe_d
    h_g = (k(2.0) + (mx - r) / safe_d) - (mx - b) / safe_d
    h_b = (k(4.0) + (mx - g) / safe_d) - (mx - r) / safe_d
    h6 = torch.where(mx == r, h_r, torch.where(mx == g, h_g, h_b))
    h6 = torch.where(flat, k(0.0), h6)
    t = (h6 / k(6.0) + k(1.0)) + h.view(-1, 1, 1, 1)
    t = t - torch.floor(t)
    t6 = t * k(6.0)
    i = torch.floor(t6)
    f = t6 - i
    i = torch.remainder(i.to(torch.int64), 6)
    one = k(1.0)
    pp = clamp(mx * (one - sat), 0.0, 1.0)
    qq = clamp(mx * (one - sat * f), 0.0, 1.0)
    uu = clamp(mx * (one - sat * (one - f)), 0.0, 1.0)
    table = [(mx, uu, pp), (qq, mx, pp), (pp, mx, uu), (pp, qq, mx), (uu, pp, mx), (mx, pp, qq)]
    out = []
    for ch in range(3):
        choices = torch.stack([row[ch] for row in table])                # [6, B, S, H, W]
        out.append(torch.gather(choices, 0, i.unsqueeze(0)).squeeze(0))
    return torch.stack(out, dim=2) * k(255.0)


def color_jitter(obs, *, seed, step, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.5, p=1.0,
                 op_index=0, math="f32"):
    """torchvision's brightness, contrast, saturation, hue in that fixed order (section 3a)."""
    dt = torch.float32 if math == "f32" else torch.float64
    gray = gray_f32 if math == "f32" else gray_f64
    x = frames(obs, 3).to(dt)
    bsz, s_frames, _, h, w = x.shape
    params = [jitter_params(seed, step, b, brightness, contrast, saturation, hue, p, op_index, math)
              for b in range(bsz)]

    def per_sample(i):
        return torch.tensor([row[i] for row in params], dtype=dt).view(bsz, 1, 1, 1, 1)

    bf, cf, sf, hf = (per_sample(i) for i in range(4))
    applies = _mask([row[4] for row in params], x.shape)
    k255 = torch.tensor(255.0, dtype=dt)
    v = x
    if brightness != 0:
        v = clamp(v * bf, 0.0, 255.0)
    if contrast != 0:
        if math == "f32":  # the quantized, exactly summed mean of the state before the op
            q = torch.round(gray(x) * torch.tensor(65536.0)).to(torch.int64)
            sums = q.sum(dim=(-2, -1)).tolist()                           # [B][S]
            m0 = [[f32(float(total) / (65536.0 * h * w)) for total in row] for row in sums]
        else:
            m0 = gray(x).mean(dim=(-2, -1)).tolist()
        m0 = torch.tensor(m0, dtype=dt).view(bsz, s_frames, 1, 1, 1)
        b_used = bf if brightness != 0 else torch.ones_like(bf)
        m = torch.fmin(b_used * m0, k255)
        v = clamp((v - m) * cf + m, 0.0, 255.0)
    if saturation != 0:
        g = gray(v).unsqueeze(2)
        v = clamp(g + (v - g) * sf, 0.0, 255.0)
    if hue != 0:
        v = _hue_shift(v, hf.view(-1), dt)
    v = torch.where(applies, v, x)
    out = finish(v, obs.dtype)
    return out.reshape(obs.shape).contiguous()


# --------------------------------------------------------- random_conv

def conv_normals(seed, step, b, op_index=0, math="f32") -> list:
    """The 81 Box-Muller normals n_0..n_80 of sample b from supplementary blocks 0..20."""
    u1s, ths, units = [], [], []
    for q in range(21):
        r = draw_sup(seed, step, b, op_index, q)
        for pair in ((r[0], r[1]), (r[2], r[3])):
            u1s.append(((pair[0] >> 8) + 1) * 2.0 ** -24)
            units.append(unit(pair[1]))
    if math == "f32":
        two_pi = f32(2.0 * math_pi)
        ths = [f32(two_pi * u) for u in units]
        logs = _float_math("log", torch.tensor(u1s, dtype=torch.float32)).tolist()
        cos = _float_math("cos", torch.tensor(ths, dtype=torch.float32)).tolist()
        sin = _float_math("sin", torch.tensor(ths, dtype=torch.float32)).tolist()
        radii = [f32(math_sqrt(f32(-2.0 * lg))) for lg in logs]
        normals = []
        for rad, c, s in zip(radii, cos, sin):
            normals += [f32(rad * c), f32(rad * s)]
    else:
        normals = []
        for u1, u in zip(u1s, units):
            rad, th = math_sqrt(-2.0 * math_log(u1)), 2.0 * math_pi * u
            normals += [rad * math_cos(th), rad * math_sin(th)]
    return normals[:81]


def conv_weights(seed, step, b, init="normal", op_index=0, math="f32") -> list:
    """w[o][i][ky][kx] = std * n_j, flat in j = ((o*3 + i)*3 + ky)*3 + kx."""
    assert init in ("normal", "xavier"), init
    n = conv_normals(seed, step, b, op_index, math)
    if math == "f32":
        std = 1.0 if init == "normal" else f32_bits(XAVIER_STD_BITS)
        return [f32(std * v) for v in n]
    std = 1.0 if init == "normal" else math_sqrt(2.0 / 54.0)
    return [std * v for v in n]


def random_conv(obs, *, seed, step, init="normal", padding="replicate", activation="sigmoid",
                op_index=0, math="f32"):
    """A random 3x3 conv, 3 -> 3 channels, per sample, on values / 255, then 255 * sigmoid or 255 *."""
    assert padding in ("replicate", "zeros") and activation in ("sigmoid", "none")
    dt = torch.float32 if math == "f32" else torch.float64
    x = frames(obs, 3).to(dt)
    bsz, s_frames, _, h, w = x.shape
    k255 = torch.tensor(255.0, dtype=dt)
    scaled = x / k255
    if padding == "replicate":
        ys = torch.arange(-1, h + 1).clamp(0, h - 1)
        xs = torch.arange(-1, w + 1).clamp(0, w - 1)
        padded = scaled[..., ys, :][..., xs]
    else:
        padded = torch.zeros((bsz, s_frames, 3, h + 2, w + 2), dtype=dt)
        padded[..., 1:h + 1, 1:w + 1] = scaled
    weights = torch.tensor([conv_weights(seed, step, b, init, op_index, math) for b in range(bsz)],
                           dtype=dt).view(bsz, 3, 3, 3, 3)
    out = []
    for o in range(3):
        acc = torch.zeros((bsz, s_frames, h, w), dtype=dt)
        for i in range(3):
            for ky in range(3):
                for kx in range(3):
                    wt = weights[:, o, i, ky, kx].view(bsz, 1, 1, 1)
                    acc = acc + wt * padded[:, :, i, ky:ky + h, kx:kx + w]
        if activation == "none":
            out.append(k255 * acc)
        elif math == "f32":
            e = _float_math("exp", -acc)
            out.append(k255 * (torch.tensor(1.0) / (torch.tensor(1.0) + e)))
        else:
            out.append(k255 * torch.sigmoid(acc))
    v = torch.stack(out, dim=2)
    return finish(v, obs.dtype).reshape(obs.shape).contiguous()


# ----------------------------------------------------------------- pipeline

def apply_op(obs, pool, op: Mapping[str, Any], *, seed, step, op_index, channels=None, math="f32"):
    """One op dict (section 3 or 3a) at position op_index (its "index" key wins)."""
    kw = {k: v for k, v in op.items() if k not in ("op", "index")}
    k = op.get("index", op_index)
    name = op["op"]
    c = channels or frame_channels(obs, pool)
    if name in ("shift", "crop", "overlay"):
        return R.apply_op(obs, pool, {"op": name, **kw}, seed=seed, step=step, op_index=k)
    if name in ("grayscale", "color_jitter", "random_conv"):
        assert c == 3, f"{name} needs C = 3, got {c}"
    if name == "flip":
        return flip(obs, seed=seed, step=step, op_index=k, **kw)
    if name == "rotate":
        return rotate(obs, seed=seed, step=step, op_index=k, **kw)
    if name == "translate":
        return translate(obs, seed=seed, step=step, op_index=k, **kw)
    if name == "cutout":
        return cutout(obs, seed=seed, step=step, op_index=k, channels=c, **kw)
    if name == "grayscale":
        return grayscale(obs, seed=seed, step=step, op_index=k, **kw)
    if name == "color_jitter":
        return color_jitter(obs, seed=seed, step=step, op_index=k, math=math, **kw)
    if name == "random_conv":
        return random_conv(obs, seed=seed, step=step, op_index=k, math=math, **kw)
    raise ValueError(name)


def augment(obs, pool: Optional[torch.Tensor], *, ops, seed, step, out_dtype=None, scale=1.0,
            bias=0.0, channels=None):
    """The ops one after another (op k uses op_index k unless it says "index"),
    then the output affine (reference.to_output); bit-exact variant."""
    c = channels or frame_channels(obs, pool)
    v = obs
    for k, op in enumerate(ops):
        v = apply_op(v, pool, op, seed=seed, step=step, op_index=k, channels=c)
    return R.to_output(v, out_dtype, scale, bias)


def gather_augment(storage, indices, pool=None, *, ops, seed, step, out_dtype=None, scale=1.0,
                   bias=0.0):
    """augment(storage[indices].reshape(B, S*C, H, W)) with C = storage's channels."""
    n, c, h, w = storage.shape
    b, s = indices.shape
    obs = storage[indices.reshape(-1)].reshape(b, s * c, h, w)
    return augment(obs, pool, ops=ops, seed=seed, step=step, out_dtype=out_dtype, scale=scale,
                   bias=bias, channels=c)
