"""Drop-in stand-ins for the augmentations of common pixel-RL code.

``RandomShift(pad=4)`` replaces DrQ-v2's ``RandomShiftsAug`` (and DrQ's
``aug_trans``, replicate pad + random crop): float input ``[B, C, H, W]``
(0..255), float output, every sample translated by an integer ``(dx, dy)`` in
``[-pad, pad]^2`` with replicated borders (DrQ-v2 samples the same
distribution through ``grid_sample`` on a padded image and requires square
frames; this does not). uint8 and float32 run natively; float64, float16 and
bfloat16 (which DrQ-v2's takes too) are shifted exactly, as their bytes, and
come back in their dtype. It works under ``torch.compile(fullgraph=True)``.
Each call returns a new tensor (on the CPU a large one reuses the memory of an
earlier output its caller released, obsaug.ops' fresh outputs, so a training
loop does not page-fault a new output into memory on every call).

``random_overlay(x, dataset)``, ``random_shift(x, pad=4)``, ``random_crop(x,
size=84, w1=None, h1=None, return_w1_h1=False)`` and ``random_conv(x)`` have
the signatures of DMControl-GB's ``augmentations.py`` and take its float
0..255 observations (uint8 too; the result is float32, as upstream's).
``random_overlay`` blends one distractor photo per sample into all its
stacked frames with weight ``alpha`` (0.5 as SVEA does), drawn from a
distractor pool resident on ``x``'s device: by default an ``obsaug.Engine``
built on first use over the embedded photos, found as a config's
``data/photos`` is (``$OBSAUG_PHOTOS``, the user cache, ``./data/photos``,
the checkout's: ``default_photos()``), one per frame size, device and alpha,
closed at interpreter exit, ``OBSAUG_POOL_SIZE`` photos (256) drawn without
replacement within a call (overlay ``distinct``: no photo twice among the
first 256 samples); ``set_default_engine(engine)`` makes every call use
``engine.augment`` instead (its config then decides photos, alpha, device and
frame size). ``obsaug.nn.rad`` holds RAD's ``data_augs`` functions under
their names.

Random draws (obsaug.nn._steps has the rule): the functions here and in
``rad``, and ``RandomShift`` built without a seed, draw from torch's default
generator as the upstream code does: each call takes one integer ``d`` in
``[0, 2**63)`` (``torch.randint``; RAD's numpy functions: ``np.random.randint``)
and is then exactly the obsaug op at seed 0 and step ``d``. So
``torch.manual_seed(s)`` (``np.random.seed(s)`` for RAD's numpy functions)
repeats the augmentations, as it repeated the upstream functions', and
DataLoader workers (seeded apart by torch) draw apart. ``RandomShift(seed=s)``
instead keeps its own counter: call ``k`` is ``ops.shift`` at seed ``s`` and
step ``k``, saved with the seed in its ``state_dict``.

Every drop-in refuses a batch that looks channels-last (``[B, H, W, C]``
with C at most 16 and H, W above it; ``x.permute(0, 3, 1, 2)`` is the fix),
and ``random_overlay`` / ``random_conv`` a float batch whose maximum is at
most 1 on their first call (0..1 data: multiply by 255; obsaug/_input_range.py).
"""
from __future__ import annotations

import atexit
import numbers
import os
import threading
from typing import Any, Dict, Optional, Tuple, Union

import torch

from .. import _input_range, locations, ops
from . import _steps

__all__ = ["RandomShift", "random_overlay", "random_shift", "random_crop", "random_conv",
           "set_default_engine", "default_photos", "rad"]


# --- checks shared by the drop-ins ---------------------------------------------

_FRAME_CHANNELS_MAX = 16  # a last dim this small with larger sides before it: channels-last


def _channels_first(name: str, shape: Tuple[int, ...]) -> None:
    """ValueError for a batch that looks channels-last: ``[B, H, W, C]`` with C at
    most 16 and H, W above it (a channels-first ``[B, S*C, H, W]`` would have
    frames of width C, at most 16 pixels, under more than 16 channels)."""
    if len(shape) == 4:
        _, c, h, w = shape
        if w <= _FRAME_CHANNELS_MAX < min(c, h):
            raise ValueError(
                f"{name}: the batch {list(shape)} looks channels-last ([B, H, W, C] = "
                f"{c}x{h} frames of {w} channels); obsaug takes [B, S*C, H, W]: pass "
                "x.permute(0, 3, 1, 2)")


def _float_0_255(name: str, x: torch.Tensor) -> torch.Tensor:
    """DMControl-GB's input as float32 0..255: uint8 converted (upstream divides by
    255., which makes its result float), other dtypes refused."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: x must be a torch tensor [B, S*3, H, W] (float 0..255, as "
                        f"DMControl-GB's replay holds), got {type(x).__name__}")
    if x.dtype == torch.uint8:
        return x.float()
    if x.dtype != torch.float32:
        raise TypeError(f"{name}: x must be float32 (0..255) or uint8, got {x.dtype}")
    return x


_RANGE_HINT = ("DMControl-GB's augmentations take float 0..255 observations (its replay's "
               "uint8 as float): multiply 0..1 data by 255")
_range_sites = {name: _input_range.Site(f"obsaug.nn.{name}", _RANGE_HINT)
                for name in ("random_overlay", "random_conv")}


# --- RandomShift -------------------------------------------------------------

def _whole_pad(pad: Any) -> int:
    """RandomShift's pad as an int: TypeError for a non-number, ValueError for a
    number that is not a whole one in the shift op's range (never truncated)."""
    if isinstance(pad, bool) or not isinstance(pad, numbers.Real):
        raise TypeError(f"pad must be an int, got {type(pad).__name__}")
    spec = ops.schema()["shift"]["keys"]["pad"]
    whole = ops._is_int(pad) or float(pad).is_integer()
    if not (whole and spec["min"] <= pad <= spec["max"]):
        raise ValueError(f"pad must be a whole number of pixels in {spec['range']}, got {pad!r}")
    return int(pad)


_NATIVE_DTYPES = (torch.uint8, torch.float32)
_BYTE_DTYPES = (torch.float64, torch.float16, torch.bfloat16)  # shifted as their bytes


def _shift_as_bytes(x: torch.Tensor, step: torch.Tensor, seed64: int, pad: int) -> torch.Tensor:
    """``counted_shift`` of a float64 / float16 / bfloat16 batch, exactly: its E bytes
    per value as E uint8 planes per channel (a shift moves whole values and draws
    per sample, whatever the channel count), shifted and viewed back."""
    b, c, h, w = x.shape
    e = x.element_size()
    planes = x.contiguous().view(torch.uint8).view(b, c, h, w, e).permute(0, 1, 4, 2, 3)
    shifted = torch.ops.obsaug.counted_shift(planes.reshape(b, c * e, h, w), step, seed64, pad)
    return shifted.view(b, c, e, h, w).permute(0, 1, 3, 4, 2).contiguous().view(x.dtype) \
        .view(b, c, h, w)


class RandomShift(torch.nn.Module):
    """DrQ-v2's ``RandomShiftsAug(pad)``: random integer shifts with replicate padding.

    ``forward(x)`` takes ``[B, C, H, W]`` (any C, H, W) uint8, float32, float64,
    float16 or bfloat16 and returns a tensor of the same shape and dtype (the
    last three shifted as their bytes: exact). Without a seed (the default) each
    call draws from torch's default generator, as DrQ-v2's module does: one
    ``torch.randint`` in ``[0, 2**63)`` per call is the step of
    ``obsaug.ops.shift(x, seed=0, step=d, pad=pad)`` (obsaug.nn._steps), so
    ``torch.manual_seed`` repeats it; its ``state_dict`` holds
    ``{"seed": None, "step": None}``. With ``seed=s``, call ``k`` (from 0) is
    ``obsaug.ops.shift(x, seed=s, step=k, pad=pad)`` and the ``state_dict``
    holds the seed and the step, so a loaded module goes on with the saved
    module's draws.
    """

    def __init__(self, pad: int = 4, seed: Optional[int] = None):
        """``pad``: a whole number in the shift op's range (a float such as 2.7
        is a ValueError, not truncated); ``seed``: None (follow torch's generator)
        or an int in [0, 2**64), as ``ops.shift`` takes it."""
        super().__init__()
        self.pad = _whole_pad(pad)
        # A CPU tensor, not a buffer: .cuda() leaves it on the host, so reading it never syncs.
        self._step = torch.zeros((), dtype=torch.int64)
        self.seed = seed

    @property
    def seed(self) -> Optional[int]:
        """The module's Philox key, or None: each call draws from torch's generator."""
        return self._seed

    @seed.setter
    def seed(self, seed: Optional[int]) -> None:
        # the int64 form counted_shift takes (checked before anything is set)
        self._seed64 = _steps.SEED if seed is None else ops._as_int64("seed", seed)
        self._seed = seed

    @property
    def step(self) -> Optional[int]:
        """The next call's step, in [0, 2**64) (the counter is int64 and wraps as ops'
        steps); None for a module that follows torch's generator."""
        return None if self._seed is None else int(self._step.item()) % 2**64

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _channels_first("RandomShift", tuple(x.shape))
        if x.dtype not in _NATIVE_DTYPES + _BYTE_DTYPES:
            raise TypeError(f"RandomShift: x must be uint8, float32, float64, float16 or "
                            f"bfloat16 [B, C, H, W], got {x.dtype}")
        # One native op reads and advances the counter (obsaug::counted_shift): a
        # Python custom op cost about 0.1 ms a call. Following torch's generator, the
        # counter is a fresh draw.
        step = self._step if self._seed is not None else _steps.draw_tensor()
        if x.dtype in _NATIVE_DTYPES:
            return torch.ops.obsaug.counted_shift(x, step, self._seed64, self.pad)
        return _shift_as_bytes(x, step, self._seed64, self.pad)

    def get_extra_state(self) -> Dict[str, Optional[int]]:
        return {"seed": self.seed, "step": self.step}

    def set_extra_state(self, state: Dict[str, Optional[int]]) -> None:
        """A saved state: ``step`` and ``seed``, each an int in [0, 2**64), checked
        before either is set, or both None (follow torch's generator). A state
        without a seed comes from a version whose default seed was 0: it takes the
        seed given to this module, else 0."""
        if not isinstance(state, dict) or "step" not in state:
            raise ValueError(f"RandomShift state must be a dict with 'step' (and 'seed'), "
                             f"got {state!r}")
        if state["step"] is None:
            if state.get("seed") is not None:
                raise ValueError(f"RandomShift state: 'step' None (a module that follows "
                                 f"torch's generator) needs 'seed' None, got {state!r}")
            self.seed = None
            return
        step = ops._as_int64("RandomShift state 'step'", state["step"])
        seed = state.get("seed", 0 if self._seed is None else self.seed)
        if seed is None:
            raise ValueError(f"RandomShift state: 'seed' None needs 'step' None, got {state!r}")
        ops._as_int64("RandomShift state 'seed'", seed)
        self.seed = seed
        self._step.fill_(step)

    def extra_repr(self) -> str:
        return f"pad={self.pad}, seed={self.seed}"


# --- DMControl-GB functions ---------------------------------------------------

_lock = threading.Lock()
_default_engine: Optional[Any] = None
# The built-in engines, closed at exit, per process: a fork's child (a
# DataLoader worker) builds its own, since a parent's pool does not refresh there.
_engines: Dict[Tuple[int, int, int, str, float], Any] = {}


@atexit.register
def _close_engines() -> None:
    """Closes the built-in engines at interpreter exit, while torch (and CUDA) are
    still up: their decoder threads are stopped and joined here, not in a
    destructor during the interpreter's teardown."""
    with _lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.close()


def default_photos() -> str:
    """The distractor source of the built-in engines: the embedded photographs as a
    config's ``data/photos`` finds them (``$OBSAUG_PHOTOS``, the user cache, then
    ``data/photos``; obsaug.locations)."""
    return locations.embedded_photos()


def set_default_engine(engine: Optional[Any]) -> None:
    """Make random_overlay call ``engine.augment(x, step=d)`` (d drawn from torch's
    generator); None restores the built-in engines."""
    global _default_engine
    _default_engine = engine


def _overlay_engine(x: torch.Tensor, alpha: float) -> Any:
    from ..engine import Engine  # needs the native Engine (built with the pool and yaml-cpp)

    key = (os.getpid(), x.shape[-2], x.shape[-1], str(x.device), float(alpha))
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = Engine({
                "device": str(x.device),
                "seed": _steps.SEED,
                "frames": {"stack": max(1, x.shape[1] // 3), "channels": 3,
                           "height": x.shape[-2], "width": x.shape[-1]},
                "pipeline": [{"op": "overlay", "alpha": float(alpha), "distinct": True}],
                "pool": {"size": int(os.environ.get("OBSAUG_POOL_SIZE", "256")),
                         "sources": [default_photos()],
                         "refresh": {"threads": 1, "mode": "async"}},
            })
            _engines[key] = engine
    return engine


_PLACES = "places365_standard"


def random_overlay(x: torch.Tensor, dataset: Union[str, float] = _PLACES, *,
                   alpha: float = 0.5) -> torch.Tensor:
    """DMControl-GB's ``random_overlay(x, dataset='places365_standard')``:
    ``(1 - alpha) * x + alpha * photo``, float 0..255.

    x: ``[B, S*3, H, W]`` float32 (0..255) or uint8; one photo per sample, shared
    by its S frames, the photos of one call distinct (for up to the pool's size
    of samples). Returns float32, as upstream (whose ``x/255.`` makes uint8 float).
    ``dataset``: DMControl-GB's name of its photos, ``'places365_standard'``: here
    the built-in engine's photos (``default_photos()``), or the default engine's
    (``set_default_engine``: give it your Places365 folder); another name is a
    ValueError. A number in its place is ``alpha`` (obsaug's earlier signature).
    The call is the engine's pipeline at step ``d``, one draw from torch's
    generator (obsaug.nn._steps): ``torch.manual_seed`` repeats it.
    """
    if isinstance(dataset, numbers.Real) and not isinstance(dataset, bool):
        dataset, alpha = _PLACES, dataset
    if dataset != _PLACES:
        raise ValueError(f"random_overlay: dataset {dataset!r} is not one obsaug has; it "
                         f"overlays {_PLACES!r} (DMControl-GB's name) from default_photos() "
                         "or from the engine given to obsaug.nn.set_default_engine (point its "
                         "pool.sources at your photos)")
    x = _float_0_255("random_overlay", x)
    _channels_first("random_overlay", tuple(x.shape))
    _range_sites["random_overlay"].scale_in(x, None, True)
    engine = _default_engine if _default_engine is not None else _overlay_engine(x, alpha)
    return engine.augment(x, _steps.draw()[1])


def random_shift(x: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """DMControl-GB's ``random_shift``: pad ``pad`` (replicate) and crop back, per sample.

    ``obsaug.ops.shift`` at seed 0 and one draw from torch's generator as the step."""
    _channels_first("random_shift", tuple(x.shape))
    seed, step = _steps.draw()
    return ops.shift(x, seed=seed, step=step, pad=pad)


def _crop_offsets(x: torch.Tensor, size: int, seed: int, step: int) -> Tuple[torch.Tensor,
                                                                               torch.Tensor]:
    """The (row, column) offsets ``ops.crop`` draws at (seed, step) for ``x``'s samples
    (int64 on the CPU): it crops a probe of row and column numbers (the draws do not
    depend on the pixels or the channel count)."""
    b, _, h, w = x.shape
    rows = torch.arange(h, dtype=torch.float32).view(1, 1, h, 1).expand(b, 1, h, w)
    cols = torch.arange(w, dtype=torch.float32).view(1, 1, 1, w).expand(b, 1, h, w)
    probe = ops.crop(torch.cat([rows, cols], dim=1), seed=seed, step=step, size=size)
    return probe[:, 0, 0, 0].long(), probe[:, 1, 0, 0].long()


def _crop_at(x: torch.Tensor, size: int, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
    """Sample b cropped to ``size`` x ``size`` at row ``rows[b]``, column ``cols[b]``."""
    b, _, h, w = x.shape
    for name, given, limit in (("w1", rows, h - size), ("h1", cols, w - size)):
        if given.shape != (b,):
            raise ValueError(f"random_crop: {name} must hold one offset per sample (shape "
                             f"({b},)), got shape {tuple(given.shape)}")
        if b and (int(given.min()) < 0 or int(given.max()) > limit):
            raise IndexError(f"random_crop: {name} must lie in 0..{limit} (the frame minus "
                             f"size {size}), got {int(given.min())}..{int(given.max())}")
    span = torch.arange(size, device=x.device)
    r = (rows.to(x.device).view(b, 1) + span).view(b, 1, size, 1)
    c = (cols.to(x.device).view(b, 1) + span).view(b, 1, 1, size)
    return x[torch.arange(b, device=x.device).view(b, 1, 1, 1),
             torch.arange(x.shape[1], device=x.device).view(1, -1, 1, 1), r, c]


def random_crop(x: torch.Tensor, size: int = 84, w1: Optional[torch.Tensor] = None,
                h1: Optional[torch.Tensor] = None,
                return_w1_h1: bool = False) -> Union[torch.Tensor, Tuple[Any, Any, Any]]:
    """DMControl-GB's ``random_crop(x, size=84, w1=None, h1=None, return_w1_h1=False)``:
    a random ``size`` x ``size`` window per sample.

    x: ``[B, C, H, W]`` tensor on any device. As upstream: a ``size`` of at least
    the frame's width returns ``x`` itself (``(x, None, None)`` with
    ``return_w1_h1``); ``w1`` and ``h1`` (int tensors ``[B]``, both or neither)
    crop at rows ``w1``, columns ``h1`` (DMControl-GB's names: ``w1`` indexes
    the rows) without drawing; ``return_w1_h1=True`` returns ``(cropped, w1,
    h1)``, the offsets as int64 CPU tensors. Drawn offsets are
    ``obsaug.ops.crop`` at seed 0 and one draw from torch's generator: every
    offset ``0 .. H - size`` equally likely (DMControl-GB never draws the last,
    docs/ops.md).
    """
    if (w1 is None) != (h1 is None):
        raise ValueError("random_crop: give both w1 and h1 or neither (as DMControl-GB "
                         "asserts)")
    _channels_first("random_crop", tuple(x.shape))
    if x.shape[-1] - size <= 0:  # DMControl-GB: crop_max <= 0 returns x
        return (x, None, None) if return_w1_h1 else x
    if w1 is not None:
        cropped = _crop_at(x, size, torch.as_tensor(w1).long(), torch.as_tensor(h1).long())
        return (cropped, w1, h1) if return_w1_h1 else cropped
    seed, step = _steps.draw()
    cropped = ops.crop(x, seed=seed, step=step, size=size)
    if not return_w1_h1:
        return cropped
    rows, cols = _crop_offsets(x, size, seed, step)
    return cropped, rows, cols


def random_conv(x: torch.Tensor) -> torch.Tensor:
    """DMControl-GB's ``random_conv``: a random 3x3 convolution per sample, float 0..255.

    x: ``[B, S*3, H, W]`` float32 holding 0..255 (DMControl-GB's observations;
    uint8 works too and gives float32, as upstream), CPU or CUDA. Returns a new
    float32 tensor of the same shape: per sample one weight tensor
    ``w[3, 3, 3, 3]`` of standard normals shared by its S frames,
    ``255 * sigmoid(conv2d(pad_replicate(x / 255), w))`` per frame, as
    DMControl-GB computes it (``obsaug.ops.random_conv`` with init normal,
    padding replicate, activation sigmoid, at seed 0 and one draw from torch's
    generator as the step). The normals come from obsaug's counter-based
    generator, not from ``torch.randn``; the whole batch is one kernel call
    instead of DMControl-GB's Python loop over samples.
    """
    x = _float_0_255("random_conv", x)
    _channels_first("random_conv", tuple(x.shape))
    _range_sites["random_conv"].scale_in(x, None, True)
    seed, step = _steps.draw()
    return ops.random_conv(x, seed=seed, step=step, input_range=(0, 255))


from . import rad  # noqa: E402  (obsaug.nn.rad; it imports this package's _steps)
