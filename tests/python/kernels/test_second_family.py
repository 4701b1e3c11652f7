"""flip, rotate, translate, cutout, grayscale, color_jitter and random_conv
(DESIGN.md section 3a) against the independent reference (reference_ops.py):
the reference checked on its own, each op bit for bit in uint8 and float32,
color_jitter and random_conv also within one uint8 level (float: 1e-4 of the
0..255 scale) of a float64 reference, fused pipelines mixing both families ==
the single ops one after another == the reference, and the load errors."""
import math
import random

import pytest
import torch
import torch.nn.functional as F

import obsaug
import reference as R
import reference_ops as RO
from conftest import PHOTOS, needs_engine, raises, random_obs, random_pool

ops = obsaug.ops
DTYPES = [torch.uint8, torch.float32]
SEED, STEP = 20240611, 2**33 + 9
SEEDS = [(SEED, STEP), (7, 0), (2**64 - 1, 2**63 + 5)]
needs_float_math = pytest.mark.skipif(
    not RO.has_float_math(),
    reason="obsaug._C.float_math (obsaug's own exp/log/sin/cos) is not built yet: "
           "the bit-exact random_conv reference needs the same bits")


def assert_same(got, want):
    """Equal bit for bit in uint8, equal values in float (-0 == +0), with the first difference."""
    assert got.shape == want.shape and got.dtype == want.dtype, \
        (tuple(got.shape), got.dtype, tuple(want.shape), want.dtype)
    if torch.equal(got, want):
        return
    bad = (got != want).nonzero()
    first = tuple(bad[0].tolist())
    raise AssertionError(f"{bad.shape[0]} of {got.numel()} differ; first at {list(first)}: "
                         f"got {got[first].item()!r}, want {want[first].item()!r}")


def assert_near_f64(got, want64):
    """Within one uint8 level, or for floats 1e-4 of max(|value|, 255)."""
    assert got.shape == want64.shape
    diff = (got.double() - want64.double()).abs()
    if got.dtype == torch.uint8:
        assert diff.max().item() <= 1, f"max {diff.max().item()} levels from the float64 reference"
    else:
        tol = 1e-4 * torch.clamp(want64.double().abs(), min=255.0)
        worst = (diff / tol).max().item()
        assert worst <= 1, f"{worst:.3g} x the tolerance from the float64 reference"


# ------------------------------------------------------- the reference alone

def test_reference_draws_gates_and_factors():
    # supplementary block j sits at counter word 3 = k | ((0x8000 + j) << 16)
    counter = (STEP & R.MASK32, STEP >> 32, 5, 3 | (0x8007 << 16))
    assert RO.draw_sup(SEED, STEP, 5, 3, 7) == R.philox4x32_10(counter, (SEED & R.MASK32, SEED >> 32))
    assert RO.draw_sup(SEED, STEP, 5, 3, 0) != R.draw(SEED, STEP, 5, 3)
    assert [RO.gate_threshold(p) for p in (0.0, 1.0, 0.5, 1e-30, 1 - 1e-12)] == \
        [0, 2**24, 2**23, 1, 2**24]
    assert not RO.gate(0, 0.0) and RO.gate(R.MASK32, 1.0) and RO.gate(0, 1e-30)
    assert RO.unit(R.MASK32) == 1 - 2.0**-24 and RO.unit(255) == 0.0
    assert RO.strength_range(0.4) == (RO.f32(0.6), RO.f32(0.8))
    assert RO.strength_range(3.0) == (0.0, 4.0)
    assert RO.f32_bits(RO.XAVIER_STD_BITS) == RO.f32(math.sqrt(2 / 54))
    lo, span = RO.strength_range(0.4)
    assert RO.factor(lo, span, 0) == lo and RO.factor(lo, span, R.MASK32) == RO.f32(1.4)


@pytest.mark.parametrize("axis,dim", [("horizontal", -1), ("vertical", -2)])
def test_reference_flip_and_rotate_are_torchs(axis, dim):
    x = random_obs((24, 6, 7, 7))
    flipped = RO.flip(x, seed=SEED, step=STEP, p=0.5, axis=axis)
    gates = [RO.gate(R.draw(SEED, STEP, b, 0)[0], 0.5) for b in range(24)]
    assert 0 < sum(gates) < 24
    for b in range(24):
        assert torch.equal(flipped[b], x[b].flip(dim) if gates[b] else x[b])
    turns = RO.rotate(x, seed=SEED, step=STEP, p=0.8)
    qs = [RO.rotate_params(SEED, STEP, b, 0.8) for b in range(24)]
    assert set(qs) == {0, 1, 2, 3}
    for b in range(24):
        assert torch.equal(turns[b], torch.rot90(x[b], qs[b], dims=(-2, -1)))


def test_reference_grayscale_formulas():
    xf = random_obs((6, 9, 5, 7), torch.float32)
    g = RO.grayscale(xf, seed=SEED, step=STEP).view(6, 3, 3, 5, 7)
    want = 0.299 * xf.view(6, 3, 3, 5, 7)[:, :, 0].double() + 0.587 * xf.view(6, 3, 3, 5, 7)[:, :, 1] \
        + 0.114 * xf.view(6, 3, 3, 5, 7)[:, :, 2]
    assert (g[:, :, 0].double() - want).abs().max() < 1e-4
    assert torch.equal(g[:, :, 0], g[:, :, 1]) and torch.equal(g[:, :, 0], g[:, :, 2])
    xu = random_obs((6, 9, 5, 7))
    gu = RO.grayscale(xu, seed=SEED, step=STEP).view(6, 3, 3, 5, 7)
    exact = (0.299 * xu.view(6, 3, 3, 5, 7)[:, :, 0].double() + 0.587 * xu.view(6, 3, 3, 5, 7)[:, :, 1]
             + 0.114 * xu.view(6, 3, 3, 5, 7)[:, :, 2])
    assert (gu[:, :, 0].double() - exact).abs().max() <= 0.5 + 1e-3


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_brightness_by_hand(dtype):
    x = random_obs((8, 6, 4, 5), dtype)
    out = RO.color_jitter(x, seed=SEED, step=STEP, brightness=0.5, contrast=0, saturation=0, hue=0)
    for b in range(8):
        factor = RO.f32(0.5 + RO.f32(RO.unit(R.draw(SEED, STEP, b, 0)[0]) * 1.0))
        v = (x[b].float() * factor).clamp(0, 255)
        assert torch.equal(out[b], torch.floor(v + 0.5).to(torch.uint8) if dtype == torch.uint8 else v)


def test_reference_hue_matches_colorsys():
    import colorsys
    x = random_obs((16, 3, 4, 4), torch.float32)
    out = RO.color_jitter(x, seed=SEED, step=STEP, brightness=0, contrast=0, saturation=0, hue=0.3,
                          math="f64")
    for b in range(16):
        h = RO.jitter_params(SEED, STEP, b, 0, 0, 0, 0.3, 1.0, math="f64")[3]
        for y in range(4):
            for xx in range(4):
                rgb = [x[b, c, y, xx].item() / 255 for c in range(3)]
                hh, ss, vv = colorsys.rgb_to_hsv(*rgb)
                want = colorsys.hsv_to_rgb((hh + h) % 1.0, ss, vv)
                got = out[b, :, y, xx].tolist()
                assert max(abs(g - 255 * w) for g, w in zip(got, want)) < 1e-9


def test_reference_contrast_and_saturation_in_float64():
    x = random_obs((8, 6, 5, 4), torch.float32).double()
    out = RO.color_jitter(x.float(), seed=SEED, step=STEP, brightness=0, contrast=0.7, saturation=0.6,
                          hue=0, math="f64")
    for b in range(8):
        _, c, s, _, _ = RO.jitter_params(SEED, STEP, b, 0, 0.7, 0.6, 0, 1.0, math="f64")
        fr = x[b].view(2, 3, 5, 4)
        m = RO.gray_f64(fr).mean(dim=(-2, -1)).view(2, 1, 1, 1)
        v = ((fr - m) * c + m).clamp(0, 255)
        g = RO.gray_f64(v).unsqueeze(1)
        v = (g + (v - g) * s).clamp(0, 255)
        assert torch.allclose(out[b].view(2, 3, 5, 4), v, rtol=0, atol=1e-9)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_color_jitter_f32_near_f64(dtype):
    x = random_obs((32, 9, 7, 6), dtype)
    for kw in [{}, {"brightness": 2.0, "contrast": 1.5, "saturation": 3.0, "hue": 0.5}]:
        assert_near_f64(RO.color_jitter(x, seed=SEED, step=STEP, **kw),
                        RO.color_jitter(x, seed=SEED, step=STEP, math="f64", **kw))


@pytest.mark.parametrize("padding", ["replicate", "zeros"])
@pytest.mark.parametrize("activation", ["sigmoid", "none"])
@pytest.mark.parametrize("init", ["normal", "xavier"])
def test_reference_random_conv_is_conv2d(padding, activation, init):
    x = random_obs((5, 6, 9, 11))
    out = RO.random_conv(x.float(), seed=SEED, step=STEP, init=init, padding=padding,
                         activation=activation, math="f64")
    for b in range(5):
        w = torch.tensor(RO.conv_weights(SEED, STEP, b, init, math="f64"), dtype=torch.float64)
        fr = F.pad(x[b].double().view(2, 3, 9, 11) / 255, (1, 1, 1, 1),
                   mode="replicate" if padding == "replicate" else "constant")
        y = F.conv2d(fr, w.view(3, 3, 3, 3))
        y = 255 * (torch.sigmoid(y) if activation == "sigmoid" else y)
        assert torch.allclose(out[b].view(2, 3, 9, 11), y, rtol=1e-12, atol=1e-9)
    n = torch.tensor([RO.conv_normals(SEED, STEP, b, math="f64") for b in range(5)])
    assert n.shape == (5, 81) and 0.3 < n.std() < 3


@needs_float_math
@pytest.mark.parametrize("dtype", DTYPES)
def test_reference_random_conv_f32_near_f64(dtype):
    x = random_obs((6, 9, 8, 7), dtype)
    for kw in [{}, {"init": "xavier", "padding": "zeros", "activation": "none"}]:
        assert_near_f64(RO.random_conv(x, seed=SEED, step=STEP, **kw),
                        RO.random_conv(x, seed=SEED, step=STEP, math="f64", **kw))
    for b in range(6):
        a = RO.conv_weights(SEED, STEP, b)
        w = RO.conv_weights(SEED, STEP, b, math="f64")
        assert max(abs(p - q) for p, q in zip(a, w)) < 1e-5


@pytest.mark.parametrize("kw", [dict(alpha=0.3), dict(alpha=0.1, alpha_max=0.9, per_frame=True)], ids=str)
def test_reference_float_overlay_is_the_librarys(kw):
    # pipelines mixing both families compare float results bit for bit, overlay included
    x = random_obs((16, 9, 10, 11), torch.float32)
    pool = random_pool(7, 3, 10, 11)
    assert_same(ops.overlay(x, pool, seed=SEED, step=STEP, op_index=2, **kw),
                R.overlay(x, pool, seed=SEED, step=STEP, op_index=2, **kw))


# ---------------------------------------------------------- each op alone

# Widths on both sides of the CPU's 16-byte (uint8) and 4-float mirrored moves.
GEOMETRY_SHAPES = [(5, 3, 12, 12), (6, 9, 16, 14), (4, 4, 11, 13), (3, 1, 9, 9), (7, 2, 1, 5),
                   (3, 3, 5, 33), (2, 9, 84, 84)]
P_VALUES = [0.0, 1.0, 0.5, 0.2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", GEOMETRY_SHAPES, ids=str)
@pytest.mark.parametrize("axis", ["horizontal", "vertical"])
@pytest.mark.parametrize("p", P_VALUES)
def test_flip_matches_reference(dtype, shape, axis, p):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS:
        got = ops.flip(x, seed=seed, step=step, p=p, axis=axis)
        assert_same(got, RO.flip(x, seed=seed, step=step, p=p, axis=axis))
    if p == 0.0:
        assert_same(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
# Sides on both sides of the CPU's 16 x 16 (uint8) and 4 x 4 (float) transposed blocks.
@pytest.mark.parametrize("shape", [(5, 3, 12, 12), (6, 9, 13, 13), (4, 4, 1, 1), (3, 1, 2, 2),
                                   (3, 3, 16, 16), (3, 2, 33, 33), (2, 9, 84, 84)], ids=str)
@pytest.mark.parametrize("p", P_VALUES)
def test_rotate_matches_reference(dtype, shape, p):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS:
        assert_same(ops.rotate(x, seed=seed, step=step, p=p), RO.rotate(x, seed=seed, step=step, p=p))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,size", [
    ((5, 3, 12, 12), 16), ((6, 9, 13, 11), (20, 15)), ((4, 4, 7, 9), (7, 9)), ((3, 1, 1, 1), (5, 1)),
    ((2, 6, 84, 84), 108),
], ids=str)
def test_translate_matches_reference(dtype, shape, size):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS:
        got = ops.translate(x, seed=seed, step=step, size=size)
        assert_same(got, RO.translate(x, seed=seed, step=step, size=size))
    if size == shape[2:]:
        assert_same(got, x)


CUTOUTS = [
    {}, {"min": 1, "max": 1}, {"min": 3, "max": 7, "fill": "color"}, {"min": 5, "max": 40, "p": 0.5},
    {"min": 2, "max": 4, "fill": "color", "p": 0.0}, {"min": 20, "max": 30, "fill": "color", "p": 0.3},
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 3, 12, 12), (6, 9, 16, 13), (5, 2, 11, 7), (4, 1, 31, 35)], ids=str)
@pytest.mark.parametrize("kw", CUTOUTS, ids=str)
def test_cutout_matches_reference(dtype, shape, kw):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS:
        got = ops.cutout(x, seed=seed, step=step, **kw)
        assert_same(got, RO.cutout(x, seed=seed, step=step, **kw))
    if kw.get("p") == 0.0:
        assert_same(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(6, 3, 12, 12), (5, 9, 13, 11), (3, 3, 1, 1)], ids=str)
@pytest.mark.parametrize("p", P_VALUES)
def test_grayscale_matches_reference(dtype, shape, p):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS:
        got = ops.grayscale(x, seed=seed, step=step, p=p)
        assert_same(got, RO.grayscale(x, seed=seed, step=step, p=p))
    if p == 0.0:
        assert_same(got, x)


JITTERS = [
    {},
    {"brightness": 0.5, "contrast": 0, "saturation": 0, "hue": 0},
    {"brightness": 0, "contrast": 0.8, "saturation": 0, "hue": 0},
    {"brightness": 0, "contrast": 0, "saturation": 0.9, "hue": 0},
    {"brightness": 0, "contrast": 0, "saturation": 0, "hue": 0.5},
    {"brightness": 0.3, "contrast": 0.2, "saturation": 0, "hue": 0.1},
    {"brightness": 2.0, "contrast": 3.0, "saturation": 5.0, "hue": 0.25, "p": 0.5},
    {"brightness": 100.0, "contrast": 100.0, "saturation": 100.0, "hue": 0.5},
    {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.5, "p": 0.0},
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(8, 3, 12, 12), (6, 9, 13, 11), (4, 3, 1, 2)], ids=str)
@pytest.mark.parametrize("kw", JITTERS, ids=str)
def test_color_jitter_matches_reference(dtype, shape, kw):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS[:2]:
        got = ops.color_jitter(x, seed=seed, step=step, **kw)
        assert_same(got, RO.color_jitter(x, seed=seed, step=step, **kw))
        assert_near_f64(got, RO.color_jitter(x, seed=seed, step=step, math="f64", **kw))
    if kw.get("p") == 0.0:
        assert_same(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_color_jitter_zero_strengths_are_identity(dtype):
    x = random_obs((8, 6, 10, 9), dtype)
    got = ops.color_jitter(x, seed=SEED, step=STEP, brightness=0, contrast=0, saturation=0, hue=0)
    assert_same(got, x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_color_jitter_saturated_frames(dtype):
    # flat frames (d = 0 in the hue step), pure colours and the extremes 0 / 255
    values = torch.tensor([[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255],
                           [128, 128, 128], [255, 255, 0], [1, 0, 0]], dtype=torch.uint8)
    x = values.view(8, 3, 1, 1).expand(8, 3, 3, 4).contiguous().to(dtype)
    for kw in JITTERS[:8]:
        got = ops.color_jitter(x, seed=SEED, step=STEP, **kw)
        assert_same(got, RO.color_jitter(x, seed=SEED, step=STEP, **kw))


CONVS = [dict(init=i, padding=p, activation=a) for i in ("normal", "xavier")
         for p in ("replicate", "zeros") for a in ("sigmoid", "none")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3, 12, 12), (4, 9, 9, 13), (3, 3, 1, 1), (2, 3, 2, 5)], ids=str)
@pytest.mark.parametrize("kw", CONVS, ids=str)
@pytest.mark.parametrize("exact", [
    pytest.param(False, id="near_float64"),                       # the float64 reference, within tolerance
    pytest.param(True, id="exact", marks=needs_float_math),       # the float32 reference, bit for bit
])
def test_random_conv_against_reference(exact, dtype, shape, kw):
    x = random_obs(shape, dtype)
    for seed, step in SEEDS[:2]:
        got = ops.random_conv(x, seed=seed, step=step, **kw)
        if exact:
            assert_same(got, RO.random_conv(x, seed=seed, step=step, **kw))
        else:
            assert_near_f64(got, RO.random_conv(x, seed=seed, step=step, math="f64", **kw))


@pytest.mark.parametrize("name,kw", [
    ("flip", {"p": 0.5}), ("rotate", {"p": 0.7}), ("translate", {"size": 14}),
    ("cutout", {"min": 2, "max": 6, "fill": "color", "p": 0.6}), ("grayscale", {"p": 0.5}),
    ("color_jitter", {"p": 0.7}),
])
def test_op_index_changes_draws(name, kw):
    x = random_obs((32, 3, 12, 12), torch.float32)
    fn = getattr(ops, name)
    a = fn(x, seed=SEED, step=STEP, op_index=0, **kw)
    for k in (1, 0x4000, 0x7FFF):
        b = fn(x, seed=SEED, step=STEP, op_index=k, **kw)
        assert not torch.equal(a, b), k
        assert_same(b, RO.apply_op(x, None, {"op": name, **kw}, seed=SEED, step=STEP, op_index=k))


@needs_float_math
def test_random_conv_op_index():
    x = random_obs((4, 3, 6, 6))
    a = ops.random_conv(x, seed=SEED, step=STEP, op_index=0)
    b = ops.random_conv(x, seed=SEED, step=STEP, op_index=0x7FFF)
    assert not torch.equal(a, b)
    assert_same(b, RO.random_conv(x, seed=SEED, step=STEP, op_index=0x7FFF))


def test_parameters_shared_by_the_frames_of_a_sample():
    frame = random_obs((16, 3, 10, 10))
    x = frame.repeat(1, 3, 1, 1)
    for name, kw in [("flip", {}), ("rotate", {}), ("translate", {"size": 13}),
                     ("cutout", {"min": 2, "max": 8, "fill": "color"}), ("grayscale", {"p": 0.5}),
                     ("color_jitter", {}), ("random_conv", {})]:
        out = getattr(ops, name)(x, seed=SEED, step=STEP, **kw)
        assert torch.equal(out[:, 0:3], out[:, 3:6]) and torch.equal(out[:, 0:3], out[:, 6:9]), name
        assert not torch.equal(out, x), name


# ----------------------------------------------------------------- pipelines

def random_pipeline(rng, h, w, c, length, barriers=True):
    """(ops, pool frame size or None): a valid random list of both families' ops on h x w frames;
    without `barriers`, no random_conv and no color_jitter contrast (the CPU's row-run path)."""
    pipe, pool_hw = [], None
    for _ in range(length):
        choices = ["shift", "crop", "flip", "translate", "cutout"]
        if h == w:
            choices.append("rotate")
        if c == 3:
            choices += ["grayscale", "color_jitter"] + (["random_conv"] if barriers else [])
        if pool_hw in (None, (h, w)):
            choices.append("overlay")
        name = rng.choice(choices)
        if name == "shift":
            op = {"op": "shift", "pad": rng.choice([0, 1, 4]), "padding": rng.choice(["replicate", "zeros"])}
        elif name == "crop":
            nh, nw = rng.randint(max(1, h - 5), h), rng.randint(max(1, w - 5), w)
            op = {"op": "crop", "size": [nh, nw], "center": rng.random() < 0.2}
            h, w = nh, nw
        elif name == "translate":
            nh, nw = h + rng.randint(0, 6), w + rng.randint(0, 6)
            op = {"op": "translate", "size": [nh, nw]}
            h, w = nh, nw
        elif name == "flip":
            op = {"op": "flip", "p": rng.choice([0.5, 1.0, 0.3]), "axis": rng.choice(["horizontal", "vertical"])}
        elif name == "rotate":
            op = {"op": "rotate", "p": rng.choice([0.5, 1.0])}
        elif name == "cutout":
            lo = rng.randint(1, 6)
            op = {"op": "cutout", "min": lo, "max": lo + rng.randint(0, 8),
                  "fill": rng.choice(["zeros", "color"]), "p": rng.choice([1.0, 0.6])}
        elif name == "grayscale":
            op = {"op": "grayscale", "p": rng.choice([1.0, 0.4])}
        elif name == "color_jitter":
            op = {"op": "color_jitter", "p": rng.choice([1.0, 0.8]),
                  **{k: rng.choice([0.0, 0.4, 1.0]) for k in ("brightness", "contrast", "saturation")},
                  "hue": rng.choice([0.0, 0.2, 0.5])}
            if not barriers:
                op["contrast"] = 0.0
        elif name == "random_conv":
            op = {"op": "random_conv", "init": rng.choice(["normal", "xavier"]),
                  "padding": rng.choice(["replicate", "zeros"]), "activation": rng.choice(["sigmoid", "none"])}
        else:
            op = {"op": "overlay", "alpha": rng.choice([0.3, 0.5]), "per_frame": rng.random() < 0.3}
            pool_hw = (h, w)
        if rng.random() < 0.15:
            op["index"] = rng.randint(0, 0x7FFF)
        pipe.append(op)
    return pipe, pool_hw


def sequential(obs, pool, pipeline, seed, step):
    """The library's single ops one after another, op_index = position (or the op's index)."""
    v = obs
    for k, op in enumerate(pipeline):
        kw = {key: value for key, value in op.items() if key not in ("op", "index")}
        kw["op_index"] = op.get("index", k)
        if op["op"] == "overlay":
            v = ops.overlay(v, pool, seed=seed, step=step, **kw)
        else:
            v = getattr(ops, op["op"])(v, seed=seed, step=step, **kw)
    return v


def uses_float_math(pipe):
    return any(op["op"] == "random_conv" for op in pipe)


PIPELINE_CASES = [(i, dt, c) for i in range(12) for dt in ("uint8", "float32") for c in (3, 1)]


@pytest.mark.parametrize("case,dtype,c", PIPELINE_CASES)
def test_random_pipelines_fused_equal_sequential_and_reference(case, dtype, c):
    rng = random.Random(1000 + case)
    h, w = rng.choice([(12, 12), (11, 11), (13, 10), (9, 14)])
    s = rng.choice([1, 3]) if c == 3 else rng.choice([1, 2, 4])
    pipe, pool_hw = random_pipeline(rng, h, w, c, rng.randint(2, 5))
    dt = getattr(torch, dtype)
    x = random_obs((rng.randint(1, 6), s * c, h, w), dt, seed=case)
    pool = None if pool_hw is None else random_pool(5, c, *pool_hw, seed=case)
    seed, step = rng.randrange(2**64), rng.randrange(2**64)
    fused = ops.augment(x, pool, ops=pipe, seed=seed, step=step)
    assert_same(fused, sequential(x, pool, pipe, seed, step))
    if uses_float_math(pipe) and not RO.has_float_math():
        pytest.skip("random_conv's bit-exact reference needs obsaug._C.float_math")
    assert_same(fused, RO.augment(x, pool, ops=pipe, seed=seed, step=step, channels=c))


BARRIER_FREE_CASES = ([(i, dt, c, False) for i in range(16) for dt in ("uint8", "float32")
                       for c in (3, 1)] +
                      [(i, "uint8", c, True) for i in range(16, 28) for c in (3, 1)])
WIDE_WIDTHS = [64, 65, 84, 100, 128, 150]


@pytest.mark.parametrize("case,dtype,c,wide", BARRIER_FREE_CASES)
def test_barrier_free_pipelines_in_every_form(case, dtype, c, wide):
    """Pipelines without a barrier run on the CPU's row runs (transposed gathers for quarter
    turns, masked rows for cutouts, whole planes for grayscale and jitter): out of place, in
    place, gathered and with a float affine, against the reference. `wide`: uint8 rows of 64
    bytes and more, which the CPU gathers as whole 32-byte vectors: a row's middle in three
    vectors (up to 96 bytes), four (up to 128) or a loop (longer), each width twice per c."""
    rng = random.Random(5000 + case)
    h = w = WIDE_WIDTHS[case % len(WIDE_WIDTHS)] if wide else rng.choice([12, 11, 9, 18, 35])
    if rng.random() < 0.3 and not wide:
        h, w = rng.choice([(13, 10), (9, 14)])
    s = rng.choice([1, 3]) if c == 3 else rng.choice([1, 2, 4])
    pipe, pool_hw = random_pipeline(rng, h, w, c, rng.randint(3, 6), barriers=False)
    if case % 4 == 0 and h == w:  # an overlay the quarter turn after it moves onto other axes
        pipe = [{"op": "overlay", "alpha": 0.5}, {"op": "rotate", "p": 1.0}] + pipe
        pool_hw = pool_hw if pool_hw == (h, w) else None
        if pool_hw is None:
            pipe = pipe[:2] + [op for op in pipe[2:] if op["op"] != "overlay"]
            pool_hw = (h, w)
    dt = getattr(torch, dtype)
    n = rng.randint(1, 6)
    x = random_obs((n, s * c, h, w), dt, seed=case)
    pool = None if pool_hw is None else random_pool(5, c, *pool_hw, seed=case)
    seed, step = rng.randrange(2**64), rng.randrange(2**64)
    want = RO.augment(x, pool, ops=pipe, seed=seed, step=step, channels=c)
    assert_same(ops.augment(x, pool, ops=pipe, seed=seed, step=step), want)
    if ops.frame_sizes(pipe, h, w)[-1] == (h, w):
        y = x.clone()
        ops.augment(y, pool, ops=pipe, seed=seed, step=step, inplace=True)
        assert_same(y, want)
    storage = random_obs((7, c, h, w), dt, seed=case + 1)
    indices = torch.tensor([[rng.randrange(7) for _ in range(s)] for _ in range(n)])
    assert_same(ops.gather_augment(storage, indices, pool, ops=pipe, seed=seed, step=step),
                RO.gather_augment(storage, indices, pool, ops=pipe, seed=seed, step=step))
    out = ops.augment(x, pool, ops=pipe, seed=seed, step=step, out_dtype=torch.float32,
                      scale=0.5, bias=-3.0)
    assert_same(out, R.to_output(want, torch.float32, 0.5, -3.0))


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("name,pipe,n", [
    # 9 shifts x 2 flips: most of the 200 samples share their geometry with an earlier one
    ("shared", [{"op": "shift", "pad": 1}, {"op": "flip", "p": 0.5},
                {"op": "overlay", "alpha": 0.3}], 200),
    # 2 gates x 3 quarter turns x 25 shifts: samples that differ only in their turn (or only in
    # the gate) must not share
    ("turns", [{"op": "rotate", "p": 0.7}, {"op": "shift", "pad": 2},
               {"op": "overlay", "alpha": 0.4}], 300),
    # cutouts make nearly every sample's geometry its own (nothing shared)
    ("cutouts", [{"op": "shift", "pad": 2}, {"op": "cutout", "min": 1, "max": 8},
                 {"op": "overlay", "alpha": 0.5}], 300),
])
def test_samples_sharing_a_geometry(name, pipe, n, inplace):
    """Large batches, in place and out of place: samples with the same geometric draws still
    get their own distractor image and weight, and every sample matches the reference."""
    x = random_obs((n, 6, 12, 12), torch.uint8, seed=7)
    assert_augment_matches_reference(x, random_pool(16, 3, 12, 12, seed=8), pipe, inplace)


def assert_augment_matches_reference(x, pool, pipe, inplace):
    """ops.augment of x (in place on a copy, or out of place) against the reference, seed 11,
    step 3."""
    want = RO.augment(x, pool, ops=pipe, seed=11, step=3)
    if inplace:
        got = x.clone()
        ops.augment(got, pool, ops=pipe, seed=11, step=3, inplace=True)
    else:
        got = ops.augment(x, pool, ops=pipe, seed=11, step=3)
    assert_same(got, want)


def test_geometries_kept_only_for_the_same_pipeline():
    """Calls one after another on the same threads, all drawing the same (seed, step): on other
    frame sizes, another pipeline, in place and out of place, and the first pipeline again
    (whose geometries are kept). Each call matches the reference."""
    shift, zeros = {"op": "shift", "pad": 2}, {"op": "shift", "pad": 2, "padding": "zeros"}
    overlay = {"op": "overlay", "alpha": 0.5}
    for (h, w), pipe, inplace in [((12, 12), [shift, overlay], False),
                                  ((16, 12), [shift, overlay], False),
                                  ((16, 12), [zeros, overlay], False),
                                  ((16, 12), [zeros, overlay], True),
                                  ((12, 12), [shift, overlay], True),
                                  ((12, 12), [shift, overlay], False)]:
        assert_augment_matches_reference(random_obs((64, 6, h, w), torch.uint8, seed=h),
                                         random_pool(16, 3, h, w, seed=w), pipe, inplace)


# named pipelines: barriers, crops, translate, rotate on a square frame
CROP = {"op": "crop", "size": [10, 10]}
JITTER = {"op": "color_jitter", "brightness": 0.4, "contrast": 0.6, "saturation": 0.5, "hue": 0.3}
CONV = {"op": "random_conv"}
NAMED = [
    ("shift_conv_overlay", [{"op": "shift", "pad": 4}, CONV, {"op": "overlay", "alpha": 0.4}], (12, 12)),
    ("crop_jitter_rotate", [CROP, JITTER, {"op": "rotate", "p": 1.0}], None),
    ("translate_jitter_conv_crop", [{"op": "translate", "size": 16}, JITTER, CONV,
                                    {"op": "crop", "size": 12}], None),
    ("overlay_jitter_flip_cutout", [{"op": "overlay", "alpha": 0.5}, JITTER, {"op": "flip", "p": 1.0},
                                    {"op": "cutout", "min": 2, "max": 5, "fill": "color"}], (12, 12)),
    ("rad", [{"op": "crop", "size": 10}, {"op": "flip", "p": 0.2}, {"op": "rotate", "p": 0.3},
             {"op": "grayscale", "p": 0.3}, {"op": "cutout", "min": 2, "max": 6}], None),
    ("conv_conv_shiftzeros", [CONV, {"op": "random_conv", "padding": "zeros", "activation": "none"},
                              {"op": "shift", "pad": 2, "padding": "zeros"}], None),
    ("rotate_shift_gray_jitter", [{"op": "rotate", "p": 0.6}, {"op": "shift", "pad": 3},
                                  {"op": "grayscale", "p": 0.5}, {"op": "color_jitter", "p": 0.7}], None),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,pipe,pool_hw", NAMED, ids=[n[0] for n in NAMED])
def test_named_pipelines(dtype, name, pipe, pool_hw):
    x = random_obs((6, 9, 12, 12), dtype)
    pool = None if pool_hw is None else random_pool(5, 3, *pool_hw)
    fused = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP)
    assert_same(fused, sequential(x, pool, pipe, SEED, STEP))
    keeps = ops.frame_sizes(pipe, 12, 12)[-1] == (12, 12)
    if keeps:
        y = x.clone()
        assert ops.augment(y, pool, ops=pipe, seed=SEED, step=STEP, inplace=True) is y
        assert_same(y, fused)
    if dtype == torch.uint8:
        out = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP, out_dtype=torch.float32,
                          scale=1 / 255, bias=-0.5)
        assert_same(out, R.to_output(fused, torch.float32, 1 / 255, -0.5))
    if uses_float_math(pipe) and not RO.has_float_math():
        pytest.skip("random_conv's bit-exact reference needs obsaug._C.float_math")
    assert_same(fused, RO.augment(x, pool, ops=pipe, seed=SEED, step=STEP))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,pipe,pool_hw", NAMED, ids=[n[0] for n in NAMED])
def test_named_pipelines_through_gather(dtype, name, pipe, pool_hw):
    storage = random_obs((20, 3, 12, 12), dtype, seed=4)
    indices = torch.tensor([[3, 4, 5], [0, 0, 0], [19, 2, 7], [5, 4, 3]])
    pool = None if pool_hw is None else random_pool(5, 3, *pool_hw)
    got = ops.gather_augment(storage, indices, pool, ops=pipe, seed=SEED, step=STEP)
    gathered = storage[indices.view(-1)].view(4, 9, 12, 12)
    assert_same(got, ops.augment(gathered, pool, ops=pipe, seed=SEED, step=STEP))
    if uses_float_math(pipe) and not RO.has_float_math():
        pytest.skip("random_conv's bit-exact reference needs obsaug._C.float_math")
    assert_same(got, RO.gather_augment(storage, indices, pool, ops=pipe, seed=SEED, step=STEP))


@pytest.mark.parametrize("name,kw", [
    ("flip", {"p": 0.5, "axis": "vertical"}), ("rotate", {"p": 0.5}),
    ("cutout", {"min": 2, "max": 5, "fill": "color"}), ("grayscale", {"p": 0.5}),
    ("color_jitter", {}), ("random_conv", {"activation": "none"}),
])
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_op_inplace(name, kw, dtype):
    x = random_obs((6, 9, 11, 11), dtype)
    want = ops.augment(x, None, ops=[{"op": name, **kw}], seed=SEED, step=STEP)
    assert_same(want, getattr(ops, name)(x, seed=SEED, step=STEP, **kw))
    y = x.clone()
    assert ops.augment(y, None, ops=[{"op": name, **kw}], seed=SEED, step=STEP, inplace=True) is y
    assert_same(y, want)


def test_empty_batch_of_new_ops():
    x = torch.zeros(0, 9, 10, 10, dtype=torch.uint8)
    pipe = [{"op": "translate", "size": 12}, {"op": "random_conv"}, {"op": "color_jitter"},
            {"op": "cutout", "min": 2, "max": 3}]
    assert ops.augment(x, None, ops=pipe, seed=SEED, step=STEP).shape == (0, 9, 12, 12)


# -------------------------------------------------------------------- errors

def obs(b=2, sc=9, h=12, w=12, dtype=torch.uint8):
    return torch.zeros(b, sc, h, w, dtype=dtype)


S = dict(seed=SEED, step=STEP)
LEAD = {"op": "shift", "pad": 1}  # so the bad op sits at position 1

# (op dict, obs shape, key, the value as the message prints it, words of what it needs)
BAD_OPS = [
    ({"op": "rotate"}, (2, 9, 12, 10), "12x10", "12x10", "square"),
    ({"op": "translate", "size": 11}, (2, 9, 12, 12), "size", "11", "12"),
    ({"op": "translate", "size": [16, 10]}, (2, 9, 12, 12), "size", "10", "12"),
    ({"op": "cutout", "min": 8, "max": 5}, (2, 9, 12, 12), "max", "5", "8"),
    ({"op": "cutout", "min": 0}, (2, 9, 12, 12), "min", "0", "1"),
    ({"op": "flip", "p": 1.5}, (2, 9, 12, 12), "p", "1.5", "[0, 1]"),
    ({"op": "rotate", "p": -0.1}, (2, 9, 12, 12), "p", "-0.1", "[0, 1]"),
    ({"op": "cutout", "p": 2.0}, (2, 9, 12, 12), "p", "2", "[0, 1]"),
    ({"op": "grayscale", "p": -1.0}, (2, 9, 12, 12), "p", "-1", "[0, 1]"),
    ({"op": "color_jitter", "p": 1.01}, (2, 9, 12, 12), "p", "1.01", "[0, 1]"),
    ({"op": "color_jitter", "brightness": -0.1}, (2, 9, 12, 12), "brightness", "-0.1", "[0, 100]"),
    ({"op": "color_jitter", "contrast": -1.0}, (2, 9, 12, 12), "contrast", "-1", "[0, 100]"),
    ({"op": "color_jitter", "saturation": -2.0}, (2, 9, 12, 12), "saturation", "-2", "[0, 100]"),
    ({"op": "color_jitter", "hue": 0.6}, (2, 9, 12, 12), "hue", "0.6", "[0, 0.5]"),
    ({"op": "color_jitter", "hue": -0.1}, (2, 9, 12, 12), "hue", "-0.1", "[0, 0.5]"),
    ({"op": "random_conv", "init": "uniform"}, (2, 9, 12, 12), "init", "uniform", "xavier"),
    ({"op": "random_conv", "padding": "reflect"}, (2, 9, 12, 12), "padding", "reflect", "replicate"),
    ({"op": "random_conv", "activation": "relu"}, (2, 9, 12, 12), "activation", "relu", "sigmoid"),
    ({"op": "flip", "axis": "diagonal"}, (2, 9, 12, 12), "axis", "diagonal", "horizontal"),
    ({"op": "cutout", "fill": "noise"}, (2, 9, 12, 12), "fill", "noise", "color"),
]


@pytest.mark.parametrize("op,shape,key,got,needs", BAD_OPS, ids=lambda v: str(v))
def test_bad_ops_name_index_key_value_and_need(op, shape, key, got, needs):
    x = obs(*shape)
    name = op["op"]
    raises(ValueError, lambda: ops.augment(x, None, ops=[LEAD, op], **S), f"op 1 ({name})", key, got, needs)
    kw = {k: v for k, v in op.items() if k != "op"}
    raises(ValueError, lambda: getattr(ops, name)(x, **kw, **S), f"op 0 ({name})", key, got, needs)
    assert torch.equal(x, obs(*shape)), "a rejected call wrote obs"


@needs_engine
@pytest.mark.parametrize("op,shape,key,got,needs", BAD_OPS, ids=lambda v: str(v))
def test_bad_ops_in_an_engine_dict(op, shape, key, got, needs):
    _, sc, h, w = shape
    c = 3 if sc % 3 == 0 else 1
    config = {"seed": 0, "frames": {"stack": sc // c, "channels": c, "height": h, "width": w},
              "pipeline": [LEAD, op],
              "pool": {"size": 2, "sources": [PHOTOS], "refresh": {"threads": 0}}}
    where = "pipeline[1]" if key == f"{h}x{w}" else f"pipeline[1].{key}"
    error = raises(ValueError, lambda: obsaug.Engine(config), where, got, needs)
    assert "pipeline[1].:" not in str(error), f"an empty key in the key path: {error}"


RGB_OPS = ["grayscale", "color_jitter", "random_conv"]


@pytest.mark.parametrize("name", RGB_OPS)
@pytest.mark.parametrize("sc", [4, 2, 5])
def test_rgb_ops_need_three_channels(name, sc):
    x = obs(2, sc)
    raises(ValueError, lambda: ops.augment(x, None, ops=[LEAD, {"op": name}], **S),
           f"op 1 ({name})", "c = 3", "got", str(sc))
    raises(ValueError, lambda: getattr(ops, name)(x, **S), f"op 0 ({name})", "c = 3", "got", str(sc))
    gray_pool = torch.zeros(3, 1, 12, 12, dtype=torch.uint8)  # C = 1 from the pool
    raises(ValueError, lambda: ops.augment(obs(2, 3), gray_pool, ops=[{"op": "overlay"}, {"op": name}], **S),
           f"op 1 ({name})", "c = 3", "got c = 1")


@needs_engine
@pytest.mark.parametrize("name", RGB_OPS)
def test_rgb_ops_need_three_channels_in_an_engine_dict(name):
    config = {"seed": 0, "frames": {"stack": 2, "channels": 1, "height": 12, "width": 12},
              "pipeline": [LEAD, {"op": name}],
              "pool": {"size": 2, "sources": [PHOTOS], "refresh": {"threads": 0}}}
    raises(ValueError, lambda: obsaug.Engine(config), "pipeline[1]", name, "c = 3", "got frames.channels = 1")


# ------------------------------------------- which C the ops that need it see

CUT = [{"op": "cutout", "min": 3, "max": 5, "fill": "color"}]


def test_a_pool_gives_c_even_when_the_pipeline_does_not_overlay():
    """Three stacked grayscale frames (S*C = 3) with a C = 1 pool: the cutout's colour is
    channel 0's in every frame, as the reference with C = 1 says (not one colour per frame
    as guessed RGB would give)."""
    x = random_obs((6, 3, 12, 12), torch.uint8)
    pool = random_pool(2, 1, 12, 12)
    got = ops.augment(x, pool, ops=CUT, seed=SEED, step=STEP)
    assert_same(got, RO.augment(x, None, ops=CUT, seed=SEED, step=STEP, channels=1))
    assert not torch.equal(got, RO.augment(x, None, ops=CUT, seed=SEED, step=STEP, channels=3))
    assert_same(ops.augment(x, None, ops=CUT, seed=SEED, step=STEP),      # no pool: RGB guess
                RO.augment(x, None, ops=CUT, seed=SEED, step=STEP, channels=3))
    empty = random_pool(1, 1, 12, 12)[:0]                                  # P = 0: still C = 1
    assert_same(ops.augment(x, empty, ops=CUT, seed=SEED, step=STEP), got)


# (C, S): stacked grayscale frames whose S*C is a multiple of 3, RGBD, two-channel
# frames, RGB; each C differs from the guess (3 when S*C is a multiple of 3) but the last.
FRAME_CHANNEL_CASES = [(1, 3), (1, 6), (4, 3), (2, 3), (2, 6), (3, 2)]


@pytest.mark.parametrize("c,s", FRAME_CHANNEL_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_frame_channels_tells_the_ops_c(c, s, dtype):
    """frame_channels=C makes augment (out of place, out=, in place, float output) and the
    single ops see C-channel frames: the reference with channels=C, whatever S*C suggests."""
    rng = random.Random(c * 100 + s)
    for case in range(4):
        h = w = rng.choice([9, 12, 16])
        pipe, pool_hw = random_pipeline(rng, h, w, c, rng.randint(2, 5))
        if case == 0:  # a cutout's colour per channel always, whatever the draw
            pipe = [dict(CUT[0], p=1.0)] + pipe
        x = random_obs((5, s * c, h, w), dtype, seed=case)
        pool = None if pool_hw is None else random_pool(3, c, *pool_hw, seed=case)
        want = RO.augment(x, pool, ops=pipe, seed=SEED, step=STEP + case, channels=c)
        got = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP + case, frame_channels=c)
        assert_same(got, want)
        out = torch.full_like(want, 7)
        ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP + case, frame_channels=c, out=out)
        assert_same(out, want)
        if ops.frame_sizes(pipe, h, w)[-1] == (h, w):
            y = x.clone()
            ops.augment(y, pool, ops=pipe, seed=SEED, step=STEP + case, frame_channels=c,
                        inplace=True)
            assert_same(y, want)
        if dtype == torch.uint8:
            assert_same(ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP + case,
                                    frame_channels=c, out_dtype=torch.float32, scale=0.5),
                        want.float() * 0.5)
    x = random_obs((6, s * c, 12, 12), dtype, seed=9)
    cut = ops.cutout(x, seed=SEED, step=STEP, min=3, max=5, fill="color", frame_channels=c)
    assert_same(cut, RO.augment(x, None, ops=CUT, seed=SEED, step=STEP, channels=c))
    if c != 3 and (s * c) % 3 == 0:  # the guess would have been C = 3: a different colour
        assert not torch.equal(cut, ops.cutout(x, seed=SEED, step=STEP, min=3, max=5,
                                               fill="color"))


def test_frame_channels_none_is_the_guess_and_a_pool_must_agree():
    x = random_obs((4, 6, 12, 12), torch.uint8)
    assert_same(ops.augment(x, ops=CUT, seed=SEED, step=STEP, frame_channels=None),
                ops.augment(x, ops=CUT, seed=SEED, step=STEP))
    assert_same(ops.augment(x, random_pool(2, 1, 12, 12), ops=CUT, seed=SEED, step=STEP,
                            frame_channels=1),
                RO.augment(x, None, ops=CUT, seed=SEED, step=STEP, channels=1))
    raises(ValueError, lambda: ops.augment(x, random_pool(2, 3, 12, 12), ops=CUT, seed=SEED,
                                           step=STEP, frame_channels=1),
           "the pool has C = 3", "but frame_channels is 1")
    raises(ValueError, lambda: ops.grayscale(x, seed=SEED, step=STEP, frame_channels=1),
           "op 0 (grayscale): needs RGB frames", "got C = 1 (frame_channels)")


@pytest.mark.parametrize("value,exc,words", [
    (0, ValueError, ["frame_channels must be C >= 1", "rgbd", "got 0"]),
    (-3, ValueError, ["frame_channels must be C >= 1", "got -3"]),
    (True, TypeError, ["frame_channels must be an int", "bool"]),
    (3.0, TypeError, ["frame_channels must be an int", "float"]),
    ("3", TypeError, ["frame_channels must be an int", "str"]),
    (4, ValueError, ["obs channels (6) must be a multiple of the frame channels c = 4"]),
    (2**63, ValueError, ["frame_channels must fit in int64"]),
])
@pytest.mark.parametrize("form", ["augment", "out=", "inplace", "cutout", "cutout out="])
def test_a_bad_frame_channels_is_refused_before_anything_is_written(value, exc, words, form):
    x = random_obs((2, 6, 8, 8), torch.uint8)
    before = x.clone()
    out = torch.full_like(x, 7)
    call = {
        "augment": lambda: ops.augment(x, ops=CUT, seed=0, step=0, frame_channels=value),
        "out=": lambda: ops.augment(x, ops=CUT, seed=0, step=0, frame_channels=value, out=out),
        "inplace": lambda: ops.augment(x, ops=CUT, seed=0, step=0, frame_channels=value,
                                       inplace=True),
        "cutout": lambda: ops.cutout(x, seed=0, step=0, frame_channels=value),
        "cutout out=": lambda: ops.cutout(x, seed=0, step=0, frame_channels=value, out=out),
    }[form]
    raises(exc, call, *words)
    assert torch.equal(x, before) and bool((out == 7).all())


def test_the_torch_ops_refuse_a_negative_frame_channels():
    """The schemas' 0 means "infer C"; below it the native check answers (the Python
    functions refuse it first)."""
    x = random_obs((2, 6, 8, 8), torch.uint8)
    raises(ValueError, lambda: torch.ops.obsaug.augment(x, None, "op=flip", 0, 0, None, 1.0, 0.0,
                                                        -2),
           "frame_channels must be C in [1, 2^31)", "or 0 to infer it, got -2")
    raises(ValueError, lambda: torch.ops.obsaug.cutout(x, 0, 0, frame_channels=-1),
           "frame_channels must be C in [1, 2^31)", "got -1")


@pytest.mark.parametrize("c", [2**31, 2**32, 2**32 + 3, 2**62])
def test_a_frame_channels_beyond_int32_is_refused_not_wrapped(c):
    """C is an int32 in the kernels' descriptor: 2^32 would wrap to 0 (a division by
    zero), 2^32 + 3 to 3. S*C can be that large through a zero-stride view."""
    x = torch.zeros(1, 1, 1, 1, dtype=torch.uint8).expand(1, c, 1, 1)
    for call in (lambda: ops.augment(x, ops=[{"op": "flip", "p": 1.0}], seed=0, step=0,
                                     frame_channels=c),
                 lambda: ops.flip(x, seed=0, step=0, p=1.0, frame_channels=c)):
        raises(ValueError, call, "frame_channels must be C in [1, 2^31)", f"got {c}")


def test_a_pool_of_two_to_the_32_channels_is_refused_not_wrapped():
    pool = torch.zeros(1, 1, 1, 1, dtype=torch.uint8).expand(1, 2**32, 1, 1)
    x = torch.zeros(1, 1, 1, 1, dtype=torch.uint8).expand(1, 2**32, 1, 1)
    raises(ValueError, lambda: ops.augment(x, pool, ops=[{"op": "flip"}], seed=0, step=0),
           "frames of C = 4294967296 channels (the pool's channels)", "C must lie in [1, 2^31)")


@needs_engine
@pytest.mark.parametrize("channels,stack", [(1, 3), (3, 1)])
def test_the_engine_gives_its_frames_channels_to_augment(channels, stack):
    """An Engine on grayscale stacks (frames.channels 1) augments with C = 1 although S*C
    is a multiple of 3, so augment, augment_ and gather_augment agree."""
    config = {"seed": 5, "frames": {"stack": stack, "channels": channels, "height": 12, "width": 12},
              "pipeline": CUT, "pool": {"size": 2, "sources": [PHOTOS], "refresh": {"threads": 0}}}
    storage = random_obs((8, channels, 12, 12), torch.uint8)
    idx = torch.randint(0, 8, (6, stack))
    x = storage[idx].reshape(6, stack * channels, 12, 12)
    want = RO.augment(x, None, ops=CUT, seed=5, step=0, channels=channels)
    with obsaug.Engine(config) as engine:
        assert_same(engine.augment(x, step=0), want)
        y = x.clone()
        engine.augment_(y, step=0)
        assert_same(y, want)
        assert_same(engine.gather_augment(storage, idx, step=0), want)


def test_more_stacked_frames_than_the_counter_holds_are_refused():
    x = torch.zeros(1, 0x8000, 1, 1, dtype=torch.uint8)
    raises(ValueError, lambda: ops.augment(x, None, ops=[{"op": "flip"}], seed=0, step=0),
           "S = 32768 stacked frames of C = 1", "at most 32767")
    ops.augment(x[:, :0x7fff], None, ops=[{"op": "flip"}], seed=0, step=0)
    storage = torch.zeros(2, 1, 1, 1, dtype=torch.uint8)       # gathered stacks too
    raises(ValueError, lambda: ops.gather_augment(storage, torch.zeros(1, 0x8000, dtype=torch.long),
                                                  ops=[{"op": "flip"}], seed=0, step=0),
           "S = 32768 stacked frames of C = 1", "at most 32767")


def test_overlay_weight_rounds_half_up_from_the_exact_product():
    """alpha * 256 = 0.49999999999999994 rounds to w = 0 (the obs unchanged), not to 1."""
    alpha = 0.49999999999999994 / 256
    assert alpha * 256 == 0.49999999999999994 and R.weight(alpha) == 0
    assert R.weight(0.5 / 256) == 1 and R.weight(0.5) == 128
    x = random_obs((4, 3, 6, 6), torch.uint8)
    pool = random_pool(3, 3, 6, 6)
    got = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=alpha)
    assert_same(got, x)
    assert_same(got, R.overlay(x, pool, seed=SEED, step=STEP, alpha=alpha))
