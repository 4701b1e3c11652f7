"""The obsaug ops (DESIGN.md sections 3 and 7) on ``[B, S*C, H, W]`` tensors.

Every op is a pure function of ``(obs, pool, seed, step)``: sample ``b`` of
op ``k`` draws from Philox4x32-10 with key ``seed`` and counter
``(step, b, k)``, so CPU and CUDA give identical results. Parameters are
drawn per sample and shared by its stacked frames (``per_frame=True`` draws
a distractor per frame). Each function is a ``torch.ops.obsaug`` operator
with a fake kernel, so it traces under ``torch.compile(fullgraph=True)``.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple, Union

import torch

__all__ = ["shift", "crop", "overlay", "augment", "gather_augment", "pipeline_text"]

_U64 = 1 << 64
_OP_KEYS = {
    "shift": {"pad", "padding"},
    "crop": {"size", "center"},
    "overlay": {"alpha", "alpha_max", "per_frame"},
}


def _as_int64(name: str, value: int) -> int:
    """A uint64 seed or step as the int64 the op schema carries (two's complement)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int in [0, 2**64), got {type(value).__name__}")
    if not 0 <= value < _U64:
        raise ValueError(f"{name} must be in [0, 2**64), got {value}")
    return value - _U64 if value >= 1 << 63 else value


_INT64 = 1 << 63
_NUMERIC_KEYS = {"pad", "alpha", "alpha_max", "index"}


def _int_arg(name: str, value: int) -> int:
    """An int argument the op schema carries as int64 (range errors name it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{name} must fit in int64, got {value}")
    return value


def _size_pair(size: Union[int, Sequence[int]]) -> Tuple[int, int]:
    if isinstance(size, int) and not isinstance(size, bool):
        return size, size
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(
        isinstance(s, int) and not isinstance(s, bool) for s in size
    ):
        return int(size[0]), int(size[1])
    raise ValueError(f"crop size must be an int or (height, width), got {size!r}")


def _format_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key == "size":
        h, w = _size_pair(value)
        return f"{h}x{w}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def pipeline_text(ops: Sequence[Mapping[str, Any]]) -> str:
    """The one-line form of an op list that ``torch.ops.obsaug.augment`` takes.

    ``ops`` is an ordered list of dicts such as ``{"op": "shift", "pad": 4}``;
    op ``k`` uses counter index ``k`` unless it says ``"index"``.
    """
    if isinstance(ops, Mapping) or not isinstance(ops, (list, tuple)):
        raise TypeError(f"ops must be a list of dicts like [{{'op': 'shift', 'pad': 4}}], got {ops!r}")
    parts = []
    for position, op in enumerate(ops):
        if not isinstance(op, Mapping) or "op" not in op:
            raise ValueError(f"ops[{position}] must be a dict with an 'op' key "
                             f"(shift, crop or overlay), got {op!r}")
        name = op["op"]
        if name not in _OP_KEYS:
            raise ValueError(f"ops[{position}]: op must be shift, crop or overlay, got {name!r}")
        allowed = _OP_KEYS[name] | {"op", "index"}
        unknown = sorted(set(op) - allowed)
        if unknown:
            raise ValueError(f"ops[{position}] ({name}): unknown key(s) {unknown}; "
                             f"allowed: {sorted(allowed)}")
        fields = [f"op={name}"]
        for key, value in op.items():
            if key == "op" or (key == "alpha_max" and value is None):
                continue
            if key in _NUMERIC_KEYS and (isinstance(value, bool)
                                         or not isinstance(value, (int, float))):
                raise TypeError(f"ops[{position}] ({name}): {key} must be a number, "
                                f"got {type(value).__name__} {value!r}")
            text = _format_value(key, value)
            if any(c in text for c in ",|="):
                raise ValueError(f"ops[{position}] ({name}): bad value {value!r} for {key!r}")
            fields.append(f"{key}={text}")
        parts.append(",".join(fields))
    return "|".join(parts)


def _output_hw(obs: torch.Tensor, text: str) -> Tuple[int, int]:
    h, w = obs.shape[-2], obs.shape[-1]
    for op in text.split("|") if text else []:
        fields = dict(f.split("=", 1) for f in op.split(","))
        if fields.get("op") == "crop" and "size" in fields:
            size = fields["size"]
            ch, cw = (int(v) for v in size.split("x")) if "x" in size else (int(size), int(size))
            if not (0 < ch <= h and 0 < cw <= w):
                raise ValueError(f"crop size {ch}x{cw} must be positive and fit the {h}x{w} "
                                 "frames it is applied to")
            h, w = ch, cw
    return h, w


def _same_device(first: torch.Tensor, **others: Optional[torch.Tensor]) -> None:
    """The fake kernels' device check: a meta tensor among real ones must not
    select them (the dispatcher picks Meta when any argument is meta)."""
    for name, t in others.items():
        if t is not None and t.device != first.device:
            raise ValueError(f"{name} must be on the same device as the observations "
                             f"({first.device}), got {t.device}")


def shift(obs: torch.Tensor, *, seed: int, step: int, pad: int = 4,
          padding: str = "replicate", op_index: int = 0) -> torch.Tensor:
    """Random shift by (dx, dy) in [-pad, pad]^2, border replicated or zero-filled."""
    return torch.ops.obsaug.shift(obs, _as_int64("seed", seed), _as_int64("step", step),
                                  _int_arg("pad", pad), padding, _int_arg("op_index", op_index))


def crop(obs: torch.Tensor, *, seed: int, step: int, size: Union[int, Sequence[int]],
         center: bool = False, op_index: int = 0) -> torch.Tensor:
    """Random (or centre) crop to ``size`` (N or (H, W)), every offset equally likely."""
    h, w = _size_pair(size)
    return torch.ops.obsaug.crop(obs, _as_int64("seed", seed), _as_int64("step", step),
                                 [_int_arg("size", h), _int_arg("size", w)], center,
                                 _int_arg("op_index", op_index))


def overlay(obs: torch.Tensor, pool: torch.Tensor, *, seed: int, step: int,
            alpha: float = 0.5, alpha_max: Optional[float] = None, per_frame: bool = False,
            op_index: int = 0, inplace: bool = False) -> torch.Tensor:
    """Blend a random pool image into each sample with weight alpha (or U[alpha, alpha_max])."""
    args = (obs, pool, _as_int64("seed", seed), _as_int64("step", step), float(alpha),
            None if alpha_max is None else float(alpha_max), per_frame,
            _int_arg("op_index", op_index))
    if inplace:
        torch.ops.obsaug.overlay_(*args)
        return obs
    return torch.ops.obsaug.overlay(*args)


def augment(obs: torch.Tensor, pool: Optional[torch.Tensor] = None, *,
            ops: Sequence[Mapping[str, Any]], seed: int, step: int, inplace: bool = False,
            out_dtype: Optional[torch.dtype] = None, scale: float = 1.0,
            bias: float = 0.0) -> torch.Tensor:
    """Apply an ordered op list in one fused pass (op k uses counter index k).

    Equal, bit for bit in uint8, to applying the ops one after another with
    ``op_index`` = their position. ``out_dtype=torch.float32`` with
    ``scale``/``bias`` writes ``v * scale + bias`` where ``v`` is the result in
    obs's dtype.
    """
    text = pipeline_text(ops)
    seed64, step64 = _as_int64("seed", seed), _as_int64("step", step)
    if inplace:
        if (out_dtype not in (None, obs.dtype)) or scale != 1.0 or bias != 0.0:
            raise ValueError("inplace=True keeps obs's dtype: out_dtype, scale and bias "
                             "need inplace=False")
        torch.ops.obsaug.augment_(obs, pool, text, seed64, step64)
        return obs
    return torch.ops.obsaug.augment(obs, pool, text, seed64, step64, out_dtype,
                                    float(scale), float(bias))


def gather_augment(storage: torch.Tensor, indices: torch.Tensor,
                   pool: Optional[torch.Tensor] = None, *, ops: Sequence[Mapping[str, Any]],
                   seed: int, step: int, out_dtype: Optional[torch.dtype] = None,
                   scale: float = 1.0, bias: float = 0.0) -> torch.Tensor:
    """Gather stacks from a frame storage and augment them in one pass.

    ``storage`` is ``[N, C, H, W]`` (uint8 or float32), ``indices`` int64
    ``[B, S]`` on the same device: stacked frame ``s`` of sample ``b`` is
    ``storage[indices[b, s]]``. The result equals ``augment(storage[indices]
    .reshape(B, S*C, H, W), pool, ops=ops, ...)`` without materialising the
    gathered batch. Indices outside ``[0, N)`` raise IndexError (checking them
    synchronises once on CUDA).
    """
    return torch.ops.obsaug.gather_augment(storage, indices, pool, pipeline_text(ops),
                                           _as_int64("seed", seed), _as_int64("step", step),
                                           out_dtype, float(scale), float(bias))


# --- fake kernels: shapes and dtypes for torch.compile / FakeTensor tracing ---

@torch.library.register_fake("obsaug::augment")
def _augment_fake(obs, pool, pipeline, seed, step, out_dtype=None, scale=1.0, bias=0.0):
    _same_device(obs, pool=pool)
    h, w = _output_hw(obs, pipeline)
    return obs.new_empty((obs.shape[0], obs.shape[1], h, w), dtype=out_dtype or obs.dtype)


@torch.library.register_fake("obsaug::gather_augment")
def _gather_augment_fake(storage, indices, pool, pipeline, seed, step, out_dtype=None, scale=1.0,
                         bias=0.0):
    _same_device(storage, indices=indices, pool=pool)
    h, w = _output_hw(storage, pipeline)
    return storage.new_empty((indices.shape[0], indices.shape[1] * storage.shape[1], h, w),
                             dtype=out_dtype or storage.dtype)


@torch.library.register_fake("obsaug::augment_")
def _augment_inplace_fake(obs, pool, pipeline, seed, step):
    _same_device(obs, pool=pool)
    _output_hw(obs, pipeline)
    return None


@torch.library.register_fake("obsaug::shift")
def _shift_fake(obs, seed, step, pad=4, padding="replicate", op_index=0):
    return torch.empty_like(obs, memory_format=torch.contiguous_format)


@torch.library.register_fake("obsaug::crop")
def _crop_fake(obs, seed, step, size, center=False, op_index=0):
    h, w = size[0], size[-1]
    if not (0 < h <= obs.shape[-2] and 0 < w <= obs.shape[-1]):
        raise ValueError(f"crop size {h}x{w} must be positive and fit the "
                         f"{obs.shape[-2]}x{obs.shape[-1]} frames")
    return obs.new_empty((obs.shape[0], obs.shape[1], h, w))


@torch.library.register_fake("obsaug::overlay")
def _overlay_fake(obs, pool, seed, step, alpha=0.5, alpha_max=None, per_frame=False,
                  op_index=0):
    _same_device(obs, pool=pool)
    return torch.empty_like(obs, memory_format=torch.contiguous_format)


@torch.library.register_fake("obsaug::overlay_")
def _overlay_inplace_fake(obs, pool, seed, step, alpha=0.5, alpha_max=None, per_frame=False,
                          op_index=0):
    _same_device(obs, pool=pool)
    return None
