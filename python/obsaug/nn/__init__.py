"""Drop-in stand-ins for the augmentations of common pixel-RL code.

``RandomShift(pad=4)`` replaces DrQ-v2's ``RandomShiftsAug``: float input
``[B, C, H, W]`` (0..255), float output, every sample translated by an
integer ``(dx, dy)`` in ``[-pad, pad]^2`` with replicated borders (DrQ-v2
samples the same distribution through ``grid_sample`` on a padded image and
requires square frames; this does not). It works under
``torch.compile(fullgraph=True)``. Each call returns a new tensor (on the
CPU a large one reuses the memory of an earlier output its caller released,
obsaug.ops' fresh outputs, so a training loop does not page-fault a new
output into memory on every call).

``random_overlay(x)``, ``random_shift(x, pad=4)`` and ``random_crop(x, size=84)``
have the signatures of DMControl-GB's ``augmentations.py`` and take its
float 0..255 observations. ``random_overlay`` blends one distractor photo per
sample into all its stacked frames with weight ``alpha`` (0.5 as SVEA does),
drawn from a distractor pool resident on ``x``'s device: by default an
``obsaug.Engine`` built on first use over the embedded photos, found as a
config's ``data/photos`` is (``$OBSAUG_PHOTOS``, the user cache, ``./data/photos``,
the checkout's: ``default_photos()``), one per frame size, device and alpha,
closed at interpreter exit; it draws with its own step counter;
``set_default_engine(engine)`` makes every call use ``engine.augment(x)``
instead (its config then decides photos, alpha, device and frame size).

``random_conv(x)`` is DMControl-GB's ``random_conv`` (SVEA's other
augmentation): float 0..255 in and out, one random 3x3 convolution per sample.
``obsaug.nn.rad`` holds RAD's ``data_augs`` functions under their names.

Every call draws fresh parameters: the functions (here and in ``rad``) but
``random_overlay`` share one step counter (``obsaug.nn._steps``: call k uses
torch's seed, ``torch.initial_seed()``, and step k); ``random_overlay`` uses
its engine's (built with torch's seed), and each ``RandomShift`` has its own
(saved in its ``state_dict`` with its seed, torch's when it was built). So
``torch.manual_seed(s)`` seeds the augmentations as it seeds the upstream
functions, and DataLoader workers (seeded apart by torch) draw apart.
"""
from __future__ import annotations

import atexit
import numbers
import os
import threading
from typing import Any, Dict, Optional, Tuple

import torch

from .. import locations, ops
from . import _steps

__all__ = ["RandomShift", "random_overlay", "random_shift", "random_crop", "random_conv",
           "set_default_engine", "default_photos", "rad"]


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


class RandomShift(torch.nn.Module):
    """DrQ-v2's ``RandomShiftsAug(pad)``: random integer shifts with replicate padding.

    ``forward(x)`` takes float ``[B, C, H, W]`` (any C, H, W; uint8 works
    too) and returns a tensor of the same shape and dtype. Call ``k`` (from
    0) uses ``obsaug.ops.shift(x, seed=seed, step=k, pad=pad)``. The state
    (``state_dict``) holds the seed and the step, so a loaded module goes on
    with the saved module's draws.
    """

    def __init__(self, pad: int = 4, seed: Optional[int] = None):
        """``pad``: a whole number in the shift op's range (a float such as 2.7
        is a ValueError, not truncated); ``seed``: an int in [0, 2**64), as
        ``ops.shift`` takes it; None (the default) takes torch's,
        ``torch.initial_seed()``, so ``torch.manual_seed`` seeds this module
        as it seeds DrQ-v2's."""
        super().__init__()
        self.pad = _whole_pad(pad)
        self.seed = torch.initial_seed() if seed is None else seed
        self._seed_from_torch = seed is None
        # A CPU tensor, not a buffer: .cuda() leaves it on the host, so reading it never syncs.
        self._step = torch.zeros((), dtype=torch.int64)

    @property
    def seed(self) -> int:
        return self._seed

    @seed.setter
    def seed(self, seed: int) -> None:
        self._seed64 = ops._as_int64("seed", seed)  # the int64 form counted_shift takes
        self._seed = seed
        self._seed_from_torch = False

    @property
    def step(self) -> int:
        """The next call's step, in [0, 2**64) (the counter is int64 and wraps as ops' steps)."""
        return int(self._step.item()) % 2**64

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # One native op reads and advances the counter (obsaug::counted_shift):
        # a Python custom op cost about 0.1 ms a call.
        return torch.ops.obsaug.counted_shift(x, self._step, self._seed64, self.pad)

    def get_extra_state(self) -> Dict[str, int]:
        return {"seed": self.seed, "step": self.step}

    def set_extra_state(self, state: Dict[str, int]) -> None:
        """A saved state: ``step`` and ``seed``, each an int in [0, 2**64), checked
        before either is set. A state without a seed comes from a version whose
        default seed was 0: it takes the seed given to this module, else 0."""
        if not isinstance(state, dict) or "step" not in state:
            raise ValueError(f"RandomShift state must be a dict with 'step' (and 'seed'), "
                             f"got {state!r}")
        step = ops._as_int64("RandomShift state 'step'", state["step"])
        seed = state.get("seed", 0 if self._seed_from_torch else self.seed)
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
    """Make random_overlay call ``engine.augment(x)``; None restores the built-in engines."""
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
                "seed": _steps.seed(),
                "frames": {"stack": max(1, x.shape[1] // 3), "channels": 3,
                           "height": x.shape[-2], "width": x.shape[-1]},
                "pipeline": [{"op": "overlay", "alpha": float(alpha)}],
                "pool": {"size": int(os.environ.get("OBSAUG_POOL_SIZE", "256")),
                         "sources": [default_photos()],
                         "refresh": {"threads": 1, "mode": "async"}},
            })
            _engines[key] = engine
    return engine


def random_overlay(x: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """DMControl-GB's ``random_overlay``: ``(1 - alpha) * x + alpha * photo``, float 0..255.

    x: ``[B, S*3, H, W]`` float32 (0..255) or uint8; one photo per sample,
    shared by its S frames. Returns float32 for float input.
    """
    engine = _default_engine if _default_engine is not None else _overlay_engine(x, alpha)
    return engine.augment(x)


def random_shift(x: torch.Tensor, pad: int = 4) -> torch.Tensor:
    """DMControl-GB's ``random_shift``: pad ``pad`` (replicate) and crop back, per sample."""
    seed, step = _steps.draw()
    return ops.shift(x, seed=seed, step=step, pad=pad)


def random_crop(x: torch.Tensor, size: int = 84) -> torch.Tensor:
    """DMControl-GB's ``random_crop``: a random ``size`` x ``size`` window per sample."""
    seed, step = _steps.draw()
    return ops.crop(x, seed=seed, step=step, size=size)


def random_conv(x: torch.Tensor) -> torch.Tensor:
    """DMControl-GB's ``random_conv``: a random 3x3 convolution per sample, float 0..255.

    x: ``[B, S*3, H, W]`` float32 holding 0..255 (DMControl-GB's observations;
    uint8 works too and gives uint8, rounded), CPU or CUDA. Returns a new
    tensor of the same shape and dtype: per sample one weight tensor
    ``w[3, 3, 3, 3]`` of standard normals shared by its S frames,
    ``255 * sigmoid(conv2d(pad_replicate(x / 255), w))`` per frame, as
    DMControl-GB computes it (``obsaug.ops.random_conv`` with init normal,
    padding replicate, activation sigmoid). The normals come from obsaug's
    counter-based generator, not from ``torch.randn``; the whole batch is one
    kernel call instead of DMControl-GB's Python loop over samples.
    """
    seed, step = _steps.draw()
    return ops.random_conv(x, seed=seed, step=step)


from . import rad  # noqa: E402  (obsaug.nn.rad; it imports this package's _steps)
