"""RAD's ``data_augs`` functions (Laskin et al. 2020, MishaLaskin/rad) on obsaug's ops.

Same names, arguments, defaults and conventions as RAD's ``data_augs.py``, so
``import obsaug.nn.rad as rad`` replaces ``import data_augs as rad``. RAD mixes
two conventions, and each function here keeps its own:

- numpy, applied in RAD's replay buffer *before* the division by 255:
  ``random_crop``, ``random_translate``, ``random_cutout``,
  ``random_cutout_color`` take a numpy array ``(B, C, H, W)`` (uint8 0..255
  as RAD's buffer holds, or float32) and return a numpy array of the same
  dtype;
- torch, applied *after* ``obs / 255.``: ``random_flip``, ``random_rotation``,
  ``random_grayscale``, ``random_convolution``, ``random_color_jitter`` take a
  tensor ``(B, S*3, H, W)`` on any device (float32 0..1; ``random_flip`` and
  ``random_rotation`` take uint8 too) and return a new tensor of the same
  dtype and device (RAD's colour jitter writes into its input; this does not).

Random draws follow the generators RAD's functions use (obsaug.nn._steps):
each numpy function's call takes one integer ``d`` in ``[0, 2**63)`` from
numpy's global generator (``np.random.randint``), each torch function's from
torch's default generator (``torch.randint``), and is then exactly the
``obsaug.ops`` call at seed 0 and step ``d``. So ``np.random.seed(s)`` and
``torch.manual_seed(s)`` (RAD's ``set_seed_everywhere``) repeat the
augmentations, as they repeat RAD's. Parameters are drawn per sample and
shared by its stacked frames, as RAD does (the colour cutout's colours, which
RAD draws per channel of the stack, are per channel too). ``no_aug(x)``
returns ``x``, as RAD's, so RAD's whole ``aug_to_func`` table builds.

Where obsaug deliberately differs from RAD (docs/ops.md has the table):
the gates are ``u < p`` on obsaug's generator, not ``np.random.uniform() <= p``;
cutouts draw the box size (RAD's 10..29) and its position apart (RAD uses one
number for both, so its boxes start at their own size); the colour cutout
fills 0..255 on uint8 input (RAD assigns a 0..1 colour to the uint8 array,
which truncates to black); grayscale keeps float values (RAD truncates every
pixel to a uint8 level) with PIL's 0.299 (RAD's and torchvision's tensor
``rgb_to_grayscale``: 0.2989); the colour jitter is torchvision's RGB
definitions in a fixed order (RAD's ColorJitterLayer works in HSV, in one of
two orders, and needs B = 128).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch

from .. import ops
from . import _channels_first, _steps

__all__ = ["random_crop", "random_translate", "random_flip", "random_rotation",
           "random_grayscale", "random_cutout", "random_cutout_color", "random_convolution",
           "random_color_jitter", "no_aug"]

_NUMPY_DTYPES = (np.uint8, np.float32)


# --- the conventions ---------------------------------------------------------

def _from_numpy(name: str, imgs: Any) -> torch.Tensor:
    """RAD's numpy batch ``(B, C, H, W)`` as a CPU tensor sharing its memory where it can."""
    if not isinstance(imgs, np.ndarray):
        raise TypeError(f"{name}: imgs must be a numpy array (B, C, H, W) as RAD passes it "
                        f"(uint8 0..255 from its replay buffer, or float32), "
                        f"got {type(imgs).__name__}")
    if imgs.dtype not in _NUMPY_DTYPES:
        raise TypeError(f"{name}: imgs must be a uint8 or float32 numpy array, "
                        f"got dtype {imgs.dtype}")
    if imgs.ndim != 4:
        raise ValueError(f"{name}: imgs must have shape (B, C, H, W), got shape {imgs.shape}")
    _channels_first(name, imgs.shape)
    return torch.from_numpy(np.ascontiguousarray(imgs))


def _tensor(name: str, images: Any, uint8_ok: bool) -> torch.Tensor:
    """RAD's torch batch ``(B, S*3, H, W)``: float32 0..1 (uint8 too where RAD's function takes any dtype)."""
    allowed = "float32 (0..1) or uint8" if uint8_ok else "float32 holding 0..1"
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"{name}: images must be a torch tensor (B, S*3, H, W), {allowed}, "
                        f"as RAD applies it after obs / 255., got {type(images).__name__}")
    if images.dtype != torch.float32 and not (uint8_ok and images.dtype == torch.uint8):
        raise TypeError(f"{name}: images must be {allowed} (RAD divides the replay's uint8 by "
                        f"255 before this augmentation), got {images.dtype}; obsaug.ops takes "
                        f"uint8 or float32 0..255 directly")
    _channels_first(name, tuple(images.shape))
    return images


def _draw() -> Dict[str, int]:
    """A torch function's draw: one value of torch's default generator."""
    seed, step = _steps.draw()
    return {"seed": seed, "step": step}


def _draw_numpy() -> Dict[str, int]:
    """A numpy function's draw: one value of numpy's global generator."""
    seed, step = _steps.draw_numpy()
    return {"seed": seed, "step": step}


def _cut_range(name: str, min_cut: int, max_cut: int) -> Tuple[int, int]:
    """RAD's ``np.random.randint(min_cut, max_cut)``: sizes min_cut .. max_cut - 1."""
    for key, value in (("min_cut", min_cut), ("max_cut", max_cut)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{name}: {key} must be an int, got {type(value).__name__}")
    if not 1 <= min_cut < max_cut:
        raise ValueError(f"{name}: needs 1 <= min_cut < max_cut (box sides are drawn in "
                         f"min_cut .. max_cut - 1, as RAD's np.random.randint), "
                         f"got min_cut={min_cut}, max_cut={max_cut}")
    return int(min_cut), int(max_cut) - 1


# --- numpy functions (RAD's replay buffer, uint8 0..255) -----------------------

def random_crop(imgs: np.ndarray, out: int = 84) -> np.ndarray:
    """RAD's ``random_crop``: a random ``out`` x ``out`` window per sample.

    imgs: numpy ``(B, C, H, W)`` uint8 (0..255, RAD's replay buffer) or
    float32; returns a numpy ``(B, C, out, out)`` array of the same dtype.
    Every offset in ``0 .. H - out`` and ``0 .. W - out`` is equally likely,
    as in RAD (CURL's and DMControl-GB's crops never draw the last one); H
    and W are drawn apart (RAD draws both from H).
    """
    x = _from_numpy("random_crop", imgs)
    return ops.crop(x, size=out, **_draw_numpy()).numpy()


def random_translate(imgs: np.ndarray, size: int, return_random_idxs: bool = False,
                     h1s: Optional[np.ndarray] = None,
                     w1s: Optional[np.ndarray] = None
                     ) -> Union[np.ndarray, Tuple[np.ndarray, Dict[str, np.ndarray]]]:
    """RAD's ``random_translate``: each frame at a random place on a ``size`` x ``size`` canvas of 0.

    imgs: numpy ``(B, C, H, W)`` uint8 or float32 with ``size >= H, W``;
    returns numpy ``(B, C, size, size)`` of the same dtype, the frame at rows
    ``h1 .. h1+H-1`` and columns ``w1 .. w1+W-1``, with h1 in ``0 .. size-H``
    and w1 in ``0 .. size-W`` (``obsaug.ops.translate``). As in RAD,
    ``return_random_idxs=True`` also returns ``dict(h1s=..., w1s=...)``
    (int64 arrays of length B), and ``h1s`` / ``w1s`` given place the frames
    there instead of drawing (to "do the same to another set of imgs").
    """
    x = _from_numpy("random_translate", imgs)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise TypeError(f"random_translate: size must be an int, got {type(size).__name__}")
    n, c, h, w = x.shape
    draw = _draw_numpy()
    if h1s is None and w1s is None and not return_random_idxs:
        return ops.translate(x, size=int(size), **draw).numpy()
    drawn_h, drawn_w = _translate_offsets(n, h, w, int(size), draw)
    h1s = drawn_h if h1s is None else np.asarray(h1s, dtype=np.int64)
    w1s = drawn_w if w1s is None else np.asarray(w1s, dtype=np.int64)
    for key, given, limit in (("h1s", h1s, size - h), ("w1s", w1s, size - w)):
        if given.shape != (n,):
            raise ValueError(f"random_translate: {key} must have one offset per sample "
                             f"(shape ({n},)), got shape {given.shape}")
        if n and (given.min() < 0 or given.max() > limit):
            raise IndexError(f"random_translate: {key} must lie in 0..{limit} "
                             f"(size {size} minus the frame), got {given.min()}..{given.max()}")
    outs = np.zeros((n, c, size, size), dtype=imgs.dtype)
    for out, img, h1, w1 in zip(outs, x.numpy(), h1s, w1s):
        out[:, h1:h1 + h, w1:w1 + w] = img
    if return_random_idxs:
        return outs, dict(h1s=h1s, w1s=w1s)
    return outs


def _translate_offsets(n: int, h: int, w: int, size: int,
                       draw: Dict[str, int]) -> Tuple[np.ndarray, np.ndarray]:
    """The (h1, w1) per sample that ``ops.translate`` draws at ``draw``: it
    places a frame of ones (the draws do not depend on the pixels)."""
    probe = ops.translate(torch.ones((n, 1, h, w), dtype=torch.uint8), size=size, **draw)
    inside = probe[:, 0] != 0
    h1 = inside.any(dim=2).to(torch.uint8).argmax(dim=1)
    w1 = inside.any(dim=1).to(torch.uint8).argmax(dim=1)
    return h1.numpy().astype(np.int64), w1.numpy().astype(np.int64)


def random_cutout(imgs: np.ndarray, min_cut: int = 10, max_cut: int = 30) -> np.ndarray:
    """RAD's ``random_cutout``: one black box per sample, shared by its frames.

    imgs: numpy ``(B, C, H, W)`` uint8 (0..255) or float32; returns a numpy
    array of the same shape and dtype. Box sides are drawn in
    ``min_cut .. max_cut - 1`` (RAD's ``np.random.randint(min_cut, max_cut)``,
    10..29 by default: ``obsaug.ops.cutout`` with ``max = max_cut - 1``).
    Difference: obsaug draws the box's position uniformly among those that
    fit; RAD reuses the side as the offset (box at ``[s, 2s)`` on each axis).
    """
    x = _from_numpy("random_cutout", imgs)
    lo, hi = _cut_range("random_cutout", min_cut, max_cut)
    return ops.cutout(x, min=lo, max=hi, fill="zeros", **_draw_numpy()).numpy()


def random_cutout_color(imgs: np.ndarray, min_cut: int = 10, max_cut: int = 30) -> np.ndarray:
    """RAD's ``random_cutout_color``: one box per sample, a random colour per channel.

    imgs: numpy ``(B, C, H, W)``; returns the same shape and dtype. The box as
    in :func:`random_cutout`, shared by the sample's channels; its colour, as
    RAD's ``randint(0, 255, size=(B, C))``, one value per channel of the stack
    (9 for 3 RGB frames), 0..255 on uint8 input and ``k / 255`` on float32
    input, RAD's colour scale. Draws: the box is ``obsaug.ops.cutout`` (fill
    zeros) at the call's seed and step, op index 0; the colour of channel c of
    sample b is the colour ``ops.cutout`` (fill color, C = 1, min = max = 1,
    op index 1) draws for sample ``b * C + c`` of a batch of 1x1 frames.
    Differences: on uint8 input RAD assigns its 0..1 colour to the uint8 array,
    which truncates it to 0 (a black box); obsaug fills the colour, and its
    colours reach 255 (RAD's ``randint(0, 255)`` stops at 254).
    """
    x = _from_numpy("random_cutout_color", imgs)
    lo, hi = _cut_range("random_cutout_color", min_cut, max_cut)
    draw = _draw_numpy()
    n, c, h, w = x.shape
    probe = torch.ones((n, 1, h, w), dtype=torch.uint8)
    box = ops.cutout(probe, min=lo, max=hi, fill="zeros", **draw)[:, :1] == 0
    colours = ops.cutout(torch.zeros((n * c, 1, 1, 1), dtype=torch.uint8), min=1, max=1,
                         fill="color", op_index=1, frame_channels=1, **draw).view(n, c, 1, 1)
    if x.dtype == torch.uint8:
        return torch.where(box, colours, x).numpy()
    return torch.where(box, colours.to(torch.float32) / 255.0, x).numpy()


def no_aug(x: Any) -> Any:
    """RAD's ``no_aug``: returns ``x`` itself (the identity entry of RAD's table)."""
    return x


# --- torch functions (after obs / 255., float 0..1) -------------------------------

def random_flip(images: torch.Tensor, p: float = .2) -> torch.Tensor:
    """RAD's ``random_flip``: each sample mirrored left-right with probability p.

    images: tensor ``(B, C, H, W)`` float32 (0..1) or uint8, any device;
    returns a new tensor, same shape, dtype and device; all C channels of a
    sample flip together (``obsaug.ops.flip``, axis horizontal).
    """
    x = _tensor("random_flip", images, uint8_ok=True)
    return ops.flip(x, p=p, axis="horizontal", **_draw())


def random_rotation(images: torch.Tensor, p: float = .3) -> torch.Tensor:
    """RAD's ``random_rotation``: with probability p, 1, 2 or 3 quarter turns per sample.

    images: tensor ``(B, C, H, W)`` float32 (0..1) or uint8 with H == W;
    returns a new tensor of the same shape, dtype and device. A rotated
    sample turns ``torch.rot90(x, q, dims=(2, 3))`` with q equally likely 1,
    2 or 3, as RAD (``obsaug.ops.rotate``).
    """
    x = _tensor("random_rotation", images, uint8_ok=True)
    return ops.rotate(x, p=p, **_draw())


def random_grayscale(images: torch.Tensor, p: float = .3) -> torch.Tensor:
    """RAD's ``random_grayscale``: with probability p, a sample's frames become gray.

    images: tensor ``(B, S*3, H, W)`` float32 holding 0..1; returns float32
    0..1, same shape and device. Gray ``g = 0.299 R + 0.587 G + 0.114 B`` in
    float32 written to all three channels (``obsaug.ops.grayscale``; it is
    linear, so it runs on the 0..1 values as they are). Differences: RAD
    uses 0.2989 for R and truncates every pixel of the batch to a uint8 level
    (``(x * 255).type(uint8) / 255``), gray or not; obsaug keeps the values.
    """
    x = _tensor("random_grayscale", images, uint8_ok=False)
    return ops.grayscale(x, p=p, **_draw())


def random_convolution(imgs: torch.Tensor) -> torch.Tensor:
    """RAD's ``random_convolution`` (Lee et al. 2020's network randomization).

    imgs: tensor ``(B, S*3, H, W)`` float32 holding 0..1 ("normalized", as
    RAD requires); returns float32 of the same shape and device, unbounded
    (no activation). Per sample one 3x3 convolution 3 -> 3 channels without
    bias, its weights Xavier-normal (std sqrt(2 / 54)) and shared by the
    sample's S frames, zero padding: ``obsaug.ops.random_conv`` with init
    xavier, padding zeros, activation none (``255 * conv(x / 255)``, so it
    acts on 0..1 input as ``conv(x)``, up to float rounding).
    """
    x = _tensor("random_convolution", imgs, uint8_ok=False)
    return ops.random_conv(x, init="xavier", padding="zeros", activation="none", **_draw())


def random_color_jitter(imgs: torch.Tensor, *, brightness: float = 0.4, contrast: float = 0.4,
                        saturation: float = 0.4, hue: float = 0.5,
                        p: float = 1.0) -> torch.Tensor:
    """RAD's ``random_color_jitter``: brightness, contrast, saturation 0.4, hue 0.5, p 1.

    imgs: tensor ``(B, S*3, H, W)`` float32 holding 0..1 (any B; RAD's layer
    is built for B = 128, S = 3); returns a new float32 0..1 tensor of the
    same shape and device (RAD writes into its input). Per sample one factor
    each, shared by its frames: ``obsaug.ops.color_jitter`` on ``imgs * 255``,
    divided by 255. Differences: torchvision's RGB definitions in the fixed
    order brightness, contrast, saturation, hue (RAD's ColorJitterLayer
    scales V and S in HSV, adds ``h * 255 / 360`` of a turn to the hue, takes
    each channel's own mean for contrast, and puts contrast first or last at
    random); the contrast mean is the gray mean before brightness, times the
    brightness factor (docs/ops.md).
    """
    x = _tensor("random_color_jitter", imgs, uint8_ok=False)
    out = ops.color_jitter(x * 255.0, brightness=brightness, contrast=contrast,
                           saturation=saturation, hue=hue, p=p, **_draw())
    return out / 255.0
