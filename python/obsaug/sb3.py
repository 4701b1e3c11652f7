"""obsaug.sb3: ``obsaug.ReplayBuffer`` as a ``replay_buffer_class`` for Stable-Baselines3.

::

    from stable_baselines3 import SAC
    from stable_baselines3.common.vec_env import VecFrameStack
    import obsaug.sb3

    env = VecFrameStack(make_vec_env(...), n_stack=3)      # pixel observations
    model = SAC("CnnPolicy", env, buffer_size=100_000,
                replay_buffer_class=obsaug.sb3.ReplayBuffer,
                replay_buffer_kwargs={"augment": "drq_shift"})  # a preset, a config or an Engine

Works with SAC, TD3, DDPG and DQN (any off-policy algorithm that calls
``add(obs, next_obs, action, reward, done, infos)`` and ``sample(batch_size, env)``).

Storage: each frame once (``[buffer_size, C, H, W]`` uint8 on SB3's device),
stacks rebuilt at sample time, so memory is about ``1/(2S)`` of SB3's
``ReplayBuffer`` (which stores obs and next_obs stacked) and ``1/S`` of its
``optimize_memory_usage=True`` variant. The observation space must be a uint8
image Box, ``[S*C, H, W]`` (channel first, as after SB3's VecTransposeImage) or
``[H, W, S*C]`` (a float Box, which is what ``VecNormalize(norm_obs=True)``
makes of pixels, is refused naming it); samples come back in the space's
layout and dtype (uint8, or the engine's output dtype), values 0..255,
because SB3's policies divide image observations by 255
(``normalize_images=True``): an engine whose ``output`` scales to 0..1 needs
``policy_kwargs={"normalize_images": False}``.

SB3's arrays are not there: no ``observations``, ``next_observations``,
``actions``, ``rewards``, ``dones`` or ``timeouts`` (the frames live once in
``replay.storage``, the transitions in the native ``replay``; ``sample()``
returns SB3's ``ReplayBufferSamples``), and ``reset()`` raises (make a new
buffer). ``dones[pos] = True``, what SB3 writes before a second ``learn()``
with ``optimize_memory_usage=True``, is taken: it ends the episodes at the
newest step (see Episodes). ``size()`` is SB3's: steps stored per env (``pos``,
or ``buffer_size`` when full); ``num_valid`` counts the transitions that can
be sampled now (all envs; n-step transitions need their future), and ``len(
replay)`` the frames stored.

Frames per stack: with an engine (``augment``), its config's ``frames.channels``
C decides and S = channels / C, as the engine reads observations; the
constructor checks the observation space against the engine (a multiple of C
channels, frames of its height x width) and against ``frame_stack`` /
``frame_channels`` when those are given, and raises ValueError naming the
mismatch. Without an engine: ``frame_stack`` or ``frame_channels``
when given, else C = 3 when the channel count is a multiple of 3 (RGB), else 1
(grayscale). When S > 1, every ``add`` checks the layout: a VecFrameStack'ed next
observation is the observation shifted by one frame. When the layout was
guessed (no engine, no ``frame_stack`` / ``frame_channels``) and the first
``add`` is not shifted so, the observations are not stacked (no VecFrameStack:
2 or 4 channels of one frame, RGBD): the buffer takes S = 1, C = all channels
(logged) before storing anything; later, or with a layout given, a wrong C or
S raises ValueError naming the fix (``frame_stack=1`` for unstacked
observations). When the guess is S = 1 (3 channels: one RGB frame, or three
grayscale frames stacked) nothing can be checked: the buffer stores whole
observations as single frames, which is right for one RGB frame and, for
stacked grayscale, costs S times the memory; pass ``frame_stack=`` (or an
engine) there. Episode starts repeat their first frame to fill a stack (as
DrQ's frame stack does), where VecFrameStack pads with zeros.

Episodes: an env's episode ends at ``done``; it also ends (as a truncation, so it
bootstraps) when the env was reset without one, as a second ``learn()`` (with
``reset_num_timesteps=True``) or ``learn()`` after loading a model and this buffer
does: ``add`` keeps each env's last next observation and, when the env's next
observation differs from it, starts a new episode from it. ``dones[pos] =
True`` (SB3 before a continued ``learn()`` with ``optimize_memory_usage``)
ends the open episodes at the newest step the same way, as a truncation,
where SB3's own memory-saving buffer must make it a termination.

Termination: ``handle_timeout_termination=True`` (SB3's default) stores a time
limit (``infos[i]["TimeLimit.truncated"]``) as a truncation, which bootstraps;
``False`` treats it as a termination, like SB3. (SB3's own memory-saving
``optimize_memory_usage`` cannot combine with timeout handling; this buffer
needs neither: ``optimize_memory_usage`` is accepted and has no effect on
storage.)
n-step returns: ``n_steps`` and ``gamma`` (the algorithm's gamma; SB3's
NStepReplayBuffer names); the samples then carry ``discounts`` = gamma^n'. The
buffer stores the n-step sum, so with ``VecNormalize(norm_reward=True)`` the sum is
normalised as a whole: exact with ``clip_reward=np.inf``; a finite clip (which SB3
applies to each step's reward) is refused when ``n_steps > 1``. A transition is
sampled once its n steps (or its episode's end) are stored; until the first one
is (``learning_starts`` below ``n_steps``), ``sample`` draws from the steps stored
so far with their returns truncated at the newest step, which bootstraps: SB3's
NStepReplayBuffer's rule at its write head.
``augment``: None, an ``obsaug.Engine``, or its config (a preset name, a YAML path
or a mapping, built here on SB3's device; a config keeps ``model.save()`` able to
pickle ``replay_buffer_kwargs``, an Engine object does not). obs and next_obs take
the engine's next two steps (``share_augmentation=True``: one step).
Device: ``device`` may be set after construction, as SB3's ``load_replay_buffer``
does (``replay_buffer.device = model.device``): the frames and the engine move
there. A buffer pickled on a device this process lacks (saved on a GPU machine,
loaded on a CPU-only one) unpickles onto the CPU, with a warning.
``seed``: the buffer's sampling seed (default: drawn from torch's generator, so
SB3's ``seed=`` makes runs repeat).
Importing this module imports stable_baselines3; ``import obsaug`` alone does not.
"""
from __future__ import annotations

import logging
import operator
import os
import tempfile
import warnings
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import BaseBuffer
from stable_baselines3.common.buffers import ReplayBuffer as _SB3ReplayBuffer
from stable_baselines3.common.preprocessing import is_image_space_channels_first
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.utils import get_device

from . import locations
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


def _space_error(observation_space: spaces.Space) -> str:
    """Why an observation space is refused, and the fix."""
    text = ("observation_space must be a uint8 image Box [S*C, H, W] or [H, W, S*C], got "
            f"{observation_space}")
    if (isinstance(observation_space, spaces.Box) and len(observation_space.shape) == 3
            and np.issubdtype(observation_space.dtype, np.floating)):
        text += ("; a float image Box is what VecNormalize(norm_obs=True) makes of pixel "
                 "observations: use VecNormalize(norm_obs=False) (SB3's policies divide pixels "
                 "by 255 themselves; rewards can still be normalised), or give the buffer the "
                 "env's uint8 frames")
    return text


def _config_on(config: Any, device: torch.device) -> Dict[str, Any]:
    """An Engine config (preset name, YAML path or mapping) as a dict on ``device``:
    a file is resolved as the Engine resolves it, without building one."""
    from . import _C
    if isinstance(config, Mapping):
        resolved = dict(config)
    else:
        resolved = _C.config_file_dict(locations.find_config(config),
                                       locations.checkout_root() or "")
    resolved["device"] = str(device)
    return resolved


def _available(device: torch.device) -> bool:
    """Whether this process can hold tensors on ``device`` (a pickled one may be gone)."""
    if device.type != "cuda":
        return True
    index = 0 if device.index is None else device.index
    return torch.cuda.is_available() and index < torch.cuda.device_count()


class _EpisodeEnds:
    """``replay_buffer.dones``: what SB3 touches between ``learn()`` runs with
    ``optimize_memory_usage=True`` (``dones[pos] = True`` at the newest step pos).
    Setting the newest step ends every env's open episode there (marked per env by
    a bool array); reading raises, since the buffer keeps no dones array."""

    def __init__(self, buffer: "ReplayBuffer"):
        self._buffer = buffer

    def __setitem__(self, pos: Any, value: Any) -> None:
        rb = self._buffer
        newest = (rb.pos - 1) % rb.buffer_size
        try:
            index = operator.index(pos)
        except TypeError:
            raise TypeError(f"dones[pos] = ...: pos must be the newest step's index "
                            f"({newest}), got {type(pos).__name__}") from None
        if not (rb.full or rb.pos > 0) or index % rb.buffer_size != newest:
            raise IndexError(f"dones[{index}] = ...: only the newest step ({newest}) can be "
                             "marked (what SB3 does before a continued learn()); the buffer "
                             "keeps no per-step dones")
        ends = np.broadcast_to(np.asarray(value, dtype=bool), (rb.n_envs,))
        rb._open &= ~ends  # the next add starts new episodes there: truncations

    def __getitem__(self, key: Any) -> Any:
        raise TypeError("obsaug.sb3.ReplayBuffer keeps no dones array (the transitions live "
                        "in the native replay); sample() returns dones, and dones[pos] = True "
                        "ends the episodes at the newest step")


class ReplayBuffer(_SB3ReplayBuffer):
    """SB3's ``ReplayBuffer`` interface over a frame-deduplicated ``obsaug.ReplayBuffer``
    (see the module's doc: no SB3 arrays, ``size()`` in steps per env, ``num_valid``
    in sampleable transitions)."""

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
            raise ValueError(_space_error(observation_space))
        self.total_capacity = int(buffer_size)  # frames, over all envs
        self.buffer_size = max(buffer_size // n_envs, 1)  # per env, as SB3 counts pos/full
        self.optimize_memory_usage = bool(optimize_memory_usage)
        self.handle_timeout_termination = bool(handle_timeout_termination)
        self.channels_first = bool(is_image_space_channels_first(observation_space))
        k, h, w = self._frame_shape()
        self.engine = self._engine(augment)
        self._augment_config = None if self.engine is augment else augment
        # the layout is a guess (no engine, nothing given): the first add may correct it
        self._layout_guessed = self.engine is None and frame_stack is None \
            and frame_channels is None
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
        self._action_dtype = torch.float32 if isinstance(action_space, spaces.Box) else torch.int64
        self._seed = int(torch.randint(0, 2**31 - 1, ()).item()) if seed is None else seed
        self.replay = self._new_replay(self.total_capacity, self._seed)
        self._open = np.zeros(n_envs, dtype=bool)  # per env: an episode is open in the buffer
        # per env: the next_obs of its last add ([S*C, H, W], on the host); while the env's
        # episode is open its next obs must equal it, else the env was reset without done
        self._last_next_obs = torch.zeros((n_envs, k, h, w), dtype=torch.uint8)
        # n-step: the adds so far, until a transition has its n steps (sample's fallback)
        self._head: Optional[List[tuple]] = [] if self.n_steps > 1 else None
        self._head_samples = 0

    def _frame_shape(self) -> tuple:
        """(S*C, H, W) of an observation, channel first."""
        shape = self.obs_shape
        return tuple(shape) if self.channels_first else (shape[2], shape[0], shape[1])

    def _new_replay(self, capacity: int, seed: int, report: bool = True) -> _ObsaugReplayBuffer:
        """A native buffer of this buffer's layout (``report``: its memory logged and in
        ``memory_bytes`` before it is allocated; the native constructor refuses a
        capacity this machine cannot hold, ValueError with the sizes, before it
        allocates anything)."""
        _, h, w = self._frame_shape()
        if report:
            self.memory_bytes = self._memory_bytes(*self._frame_shape())
            log.info("obsaug.sb3.ReplayBuffer: %s", self.memory_report(h, w))
        return _ObsaugReplayBuffer(
            capacity, (self.frame_channels, h, w), self.frame_stack, (self.action_dim,),
            action_dtype=self._action_dtype, device=self.device, n_step=self.n_steps,
            gamma=self.gamma, seed=seed)

    def _engine(self, augment: Any) -> Any:
        """None, the given Engine (on SB3's device, checked) or one built from a config
        on SB3's device."""
        if augment is None:
            return None
        from . import Engine  # the native Engine exists only in full builds
        if isinstance(augment, Engine):
            if not same_device(augment.device, self.device):
                raise ValueError(f"augment's engine runs on {augment.device} but SB3's device is "
                                 f"{self.device}; give the engine config device: {self.device} "
                                 "(or pass the config: the buffer builds it on SB3's device)")
            return augment
        if not isinstance(augment, (str, os.PathLike, Mapping)):
            raise TypeError("augment must be None, an obsaug.Engine or an Engine config "
                            f"(preset name, YAML path or mapping), got {type(augment).__name__}")
        return Engine(_config_on(augment, self.device))

    # --- the device (SB3's load_replay_buffer sets it after loading) ----------------

    @property
    def device(self) -> torch.device:
        return self._device

    @device.setter
    def device(self, device: Union[torch.device, str]) -> None:
        """Moves the frames (and the engine) when they are elsewhere."""
        device = get_device(device)
        moved = "replay" in self.__dict__ and not same_device(self.replay.device, device)
        self._device = device
        if moved:
            self.replay = self._replay_on(self.replay, device)
            if self.engine is not None:
                engine = self.engine
                self.engine = type(engine)(_config_on(engine.config, device))
                self.engine.load_state_dict(engine.state_dict())
                if self._augment_config is not None:  # built here: this buffer's to close
                    engine.close()

    @staticmethod
    def _replay_on(replay: _ObsaugReplayBuffer, device: torch.device) -> _ObsaugReplayBuffer:
        with tempfile.TemporaryDirectory() as tmp:
            replay.save(tmp)
            return _ObsaugReplayBuffer.load(tmp, device=device)

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

    def _unstacked(self) -> None:
        """The guessed layout was wrong (the first add is no frame stack): one frame of
        all channels per observation, in a new (empty) native buffer."""
        k = self._frame_shape()[0]
        log.info("obsaug.sb3.ReplayBuffer: next_obs is not obs shifted by one frame of %d "
                 "channels, so the %d-channel observations are not stacked (no VecFrameStack): "
                 "storing each as one frame (frame_stack=1)", self.frame_channels, k)
        self.frame_stack, self.frame_channels = 1, k
        self.replay = self._new_replay(self.total_capacity, self._seed)

    def add(self, obs: np.ndarray, next_obs: np.ndarray, action: np.ndarray,
            reward: np.ndarray, done: np.ndarray, infos: List[Dict[str, Any]]) -> None:
        c = self.frame_channels
        cur, nxt = self._channels_first(obs), self._channels_first(next_obs)
        if self.frame_stack > 1 and not torch.equal(nxt[:, :-c], cur[:, c:]):
            if self._layout_guessed and self.replay.total_frames == 0:
                self._unstacked()
            else:
                raise ValueError(
                    f"next_obs is not obs shifted by one frame of {c} channels: the "
                    f"observation's {cur.shape[1]} channels are not {self.frame_stack} stacked "
                    f"frames of {c} (VecFrameStack, oldest first); pass frame_stack= (or "
                    "frame_channels=) in replay_buffer_kwargs: frame_stack=1 when the "
                    "observations are not stacked (no VecFrameStack)")
        done = np.asarray(done, dtype=bool).reshape(self.n_envs)
        timeout = np.array([bool(info.get("TimeLimit.truncated", False)) for info in infos],
                           dtype=bool) if self.handle_timeout_termination else np.zeros_like(done)
        step = (cur, nxt,
                torch.as_tensor(np.asarray(action).reshape(self.n_envs, self.action_dim),
                                dtype=self._action_dtype),
                torch.as_tensor(np.asarray(reward, dtype=np.float32).reshape(self.n_envs)),
                done & ~timeout, done & timeout)
        self._store(self.replay, self._open, self._last_next_obs, *step)
        if self._head is not None:  # kept until a transition has its n steps
            self._head = None if self.replay.num_valid else self._head + [
                tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in step)]
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True
            self.pos = 0

    def _store(self, replay: _ObsaugReplayBuffer, open_: np.ndarray, last_next: torch.Tensor,
               cur: torch.Tensor, nxt: torch.Tensor, action: torch.Tensor, reward: torch.Tensor,
               terminated: np.ndarray, truncated: np.ndarray) -> None:
        """One step of every env into ``replay``, with ``open_`` / ``last_next`` (the
        episode state of add's doc) updated in place."""
        c = self.frame_channels
        # An open episode whose obs is not the last next_obs was cut off by a reset without
        # done (a second learn(), learn() after a load): add_first closes it as truncated.
        cut = open_ & (cur != last_next).flatten(1).any(1).numpy()
        starting = np.flatnonzero(~open_ | cut)
        if starting.size:
            replay.add_first(cur[starting, -c:], env=starting.tolist())
        replay.add(action, reward, nxt[:, -c:], terminated=torch.from_numpy(terminated),
                   truncated=torch.from_numpy(truncated))
        open_[:] = ~(terminated | truncated)
        last_next.copy_(nxt)

    @property
    def dones(self) -> _EpisodeEnds:
        """Not an array: ``dones[pos] = True`` at the newest step ends the open episodes
        there (SB3 before a continued ``learn()`` with ``optimize_memory_usage``)."""
        return _EpisodeEnds(self)

    # --- sampling -----------------------------------------------------------------

    def _head_replay(self) -> _ObsaugReplayBuffer:
        """The steps stored so far, none of them with its n-step future yet, with every
        open episode ended at its newest step (a truncation, so the returns stop there
        and bootstrap: SB3's rule at its write head), in a small buffer of their own
        whose sampling seed follows this buffer's."""
        steps = self._head or []
        replay = self._new_replay((2 * len(steps) + 2) * self.n_envs,
                                  (self._seed + 1 + self._head_samples) % 2**64, report=False)
        self._head_samples += 1
        open_ = np.zeros(self.n_envs, dtype=bool)
        last_next = torch.zeros_like(self._last_next_obs)
        for step in steps:
            self._store(replay, open_, last_next, *step)
        ending = np.flatnonzero(open_)
        if ending.size:
            replay.add_first(last_next[ending, -self.frame_channels:], env=ending.tolist())
        return replay

    def sample(self, batch_size: int, env: Optional[Any] = None) -> ReplayBufferSamples:
        """``batch_size`` transitions (with replacement) as SB3's ReplayBufferSamples:
        observations / next_observations in the space's layout, actions ``[B, action_dim]``,
        dones (terminations only) and rewards ``[B, 1]``, discounts ``[B, 1]`` with n-step
        (truncated at the newest step until a transition has its n steps)."""
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
        replay = self.replay
        if self._head and not replay.num_valid:
            replay = self._head_replay()
        batch = replay.sample(batch_size, augment=self.engine,
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

    @property
    def num_valid(self) -> int:
        """Transitions that can be sampled now, over all envs (``size()`` is SB3's: steps
        per env)."""
        return self.replay.num_valid

    def reset(self) -> None:
        raise NotImplementedError("obsaug.sb3.ReplayBuffer cannot be emptied in place; make a "
                                  "new one")

    def __repr__(self) -> str:
        return (f"obsaug.sb3.ReplayBuffer(size={self.size()} steps per env of {self.n_envs} "
                f"envs, num_valid={self.num_valid} transitions, frames={len(self.replay)}, "
                f"frame_stack={self.frame_stack}, frame_channels={self.frame_channels}, "
                f"n_steps={self.n_steps}, device={str(self.device)!r})")

    # --- pickling (SB3's save_replay_buffer / load_replay_buffer) -------------------

    def __getstate__(self) -> Dict[str, Any]:
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
        blob, engine_state = state.pop("replay"), state.pop("engine")
        device = torch.device(state.pop("_device", None) or state.pop("device"))
        if not _available(device):  # pickled on a machine with that GPU
            warnings.warn(f"obsaug.sb3.ReplayBuffer: pickled on {device}, which this process "
                          "does not have: loading it onto the CPU (SB3's load_replay_buffer "
                          "then moves it to the model's device)", RuntimeWarning, stacklevel=2)
            device = torch.device("cpu")
        self.__dict__.update(state)
        self._device = device
        self.__dict__.setdefault("_head", None)      # pickled by versions without these
        self.__dict__.setdefault("_head_samples", 0)
        self.__dict__.setdefault("_layout_guessed", False)
        self.__dict__.setdefault("_seed", 0)
        if "_action_dtype" not in state:
            self._action_dtype = (torch.float32 if isinstance(self.action_space, spaces.Box)
                                  else torch.int64)
        if "_last_next_obs" not in state:  # pickled by a version that kept no next_obs:
            self._open[:] = False          # the next add starts new episodes
            self._last_next_obs = torch.zeros((self.n_envs, *self._frame_shape()),
                                              dtype=torch.uint8)
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "replay.obsaug"), "wb") as f:
                f.write(blob)
            self.replay = _ObsaugReplayBuffer.load(tmp, device=device)
        self.engine = None
        if engine_state is not None:
            self.engine = self._engine(self._augment_config)
            self.engine.load_state_dict(engine_state)
