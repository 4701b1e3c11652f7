"""Chi-square tests that the library's drawn parameters are uniform (DESIGN.md section 3).

The parameters are recovered from the library's outputs (images whose pixel
values encode their coordinates, pools of constant distinct images), so these
test obsaug itself, not the reference. Seeds are fixed, so the tests are
deterministic; each threshold is the chi-square critical value at p = 1e-4.
"""
import math

import pytest
import torch

import obsaug

ops = obsaug.ops
P_VALUE = 1e-4


def chi2_sf(x: float, dof: int) -> float:
    """P(X > x) for X ~ chi2(dof): 1 - the regularized lower gamma P(dof/2, x/2) (series)."""
    a, y = dof / 2.0, x / 2.0
    if y <= 0:
        return 1.0
    term = total = 1.0 / a
    n = 0
    while term > total * 1e-17:
        n += 1
        term *= y / (a + n)
        total += term
    return 1.0 - math.exp(a * math.log(y) - y - math.lgamma(a)) * total


def chi2_critical(dof: int, p: float = P_VALUE) -> float:
    lo, hi = 0.0, dof + 60.0 * math.sqrt(2.0 * dof) + 60.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chi2_sf(mid, dof) > p else (lo, mid)
    return hi


def test_chi2_helpers_against_closed_forms():
    # closed forms: dof 2m: exp(-y) * sum_{i<m} y^i / i!;  dof 1: erfc(sqrt(y));
    # dof 3: erfc(sqrt(y)) + 2 sqrt(y / pi) exp(-y)   (y = x / 2)
    for x in (0.5, 3.0, 15.0, 33.0, 80.0):
        y = x / 2
        for m in (1, 4, 5, 50):
            even = math.exp(-y) * sum(y ** i / math.factorial(i) for i in range(m))
            assert chi2_sf(x, 2 * m) == pytest.approx(even, rel=1e-9, abs=1e-12)
        assert chi2_sf(x, 1) == pytest.approx(math.erfc(math.sqrt(y)), rel=1e-9, abs=1e-12)
        odd3 = math.erfc(math.sqrt(y)) + 2 * math.sqrt(y / math.pi) * math.exp(-y)
        assert chi2_sf(x, 3) == pytest.approx(odd3, rel=1e-9, abs=1e-12)
    assert chi2_critical(1) == pytest.approx(3.8906 ** 2, abs=2e-3)   # z(1 - 0.5e-4) squared
    assert chi2_critical(2) == pytest.approx(-2 * math.log(P_VALUE), abs=1e-6)
    assert chi2_sf(chi2_critical(288), 288) == pytest.approx(P_VALUE, rel=1e-6)


def assert_uniform(values: torch.Tensor, n: int, what: str, offset: int = 0):
    """values (ints) should be uniform on offset .. offset + n - 1, every value hit."""
    v = values.flatten().long() - offset
    assert v.min() >= 0 and v.max() < n, f"{what}: values outside the {n} allowed ({v.min()}, {v.max()})"
    counts = torch.bincount(v, minlength=n).double()
    expected = v.numel() / n
    if expected >= 20:  # P(a given value never drawn) < 3e-9
        never = torch.nonzero(counts == 0).flatten().tolist()
        assert not never, f"{what}: value(s) never drawn: {never}"
    stat = ((counts - expected) ** 2 / expected).sum().item()
    crit = chi2_critical(n - 1)
    assert stat < crit, f"{what}: chi2 = {stat:.1f} >= {crit:.1f} (dof {n - 1}); counts {counts.tolist()}"


def coordinate_image(b, h, w):
    """[b, 2, h, w] uint8: channel 0 holds y, channel 1 holds x."""
    ys = torch.arange(h, dtype=torch.uint8).view(h, 1).expand(h, w)
    xs = torch.arange(w, dtype=torch.uint8).view(1, w).expand(h, w)
    return torch.stack([ys, xs]).unsqueeze(0).expand(b, 2, h, w).contiguous()


@pytest.mark.parametrize("pad", [1, 4, 7])
@pytest.mark.parametrize("padding", ["replicate", "zeros"])
def test_shift_offsets_uniform(pad, padding):
    n = 2 * pad + 1
    b, size = 150 * n * n if pad < 7 else 40 * n * n, 2 * pad + 3
    c = pad + 1  # a pixel whose source is inside the frame for every offset
    out = ops.shift(coordinate_image(b, size, size), seed=2024, step=5, pad=pad, padding=padding)
    dy = out[:, 0, c, c].long() - c
    dx = out[:, 1, c, c].long() - c
    assert_uniform(dx, n, "shift dx", offset=-pad)
    assert_uniform(dy, n, "shift dy", offset=-pad)
    assert_uniform((dy + pad) * n + (dx + pad), n * n, "shift (dx, dy) jointly")


def test_shift_offsets_uniform_across_steps():
    pad, n, b = 4, 9, 16
    img = coordinate_image(b, 11, 11)
    dx = torch.stack([ops.shift(img, seed=7, step=t, pad=pad)[:, 1, 5, 5] for t in range(120)])
    assert_uniform(dx.long() - 5, n, "shift dx over steps", offset=-pad)


@pytest.mark.parametrize("hw_in,hw_out", [((20, 31), (16, 24)), ((9, 9), (7, 7)), ((100, 100), (84, 84))])
def test_crop_offsets_uniform(hw_in, hw_out):
    (hi, wi), (ho, wo) = hw_in, hw_out
    ny, nx = hi - ho + 1, wi - wo + 1
    b = 200 * nx * ny if nx * ny < 100 else 25 * nx * ny
    out = ops.crop(coordinate_image(b, hi, wi), seed=11, step=3, size=hw_out)
    oy, ox = out[:, 0, 0, 0].long(), out[:, 1, 0, 0].long()
    assert_uniform(ox, nx, "crop ox")
    assert_uniform(oy, ny, "crop oy")
    assert ox.max() == wi - wo and oy.max() == hi - ho, "the last offset (CURL's off-by-one) is drawn"
    assert_uniform(oy * nx + ox, nx * ny, "crop (ox, oy) jointly")


def constant_pool(p, h=2, w=2):
    """[p, 2, h, w] uint8 images of constant value: image i holds (i // 256, i % 256)."""
    ids = torch.arange(p)
    pool = torch.stack([ids // 256, ids % 256], dim=1).to(torch.uint8)
    return pool.view(p, 2, 1, 1).expand(p, 2, h, w).contiguous()


@pytest.mark.parametrize("p", [2, 37, 251, 1000])
@pytest.mark.parametrize("per_frame", [False, True])
def test_overlay_indices_uniform(p, per_frame):
    s = 3
    draws = max(60 * p, 3000)
    b = draws // s if per_frame else draws
    x = torch.zeros(b, 2 * s, 2, 2, dtype=torch.uint8)
    out = ops.overlay(x, constant_pool(p), seed=31337, step=2**63 + 1, alpha=1.0, per_frame=per_frame)
    ids = out[:, 0::2, 0, 0].long() * 256 + out[:, 1::2, 0, 0].long()  # [b, s]
    if not per_frame:
        assert torch.all(ids == ids[:, :1])
        ids = ids[:, 0]
    assert_uniform(ids, p, f"overlay index (P={p}, per_frame={per_frame})")


@pytest.mark.parametrize("alpha,alpha_max", [(0.25, 0.75), (0.0, 1.0), (0.5, 0.5 + 1 / 256)])
def test_overlay_weights_uniform(alpha, alpha_max):
    # float obs 0 blended with a pool of ones gives exactly w / 256
    w_lo, w_hi = math.floor(alpha * 256 + 0.5), math.floor(alpha_max * 256 + 0.5)
    n = w_hi - w_lo + 1
    x = torch.zeros(max(60 * n, 3000), 3, 1, 1)
    pool = torch.ones(5, 3, 1, 1, dtype=torch.uint8)
    out = ops.overlay(x, pool, seed=5, step=8, alpha=alpha, alpha_max=alpha_max)
    w = out[:, 0, 0, 0] * 256
    assert torch.equal(w, w.round())
    assert_uniform(w.long(), n, f"overlay weight in [{w_lo}, {w_hi}]", offset=w_lo)
