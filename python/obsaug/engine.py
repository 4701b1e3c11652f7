"""obsaug.Engine: the configured pipeline, distractor pool and step counter.

``Engine(config)`` takes a YAML path (``str`` or ``os.PathLike``), a preset
name (``"drq_shift"``: configs/ shipped in the package, see
obsaug.locations; an unknown name raises ValueError listing them) or a
mapping (a dict, or a Hydra/OmegaConf DictConfig) with the same schema
(DESIGN.md section 6; the mapping is sent as JSON, which is YAML, through the
same strict loader, so errors name the key's path; a mapping or list held in
several places, as PyYAML's aliases give them, is sent once with a YAML anchor,
so a billion-laughs dict is refused as fast as the same YAML file; at most
100,000 values, 64 levels, and no mapping that contains itself: ValueError).
Numbers may be numpy or 0-dim torch scalars, paths ``os.PathLike``.
Relative ``pool.sources`` resolve against the working directory, then (a
file) against the folder above the file's own (``configs/x.yaml`` -> ``./``),
then against ``base_dir`` (default: the checkout this package lies in, if
any, as for the presets in its configs/); ``data/photos`` names the embedded
photographs (obsaug.locations.embedded_photos: ``$OBSAUG_PHOTOS``, the user
cache, then ``data/photos`` under those folders), for a file as for a dict.

Every ``augment`` call without ``step`` takes the next value of the engine's
counter, so ``augment(obs)`` and ``augment(next_obs)`` draw independent
parameters (as DrQ does); pass the same ``step`` to share parameters between
tensors; ``reserve_steps(n)`` takes ``n`` steps at once, atomically, for a
step shared while other threads augment too. ``augment`` / ``augment_`` may
be called from several threads at once and release the GIL; ``close`` and
``load_state_dict`` need no call in flight.

Data-parallel training: ``Engine(config, rank=r, world_size=n)`` (or
``Engine.from_torch_distributed(config)``) keys the engine's Philox stream
with ``seed + rank`` (so ranks draw different parameters; rank 0 keeps the
configured seed) and builds the pool from this rank's disjoint share of the
sources' files (``pool_files()``). The same config serves every rank.

Outputs: ``augment`` / ``gather_augment`` return a new tensor per call, or
write into ``out=`` (the result's dtype, shape and device, contiguous, not
sharing memory with the input; checked). With ``output: {reuse: true}`` in the
config (or ``Engine(..., reuse_output=True)``) a call without ``out`` returns
a tensor the engine keeps between calls, one per call site (``augment``,
``gather_augment``, a replay sample's ``obs``, its ``next_obs``) and shape,
dtype and device: it stays valid until the next call of the same site with the
same shape, which overwrites it. Clone what must outlive that call; call each
site from one thread at a time (docs/engine.md, "Where results go").

Inputs: torch tensors (a numpy array is a TypeError saying ``torch.from_numpy``),
uint8 or float32 holding 0..255; ``input_range=(0, 1)`` on ``augment`` takes
float 0..1 data, and by default the first float ``augment`` / ``augment_`` of an
engine whose pipeline depends on the range (overlay, cutout's colour,
color_jitter, random_conv's sigmoid, an output scale) refuses a batch whose
maximum lies in (0, 1] (obsaug/_input_range.py). ``frames.stack`` is the stack
depth the tools and presets describe, not a check: an engine takes any number
of stacked frames of ``frames.channels`` channels (an SB3 or replay buffer's,
a 4-frame Atari stack through a 3-frame preset); the channels per frame and
the frame size are checked.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from . import _C, _input_range, locations
from ._closing import Closing
from .ops import _rank_args, _tensor_arg, _uint64_arg, _unwrapped

__all__ = ["Engine"]


# A dict config's bounds: a config is a few hundred values, a few levels deep.
_MAX_CONFIG_VALUES = 100_000
_MAX_CONFIG_DEPTH = 64


class _Node:
    """A mapping or list of a dict config, converted: its entries, and how many
    places of the config hold it (more than one: PyYAML's aliases, a dict used
    twice)."""
    __slots__ = ("entries", "is_map", "uses", "anchor")

    def __init__(self, is_map: bool):
        self.entries: List[Any] = []   # (key, value) pairs, or values
        self.is_map = is_map
        self.uses = 1
        self.anchor: Optional[str] = None


def _key_text(key: Any, path: str) -> str:
    """A mapping key as json.dumps would write it (str, or a number, bool, None)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    raise TypeError(f"config {path or '(the whole config)'}: keys must be strings, got "
                    f"{type(key).__name__}")


def _converted(config: Mapping[str, Any]) -> _Node:
    """The config's mappings and sequences (a Hydra/OmegaConf DictConfig / ListConfig, with
    its interpolations resolved on access) as _Nodes of JSON's scalars; numpy / 0-dim
    torch scalars become Python numbers, os.PathLike a str. An object met again (by id)
    is the same _Node, not a copy: shared references stay shared, so a billion-laughs
    dict costs its size, not its expansion. TypeError for a value of another type,
    ValueError for more than _MAX_CONFIG_VALUES values (counted without expanding shared
    ones), more than _MAX_CONFIG_DEPTH levels, or a mapping or list that contains
    itself; each names its key path."""
    memo: Dict[int, Tuple[Any, _Node]] = {}  # id -> (the object, kept alive: ids stay unique)
    active: set = set()                       # ids of the mappings and lists being converted
    values = 0

    def convert(value: Any, path: str, depth: int) -> Any:
        nonlocal values
        values += 1
        if values > _MAX_CONFIG_VALUES:
            raise ValueError(f"config holds more than {_MAX_CONFIG_VALUES} values (at "
                             f"{path or '(the whole config)'}); a config is a few hundred: "
                             "list many image files in a .txt source instead")
        is_map = isinstance(value, Mapping)
        if is_map or (isinstance(value, Sequence) and not isinstance(value, (str, bytes))):
            if id(value) in active:
                raise ValueError(f"config {path or '(the whole config)'}: refers to a mapping "
                                 "or list that contains it")
            if id(value) in memo:
                node = memo[id(value)][1]
                node.uses += 1
                return node
            if depth >= _MAX_CONFIG_DEPTH:
                raise ValueError(f"config {path}: nested more than {_MAX_CONFIG_DEPTH} levels "
                                 "deep")
            node = _Node(is_map)
            memo[id(value)] = (value, node)
            active.add(id(value))
            if is_map:
                for key, item in value.items():
                    text = _key_text(key, path)
                    node.entries.append((text, convert(item, f"{path}.{text}" if path else text,
                                                       depth + 1)))
            else:
                node.entries = [convert(item, f"{path}[{k}]", depth + 1)
                                for k, item in enumerate(value)]
            active.discard(id(value))
            return node
        if isinstance(value, os.PathLike):
            return os.fspath(value)
        value = _unwrapped(value)  # numpy and 0-dim torch scalars as Python numbers
        if value is None or isinstance(value, (str, bool, int, float)):
            return value
        raise TypeError(f"config {path or '(the whole config)'}: expected a number, string, "
                        f"bool, list or mapping, got {type(value).__name__}")

    return convert(config, "", 0)


def _config_text(config: Mapping[str, Any]) -> str:
    """A dict config as the text the native loader reads: JSON (which is YAML flow
    syntax), with an anchor on the first place of a mapping or list held in several
    places and an alias at the others, as a YAML file with anchors reads, so the loader
    sees what the same YAML file would give it (and refuses a bomb as fast)."""
    anchors = 0
    out: List[str] = []

    def emit(node: Any) -> None:
        nonlocal anchors
        if not isinstance(node, _Node):
            out.append(json.dumps(node))
            return
        if node.uses > 1:
            if node.anchor is not None:
                out.append(f"*{node.anchor} ")
                return
            node.anchor = f"a{anchors}"
            anchors += 1
            out.append(f"&{node.anchor} ")
        out.append("{" if node.is_map else "[")
        for k, entry in enumerate(node.entries):
            if k:
                out.append(", ")
            if node.is_map:
                out.append(json.dumps(entry[0]) + ": ")
                emit(entry[1])
            else:
                emit(entry)
        out.append("}" if node.is_map else "]")

    emit(_converted(config))
    return "".join(out)


def _step_arg(step: Any) -> Optional[int]:
    """None (the engine's counter) or a step as the ops take one: an int in [0, 2**64),
    also a numpy or 0-dim torch integer; a bool is no step (TypeError)."""
    return None if step is None else _uint64_arg("step", _unwrapped(step))


def _out_arg(out: Any) -> Optional[torch.Tensor]:
    if out is not None and not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be a torch.Tensor (or None), got {type(out).__name__}")
    return out


class Engine(Closing):
    """Applies a configured augmentation pipeline to ``[B, S*C, H, W]`` observations."""

    def __init__(self, config: Union[str, "os.PathLike[str]", Mapping[str, Any]], *,
                 base_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
                 rank: int = 0, world_size: int = 1, reuse_output: Optional[bool] = None):
        """``reuse_output`` (True/False) overrides the config's ``output.reuse``."""
        rank, world_size = _rank_args(rank, world_size)
        if reuse_output is not None and not isinstance(reuse_output, bool):
            raise TypeError(f"reuse_output must be a bool or None, got {type(reuse_output).__name__}")
        if base_dir is None:
            base_dir = locations.checkout_root() or ""
        elif not isinstance(base_dir, (str, os.PathLike)):
            raise TypeError("base_dir must be a folder path (str or os.PathLike) or None, got "
                            f"{type(base_dir).__name__}")
        if isinstance(config, Mapping):
            text = _config_text(config)
            self._native = _C.Engine.from_string(text, "<dict>", os.fspath(base_dir), rank,
                                                 world_size, reuse_output)
        elif isinstance(config, (str, os.PathLike)):
            self._native = _C.Engine.from_file(locations.find_config(config), rank, world_size,
                                               reuse_output, os.fspath(base_dir))
        else:
            raise TypeError("config must be a path to a YAML file (str or os.PathLike) or a "
                            f"mapping (dict, DictConfig), got {type(config).__name__}")

    @classmethod
    def from_torch_distributed(cls, config: Union[str, "os.PathLike[str]", Mapping[str, Any]],
                               **kwargs: Any) -> "Engine":
        """An engine for this process's rank: ``torch.distributed.get_rank()`` and
        ``get_world_size()`` when the default process group is initialised, else 0 of 1."""
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            rank, world_size = dist.get_rank(), dist.get_world_size()
        else:
            rank, world_size = 0, 1
        return cls(config, rank=rank, world_size=world_size, **kwargs)

    def augment(self, obs: torch.Tensor, step: Optional[int] = None, *,
                out: Optional[torch.Tensor] = None, input_range: Any = None) -> torch.Tensor:
        """The pipeline out of place; dtype, scale and bias from the config's ``output``.

        ``out``: write the result there and return it; else a new tensor, or the
        engine's reused one with ``output.reuse`` (see the module's doc).
        ``input_range``: None (float obs hold 0..255, checked on the first float
        call), (0, 255), or (0, 1) (scaled to 0..255 and back; see the module's doc)."""
        obs = _tensor_arg("obs", obs)
        factor = self._input_site("augment").scale_in(obs, input_range, self._depends_on_range)
        if factor != 1.0:
            result = self._native.augment(_input_range.scaled(obs, factor), _step_arg(step),
                                          _out_arg(out))
            return _input_range.scale_out(result, factor, self._output_in_input_scale())
        return self._native.augment(obs, _step_arg(step), _out_arg(out))

    def _input_site(self, method: str) -> _input_range.Site:
        """The range check of this engine's ``method`` (made on first use)."""
        sites = self.__dict__.setdefault("_input_sites", {})
        site = sites.get(method)
        if site is None:
            site = sites.setdefault(method, _input_range.Site(f"Engine.{method}"))
        return site

    def _depends_on_range(self) -> bool:
        return _input_range.depends_on_range(*_input_range.pipeline_of(self.config))

    def _output_in_input_scale(self) -> bool:
        output = self.config["output"]
        return output["dtype"] != "float32" or (output["scale"] == 1.0 and output["bias"] == 0.0)

    def gather_augment(self, storage: torch.Tensor, indices: torch.Tensor,
                       step: Optional[int] = None, *,
                       out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Gathers stacks from a frame storage ``[N, C, H, W]`` (the config's C, H, W, on
        its device) by int64 ``indices [B, S]`` and augments them in one pass
        (``obsaug.ops.gather_augment`` with the engine's pipeline, step and output);
        ``out`` as for :meth:`augment`."""
        return self._native.gather_augment(_tensor_arg("storage", storage),
                                           _tensor_arg("indices", indices), _step_arg(step),
                                           _out_arg(out))

    def augment_(self, obs: torch.Tensor, step: Optional[int] = None) -> torch.Tensor:
        """The pipeline in place (it must keep the frame size); returns ``obs``. Float
        obs hold 0..255 (checked on the first float call, as :meth:`augment`)."""
        obs = _tensor_arg("obs", obs)
        self._input_site("augment_").scale_in(obs, None, self._depends_on_range)
        self._native.augment_(obs, _step_arg(step))
        return obs

    __call__ = augment

    def reserve_steps(self, count: int = 1) -> int:
        """Takes ``count`` consecutive steps from the counter in one atomic operation and
        returns the first; the next ``augment`` without ``step`` uses ``first + count``.

        Share one step between calls made while other threads augment with the same
        engine: ``s = eng.reserve_steps(); eng.augment(obs, s); eng.augment(next_obs, s)``
        (reading ``eng.step`` and then augmenting without ``step`` is not atomic: another
        thread may take that step in between). A closed engine raises RuntimeError."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"count must be an int, got {type(count).__name__}")
        if not 1 <= count < 2**63:
            raise ValueError(f"count must be in [1, 2**63), got {count}")
        if self.closed:  # the native counter outlives close(); a closed engine gives no steps
            raise RuntimeError("engine is closed: reserve_steps needs an open engine")
        return self._native.reserve_steps(count)

    @property
    def step(self) -> int:
        """The step the next ``augment`` without ``step`` uses."""
        return self._native.step

    @property
    def config(self) -> Dict[str, Any]:
        """The resolved config as a dict (every key, inferred sizes, absolute sources);
        ``Engine(engine.config)`` builds an engine with the same config."""
        return self._native.config_dict()

    def config_yaml(self) -> str:
        """The resolved config as YAML text, as ``obsaug check-config`` prints it."""
        return self._native.config_yaml()

    @property
    def device(self) -> torch.device:
        return torch.device(self._native.device)

    @property
    def rank(self) -> int:
        return self._native.rank

    @property
    def world_size(self) -> int:
        return self._native.world_size

    @property
    def seed(self) -> int:
        """The Philox key in use: the config's seed + rank."""
        return self._native.seed

    def pool_files(self) -> List[str]:
        """The files this rank's pool reads (its share of the sources), in listing order:
        the path of a plain file, ``"shard.tar::member"`` for a tar member; empty without
        an overlay."""
        return list(self._native.pool_files())

    @property
    def pool_images(self) -> Optional[torch.Tensor]:
        """The ``[P, C, Hp, Wp]`` uint8 distractor pool, or None without an overlay."""
        return self._native.pool_images

    def stats(self) -> Dict[str, Any]:
        """Counters: calls, samples, step, has_pool and the pool's ``pool_*`` statistics
        (``DistractorPool.stats`` with the prefix); ``pool_first_failures`` lists the
        inputs the pool skipped as ``{"path", "message"}``: the listing's first 5, then the
        first 5 files whose read or decode failed, each once (``pool_failed`` counts all)."""
        return self._native.stats()

    def state_dict(self) -> Dict[str, Any]:
        """seed, step and the pool's refresh cursor; exact to restore in sync mode."""
        return self._native.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._native.load_state_dict(dict(state))

    def __repr__(self) -> str:
        return (f"obsaug.Engine(device={self._native.device!r}, step={self.step}, "
                f"rank={self.rank}, world_size={self.world_size}, closed={self.closed})")
