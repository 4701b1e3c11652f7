"""The value range of float observations: one mechanism for the Engine, obsaug.ops,
obsaug.nn and obsaug.torchrl.

obsaug's float observations hold 0..255, as uint8 ones do (DrQ's, DMControl-GB's
and RAD's replay convention). Float observations in 0..1 (torchvision's and
kornia's convention, TorchRL's ``ToTensorImage``) mix wrongly with what is
defined on 0..255: an overlay's photos, cutout's colour, color_jitter's clip
at 255, random_conv's sigmoid, and the output's ``scale`` / ``bias``. Each
function that takes observations takes ``input_range``:

- ``None`` (the default): 0..255. The first float call of each site (an
  Engine's ``augment``, one ``obsaug.ops`` function, one drop-in, ...) whose
  pipeline depends on the range reads the batch's maximum (one pass over it,
  and one synchronisation on CUDA); when it lies in (0, 1] the call raises
  ValueError naming ``input_range``. Later calls of the site are not checked,
  so the default costs a flag test per call. Not checked under
  ``torch.compile`` tracing or CUDA graph capture (no value can be read there).
- ``(0, 255)``: 0..255, never checked.
- ``(0, 1)``: 0..1. The batch is multiplied by 255 before the pipeline, and a
  result in the input's scale (float output without ``scale`` / ``bias``) is
  divided by 255 after it, so 0..1 comes back as 0..1; with ``scale`` /
  ``bias`` the result is as configured (they act on the 0..255 values).
  Pipelines that do not depend on the range (shift, crop, flip, rotate,
  translate, grayscale, cutout with fill zeros, random_conv without the
  sigmoid) run on the values as they are. Only out of place (an in-place
  call with it is a ValueError) and on float input (uint8 is 0..255).
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple

import torch

__all__ = ["parse", "depends_on_range", "Site"]

_RANGES = {(0, 255): 255.0, (0, 1): 1.0}


def parse(input_range: Any) -> Optional[float]:
    """None (the default: 0..255, checked once per site), or the range's top: 255.0
    for ``(0, 255)``, 1.0 for ``(0, 1)``; anything else a ValueError (TypeError
    for a non-sequence) naming the two ranges."""
    if input_range is None:
        return None
    if isinstance(input_range, (str, bytes)) or not isinstance(input_range, Sequence):
        raise TypeError(f"input_range must be None, (0, 255) or (0, 1), got "
                        f"{type(input_range).__name__} {input_range!r}")
    key = tuple(input_range)
    top = _RANGES.get(key) if all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                  for v in key) else None
    if top is None:
        raise ValueError(f"input_range must be None, (0, 255) or (0, 1) (the float "
                         f"observations' values), got {input_range!r}")
    return top


def depends_on_range(pipeline: Sequence[Mapping[str, Any]], scale: float = 1.0,
                     bias: float = 0.0) -> bool:
    """Whether a pipeline (op dicts as obsaug.ops.augment takes them) with an output
    ``scale`` / ``bias`` gives another result on 0..1 data than on the same data in
    0..255, beyond the scale: what the range check guards."""
    if scale != 1.0 or bias != 0.0:
        return True
    for op in pipeline:
        name = op.get("op")
        if name in ("overlay", "color_jitter"):
            return True
        if name == "random_conv" and op.get("activation", "sigmoid") == "sigmoid":
            return True
        if name == "cutout" and op.get("fill", "zeros") == "color":
            return True
    return False


_HINT = ("Pass input_range=(0, 1) to have obsaug scale it to 0..255 and back, or "
         "input_range=(0, 255) if these are 0..255 values this dark")


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


class Site:
    """One call site's range check: ``name`` words the errors and ``hint`` ends them
    (how this site takes 0..1 data); ``checked`` turns true once a call of the site
    passed the check."""

    __slots__ = ("name", "hint", "checked")

    def __init__(self, name: str, hint: str = ""):
        self.name, self.hint, self.checked = name, hint, False

    def scale_in(self, obs: Any, input_range: Any, depends: Any,
                 in_place: bool = False) -> float:
        """The factor ``obs`` is multiplied by before the pipeline: 255.0 for 0..1 data
        whose pipeline depends on the range, else 1.0. ``depends``: a bool, or a
        function that says it (called only when needed). Checks the range as the
        module's doc says."""
        if input_range is None:
            if self.checked or torch.compiler.is_compiling() or not (
                    isinstance(obs, torch.Tensor) and obs.is_floating_point()):
                return 1.0
            if depends() if callable(depends) else depends:
                self._check(obs)
            return 1.0
        top = parse(input_range)
        if top == 255.0:
            return 1.0
        if isinstance(obs, torch.Tensor) and not obs.is_floating_point():
            raise ValueError(f"{self.name}: input_range=(0, 1) is for float observations; "
                             f"{obs.dtype} observations are 0..255 (drop input_range)")
        if not (depends() if callable(depends) else depends):
            return 1.0
        if in_place:
            raise ValueError(f"{self.name}: input_range=(0, 1) works out of place only "
                             "(the batch is scaled by 255 into a copy); pass 0..255 "
                             "observations or call the out-of-place form")
        return 255.0

    def _check(self, obs: torch.Tensor) -> None:
        if obs.numel() == 0 or (obs.is_cuda and _capturing()):
            return
        top = float(obs.detach().max())
        if 0.0 < top <= 1.0:
            hint = self.hint or _HINT
            raise ValueError(
                f"{self.name}: float observations are 0..255 in obsaug, but this batch's "
                f"maximum is {top:.4g}: 0..1 data (torchvision's and kornia's convention, "
                f"TorchRL's ToTensorImage)? {hint}")
        self.checked = True


def scale_out(out: torch.Tensor, factor: float, output_in_input_scale: bool) -> torch.Tensor:
    """The result back in 0..1 (``out / 255``, in place) when the input was scaled
    by ``factor`` = 255 and the result is in the input's scale."""
    if factor != 1.0 and output_in_input_scale and out.is_floating_point():
        out.div_(factor)
    return out


def scaled(obs: torch.Tensor, factor: float) -> torch.Tensor:
    """``obs * factor`` (a new float32 tensor), or obs itself for a factor of 1."""
    return obs if factor == 1.0 else obs * factor


def pipeline_of(config: Mapping[str, Any]) -> Tuple[Sequence[Mapping[str, Any]], float, float]:
    """(pipeline, scale, bias) of a resolved Engine config: scale and bias act only on
    float32 output."""
    output = config["output"]
    if output["dtype"] != "float32":
        return config["pipeline"], 1.0, 0.0
    return config["pipeline"], float(output["scale"]), float(output["bias"])
