"""obsaug.Engine: the configured pipeline, distractor pool and step counter.

``Engine(config)`` takes a YAML path (``str`` or ``os.PathLike``), a preset
name (``"drq_shift"``: configs/ shipped in the package, see
obsaug.locations; an unknown name raises ValueError listing them) or a
mapping (a dict, or a Hydra/OmegaConf DictConfig) with the same schema
(DESIGN.md section 6; the mapping is sent as JSON, which is YAML, through the
same strict loader, so errors name the key's path).
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
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch

from . import _C, _input_range, locations
from ._closing import Closing
from .ops import _rank_args, _tensor_arg, _uint64_arg, _unwrapped

__all__ = ["Engine"]


def _plain(value: Any, path: str = "") -> Any:
    """Nested Mappings and Sequences (a Hydra/OmegaConf DictConfig / ListConfig, with its
    interpolations resolved on access) as dicts and lists of JSON's types, for json.
    numpy / 0-dim torch scalars become Python numbers, os.PathLike a str; anything else
    is a TypeError naming its key path."""
    if isinstance(value, Mapping):
        return {key: _plain(item, f"{path}.{key}" if path else str(key))
                for key, item in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(item, f"{path}[{k}]") for k, item in enumerate(value)]
    value = _unwrapped(value)  # numpy and 0-dim torch scalars as Python numbers
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    raise TypeError(f"config {path or '(the whole config)'}: expected a number, string, bool, "
                    f"list or mapping, got {type(value).__name__}")


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
            text = json.dumps(_plain(config))
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
