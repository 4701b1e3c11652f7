"""The CPU's row loops of the per-frame path (kernels/frame_rows_cpu.h: random_conv
and color_jitter over a whole frame in vector lanes, segments of moves only as row
gathers) against the independent reference (reference_ops.py), bit for bit: frame
widths below, at and off the vector length (1, 2, 3, 7, 8, 9, 17, 33), the first
and last rows and columns under both paddings, the lanes of exp_f32's special
cases, the mean pass across its chunks and past int32, in place and out of place,
uint8, float and a float output, and gathered input."""
import pytest
import torch

import obsaug
import reference_ops as RO
from conftest import random_obs
from test_second_family import CONVS, JITTERS, SEED, STEP, assert_same, needs_float_math, sequential

ops = obsaug.ops
DTYPES = [torch.uint8, torch.float32]
# (B, S*3, H, W): widths around 8 float lanes, single rows and columns
ROW_SHAPES = [(2, 3, 1, 1), (2, 3, 1, 2), (2, 3, 3, 3), (2, 3, 2, 7), (2, 6, 5, 8), (2, 6, 5, 9),
              (2, 3, 3, 17), (2, 3, 4, 33)]


def assert_inplace_and_gather_agree(x, pipe, want):
    """augment in place and gather_augment (storage frames picked by index) give `want`."""
    y = x.clone()
    assert ops.augment(y, None, ops=pipe, seed=SEED, step=STEP, inplace=True) is y
    assert_same(y, want)
    b, sc, h, w = x.shape
    storage = x.reshape(b * sc // 3, 3, h, w).flip(0).contiguous()
    frames = sc // 3
    indices = (b * frames - 1 - torch.arange(b * frames)).view(b, frames)
    assert_same(ops.gather_augment(storage, indices, None, ops=pipe, seed=SEED, step=STEP), want)


@needs_float_math
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
@pytest.mark.parametrize("kw", CONVS, ids=str)
def test_random_conv_rows_match_reference(dtype, shape, kw):
    x = random_obs(shape, dtype, seed=shape[3])
    got = ops.random_conv(x, seed=SEED, step=STEP, **kw)
    assert_same(got, RO.random_conv(x, seed=SEED, step=STEP, **kw))
    assert_inplace_and_gather_agree(x, [{"op": "random_conv", **kw}], got)


@needs_float_math
@pytest.mark.parametrize("padding", ["replicate", "zeros"])
def test_random_conv_lanes_with_exps_special_cases(padding):
    # |acc| in the thousands: exp(-acc) rounds to +0 or +inf (exp_f32's special cases)
    # in some lanes of a row and takes the polynomial in the lanes beside them
    x = random_obs((4, 6, 5, 19), torch.float32, seed=3)
    x[:, :, :, ::3] *= 400.0
    x[:, :, ::2, 1::4] *= -400.0
    got = ops.random_conv(x, seed=SEED, step=STEP, padding=padding)
    assert_same(got, RO.random_conv(x, seed=SEED, step=STEP, padding=padding))
    assert (got == 0).any() and (got == 255).any() and ((got > 0) & (got < 255)).any()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES, ids=str)
@pytest.mark.parametrize("kw", JITTERS, ids=str)
def test_color_jitter_rows_match_reference(dtype, shape, kw):
    x = random_obs(shape, dtype, seed=shape[2] * 100 + shape[3])
    got = ops.color_jitter(x, seed=SEED, step=STEP, **kw)
    assert_same(got, RO.color_jitter(x, seed=SEED, step=STEP, **kw))
    assert_inplace_and_gather_agree(x, [{"op": "color_jitter", **kw}], got)


@pytest.mark.parametrize("kw", [JITTERS[0], JITTERS[2], JITTERS[4], JITTERS[6]], ids=str)
def test_color_jitter_float_values_outside_0_255(kw):
    # hue alone sees the raw values (negative, above 255, ties of channels); the
    # contrast mean's q = rintf(gray * 65536) passes int32 (values of 1e5): the
    # chunks of the mean pass that do not fit take the int64 conversion
    x = random_obs((3, 6, 17, 33), torch.float32, seed=9)
    x[0] = x[0] * 4.0 - 300.0
    x[1, :, :, :5] = 1.0e5
    x[1, 1, :, 5:9] = x[1, 0, :, 5:9]
    x[2, :3] = torch.tensor([200.0, 200.0, -5.0]).view(3, 1, 1)
    got = ops.color_jitter(x, seed=SEED, step=STEP, **kw)
    assert_same(got, RO.color_jitter(x, seed=SEED, step=STEP, **kw))


PIPES = [
    ("conv_then_flip", [{"op": "random_conv"}, {"op": "flip", "p": 1.0}]),
    ("conv_then_value_ops", [{"op": "random_conv", "padding": "zeros"}, {"op": "grayscale", "p": 1.0},
                             {"op": "cutout", "min": 2, "max": 4, "fill": "color"}]),
    ("jitter_then_crop", [{"op": "color_jitter", "hue": 0.2}, {"op": "crop", "size": [7, 9]}]),
    ("jitter_without_contrast_then_translate",
     [{"op": "color_jitter", "contrast": 0}, {"op": "translate", "size": [13, 12]}]),
    ("shift_zeros_then_conv", [{"op": "shift", "pad": 3, "padding": "zeros"}, {"op": "random_conv"}]),
    ("moves_only", [{"op": "flip", "p": 0.6, "axis": "vertical"}, {"op": "rotate", "p": 0.8},
                    {"op": "shift", "pad": 2, "padding": "zeros"}, {"op": "translate", "size": 13}]),
    ("rotate_conv_rotate", [{"op": "rotate", "p": 1.0}, {"op": "random_conv"}, {"op": "rotate", "p": 1.0}]),
]


@needs_float_math
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,pipe", PIPES, ids=[n for n, _ in PIPES])
@pytest.mark.parametrize("hw", [(11, 11), (9, 9)], ids=str)
def test_row_ops_with_tails_and_moves_only_segments(dtype, name, pipe, hw):
    x = random_obs((4, 9, *hw), dtype, seed=hw[1])
    fused = ops.augment(x, None, ops=pipe, seed=SEED, step=STEP)
    assert_same(fused, sequential(x, None, pipe, SEED, STEP))
    assert_same(fused, RO.augment(x, None, ops=pipe, seed=SEED, step=STEP))
    if ops.frame_sizes(pipe, *hw)[-1] == hw:
        assert_inplace_and_gather_agree(x, pipe, fused)
    if dtype == torch.uint8:  # the last segment through the affine float output
        out = ops.augment(x, None, ops=pipe, seed=SEED, step=STEP, out_dtype=torch.float32,
                          scale=1 / 255, bias=-0.5)
        assert_same(out, RO.augment(x, None, ops=pipe, seed=SEED, step=STEP,
                                    out_dtype=torch.float32, scale=1 / 255, bias=-0.5))
