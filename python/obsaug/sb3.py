"""obsaug.sb3: ``obsaug.ReplayBuffer`` as a ``replay_buffer_class`` for Stable-Baselines3.

::

    from stable_baselines3 import SAC
    from stable_baselines3.common.vec_env import VecFrameStack
    import obsaug.sb3

    env = VecFrameStack(make_vec_env(...), n_stack=3)      # pixel observations
    model = SAC("CnnPolicy", env, buffer_size=100_000,
                replay_buffer_class=obsaug.sb3.ReplayBuffer,
                replay_buffer_kwargs={"augment": "configs/drq_shift.yaml"})  # config or Engine

Works with SAC, TD3, DDPG and DQN (any off-policy algorithm that calls
``add(obs, next_obs, action, reward, done, infos)`` and ``sample(batch_size, env)``).

Storage: each frame once (``[buffer_size, C, H, W]`` uint8 on SB3's device),
stacks rebuilt at sample time, so memory is about ``1/(2S)`` of SB3's
``ReplayBuffer`` (which stores obs and next_obs stacked) and ``1/S`` of its
``optimize_memory_usage=True`` variant. The observation space must be a uint8
image Box, ``[S*C, H, W]`` (channel first, as after SB3's VecTransposeImage) or
``[H, W, S*C]``; samples come back in the space's layout and dtype (uint8, or the
engine's output dtype), values 0..255, because SB3's policies divide image
observations by 255 (``normalize_images=True``): an engine whose ``output``
scales to 0..1 needs ``policy_kwargs={"normalize_images": False}``.

Frames per stack: with an engine (``augment``), its config's ``frames.channels``
C decides and S = channels / C, as the engine reads observations; the
constructor checks the observation space against the engine (a multiple of C
channels, frames of its height x width) and against ``frame_stack`` /
``frame_channels`` when those are given, and raises ValueError naming the
mismatch. Without an engine: ``frame_stack`` or ``frame_channels``
when given, else C = 3 when the channel count is a multiple of 3 (RGB), else 1
(grayscale). When S > 1, every ``add`` checks the layout: a VecFrameStack'ed next
observation is the observation shifted by one frame, so a wrong C or S raises
ValueError naming the fix. When the guess is S = 1 (3 channels: one RGB frame,
or three grayscale frames stacked) nothing can be checked: the buffer stores
whole observations as single frames, which is right for one RGB frame and, for
stacked grayscale, costs S times the memory; pass ``frame_stack=`` (or an
engine) there. Episode starts repeat their first frame to fill a stack (as
DrQ's frame stack does), where VecFrameStack pads with zeros.

Episodes: an env's episode ends at ``done``; it also ends (as a truncation, so it
bootstraps) when the env was reset without one, as a second ``learn()`` (with
``reset_num_timesteps=True``) or ``learn()`` after loading a model and this buffer
does: ``add`` keeps each env's last next observation and, when the env's next
observation differs from it, starts a new episode from it.

Termination: ``handle_timeout_termination=True`` (SB3's default) stores a time
limit (``infos[i]["TimeLimit.truncated"]``) as a truncation, which bootstraps;
``False`` treats it as a termination, like SB3. (SB3's own memory-saving
``optimize_memory_usage`` cannot combine with timeout handling; this buffer
needs neither: ``optimize_memory_usage`` is accepted and ignored.)
n-step returns: ``n_steps`` and ``gamma`` (the algorithm's gamma; SB3's
NStepReplayBuffer names); the samples then carry ``discounts`` = gamma^n'. The
buffer stores the n-step sum, so with ``VecNormalize(norm_reward=True)`` the sum is
normalised as a whole: exact with ``clip_reward=np.inf``; a finite clip (which SB3
applies to each step's reward) is refused when ``n_steps > 1``.
``augment``: None, an ``obsaug.Engine``, or its config (a preset name, a YAML path
or a mapping, built here; a config keeps ``model.save()`` able to pickle
``replay_buffer_kwargs``, an Engine object does not). obs and next_obs take the
engine's next two steps (``share_augmentation=True``: one step).
``seed``: the buffer's sampling seed (default: drawn from torch's generator, so
SB3's ``seed=`` makes runs repeat).
Importing this module imports stable_baselines3; ``import obsaug`` alone does not.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.buffers import ReplayBuffer as _SB3ReplayBuffer
from stable_baselines3.common.preprocessing import get_action_dim, is_image_space_channels_first
from stable_baselines3.common.type_aliases import ReplayBufferSamples

from ._devices import same_device
from .replay import ReplayBuffer as _ObsaugReplayBuffer

__all__ = ["ReplayBuffer"]

log = logging.getLogger(__name__)


def _check_layout_args(frame_stack: Optional[int], frame_channels: Optional[int]) -> None:
    for name, value in (("frame_stack", frame_stack), ("frame_channels", frame_channels)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")


def _frame_layout(channels: int, frame_stack: Optional[int],
                  frame_channels: Optional[int]) -> tuple:
    """(S, C) with S * C == channels, from the arguments or the channel count."""
    _check_layout_args(frame_stack, frame_channels)
    if frame_stack is not None and frame_channels is not None:
        if frame_stack * frame_channels != channels:
            raise ValueError(f"frame_stack * frame_channels must equal the observation's "
                             f"{channels} channels, got {frame_stack} * {frame_channels}")
        return frame_stack, frame_channels
    if frame_stack is not None:
        if frame_stack < 1 or channels % frame_stack:
            raise ValueError(f"frame_stack must divide the observation's {channels} channels, "
                             f"got {frame_stack}")
        return frame_stack, channels // frame_stack
    c = frame_channels if frame_channels is not None else (3 if channels % 3 == 0 else 1)
    if c < 1 or channels % c:
        raise ValueError(f"frame_channels must divide the observation's {channels} channels, "
                         f"got {c}")
    return channels // c, c


def _engine_layout(frames: Mapping[str, int], channels: int, h: int, w: int,
                   frame_stack: Optional[int], frame_channels: Optional[int]) -> tuple:
    """(S, C): C from the engine's ``frames`` and S = ``channels`` / C, as the engine
    reads observations (any multiple of its C, frames of its height x width), checked
    against ``frame_stack`` / ``frame_channels`` when given."""
    _check_layout_args(frame_stack, frame_channels)
    c, fh, fw = frames["channels"], frames["height"], frames["width"]
    if channels % c != 0 or (fh, fw) != (h, w):
        raise ValueError(
            f"augment's engine takes frames of {c} channels of {fh}x{fw} (its config's "
            f"frames.channels, height, width), but the observations are {channels} channels "
            f"of {h}x{w}; set frames: {{height: {h}, width: {w}}} and frames.channels to a "
            f"divisor of {channels} in the engine config")
    s = channels // c
    for name, value, want in (("frame_stack", frame_stack, s), ("frame_channels", frame_channels, c)):
        if value is not None and value != want:
            raise ValueError(f"{name}={value} disagrees with augment's engine: its frames.channels "
                             f"= {c} makes the {channels}-channel observations {s} stacked "
                             f"frames of {c} channels; drop {name}= or set frames.channels in "
                             f"the engine config")
    return s, c


class ReplayBuffer(_SB3ReplayBuffer):
    """SB3's ``ReplayBuffer`` interface over a frame-deduplicated ``obsaug.ReplayBuffer``."""

    def __init__(self, buffer_size: int, observation_space: spaces.Space,
                 action_space: spaces.Space, device: Union[torch.device, str] = "auto",
                 n_envs: int = 1, optimize_memory_usage: bool = False,
                 handle_timeout_termination: bool = True, *, augment: Any = None,
                 frame_stack: Optional[int] = None, frame_channels: Optional[int] = None,
                 n_steps: int = 1, gamma: float = 0.99, share_augmentation: bool = False,
                 seed: Optional[int] = None):
        # SB3's ReplayBuffer.__init__ allocates its arrays: take only the base's bookkeeping
        # (buffer_size, spaces, obs_shape, action_dim, pos, full, device, n_envs).
        BaseBuffer.__init__(self, buffer_size, observation_space, action_space, device,
                            n_envs=n_envs)
        if not (isinstance(observation_space, spaces.Box) and observation_space.dtype == np.uint8
                and len(observation_space.shape) == 3):
            raise ValueError("observation_space must be a uint8 image Box [S*C, H, W] or "
                             f"[H, W, S*C], got {observation_space}")
        self.total_capacity = int(buffer_size)  # frames, over all envs
        self.buffer_size = max(buffer_size // n_envs, 1)  # per env, as SB3 counts pos/full
        self.optimize_memory_usage = False
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.channels_first = bool(is_image_space_channels_first(observation_space))
        shape = observation_space.shape
        k, h, w = shape if self.channels_first else (shape[2], shape[0], shape[1])
        self.engine = self._engine(augment)
        self._augment_config = None if self.engine is augment else augment
        if self.engine is None:
            self.frame_stack, self.frame_channels = _frame_layout(k, frame_stack, frame_channels)
        else:
            try:
                self.frame_stack, self.frame_channels = _engine_layout(
                    self.engine.config["frames"], k, h, w, frame_stack, frame_channels)
            except (TypeError, ValueError):
                if self._augment_config is not None:  # built here: stop its pool threads
                    self.engine.close()
                raise
        self.n_steps, self.gamma = int(n_steps), float(gamma)
        self.share_augmentation = bool(share_augmentation)
        action_dtype = torch.float32 if isinstance(action_space, spaces.Box) else torch.int64
        if seed is None:
            seed = int(torch.randint(0, 2**31 - 1, ()).item())
        # reported before allocating; the native constructor refuses a capacity this
        # machine cannot hold (ValueError with the sizes) before it allocates anything
        self.memory_bytes = self._memory_bytes(k, h, w)
        log.info("obsaug.sb3.ReplayBuffer: %s", self.memory_report(h, w))
        self.replay = _ObsaugReplayBuffer(
            self.total_capacity, (self.frame_channels, h, w), self.frame_stack,
            (self.action_dim,), action_dtype=action_dtype, device=self.device,
            n_step=self.n_steps, gamma=self.gamma, seed=seed)
        self._open = np.zeros(n_envs, dtype=bool)  # per env: an episode is open in the buffer
        # per env: the next_obs of its last add ([S*C, H, W], on the host); while the env's
        # episode is open its next obs must equal it, else the env was reset without done
        self._last_next_obs = torch.zeros((n_envs, k, h, w), dtype=torch.uint8)

    def _engine(self, augment: Any) -> Any:
        if augment is None:
            return None
        from . import Engine  # the native Engine exists only in full builds
        engine = augment if isinstance(augment, Engine) else None
        if engine is None:
            if not isinstance(augment, (str, os.PathLike, Mapping)):
                raise TypeError("augment must be None, an obsaug.Engine or an Engine config "
                                f"(preset name, YAML path or mapping), got "
                                f"{type(augment).__name__}")
            engine = Engine(augment)
        if not same_device(engine.device, self.device):
            raise ValueError(f"augment's engine runs on {engine.device} but SB3's device is "
                             f"{self.device}; give the engine config device: {self.device}")
        return engine

    def _memory_bytes(self, k: int, h: int, w: int) -> Dict[str, int]:
        """Bytes of this buffer (frames exactly, actions, and the per-slot metadata of
        docs/replay.md) beside those of SB3's ReplayBuffer for the same capacity."""
        n = self.total_capacity
        action_bytes = self.action_dim * (4 if isinstance(self.action_space, spaces.Box) else 8)
        frames = n * self.frame_channels * h * w
        host = n * (48 + action_bytes)
        obs = n * k * h * w
        sb3 = 2 * obs + n * (action_bytes + 4 * 3)  # obs, next_obs, actions, rewards/dones/timeouts
        return {"frames": frames, "host": host, "total": frames + host, "sb3_total": sb3}

    def memory_report(self, h: int, w: int) -> str:
        m = self.memory_bytes
        return (f"{self.total_capacity} frames of {self.frame_channels}x{h}x{w} (stacks of "
                f"{self.frame_stack}) on {self.device}: {m['frames'] / 2**20:.1f} MiB of frames + "
                f"{m['host'] / 2**20:.1f} MiB on the host = {m['total'] / 2**20:.1f} MiB; SB3's "
                f"ReplayBuffer would take {m['sb3_total'] / 2**20:.1f} MiB "
                f"({m['total'] / m['sb3_total']:.2f}x)")

    # --- adding -------------------------------------------------------------------

    def _channels_first(self, obs: np.ndarray) -> torch.Tensor:
        """``[n_envs, S*C, H, W]`` uint8 view of a batch of observations."""
        t = torch.from_numpy(np.ascontiguousarray(obs)).reshape(self.n_envs, *self.obs_shape)
        if t.dtype != torch.uint8:
            raise TypeError(f"observations must be uint8, got {t.dtype}")
        return t if self.channels_first else t.permute(0, 3, 1, 2)

    def add(self, obs: np.ndarray, next_obs: np.ndarray, action: np.ndarray,
            reward: np.ndarray, done: np.ndarray, infos: List[Dict[str, Any]]) -> None:
        c = self.frame_channels
        cur, nxt = self._channels_first(obs), self._channels_first(next_obs)
        if self.frame_stack > 1 and not torch.equal(nxt[:, :-c], cur[:, c:]):
            raise ValueError(
                f"next_obs is not obs shifted by one frame of {c} channels: the observation's "
                f"{cur.shape[1]} channels are not {self.frame_stack} stacked frames of {c} "
                "(VecFrameStack, oldest first); pass frame_stack= (or frame_channels=) in "
                "replay_buffer_kwargs")
        # An open episode whose obs is not the last next_obs was cut off by a reset without
        # done (a second learn(), learn() after a load): add_first closes it as truncated.
        cut = self._open & (cur != self._last_next_obs).flatten(1).any(1).numpy()
        starting = np.flatnonzero(~self._open | cut)
        if starting.size:
            self.replay.add_first(cur[starting, -c:], env=starting.tolist())
        done = np.asarray(done, dtype=bool).reshape(self.n_envs)
        timeout = np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos],
                           dtype=bool) if self.handle_timeout_termination else np.zeros_like(done)
        action_t = torch.as_tensor(np.asarray(action).reshape(self.n_envs, self.action_dim),
                                   dtype=self.replay.action_dtype)
        self.replay.add(action_t, torch.as_tensor(np.asarray(reward, dtype=np.float32)
                                                  .reshape(self.n_envs)),
                        nxt[:, -c:], terminated=torch.from_numpy(done & ~timeout),
                        truncated=torch.from_numpy(done & timeout))
        self._open = ~done
        self._last_next_obs.copy_(nxt)
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
            self.pos = 0

    # --- sampling -----------------------------------------------------------------

    def sample(self, batch_size: int, env: Optional[Any] = None) -> ReplayBufferSamples:
        """``batch_size`` transitions (with replacement) as SB3's ReplayBufferSamples:
        observations / next_observations in the space's layout, actions ``[B, action_dim]``,
        dones (terminations only) and rewards ``[B, 1]``, discounts ``[B, 1]`` with n-step."""
        if env is not None and getattr(env, "norm_obs", False):
            raise ValueError("VecNormalize(norm_obs=True) does not apply to pixel observations; "
                             "use VecNormalize(norm_obs=False) (rewards are normalised)")
        if (env is not None and self.n_steps > 1 and getattr(env, "norm_reward", False)
                and np.isfinite(getattr(env, "clip_reward", np.inf))):
            # The buffer keeps n-step returns summed; SB3 clips each step's reward before
            # summing, which the sum cannot reproduce (scaling alone commutes with it).
            raise ValueError(
                f"n_steps={self.n_steps} with VecNormalize(norm_reward=True, clip_reward="
                f"{env.clip_reward}): SB3 clips each step's normalised reward before the n-step "
                "sum, and this buffer stores the sum; use clip_reward=np.inf (then the sum is "
                "normalised exactly) or n_steps=1")
        batch = self.replay.sample(batch_size, augment=self.engine,
                                   share_augmentation=self.share_augmentation)
        obs, next_obs = batch["obs"], batch["next_obs"]
        if not self.channels_first:
            obs, next_obs = obs.permute(0, 2, 3, 1), next_obs.permute(0, 2, 3, 1)
        discount = batch["discount"].unsqueeze(1)
        dones = (discount == 0).to(torch.float32)
        reward = batch["reward"].unsqueeze(1)
        if env is not None:
            reward = torch.as_tensor(self._normalize_reward(reward.cpu().numpy(), env),
                                     dtype=torch.float32, device=self.device)
        discounts = None
        if self.n_steps > 1:  # gamma^n' (a terminated transition's is masked by dones)
            discounts = torch.where(dones > 0, torch.ones_like(discount), discount)
        return ReplayBufferSamples(obs, batch["action"], next_obs, dones, reward, discounts)

    def _get_samples(self, batch_inds: np.ndarray, env: Optional[Any] = None):
        raise NotImplementedError("obsaug.sb3.ReplayBuffer draws its own indices; call sample()")

    def size(self) -> int:
        """Transitions that can be sampled now."""
        return self.replay.num_valid

    def reset(self) -> None:
        raise NotImplementedError("obsaug.sb3.ReplayBuffer cannot be emptied in place; make a "
                                  "new one")

    # --- pickling (SB3's save_replay_buffer / load_replay_buffer) -------------------

    def __getstate__(self) -> Dict[str, Any]:
        import tempfile
        if self.engine is not None and self._augment_config is None:
            raise TypeError("an obsaug.sb3.ReplayBuffer built from an Engine object cannot be "
                            "pickled; pass the engine's config as augment= instead")
        state = dict(self.__dict__)
        with tempfile.TemporaryDirectory() as tmp:
            self.replay.save(tmp)
            with open(os.path.join(tmp, "replay.obsaug"), "rb") as f:
                state["replay"] = f.read()
        state["engine"] = None if self.engine is None else self.engine.state_dict()
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        import tempfile
        blob, engine_state = state.pop("replay"), state.pop("engine")
        self.__dict__.update(state)
        if "_last_next_obs" not in state:  # pickled by a version that kept no next_obs:
            self._open[:] = False          # the next add starts new episodes
            shape = self.obs_shape if self.channels_first else (
                self.obs_shape[2], self.obs_shape[0], self.obs_shape[1])
            self._last_next_obs = torch.zeros((self.n_envs, *shape), dtype=torch.uint8)
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "replay.obsaug"), "wb") as f:
                f.write(blob)
            self.replay = _ObsaugReplayBuffer.load(tmp, device=self.device)
        self.engine = None
        if engine_state is not None:
            self.engine = self._engine(self._augment_config)
            self.engine.load_state_dict(engine_state)
