#!/usr/bin/env python3
"""obsaug replay benchmark (DESIGN.md sections 5 and 9): one command, one run, one table.

Frames (3, 84, 84) uint8, frame stack S=3, action (6,) float32, episodes of 500
steps that end terminated, synthetic frames (random uint8, drawn from a bank
of 64 random frames). Each buffer is filled to --capacity slots (default
100_000), then timed side by side with the others of its phase.

Implementations (the baselines are written here from the published code's
behaviour, not imported):

  (a) obsaug.ReplayBuffer   frames stored once ([capacity, C, H, W] ring, per-slot
                            episode links), stacks rebuilt at sample time.
                            sample(B) uint8, and the fused sample(B, augment=engine)
                            with an obsaug.Engine doing [shift pad 4 replicate,
                            overlay alpha 0.5] on data/photos (pool 256, refresh
                            threads 0: a fixed pool).
  (b) DrQ-v2 storage        facebookresearch/drqv2 replay_buffer.py + dmc.py
                            FrameStackWrapper: every time step stores the *stacked*
                            observation [S*C, H, W] uint8 (plus action, reward,
                            discount); obs = step t, next_obs = step t+n, n-step
                            return summed at sample time (reward += disc * r;
                            disc *= discount * gamma). Written as preallocated torch
                            tensors [capacity, S*C, H, W] + index arithmetic over a
                            ring of time steps (an episode id per slot decides
                            validity): no episode .npz files, no DataLoader workers,
                            uniform over transitions (DrQ-v2 draws an episode, then a
                            step; equal here since every episode has 500 steps). The
                            stacked obs is handed to add() ready-made, as the env
                            wrapper gives it (its cost is not counted).
  (c) DMControl-GB          nicklashansen/dmcontrol-generalization-benchmark src/utils.py:
                            LazyFrames holds the list of the S frame arrays of the
                            FrameStack deque, so consecutive observations share their
                            frames; ReplayBuffer keeps (obs, next_obs) LazyFrames pairs
                            in a Python list, np.concatenate per sampled obs, np.array
                            over the batch, torch.as_tensor (kept uint8 on the CPU here:
                            the .cuda().float() of the original is left out for every
                            implementation). np.array(x, copy=False) of the original
                            is np.asarray under numpy 2. 1-step (no n-step). Each env
                            step's frame is a fresh array (the env's render output),
                            allocated before the timed adds.
  (d) TorchRL               torchrl ReplayBuffer(LazyTensorStorage or LazyMemmapStorage)
                            with the transform + SliceSampler from
                            CatFrames(N=S, dim=-3).make_rb_transform_and_sampler
                            (TorchRL's documented way to store single frames and stack
                            at sample time): each transition stores pixels and
                            ("next", "pixels") [C, H, W]; a sample draws B slices of S
                            steps and keeps the last step. 1-step. Single adds are
                            rb.add(td) of prebuilt TensorDicts (building them is not
                            counted), batched adds rb.extend(td[8]). Skipped with the
                            reason printed when torchrl / tensordict do not import.
  (e) sample-then-augment   (b)'s sample, then the same two ops in eager PyTorch on obs
                            and next_obs: DrQ-v2 style random shift (F.pad replicate 4,
                            then a per-sample crop at offsets 0..8 gathered from
                            unfold windows) and overlay (preloaded uint8 pool
                            [P, 3, 84, 84] = the engine's pool, one random image per
                            sample repeated over the S frames, float blend 0.5, back to
                            uint8; written with in-place ops and one float temporary,
                            so it is several times faster than DMControl-GB's verbatim
                            expression). The target: obsaug's fused sample >= 3x faster.

Measured:
  add/s        transitions per second of single-env add() on a full buffer (ring
               overwrite), including the add_first() calls at episode starts;
               add8/s: batched add of 8 envs (obsaug: add() with leading dim 8;
               TorchRL: extend() of 8) where the implementation has it.
  sample       batches/s and samples/s of sample(B) on the full buffer.
  bytes/trans  RSS delta: resident memory of the process after filling minus before
               constructing, over the slots filled (storage as allocated, including
               Python objects, allocator slack and page rounding); glibc's
               malloc_trim(0) runs before each 'before'. 'counted': tensor / numpy
               nbytes of the storage (obsaug: the size its docs give, C*H*W + 48 +
               action bytes, unless the buffer reports its own); for DMControl-GB
               the unique frame arrays' nbytes plus the per-slot arrays, and
               tracemalloc bytes per transition over a separate 2,000-transition
               fill (Python objects included) are printed below the table.

Method: buffers are filled one phase at a time (obsaug stays alive throughout;
DrQ-v2 and (e) share phase 1, then TorchRL, then DMControl-GB), so at most two
large buffers are resident. Within a phase every method is warmed up, its calls per
measurement are calibrated to --min-time, then --rounds rounds run every method once,
the order rotated per round; times are the median over rounds. obsaug's add and sample
are timed again in every phase and each baseline's ratio uses the obsaug timings of its
own phase; obsaug's row shows the median over all its rounds. TorchRL's sample takes
seconds per batch (CatFrames.unfolding builds pixel-sized masks), so it gets one call
per measurement and 2 rounds (1 with --quick). torch.set_num_threads (--threads,
default 1) for comparable numbers. The default run takes about 2.5 minutes on the
2-core VM, most of it filling ~15 GB of buffers (first-touch page faults).

Example:
  PYTHONPATH=python .venv/bin/python benchmarks/bench_replay.py            # < 3 min
  PYTHONPATH=python .venv/bin/python benchmarks/bench_replay.py --quick    # smoke
"""
from __future__ import annotations

import argparse
import collections
import ctypes
import gc
import os
import statistics
import sys
import time
import tracemalloc
import warnings
from typing import Dict, List, Optional

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
PHOTOS = os.path.join(ROOT, "data", "photos")

try:
    import obsaug
except ImportError:  # running from a checkout without PYTHONPATH=python
    sys.path.insert(0, os.path.join(ROOT, "python"))
    try:
        import obsaug
    except Exception as e:  # noqa: BLE001
        obsaug = None
        OBSAUG_ERR = f"import obsaug failed: {e}"
except Exception as e:  # noqa: BLE001
    obsaug = None
    OBSAUG_ERR = f"import obsaug failed: {e}"

import harness
from baselines import DMCGBReplayBuffer, DrQv2Storage, LazyFrames
from harness import Method, md_row, md_rule, print_md_table

FRAME = (3, 84, 84)
STACK = 3
ACTION = (6,)
EP_LEN = 500
PAD = 4
ALPHA = 0.5
BANK = 64
OBSAUG_OPS = [{"op": "shift", "pad": PAD, "padding": "replicate"}, {"op": "overlay", "alpha": ALPHA}]


# --------------------------------------------------------------------------
# Memory helpers
# --------------------------------------------------------------------------

try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:
    _LIBC = None


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settle() -> int:
    """Collect garbage, hand free heap back to the OS, return the RSS."""
    gc.collect()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    return rss_bytes()


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------

class Bank:
    """Random frames, stacked frames and actions the adds draw from (frame k is
    bank[k % BANK]); frames are random uint8, actions uniform in [-1, 1]."""

    def __init__(self, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.frames = torch.randint(0, 256, (BANK + 8, *FRAME), dtype=torch.uint8, generator=g)
        self.frames_np = self.frames.numpy()
        # stacked obs of step k: frames k-2, k-1, k (the env wrapper's output)
        idx = torch.arange(BANK + 8)
        st = torch.stack([(idx - STACK + 1 + s).clamp(min=0) for s in range(STACK)], 1)
        self.stacked = self.frames[st].reshape(BANK + 8, STACK * FRAME[0], *FRAME[1:]).contiguous()
        self.actions = torch.rand((BANK + 8, *ACTION), generator=g) * 2 - 1
        self.actions_np = self.actions.numpy()
        self.rewards = torch.rand(BANK + 8, generator=g).tolist()
        self.rewards8 = [torch.tensor(self.rewards[k:k + 8]) for k in range(BANK)]


class Driver:
    """Single-env episode bookkeeping shared by all implementations: episodes of
    EP_LEN transitions, the last one terminated, then a new episode."""

    def __init__(self):
        self.t = 0          # env steps taken (frame counter)
        self.ep_step = -1   # -1: the next call starts an episode


# --------------------------------------------------------------------------
# (a) obsaug.ReplayBuffer
# --------------------------------------------------------------------------

class ObsaugBuffer:
    name = "obsaug.ReplayBuffer"
    slot_on_first = True

    def __init__(self, capacity, n_step, gamma, seed, bank: Bank, device: str = "cpu"):
        self.bank = bank
        self.rb = obsaug.ReplayBuffer(capacity=capacity, frame_shape=FRAME, frame_stack=STACK,
                                      action_shape=ACTION, action_dtype=torch.float32,
                                      device=device, n_step=n_step, gamma=gamma,
                                      prioritized=False, seed=seed)
        self.capacity = capacity
        self.d = Driver()
        self.batched_ok: Optional[bool] = None
        self.batched_err = ""
        self.d8 = Driver()

    def _write_one(self) -> bool:
        """Writes the next frame: an episode's first (add_first, returns False) or a
        step (add, returns True)."""
        d, rb, b = self.d, self.rb, self.bank
        if d.ep_step < 0:
            rb.add_first(b.frames[d.t % BANK])
            d.t += 1
            d.ep_step = 0
            return False
        k = d.t % BANK
        d.ep_step += 1
        term = d.ep_step == EP_LEN
        rb.add(b.actions[k], b.rewards[k], b.frames[k], terminated=term)
        d.t += 1
        if term:
            d.ep_step = -1
        return True

    def steps(self, n: int) -> int:
        """n env steps (add_first at episode starts not counted); returns transitions."""
        done = 0
        while done < n:
            done += self._write_one()
        return n

    def fill(self, slots: int) -> None:
        for _ in range(slots):
            self._write_one()

    ENVS8 = list(range(1, 9))  # env 0 is the single-env driver's

    def steps8(self, n: int) -> int:
        """n batched steps of 8 envs (envs 1..8, lockstep episodes)."""
        d, rb, b, envs = self.d8, self.rb, self.bank, self.ENVS8
        for _ in range(n):
            k = d.t % BANK
            if d.ep_step < 0:
                rb.add_first(b.frames[k:k + 8], env=envs)
                d.t += 1
                d.ep_step = 0
                k = d.t % BANK
            d.ep_step += 1
            term = d.ep_step == EP_LEN
            rb.add(b.actions[k:k + 8], b.rewards8[k], b.frames[k:k + 8],
                   terminated=term, env=envs)
            d.t += 1
            if term:
                d.ep_step = -1
        return 8 * n

    def probe_batched(self) -> bool:
        try:
            self.steps8(1)
            self.batched_ok = True
        except Exception as e:  # noqa: BLE001
            self.batched_ok = False
            self.batched_err = f"{type(e).__name__}: {e}"
        return self.batched_ok

    def counted_bytes(self):
        """(bytes per slot, how): the frame storage tensor's nbytes (the buffer's
        `storage`) plus the documented host metadata (48 B) and the action."""
        meta = 48 + 4 * int(np.prod(ACTION))
        for obj in (self.rb, getattr(self.rb, "_native", None)):
            st = getattr(obj, "storage", None) if obj is not None else None
            st = st() if callable(st) else st
            if isinstance(st, torch.Tensor):
                return (st.numel() * st.element_size() / self.capacity + meta,
                        f"storage tensor {tuple(st.shape)} nbytes + 48 B host metadata + action "
                        f"({meta} B, docs/replay.md)")
        return (float(np.prod(FRAME) + meta), "docs formula C*H*W + 48 + action")

    def sample(self, batch: int):
        return self.rb.sample(batch)


# --------------------------------------------------------------------------
# (b) DrQ-v2 storage: stacked obs per time step, preallocated torch tensors
# --------------------------------------------------------------------------

class DrQv2Buffer(DrQv2Storage):
    """DrQ-v2's replay contents in preallocated torch tensors (see module doc;
    the storage is benchmarks/baselines.py's DrQv2Storage)."""
    name = "DrQ-v2 stacked (torch)"
    slot_on_first = True

    def __init__(self, capacity, n_step, gamma, seed, bank: Bank):
        self.bank = bank
        super().__init__(capacity, (STACK * FRAME[0], *FRAME[1:]), ACTION, n_step, gamma, seed)
        self.d = Driver()

    def steps(self, n: int) -> int:
        d, b = self.d, self.bank
        zero = np.zeros(ACTION, np.float32)
        for _ in range(n):
            if d.ep_step < 0:  # reset: action 0, reward 0, discount 1 (dm_env restart)
                self.add(b.stacked[d.t % BANK], zero, 0.0, 1.0, True)
                d.t += 1
                d.ep_step = 0
            k = d.t % BANK
            d.ep_step += 1
            term = d.ep_step == EP_LEN
            self.add(b.stacked[k], b.actions_np[k], b.rewards[k], 0.0 if term else 1.0, False)
            d.t += 1
            if term:
                d.ep_step = -1
        return n

    def fill(self, slots: int) -> None:
        """Bulk fill (vectorised writes of whole episodes; the per-step add() is what
        the add/s column times)."""
        b = self.bank
        while self.total < slots:
            n = min(EP_LEN + 1, slots - self.total)
            k = torch.arange(self.d.t, self.d.t + n) % BANK
            self.ep += 1
            s = self.total  # the fill never wraps (slots <= capacity)
            torch.index_select(b.stacked, 0, k, out=self.obs[s:s + n])
            self.action[s:s + n] = b.actions.index_select(0, k)
            self.action[s] = 0
            self.reward[s:s + n] = torch.tensor(b.rewards).index_select(0, k)
            self.reward[s] = 0
            self.discount[s:s + n] = 1.0
            if n == EP_LEN + 1:
                self.discount[s + n - 1] = 0.0
            self.episode[s:s + n] = self.ep
            self.total += n
            self.d.t += n
            self.d.ep_step = -1 if n == EP_LEN + 1 else n - 1

# --------------------------------------------------------------------------
# (c) DMControl-GB: LazyFrames in Python lists
# --------------------------------------------------------------------------

# LazyFrames and DMCGBReplayBuffer (src/utils.py) live in benchmarks/baselines.py.


class DMCGBBuffer:
    name = "DMControl-GB LazyFrames"
    slot_on_first = False

    def __init__(self, capacity, n_step, gamma, seed, bank: Bank):
        self.bank = bank
        self.capacity = capacity
        self.rb = DMCGBReplayBuffer(FRAME, ACTION, capacity, 256, seed)   # no prefill
        self.frames = collections.deque([], maxlen=STACK)   # FrameStack wrapper
        self.obs = None
        self.d = Driver()
        self.fresh: List[np.ndarray] = []

    def _frame(self, k):
        # the env renders a new array every step; prepared outside the timed region
        if self.fresh:
            return self.fresh.pop()
        return self.bank.frames_np[k].copy()

    def prepare(self, n_steps: int) -> None:
        b = self.bank.frames_np
        self.fresh = [b[i % BANK].copy() for i in range(n_steps + n_steps // EP_LEN + 2)]

    def steps(self, n: int) -> int:
        d, b, rb = self.d, self.bank, self.rb
        for _ in range(n):
            if d.ep_step < 0:                      # FrameStack.reset
                f = self._frame(d.t % BANK)
                for _ in range(STACK):
                    self.frames.append(f)
                self.obs = LazyFrames(list(self.frames))
                d.t += 1
                d.ep_step = 0
            k = d.t % BANK
            self.frames.append(self._frame(k))     # FrameStack.step
            next_obs = LazyFrames(list(self.frames))
            d.ep_step += 1
            done = d.ep_step == EP_LEN
            rb.add(self.obs, b.actions_np[k], b.rewards[k], next_obs, done)
            self.obs = next_obs
            d.t += 1
            if done:
                d.ep_step = -1
        return n

    def fill(self, slots: int) -> None:
        self.steps(slots)

    def counted_bytes(self) -> float:
        seen = set()
        nbytes = 0
        for pair in self.rb._obses:
            for lf in pair:
                for f in lf.frames:
                    if id(f) not in seen:
                        seen.add(id(f))
                        nbytes += f.nbytes
        nbytes += self.rb.actions.nbytes + self.rb.rewards.nbytes + self.rb.not_dones.nbytes
        return nbytes / self.capacity

    def sample(self, batch: int):
        return self.rb.sample(batch)


def dmcgb_tracemalloc_bytes(bank: Bank, n: int = 2000) -> float:
    """tracemalloc bytes per transition of a DMControl-GB fill of n transitions
    (numpy data and every Python object), capacity n."""
    settle()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    buf = DMCGBBuffer(n, 1, 0.99, 0, bank)
    buf.fill(n)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del buf
    return used / n


# --------------------------------------------------------------------------
# (d) TorchRL ReplayBuffer + CatFrames
# --------------------------------------------------------------------------

def torchrl_status():
    """(ok, message): whether torchrl + tensordict import and the pieces exist."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import tensordict  # noqa: F401
            import torchrl  # noqa: F401
            from torchrl.data import ReplayBuffer, LazyTensorStorage, LazyMemmapStorage  # noqa: F401
            from torchrl.envs import CatFrames  # noqa: F401
        ext = "C++ extension loaded"
        try:
            import torchrl._torchrl  # noqa: F401
        except Exception as e:  # noqa: BLE001
            ext = (f"C++ extension torchrl._torchrl does not load ({str(e).splitlines()[0][:90]}...; "
                   f"only prioritized samplers need it)")
        return True, (f"torchrl {torchrl.__version__}, tensordict {tensordict.__version__}; {ext}")
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"


class TorchRLBuffer:
    name = "TorchRL CatFrames"
    slot_on_first = False

    def __init__(self, capacity, n_step, gamma, seed, bank: Bank, batch: int,
                 storage: str = "tensor", scratch: Optional[str] = None):
        import logging
        from tensordict import TensorDict
        from torchrl.data import ReplayBuffer, LazyTensorStorage, LazyMemmapStorage
        from torchrl.envs import CatFrames
        logging.getLogger("torchrl").setLevel(logging.WARNING)
        self.TensorDict = TensorDict
        self.bank = bank
        self.capacity = capacity
        torch.manual_seed(seed)
        cat = CatFrames(N=STACK, dim=-3, in_keys=["pixels"], out_keys=["pixels_stack"],
                        reset_key="_reset", done_key="done")
        transform, sampler = cat.make_rb_transform_and_sampler(batch_size=batch,
                                                               end_key=("next", "done"))
        if storage == "memmap":
            st = LazyMemmapStorage(capacity, scratch_dir=scratch)
            self.name = "TorchRL CatFrames (memmap)"
        else:
            st = LazyTensorStorage(capacity)
        self.rb = ReplayBuffer(storage=st, sampler=sampler, transform=transform,
                               batch_size=batch)
        self.batch = batch
        self.d = Driver()
        self.prepared: List = []
        self.prepared8: List = []

    def _episode_td(self, t0: int, n: int, done_last: bool):
        b = self.bank
        t = torch.arange(t0, t0 + n + 1)
        k = t % BANK
        done = torch.zeros(n, 1, dtype=torch.bool)
        if done_last:
            done[-1] = True
        return self.TensorDict({
            "pixels": b.frames.index_select(0, k[:-1]), "action": b.actions.index_select(0, k[1:]),
            "next": self.TensorDict({
                "pixels": b.frames.index_select(0, k[1:]),
                "reward": torch.tensor(b.rewards)[k[1:]].unsqueeze(-1),
                "done": done, "terminated": done.clone(),
                "truncated": torch.zeros_like(done)}, batch_size=[n]),
        }, batch_size=[n])

    def fill(self, slots: int) -> None:
        """Episode-sized extend() calls (as a collector hands over trajectories)."""
        written = 0
        while written < slots:
            n = min(EP_LEN, slots - written)
            self.rb.extend(self._episode_td(self.d.t, n, n == EP_LEN))
            self.d.t += n + 1
            written += n

    def prepare(self, n_steps: int) -> None:
        tds = []
        d = Driver()
        d.t, d.ep_step = self.d.t, -1
        while len(tds) < n_steps:
            if d.ep_step < 0:
                d.t += 1
                d.ep_step = 0
            d.ep_step += 1
            done = d.ep_step == EP_LEN
            tds.append(self._episode_td(d.t - 1, 1, done)[0])
            d.t += 1
            if done:
                d.ep_step = -1
        self.prepared = tds
        self.prepared.reverse()

    def steps(self, n: int) -> int:
        for _ in range(n):
            self.rb.add(self.prepared.pop() if self.prepared else
                        self._episode_td(self.d.t, 1, False)[0])
        return n

    def prepare8(self, n_calls: int) -> None:
        self.prepared8 = [self._episode_td(i * 8, 8, False) for i in range(n_calls)]

    def steps8(self, n: int) -> int:
        for _ in range(n):
            self.rb.extend(self.prepared8.pop() if self.prepared8 else
                           self._episode_td(0, 8, False))
        return 8 * n

    def counted_bytes(self) -> float:
        st = self.rb.storage._storage
        return float(sum(v.numel() * v.element_size()
                         for v in st.values(include_nested=True, leaves_only=True))) / self.capacity

    def sample(self, batch: int):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # CatFrames' "mark the time dim" warning
            return self.rb.sample()


# --------------------------------------------------------------------------
# (e) eager PyTorch augmentation after sampling
# --------------------------------------------------------------------------

def eager_shift(x: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """DrQ-v2 style random shift: replicate-pad, then one crop per sample at
    offsets 0..2*pad (all 9 shifts), gathered from unfold windows."""
    n, c, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="replicate")
    oy = torch.randint(0, 2 * pad + 1, (n,), device=x.device)
    ox = torch.randint(0, 2 * pad + 1, (n,), device=x.device)
    windows = padded.unfold(2, h, 1).unfold(3, w, 1)        # [n, c, 2p+1, 2p+1, h, w]
    return windows[torch.arange(n, device=x.device), :, oy, ox]  # [n, c, h, w]


def eager_overlay(x: torch.Tensor, pool: torch.Tensor, alpha: float = ALPHA) -> torch.Tensor:
    """DMControl-GB random_overlay with a preloaded uint8 pool [P, C, H, W]: one
    random pool image per sample, shared by its S frames, float blend, back to
    uint8 (truncating). DMControl-GB's ((1-a)*(x/255) + a*img/255)*255 with
    repeat() is written here with one float temporary, in-place ops and a
    broadcast instead of repeat (the same result up to float rounding, about 10x
    faster on the CPU than the verbatim form), so the baseline is not handicapped."""
    b, sc, h, w = x.shape
    c = pool.size(1)
    idx = torch.randint(0, pool.size(0), (b,), device=pool.device)
    imgs = pool.index_select(0, idx).float().unsqueeze(1)       # [B, 1, C, H, W]
    out = x.float().view(b, sc // c, c, h, w)
    out.mul_(1 - alpha).add_(imgs, alpha=alpha)
    return out.view(b, sc, h, w).to(torch.uint8)


def eager_augment(x: torch.Tensor, pool: torch.Tensor) -> torch.Tensor:
    return eager_overlay(eager_shift(x), pool)


# --------------------------------------------------------------------------
# Timing (benchmarks/harness.py, without autograd)
# --------------------------------------------------------------------------

def run_phase(methods: List[Method], rounds: int, warmup: int, min_time: float) -> None:
    with torch.no_grad():
        harness.run_rounds(methods, rounds, None, warmup, min_time)


# --------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------

def check_stacks(obs: torch.Tensor, next_obs: torch.Tensor, label: str) -> None:
    """1-step buffers: next_obs's first S-1 frames are obs's last S-1 frames."""
    c = FRAME[0]
    assert obs.shape[1:] == (STACK * c, *FRAME[1:]) and obs.dtype == torch.uint8, (label, obs.shape)
    assert next_obs.shape == obs.shape, (label, next_obs.shape)
    assert torch.equal(next_obs[:, :(STACK - 1) * c], obs[:, c:]), f"{label}: stacks do not chain"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def mem_available_gb() -> Optional[float]:
    try:
        with open("/proc/meminfo") as f:
            mi = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in f}
        return mi.get("MemAvailable", 0) / 1e9
    except OSError:
        return None


def make_engine(seed: int, pool: int, device: str = "cpu"):
    cfg = {"seed": seed, "device": device,
           "frames": {"stack": STACK, "channels": FRAME[0], "height": FRAME[1], "width": FRAME[2]},
           "pipeline": OBSAUG_OPS,
           "pool": {"size": pool, "sources": [PHOTOS], "refresh": {"threads": 0}},
           "output": {"dtype": "uint8"}}
    return obsaug.Engine(cfg)


def run_on_gpu(args, env: Dict, rounds: int, min_time: float) -> int:
    """--device cuda: obsaug's buffer and Engine on the GPU, its fused
    sample(B, augment=engine) (obs and next_obs gathered and augmented in one
    pass), against what an agent on a GPU does with DrQ-v2's replay: sample the
    CPU storage (b), copy the batch to the GPU (pageable memory, synchronous:
    DrQ-v2's DataLoader pins in worker threads, left out here), then (e)'s
    eager shift + overlay there on the same pool. Timed with CUDA events."""
    if obsaug is None or not hasattr(obsaug, "ReplayBuffer") or not hasattr(obsaug, "Engine"):
        print(f"GPU phase skipped: {OBSAUG_ERR if obsaug is None else 'no ReplayBuffer or Engine in this build'}")
        return 1
    if not os.path.isdir(PHOTOS):
        print(f"GPU phase skipped: {PHOTOS} is missing (scripts/fetch_photos.sh)")
        return 1
    device = harness.usable_device(args.device, obsaug, select=True)
    if device is None:
        return 1
    B, cap = args.batch, args.capacity
    bank = Bank(args.seed)
    engine = make_engine(args.seed, args.pool, str(device))
    pool = engine.pool_images
    assert pool.device == device, (pool.device, device)
    t0 = time.perf_counter()
    ob = ObsaugBuffer(cap, args.n_step, args.gamma, args.seed, bank, device=str(device))
    ob.fill(cap)
    drq = DrQv2Buffer(cap, args.n_step, args.gamma, args.seed, bank)
    drq.fill(cap)
    print(f"GPU phase on {device}: both buffers filled ({cap:,} slots) in "
          f"{time.perf_counter() - t0:.1f} s")
    s = ob.rb.sample(B, augment=engine)
    assert s["obs"].device == device and s["obs"].shape == (B, STACK * FRAME[0], *FRAME[1:])

    def drqv2_copy():
        b = drq.sample(B)
        return b["obs"].to(device), b["next_obs"].to(device)

    def drqv2_copy_augment():
        obs, next_obs = drqv2_copy()
        return eager_augment(obs, pool), eager_augment(next_obs, pool)

    methods = [Method("obsaug sample(B, augment=engine), CUDA buffer",
                      lambda: ob.rb.sample(B, augment=engine)),
               Method("obsaug sample(B), CUDA buffer", lambda: ob.rb.sample(B)),
               Method("DrQ-v2 sample, .to(cuda), eager shift + overlay", drqv2_copy_augment),
               Method("DrQ-v2 sample, .to(cuda)", drqv2_copy)]
    with torch.no_grad():
        harness.run_rounds(methods, rounds, device, args.warmup, min_time)
    fused = harness.median(methods[0])
    rows = [{"method": m.key, "ms": harness.median(m) * 1e3,
             "iqr": harness.iqr(m.times) / harness.median(m),  # of the median
             "x_obsaug_fused": harness.median(m) / fused} for m in methods]
    print(f"\nbatch {B}, capacity {cap:,}, n-step {args.n_step}, pool {args.pool}, "
          f"{rounds} rounds; ms per call (obs and next_obs), x = time / obsaug's fused sample\n")
    print_md_table(["method", "ms", "iqr", "x obsaug fused"], "lrrr",
                   [[r["method"], f"{r['ms']:.3f}", f"{r['iqr']:.0%}", f"{r['x_obsaug_fused']:.2f}x"]
                    for r in rows])
    if args.json:
        harness.write_json(args.json, {"environment": env, "device": str(device), "rows": rows})
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capacity", type=int, default=100_000, help="slots per buffer")
    p.add_argument("--batch", type=int, default=256, help="sample batch size B")
    p.add_argument("--n-step", type=int, default=3,
                   help="n-step return of obsaug and DrQ-v2 (DrQ-v2's default 3); "
                        "DMControl-GB and TorchRL+CatFrames are 1-step as published")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--pool", type=int, default=256, help="distractor pool size P")
    p.add_argument("--rounds", type=int, default=None, help="rounds per phase (default 5, quick 2)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--min-time", type=float, default=None,
                   help="seconds per measurement (default 0.15, quick 0.03)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--device", default="cpu",
                   help="cuda: only the GPU phase (see run_on_gpu), instead of phases 1-3")
    p.add_argument("--torchrl", choices=["auto", "off"], default="auto")
    p.add_argument("--torchrl-storage", choices=["tensor", "memmap"], default="tensor",
                   help="LazyTensorStorage (default) or LazyMemmapStorage (files in --scratch)")
    p.add_argument("--scratch", default=None, help="LazyMemmapStorage directory (default: a temp dir)")
    args = harness.parse_args(p, argv,
                              quick_help="smoke run: capacity 5000, 2 rounds, short measurements")

    if args.quick:
        if args.capacity == 100_000:
            args.capacity = 5000
        rounds = args.rounds or 2
        min_time = args.min_time or 0.03
    else:
        rounds = args.rounds or 5
        min_time = args.min_time or 0.15
    if args.capacity < 2 * EP_LEN + 2 or args.capacity <= args.batch:
        raise SystemExit(f"--capacity {args.capacity}: needs > 2 episodes ({2 * EP_LEN + 2}) "
                         f"and more than --batch slots")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    B, cap = args.batch, args.capacity
    stacked_bytes = STACK * int(np.prod(FRAME))

    env = harness.environment(numpy=np.__version__, mem_available_GB=mem_available_gb())
    harness.print_header(env)
    if torch.device(args.device).type == "cuda":
        return run_on_gpu(args, env, rounds, min_time)
    print(f"numpy {env['numpy']}, MemAvailable {env['mem_available_GB']:.1f} GB")
    print(f"frames {FRAME} uint8, stack {STACK}, action {ACTION} float32, episodes of {EP_LEN} "
          f"(terminated), capacity {cap:,}, batch {B}, n-step {args.n_step} (obsaug, DrQ-v2), "
          f"gamma {args.gamma}; rounds {rounds}, min-time {min_time}s per measurement")

    # ---- what can run -------------------------------------------------------------
    skipped: Dict[str, str] = {}
    have_rb = obsaug is not None and hasattr(obsaug, "ReplayBuffer")
    if obsaug is None:
        skipped["obsaug"] = OBSAUG_ERR
    elif not have_rb:
        skipped["obsaug"] = ("obsaug.ReplayBuffer does not exist in this build "
                             f"({obsaug.__file__}): obsaug rows and both targets skipped")
    have_engine = have_rb and hasattr(obsaug, "Engine") and os.path.isdir(PHOTOS)
    if have_rb and not have_engine:
        skipped["fused"] = ("no obsaug.Engine (built without the pool / yaml-cpp) or "
                            f"{PHOTOS} missing: fused sample skipped")
    if args.torchrl == "off":
        trl_ok, trl_msg = False, "--torchrl off"
    else:
        trl_ok, trl_msg = torchrl_status()
    print(f"obsaug: {'ReplayBuffer present' if have_rb else skipped['obsaug']}"
          f"{'' if not have_rb else ', Engine ' + ('present' if have_engine else 'absent')}")
    print(f"TorchRL: {trl_msg}" + ("" if trl_ok else "  -> TorchRL row skipped"))
    print()

    bank = Bank(args.seed)
    engine = make_engine(args.seed, args.pool) if have_engine else None
    pool = engine.pool_images if engine is not None else \
        torch.randint(0, 256, (args.pool, *FRAME), dtype=torch.uint8)
    if pool.device.type != "cpu":
        pool = pool.cpu()

    # Warm-up outside the memory measurements (lazy library initialisation would
    # otherwise land in the first buffer's RSS delta).
    if have_rb:
        w = obsaug.ReplayBuffer(capacity=64, frame_shape=FRAME, frame_stack=STACK, action_shape=ACTION,
                                n_step=args.n_step, gamma=args.gamma, seed=args.seed)
        w.add_first(bank.frames[0])
        for k in range(1, 20):
            w.add(bank.actions[k], 0.0, bank.frames[k])
        w.sample(8)
        if engine is not None:
            w.sample(8, augment=engine)
        del w
    eager_augment(bank.stacked[:8], pool)
    settle()

    results: Dict[str, Dict] = {}
    obsaug_methods: Dict[str, List[Method]] = {"add": [], "add8": [], "sample": []}
    t_start = time.perf_counter()

    def build(cls, label, *a, **kw):
        before = settle()
        t0 = time.perf_counter()
        buf = cls(cap, args.n_step, args.gamma, args.seed, bank, *a, **kw)
        buf.fill(cap)
        fill_s = time.perf_counter() - t0
        after = settle()
        r = {"name": buf.name, "rss_bytes_per_slot": (after - before) / cap,
             "fill_s": fill_s}
        print(f"  filled {label}: {cap:,} slots in {fill_s:.1f} s, RSS +{(after - before) / 1e9:.2f} GB")
        return buf, r

    ADD_CHUNK = 100  # transitions per timed add call (single env)

    def obsaug_phase_methods(ob: ObsaugBuffer, phase: str) -> List[Method]:
        ms = [Method(f"obsaug_add_{phase}", lambda: ob.steps(ADD_CHUNK), units=ADD_CHUNK),
              Method(f"obsaug_sample_{phase}", lambda: ob.sample(B), units=B)]
        if ob.batched_ok:
            ms.append(Method(f"obsaug_add8_{phase}", lambda: ob.steps8(ADD_CHUNK // 8),
                             units=8 * (ADD_CHUNK // 8)))
        obsaug_methods["add"].append(ms[0])
        obsaug_methods["sample"].append(ms[1])
        if ob.batched_ok:
            obsaug_methods["add8"].append(ms[2])
        return ms

    # ---- phase 1: obsaug + DrQ-v2 + (e) ----------------------------------------------
    print("phase 1: obsaug.ReplayBuffer, DrQ-v2 stacked storage, sample-then-augment")
    ob = None
    if have_rb:
        ob, results["obsaug"] = build(ObsaugBuffer, "obsaug.ReplayBuffer")
        results["obsaug"]["counted_bytes"], results["obsaug"]["counted_how"] = ob.counted_bytes()
        if not ob.probe_batched():
            print(f"  obsaug batched add (8 envs) not supported: {ob.batched_err}")
        s = ob.sample(B)
        assert s["obs"].shape == (B, STACK * FRAME[0], *FRAME[1:]) and s["obs"].dtype == torch.uint8
        if args.n_step == 1:
            check_stacks(s["obs"], s["next_obs"], "obsaug")
        if engine is not None:
            s = ob.rb.sample(B, augment=engine)
            assert s["obs"].shape == (B, STACK * FRAME[0], *FRAME[1:]) and s["obs"].dtype == torch.uint8
    drq, results["drqv2"] = build(DrQv2Buffer, "DrQ-v2")
    results["drqv2"]["counted_bytes"] = drq.counted_bytes()
    results["drqv2"]["counted_how"] = "tensor nbytes"
    s = drq.sample(B)
    assert s["obs"].shape == (B, STACK * FRAME[0], *FRAME[1:])
    assert eager_augment(s["obs"], pool).shape == s["obs"].shape

    m_drq_add = Method("drqv2_add", lambda: drq.steps(ADD_CHUNK), units=ADD_CHUNK)
    m_drq_sample = Method("drqv2_sample", lambda: drq.sample(B), units=B)

    def sample_then_augment():
        b = drq.sample(B)
        b["obs"] = eager_augment(b["obs"], pool)
        b["next_obs"] = eager_augment(b["next_obs"], pool)
        return b

    m_e = Method("sample_then_augment", sample_then_augment, units=B)
    methods = [m_drq_add, m_drq_sample, m_e]
    m_fused = m_unfused = None
    if ob is not None:
        methods += obsaug_phase_methods(ob, "p1")
        if engine is not None:
            m_fused = Method("obsaug_fused", lambda: ob.rb.sample(B, augment=engine), units=B)

            def unfused():
                b = ob.rb.sample(B)
                b["obs"] = engine.augment(b["obs"])
                b["next_obs"] = engine.augment(b["next_obs"])
                return b

            m_unfused = Method("obsaug_unfused", unfused, units=B)
            methods += [m_fused, m_unfused]
    run_phase(methods, rounds, args.warmup, min_time)
    results["drqv2"].update(add=m_drq_add, sample=m_drq_sample,
                            obsaug_add=methods[3] if ob else None,
                            obsaug_sample=methods[4] if ob else None)
    results["drqv2"]["sample_then_augment"] = m_e
    del drq, s, methods, m_drq_add, m_drq_sample
    m_e.fn = None
    print(f"  phase 1 done ({time.perf_counter() - t_start:.0f} s)")

    # ---- phase 2: TorchRL ------------------------------------------------------------
    if trl_ok:
        print("phase 2: TorchRL ReplayBuffer + CatFrames")
        scratch = None
        if args.torchrl_storage == "memmap":
            import tempfile
            scratch = args.scratch or tempfile.mkdtemp(prefix="bench_replay_memmap_")
        try:
            trl, results["torchrl"] = build(TorchRLBuffer, "TorchRL", B,
                                            storage=args.torchrl_storage, scratch=scratch)
            results["torchrl"]["name"] = trl.name
            results["torchrl"]["counted_bytes"] = trl.counted_bytes()
            results["torchrl"]["counted_how"] = "tensor nbytes"
            s = trl.sample(B)
            check_stacks(s["pixels_stack"], s["next", "pixels_stack"], "TorchRL")
            del s
            # a sample takes seconds here: one call per measurement, at most 2 rounds
            # (1 with --quick), no warm-up beyond the checked call above
            m_add = Method("torchrl_add", lambda: trl.steps(ADD_CHUNK), units=ADD_CHUNK,
                           prepare=lambda it: trl.prepare(it * ADD_CHUNK), max_iters=20)
            m_sample = Method("torchrl_sample", lambda: trl.sample(B), units=B, fixed_iters=1,
                              max_rounds=1 if args.quick else 2)
            methods = [m_sample]
            m_ob_sample = m_ob_add = m_ob_add8 = None
            if ob is not None:
                m_ob_sample = Method("obsaug_sample_p2", lambda: ob.sample(B), units=B)
                obsaug_methods["sample"].append(m_ob_sample)
                methods.append(m_ob_sample)
            run_phase(methods, rounds, 1, min_time)
            # adds last: they write single transitions / 8-env batches that break the
            # trajectory layout SliceSampler expects
            m_add8 = Method("torchrl_add8", lambda: trl.steps8(ADD_CHUNK // 8),
                            units=8 * (ADD_CHUNK // 8),
                            prepare=lambda it: trl.prepare8(it * (ADD_CHUNK // 8)), max_iters=20)
            methods2 = [m_add, m_add8]
            if ob is not None:
                m_ob_add = Method("obsaug_add_p2", lambda: ob.steps(ADD_CHUNK), units=ADD_CHUNK)
                obsaug_methods["add"].append(m_ob_add)
                methods2.append(m_ob_add)
                if ob.batched_ok:
                    m_ob_add8 = Method("obsaug_add8_p2", lambda: ob.steps8(ADD_CHUNK // 8),
                                       units=8 * (ADD_CHUNK // 8))
                    obsaug_methods["add8"].append(m_ob_add8)
                    methods2.append(m_ob_add8)
            run_phase(methods2, rounds, args.warmup, min_time)
            results["torchrl"].update(add=m_add, add8=m_add8, sample=m_sample,
                                      obsaug_add=m_ob_add, obsaug_sample=m_ob_sample)
            del trl, methods, methods2
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc()
            skipped["torchrl"] = f"TorchRL failed at run time: {type(e).__name__}: {e}"
            results.pop("torchrl", None)
            print(f"  {skipped['torchrl']}")
        if scratch and not args.scratch:
            import shutil
            shutil.rmtree(scratch, ignore_errors=True)
        print(f"  phase 2 done ({time.perf_counter() - t_start:.0f} s)")
    else:
        skipped["torchrl"] = trl_msg

    # ---- phase 3: DMControl-GB ---------------------------------------------------------
    print("phase 3: DMControl-GB LazyFrames")
    dm, results["dmcgb"] = build(DMCGBBuffer, "DMControl-GB")
    results["dmcgb"]["counted_bytes"] = dm.counted_bytes()
    results["dmcgb"]["counted_how"] = "unique frame nbytes + per-slot arrays"
    s = dm.sample(B)
    check_stacks(s[0], s[3], "DMControl-GB")
    del s
    m_add = Method("dmcgb_add", lambda: dm.steps(ADD_CHUNK), units=ADD_CHUNK,
                   prepare=lambda it: dm.prepare(it * ADD_CHUNK), max_iters=200)
    m_sample = Method("dmcgb_sample", lambda: dm.sample(B), units=B)
    methods = [m_add, m_sample]
    if ob is not None:
        methods += obsaug_phase_methods(ob, "p3")[:2]
    run_phase(methods, rounds, args.warmup, min_time)
    results["dmcgb"].update(add=m_add, sample=m_sample,
                            obsaug_add=methods[2] if ob else None,
                            obsaug_sample=methods[3] if ob else None)
    del dm, methods
    settle()
    tm = dmcgb_tracemalloc_bytes(bank)
    results["dmcgb"]["tracemalloc_bytes"] = tm
    print(f"  phase 3 done ({time.perf_counter() - t_start:.0f} s)\n")

    # ---- table ---------------------------------------------------------------------
    def all_times(ms: List[Method]) -> Optional[float]:
        ts = [t for m in ms for t in m.times]
        return statistics.median(ts) if ts else None

    if ob is not None:
        results["obsaug"]["t_add"] = all_times(obsaug_methods["add"])
        results["obsaug"]["t_add8"] = all_times(obsaug_methods["add8"])
        results["obsaug"]["t_sample"] = all_times(obsaug_methods["sample"])
    for key in ("drqv2", "torchrl", "dmcgb"):
        if key in results:
            r = results[key]
            r["t_add"], r["t_sample"] = harness.median(r.get("add")), harness.median(r.get("sample"))
            r["t_add8"] = harness.median(r.get("add8"))
            r["obsaug_t_add"], r["obsaug_t_sample"] = harness.median(r.get("obsaug_add")), harness.median(r.get("obsaug_sample"))

    ob_bytes = results["obsaug"]["rss_bytes_per_slot"] if ob is not None else None
    rows = []

    def row(key, label, r, t_add, t_add8, t_sample, units_add, units_add8, s_ratio, m_ratio, counted):
        rows.append({
            "key": key, "implementation": label,
            "bytes_per_transition_rss": r["rss_bytes_per_slot"] if r else None,
            "bytes_per_transition_counted": counted,
            "add_per_s": units_add / t_add if t_add else None,
            "add8_per_s": units_add8 / t_add8 if t_add8 else None,
            "sample_batches_per_s": 1 / t_sample if t_sample else None,
            "samples_per_s": B / t_sample if t_sample else None,
            "obsaug_sample_speedup": s_ratio, "memory_x_obsaug": m_ratio,
        })

    n8 = 8 * (ADD_CHUNK // 8)
    if ob is not None:
        r = results["obsaug"]
        row("obsaug", "(a) obsaug.ReplayBuffer", r, r["t_add"], r["t_add8"], r["t_sample"],
            ADD_CHUNK, n8, 1.0, 1.0, r["counted_bytes"])
    for key, label in (("drqv2", "(b) DrQ-v2 stacked, torch"), ("dmcgb", "(c) DMControl-GB LazyFrames"),
                       ("torchrl", "(d) " + results.get("torchrl", {}).get("name", "TorchRL"))):
        if key not in results:
            continue
        r = results[key]
        sr = (r["t_sample"] / r["obsaug_t_sample"]) if (r["t_sample"] and r["obsaug_t_sample"]) else None
        mr = (r["rss_bytes_per_slot"] / ob_bytes) if ob_bytes else None
        row(key, label, r, r["t_add"], r["t_add8"], r["t_sample"], ADD_CHUNK, n8, sr, mr, r["counted_bytes"])
    order = {"obsaug": 0, "drqv2": 1, "dmcgb": 2, "torchrl": 3}
    rows.sort(key=lambda x: order[x["key"]])

    def f(v, spec, empty="n/a"):
        return empty if v is None else format(v, spec)

    print(f"Replay buffers: capacity {cap:,}, B={B}, threads {args.threads}; medians over {rounds} rounds. "
          f"bytes/transition = RSS delta / slots (counted = storage nbytes / slots).")
    print("'obsaug x faster' = t_sample(impl) / t_sample(obsaug, same phase); "
          "'memory x obsaug' = RSS bytes(impl) / RSS bytes(obsaug).\n")
    print_md_table(["implementation", "bytes/transition (RSS)", "counted", "add/s (1 env)",
                    "add/s (8 envs)", "sample batches/s", "samples/s", "obsaug x faster (sample)",
                    "memory x obsaug"], "l" + "r" * 8,
                   ([x['implementation'], f(x['bytes_per_transition_rss'], ',.0f'),
                     f(x['bytes_per_transition_counted'], ',.0f'), f(x['add_per_s'], ',.0f'),
                     f(x['add8_per_s'], ',.0f'), f(x['sample_batches_per_s'], ',.2f'),
                     f(x['samples_per_s'], ',.0f'), f(x['obsaug_sample_speedup'], '.2f'),
                     f(x['memory_x_obsaug'], '.2f')] for x in rows))

    # sample + augment rows
    t_e = harness.median(m_e)
    t_fused, t_unfused = harness.median(m_fused), harness.median(m_unfused)
    print(f"\nSample + augment (B={B}, obs and next_obs, [shift pad {PAD} replicate, overlay {ALPHA}], "
          f"uint8 out; phase 1):\n")
    print(md_row(["method", "ms/batch", "batches/s", "samples/s", "fused x faster"]))
    print(md_rule("lrrrr"))
    for label, t in (("(a) obsaug sample(B, augment=engine), fused", t_fused),
                     ("(a) obsaug sample(B) + engine.augment x2, unfused", t_unfused),
                     ("(e) DrQ-v2 sample + eager PyTorch shift+overlay", t_e)):
        if t is None:
            print(f"| {label} | skipped | | | |")
            continue
        ratio = f"{t / t_fused:.2f}" if t_fused else "n/a"
        print(md_row([label, f"{t * 1e3:.2f}", f"{1 / t:,.2f}", f"{B / t:,.0f}", ratio]))

    # notes
    print()
    if "dmcgb" in results:
        print(f"DMControl-GB tracemalloc: {results['dmcgb']['tracemalloc_bytes']:,.0f} bytes/transition "
              f"(2,000-transition fill, numpy data + Python objects).")
    if ob is not None:
        print(f"obsaug counted bytes: {results['obsaug']['counted_how']}.")
    if ob is not None and not ob.batched_ok:
        print(f"obsaug batched add: not supported ({ob.batched_err}).")
    print("add/s (8 envs): n/a where the published design has one env per buffer (DrQ-v2, DMControl-GB).")
    for k, v in skipped.items():
        print(f"skipped {k}: {v}")

    # targets
    print("\nTargets:")
    ok_all = True
    if ob is not None:
        ob_b = results["obsaug"]["rss_bytes_per_slot"]
        st_b = results["drqv2"]["rss_bytes_per_slot"]
        const = 128
        limit = st_b / STACK + const
        ok = ob_b <= limit
        ok_all &= ok
        print(f"  memory: obsaug {ob_b:,.0f} B/transition vs DrQ-v2 stacked {st_b:,.0f} "
              f"(ratio {ob_b / st_b:.3f}, 1/S = {1 / STACK:.3f}; analytic stacked S*C*H*W = "
              f"{stacked_bytes:,}); target <= stacked/S + {const} B = {limit:,.0f}: "
              f"{'PASS' if ok else 'FAIL'}")
    else:
        print("  memory: skipped (no obsaug.ReplayBuffer)")
    if t_fused and t_e:
        ratio = t_e / t_fused
        ok = ratio >= 3.0
        ok_all &= ok
        print(f"  fused: obsaug sample(B, augment=engine) {t_fused * 1e3:.2f} ms vs sample-then-augment "
              f"{t_e * 1e3:.2f} ms: {ratio:.2f}x (target >= 3x): {'PASS' if ok else 'FAIL'}")
    else:
        print("  fused: skipped (" + (skipped.get("obsaug") or skipped.get("fused") or "?") + ")")
    print(f"\n(wall time {time.perf_counter() - t_start:.0f} s)")

    if args.json:
        harness.write_json(args.json, {"environment": env, "skipped": skipped, "rows": rows,
                               "sample_augment": {"fused_s": t_fused, "unfused_s": t_unfused,
                                                  "eager_s": t_e}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
