"""shift / crop / overlay against the pure-PyTorch reference of DESIGN.md section 3."""
import numpy as np
import pytest
import torch

import obsaug
import reference as R

ops = obsaug.ops
DTYPES = [torch.uint8, torch.float32]
SEED, STEP = 1234, 77


def assert_same(got, want, atol=0.0):
    assert got.shape == want.shape and got.dtype == want.dtype
    if atol == 0.0:
        assert torch.equal(got, want), f"max diff {(got.double() - want.double()).abs().max()}"
    else:
        torch.testing.assert_close(got, want, atol=atol, rtol=0)


# ------------------------------------------------------------------ shift

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3, 12, 12), (6, 9, 16, 14), (4, 4, 11, 13), (3, 1, 9, 9)])
@pytest.mark.parametrize("pad", [0, 1, 4])
@pytest.mark.parametrize("padding", ["replicate", "zeros"])
def test_shift_matches_reference(make_obs, dtype, shape, pad, padding):
    x = make_obs(shape, dtype)
    got = ops.shift(x, seed=SEED, step=STEP, pad=pad, padding=padding)
    assert_same(got, R.shift(x, seed=SEED, step=STEP, pad=pad, padding=padding))


@pytest.mark.parametrize("padding", ["replicate", "zeros"])
@pytest.mark.parametrize("pad", [9, 2**20])
def test_shift_pad_larger_than_frame(make_obs, padding, pad):
    x = make_obs((16, 2, 5, 6))
    got = ops.shift(x, seed=SEED, step=STEP, pad=pad, padding=padding)
    assert_same(got, R.shift(x, seed=SEED, step=STEP, pad=pad, padding=padding))


def test_shift_pad0_is_identity(make_obs):
    x = make_obs((4, 6, 10, 10), torch.float32)
    assert_same(ops.shift(x, seed=SEED, step=STEP, pad=0), x)
    assert_same(ops.shift(x, seed=SEED, step=STEP, pad=0, padding="zeros"), x)


def test_shift_shares_offset_across_frames(make_obs):
    # Every frame of a sample moves by the same (dx, dy): identical frames stay identical.
    frame = make_obs((32, 3, 12, 12))
    x = frame.repeat(1, 3, 1, 1)
    out = ops.shift(x, seed=SEED, step=STEP, pad=4)
    assert torch.equal(out[:, 0:3], out[:, 3:6]) and torch.equal(out[:, 0:3], out[:, 6:9])
    assert not torch.equal(out, x)


# ------------------------------------------------------------------- crop

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,size", [
    ((5, 9, 20, 20), 16),
    ((6, 3, 20, 17), (12, 15)),
    ((4, 4, 13, 11), (13, 5)),
    ((3, 1, 9, 9), (1, 1)),
])
def test_crop_matches_reference(make_obs, dtype, shape, size):
    x = make_obs(shape, dtype)
    got = ops.crop(x, seed=SEED, step=STEP, size=size)
    assert_same(got, R.crop(x, seed=SEED, step=STEP, size=size))


@pytest.mark.parametrize("dtype", DTYPES)
def test_crop_to_full_size_is_identity(make_obs, dtype):
    x = make_obs((5, 6, 11, 13), dtype)
    assert_same(ops.crop(x, seed=SEED, step=STEP, size=(11, 13)), x)


@pytest.mark.parametrize("shape,size,oy,ox", [
    ((3, 3, 13, 20), (8, 15), 2, 2),    # floor(5/2), floor(5/2)
    ((3, 3, 20, 20), 16, 2, 2),
    ((3, 1, 10, 9), (7, 2), 1, 3),      # floor(3/2), floor(7/2)
])
def test_center_crop(make_obs, shape, size, oy, ox):
    x = make_obs(shape)
    ho, wo = (size, size) if isinstance(size, int) else size
    got = ops.crop(x, seed=SEED, step=STEP, size=size, center=True)
    assert_same(got, x[:, :, oy:oy + ho, ox:ox + wo].contiguous())
    assert_same(got, R.crop(x, seed=SEED, step=STEP, size=size, center=True))
    # centre crops do not depend on the seed
    assert_same(got, ops.crop(x, seed=SEED + 1, step=STEP + 1, size=size, center=True))


# ---------------------------------------------------------------- overlay

ALPHAS = [
    dict(alpha=0.5),
    dict(alpha=0.3),
    dict(alpha=0.123),                 # 31.488 -> 31
    dict(alpha=0.5 / 256),             # exactly half: rounds up to w = 1
    dict(alpha=0.2, alpha_max=0.7),
    dict(alpha=0.0, alpha_max=1.0),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("c,s", [(1, 1), (1, 4), (3, 1), (3, 3)])
@pytest.mark.parametrize("alpha", ALPHAS, ids=lambda a: str(a))
@pytest.mark.parametrize("per_frame", [False, True])
def test_overlay_matches_reference(make_obs, make_pool, dtype, c, s, alpha, per_frame):
    x = make_obs((6, s * c, 10, 11), dtype)
    pool = make_pool(7, c, 10, 11)
    got = ops.overlay(x, pool, seed=SEED, step=STEP, per_frame=per_frame, **alpha)
    want = R.overlay(x, pool, seed=SEED, step=STEP, per_frame=per_frame, **alpha)
    assert_same(got, want, atol=0.0 if dtype == torch.uint8 else 1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_overlay_alpha_0_and_1(make_obs, dtype):
    x = make_obs((8, 6, 9, 9), dtype)
    # pool images of constant, distinct values: alpha 1 must give exactly one of them per frame
    pool = torch.arange(5, dtype=torch.uint8).mul(40).view(5, 1, 1, 1).expand(5, 3, 9, 9).contiguous()
    assert_same(ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.0), x)
    out = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=1.0)
    values = out.view(8, 2, -1)
    assert torch.equal(values, values[:, :, :1].expand_as(values)), "alpha=1 keeps nothing of obs"
    assert set(values[:, :, 0].flatten().tolist()) <= {0.0, 40.0, 80.0, 120.0, 160.0}
    assert_same(out, R.overlay(x, pool, seed=SEED, step=STEP, alpha=1.0))


def test_overlay_fixed_alpha_weight_is_constant(make_pool):
    # float obs = 0 and a pool of ones: out = w / 256 exactly, the same w everywhere
    x = torch.zeros(64, 3, 4, 4)
    pool = torch.ones(3, 3, 4, 4, dtype=torch.uint8)
    out = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.3)
    assert torch.all(out * 256 == R.weight(0.3)), out.unique()
    out = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.3, alpha_max=0.3)
    assert torch.all(out * 256 == R.weight(0.3))


def distractor_ids(out, c):
    """Per (sample, frame): the constant value a frame took from a constant pool with alpha 1."""
    b, sc = out.shape[:2]
    frames = out.reshape(b, sc // c, -1)
    assert torch.equal(frames, frames[:, :, :1].expand_as(frames))
    return frames[:, :, 0].long()


@pytest.mark.parametrize("c", [1, 3])
def test_overlay_per_frame(c):
    b, s, p = 64, 4, 200
    pool = torch.arange(p, dtype=torch.uint8).view(p, 1, 1, 1).expand(p, c, 5, 5).contiguous()
    x = torch.zeros(b, s * c, 5, 5, dtype=torch.uint8)
    shared = distractor_ids(ops.overlay(x, pool, seed=SEED, step=STEP, alpha=1.0), c)
    assert torch.all(shared == shared[:, :1]), "without per_frame all frames share a distractor"
    assert len(shared[:, 0].unique()) > b // 2, "samples get different distractors"
    per = distractor_ids(ops.overlay(x, pool, seed=SEED, step=STEP, alpha=1.0, per_frame=True), c)
    differing = (per != per[:, :1]).any(dim=1).float().mean().item()
    assert differing > 0.9, f"per_frame: frames should get different distractors ({differing})"
    assert len(per[:, 0].unique()) > b // 2
    # frame 0 draws with s = 0, the same block as the shared draw
    assert torch.equal(per[:, 0], shared[:, 0])


def test_overlay_different_samples_differ(make_obs, make_pool):
    x = torch.zeros(32, 3, 6, 6, dtype=torch.uint8)
    pool = make_pool(16, 3, 6, 6)
    out = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.5)
    assert len({bytes(o.numpy()) for o in out}) > 8, "identical samples get different distractors"


# --------------------------------------------------- draws: op_index, seed, step

def test_op_index_changes_draws(make_obs, make_pool):
    x = make_obs((32, 3, 12, 12))
    pool = make_pool(16, 3, 12, 12)
    a = ops.shift(x, seed=SEED, step=STEP, pad=4, op_index=0)
    b = ops.shift(x, seed=SEED, step=STEP, pad=4, op_index=1)
    assert not torch.equal(a, b)
    assert_same(b, R.shift(x, seed=SEED, step=STEP, pad=4, op_index=1))
    a = ops.crop(x, seed=SEED, step=STEP, size=8, op_index=0)
    b = ops.crop(x, seed=SEED, step=STEP, size=8, op_index=3)
    assert not torch.equal(a, b)
    assert_same(b, R.crop(x, seed=SEED, step=STEP, size=8, op_index=3))
    a = ops.overlay(x, pool, seed=SEED, step=STEP, op_index=0)
    b = ops.overlay(x, pool, seed=SEED, step=STEP, op_index=2)
    assert not torch.equal(a, b)
    assert_same(b, R.overlay(x, pool, seed=SEED, step=STEP, op_index=2))


def test_largest_op_index_and_large_pool(make_obs, make_pool):
    # k = 32767, the largest (0x8000 up is the replay sampler's), fills the low bits of the
    # fourth counter word; frames go above it
    x = make_obs((32, 4, 2, 3))
    pool = make_pool(70000, 1, 2, 3)
    got = ops.overlay(x, pool, seed=SEED, step=STEP, per_frame=True, op_index=32767)
    assert_same(got, R.overlay(x, pool, seed=SEED, step=STEP, per_frame=True, op_index=32767))


def test_seed_and_step_change_draws_and_are_deterministic(make_obs):
    x = make_obs((32, 3, 12, 12))
    base = ops.shift(x, seed=SEED, step=STEP)
    assert torch.equal(base, ops.shift(x, seed=SEED, step=STEP))
    assert not torch.equal(base, ops.shift(x, seed=SEED + 1, step=STEP))
    assert not torch.equal(base, ops.shift(x, seed=SEED, step=STEP + 1))
    # seed and step are not interchangeable (different Philox words)
    assert not torch.equal(ops.shift(x, seed=5, step=9), ops.shift(x, seed=9, step=5))


@pytest.mark.parametrize("seed,step", [
    (2**63, 3), (2**64 - 1, 2**63 + 12345), (0, 2**64 - 1), (2**32, 2**32 + 1), (0xdeadbeefcafe, 0),
])
def test_uint64_seed_and_step(make_obs, make_pool, seed, step):
    x = make_obs((8, 6, 10, 10))
    pool = make_pool(9, 3, 10, 10)
    assert_same(ops.shift(x, seed=seed, step=step, pad=3), R.shift(x, seed=seed, step=step, pad=3))
    assert_same(ops.crop(x, seed=seed, step=step, size=7), R.crop(x, seed=seed, step=step, size=7))
    assert_same(ops.overlay(x, pool, seed=seed, step=step, alpha=0.1, alpha_max=0.9),
                R.overlay(x, pool, seed=seed, step=step, alpha=0.1, alpha_max=0.9))


def test_high_seed_bits_matter(make_obs):
    x = make_obs((32, 3, 12, 12))
    assert not torch.equal(ops.shift(x, seed=1, step=STEP), ops.shift(x, seed=1 + 2**40, step=STEP))
    assert not torch.equal(ops.shift(x, seed=1, step=STEP), ops.shift(x, seed=1, step=STEP + 2**40))


# ------------------------------------------------------------ in place

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("per_frame", [False, True])
def test_overlay_inplace(make_obs, make_pool, dtype, per_frame):
    x = make_obs((8, 6, 10, 10), dtype)
    pool = make_pool(5, 3, 10, 10)
    want = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.2, alpha_max=0.6, per_frame=per_frame)
    y = x.clone()
    got = ops.overlay(y, pool, seed=SEED, step=STEP, alpha=0.2, alpha_max=0.6, per_frame=per_frame,
                      inplace=True)
    assert got is y
    assert_same(y, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pipeline", [
    [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}],
    [{"op": "overlay", "alpha": 0.4}, {"op": "shift", "pad": 2, "padding": "zeros"}],
    [{"op": "crop", "size": 12}, {"op": "shift", "pad": 2}],   # a full-size crop keeps the size
], ids=["shift_overlay", "overlay_shiftzeros", "fullcrop_shift"])
def test_augment_inplace(make_obs, make_pool, dtype, pipeline):
    x = make_obs((8, 6, 12, 12), dtype)
    pool = make_pool(5, 3, 12, 12)
    want = ops.augment(x, pool, ops=pipeline, seed=SEED, step=STEP)
    y = x.clone()
    got = ops.augment(y, pool, ops=pipeline, seed=SEED, step=STEP, inplace=True)
    assert got is y
    assert_same(y, want)


# --------------------------------------------------------- non-contiguous

def noncontiguous_views(x):
    """(name, view) pairs holding the same values as x, none of them contiguous."""
    b, c, h, w = x.shape
    t = x.transpose(2, 3).contiguous().transpose(2, 3)          # W-major planes
    big = torch.zeros(b * 2, c + 2, h + 3, w + 5, dtype=x.dtype)
    big[::2, 1:c + 1, 2:h + 2, 3:w + 3] = x
    sliced = big[::2, 1:c + 1, 2:h + 2, 3:w + 3]
    views = [("channels_last", x.contiguous(memory_format=torch.channels_last)),
             ("transposed", t), ("sliced", sliced)]
    for name, v in views:
        assert not v.is_contiguous() and torch.equal(v, x), name
    return views


@pytest.mark.parametrize("dtype", DTYPES)
def test_noncontiguous_input(make_obs, make_pool, dtype):
    x = make_obs((6, 6, 11, 13), dtype)
    pool = make_pool(5, 3, 11, 13)
    pipe = [{"op": "overlay", "alpha": 0.3}, {"op": "shift", "pad": 3}, {"op": "crop", "size": (9, 10)}]
    for name, v in noncontiguous_views(x):
        assert_same(ops.shift(v, seed=SEED, step=STEP, pad=3), ops.shift(x, seed=SEED, step=STEP, pad=3))
        assert_same(ops.crop(v, seed=SEED, step=STEP, size=(8, 9)),
                    ops.crop(x, seed=SEED, step=STEP, size=(8, 9)))
        assert_same(ops.overlay(v, pool, seed=SEED, step=STEP), ops.overlay(x, pool, seed=SEED, step=STEP))
        assert_same(ops.augment(v, pool, ops=pipe, seed=SEED, step=STEP),
                    ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP))


def test_noncontiguous_pool(make_obs, make_pool):
    x = make_obs((6, 6, 11, 13))
    pool = make_pool(5, 3, 11, 13)
    for name, v in noncontiguous_views(pool):
        assert_same(ops.overlay(x, v, seed=SEED, step=STEP), ops.overlay(x, pool, seed=SEED, step=STEP))


@pytest.mark.parametrize("dtype", DTYPES)
def test_misaligned_storage_offset(make_obs, make_pool, dtype):
    # contiguous, but the data pointer is one element past an aligned address
    x = make_obs((5, 6, 11, 13), dtype)
    pool = make_pool(5, 3, 11, 13)
    v = torch.zeros(x.numel() + 1, dtype=dtype)[1:].view(x.shape)
    v.copy_(x)
    pipe = [{"op": "shift", "pad": 3, "padding": "zeros"}, {"op": "overlay", "alpha": 0.3}]
    want = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP)
    assert_same(ops.augment(v, pool, ops=pipe, seed=SEED, step=STEP), want)
    ops.augment(v, pool, ops=pipe, seed=SEED, step=STEP, inplace=True)
    assert_same(v, want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["channels_last", "transposed", "sliced"])
def test_noncontiguous_inplace(make_obs, make_pool, dtype, layout):
    x = make_obs((6, 6, 11, 13), dtype)
    pool = make_pool(5, 3, 11, 13)
    pipe = [{"op": "shift", "pad": 3}, {"op": "overlay", "alpha": 0.3}]
    v = dict(noncontiguous_views(x))[layout]
    assert ops.augment(v, pool, ops=pipe, seed=SEED, step=STEP, inplace=True) is v
    assert_same(v.contiguous(), ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP))
    v = dict(noncontiguous_views(x))[layout]
    assert ops.overlay(v, pool, seed=SEED, step=STEP, inplace=True) is v
    assert_same(v.contiguous(), ops.overlay(x, pool, seed=SEED, step=STEP))


# -------------------------------------------------------------- empty batch

@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(make_pool, dtype):
    x = torch.zeros(0, 6, 10, 12, dtype=dtype)
    pool = make_pool(4, 3, 10, 12)
    assert ops.shift(x, seed=SEED, step=STEP).shape == (0, 6, 10, 12)
    assert ops.crop(x, seed=SEED, step=STEP, size=(8, 9)).shape == (0, 6, 8, 9)
    assert ops.overlay(x, pool, seed=SEED, step=STEP).shape == (0, 6, 10, 12)
    assert ops.overlay(x, pool, seed=SEED, step=STEP, inplace=True) is x
    out = ops.augment(x, pool, ops=[{"op": "overlay"}, {"op": "crop", "size": 5}], seed=SEED,
                      step=STEP, out_dtype=torch.float32)
    assert out.shape == (0, 6, 5, 5) and out.dtype == torch.float32


# ------------------------------------------------------ float output affine

PIPE = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.25, "alpha_max": 0.75}]


@pytest.mark.parametrize("scale,bias", [(1 / 255, -0.5), (1.0, 0.0), (2.5, 3.0), (-1 / 127.5, 1.0)])
def test_float_output_from_uint8(make_obs, make_pool, scale, bias):
    x = make_obs((8, 9, 12, 12))
    pool = make_pool(6, 3, 12, 12)
    v = ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP)
    out = ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP, out_dtype=torch.float32,
                      scale=scale, bias=bias)
    assert out.dtype == torch.float32
    assert_same(out, R.to_output(v, torch.float32, scale, bias))
    assert_same(out, R.augment(x, pool, ops=PIPE, seed=SEED, step=STEP, out_dtype=torch.float32,
                               scale=scale, bias=bias))


def test_float_output_from_float(make_obs, make_pool):
    x = make_obs((8, 9, 12, 12), torch.float32)
    pool = make_pool(6, 3, 12, 12)
    v = ops.augment(x, pool, ops=[{"op": "shift", "pad": 4}], seed=SEED, step=STEP)
    out = ops.augment(x, pool, ops=[{"op": "shift", "pad": 4}], seed=SEED, step=STEP,
                      out_dtype=torch.float32, scale=1 / 255, bias=-0.5)
    assert_same(out, R.to_output(v, torch.float32, 1 / 255, -0.5))
    # with overlay, v is float, and the affine is applied on it
    v = ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP)
    out = ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP, out_dtype=torch.float32,
                      scale=1 / 255, bias=-0.5)
    assert_same(out, R.to_output(v, torch.float32, 1 / 255, -0.5))


def test_uint8_output_default(make_obs, make_pool):
    x = make_obs((4, 3, 12, 12))
    pool = make_pool(6, 3, 12, 12)
    out = ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP, out_dtype=torch.uint8)
    assert out.dtype == torch.uint8
    assert_same(out, ops.augment(x, pool, ops=PIPE, seed=SEED, step=STEP))


def test_numpy_integers_are_ints():
    x = torch.randint(0, 256, (2, 6, 20, 20), dtype=torch.uint8)
    want = obsaug.ops.crop(x, seed=1, step=2, size=(12, 16))
    for size in ((np.int64(12), np.int32(16)), [np.int16(12), 16]):
        assert torch.equal(obsaug.ops.crop(x, seed=np.uint64(1), step=np.int64(2), size=size), want)
    assert torch.equal(obsaug.ops.crop(x, seed=1, step=2, size=np.int64(12)),
                       obsaug.ops.crop(x, seed=1, step=2, size=12))
    assert torch.equal(obsaug.ops.translate(x, seed=1, step=2, size=np.int64(24)),
                       obsaug.ops.translate(x, seed=1, step=2, size=24))
    assert torch.equal(obsaug.ops.augment(x, ops=[{"op": "shift", "pad": np.int64(3)}], seed=1,
                                          step=2), obsaug.ops.shift(x, seed=1, step=2, pad=3))
    for size in (True, (np.float32(12), 16), 12.0):
        with pytest.raises(ValueError, match="size must be an int N or \\(height, width\\)"):
            obsaug.ops.crop(x, seed=1, step=2, size=size)
