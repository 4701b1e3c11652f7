"""obsaug.ReplayBuffer: frames stored once, stacked and augmented at sample time.

The contract, with the exact sampling rules, is docs/replay.md. In short::

    rb = obsaug.ReplayBuffer(capacity=100_000, frame_shape=(3, 84, 84), frame_stack=3,
                             action_shape=(6,))
    rb.add_first(frame)                               # after env.reset()
    rb.add(action, reward, frame, terminated, truncated)
    batch = rb.sample(256, augment=engine)            # obs/next_obs augmented in the gather

Frames are ``[C, H, W]`` uint8 (numpy arrays are taken without a copy);
batched calls take a leading dimension of parallel environments (``env=``
names them, default ``0..N-1``). Every argument is checked before anything
is written, so a rejected call leaves the buffer as it was.
"""
from __future__ import annotations

import errno
import operator
import os
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np
import torch

from . import _C

__all__ = ["ReplayBuffer"]

_Envs = Union[None, int, Sequence[int], torch.Tensor]


def _tensor(name: str, value: Any) -> torch.Tensor:
    """``value`` as a tensor: tensors as they are, numpy arrays without a copy
    (a copy when their strides are negative, as a flipped render's are),
    Python numbers and lists at full precision (floats as float64)."""
    if value is None:
        raise TypeError(f"{name} must be given, got None")
    if isinstance(value, np.ndarray) and any(s < 0 for s in value.strides):
        value = np.ascontiguousarray(value)
    try:
        t = torch.as_tensor(value)
        if t.is_floating_point() and not isinstance(value, (torch.Tensor, np.ndarray, np.generic)):
            t = torch.as_tensor(value, dtype=torch.float64)  # not torch's float32 default
        return t
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{name} must be a tensor, array or number, got "
                        f"{type(value).__name__} ({e})") from e


def _flag(name: str, value: Any) -> torch.Tensor:
    if isinstance(value, bool):
        return torch.tensor(value)
    t = _tensor(name, value)
    if t.dtype != torch.bool:
        raise TypeError(f"{name} must be a bool or a bool tensor/array [N], got {t.dtype}")
    return t


def _env_list(env: _Envs) -> Optional[list]:
    """The env ids as a list, or None when not given (the native default
    0..N-1); an explicit empty list stays empty (and then names no env)."""
    if env is None:
        return None
    if isinstance(env, bool):
        raise TypeError("env must be an int or a sequence of ints, got bool")
    if isinstance(env, torch.Tensor):
        if env.dtype.is_floating_point or env.dtype.is_complex or env.dtype == torch.bool:
            raise TypeError(f"env must hold integers, got {env.dtype}")
        return [int(e) for e in env.reshape(-1).tolist()]
    try:
        return [operator.index(env)]      # an int, a numpy integer
    except TypeError:
        pass
    if isinstance(env, (str, bytes)):
        raise TypeError(f"env must be an int or a sequence of ints, got {type(env).__name__}")
    try:
        ids = list(env)
    except TypeError:
        raise TypeError(f"env must be an int or a sequence of ints (e.g. env=3 or env=[0, 2]), "
                        f"got {type(env).__name__}") from None
    out = []
    for e in ids:
        if isinstance(e, bool):
            raise TypeError("env must be an int or a sequence of ints, got a bool in it")
        try:
            out.append(operator.index(e))
        except TypeError:
            raise TypeError(f"env must be an int or a sequence of ints, got "
                            f"{type(e).__name__} {e!r} in it") from None
    return out


def _shape(name: str, value: Any, example: str, int_is_1d: bool) -> list:
    """A shape option: a sequence of ints (a bare int is ``(n,)`` when
    ``int_is_1d``); anything else a TypeError naming ``name`` with an example."""
    if not isinstance(value, bool):
        try:
            n = operator.index(value)
        except TypeError:
            pass
        else:
            if int_is_1d:
                return [_whole(name, n, 0, 1 << 63)]
            raise TypeError(f"{name} must be a sequence of ints such as {example}, got the int {n}")
    if isinstance(value, (bool, str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence of ints such as {example}, got "
                        f"{type(value).__name__} {value!r}")
    return [_whole(name, s, 0, 1 << 63) for s in value]


def _int64(name: str, value: Any) -> int:
    """``int(value)``; a value beyond int64 is a ValueError naming the argument."""
    v = int(value)
    if not -(1 << 63) <= v < (1 << 63):
        raise ValueError(f"{name} must fit in int64, got {v}")
    return v


def _whole(name: str, value: Any, low: int, high: int) -> int:
    """An integer option in [low, high): ints and numpy integers, not floats
    or bools (TypeError), nothing out of range (ValueError), named."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    if not low <= v < high:
        raise ValueError(f"{name} must lie in [{low}, {high}), got {v}")
    return v


_INT32 = 1 << 31


class ReplayBuffer:
    """Frame-deduplicated replay with stacking, n-step returns, uniform or
    proportional prioritized sampling and fused gather + augmentation."""

    def __init__(self, capacity: int, frame_shape: Sequence[int], frame_stack: int = 3,
                 action_shape: Sequence[int] = (), *, action_dtype: torch.dtype = torch.float32,
                 device: Union[str, torch.device] = "cpu", n_step: int = 1, gamma: float = 0.99,
                 prioritized: bool = False, alpha: float = 0.6, beta: float = 0.4,
                 seed: int = 0, _native: Optional[Any] = None):
        if _native is not None:
            self._native = _native
            return
        if not isinstance(action_dtype, torch.dtype):
            raise TypeError(f"action_dtype must be a torch.dtype, got {action_dtype!r}")
        self._native = _C.ReplayBuffer(
            str(torch.device(device)), capacity=_whole("capacity", capacity, 0, 1 << 63),
            frame_shape=_shape("frame_shape", frame_shape, "(3, 84, 84)", int_is_1d=False),
            frame_stack=_whole("frame_stack", frame_stack, 0, _INT32),
            action_shape=_shape("action_shape", action_shape, "(6,)", int_is_1d=True),
            action_dtype=action_dtype, n_step=_whole("n_step", n_step, 0, _INT32),
            gamma=float(gamma), prioritized=bool(prioritized), alpha=float(alpha),
            beta=float(beta), seed=_whole("seed", seed, 0, 1 << 64))

    # --- adding ---------------------------------------------------------------

    def add_first(self, frame: Any, env: _Envs = None) -> None:
        """Starts an episode (after ``env.reset()``): frame ``[C, H, W]`` or ``[N, C, H, W]``."""
        frames = _tensor("frame", frame)
        self._native.add_first(frames, _env_list(env))

    def add(self, action: Any, reward: Any, frame: Any, terminated: Any = False,
            truncated: Any = False, env: _Envs = None) -> None:
        """One step: the transition from the env's latest frame to ``frame``."""
        frames = _tensor("frame", frame)
        if (isinstance(reward, (int, float)) and not isinstance(reward, bool)
                and isinstance(terminated, bool) and isinstance(truncated, bool)
                and frames.dim() == 3 and (env is None or type(env) is int)):
            # one env with plain values: no tensors for the reward and flags
            self._native.add_step(_tensor("action", action), float(reward), frames, terminated,
                                  truncated, 0 if env is None else env)
            return
        self._native.add(_tensor("action", action), _tensor("reward", reward), frames,
                         _flag("terminated", terminated), _flag("truncated", truncated),
                         _env_list(env))

    # --- sampling ---------------------------------------------------------------

    def sample(self, batch_size: int, augment: Optional[Any] = None, *,
               share_augmentation: bool = False,
               beta: Optional[float] = None) -> Dict[str, torch.Tensor]:
        """``batch_size`` transitions: obs, action, reward, discount, next_obs, indices
        (+ weights when prioritized). With ``augment=engine`` (an ``obsaug.Engine``)
        obs and next_obs are augmented in the gather pass, with the engine's next two
        steps (or one shared step with ``share_augmentation=True``). ``beta``
        overrides the importance-sampling exponent (annealing)."""
        if isinstance(batch_size, bool):
            raise TypeError("batch_size must be an int, got bool")
        try:
            batch_size = operator.index(batch_size)   # an int, a numpy integer
        except TypeError:
            raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}") from None
        native_engine = None
        if augment is not None:
            native_engine = getattr(augment, "_native", None)
            if native_engine is None or not isinstance(native_engine, getattr(_C, "Engine", ())):
                raise TypeError(f"augment must be an obsaug.Engine or None, got "
                                f"{type(augment).__name__}")
        return self._native.sample(_int64("batch_size", batch_size), native_engine, bool(share_augmentation),
                                   None if beta is None else float(beta))

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """New priorities (finite, >= 0; e.g. ``|td| + eps``) for the slots ``sample``
        returned as ``indices``."""
        self._native.update_priorities(_tensor("indices", indices),
                                       _tensor("priorities", priorities))

    # --- checkpoints ------------------------------------------------------------

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes ``path/replay.obsaug`` atomically (temporary file, fsync, rename)."""
        self._native.save(os.fspath(path))

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"],
             device: Optional[Union[str, torch.device]] = None) -> "ReplayBuffer":
        """A buffer from ``save(path)``, on ``device`` (default cpu). FileNotFoundError
        when ``path`` holds no checkpoint; ValueError when it holds a corrupt one."""
        file = os.path.join(os.fspath(path), "replay.obsaug")
        if not os.path.exists(file):  # a FIFO or device there is refused natively, by its kind
            raise FileNotFoundError(errno.ENOENT, "no replay checkpoint (replay.obsaug) in "
                                    f"{os.fspath(path)!r}; ReplayBuffer.save(path) writes one", file)
        native = _C.ReplayBuffer.load(os.fspath(path),
                                      None if device is None else str(torch.device(device)))
        return cls(0, (), _native=native)

    # --- properties -------------------------------------------------------------

    def __len__(self) -> int:
        """Frames stored now (at most ``capacity``), not transitions: an episode of T
        steps stores T + 1 frames; ``num_valid`` counts the transitions that can be
        sampled (what ``learning_starts``-style checks want)."""
        return self._native.size

    capacity = property(lambda self: self._native.capacity)
    frame_shape = property(lambda self: tuple(self._native.frame_shape))
    frame_stack = property(lambda self: self._native.frame_stack)
    action_shape = property(lambda self: tuple(self._native.action_shape))
    action_dtype = property(lambda self: self._native.action_dtype)
    device = property(lambda self: torch.device(self._native.device))
    n_step = property(lambda self: self._native.n_step)
    gamma = property(lambda self: self._native.gamma)
    prioritized = property(lambda self: self._native.prioritized)
    alpha = property(lambda self: self._native.alpha)
    beta = property(lambda self: self._native.beta)
    seed = property(lambda self: self._native.seed)
    num_valid = property(lambda self: self._native.num_valid,
                         doc="Transitions that can be sampled now (len() counts frames).")
    total_frames = property(lambda self: self._native.total_frames,
                            doc="Frames ever added (len() counts those still stored).")
    sample_calls = property(lambda self: self._native.sample_calls,
                            doc="sample() calls so far (the sampler's Philox counter).")
    storage = property(lambda self: self._native.storage,
                       doc="The frames, [capacity, C, H, W] uint8 on the buffer's device.")

    def __repr__(self) -> str:
        return (f"obsaug.ReplayBuffer(capacity={self.capacity}, frame_shape={self.frame_shape}, "
                f"frame_stack={self.frame_stack}, frames={len(self)} (len), "
                f"num_valid={self.num_valid} transitions, device={str(self.device)!r}, "
                f"prioritized={self.prioritized})")
