"""obsaug.preview: one's own observations and their augmentations side by side in a PNG.

``obsaug.preview(obs, engine, "grid.png")`` is ``obsaug preview`` (the CLI,
tools/preview.cpp) on a batch of yours instead of the synthetic scene: one row
per sample (the first ``rows``), its S original frames, a gap, its S
augmented frames, each magnified ``scale`` times by nearest neighbour (C = 3:
RGB; other C: channel 0 as gray), written with the CLI's PNG writer. The
augmentation is ``engine.augment(obs, step)`` at ``step`` (default: the
engine's next step, read, not taken, so the engine's counter does not move);
a float output is shown back in 0..255 (its ``scale`` and ``bias`` undone).
"""
from __future__ import annotations

import os
from typing import Any, Optional, Union

import torch

from . import _C

__all__ = ["preview"]

GAP, GROUP_GAP = 2, 8  # pixels between frames and rows; between originals and augmented


def _displayed(frames: torch.Tensor, output: Optional[dict] = None) -> torch.Tensor:
    """``[B, S*C, H, W]`` as uint8 0..255 on the CPU (a float output's scale/bias undone)."""
    frames = frames.detach().cpu()
    if frames.dtype == torch.uint8:
        return frames
    values = frames.double()
    if output is not None and output.get("dtype") == "float32" and output["scale"] != 0:
        values = (values - output["bias"]) / output["scale"]
    return values.round().clamp(0, 255).to(torch.uint8)


def _strip(frames: torch.Tensor, channels: int, scale: int) -> torch.Tensor:
    """One sample's S frames ``[S*C, H, W]`` side by side as RGB ``[H*scale, width, 3]``
    (white gaps)."""
    s = frames.shape[0] // channels
    h, w = frames.shape[1] * scale, frames.shape[2] * scale
    strip = torch.full((h, s * w + (s - 1) * GAP, 3), 255, dtype=torch.uint8)
    for k in range(s):
        frame = frames[k * channels:(k + 1) * channels]
        rgb = frame if channels == 3 else frame[:1].expand(3, -1, -1)
        big = rgb.repeat_interleave(scale, 1).repeat_interleave(scale, 2).permute(1, 2, 0)
        strip[:, k * (w + GAP):k * (w + GAP) + w] = big
    return strip


def preview(obs: torch.Tensor, engine: Any, path: Optional[Union[str, "os.PathLike[str]"]] = None,
            *, step: Optional[int] = None, rows: int = 8, scale: int = 2) -> torch.Tensor:
    """Writes (to ``path``, when given) and returns the grid ``[height, width, 3]`` uint8.

    obs: ``[B, S*C, H, W]`` uint8 or float 0..255 on the engine's device (the
    engine's checks apply); engine: an ``obsaug.Engine``; ``rows``: how many
    samples (the first ones); ``scale``: magnification, 1..64. FileNotFoundError
    when ``path``'s folder does not exist; RuntimeError when it cannot be written.
    """
    from .engine import Engine
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be an obsaug.Engine, got {type(engine).__name__}")
    if not isinstance(obs, torch.Tensor) or obs.dim() != 4 or obs.shape[0] < 1:
        raise ValueError("obs must be a [B, S*C, H, W] tensor with B >= 1, got "
                         f"{type(obs).__name__} {getattr(obs, 'shape', '')}")
    for name, value, top in (("rows", rows, 4096), ("scale", scale, 64)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValueError(f"{name} must be an int in 1..{top}, got {value!r}")
    if path is not None:
        folder = os.path.dirname(os.path.abspath(os.fspath(path)))
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"preview: the folder of {os.fspath(path)!r} does not exist")
    obs = obs[:rows]
    config = engine.config
    augmented = engine.augment(obs, engine.step if step is None else step)
    channels = config["frames"]["channels"]
    original = _displayed(obs)
    augmented = _displayed(augmented, config["output"])
    lines = [_row(o, a, channels, scale) for o, a in zip(original, augmented)]
    height = sum(line.shape[0] for line in lines) + GAP * (len(lines) - 1)
    grid = torch.full((height, lines[0].shape[1], 3), 255, dtype=torch.uint8)
    top = 0
    for line in lines:
        grid[top:top + line.shape[0]] = line
        top += line.shape[0] + GAP
    if path is not None:
        _C.write_png(grid, os.fspath(path))
    return grid


def _row(original: torch.Tensor, augmented: torch.Tensor, channels: int,
         scale: int) -> torch.Tensor:
    """One sample's row: its original frames, a gap, its augmented frames, top-aligned
    (a crop or a translate makes the halves differ in height), as the CLI lays it out."""
    left, right = _strip(original, channels, scale), _strip(augmented, channels, scale)
    height = max(left.shape[0], right.shape[0])
    row = torch.full((height, left.shape[1] + GROUP_GAP + right.shape[1], 3), 255,
                     dtype=torch.uint8)
    row[:left.shape[0], :left.shape[1]] = left
    row[:right.shape[0], left.shape[1] + GROUP_GAP:] = right
    return row
