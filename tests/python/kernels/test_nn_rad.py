"""obsaug.nn.random_conv (DMControl-GB's) and obsaug.nn.rad (RAD's data_augs):
the package layout, each function's convention (input type, dtype, value
range, shape and device in and out, argument names and defaults, as RAD's and
DMControl-GB's functions have them), the shared step counter (every call
equals the obsaug.ops call at seed 0 and the counter's step), the semantics
checked against the upstream formulas (convolution weights recovered from
impulses), and the errors."""
import inspect
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import obsaug
import obsaug.nn as onn
from obsaug.nn import _steps, rad

from conftest import ROOT, needs_cuda, raises, random_obs


def unit_images(shape, seed=0):
    """float32 0..1 (RAD's tensors after obs / 255.), no exact zeros."""
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * 0.99 + 0.005


def numpy_u8(shape, seed=0, low=0):
    return np.random.default_rng(seed).integers(low, 256, shape, dtype=np.uint8)


# --- the package ---------------------------------------------------------------

def test_nn_is_a_package_with_rad_and_every_earlier_name():
    for name in ("RandomShift", "random_overlay", "random_shift", "random_crop",
                 "set_default_engine", "default_photos", "random_conv"):
        assert callable(getattr(obsaug.nn, name)), name
    from obsaug.nn import rad as imported
    assert imported is obsaug.nn.rad
    assert obsaug.nn.rad.random_flip is rad.random_flip
    assert sorted(rad.__all__) == sorted([
        "random_crop", "random_translate", "random_flip", "random_rotation", "random_grayscale",
        "random_cutout", "random_cutout_color", "random_convolution", "random_color_jitter",
        "no_aug"])


def test_default_photos_still_finds_the_checkout_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.delenv("OBSAUG_PHOTOS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no_cache"))  # no user cache
    monkeypatch.chdir(tmp_path)
    assert os.path.realpath(onn.default_photos()) == \
        os.path.realpath(os.path.join(ROOT, "data", "photos"))


RAD_SIGNATURES = {  # RAD's data_augs.py: names, order and defaults of the arguments
    "random_crop": [("imgs", inspect.Parameter.empty), ("out", 84)],
    "random_translate": [("imgs", inspect.Parameter.empty), ("size", inspect.Parameter.empty),
                         ("return_random_idxs", False), ("h1s", None), ("w1s", None)],
    "random_flip": [("images", inspect.Parameter.empty), ("p", 0.2)],
    "random_rotation": [("images", inspect.Parameter.empty), ("p", 0.3)],
    "random_grayscale": [("images", inspect.Parameter.empty), ("p", 0.3)],
    "random_cutout": [("imgs", inspect.Parameter.empty), ("min_cut", 10), ("max_cut", 30)],
    "random_cutout_color": [("imgs", inspect.Parameter.empty), ("min_cut", 10),
                            ("max_cut", 30)],
    "random_convolution": [("imgs", inspect.Parameter.empty)],
}


@pytest.mark.parametrize("name", sorted(RAD_SIGNATURES))
def test_rad_signatures(name):
    params = list(inspect.signature(getattr(rad, name)).parameters.values())
    assert [(p.name, p.default) for p in params] == RAD_SIGNATURES[name]


def test_color_jitter_signature_takes_rads_values_as_keyword_defaults():
    params = inspect.signature(rad.random_color_jitter).parameters
    assert list(params)[0] == "imgs"
    assert {k: params[k].default for k in ("brightness", "contrast", "saturation", "hue", "p")} \
        == {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "hue": 0.5, "p": 1.0}
    assert all(params[k].kind is inspect.Parameter.KEYWORD_ONLY for k in list(params)[1:])


def test_dmcgb_random_conv_signature():
    assert list(inspect.signature(onn.random_conv).parameters) == ["x"]


# --- one draw per call from the global generators ---------------------------------

@pytest.fixture
def torch_seed():
    """Sets torch's seed for a test and restores the one pytest's run had."""
    before = torch.initial_seed()
    yield torch.manual_seed
    torch.manual_seed(before)


@pytest.fixture
def numpy_seed():
    """Sets numpy's global seed for a test and restores the generator's state."""
    before = np.random.get_state()
    yield np.random.seed
    np.random.set_state(before)


TORCH_CALLS = {  # (the drop-in, the obsaug op it is at (seed, step))
    "nn.random_shift": (lambda x: onn.random_shift(x * 255, pad=3),
                        lambda x, s, k: obsaug.ops.shift(x * 255, seed=s, step=k, pad=3)),
    "nn.random_crop": (lambda x: onn.random_crop(x * 255, size=12),
                       lambda x, s, k: obsaug.ops.crop(x * 255, seed=s, step=k, size=12)),
    "nn.random_conv": (lambda x: onn.random_conv(x * 255),
                       lambda x, s, k: obsaug.ops.random_conv(x * 255, seed=s, step=k)),
    "rad.random_flip": (lambda x: rad.random_flip(x, p=0.5),
                        lambda x, s, k: obsaug.ops.flip(x, seed=s, step=k, p=0.5)),
    "rad.random_grayscale": (lambda x: rad.random_grayscale(x, p=0.5),
                             lambda x, s, k: obsaug.ops.grayscale(x, seed=s, step=k, p=0.5)),
}


@pytest.mark.parametrize("name", sorted(TORCH_CALLS))
def test_torch_manual_seed_repeats_the_torch_functions(torch_seed, name):
    """torch.manual_seed(s); f(x); torch.manual_seed(s); f(x) gives the same augmentation,
    as it does with DMControl-GB's and RAD's functions; each call is the op at seed 0 and
    one torch.randint draw, and the next call draws another."""
    x = unit_images((6, 9, 16, 16))
    call, op = TORCH_CALLS[name]
    torch_seed(7)
    first = call(x)
    torch_seed(7)
    assert torch.equal(call(x), first)
    torch_seed(7)
    seed, step = _steps.draw()
    assert seed == _steps.SEED == 0
    assert torch.equal(first, op(x, seed, step))
    torch_seed(8)
    assert not torch.equal(call(x), first)


NUMPY_CALLS = {
    "random_crop": lambda u: rad.random_crop(u, out=16),
    "random_translate": lambda u: rad.random_translate(u, 24),
    "random_cutout": lambda u: rad.random_cutout(u),
    "random_cutout_color": lambda u: rad.random_cutout_color(u),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CALLS))
def test_numpy_seed_repeats_rads_numpy_functions(numpy_seed, torch_seed, name):
    """RAD's numpy functions follow np.random.seed (as RAD's do) and not torch's seed."""
    u = numpy_u8((6, 9, 20, 20), seed=3)
    call = NUMPY_CALLS[name]
    numpy_seed(11)
    torch_seed(1)
    first = call(u)
    numpy_seed(11)
    torch_seed(2)  # another torch seed: no effect
    assert np.array_equal(call(u), first)
    numpy_seed(12)
    assert not np.array_equal(call(u), first)


def test_a_call_takes_one_value_of_the_generator(torch_seed, numpy_seed):
    x = unit_images((2, 9, 12, 12))
    torch_seed(3)
    onn.random_shift(x * 255, pad=2)
    after_call = torch.rand(())
    torch_seed(3)
    torch.randint(0, 2**63 - 1, ())
    assert torch.equal(torch.rand(()), after_call)
    numpy_seed(3)
    rad.random_cutout(numpy_u8((2, 9, 40, 40)))
    after_call = np.random.rand()
    numpy_seed(3)
    np.random.randint(0, 2**63 - 1, dtype=np.int64)
    assert np.random.rand() == after_call


def _first_worker_shift(_):
    x = torch.arange(2 * 3 * 24 * 24, dtype=torch.float32).reshape(2, 3, 24, 24) % 251
    return onn.random_shift(x, pad=4)


def test_dataloader_workers_draw_apart():
    """torch seeds each DataLoader worker base seed + worker id, so two workers at
    the same step of the shared counter still draw different shifts."""
    loader = torch.utils.data.DataLoader(list(range(2)), batch_size=None, num_workers=2,
                                         collate_fn=_first_worker_shift,
                                         multiprocessing_context="fork")
    first, second = list(loader)
    assert not torch.equal(first, second)


def at_next_step(call, numpy=False):
    """(step, call()) with the step the call draws: the generator (torch's, or numpy's
    for RAD's numpy functions) is read ahead and put back."""
    if numpy:
        state = np.random.get_state()
        _, step = _steps.draw_numpy()
        np.random.set_state(state)
    else:
        state = torch.get_rng_state()
        _, step = _steps.draw()
        torch.set_rng_state(state)
    return step, call()


# --- DMControl-GB's random_conv ------------------------------------------------

def weights_from_impulses(conv, batch, activation):
    """w[b, o, i, ky, kx] of the per-sample 3x3 convolution that ``conv`` (a
    function of a [batch, 3, 5, 5] float 0..255 tensor at a fixed step) applies:
    an impulse of 255 at the centre of input channel i shows w[o][i] mirrored
    around the centre (logit of out / 255 for the sigmoid)."""
    w = torch.empty(batch, 3, 3, 3, 3, dtype=torch.float64)
    for i in range(3):
        x = torch.zeros(batch, 3, 5, 5)
        x[:, i, 2, 2] = 255.0
        out = conv(x).double() / 255.0
        if activation == "sigmoid":
            out = torch.log(out / (1 - out))
        for ky in range(3):
            for kx in range(3):
                w[:, :, i, ky, kx] = out[:, :, 3 - ky, 3 - kx]
    return w


def test_random_conv_is_dmcgb_random_conv():
    b, s, h, w = 4, 3, 11, 13
    x = random_obs((b, s * 3, h, w), dtype=torch.float32, seed=3)
    step, out = at_next_step(lambda: onn.random_conv(x))
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert 0 <= out.min() and out.max() <= 255
    assert torch.equal(out, obsaug.ops.random_conv(x, seed=_steps.SEED, step=step))
    # DMControl-GB's formula with the weights obsaug drew for each sample
    weights = weights_from_impulses(lambda t: obsaug.ops.random_conv(t, seed=_steps.SEED, step=step), b,
                                    "sigmoid")
    for i in range(b):
        frames = F.pad(x[i].reshape(s, 3, h, w).double() / 255., [1] * 4, mode="replicate")
        expected = torch.sigmoid(F.conv2d(frames, weights[i])) * 255.
        torch.testing.assert_close(out[i].double(), expected.reshape(s * 3, h, w),
                                   atol=2e-3, rtol=0)


def test_random_conv_uint8_gives_float_as_dmcgb():
    """DMControl-GB's random_conv divides by 255., so uint8 input gives float: so here."""
    x = random_obs((3, 9, 8, 8), seed=4)
    step, out = at_next_step(lambda: onn.random_conv(x))
    assert out.dtype == torch.float32 and torch.equal(
        out, obsaug.ops.random_conv(x.float(), seed=_steps.SEED, step=step))


# --- RAD's torch functions: float 0..1 tensors -------------------------------------

def test_random_convolution_is_rads_xavier_conv_with_zero_padding():
    b, s, h, w = 64, 2, 7, 9
    x = unit_images((b, s * 3, h, w), seed=5)
    step, out = at_next_step(lambda: rad.random_convolution(x))
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert torch.equal(out, obsaug.ops.random_conv(x, seed=_steps.SEED, step=step, init="xavier",
                                                   padding="zeros", activation="none"))
    weights = weights_from_impulses(
        lambda t: obsaug.ops.random_conv(t, seed=_steps.SEED, step=step, init="xavier", padding="zeros",
                                         activation="none"), b, "none")
    for i in range(b):
        expected = F.conv2d(x[i].reshape(s, 3, h, w).double(), weights[i], padding=1)
        torch.testing.assert_close(out[i].double(), expected.reshape(s * 3, h, w),
                                   atol=1e-4, rtol=0)
    # xavier_normal_ of a 3x3x3x3 kernel: std sqrt(2 / (27 + 27)); 5184 weights
    assert abs(weights.std().item() / (2 / 54) ** 0.5 - 1) < 0.06
    assert abs(weights.mean().item()) < 0.02


def test_random_flip_each_sample_mirrored_or_kept():
    x = unit_images((3000, 3, 2, 3), seed=6)
    step, out = at_next_step(lambda: rad.random_flip(x))
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert torch.equal(out, obsaug.ops.flip(x, seed=_steps.SEED, step=step, p=0.2, axis="horizontal"))
    flipped = (out == x.flip(3)).flatten(1).all(1)
    kept = (out == x).flatten(1).all(1)
    assert bool((flipped | kept).all())
    assert 0.16 < flipped.float().mean().item() < 0.24  # p = 0.2 (sd 0.007)


def test_random_rotation_quarter_turns():
    x = unit_images((3000, 6, 3, 3), seed=7)
    step, out = at_next_step(lambda: rad.random_rotation(x))
    assert torch.equal(out, obsaug.ops.rotate(x, seed=_steps.SEED, step=step, p=0.3))
    turns = torch.full((x.shape[0],), -1)
    for q in (3, 2, 1, 0):
        turns[(out == x.rot90(q, [2, 3])).flatten(1).all(1)] = q
    assert bool((turns >= 0).all())
    assert 0.26 < (turns > 0).float().mean().item() < 0.34  # p = 0.3
    counts = torch.bincount(turns[turns > 0], minlength=4)[1:]  # about 300 each (sd 16)
    assert counts.min() > 230 and counts.max() < 370, counts


def test_random_flip_and_rotation_take_uint8_too():
    x = random_obs((4, 9, 6, 6), seed=8)
    assert rad.random_flip(x).dtype == torch.uint8
    assert rad.random_rotation(x).dtype == torch.uint8


def test_random_grayscale_float_0_1():
    x = unit_images((2000, 6, 4, 4), seed=9)
    step, out = at_next_step(lambda: rad.random_grayscale(x))
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert torch.equal(out, obsaug.ops.grayscale(x, seed=_steps.SEED, step=step, p=0.3))
    frames = out.view(2000, 2, 3, 4, 4)
    gray = (frames[:, :, 0] == frames[:, :, 1]).flatten(1).all(1) & \
           (frames[:, :, 1] == frames[:, :, 2]).flatten(1).all(1)
    kept = (out == x).flatten(1).all(1)
    assert bool((gray | kept).all())
    assert 0.26 < gray.float().mean().item() < 0.34
    v = x.view(2000, 2, 3, 4, 4)[gray].double()
    expected = 0.299 * v[:, :, 0] + 0.587 * v[:, :, 1] + 0.114 * v[:, :, 2]  # 0..1 stays 0..1
    torch.testing.assert_close(frames[gray][:, :, 0].double(), expected, atol=1e-6, rtol=0)


def test_random_color_jitter_float_0_1_and_leaves_its_input():
    x = unit_images((5, 9, 8, 8), seed=10)
    before = x.clone()
    step, out = at_next_step(lambda: rad.random_color_jitter(x))
    assert torch.equal(x, before)
    assert out.dtype == torch.float32 and out.shape == x.shape
    assert 0 <= out.min() and out.max() <= 1
    expected = obsaug.ops.color_jitter(x * 255.0, seed=_steps.SEED, step=step, brightness=0.4,
                                       contrast=0.4, saturation=0.4, hue=0.5, p=1.0) / 255.0
    assert torch.equal(out, expected)
    assert not torch.equal(out, x)


@needs_cuda
def test_torch_functions_stay_on_the_device():
    x = unit_images((4, 9, 10, 10), seed=11)
    for fn in (rad.random_flip, rad.random_rotation, rad.random_grayscale,
               rad.random_convolution, rad.random_color_jitter):
        state = torch.get_rng_state()
        on_gpu = fn(x.cuda())
        assert on_gpu.device.type == "cuda", fn.__name__
        torch.set_rng_state(state)  # the same draws again, on the CPU
        assert torch.equal(on_gpu.cpu(), fn(x)), fn.__name__


# --- RAD's numpy functions: the replay's uint8 arrays ------------------------------

def test_random_crop_numpy_every_offset():
    x = numpy_u8((1000, 3, 20, 20), seed=12)
    step, out = at_next_step(lambda: rad.random_crop(x, out=16), numpy=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == (1000, 3, 16, 16)
    expected = obsaug.ops.crop(torch.from_numpy(x), seed=_steps.SEED, step=step, size=16).numpy()
    assert np.array_equal(out, expected)
    offsets = set()
    for b in range(1000):
        found = [(t, l) for t in range(5) for l in range(5)
                 if np.array_equal(out[b], x[b, :, t:t + 16, l:l + 16])]
        assert len(found) == 1
        offsets.add(found[0])
    assert offsets == {(t, l) for t in range(5) for l in range(5)}  # 0..4, the last included
    f = x[:4].astype(np.float32)
    assert rad.random_crop(f, out=16).dtype == np.float32


def test_random_translate_numpy_and_its_offsets():
    x = numpy_u8((50, 6, 10, 12), seed=13, low=1)
    state = np.random.get_state()
    step, out = at_next_step(lambda: rad.random_translate(x, 16), numpy=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == (50, 6, 16, 16)
    assert np.array_equal(out, obsaug.ops.translate(torch.from_numpy(x), seed=_steps.SEED, step=step,
                                                    size=16).numpy())
    np.random.set_state(state)  # the same draws, with the offsets returned
    again, idxs = rad.random_translate(x, 16, return_random_idxs=True)
    assert np.array_equal(again, out)
    assert idxs["h1s"].shape == idxs["w1s"].shape == (50,)
    for b, (h1, w1) in enumerate(zip(idxs["h1s"], idxs["w1s"])):
        assert 0 <= h1 <= 6 and 0 <= w1 <= 4
        assert np.array_equal(out[b, :, h1:h1 + 10, w1:w1 + 12], x[b])
        assert out[b].sum() == x[b].astype(np.int64).sum()  # zeros elsewhere
    # offsets given: RAD places the frames there ("do the same to another set")
    other = numpy_u8((50, 6, 10, 12), seed=14)
    placed = rad.random_translate(other, 16, **idxs)
    for b, (h1, w1) in enumerate(zip(idxs["h1s"], idxs["w1s"])):
        assert np.array_equal(placed[b, :, h1:h1 + 10, w1:w1 + 12], other[b])


def cut_box(out_b, x_b):
    """(top, left, height, width) of the pixels that changed (a box, else None)."""
    changed = (out_b != x_b).any(axis=0)
    rows, cols = np.nonzero(changed.any(axis=1))[0], np.nonzero(changed.any(axis=0))[0]
    if not len(rows):
        return None
    top, left = rows[0], cols[0]
    height, width = rows[-1] - top + 1, cols[-1] - left + 1
    assert changed[top:top + height, left:left + width].all(), "not a solid box"
    return top, left, height, width


def test_random_cutout_numpy_black_box_sides_10_to_29():
    x = numpy_u8((600, 6, 64, 64), seed=15, low=1)
    step, out = at_next_step(lambda: rad.random_cutout(x), numpy=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == x.shape
    assert np.array_equal(out, obsaug.ops.cutout(torch.from_numpy(x), seed=_steps.SEED, step=step, min=10,
                                                 max=29, fill="zeros").numpy())
    sides = set()
    for b in range(600):
        top, left, h, w = cut_box(out[b], x[b])
        assert (out[b, :, top:top + h, left:left + w] == 0).all()
        sides.update((h, w))
    assert min(sides) == 10 and max(sides) == 29  # RAD's randint(10, 30)


def test_random_cutout_color_one_colour_per_channel_of_the_stack():
    """RAD draws randint(0, 255, size=(n, c)): one colour per channel of the stack (9
    for 3 RGB frames). The box is ops.cutout's (fill zeros) at the call's draw, shared
    by the channels; the colours are 0..255 on uint8, k / 255 on float32 (RAD's scale);
    every other pixel is kept."""
    x = numpy_u8((60, 9, 48, 48), seed=16, low=1)
    step, out = at_next_step(lambda: rad.random_cutout_color(x), numpy=True)
    assert out.dtype == np.uint8 and out.shape == x.shape
    black = obsaug.ops.cutout(torch.from_numpy(x), seed=_steps.SEED, step=step, min=10, max=29,
                              fill="zeros").numpy()
    box = np.broadcast_to((black == 0).all(axis=1, keepdims=True), x.shape)  # x has no 0
    colours = set()
    for b in range(60):
        top, left, h, w = cut_box(black[b], x[b])
        assert 10 <= h <= 29 and 10 <= w <= 29
        region = out[b, :, top:top + h, left:left + w].reshape(9, h * w)
        assert (region == region[:, :1]).all()          # one colour per channel
        colours.add(len(set(region[:, 0].tolist())))
        assert np.array_equal(out[b][~box[b]], x[b][~box[b]])
    assert max(colours) == 9   # the 9 channels' colours differ (3 frames do not share them)
    # float 0..1: the same boxes and colours, as k / 255
    f = (x.astype(np.float32) + 0.5) / 256.0
    np.random.seed(5)
    in_u8 = rad.random_cutout_color(x)
    np.random.seed(5)
    in_f32 = rad.random_cutout_color(f)
    assert in_f32.dtype == np.float32
    changed = in_f32 != f  # (x + 0.5) / 256 is never a k / 255: exactly the boxes
    assert (changed >= (in_u8 != x)).all()
    assert np.allclose(in_f32[changed] * 255, in_u8[changed], atol=1e-3)


# --- errors ---------------------------------------------------------------------

def test_numpy_functions_refuse_tensors_and_other_dtypes():
    t = torch.zeros(2, 9, 20, 20, dtype=torch.uint8)
    raises(TypeError, lambda: rad.random_crop(t, out=16), "random_crop", "numpy array",
           "Tensor")
    raises(TypeError, lambda: rad.random_cutout(np.zeros((2, 9, 20, 20))), "random_cutout",
           "uint8 or float32", "float64")
    raises(ValueError, lambda: rad.random_translate(np.zeros((9, 20, 20), np.uint8), 24),
           "random_translate", "(B, C, H, W)", "(9, 20, 20)")


def test_torch_functions_refuse_arrays_and_other_dtypes():
    raises(TypeError, lambda: rad.random_flip(np.zeros((2, 9, 8, 8), np.float32)),
           "random_flip", "torch tensor", "ndarray")
    raises(TypeError, lambda: rad.random_grayscale(torch.zeros(2, 9, 8, 8, dtype=torch.uint8)),
           "random_grayscale", "float32", "uint8")
    raises(TypeError, lambda: rad.random_convolution(torch.zeros(2, 9, 8, 8,
                                                                 dtype=torch.float64)),
           "random_convolution", "float32", "float64")


def test_cutout_sizes_must_be_a_range():
    x = numpy_u8((2, 3, 40, 40))
    raises(ValueError, lambda: rad.random_cutout(x, min_cut=12, max_cut=12), "min_cut < max_cut",
           "min_cut=12", "max_cut=12")
    raises(ValueError, lambda: rad.random_cutout_color(x, min_cut=0), "1 <= min_cut")
    raises(TypeError, lambda: rad.random_cutout(x, max_cut=2.5), "max_cut", "int")


def test_translate_offsets_checked():
    x = numpy_u8((3, 3, 8, 8))
    raises(ValueError, lambda: rad.random_translate(x, 12, h1s=np.zeros(2, int)), "h1s",
           "shape (3,)")
    raises(IndexError, lambda: rad.random_translate(x, 12, w1s=np.array([0, 5, 1])), "w1s",
           "0..4")
    raises(TypeError, lambda: rad.random_translate(x, 12.0), "size", "int")
