"""The second family's draws follow their distributions (DESIGN.md section 3a):
gates follow p, rotate's quarter turns, cutout's sizes, offsets and colours,
translate's offsets and color_jitter's factors are uniform, random_conv's
Box-Muller normals are N(0, std^2) (mean, variance, Kolmogorov-Smirnov).

Everything is recovered from the library's outputs on crafted inputs, so these
test obsaug itself. Seeds are fixed (deterministic); every threshold is taken at
p = 1e-4 (chi-square critical values from test_statistics.py)."""
import math

import pytest
import torch

import obsaug
from test_statistics import P_VALUE, assert_uniform, chi2_critical, coordinate_image

ops = obsaug.ops
Z_CRIT = 3.8906  # two-sided normal critical value at p = 1e-4


def assert_rate(applied: torch.Tensor, p: float, what: str):
    """Booleans per sample: p = 0 never, p = 1 always, else a chi-square (dof 1) on the rate."""
    n, k = applied.numel(), int(applied.sum())
    if p == 0.0:
        assert k == 0, f"{what}: applied {k} times with p = 0"
        return
    if p == 1.0:
        assert k == n, f"{what}: applied {k} of {n} times with p = 1"
        return
    t = min(2**24, math.ceil(p * 2**24)) / 2**24
    stat = (k - n * t) ** 2 / (n * t) + ((n - k) - n * (1 - t)) ** 2 / (n * (1 - t))
    assert stat < chi2_critical(1), f"{what}: {k} of {n} applied, p = {p}, chi2 = {stat:.1f}"


GATE_PS = [0.0, 0.2, 0.5, 0.7, 1.0]
N = 6000


def distinct_image(b, h=3, w=4):
    """[b, 3, h, w] float32 whose pixels all differ and whose channels differ."""
    return torch.arange(3 * h * w, dtype=torch.float32).view(1, 3, h, w).expand(b, 3, h, w).contiguous()


@pytest.mark.parametrize("p", GATE_PS)
def test_gates_follow_p(p):
    x, square = distinct_image(N), distinct_image(N, 4, 4)

    def changed(out, x=x):
        return (out != x).flatten(1).any(dim=1)

    assert_rate(changed(ops.flip(x, seed=1, step=2, p=p)), p, "flip")
    assert_rate(changed(ops.flip(x, seed=1, step=2, p=p, axis="vertical")), p, "flip vertical")
    assert_rate(changed(ops.rotate(square, seed=3, step=4, p=p), square), p, "rotate")
    assert_rate(changed(ops.grayscale(x, seed=5, step=6, p=p)), p, "grayscale")
    assert_rate(changed(ops.cutout(x + 1, seed=7, step=8, min=1, max=2, p=p) - 1), p, "cutout")
    jitter = ops.color_jitter(x + 100, seed=9, step=10, brightness=0.5, contrast=0, saturation=0, hue=0,
                              p=p)
    assert_rate(changed(jitter - 100), p, "color_jitter")


def test_gates_of_ops_are_independent_of_each_other():
    # flip at position 0 and flip at position 1 gate independently: joint counts uniform over 4
    b = 8000
    x = torch.arange(4, dtype=torch.float32).view(1, 1, 1, 4).expand(b, 1, 1, 4).contiguous()
    first = ops.flip(x, seed=11, step=1, p=0.5, op_index=0)[:, 0, 0, 0] == 3
    second = ops.flip(x, seed=11, step=1, p=0.5, op_index=1)[:, 0, 0, 0] == 3
    assert_uniform(first.long() * 2 + second.long(), 4, "two flips' gates jointly")


def test_rotate_quarter_turns_uniform():
    b, n = 9000, 5
    out = ops.rotate(coordinate_image(b, n, n), seed=2024, step=9, p=1.0)
    y, x = out[:, 0, 0, 0].long(), out[:, 1, 0, 0].long()
    # out[0][0] comes from in[0][W-1] (q = 1), in[H-1][W-1] (q = 2), in[H-1][0] (q = 3)
    q = torch.full_like(y, -1)
    q[(y == 0) & (x == n - 1)] = 1
    q[(y == n - 1) & (x == n - 1)] = 2
    q[(y == n - 1) & (x == 0)] = 3
    assert_uniform(q, 3, "rotate q", offset=1)
    gated = ops.rotate(coordinate_image(b, n, n), seed=2024, step=9, p=0.4)
    turned = (gated[:, :, 0, 0] != 0).any(dim=1)
    assert_rate(turned, 0.4, "rotate gate")
    assert torch.equal(gated[turned], out[turned]), "q is drawn whether or not the gate opens"


def assert_uniform_given(values, given, n, what):
    """values[i] uniform on 0 .. n[i] - 1 given given[i]: one chi-square over every (given, value)
    cell, each expected at (samples with that given) / n."""
    stat, dof = 0.0, 0
    for g in given.unique().tolist():
        chosen = values[given == g]
        k = int(n[given == g][0])
        assert chosen.min() >= 0 and chosen.max() < k, f"{what}: values outside 0..{k - 1} for {g}"
        counts = torch.bincount(chosen, minlength=k).double()
        expected = chosen.numel() / k
        stat += ((counts - expected) ** 2 / expected).sum().item()
        dof += k - 1
    crit = chi2_critical(dof)
    assert stat < crit, f"{what}: chi2 = {stat:.1f} >= {crit:.1f} (dof {dof})"


def cutout_box(out):
    """(x0, y0, sw, sh) of the zero rectangle in [b, 1, h, w] outputs of an all-ones input."""
    hole = out[:, 0] == 0
    cols, rows = hole.any(dim=1), hole.any(dim=2)
    sw, sh = cols.sum(dim=1), rows.sum(dim=1)
    x0, y0 = cols.long().argmax(dim=1), rows.long().argmax(dim=1)
    assert torch.equal(hole.sum(dim=(1, 2)), sw * sh), "the cutout is one rectangle"
    return x0, y0, sw, sh


def test_cutout_sizes_uniform():
    lo, hi, b = 10, 30, 21 * 21 * 20
    out = ops.cutout(torch.ones(b, 1, 40, 40, dtype=torch.uint8), seed=5, step=1, min=lo, max=hi)
    x0, y0, sw, sh = cutout_box(out)
    assert_uniform(sw, hi - lo + 1, "cutout width", offset=lo)
    assert_uniform(sh, hi - lo + 1, "cutout height", offset=lo)
    assert_uniform((sw - lo) * (hi - lo + 1) + (sh - lo), (hi - lo + 1) ** 2, "cutout size jointly")
    assert_uniform_given(x0, sw, 40 - sw + 1, "cutout x0 given its width")
    assert_uniform_given(y0, sh, 40 - sh + 1, "cutout y0 given its height")


@pytest.mark.parametrize("size,h,w", [(10, 40, 30), (1, 7, 5), (4, 6, 9)])
def test_cutout_offsets_uniform(size, h, w):
    nx, ny = w - size + 1, h - size + 1
    b = max(30 * nx * ny, 3000)
    out = ops.cutout(torch.ones(b, 1, h, w, dtype=torch.uint8), seed=77, step=3, min=size, max=size)
    x0, y0, sw, sh = cutout_box(out)
    assert torch.all(sw == size) and torch.all(sh == size)
    assert_uniform(x0, nx, "cutout x0")
    assert_uniform(y0, ny, "cutout y0")
    assert_uniform(y0 * nx + x0, nx * ny, "cutout (x0, y0) jointly")


def test_cutout_larger_than_the_frame_covers_it():
    out = ops.cutout(torch.ones(64, 1, 5, 7, dtype=torch.uint8), seed=1, step=1, min=8, max=12)
    assert torch.all(out == 0), "sizes are clamped to the frame: the whole frame is cut out"


def test_cutout_colours_uniform():
    b = 256 * 40
    out = ops.cutout(torch.zeros(b, 6, 1, 1, dtype=torch.uint8), seed=8, step=2, min=1, max=1,
                     fill="color")
    assert torch.equal(out[:, 0:3], out[:, 3:6]), "one colour for every frame of a sample"
    for c in range(3):
        assert_uniform(out[:, c, 0, 0], 256, f"cutout colour channel {c}")
    assert_uniform(out[:, 0, 0, 0] // 16 * 16 + out[:, 1, 0, 0] // 16, 256, "colour channels 0, 1 jointly")


@pytest.mark.parametrize("hw,size", [((5, 5), (9, 9)), ((10, 7), (16, 20)), ((4, 4), (28, 28))])
def test_translate_offsets_uniform(hw, size):
    (h, w), (hc, wc) = hw, size
    nx, ny = wc - w + 1, hc - h + 1
    b = max(30 * nx * ny, 3000)
    out = ops.translate(torch.ones(b, 1, h, w, dtype=torch.uint8), seed=99, step=7, size=size)
    inside = out[:, 0] == 1
    assert torch.all(inside.sum(dim=(1, 2)) == h * w)
    x1 = inside.any(dim=1).long().argmax(dim=1)
    y1 = inside.any(dim=2).long().argmax(dim=1)
    assert_uniform(x1, nx, "translate x1")
    assert_uniform(y1, ny, "translate y1")
    assert_uniform(y1 * nx + x1, nx * ny, "translate (x1, y1) jointly")


def test_color_jitter_factors_uniform():
    # brightness alone on a constant 100 (float): out = 100 * b with b uniform on [0.5, 1.5]
    b = 4000
    out = ops.color_jitter(torch.full((b, 3, 1, 1), 100.0), seed=4, step=4, brightness=0.5, contrast=0,
                           saturation=0, hue=0)
    f = out[:, 0, 0, 0].double() / 100
    assert f.min() >= 0.5 and f.max() <= 1.5
    assert_uniform(((f - 0.5) * 20).floor().clamp(max=19).long(), 20, "brightness factor (20 bins)")
    # a large strength: lo = max(0, 1 - x) = 0
    out = ops.color_jitter(torch.full((b, 3, 1, 1), 0.5), seed=4, step=5, brightness=3.0, contrast=0,
                           saturation=0, hue=0)
    f = out[:, 0, 0, 0].double() / 0.5
    assert f.min() >= 0 and f.max() <= 4
    assert_uniform((f * 5).floor().clamp(max=19).long(), 20, "brightness factor on [0, 4] (20 bins)")


def test_color_jitter_hue_shift_uniform():
    # hue alone on pure red: the output hue is h (mod 1), h uniform on [-0.5, 0.5)
    b = 4000
    x = torch.zeros(b, 3, 1, 1)
    x[:, 0] = 255.0
    out = ops.color_jitter(x, seed=6, step=1, brightness=0, contrast=0, saturation=0, hue=0.5)
    import colorsys
    hues = torch.tensor([colorsys.rgb_to_hsv(*(out[i, :, 0, 0] / 255).tolist())[0] for i in range(b)])
    assert_uniform((hues * 12).floor().clamp(max=11).long(), 12, "hue shift (12 bins)")


# ---------------------------------------------------------- random_conv normals

def kolmogorov_sf(lam: float) -> float:
    """P(K > lam) for the Kolmogorov distribution: 2 sum_k (-1)^(k-1) exp(-2 k^2 lam^2)."""
    if lam < 0.2:
        return 1.0
    return max(0.0, min(1.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                     for k in range(1, 101))))


def ks_normal_p_value(x: torch.Tensor, std: float) -> float:
    """Asymptotic p-value of the one-sample KS test of x against N(0, std^2)."""
    v = torch.sort(x.double().flatten()).values
    n = v.numel()
    cdf = 0.5 * torch.erfc(-v / (std * math.sqrt(2)))
    i = torch.arange(1, n + 1, dtype=torch.float64)
    d = max((i / n - cdf).max().item(), (cdf - (i - 1) / n).max().item())
    sn = math.sqrt(n)
    return kolmogorov_sf((sn + 0.12 + 0.11 / sn) * d)


def test_ks_helper():
    # known values of the Kolmogorov distribution; a sample of a wrong scale is rejected
    assert kolmogorov_sf(1.36) == pytest.approx(0.0494, abs=5e-4)
    assert kolmogorov_sf(1.63) == pytest.approx(0.0098, abs=3e-4)
    g = torch.Generator().manual_seed(0)
    sample = torch.randn(20000, generator=g, dtype=torch.float64)
    assert ks_normal_p_value(sample, 1.0) > P_VALUE
    assert ks_normal_p_value(sample * 1.05, 1.0) < P_VALUE
    assert ks_normal_p_value(sample + 0.1, 1.0) < P_VALUE


def conv_weights_of(b, init, seed=12, step=34):
    """[b, 3 (o), 3 (i), 3, 3] weights, recovered by convolving impulses (activation none, zeros):
    frame i holds 255 (scaled: exactly 1) at the centre of channel i of a 3x3 frame."""
    x = torch.zeros(b, 3, 3, 3, 3)
    for i in range(3):
        x[:, i, i, 1, 1] = 255.0
    out = ops.random_conv(x.view(b, 9, 3, 3), seed=seed, step=step, init=init, padding="zeros",
                          activation="none").view(b, 3, 3, 3, 3).double() / 255
    # out[frame i][o][y][x] = w[o][i][2 - y][2 - x]
    return out.flip(-1).flip(-2).transpose(1, 2)


@pytest.mark.parametrize("init,var", [("normal", 1.0), ("xavier", 2 / 54)])
def test_random_conv_weights_are_normal(init, var):
    b = 2000
    w = conv_weights_of(b, init)
    n = w.numel()
    mean, sample_var = w.mean().item(), w.var().item()
    assert abs(mean) / math.sqrt(var / n) < Z_CRIT, f"{init}: mean {mean:.4g}"
    assert abs(sample_var - var) / (var * math.sqrt(2 / (n - 1))) < Z_CRIT, \
        f"{init}: variance {sample_var:.5g}, want {var:.5g}"
    p = ks_normal_p_value(w, math.sqrt(var))
    assert p > P_VALUE, f"{init}: KS p-value {p:.3g}"
    # every one of the 81 positions is N(0, var) on its own, and samples differ
    per_position = w.reshape(b, 81)
    z = per_position.mean(dim=0) / math.sqrt(var / b)
    assert z.abs().max() < 4.8, f"{init}: a weight position's mean is off (max |z| {z.abs().max():.2f})"
    assert torch.unique(per_position[:, 0]).numel() > b * 0.99


def test_random_conv_weight_pairs_uncorrelated():
    # the cos and sin halves of one Box-Muller pair are independent normals
    w = conv_weights_of(3000, "normal", seed=5, step=6).reshape(3000, 81)
    for a, c in [(0, 1), (2, 3), (0, 2), (78, 79)]:
        r = torch.corrcoef(torch.stack([w[:, a], w[:, c]]))[0, 1].item()
        assert abs(r) * math.sqrt(3000) < Z_CRIT, f"weights {a} and {c} correlate ({r:.3f})"


def test_random_conv_weights_shared_by_frames_and_ops():
    w = conv_weights_of(16, "normal")
    again = conv_weights_of(16, "normal")
    assert torch.equal(w, again)
    other_step = conv_weights_of(16, "normal", step=35)
    assert not torch.equal(w, other_step)
