"""The drop-ins at the upstream call sites (issue 42, item 6): each test runs the
shapes, dtypes, argument forms and keywords with which RAD's agent, CURL's,
DMControl-GB's algorithms, DrQ's and DrQ-v2's call their augmentations
(written here from the published behaviour, not copied), so a missing name or
keyword fails here. Values are checked elsewhere (test_nn.py, test_nn_rad.py);
here: that the call works and returns what the call site goes on with.
"""
import numpy as np
import pytest
import torch

import obsaug.nn as augmentations          # DMControl-GB: `import augmentations`
import obsaug.nn.rad as rad                # RAD: `import data_augs as rad`
from conftest import needs_engine

B, STACK = 8, 9  # a batch of 3 stacked RGB frames


def replay_uint8(size, seed=0):
    """A replay buffer's observations: numpy uint8 (B, 9, size, size)."""
    return np.random.default_rng(seed).integers(0, 256, (B, STACK, size, size), dtype=np.uint8)


def center_crop_images(images, output_size):
    """RAD's utils.center_crop_images: the centre window of numpy (B, C, H, W)."""
    h, w = images.shape[2:]
    top, left = (h - output_size) // 2, (w - output_size) // 2
    return images[:, :, top:top + output_size, left:left + output_size]


# --- RAD (MishaLaskin/rad) -----------------------------------------------------------

def rad_aug_to_func():
    """RadSacAgent.__init__ builds this whole table on every run, whatever --data_augs."""
    return {
        "crop": rad.random_crop, "grayscale": rad.random_grayscale, "cutout": rad.random_cutout,
        "cutout_color": rad.random_cutout_color, "flip": rad.random_flip,
        "rotate": rad.random_rotation, "rand_conv": rad.random_convolution,
        "color_jitter": rad.random_color_jitter, "translate": rad.random_translate,
        "no_aug": rad.no_aug,
    }


@pytest.mark.parametrize("data_augs", ["crop", "cutout", "cutout_color", "crop-flip",
                                       "crop-rotate", "crop-grayscale", "crop-rand_conv",
                                       "crop-color_jitter", "no_aug", "translate"])
def test_rad_sample_rad(data_augs):
    """RAD's ReplayBuffer.sample_rad: the names with crop / cutout on the numpy uint8
    batch (positionally, defaults), translate on the centre-cropped batch with the
    offsets reused for next_obs, then ``obs / 255.`` and the others on the tensor."""
    table = rad_aug_to_func()
    funcs = {name: table[name] for name in data_augs.split("-")}  # RAD asserts each is there
    pre_image_size, image_size = 100, 84 if "translate" not in funcs else 108
    obses, next_obses = replay_uint8(pre_image_size, 1), replay_uint8(pre_image_size, 2)
    for aug, func in funcs.items():
        if "crop" in aug or "cutout" in aug:
            obses, next_obses = func(obses), func(next_obses)
            assert isinstance(obses, np.ndarray) and obses.dtype == np.uint8
        elif "translate" in aug:
            og_obses = center_crop_images(obses, pre_image_size)
            og_next_obses = center_crop_images(next_obses, pre_image_size)
            obses, rndm_idxs = func(og_obses, image_size, return_random_idxs=True)
            next_obses = func(og_next_obses, image_size, **rndm_idxs)
    obses = torch.as_tensor(obses).float() / 255.
    next_obses = torch.as_tensor(next_obses).float() / 255.
    for aug, func in funcs.items():
        if "crop" in aug or "cutout" in aug or "translate" in aug:
            continue
        obses, next_obses = func(obses), func(next_obses)
    side = 84 if "crop" in funcs else (108 if "translate" in funcs else pre_image_size)
    assert obses.shape == next_obses.shape == (B, STACK, side, side)
    assert obses.dtype == torch.float32 and torch.isfinite(obses).all()


def test_rad_no_aug_is_the_identity():
    x = torch.rand(B, STACK, 84, 84)
    assert rad.no_aug(x) is x


def test_curl_random_crop_call_site():
    """CURL's ReplayBuffer.sample_cpc: ``random_crop(obses, self.image_size)`` on the
    replay's uint8 (B, 9, 100, 100) arrays, positionally: RAD's signature serves it."""
    obses = replay_uint8(100)
    pos = obses.copy()
    obses, pos = rad.random_crop(obses, 84), rad.random_crop(pos, 84)
    assert obses.shape == pos.shape == (B, STACK, 84, 84) and obses.dtype == np.uint8
    anchor = torch.as_tensor(obses).float()
    assert anchor.shape == (B, STACK, 84, 84)


# --- DMControl-GB (nicklashansen/dmcontrol-generalization-benchmark) -----------------

def replay_float(size, seed=0):
    """DMControl-GB's samples: ``torch.as_tensor(obs).cuda().float()``, float 0..255."""
    return torch.as_tensor(replay_uint8(size, seed)).float()


def test_dmcgb_sample_drq():
    obs, next_obs = replay_float(84), replay_float(84, 1)
    pad = 4
    obs = augmentations.random_shift(obs, pad)           # positional pad
    next_obs = augmentations.random_shift(next_obs, pad=pad)
    assert obs.shape == next_obs.shape == (B, STACK, 84, 84) and obs.dtype == torch.float32


def test_dmcgb_sample_and_sample_curl_crop():
    obs = replay_float(100)
    pos = augmentations.random_crop(obs.clone())
    obs = augmentations.random_crop(obs)
    assert obs.shape == pos.shape == (B, STACK, 84, 84)
    small = replay_float(84)                             # crop_max <= 0: x itself
    assert augmentations.random_crop(small) is small
    same, w1, h1 = augmentations.random_crop(small, return_w1_h1=True)
    assert same is small and w1 is None and h1 is None


def test_dmcgb_random_crop_keywords():
    """``random_crop(x, size=84, w1=None, h1=None, return_w1_h1=False)``: the offsets
    returned, and given back to crop another batch at the same windows."""
    x, y = replay_float(100), replay_float(100, 1)
    cropped, w1, h1 = augmentations.random_crop(x, size=84, return_w1_h1=True)
    assert cropped.shape == (B, STACK, 84, 84) and w1.shape == h1.shape == (B,)
    assert w1.dtype == h1.dtype == torch.int64
    for b in range(B):  # w1 indexes the rows, h1 the columns (DMControl-GB's windows)
        r, c = int(w1[b]), int(h1[b])
        assert torch.equal(cropped[b], x[b, :, r:r + 84, c:c + 84])
    again = augmentations.random_crop(y, size=84, w1=w1, h1=h1)
    for b in range(B):
        r, c = int(w1[b]), int(h1[b])
        assert torch.equal(again[b], y[b, :, r:r + 84, c:c + 84])
    out, w1_back, h1_back = augmentations.random_crop(y, 84, w1, h1, True)
    assert torch.equal(out, again) and w1_back is w1 and h1_back is h1
    with pytest.raises(ValueError, match="both w1 and h1 or neither"):
        augmentations.random_crop(x, w1=w1)
    with pytest.raises(IndexError, match=r"w1 must lie in 0\.\.16"):
        augmentations.random_crop(x, w1=w1 + 17, h1=h1)


def test_dmcgb_svea_random_conv():
    """SVEA's update_critic: ``random_conv(obs.clone())`` on float 0..255; uint8 gives
    float, as upstream's ``x/255.`` does."""
    obs = replay_float(84)
    aug = augmentations.random_conv(obs.clone())
    assert aug.shape == obs.shape and aug.dtype == torch.float32
    assert 0 <= aug.min() and aug.max() <= 255
    assert augmentations.random_conv(torch.as_tensor(replay_uint8(84))).dtype == torch.float32


@needs_engine
def test_dmcgb_soda_and_svea_random_overlay(monkeypatch):
    """SODA's update_soda: random_crop of a 100x100 batch then ``random_overlay(aug_x)``;
    the dataset name as DMControl-GB's second parameter; uint8 gives float."""
    monkeypatch.setenv("OBSAUG_POOL_SIZE", "16")
    x = replay_float(100)
    aug_x = augmentations.random_crop(x.clone())
    aug_x = augmentations.random_overlay(aug_x)
    assert aug_x.shape == (B, STACK, 84, 84) and aug_x.dtype == torch.float32
    named = augmentations.random_overlay(aug_x, "places365_standard")
    assert named.shape == aug_x.shape
    assert augmentations.random_overlay(aug_x, dataset="places365_standard").shape == aug_x.shape
    as_uint8 = augmentations.random_overlay(aug_x.to(torch.uint8))
    assert as_uint8.dtype == torch.float32
    with pytest.raises(ValueError, match="dataset 'coco' is not one obsaug has"):
        augmentations.random_overlay(aug_x, "coco")
    assert augmentations.random_overlay(aug_x, 0.3).shape == aug_x.shape  # alpha, positionally


# --- DrQ (denisyarats/drq) and DrQ-v2 (facebookresearch/drqv2) ------------------------

def test_drq_aug_trans():
    """DrQ's DRQAgent: ``self.aug_trans = nn.Sequential(nn.ReplicationPad2d(4),
    RandomCrop((84, 84)))`` applied as ``obs = self.aug_trans(obs)`` to float batches;
    seeded by utils.set_seed_everywhere, so reseeding repeats it."""
    aug_trans = torch.nn.Sequential(augmentations.RandomShift(4))
    obs = replay_float(84)
    torch.manual_seed(3)
    first = aug_trans(obs)
    torch.manual_seed(3)
    assert torch.equal(aug_trans(obs), first) and first.shape == obs.shape


def test_drqv2_random_shifts_aug():
    """DrQ-v2's DrQV2Agent: ``self.aug = RandomShiftsAug(pad=4)``, then in update
    ``obs = self.aug(obs.float())`` of the replay's uint8 batch (and next_obs)."""
    aug = augmentations.RandomShift(pad=4)
    obs = torch.as_tensor(replay_uint8(84))
    next_obs = torch.as_tensor(replay_uint8(84, 1))
    obs, next_obs = aug(obs.float()), aug(next_obs.float())
    assert obs.shape == next_obs.shape == (B, STACK, 84, 84) and obs.dtype == torch.float32
    assert aug(obs.double()).dtype == torch.float64            # any float dtype, as upstream
    aug.train(False)                                          # an nn.Module, as upstream's
    assert list(aug.parameters()) == []
