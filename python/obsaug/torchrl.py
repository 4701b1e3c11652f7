"""obsaug.torchrl: an obsaug Engine as a TorchRL ``Transform`` for replay buffers.

::

    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from obsaug.torchrl import Augment

    rb = ReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=256,
                      transform=Augment(obsaug.Engine("configs/drq_shift.yaml")))
    # or rb.append_transform(Augment(engine)), e.g. after the transform of
    # CatFrames.make_rb_transform_and_sampler (CatFrames(dim=-3)) rebuilt the stacks

Contract:
- TorchRL calls ``forward`` on every ``rb.sample()`` (after the storage read and
  the transforms before this one) and ``inv`` on ``rb.extend()``: ``inv`` is the
  identity here, so the buffer stores what the environment gave and every sample
  is augmented afresh.
- Each key in ``in_keys`` holds observations ``[..., S*C, H, W]`` (any leading
  batch dims, flattened into B for the engine and restored), uint8 or float32
  0..255, on the engine's device (CPU or CUDA); the output has the engine's
  output dtype, scale and bias and is written to the matching ``out_keys``
  entry (default: in place of the input key).
- Steps: each key takes the engine's next step, so obs and next obs get
  independent draws (DrQ); ``share=True`` gives every key of one call the same
  step (the same shift, distractor, ... for obs and next obs).
- ``state_dict()`` carries the engine's ``state_dict()`` (its seed, step counter
  and pool cursor), so TorchRL's ``rb.state_dict()`` / ``rb.dumps()`` resume the
  same augmentations after ``load_state_dict``.
- Inside an environment (``TransformedEnv``) each observation key is augmented
  with its own step, like ``forward`` with ``share=False``.
Importing this module imports torchrl; ``import obsaug`` alone does not.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import torch
from tensordict import TensorDictBase
from torchrl.envs.transforms import Transform

from ._devices import same_device

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


class Augment(Transform):
    """Augments observation keys of sampled tensordicts with an ``obsaug.Engine``."""

    def __init__(self, engine: Any, in_keys: Union[NestedKey, Sequence[NestedKey]] = (
                 "pixels", ("next", "pixels")),
                 out_keys: Optional[Union[NestedKey, Sequence[NestedKey]]] = None, *,
                 share: bool = False):
        from .engine import Engine  # the native Engine exists only in full builds
        if not isinstance(engine, Engine):
            raise TypeError(f"engine must be an obsaug.Engine, got {type(engine).__name__}")
        if not isinstance(share, bool):
            raise TypeError(f"share must be a bool, got {type(share).__name__}")
        in_list = _keys("in_keys", in_keys)
        out_list = in_list if out_keys is None else _keys("out_keys", out_keys)
        if len(out_list) != len(in_list):
            raise ValueError(f"out_keys must name one key per in_key: {len(in_list)} in_keys "
                             f"{in_list}, got {len(out_list)} out_keys {out_list}")
        super().__init__(in_keys=in_list, out_keys=out_list)
        self.engine = engine
        self.share = share

    # --- the augmentation ---------------------------------------------------------

    def _augment(self, key: NestedKey, obs: torch.Tensor, step: Optional[int]) -> Tuple[
            torch.Tensor, int]:
        """``obs`` augmented at ``step`` (None: the engine's next step); returns the
        result and the step used."""
        if not isinstance(obs, torch.Tensor):
            raise TypeError(f"{key!r} must hold a tensor, got {type(obs).__name__}")
        if obs.dim() < 3:
            raise ValueError(f"{key!r} must be [..., S*C, H, W] observations, got shape "
                             f"{list(obs.shape)}")
        if not same_device(obs.device, self.engine.device):
            raise ValueError(f"{key!r} is on {obs.device} but the engine augments on "
                             f"{self.engine.device}; build the engine with device: "
                             f"{obs.device} or move the tensordict")
        lead = obs.shape[:-3]
        flat = obs.reshape(-1, *obs.shape[-3:])
        used = self.engine.step if step is None else step
        out = self.engine.augment(flat, step)
        return out.reshape(*lead, *out.shape[-3:]), used

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Called by ``ReplayBuffer.sample``: every ``in_keys`` entry present is augmented
        into its ``out_keys`` entry (a missing key raises KeyError unless the transform's
        missing tolerance is set)."""
        step: Optional[int] = None
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            obs = tensordict.get(in_key, None)
            if obs is None:
                if self.missing_tolerance:
                    continue
                raise KeyError(f"Augment: {in_key!r} not found in the tensordict (keys: "
                               f"{list(tensordict.keys(True, True))})")
            out, used = self._augment(in_key, obs, step)
            if self.share:
                step = used
            tensordict.set(out_key, out)
        return tensordict

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        """Inside an environment (``_call``): one key, the engine's next step."""
        return self._augment("observation", obs, None)[0]

    # --- state --------------------------------------------------------------------

    def get_extra_state(self) -> Dict[str, Any]:
        return {"engine": self.engine.state_dict(), "share": self.share}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        if not isinstance(state, dict) or "engine" not in state:
            raise ValueError("Augment state must be a dict with the engine's state_dict under "
                             f"'engine', got {type(state).__name__}")
        self.engine.load_state_dict(state["engine"])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, "
                f"share={self.share}, step={self.engine.step})")
