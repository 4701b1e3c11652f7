"""The obsaug ops (DESIGN.md sections 3 and 7) on ``[B, S*C, H, W]`` tensors.

Every op is a pure function of ``(obs, pool, seed, step)``: sample ``b`` of
op ``k`` draws from Philox4x32-10 with key ``seed`` and counter
``(step, b, k)``, so CPU and CUDA give identical results. Parameters are
drawn per sample and shared by its stacked frames (``per_frame=True`` draws
a distractor per frame). Each function is a ``torch.ops.obsaug`` operator
with a fake kernel, so it traces under ``torch.compile(fullgraph=True)``;
``seed`` and ``step`` are SymInts in the schemas, so a step that changes
between calls compiles once more and then stays dynamic. The ops are not
differentiable: with grad mode on, an input that requires grad is a
ValueError (pass ``x.detach()`` or call under ``torch.no_grad()``).

``out=``: every function that returns a new tensor also writes into a
caller's tensor and returns it (``torch.ops.obsaug.<op>_out``). ``out`` must
have the result's dtype (else TypeError) and its shape and device, be
contiguous, and share no memory with the inputs (else ValueError; the
in-place form is ``inplace=True``); all is checked before anything is
written. A preallocated ``out`` saves the allocation of a fresh result (and,
on the CPU, page-faulting it in) on every call.

Float observations hold 0..255, as uint8 ones do. ``input_range=(0, 1)``
takes float 0..1 data (torchvision's, kornia's and TorchRL's convention):
scaled to 0..255 for the ops whose result depends on the range (overlay,
cutout's colour, color_jitter, random_conv's sigmoid, ``scale`` / ``bias``)
and back; with the default (None) the first float call of each function
whose pipeline depends on the range reads the batch's maximum and raises
ValueError when it lies in (0, 1] (obsaug/_input_range.py has the rules).
"""
from __future__ import annotations

import copy
import numbers
import operator
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch.fx.experimental.symbolic_shapes import has_static_value

from . import _C, _input_range

import inspect

__all__ = ["shift", "crop", "overlay", "augment", "gather_augment", "pipeline_text", "schema",
           "frame_sizes", "flip", "rotate", "translate", "cutout", "grayscale", "color_jitter",
           "random_conv"]

# The op schema (kernels/op_schema.cpp): every op's keys with their types,
# defaults and ranges, its effect on the frame size and what it needs. The
# checks, key lists and defaults below read it; ranges are checked by the
# native parser, so a value out of range fails here with the same text as in
# a YAML config.
_SCHEMA: Dict[str, Dict[str, Any]] = _C.op_schema()
_OP_NAMES = ", ".join(_SCHEMA)
_TYPE_WORDS = {"int": "an int", "float": "a number", "bool": "a bool", "enum": "a str",
               "size": "an int or (height, width)"}
_U64 = 1 << 64
_INT64 = 1 << 63
_INT32_MAX = (1 << 31) - 1  # the native int arguments (sizes, ranks)


def schema() -> Dict[str, Dict[str, Any]]:
    """Every op as plain data (a copy): ``{name: {"doc", "keys": {key: {"type",
    "default", "optional", "required", "range", "default_text", "min"/"max"/"min_key"/
    "choices", "doc"}}, "frame_size", "size_key", "needs_pool", "mixes_channels",
    "neighbourhood_3x3", "frame_reduction"}}``.

    ``type`` is int, float, bool, enum or size (N or (height, width)); ``range`` is the
    text the errors print; ``frame_size`` is keeps, crops_to_size or grows_to_size
    (to the value of ``size_key``)."""
    return copy.deepcopy(_SCHEMA)


def _default(op: str, key: str) -> Any:
    return _SCHEMA[op]["keys"][key]["default"]


def _is_int(value: Any) -> bool:
    """An int, a numpy integer or any other numbers.Integral, but not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_int64(name: str, value: int) -> int:
    """A uint64 seed or step as the int64 the op schema carries (two's complement).

    A symbolic one (torch.compile made an int that changes between calls
    dynamic) is passed on as it is, checked to lie in [0, 2**63) by
    torch._check (a range, not a value, so no recompile per value); the
    wrap of 2**63 and up would put 2**64 into the graph, which C++ wrappers
    cannot hold."""
    if not (_is_int(value) or isinstance(value, torch.SymInt)):
        raise TypeError(f"{name} must be an int in [0, 2**64), got {type(value).__name__}")
    if type(value) is not int and not isinstance(value, torch.SymInt):
        value = operator.index(value)
    if not has_static_value(value):
        # (a message naming `name` would be a closure, which breaks the graph)
        torch._check(value >= 0, lambda: "a changing seed or step under torch.compile must be "
                                         "an int in [0, 2**63)")
        torch._check(value < _INT64, lambda: "a changing seed or step under torch.compile must "
                                             "be an int in [0, 2**63)")
        return value
    value = _uint64_arg(name, value)
    return value - _U64 if value >= _INT64 else value


def _uint64_arg(name: str, value: int) -> int:
    """A seed or step (not symbolic) as the int in [0, 2**64) it names (a bool or
    another type: TypeError; out of range: ValueError): the ops' check
    (_as_int64), and the Engine's and DistractorPool's, which take it as uint64."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int in [0, 2**64), got {type(value).__name__}")
    value = operator.index(value)
    if not 0 <= value < _U64:
        raise ValueError(f"{name} must be in [0, 2**64), got {value}")
    return value


def _rank_args(rank: Any, world_size: Any) -> Tuple[int, int]:
    """``rank`` and ``world_size`` (ints, also numpy or 0-dim torch integers; not
    bools: TypeError) with ``0 <= rank < world_size <= 2**31 - 1`` (ValueError),
    as the Engine and DistractorPool take them."""
    rank, world_size = _unwrapped(rank), _unwrapped(world_size)
    for name, value in (("rank", rank), ("world_size", world_size)):
        if not _is_int(value):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    rank, world_size = operator.index(rank), operator.index(world_size)
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size) = [0, {world_size}), got {rank}")
    if world_size > _INT32_MAX:
        raise ValueError(f"world_size must be in 1..{_INT32_MAX}, got {world_size}")
    return rank, world_size


def _int_arg(name: str, value: int) -> int:
    """An int argument the op schema carries as int64 (range errors name it)."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = operator.index(value)
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{name} must fit in int64, got {value}")
    return value


def _frame_channels_arg(frame_channels: Optional[int]) -> int:
    """C as the schemas take it: an int >= 1, or 0 for None (inferred: the
    pool's, else 3 when S*C is a multiple of 3, else 1)."""
    if frame_channels is None:
        return 0
    channels = _int_arg("frame_channels", _unwrapped(frame_channels))
    if channels < 1:
        raise ValueError("frame_channels must be C >= 1, the channels of one stacked frame (3 "
                         "for RGB, 1 for grayscale, 4 for RGBD), or None to infer it; got "
                         f"{channels}")
    return channels


# What torch.compile passes for a number that changes between calls (or any
# number under dynamic=True): handed to the op as it is.
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _unwrapped(value: Any) -> Any:
    """A 0-dim tensor or numpy scalar as the Python number or bool it holds."""
    if isinstance(value, (bool, int, float, str) + _SYMBOLIC) or value is None:
        return value
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        return value.item()
    return value


def _float_arg(name: str, value: float) -> float:
    """A real argument: an int or a float, also as a numpy scalar or a 0-dim tensor;
    not a bool or a string."""
    number = _unwrapped(value)
    if isinstance(number, (torch.SymInt, torch.SymFloat)):
        return number
    if not isinstance(number, numbers.Real) or isinstance(number, bool):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    return float(number)


def _bool_arg(name: str, value: bool) -> bool:
    """A bool argument: True or False (a numpy or 0-dim tensor bool too), as in a
    pipeline dict; not an int or a string."""
    flag = _unwrapped(value)
    if not isinstance(flag, bool):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return flag


def _size_pair(size: Union[int, Sequence[int]]) -> Tuple[int, int]:
    """N or (height, width), each an int or a numpy integer, as (height, width)."""
    if _is_int(size):
        return operator.index(size), operator.index(size)
    if isinstance(size, (tuple, list)) and len(size) == 2 and all(_is_int(s) for s in size):
        return operator.index(size[0]), operator.index(size[1])
    raise ValueError(f"size must be an int N or (height, width), got {size!r}")


def _float_text(value: Any) -> str:
    """A real number as the shortest decimal text that reads back to the same float.

    The pipeline is a string, so a number torch.compile made symbolic (any float
    under dynamic=True) must become a constant: ``float(value).hex()`` is the
    conversion Dynamo specializes, guarding on the value (a new value recompiles),
    where ``repr`` and ``str`` fail to trace. The hex form is exact, so this is
    ``repr(float(value))`` for every plain number."""
    return repr(float.fromhex(float(value).hex()))


def _value_text(where: str, key: str, spec: Mapping[str, Any], value: Any) -> Optional[str]:
    """``value`` of key ``key`` in the text form, after the schema's type check
    (None: an optional key left unset)."""
    kind = spec["type"]
    value = _unwrapped(value)
    if value is None and spec["optional"]:
        return None
    not_bool = not isinstance(value, bool)
    if kind == "size":
        h, w = _size_pair(value)
        return f"{h}x{w}"
    if kind == "int":
        # (operator.index, unlike str, specializes an int torch.compile made symbolic)
        ok = _is_int(value)
        text = str(operator.index(value)) if ok else ""
    elif kind == "float":
        ok = not_bool and isinstance(value, numbers.Real)
        text = _float_text(value) if ok else ""
    elif kind == "bool":
        ok, text = not not_bool, "true" if value else "false"
    else:  # enum: the native parser checks the choice
        ok, text = isinstance(value, str), str(value)
    if not ok:
        raise TypeError(f"{where}: {key} must be {_TYPE_WORDS[kind]}, "
                        f"got {type(value).__name__} {value!r}")
    if any(c in text for c in ",|="):
        raise ValueError(f"{where}: bad value {value!r} for {key!r}")
    return text


def pipeline_text(ops: Sequence[Mapping[str, Any]]) -> str:
    """The one-line form of an op list that ``torch.ops.obsaug.augment`` takes.

    ``ops`` is an ordered list of dicts such as ``{"op": "shift", "pad": 4}``;
    op ``k`` uses counter index ``k`` unless it says ``"index"``. Keys and types
    come from :func:`schema`.
    """
    if isinstance(ops, Mapping) or not isinstance(ops, (list, tuple)):
        raise TypeError(f"ops must be a list of dicts like [{{'op': 'shift', 'pad': 4}}], got {ops!r}")
    parts = []
    for position, op in enumerate(ops):
        if not isinstance(op, Mapping) or "op" not in op:
            raise ValueError(f"ops[{position}] must be a dict with an 'op' key "
                             f"(one of {_OP_NAMES}), got {op!r}")
        name = op["op"]
        if not isinstance(name, str) or name not in _SCHEMA:
            raise ValueError(f"ops[{position}]: op must be one of {_OP_NAMES}; got {name!r}")
        keys = _SCHEMA[name]["keys"]
        where = f"ops[{position}] ({name})"
        unknown = [key for key in op if key != "op" and key not in keys]
        if unknown:
            raise ValueError(f"{where}: unknown key(s) {unknown}; {name} takes op, "
                             f"{', '.join(keys)}")
        fields = [f"op={name}"]
        for key, value in op.items():
            if key == "op":
                continue
            text = _value_text(where, key, keys[key], value)
            if text is not None:
                fields.append(f"{key}={text}")
        parts.append(",".join(fields))
    return "|".join(parts)


def frame_sizes(ops: Sequence[Mapping[str, Any]], height: int,
                width: int) -> List[Tuple[int, int]]:
    """(height, width) at each op's input and after the last op (``len(ops) + 1``
    entries) on ``height x width`` frames; ValueError when a value is out of range or
    a size does not fit."""
    return [tuple(s) for s in _C.frame_sizes(pipeline_text(ops), height, width)]


def _output_hw(h: Any, w: Any, text: str) -> Tuple[Any, Any]:
    """The fake kernels' output frame size: the native frame_sizes walk. A side that
    is symbolic (torch.compile with dynamic shapes) passes as unknown and stays
    symbolic unless an op sets it."""
    out_h, out_w = _C.frame_sizes(text, h if isinstance(h, int) else None,
                                  w if isinstance(w, int) else None)[-1]
    return (h if out_h is None else out_h), (w if out_w is None else out_w)


def _tensor_arg(name: str, value: Any, optional: bool = False) -> Optional[torch.Tensor]:
    """A tensor argument (None too where it is optional); a numpy array or a list is a
    TypeError that says how to make one."""
    if isinstance(value, torch.Tensor) or (optional and value is None):
        return value
    raise TypeError(f"{name} must be a torch.Tensor{' or None' if optional else ''}, got "
                    f"{type(value).__name__} (torch.as_tensor converts an array or a list)")


def _dtype_arg(out_dtype: Any) -> Optional[torch.dtype]:
    """out_dtype: None, torch.uint8 or torch.float32 (the op checks which)."""
    if out_dtype is None or isinstance(out_dtype, torch.dtype):
        return out_dtype
    raise TypeError(f"out_dtype must be a torch.dtype (torch.uint8 or torch.float32) or None, "
                    f"got {type(out_dtype).__name__} {out_dtype!r}")


def _out_arg(out: Any) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor (or None for a new tensor), "
                        f"got {type(out).__name__}")
    return out


def _same_device(first: torch.Tensor, **others: Optional[torch.Tensor]) -> None:
    """The fake kernels' device check: a meta tensor among real ones must not
    select them (the dispatcher picks Meta when any argument is meta)."""
    for name, t in others.items():
        if t is not None and t.device != first.device:
            raise ValueError(f"{name} must be on the same device as the observations "
                             f"({first.device}), got {t.device}")


_RANGE_SITES: Dict[str, _input_range.Site] = {}


def _range_site(name: str) -> _input_range.Site:
    """The input-range check of ``obsaug.ops.<name>`` (one per function)."""
    site = _RANGE_SITES.get(name)
    if site is None:
        site = _RANGE_SITES.setdefault(name, _input_range.Site(f"obsaug.ops.{name}"))
    return site


def _check_range_only(name: str, obs: Any, input_range: Any) -> None:
    """input_range of an op whose result does not depend on the value range (shift,
    crop, ...): checked for a valid value, then ignored."""
    if input_range is not None:
        _range_site(name).scale_in(obs, input_range, False)


def shift(obs: torch.Tensor, *, seed: int, step: int, pad: int = _default("shift", "pad"),
          padding: str = _default("shift", "padding"), op_index: int = 0,
          out: Optional[torch.Tensor] = None, input_range: Any = None) -> torch.Tensor:
    """Random shift by (dx, dy) in [-pad, pad]^2, border replicated or zero-filled.

    ``input_range`` (None, (0, 255) or (0, 1)): accepted for uniformity; a shift
    does not depend on the value range."""
    _check_range_only("shift", obs, input_range)
    if not isinstance(padding, str):
        raise TypeError(f"padding must be 'replicate' or 'zeros', got {type(padding).__name__} "
                        f"{padding!r}")
    args = (_tensor_arg("obs", obs), _as_int64("seed", seed), _as_int64("step", step),
            _int_arg("pad", pad), padding, _int_arg("op_index", op_index))
    if out is not None:
        torch.ops.obsaug.shift_out(*args, out=_out_arg(out))
        return out
    return torch.ops.obsaug.shift(*args)


def crop(obs: torch.Tensor, *, seed: int, step: int, size: Union[int, Sequence[int]],
         center: bool = _default("crop", "center"), op_index: int = 0,
         out: Optional[torch.Tensor] = None, input_range: Any = None) -> torch.Tensor:
    """Random (or centre) crop to ``size`` (N or (H, W)), every offset equally likely.

    ``input_range``: as :func:`shift` (a crop does not depend on the value range)."""
    _check_range_only("crop", obs, input_range)
    h, w = _size_pair(size)
    args = (_tensor_arg("obs", obs), _as_int64("seed", seed), _as_int64("step", step),
            [_int_arg("size", h), _int_arg("size", w)], _bool_arg("center", center),
            _int_arg("op_index", op_index))
    if out is not None:
        torch.ops.obsaug.crop_out(*args, out=_out_arg(out))
        return out
    return torch.ops.obsaug.crop(*args)


def overlay(obs: torch.Tensor, pool: torch.Tensor, *, seed: int, step: int,
            alpha: float = _default("overlay", "alpha"),
            alpha_max: Optional[float] = _default("overlay", "alpha_max"),
            per_frame: bool = _default("overlay", "per_frame"), op_index: int = 0,
            inplace: bool = False, out: Optional[torch.Tensor] = None,
            input_range: Any = None,
            distinct: bool = _default("overlay", "distinct")) -> torch.Tensor:
    """Blend a random pool image into each sample with weight alpha (or U[alpha, alpha_max]).

    ``distinct=True``: the samples of the call see different pool images (drawn
    without replacement in blocks of the pool's size; kernels/pipeline.h).
    ``input_range``: None (float obs hold 0..255, the pool's scale; checked on the
    first float call), (0, 255) or (0, 1) (scaled to 0..255 and back; out of place
    only). See the module's doc."""
    factor = _range_site("overlay").scale_in(obs, input_range, True, in_place=inplace)
    if factor != 1.0:
        result = overlay(_input_range.scaled(_tensor_arg("obs", obs), factor), pool, seed=seed,
                         step=step, alpha=alpha, alpha_max=alpha_max, per_frame=per_frame,
                         op_index=op_index, out=out, input_range=(0, 255), distinct=distinct)
        return _input_range.scale_out(result, factor, True)
    args = (_tensor_arg("obs", obs), _tensor_arg("pool", pool), _as_int64("seed", seed),
            _as_int64("step", step), _float_arg("alpha", alpha),
            None if alpha_max is None else _float_arg("alpha_max", alpha_max),
            _bool_arg("per_frame", per_frame), _int_arg("op_index", op_index),
            _bool_arg("distinct", distinct))
    if out is not None:
        if inplace:
            raise ValueError("pass either inplace=True (the result in obs) or out= (the result "
                             "in out), not both")
        torch.ops.obsaug.overlay_out(*args, out=_out_arg(out))
        return out
    if inplace:
        torch.ops.obsaug.overlay_(*args)
        return obs
    return torch.ops.obsaug.overlay(*args)


def augment(obs: torch.Tensor, pool: Optional[torch.Tensor] = None, *,
            ops: Sequence[Mapping[str, Any]], seed: int, step: int, inplace: bool = False,
            out_dtype: Optional[torch.dtype] = None, scale: float = 1.0,
            bias: float = 0.0, out: Optional[torch.Tensor] = None,
            frame_channels: Optional[int] = None, input_range: Any = None) -> torch.Tensor:
    """Apply an ordered op list in one fused pass (op k uses counter index k).

    Equal, bit for bit in uint8, to applying the ops one after another with
    ``op_index`` = their position. ``out_dtype=torch.float32`` with
    ``scale``/``bias`` writes ``v * scale + bias`` where ``v`` is the result in
    obs's dtype. ``out``: write the result there (its dtype must be the
    result's: ``out_dtype``, else obs's) and return it. ``frame_channels``: C,
    the channels of one stacked frame (what grayscale, color_jitter and
    random_conv need to be 3 and cutout's colour is drawn per); None takes the
    pool's, else 3 when S*C is a multiple of 3, else 1. Pass it when that guess
    is wrong: 4 for RGBD frames, 1 for 3 or 6 stacked grayscale frames.
    ``input_range``: None (float obs hold 0..255; checked on the first float call
    whose pipeline depends on the range), (0, 255) or (0, 1) (scaled to 0..255 and
    back; out of place only). See the module's doc.
    """
    obs, pool = _tensor_arg("obs", obs), _tensor_arg("pool", pool, optional=True)
    factor = _range_site("augment").scale_in(
        obs, input_range, lambda: _input_range.depends_on_range(ops, scale, bias),
        in_place=inplace)
    if factor != 1.0:
        result = augment(_input_range.scaled(obs, factor), pool, ops=ops, seed=seed, step=step,
                         out_dtype=out_dtype, scale=scale, bias=bias, out=out,
                         frame_channels=frame_channels, input_range=(0, 255))
        return _input_range.scale_out(result, factor, scale == 1.0 and bias == 0.0)
    text = pipeline_text(ops)
    seed64, step64 = _as_int64("seed", seed), _as_int64("step", step)
    scale, bias = _float_arg("scale", scale), _float_arg("bias", bias)
    out_dtype = _dtype_arg(out_dtype)
    channels = _frame_channels_arg(frame_channels)
    if out is not None:
        if inplace:
            raise ValueError("pass either inplace=True (the result in obs) or out= (the result "
                             "in out), not both")
        torch.ops.obsaug.augment_out(obs, pool, text, seed64, step64, out_dtype, scale, bias,
                                     channels, out=_out_arg(out))
        return out
    if inplace:
        if (out_dtype not in (None, obs.dtype)) or scale != 1.0 or bias != 0.0:
            raise ValueError("inplace=True keeps obs's dtype: out_dtype, scale and bias "
                             "need inplace=False")
        torch.ops.obsaug.augment_(obs, pool, text, seed64, step64, channels)
        return obs
    return torch.ops.obsaug.augment(obs, pool, text, seed64, step64, out_dtype, scale, bias,
                                    channels)


def gather_augment(storage: torch.Tensor, indices: torch.Tensor,
                   pool: Optional[torch.Tensor] = None, *, ops: Sequence[Mapping[str, Any]],
                   seed: int, step: int, out_dtype: Optional[torch.dtype] = None,
                   scale: float = 1.0, bias: float = 0.0,
                   sample_ids: Optional[torch.Tensor] = None,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Gather stacks from a frame storage and augment them in one pass.

    ``storage`` is ``[N, C, H, W]`` (uint8 or float32), ``indices`` int64
    ``[B, S]`` on the same device: stacked frame ``s`` of sample ``b`` is
    ``storage[indices[b, s]]``. The result equals ``augment(storage[indices]
    .reshape(B, S*C, H, W), pool, ops=ops, ...)`` without materialising the
    gathered batch, with C the storage's (for the ops that mix channels and
    cutout's colour; ``augment`` without a pool would take C = 3 whenever S*C
    is a multiple of 3). Indices outside ``[0, N)`` raise IndexError (checking them
    synchronises once on CUDA). ``out``: write the result there and return it.

    ``sample_ids`` (int64 ``[B]``, each in ``[0, 2^32)``, else ValueError)
    makes row ``b`` draw its parameters as sample ``sample_ids[b]`` of the
    call instead of ``b``: the rows equal rows ``sample_ids`` of the call
    on the whole batch (obsaug.distributed augments another rank's draws so).
    """
    args = (_tensor_arg("storage", storage), _tensor_arg("indices", indices),
            _tensor_arg("pool", pool, optional=True), pipeline_text(ops), _as_int64("seed", seed),
            _as_int64("step", step), _dtype_arg(out_dtype), _float_arg("scale", scale),
            _float_arg("bias", bias), _tensor_arg("sample_ids", sample_ids, optional=True))
    if out is not None:
        torch.ops.obsaug.gather_augment_out(*args, out=_out_arg(out))
        return out
    return torch.ops.obsaug.gather_augment(*args)


# --- fake kernels: shapes and dtypes for torch.compile / FakeTensor tracing ---
# (The dispatcher leaves arguments at their schema defaults out, so the fakes
# carry the same defaults, read from the op schema.)

def _concrete(*tensors: Optional[torch.Tensor]) -> bool:
    """Whether every given tensor's sizes are plain ints (torch.compile with
    dynamic shapes makes them symbolic)."""
    return all(t is None or all(isinstance(side, int) for side in t.shape) for t in tensors)


@torch.library.register_fake("obsaug::augment")
def _augment_fake(obs, pool, pipeline, seed, step, out_dtype=None, scale=1.0, bias=0.0,
                  frame_channels=0, out=None):
    _same_device(obs, pool=pool, out=out)
    dtype = out_dtype or obs.dtype
    if _concrete(obs, pool, out):  # every check of the eager call
        shape = _C.check_augment_call(obs, pool, pipeline, out_dtype, scale, bias, out,
                                      frame_channels)
        return obs.new_empty(shape, dtype=dtype)
    _C.check_augment_inputs(obs, pool, pipeline, out_dtype, scale, bias, frame_channels)
    h, w = _output_hw(obs.shape[-2], obs.shape[-1], pipeline)
    return obs.new_empty((obs.shape[0], obs.shape[1], h, w), dtype=dtype)


@torch.library.register_fake("obsaug::gather_augment")
def _gather_augment_fake(storage, indices, pool, pipeline, seed, step, out_dtype=None, scale=1.0,
                         bias=0.0, sample_ids=None, out=None):
    _same_device(storage, indices=indices, pool=pool, sample_ids=sample_ids, out=out)
    dtype = out_dtype or storage.dtype
    if _concrete(storage, indices, pool, sample_ids, out):  # all but the indices' values
        shape = _C.check_gather_call(storage, indices, pool, pipeline, out_dtype, scale, bias,
                                     sample_ids, out)
        return storage.new_empty(shape, dtype=dtype)
    _C.check_gather_inputs(storage, pool, pipeline, out_dtype, scale, bias)
    h, w = _output_hw(storage.shape[-2], storage.shape[-1], pipeline)
    return storage.new_empty((indices.shape[0], indices.shape[1] * storage.shape[1], h, w),
                             dtype=dtype)


# The out= forms write into `out` and return nothing; their fakes check `out`
# as the kernel does when the sizes are concrete (else only its device).

@torch.library.register_fake("obsaug::augment_out")
def _augment_out_fake(obs, pool, pipeline, seed, step, out_dtype=None, scale=1.0, bias=0.0,
                      frame_channels=0, *, out):
    _augment_fake(obs, pool, pipeline, seed, step, out_dtype, scale, bias, frame_channels, out)


@torch.library.register_fake("obsaug::gather_augment_out")
def _gather_augment_out_fake(storage, indices, pool, pipeline, seed, step, out_dtype=None,
                             scale=1.0, bias=0.0, sample_ids=None, *, out):
    _gather_augment_fake(storage, indices, pool, pipeline, seed, step, out_dtype, scale, bias,
                         sample_ids, out)


@torch.library.register_fake("obsaug::augment_")
def _augment_inplace_fake(obs, pool, pipeline, seed, step, frame_channels=0):
    _same_device(obs, pool=pool)
    if _concrete(obs, pool):
        _C.check_augment_inplace_call(obs, pool, pipeline, frame_channels)
        return None
    _C.check_augment_inputs(obs, pool, pipeline, None, 1.0, 0.0, frame_channels)
    _output_hw(obs.shape[-2], obs.shape[-1], pipeline)
    return None


def _single_op_fake(obs: torch.Tensor, op: Mapping[str, Any],
                    pool: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                    in_place: bool = False, frame_channels: int = 0) -> Optional[torch.Tensor]:
    """The output of one op on obs (None for the in-place form): the eager
    op's checks, out's included, and its frame size."""
    text = pipeline_text([op])
    if in_place:
        return _augment_inplace_fake(obs, pool, text, 0, 0, frame_channels)
    return _augment_fake(obs, pool, text, 0, 0, frame_channels=frame_channels, out=out)


def _symbolic_size_fake(obs: torch.Tensor, h: Any, w: Any,
                        frame_channels: int = 0) -> torch.Tensor:
    """The output of an op whose size is symbolic: obs's checks, not the size's."""
    _C.check_augment_inputs(obs, None, "", None, 1.0, 0.0, frame_channels)
    return obs.new_empty((obs.shape[0], obs.shape[1], h, w))


# The single ops' fakes take `out` as a last argument the schema's
# functional forms lack; their out= forms pass it.

@torch.library.register_fake("obsaug::shift")
def _shift_fake(obs, seed, step, pad=_default("shift", "pad"),
                padding=_default("shift", "padding"), op_index=0, out=None):
    return _single_op_fake(obs, {"op": "shift", "pad": pad, "padding": padding,
                                 "index": op_index}, out=out)


@torch.library.register_fake("obsaug::counted_shift")
def _counted_shift_fake(obs, step, seed, pad=_default("shift", "pad")):
    return _shift_fake(obs, seed, 0, pad, "replicate")


@torch.library.register_fake("obsaug::crop")
def _crop_fake(obs, seed, step, size, center=_default("crop", "center"), op_index=0, out=None):
    h, w = size[0], size[-1]
    if not (isinstance(h, int) and isinstance(w, int)):  # symbolic: obs's checks only
        _same_device(obs, out=out)
        return _symbolic_size_fake(obs, h, w)
    return _single_op_fake(obs, {"op": "crop", "size": (h, w), "center": center,
                                 "index": op_index}, out=out)


@torch.library.register_fake("obsaug::shift_out")
def _shift_out_fake(obs, seed, step, pad=_default("shift", "pad"),
                    padding=_default("shift", "padding"), op_index=0, *, out):
    _shift_fake(obs, seed, step, pad, padding, op_index, out)


@torch.library.register_fake("obsaug::crop_out")
def _crop_out_fake(obs, seed, step, size, center=_default("crop", "center"), op_index=0, *, out):
    _crop_fake(obs, seed, step, size, center, op_index, out)


def _overlay_spec(alpha, alpha_max, per_frame, op_index, distinct) -> Dict[str, Any]:
    return {"op": "overlay", "alpha": alpha, "alpha_max": alpha_max, "per_frame": per_frame,
            "index": op_index, "distinct": distinct}


@torch.library.register_fake("obsaug::overlay_out")
def _overlay_out_fake(obs, pool, seed, step, alpha=_default("overlay", "alpha"),
                      alpha_max=_default("overlay", "alpha_max"),
                      per_frame=_default("overlay", "per_frame"), op_index=0,
                      distinct=_default("overlay", "distinct"), *, out):
    _single_op_fake(obs, _overlay_spec(alpha, alpha_max, per_frame, op_index, distinct), pool,
                    out=out)


@torch.library.register_fake("obsaug::overlay")
def _overlay_fake(obs, pool, seed, step, alpha=_default("overlay", "alpha"),
                  alpha_max=_default("overlay", "alpha_max"),
                  per_frame=_default("overlay", "per_frame"), op_index=0,
                  distinct=_default("overlay", "distinct")):
    return _single_op_fake(obs, _overlay_spec(alpha, alpha_max, per_frame, op_index, distinct),
                           pool)


@torch.library.register_fake("obsaug::overlay_")
def _overlay_inplace_fake(obs, pool, seed, step, alpha=_default("overlay", "alpha"),
                          alpha_max=_default("overlay", "alpha_max"),
                          per_frame=_default("overlay", "per_frame"), op_index=0,
                          distinct=_default("overlay", "distinct")):
    return _single_op_fake(obs, _overlay_spec(alpha, alpha_max, per_frame, op_index, distinct),
                           pool, in_place=True)


# --- the second family (DESIGN.md section 3a) ---
# Each is torch.ops.obsaug.<name>(obs, seed, step, <its keys>, op_index, frame_channels),
# declared in C++ from the op schema; the Python functions and fake kernels
# below are made from the same schema, so a key added there appears here.

_SECOND_FAMILY = ("flip", "rotate", "translate", "cutout", "grayscale", "color_jitter",
                  "random_conv")


def _own_keys(name: str) -> Dict[str, Dict[str, Any]]:
    return {key: spec for key, spec in _SCHEMA[name]["keys"].items() if key != "index"}


def _schema_value(name: str, key: str, spec: Mapping[str, Any], value: Any) -> Any:
    """``value`` as the torch op takes it, after the schema's type check (a float
    may be symbolic under torch.compile: it goes to the op as it is)."""
    kind = spec["type"]
    value = _unwrapped(value)
    if kind == "float" and not (value is None and spec["optional"]):
        return _float_arg(f"{name}: {key}", value)
    _value_text(name, key, spec, value)  # TypeError for a value of the wrong type
    if kind == "size":
        return [_int_arg(key, side) for side in _size_pair(value)]
    if kind == "int":
        return _int_arg(key, value)
    return value


def _make_single_op(name: str):
    keys = _own_keys(name)
    required = [key for key, spec in keys.items() if spec["required"]]

    def op(obs: torch.Tensor, *, seed: int, step: int, op_index: int = 0,
           out: Optional[torch.Tensor] = None, frame_channels: Optional[int] = None,
           input_range: Any = None, **values: Any) -> torch.Tensor:
        factor = _range_site(name).scale_in(
            obs, input_range, lambda: _input_range.depends_on_range([{"op": name, **values}]))
        if factor != 1.0:
            result = op(_input_range.scaled(_tensor_arg("obs", obs), factor), seed=seed,
                        step=step, op_index=op_index, out=out, frame_channels=frame_channels,
                        input_range=(0, 255), **values)
            return _input_range.scale_out(result, factor, True)
        unknown = sorted(set(values) - set(keys))
        if unknown:
            raise TypeError(f"{name}() got unexpected keyword(s) {unknown}; {name} takes "
                            f"seed, step, {', '.join(keys)}, op_index, out, frame_channels")
        missing = [key for key in required if key not in values]
        if missing:
            raise TypeError(f"{name}() needs {', '.join(missing)}")
        args = [_tensor_arg("obs", obs), _as_int64("seed", seed), _as_int64("step", step)]
        args += [_schema_value(name, key, spec, values.get(key, spec["default"]))
                 for key, spec in keys.items()]
        args.append(_int_arg("op_index", op_index))
        args.append(_frame_channels_arg(frame_channels))
        if out is not None:
            getattr(torch.ops.obsaug, f"{name}_out")(*args, out=_out_arg(out))
            return out
        return getattr(torch.ops.obsaug, name)(*args)

    params = [inspect.Parameter("obs", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY),
              inspect.Parameter("step", inspect.Parameter.KEYWORD_ONLY)]
    params += [inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY,
                                 default=inspect.Parameter.empty if spec["required"]
                                 else spec["default"])
               for key, spec in keys.items()]
    params.append(inspect.Parameter("op_index", inspect.Parameter.KEYWORD_ONLY, default=0))
    params.append(inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, default=None))
    params.append(inspect.Parameter("frame_channels", inspect.Parameter.KEYWORD_ONLY,
                                    default=None))
    params.append(inspect.Parameter("input_range", inspect.Parameter.KEYWORD_ONLY,
                                    default=None))
    op.__signature__ = inspect.Signature(params)
    op.__name__ = op.__qualname__ = name
    key_docs = "\n".join(f"    {key} ({spec['default_text']}; {spec['range']}): {spec['doc']}"
                         for key, spec in keys.items())
    op.__doc__ = (f"{_SCHEMA[name]['doc'][0].upper()}{_SCHEMA[name]['doc'][1:]}.\n\n"
                  f"Keys (default; range):\n{key_docs}\n\n"
                  "Parameters are drawn per sample (DESIGN.md section 3a) and shared by its "
                  "stacked frames; the same as the pipeline entry "
                  f"``{{'op': '{name}', ...}}`` of :func:`augment` at index ``op_index``. "
                  "``out``: write the result there and return it (see the module's doc). "
                  "``frame_channels``: C, as :func:`augment` takes it. ``input_range``: None "
                  "(float obs hold 0..255), (0, 255) or (0, 1), as :func:`augment` takes it.")
    return op


def _make_single_op_fake(name: str):
    keys = list(_own_keys(name))

    def fake(obs, seed, step, *args, out=None, **kwargs):
        values = dict(zip(keys + ["op_index", "frame_channels"], args))
        values.update(kwargs)
        op = {"op": name, "index": values.pop("op_index", 0)}
        frame_channels = values.pop("frame_channels", 0)
        for key, value in values.items():
            if _SCHEMA[name]["keys"][key]["type"] == "size":
                h, w = value[0], value[-1]
                if not (isinstance(h, int) and isinstance(w, int)):  # symbolic
                    _same_device(obs, out=out)
                    return _symbolic_size_fake(obs, h, w, frame_channels)
                value = (h, w)
            op[key] = value
        return _single_op_fake(obs, op, out=out, frame_channels=frame_channels)

    return fake


def _make_single_op_out_fake(name: str):
    fake = _make_single_op_fake(name)

    def out_fake(obs, seed, step, *args, out, **kwargs):
        fake(obs, seed, step, *args, out=out, **kwargs)

    return out_fake


for _name in _SECOND_FAMILY:
    globals()[_name] = _make_single_op(_name)
    torch.library.register_fake(f"obsaug::{_name}")(_make_single_op_fake(_name))
    torch.library.register_fake(f"obsaug::{_name}_out")(_make_single_op_out_fake(_name))
del _name
