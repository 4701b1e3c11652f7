"""obsaug.torchrl: an obsaug Engine as a TorchRL ``Transform``, for replay buffers and
for environments.

::

    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.envs import TransformedEnv
    from obsaug.torchrl import Augment

    rb = ReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256,
                      transform=Augment(obsaug.Engine("drq_shift")))
    # or rb.append_transform(Augment(engine)), e.g. after the transform of
    # CatFrames.make_rb_transform_and_sampler (CatFrames(dim=-3)) rebuilt the stacks
    env = TransformedEnv(base_env, Augment(obsaug.Engine("drq_shift")))

Contract:
- Replay buffer: TorchRL calls ``forward`` on every ``rb.sample()`` (after the
  storage read and the transforms before this one) and ``inv`` on ``rb.extend()``:
  ``inv`` is the identity here, so the buffer stores what the environment gave and
  every sample is augmented afresh. Every ``in_keys`` entry is augmented into its
  ``out_keys`` entry; a missing one raises KeyError (unless the transform's missing
  tolerance is set).
- Environment (``TransformedEnv``): ``step`` (``_call``) and ``reset`` (``_reset``)
  augment the observations the base env (and the transforms before this one)
  produced. An env transform sees one tensordict of observations without a
  ``"next"`` level, so each key is used with a leading ``"next"`` removed (the
  default ``("pixels", ("next", "pixels"))`` augments ``"pixels"``; pairs that
  become equal count once). ``reset`` skips a key the reset tensordict lacks, as
  TorchRL's image transforms do; ``step`` raises KeyError. Each frame is augmented
  once, when the env produces it, so in a rollout ``("next", "pixels")`` at t is
  ``"pixels"`` at t + 1. The observation spec of each out key follows the pipeline
  (``transform_observation_spec``): the frame size after the last op
  (``obsaug.ops.frame_sizes``), float32 with ``output: {dtype: float32}`` (else the
  input's dtype); a Bounded uint8 input stays Bounded over what the pipeline can give
  (0..255, through scale and bias for float output); any other input becomes
  Unbounded (a float pipeline's range is not bounded by its input's: random_conv
  without an activation, for one). A spec whose frame size is not the config's
  ``frames`` raises ValueError when the env builds its specs.
- Each key holds observations ``[..., S*C, H, W]`` (any leading batch dims,
  flattened into B for the engine and restored), uint8 or float32 0..255, on the
  engine's device (CPU or CUDA); the output has the engine's output dtype, scale
  and bias. Float 0..1 (``ToTensorImage``'s, TorchRL's usual pixel pipeline):
  ``Augment(engine, input_range=(0, 1))`` scales it to 0..255 for the pipeline
  and the result back (unless the output has a scale or bias); by default the
  first float call of an engine whose pipeline depends on the range (overlay,
  cutout's colour, color_jitter, random_conv's sigmoid, an output scale) raises
  ValueError when the batch's maximum is at most 1 (obsaug/_input_range.py).
- ``Augment.to(device)`` (``TransformedEnv.to``, ``rb.transform.to``) gives the
  transform an engine on that device: built from ``engine.config`` there and
  loaded with ``engine.state_dict()`` (the engine given stays with its owner). Each key gets a tensor of its own even when the engine reuses its
  outputs (``output.reuse``: Augment then passes a fresh ``out=``), since a
  tensordict keeps what it is given.
- Steps: each key takes the engine's next step, so obs and next obs of a sample get
  independent draws (DrQ); ``share=True`` gives every key of one call the same step
  (the same shift, distractor, ... for obs and next obs; in an env, for the several
  observation keys of one step), reserved in one atomic ``engine.reserve_steps()``,
  so other threads augmenting with the engine meanwhile cannot split the pair. A call
  checks every key before it takes a step.
- Prefetch (``ReplayBuffer(prefetch=n)``): TorchRL runs ``forward`` in worker threads,
  several samples at once, so which sample gets which step depends on thread timing:
  with prefetch a run's augmentations are not reproducible sample by sample (each
  sample still gets steps of its own, and with ``share=True`` one step for all its
  keys), and the step in ``state_dict()`` counts the prefetched samples not yet
  returned. Leave prefetch off for runs that must repeat exactly.
- ``state_dict()`` carries the engine's ``state_dict()`` (its seed, step counter
  and pool cursor) and ``share``, so TorchRL's ``rb.state_dict()`` / ``rb.dumps()``
  resume the same augmentations after ``load_state_dict``.
- Copies: ``copy.deepcopy`` and pickling (TorchRL's ParallelEnv, collectors) give an
  Augment with a new Engine built from ``engine.config`` (absolute sources) with the
  same rank and world size, loaded with ``engine.state_dict()``: the same seed and
  step counter and, in ``mode: sync``, the same pool cursor; an async pool is filled
  again from its sources. The copy's counter is its own, so a copy repeats the
  original's draws from that step on: give parallel workers engines with distinct
  seeds (or ranks) when they must differ. A closed engine cannot be copied
  (RuntimeError).
Importing this module imports torchrl; ``import obsaug`` alone does not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from tensordict import TensorDictBase, unravel_key
from torchrl.data import Bounded, Composite, TensorSpec, Unbounded
from torchrl.envs.transforms import Transform

from ._devices import same_device
from ._input_range import parse as parse_range

__all__ = ["Augment"]

NestedKey = Union[str, Tuple[str, ...]]


def _keys(name: str, keys: Union[NestedKey, Sequence[NestedKey]]) -> list:
    """A list of keys: a str is one key; a tuple or list is a sequence of keys (wrap a
    lone nested key in a list: ``[("next", "pixels")]``)."""
    if isinstance(keys, str):
        return [keys]
    if not isinstance(keys, (tuple, list)) or not keys:
        raise TypeError(f"{name} must be a key or a non-empty sequence of keys, got {keys!r}")
    return list(keys)


def _without_next(key: NestedKey) -> NestedKey:
    """``key`` as an env transform sees it: ``("next", *rest)`` -> ``rest``."""
    if isinstance(key, tuple) and len(key) > 1 and key[0] == "next":
        return unravel_key(key[1:])
    return key


def _build_engine(recipe: Dict[str, Any]) -> Any:
    from .engine import Engine
    engine = Engine(recipe["config"], rank=recipe["rank"], world_size=recipe["world_size"])
    engine.load_state_dict(recipe["state"])
    return engine


class Augment(Transform):
    """Augments observation keys with an ``obsaug.Engine``: of sampled tensordicts in a
    replay buffer, of each step's and reset's observations in a ``TransformedEnv``
    (see the module's doc)."""

    def __init__(self, engine: Any, in_keys: Union[NestedKey, Sequence[NestedKey]] = (
                 "pixels", ("next", "pixels")),
                 out_keys: Optional[Union[NestedKey, Sequence[NestedKey]]] = None, *,
                 share: bool = False, input_range: Any = None):
        """``input_range``: None (float observations hold 0..255, checked once), (0, 255),
        or (0, 1) (scaled to 0..255 and back, see the module's doc)."""
        from .engine import Engine  # the native Engine exists only in full builds
        if not isinstance(engine, Engine):
            raise TypeError(f"engine must be an obsaug.Engine, got {type(engine).__name__}")
        if not isinstance(share, bool):
            raise TypeError(f"share must be a bool, got {type(share).__name__}")
        parse_range(input_range)
        in_list = _keys("in_keys", in_keys)
        out_list = in_list if out_keys is None else _keys("out_keys", out_keys)
        if len(out_list) != len(in_list):
            raise ValueError(f"out_keys must name one key per in_key: {len(in_list)} in_keys "
                             f"{in_list}, got {len(out_list)} out_keys {out_list}")
        super().__init__(in_keys=in_list, out_keys=out_list)
        self._set_engine(engine)
        self.share = share
        self.input_range = None if input_range is None else tuple(input_range)

    def _set_engine(self, engine: Any) -> None:
        from .ops import frame_sizes
        self.engine = engine
        config = engine.config
        self._frames = config["frames"]
        self._output = config["output"]
        self._out_hw = frame_sizes(config["pipeline"], self._frames["height"],
                                   self._frames["width"])[-1]

    # --- the augmentation ---------------------------------------------------------

    def _check(self, key: NestedKey, obs: Any) -> None:
        if not isinstance(obs, torch.Tensor):
            raise TypeError(f"{key!r} must hold a tensor, got {type(obs).__name__}")
        if obs.dim() < 3:
            raise ValueError(f"{key!r} must be [..., S*C, H, W] observations, got shape "
                             f"{list(obs.shape)}")
        if not same_device(obs.device, self.engine.device):
            raise ValueError(f"{key!r} is on {obs.device} but the engine augments on "
                             f"{self.engine.device}; build the engine with device: "
                             f"{obs.device} or move the tensordict")

    def _augment(self, obs: torch.Tensor, step: Optional[int]) -> torch.Tensor:
        """``obs`` (checked) augmented at ``step`` (None: the engine's next step) into a
        tensor of its own."""
        lead = obs.shape[:-3]
        flat = obs.reshape(-1, *obs.shape[-3:])
        out = None
        if self._output["reuse"]:  # the engine's kept buffer would be overwritten by the next key
            dtype = torch.float32 if self._output["dtype"] == "float32" else flat.dtype
            out = torch.empty((flat.shape[0], flat.shape[1], *self._out_hw), dtype=dtype,
                              device=flat.device)
        ranged = {} if self.input_range is None else {"input_range": self.input_range}
        out = self.engine.augment(flat, step, out=out, **ranged)
        return out.reshape(*lead, *out.shape[-3:])

    def _augment_keys(self, tensordict: TensorDictBase,
                      pairs: Sequence[Tuple[NestedKey, NestedKey]]) -> TensorDictBase:
        present = []
        for in_key, out_key in pairs:
            obs = tensordict.get(in_key, None)
            if obs is None:
                if self.missing_tolerance:
                    continue
                raise KeyError(f"Augment: {in_key!r} not found in the tensordict (keys: "
                               f"{list(tensordict.keys(True, True))})")
            self._check(in_key, obs)
            present.append((out_key, obs))
        # share: one step reserved atomically for all keys, so a prefetch thread (or any
        # other caller of the engine) cannot take a step between this call's keys
        step = self.engine.reserve_steps(1) if self.share and present else None
        for out_key, obs in present:
            tensordict.set(out_key, self._augment(obs, step))
        return tensordict

    def _env_pairs(self) -> List[Tuple[NestedKey, NestedKey]]:
        """(in, out) keys inside an env: without a leading "next", each pair once."""
        pairs: List[Tuple[NestedKey, NestedKey]] = []
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            pair = (_without_next(in_key), _without_next(out_key))
            if pair not in pairs:
                pairs.append(pair)
        return pairs

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Called by ``ReplayBuffer.sample``: every ``in_keys`` entry present is augmented
        into its ``out_keys`` entry (a missing key raises KeyError unless the transform's
        missing tolerance is set)."""
        return self._augment_keys(tensordict, list(zip(self.in_keys, self.out_keys)))

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Called by ``TransformedEnv.step`` on the step's observations (no "next" level)."""
        return self._augment_keys(next_tensordict, self._env_pairs())

    def _reset(self, tensordict: TensorDictBase,
               tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Called by ``TransformedEnv.reset``: the reset observations, as ``_call`` (a
        missing key is skipped, as TorchRL's image transforms do)."""
        tolerant = self.missing_tolerance
        self.set_missing_tolerance(True)
        try:
            return self._call(tensordict_reset)
        finally:
            self.set_missing_tolerance(tolerant)

    # --- specs (inside an environment) --------------------------------------------

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        # Only observations change. The base class would also check that every out key
        # outside in_keys is in the spec, and in_keys name replay-buffer keys
        # (("next", ...)) that no env spec holds.
        output_spec = output_spec.clone()
        output_spec["full_observation_spec"] = self.transform_observation_spec(
            output_spec["full_observation_spec"])
        return output_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        """Each out key gets the spec of what the pipeline makes of its in key's spec."""
        if not isinstance(observation_spec, Composite):
            return self._output_spec(self._env_pairs()[0][0], observation_spec)
        present = set(observation_spec.keys(True, True))
        for in_key, out_key in self._env_pairs():
            if in_key in present:
                observation_spec[out_key] = self._output_spec(in_key, observation_spec[in_key])
        return observation_spec

    def _output_spec(self, key: NestedKey, spec: TensorSpec) -> TensorSpec:
        frames = self._frames
        shape = spec.shape
        if (len(shape) < 3 or shape[-3] % frames["channels"]
                or (shape[-2], shape[-1]) != (frames["height"], frames["width"])):
            raise ValueError(
                f"Augment: the spec of {key!r} must be [..., S*{frames['channels']}, "
                f"{frames['height']}, {frames['width']}] (the engine's frames), got "
                f"{spec.dtype} {list(shape)}")
        if spec.dtype not in (torch.uint8, torch.float32):
            raise ValueError(f"Augment: the spec of {key!r} must be uint8 or float32, got "
                             f"{spec.dtype} {list(shape)}")
        out_shape = torch.Size((*shape[:-3], shape[-3], *self._out_hw))
        to_float = self._output["dtype"] == "float32"
        dtype = torch.float32 if to_float else spec.dtype
        if isinstance(spec, Bounded) and spec.dtype == torch.uint8:
            ends = torch.tensor([0.0, 255.0], device=spec.device)
            if to_float:  # two float32 roundings, as the kernels apply scale and bias
                ends = ends * self._output["scale"] + self._output["bias"]
            low, high = ends.min().item(), ends.max().item()
            return Bounded(low=low, high=high, shape=out_shape, dtype=dtype, device=spec.device)
        return Unbounded(shape=out_shape, dtype=dtype, device=spec.device)

    # --- devices ------------------------------------------------------------------

    def to(self, *args: Any, **kwargs: Any) -> "Augment":
        """``nn.Module.to``; a device other than the engine's gives this transform an
        engine there (see the module's doc)."""
        device = torch._C._nn._parse_to(*args, **kwargs)[0]
        if device is not None and not same_device(device, self.engine.device):
            from .engine import Engine
            engine = self.engine
            moved = Engine({**engine.config, "device": str(device)}, rank=engine.rank,
                           world_size=engine.world_size)
            moved.load_state_dict(engine.state_dict())
            self._set_engine(moved)
        return super().to(*args, **kwargs)

    # --- state and copies ---------------------------------------------------------

    def get_extra_state(self) -> Dict[str, Any]:
        return {"engine": self.engine.state_dict(), "share": self.share}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        if not isinstance(state, dict) or "engine" not in state:
            raise ValueError("Augment state must be a dict with the engine's state_dict under "
                             f"'engine', got {type(state).__name__}")
        share = state.get("share", self.share)
        if not isinstance(share, bool):
            raise ValueError(f"Augment state's 'share' must be a bool, got {share!r}")
        self.engine.load_state_dict(state["engine"])
        self.share = share

    def __getstate__(self) -> Dict[str, Any]:
        """The native Engine does not pickle: the state names how to build it again."""
        if self.engine.closed:
            raise RuntimeError("Augment: its engine is closed, so it cannot be copied or "
                               "pickled (a copy builds a new engine from the open one's "
                               "config and state)")
        state = super().__getstate__()
        engine = state.pop("engine")
        state["engine_recipe"] = {"config": engine.config, "rank": engine.rank,
                                  "world_size": engine.world_size,
                                  "state": engine.state_dict()}
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        recipe = state.pop("engine_recipe")
        state.setdefault("input_range", None)  # pickled before the option existed
        super().__setstate__(state)
        self._set_engine(_build_engine(recipe))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, "
                f"share={self.share}, step={self.engine.step}, device={self.engine.device}"
                f"{'' if self.input_range is None else f', input_range={self.input_range}'})")
