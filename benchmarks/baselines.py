"""The published baselines the benchmarks compare obsaug against.

One copy of each re-implementation, written after the published code's behaviour
(nothing is imported from the upstream projects); the timing and reporting the
scripts share live in harness.py:

  DrQ-v2 (facebookresearch/drqv2)
    RandomShiftsAug            drqv2.py's augmentation (replicate pad + grid_sample)
    DrQv2Storage               replay_buffer.py's contents: a stacked obs per time step
  DMControl-GB (nicklashansen/dmcontrol-generalization-benchmark)
    view_as_windows_cuda, dmcgb_random_crop, dmcgb_random_shift
                               src/augmentations.py's view_as_windows crop
    dmcgb_random_shift_kornia  random_shift as F.pad replicate + kornia RandomCrop
    DMCGB                      random_overlay over a Places DataLoader (+ the shift)
    places_transform, photo_files, build_image_folder
                               the ImageFolder it reads, made from data/photos
    LazyFrames, DMCGBReplayBuffer
                               src/utils.py's FrameStack LazyFrames and ReplayBuffer
    dmcgb_random_conv          src/augmentations.py's random_conv (a loop over the batch)
    grouped_random_conv        the same batched: one conv2d with groups=B
  RAD (MishaLaskin/rad)
    rad_random_crop, rad_random_translate, rad_random_cutout, rad_random_cutout_color
                               data_augs.py's numpy functions (uint8 replay arrays)
    rad_random_flip, rad_random_rotation, rad_random_grayscale, rad_random_convolution,
    rad_random_color_jitter    data_augs.py's torch functions (float 0..1)
    RadColorJitterLayer        TransformLayer.py's ColorJitterLayer (HSV, masked assignments)

Used by benchmarks/bench_ops.py, bench_side_by_side.py, bench_replay.py,
bench_agent.py and bench_second_family.py. tests/python/kernels/test_nn.py keeps its own, independent copy
of RandomShiftsAug on purpose.
"""
from __future__ import annotations

import math
import os
import random
import tempfile
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PHOTO_EXT = (".jpg", ".jpeg", ".png")


# --------------------------------------------------------------------------
# DrQ-v2 (facebookresearch/drqv2)
# --------------------------------------------------------------------------

class RandomShiftsAug(nn.Module):
    """DrQ-v2's RandomShiftsAug (drqv2.py), verbatim: replicate pad, a base grid
    plus an integer shift drawn in 0..2*pad, grid_sample with zeros padding and
    align_corners=False (float input; the agent calls self.aug(obs.float()))."""

    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        n, c, h, w = x.size()
        assert h == w
        padding = tuple([self.pad] * 4)
        x = F.pad(x, padding, 'replicate')
        eps = 1.0 / (h + 2 * self.pad)
        arange = torch.linspace(-1.0 + eps,
                                1.0 - eps,
                                h + 2 * self.pad,
                                device=x.device,
                                dtype=x.dtype)[:h]
        arange = arange.unsqueeze(0).repeat(h, 1).unsqueeze(2)
        base_grid = torch.cat([arange, arange.transpose(1, 0)], dim=2)
        base_grid = base_grid.unsqueeze(0).repeat(n, 1, 1, 1)

        shift = torch.randint(0,
                              2 * self.pad + 1,
                              size=(n, 1, 1, 2),
                              device=x.device,
                              dtype=x.dtype)
        shift *= 2.0 / (h + 2 * self.pad)

        grid = base_grid + shift
        return F.grid_sample(x,
                             grid,
                             padding_mode='zeros',
                             align_corners=False)


def tensor_bytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


class DrQv2Storage:
    """DrQ-v2's replay contents (replay_buffer.py + dmc.py FrameStackWrapper) in
    preallocated torch tensors: every time step stores the *stacked* observation
    [S*C, H, W] uint8 (plus action, reward, discount); obs = step t, next_obs =
    step t+n, the n-step return summed at sample time (reward += disc * r;
    disc *= discount * gamma). Index arithmetic over a ring of time steps (an
    episode id per slot decides validity) replaces the episode .npz files and
    the DataLoader workers; sampling is uniform over transitions (DrQ-v2 draws
    an episode, then a step: equal when every episode has the same length)."""

    def __init__(self, capacity, obs_shape, action_shape, n_step, gamma, seed):
        self.capacity, self.n_step, self.gamma = capacity, n_step, gamma
        self.obs = torch.empty((capacity, *obs_shape), dtype=torch.uint8)
        self.action = torch.zeros((capacity, *action_shape), dtype=torch.float32)
        self.reward = torch.zeros(capacity, dtype=torch.float32)
        self.discount = torch.ones(capacity, dtype=torch.float32)
        self.episode = torch.full((capacity,), -1, dtype=torch.int64)
        # numpy views of the same memory for the per-step scalar writes
        self._action = self.action.numpy()
        self._reward = self.reward.numpy()
        self._discount = self.discount.numpy()
        self._episode = self.episode.numpy()
        self.total = 0
        self.ep = -1
        self.gen = torch.Generator().manual_seed(seed)
        self.offsets = torch.arange(1, n_step + 1)

    # ReplayBufferStorage.add(time_step): one time step (obs stacked [S*C, H, W])
    def add(self, obs, action, reward, discount, first):
        i = self.total % self.capacity
        if first:
            self.ep += 1
        self.obs[i].copy_(obs)
        self._action[i] = action
        self._reward[i] = reward
        self._discount[i] = discount
        self._episode[i] = self.ep
        self.total += 1

    def counted_bytes(self) -> float:
        return tensor_bytes(self.obs, self.action, self.reward, self.discount,
                            self.episode) / self.capacity

    def _draw(self, batch: int) -> torch.Tensor:
        size = min(self.total, self.capacity)
        lo, hi = self.total - size, self.total - self.n_step  # obs step t in [lo, hi)
        out = []
        got = 0
        while got < batch:
            t = torch.randint(lo, hi, (2 * (batch - got) + 8,), generator=self.gen)
            ok = self.episode[(t + self.n_step) % self.capacity] == self.episode[t % self.capacity]
            t = t[ok][:batch - got]
            out.append(t)
            got += t.numel()
        return torch.cat(out)

    def sample(self, batch: int) -> Dict[str, torch.Tensor]:
        t = self._draw(batch)
        idx = t % self.capacity
        steps = (t[:, None] + self.offsets) % self.capacity            # [B, n]
        r = self.reward[steps]
        dsc = self.discount[steps]
        reward = torch.zeros(batch)
        discount = torch.ones(batch)
        for k in range(self.n_step):                                    # DrQ-v2's loop
            reward += discount * r[:, k]
            discount *= dsc[:, k] * self.gamma
        return {"obs": self.obs.index_select(0, idx),
                "action": self.action.index_select(0, steps[:, 0]),
                "reward": reward, "discount": discount,
                "next_obs": self.obs.index_select(0, steps[:, -1])}


# --------------------------------------------------------------------------
# DMControl-GB (nicklashansen/dmcontrol-generalization-benchmark):
# src/augmentations.py
# --------------------------------------------------------------------------

# view_as_windows_cuda and random_crop are verbatim apart from the assertion that
# the input is a CUDA tensor (dropped so that the CPU column runs too);
# random_shift here is pad + random_crop, the form some DMControl-GB versions
# (and forks) have; upstream's random_shift crops with kornia's RandomCrop
# (dmcgb_random_shift_kornia below, which bench_side_by_side.py and
# benchmarks/bench_agent.py use; this one is bench_ops.py's eager row). The
# random_crop offsets are random_(0, crop_max), i.e. 0..7 for pad 4: 8 of the 9
# shifts (the CURL off-by-one); obsaug draws all 9.
def view_as_windows_cuda(x, window_shape):
    """PyTorch CUDA-enabled implementation of view_as_windows"""
    assert isinstance(window_shape, tuple) and len(window_shape) == len(x.shape), \
        'window_shape must be a tuple with same number of dimensions as x'
    slices = tuple(slice(None, None, st) for st in torch.ones(4).long())
    win_indices_shape = [
        x.size(0),
        x.size(1) - int(window_shape[1]),
        x.size(2) - int(window_shape[2]),
        x.size(3),
    ]
    new_shape = tuple(list(win_indices_shape) + list(window_shape))
    strides = tuple(list(x[slices].stride()) + list(x.stride()))
    return x.as_strided(new_shape, strides)


def dmcgb_random_crop(x, size=84, w1=None, h1=None):
    """Vectorized CUDA implementation of random crop, imgs: (B,C,H,W), size: output size"""
    n = x.shape[0]
    img_size = x.shape[-1]
    crop_max = img_size - size
    if crop_max <= 0:
        return x
    x = x.permute(0, 2, 3, 1)
    if w1 is None:
        w1 = torch.LongTensor(n).random_(0, crop_max)
        h1 = torch.LongTensor(n).random_(0, crop_max)
    windows = view_as_windows_cuda(x, (1, size, size, 1))[..., 0, :, :, 0]
    cropped = windows[torch.arange(n), w1, h1]
    return cropped


def dmcgb_random_shift(imgs, pad=4):
    """Vectorized random shift, imgs: (B,C,H,W), pad: #pixels"""
    _, _, h, w = imgs.shape
    imgs = F.pad(imgs, (pad, pad, pad, pad), mode='replicate')
    return dmcgb_random_crop(imgs, size=h)


_random_crop = {}


def dmcgb_random_shift_kornia(imgs, pad=4, reuse_crop=False):
    """DMControl-GB's random_shift as bench_side_by_side.py and benchmarks/bench_agent.py
    reproduce it: F.pad(imgs, (pad,)*4, mode='replicate') then kornia's
    RandomCrop((h, w)), a new module per call, as published. reuse_crop=True
    (benchmarks/bench_agent.py) builds the RandomCrop module once per (h, w) and reuses
    it (the same draws; DMControl-GB builds it per call, which costs the same
    order)."""
    import kornia.augmentation
    _, _, h, w = imgs.shape
    imgs = F.pad(imgs, (pad, pad, pad, pad), mode='replicate')
    if not reuse_crop:
        return kornia.augmentation.RandomCrop((h, w))(imgs)
    crop = _random_crop.get((h, w))
    if crop is None:
        crop = _random_crop[(h, w)] = kornia.augmentation.RandomCrop((h, w))
    return crop(imgs)


def places_transform(image_size: int, channels: int):
    """DMControl-GB's Places transform: RandomResizedCrop(image_size),
    RandomHorizontalFlip(), ToTensor(); Grayscale(1) before ToTensor for
    1-channel (Atari) frames, an adaptation: upstream has RGB only."""
    import torchvision.transforms as TF
    t = [TF.RandomResizedCrop(image_size), TF.RandomHorizontalFlip()]
    if channels == 1:  # Atari adaptation: upstream has RGB only
        t.append(TF.Grayscale(1))
    t.append(TF.ToTensor())
    return TF.Compose(t)


def photo_files(src: str) -> List[str]:
    return sorted(os.path.join(src, f) for f in os.listdir(src)
                  if f.lower().endswith(PHOTO_EXT) and os.path.isfile(os.path.join(src, f)))


def build_image_folder(src: str, mode: str, min_items: int, prefix: str = "obsaug_sbs_") -> str:
    """A temp ImageFolder root with one class folder, `photos`, of >= min_items
    images (symlinks), standing in for DMControl-GB's Places365 folder.

    mode 'places256': the photos of `src` re-encoded once at Places365-standard's
    format (256x256 JPEG, quality 90, bicubic resize), the format the published
    loader decodes per image; they sit in `_places256` under the root (so an
    ImageFolder over the root also sees them as a second class). mode 'photos':
    links to the original files. The class folder holds each image many times
    so that an epoch lasts: like Places365's 1.8M images, no re-iteration (which
    respawns non-persistent workers) happens inside timed calls. The caller
    removes the root (shutil.rmtree)."""
    files = photo_files(src)
    if not files:
        raise SystemExit(f"no photos in {src} (run scripts/fetch_photos.sh)")
    root = tempfile.mkdtemp(prefix=prefix)
    cls = os.path.join(root, "photos")
    os.makedirs(cls)
    if mode == "places256":
        from PIL import Image
        base_dir = os.path.join(root, "_places256")
        os.makedirs(base_dir)
        base = []
        for i, f in enumerate(files):
            with Image.open(f) as im:
                p = os.path.join(base_dir, f"{i:03d}.jpg")
                im.convert("RGB").resize((256, 256), Image.BICUBIC).save(p, "JPEG", quality=90)
                base.append(p)
    else:
        base = [os.path.abspath(f) for f in files]
    reps = max(1, math.ceil(min_items / len(base)))
    for r in range(reps):
        for i, f in enumerate(base):
            ext = os.path.splitext(f)[1].lower()
            os.symlink(f, os.path.join(cls, f"r{r:04d}_{i:03d}{ext}"))
    return root


class DMCGB:
    """DMControl-GB's src/augmentations.py random_overlay (and random_shift),
    re-implemented from its published behaviour. Its module globals become the
    attributes of one object: `_load_places` builds torchvision
    ImageFolder(places_transform) in a DataLoader(batch_size=B, shuffle=True,
    num_workers (16 upstream), pin_memory=True) on the first call, with that
    call's batch size; every call runs `_get_places_batch(B)` (next(iter),
    re-iterating on StopIteration or a short batch) and `.cuda()` (here
    .to(device)), then `imgs.repeat(1, x.size(1)//3, 1, 1)` (//channels here)
    and `((1-alpha)*(x/255.) + alpha*imgs)*255.` with alpha 0.5: float 0..255 out.

    pin_memory: default device.type == 'cuda' (benchmarks/bench_agent.py passes
    torch.cuda.is_available()). class_dir: when set, only the images of that
    class folder (benchmarks/bench_agent.py: 'photos'; empty classes allowed)."""

    def __init__(self, root: str, device: torch.device, channels: int, num_workers: int,
                 pin_memory: Optional[bool] = None, class_dir: Optional[str] = None):
        self.root, self.device, self.channels = root, device, channels
        self.num_workers = num_workers
        self.pin_memory = device.type == "cuda" if pin_memory is None else pin_memory
        self.class_dir = class_dir
        self.places_dataloader = None
        self.places_iter = None

    def _dataset(self, image_size):
        import torchvision.datasets as datasets
        tf = places_transform(image_size, self.channels)
        if self.class_dir is None:
            return datasets.ImageFolder(self.root, tf)
        keep = self.class_dir
        return datasets.ImageFolder(
            self.root, tf, allow_empty=True,
            is_valid_file=lambda f: os.path.basename(os.path.dirname(f)) == keep)

    def _load_places(self, batch_size=256, image_size=84):
        self.places_dataloader = torch.utils.data.DataLoader(
            self._dataset(image_size),
            batch_size=batch_size, shuffle=True,
            num_workers=self.num_workers, pin_memory=self.pin_memory)
        self.places_iter = iter(self.places_dataloader)

    def _get_places_batch(self, batch_size):
        try:
            imgs, _ = next(self.places_iter)
            if imgs.size(0) < batch_size:
                self.places_iter = iter(self.places_dataloader)
                imgs, _ = next(self.places_iter)
        except StopIteration:
            self.places_iter = iter(self.places_dataloader)
            imgs, _ = next(self.places_iter)
        return imgs.to(self.device)   # upstream: imgs.cuda()

    def random_overlay(self, x):
        alpha = 0.5
        if self.places_dataloader is None:
            self._load_places(batch_size=x.size(0), image_size=x.size(-1))
        imgs = self._get_places_batch(batch_size=x.size(0)).repeat(
            1, x.size(1) // self.channels, 1, 1)
        return ((1 - alpha) * (x / 255.) + (alpha) * imgs) * 255.

    @staticmethod
    def random_shift(imgs, pad=4):
        return dmcgb_random_shift_kornia(imgs, pad)

    def __call__(self, obs):
        x = obs.float()                 # the replay buffer's float tensor
        x = self.random_shift(x, 4)     # SVEA: shifted at sampling...
        return self.random_overlay(x)   # ...then overlaid

    def close(self):
        it = self.places_iter
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.places_iter = self.places_dataloader = None


# --------------------------------------------------------------------------
# DMControl-GB: src/utils.py
# --------------------------------------------------------------------------

class LazyFrames:
    """DMControl-GB src/utils.py LazyFrames (extremely_lazy=True, the default):
    references to the S frame arrays of the FrameStack deque, so consecutive
    observations share their frames; concatenated along channels whenever the
    stack is read."""

    def __init__(self, frames, extremely_lazy=True):
        self._frames = frames
        self._extremely_lazy = extremely_lazy
        self._out = None

    @property
    def frames(self):
        return self._frames

    def _force(self):
        if self._extremely_lazy:
            return np.concatenate(self._frames, axis=0)
        if self._out is None:
            self._out = np.concatenate(self._frames, axis=0)
            self._frames = None
        return self._out

    def __array__(self, dtype=None, copy=None):
        out = self._force()
        if dtype is not None:
            out = out.astype(dtype)
        return out

    def __len__(self):
        if self._extremely_lazy:
            return len(self._frames)
        return len(self._force())

    def __getitem__(self, i):
        return self._force()[i]


class DMCGBReplayBuffer:
    """DMControl-GB src/utils.py ReplayBuffer: (obs, next_obs) LazyFrames pairs in
    a Python list, actions / rewards / not_dones arrays; sampling builds each
    stack with np.concatenate, np.array over the batch, torch.as_tensor.
    np.array(x, copy=False) of the original is np.asarray under numpy 2.

    prefill=True: the list starts with `capacity` placeholder frames
    np.ones((3, H, W)) (upstream's prefill_memory; benchmarks/bench_agent.py);
    prefill=False: it starts empty and grows (bench_replay.py, whose RSS
    measurement would otherwise count the placeholders).
    seed=None: indices from the global np.random (as upstream; benchmarks/bench_agent.py);
    else a np.random.RandomState(seed) (bench_replay.py)."""

    def __init__(self, obs_shape, action_shape, capacity, batch_size, seed=None,
                 prefill=False):
        self.capacity = capacity
        self.batch_size = batch_size
        self._obses = []
        if prefill:
            _, h, w = obs_shape
            self._obses = [np.ones((3, h, w), dtype=np.uint8) for _ in range(capacity)]
        self.actions = np.empty((capacity, *action_shape), dtype=np.float32)
        self.rewards = np.empty((capacity, 1), dtype=np.float32)
        self.not_dones = np.empty((capacity, 1), dtype=np.float32)
        self.idx = 0
        self.full = False
        self.rng = np.random if seed is None else np.random.RandomState(seed)

    def add(self, obs, action, reward, next_obs, done):
        obses = (obs, next_obs)
        if self.idx >= len(self._obses):
            self._obses.append(obses)
        else:
            self._obses[self.idx] = obses
        np.copyto(self.actions[self.idx], action)
        np.copyto(self.rewards[self.idx], reward)
        np.copyto(self.not_dones[self.idx], not done)
        self.idx = (self.idx + 1) % self.capacity
        self.full = self.full or self.idx == 0

    def _get_idxs(self, n=None):
        if n is None:
            n = self.batch_size
        return self.rng.randint(0, self.capacity if self.full else self.idx, size=n)

    def _encode_obses(self, idxs):
        obses, next_obses = [], []
        for i in idxs:
            obs, next_obs = self._obses[i]
            obses.append(np.asarray(obs))          # np.array(obs, copy=False) in numpy 1
            next_obses.append(np.asarray(next_obs))
        return np.array(obses), np.array(next_obses)

    def sample(self, n=None):
        """uint8 on the CPU: the .cuda().float() of the original is left out."""
        idxs = self._get_idxs(n)
        obs, next_obs = self._encode_obses(idxs)
        obs = torch.as_tensor(obs)                 # .cuda().float() in the original
        next_obs = torch.as_tensor(next_obs)
        actions = torch.as_tensor(self.actions[idxs])
        rewards = torch.as_tensor(self.rewards[idxs])
        not_dones = torch.as_tensor(self.not_dones[idxs])
        return obs, actions, rewards, next_obs, not_dones

    def sample_drq(self, n=None, pad=4, reuse_crop=False):
        """float 0..255 on the CPU (.cuda() in DMControl-GB), obs and next_obs
        random-shifted (dmcgb_random_shift_kornia)."""
        idxs = self._get_idxs(n)
        obs, next_obs = self._encode_obses(idxs)
        obs = torch.as_tensor(obs).float()               # .cuda() in DMControl-GB
        next_obs = torch.as_tensor(next_obs).float()
        actions = torch.as_tensor(self.actions[idxs])
        rewards = torch.as_tensor(self.rewards[idxs])
        not_dones = torch.as_tensor(self.not_dones[idxs])
        obs = dmcgb_random_shift_kornia(obs, pad, reuse_crop)
        next_obs = dmcgb_random_shift_kornia(next_obs, pad, reuse_crop)
        return obs, actions, rewards, next_obs, not_dones


# --------------------------------------------------------------------------
# DMControl-GB: src/augmentations.py random_conv (SVEA's other augmentation)
# --------------------------------------------------------------------------

def dmcgb_random_conv(x):
    """DMControl-GB's random_conv, re-implemented from its behaviour: a Python
    loop over the batch; per sample torch.randn(3, 3, 3, 3) weights moved to
    x's device, the sample's S frames as [S, 3, H, W] / 255, F.pad replicate 1,
    F.conv2d, sigmoid, * 255, and the result appended to the output with
    torch.cat on every iteration (quadratic copying, as published); float
    0..255 in and out."""
    n, c, h, w = x.shape
    total = None
    for i in range(n):
        weights = torch.randn(3, 3, 3, 3).to(x.device)
        frames = x[i:i + 1].reshape(-1, 3, h, w) / 255.
        frames = F.pad(frames, pad=[1, 1, 1, 1], mode='replicate')
        out = torch.sigmoid(F.conv2d(frames, weights)) * 255.
        total = out if total is None else torch.cat([total, out], dim=0)
    return total.reshape(n, c, h, w)


def grouped_random_conv(x):
    """The same augmentation batched, as one would vectorise it: B weight sets
    in one [B*3, 3, 3, 3] tensor (torch.randn on x's device), the batch as
    [S, B*3, H, W], replicate pad, one F.conv2d with groups=B, sigmoid * 255."""
    n, c, h, w = x.shape
    s = c // 3
    weights = torch.randn(n * 3, 3, 3, 3, device=x.device)
    frames = x.reshape(n, s, 3, h, w).transpose(0, 1).reshape(s, n * 3, h, w) / 255.
    frames = F.pad(frames, pad=[1, 1, 1, 1], mode='replicate')
    out = torch.sigmoid(F.conv2d(frames, weights, groups=n)) * 255.
    return out.reshape(s, n, 3, h, w).transpose(0, 1).reshape(n, c, h, w)


# --------------------------------------------------------------------------
# RAD (MishaLaskin/rad): data_augs.py and TransformLayer.py's ColorJitterLayer,
# re-implemented from their behaviour. The numpy functions take the replay's
# uint8 (B, C, H, W) arrays; the torch ones float 0..1 tensors (RAD divides
# by 255 in between). Draws come from np.random / torch's generator as in RAD.
# --------------------------------------------------------------------------

def rad_random_crop(imgs, out=84):
    """numpy: offsets np.random.randint(0, h - out + 1) per sample (both from
    h), then a Python loop copying each window into a preallocated array."""
    n, c, h, w = imgs.shape
    top_max = h - out + 1
    w1 = np.random.randint(0, top_max, n)
    h1 = np.random.randint(0, top_max, n)
    cropped = np.empty((n, c, out, out), dtype=imgs.dtype)
    for i in range(n):
        cropped[i] = imgs[i, :, h1[i]:h1[i] + out, w1[i]:w1[i] + out]
    return cropped


def rad_random_translate(imgs, size):
    """numpy: a zero canvas (n, c, size, size), offsets randint(0, size - h + 1)
    and randint(0, size - w + 1), a Python loop pasting each frame."""
    n, c, h, w = imgs.shape
    outs = np.zeros((n, c, size, size), dtype=imgs.dtype)
    h1s = np.random.randint(0, size - h + 1, n)
    w1s = np.random.randint(0, size - w + 1, n)
    for i in range(n):
        outs[i, :, h1s[i]:h1s[i] + h, w1s[i]:w1s[i] + w] = imgs[i]
    return outs


def _rad_cutout_loop(imgs, min_cut, max_cut, colour):
    """RAD's cutout loop: sides randint(min_cut, max_cut) per axis, the side
    reused as the offset, each sample copied then boxed."""
    n, c, h, w = imgs.shape
    w1 = np.random.randint(min_cut, max_cut, n)
    h1 = np.random.randint(min_cut, max_cut, n)
    boxes = np.random.randint(0, 255, size=(n, c)) / 255. if colour else None
    cutouts = np.empty((n, c, h, w), dtype=imgs.dtype)
    for i in range(n):
        img = imgs[i].copy()
        region = img[:, h1[i]:2 * h1[i], w1[i]:2 * w1[i]]
        if colour:
            region[...] = np.tile(boxes[i].reshape(-1, 1, 1), (1,) + region.shape[1:])
        else:
            region[...] = 0
        cutouts[i] = img
    return cutouts


def rad_random_cutout(imgs, min_cut=10, max_cut=30):
    return _rad_cutout_loop(imgs, min_cut, max_cut, colour=False)


def rad_random_cutout_color(imgs, min_cut=10, max_cut=30):
    return _rad_cutout_loop(imgs, min_cut, max_cut, colour=True)


def _rad_mask(n, p, channels, dtype, device):
    """RAD's per-sample gate: np.random.uniform(0, 1, n) <= p, as a float mask
    [n, channels] built on the host and moved to the device."""
    keep = torch.from_numpy(np.random.uniform(0., 1., size=(n,)) <= p)
    mask = keep[:, None] * torch.ones([1, channels]).type(keep.dtype)
    return mask.type(dtype).to(device)


def rad_random_flip(images, p=.2):
    """torch: the whole batch flipped on the width axis, blended per sample
    with a host-drawn mask: mask * flipped + (1 - mask) * images."""
    bs, c, h, w = images.shape
    flipped = images.flip([3])
    mask = _rad_mask(bs, p, c, images.dtype, images.device)[:, :, None, None]
    return (mask * flipped + (1 - mask) * images).view([bs, -1, h, w])


def rad_random_rotation(images, p=.3):
    """torch: rot90 by 1, 2 and 3 quarter turns of the whole batch, a host-drawn
    choice per sample (gate rnd <= p times randint(1, 4)), four one-hot masks
    and their weighted sum."""
    bs, c, h, w = images.shape
    turns = [images, images.rot90(1, [2, 3]), images.rot90(2, [2, 3]), images.rot90(3, [2, 3])]
    gate = np.random.uniform(0., 1., size=(bs,)) <= p
    choice = torch.from_numpy(np.random.randint(1, 4, size=(bs,)) * gate).to(images.device)
    out = 0
    for q, turned in enumerate(turns):
        m = torch.zeros_like(choice)
        m[torch.where(choice == q)] = 1
        m = (m[:, None] * torch.ones([1, c]).type(choice.dtype).type(images.dtype)
             .to(images.device))[:, :, None, None]
        out = out + m * turned
    return out.view([bs, -1, h, w])


def _rad_gray(imgs):
    """[b, S*3, h, w] uint8 -> [b, S, 3, h, w] float: 0.2989 R + 0.587 G + 0.114 B,
    truncated to uint8, tiled over the three channels."""
    b, c, h, w = imgs.shape
    v = imgs.view([b, c // 3, 3, h, w])
    g = v[:, :, 0] * 0.2989 + v[:, :, 1] * 0.587 + v[:, :, 2] * 0.114
    g = g.type(torch.uint8).float()[:, :, None]
    return g * torch.ones([1, 1, 3, 1, 1], dtype=g.dtype).float().to(imgs.device)


def rad_random_grayscale(images, p=.3):
    """torch float 0..1: * 255 -> uint8 (truncating), gray of every sample, a
    host-drawn mask per sample and frame, blend, back to the input type / 255."""
    in_type = images.type()
    u8 = (images * 255.).type(torch.uint8)
    bs, c, h, w = u8.shape
    gray = _rad_gray(u8)
    frames = c // 3
    u8 = u8.view(*gray.shape)
    mask = _rad_mask(bs, p, frames, u8.dtype, u8.device)[:, :, None, None, None]
    out = mask * gray + (1 - mask) * u8
    return out.view([bs, -1, h, w]).type(in_type) / 255.


def rad_random_convolution(imgs):
    """torch float 0..1: one nn.Conv2d(3, 3, 3, bias=False, padding=1) built per
    call; per sample xavier_normal_ on its weight, the sample's frames through
    it, appended with torch.cat (a loop over the batch, as published)."""
    b, c, h, w = imgs.shape
    conv = nn.Conv2d(3, 3, kernel_size=3, bias=False, padding=1).to(imgs.device)
    total = None
    for i in range(b):
        torch.nn.init.xavier_normal_(conv.weight.data)
        out = conv(imgs[i:i + 1].reshape(-1, 3, h, w))
        total = out if total is None else torch.cat((total, out), 0)
    return total.reshape(-1, c, h, w)


def _rad_rgb2hsv(rgb, eps=1e-8):
    r, g, b = rgb[:, 0], rgb[:, 1], rgb[:, 2]
    cmax = rgb.max(1)[0]
    cmin = rgb.min(1)[0]
    delta = cmax - cmin
    hue = torch.zeros((rgb.shape[0], rgb.shape[2], rgb.shape[3])).to(rgb.device)
    hue[cmax == r] = (((g - b) / (delta + eps)) % 6)[cmax == r]
    hue[cmax == g] = ((b - r) / (delta + eps) + 2)[cmax == g]
    hue[cmax == b] = ((r - g) / (delta + eps) + 4)[cmax == b]
    hue[cmax == 0] = 0.0
    hue = (hue / 6.).unsqueeze(1)
    sat = delta / (cmax + eps)
    sat[cmax == 0.] = 0.
    return torch.cat((hue, sat.unsqueeze(1), cmax.unsqueeze(1)), dim=1)


def _rad_hsv2rgb(hsv):
    hsv = torch.clamp(hsv, 0, 1)
    hue = hsv[:, 0] * 360.
    sat, val = hsv[:, 1], hsv[:, 2]
    c = val * sat
    x = -c * (torch.abs((hue / 60.) % 2 - 1) - 1)
    m = (val - c).unsqueeze(1)
    prime = torch.zeros_like(hsv).to(hsv.device)
    # sextant k: (channel that gets c, channel that gets x)
    for k, (ci, xi) in enumerate(((0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2))):
        inds = (hue < 60 * (k + 1)) * (hue >= 60 * k)
        prime[:, ci][inds] = c[inds]
        prime[:, xi][inds] = x[inds]
    return torch.clamp(prime + torch.cat((m, m, m), dim=1), 0, 1)


class RadColorJitterLayer(nn.Module):
    """RAD's ColorJitterLayer(brightness, contrast, saturation, hue, p,
    batch_size, stack_size=3): factors drawn uniform per sample on the device
    (batch_size of them, repeated over the stack), contrast as a per-channel
    mean blend in RGB, brightness / saturation scaling V / S and hue adding
    h * 255 / 360 in HSV (masked assignments both ways), the RGB step first or
    last with probability 1/2 (python random), samples chosen by
    np.random.choice with probability p and written back into the input."""

    def __init__(self, brightness=0.4, contrast=0.4, saturation=0.4, hue=0.5, p=1.0,
                 batch_size=128, stack_size=3):
        super().__init__()
        self.brightness = [max(1 - brightness, 0), 1 + brightness]
        self.contrast = [max(1 - contrast, 0), 1 + contrast]
        self.saturation = [max(1 - saturation, 0), 1 + saturation]
        self.hue = [-hue, hue]
        self.prob, self.batch_size, self.stack_size = p, batch_size, stack_size

    def _factor(self, bounds, device):
        f = torch.empty(self.batch_size, device=device).uniform_(*bounds)
        return f.reshape(-1, 1).repeat(1, self.stack_size).reshape(-1)

    def adjust_contrast(self, x):
        f = self._factor(self.contrast, x.device)
        means = torch.mean(x, dim=(2, 3), keepdim=True)
        return torch.clamp((x - means) * f.view(len(x), 1, 1, 1) + means, 0, 1)

    def adjust_hue(self, x):
        f = self._factor(self.hue, x.device)
        h = x[:, 0, :, :]
        h += f.view(len(x), 1, 1) * 255. / 360.
        x[:, 0, :, :] = h % 1
        return x

    def adjust_brightness(self, x):
        f = self._factor(self.brightness, x.device)
        x[:, 2, :, :] = torch.clamp(x[:, 2, :, :] * f.view(len(x), 1, 1), 0, 1)
        return torch.clamp(x, 0, 1)

    def adjust_saturate(self, x):
        f = self._factor(self.saturation, x.device)
        x[:, 1, :, :] = torch.clamp(x[:, 1, :, :] * f.view(len(x), 1, 1), 0, 1)
        return torch.clamp(x, 0, 1)

    def transform(self, inputs):
        hsv_steps = [_rad_rgb2hsv, self.adjust_brightness, self.adjust_hue,
                     self.adjust_saturate, _rad_hsv2rgb]
        steps = ([self.adjust_contrast] + hsv_steps if random.uniform(0, 1) >= 0.5
                 else hsv_steps + [self.adjust_contrast])
        for step in steps:
            inputs = step(inputs)
        return inputs

    def forward(self, inputs):
        chosen = np.random.choice([True, False], len(inputs), p=[self.prob, 1 - self.prob])
        inds = torch.tensor(chosen).to(inputs.device)
        if chosen.sum() > 0:
            inputs[inds] = self.transform(inputs[inds])
        return inputs


def rad_random_color_jitter(imgs, batch_size=None):
    """RAD's random_color_jitter: the (B, S*3, H, W) float 0..1 batch viewed as
    (B*S, 3, H, W) through a ColorJitterLayer(0.4, 0.4, 0.4, 0.5, p=1) built
    per call. RAD hard-codes batch_size=128 (the layer's factor count, so it
    runs only at B = 128, S = 3); here it is the batch's B."""
    b, c, h, w = imgs.shape
    layer = RadColorJitterLayer(0.4, 0.4, 0.4, 0.5, p=1.0, batch_size=batch_size or b,
                                stack_size=c // 3)
    return layer(imgs.view(-1, 3, h, w)).view(b, c, h, w)
