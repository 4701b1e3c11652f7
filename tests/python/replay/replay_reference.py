"""A naive pure-Python reference of the replay buffer in docs/replay.md.

Written from the document only (not from the C++), to be obviously correct
rather than fast: every frame keeps its *logical* index t (0, 1, 2, ... over
the buffer's life) and lives in slot ``t % capacity``; episode links, flags,
actions and rewards are kept per logical index in plain dicts (never
forgotten), and the ring is modelled by ``owner[slot]`` (which logical frame
a slot holds) plus validity rule 1 (``t >= total - capacity``). Reading a
frame that the ring has overwritten is an AssertionError, so the oracle
checks itself.

Randomness is DESIGN.md section 3's Philox4x32-10 on Python ints (from
``reference.py``): key = seed, counter = (call lo, call hi, b, 0x8000 | attempt).

The reference takes single-environment calls only; a batched call of the
real buffer is the same as its rows one after another in batch order.
Nothing here imports obsaug.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from reference import MASK32, below, philox4x32_10

ATTEMPTS = 64


def unit(r: int) -> float:
    """DESIGN.md section 3: (r >> 8) * 2^-24, in [0, 1)."""
    return (r >> 8) * 2.0 ** -24


def sample_block(seed: int, call: int, b: int, attempt: int) -> tuple:
    """The Philox block of sample b, attempt `attempt` of sample call `call`."""
    counter = (call & MASK32, call >> 32, b, 0x8000 | attempt)
    key = (seed & MASK32, seed >> 32)
    return philox4x32_10(counter, key)


def sum_tree(weights: np.ndarray) -> List[np.ndarray]:
    """docs/replay.md's sum tree, level by level from the leaves: the weights
    zero-padded to a power of two, then each level's pairs added (float64, one
    rounding per node) up to the root `[total]`."""
    leaves = 1
    while leaves < len(weights):
        leaves *= 2
    level = np.zeros(leaves, dtype=np.float64)
    level[:len(weights)] = weights
    levels = [level]
    while len(level) > 1:
        level = level[0::2] + level[1::2]
        levels.append(level)
    return levels


def descend(levels: List[np.ndarray], target: float) -> int:
    """The walk of docs/replay.md: left if target < l; else right with target - l
    when the right sum is positive; else left. Returns the leaf (slot)."""
    i = 0
    for children in reversed(levels[:-1]):
        left, right = float(children[2 * i]), float(children[2 * i + 1])
        if target < left:
            i = 2 * i
        elif right > 0:
            target -= left
            i = 2 * i + 1
        else:
            i = 2 * i
    return i


class ReferenceReplay:
    def __init__(self, capacity: int, frame_shape: Sequence[int], frame_stack: int,
                 action_shape: Sequence[int] = (), action_dtype=torch.float32,
                 n_step: int = 1, gamma: float = 0.99, prioritized: bool = False,
                 alpha: float = 0.6, beta: float = 0.4, seed: int = 0):
        self.capacity = int(capacity)
        self.frame_shape = tuple(frame_shape)
        self.S = int(frame_stack)
        self.action_shape = tuple(action_shape)
        self.action_dtype = action_dtype
        self.n = int(n_step)
        self.gamma = float(gamma)
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.seed = int(seed)

        self.total = 0                       # frames written over the buffer's life
        self.calls = 0                       # sample calls so far
        self.slot_frame: List[Optional[torch.Tensor]] = [None] * self.capacity
        self.owner: List[int] = [-1] * self.capacity   # logical index held by each slot
        self.q: List[float] = [0.0] * self.capacity    # p ** alpha per slot
        self.max_p = 1.0                     # largest priority given so far, initially 1

        # per logical index
        self.pred: Dict[int, int] = {}
        self.succ: Dict[int, int] = {}
        self.ends: Dict[int, bool] = {}      # the frame ends its episode
        self.terminated: Dict[int, bool] = {}
        self.action: Dict[int, torch.Tensor] = {}
        self.reward: Dict[int, float] = {}
        self.env_of: Dict[int, int] = {}

        self.open: Dict[int, int] = {}       # env -> its latest frame, while its episode is open

    # ------------------------------------------------------------------ adding

    def _write(self, frame: torch.Tensor, env: int) -> int:
        assert tuple(frame.shape) == self.frame_shape and frame.dtype == torch.uint8
        t = self.total
        slot = t % self.capacity
        self.slot_frame[slot] = frame.detach().to("cpu").clone()
        self.owner[slot] = t
        self.q[slot] = self.max_p ** self.alpha
        self.pred[t] = -1
        self.succ[t] = -1
        self.ends[t] = False
        self.terminated[t] = False
        self.env_of[t] = env
        self.total += 1
        return t

    def add_first(self, frame: torch.Tensor, env: int = 0) -> int:
        if env in self.open:                       # previous episode still open:
            self.ends[self.open.pop(env)] = True   # closed as truncated (bootstraps)
        t = self._write(frame, env)
        self.open[env] = t
        return t

    def add(self, action, reward: float, frame: torch.Tensor, terminated: bool = False,
            truncated: bool = False, env: int = 0) -> int:
        if env not in self.open:
            raise ValueError(f"add before add_first for env {env}")
        prev = self.open.pop(env)
        t = self._write(frame, env)
        self.pred[t] = prev
        self.succ[prev] = t
        self.action[t] = torch.as_tensor(action, dtype=self.action_dtype).reshape(self.action_shape)
        self.reward[t] = float(reward)
        self.terminated[t] = bool(terminated)
        self.ends[t] = bool(terminated) or bool(truncated)
        if not self.ends[t]:
            self.open[env] = t
        return t

    # ----------------------------------------------------------------- queries

    def __len__(self) -> int:
        return min(self.total, self.capacity)

    def in_ring(self, t: int) -> bool:
        return self.total - self.capacity <= t < self.total and t >= 0

    def frame(self, t: int) -> torch.Tensor:
        assert self.in_ring(t), f"frame {t} was overwritten (total {self.total})"
        slot = t % self.capacity
        assert self.owner[slot] == t
        return self.slot_frame[slot]

    def stack_frames(self, t: int) -> List[int]:
        """Logical indices of the stack ending at t, oldest first (first frame repeats)."""
        xs = [t]
        x = t
        for _ in range(self.S - 1):
            if self.pred[x] != -1:
                x = self.pred[x]
            xs.append(x)
        return xs[::-1]

    def n_steps(self, t: int) -> int:
        """n' of transition t (rules 1-3), or 0 when t is not a valid transition."""
        if not self.in_ring(t):                                   # rule 1
            return 0
        x = t
        for _ in range(self.S - 1):                               # rule 2
            if self.pred[x] == -1:
                break
            x = self.pred[x]
            if not self.in_ring(x):
                return 0
        x, steps = t, 0
        for _ in range(self.n):                                   # rule 3
            if self.ends[x]:
                break
            if self.succ[x] == -1:
                return 0
            x = self.succ[x]
            steps += 1
        return steps

    def is_valid(self, t: int) -> bool:
        return self.n_steps(t) > 0

    def valid_slots(self) -> List[int]:
        return [s for s in range(len(self)) if self.is_valid(self.owner[s])]

    @property
    def num_valid(self) -> int:
        return len(self.valid_slots())

    def transition(self, t: int) -> dict:
        """obs / next_obs stacks (logical), action, reward, discount of valid transition t."""
        n = self.n_steps(t)
        assert n > 0
        x, ret, g = t, 0.0, 1.0
        for _ in range(n):
            x = self.succ[x]
            ret += g * self.reward[x]
            g *= self.gamma
        return {
            "obs_frames": self.stack_frames(t),
            "next_frames": self.stack_frames(x),
            "action": self.action[self.succ[t]],
            "reward": ret,
            "discount": 0.0 if self.terminated[x] else g,
            "n": n,
        }

    # ---------------------------------------------------------------- sampling

    def _check_sample(self, batch_size: int, valid: List[int]) -> None:
        # with replacement: any batch size once one transition is valid
        if not valid:
            raise ValueError(f"cannot sample {batch_size}: no valid transition (0 valid)")

    def sample_slots_uniform(self, batch_size: int) -> List[int]:
        valid = self.valid_slots()
        self._check_sample(batch_size, valid)
        valid_set = set(valid)
        size = len(self)
        slots = []
        for b in range(batch_size):
            for a in range(ATTEMPTS):
                r = sample_block(self.seed, self.calls, b, a)
                slot = below(r[0], size)
                if slot in valid_set:
                    break
            else:  # all 64 attempts missed: r is attempt 63's block
                slot = valid[below(r[1], len(valid))]
            slots.append(slot)
        return slots

    def slot_weights(self) -> np.ndarray:
        """Per-slot sampling weight: q for a valid transition, 0 otherwise (float64)."""
        w = np.zeros(self.capacity, dtype=np.float64)
        for s in self.valid_slots():
            w[s] = self.q[s]
        return w

    def sample_slots_prioritized(self, batch_size: int):
        valid = self.valid_slots()
        self._check_sample(batch_size, valid)
        w = self.slot_weights()
        levels = sum_tree(w)                   # rebuilt from scratch on every call
        total = levels[-1][0]
        positive = w[w > 0]
        assert len(positive), "every valid transition has priority 0"
        q_min = float(positive.min())
        slots, weights = [], []
        for b in range(batch_size):
            r = sample_block(self.seed, self.calls, b, 0)
            u = (b + unit(r[0])) / batch_size
            i = descend(levels, u * total)
            assert w[i] > 0, "the walk drew a zero weight"
            slots.append(i)
            weights.append((w[i] / q_min) ** (-self.beta))
        return slots, weights

    def sample(self, batch_size: int) -> dict:
        if self.prioritized:
            slots, weights = self.sample_slots_prioritized(batch_size)
        else:
            slots, weights = self.sample_slots_uniform(batch_size), None
        self.calls += 1
        trs = [self.transition(self.owner[s]) for s in slots]

        def stacks(key):
            return torch.stack([torch.cat([self.frame(x) for x in tr[key]], 0) for tr in trs])

        out = {
            "obs": stacks("obs_frames"),
            "next_obs": stacks("next_frames"),
            "action": torch.stack([tr["action"] for tr in trs]),
            "reward": torch.tensor([tr["reward"] for tr in trs], dtype=torch.float64).float(),
            "discount": torch.tensor([tr["discount"] for tr in trs],
                                     dtype=torch.float64).float(),
            "indices": torch.tensor(slots, dtype=torch.int64),
            # not part of the real batch: for the tests' own checks
            "logical": [self.owner[s] for s in slots],
            "obs_frames": [tr["obs_frames"] for tr in trs],
            "next_frames": [tr["next_frames"] for tr in trs],
        }
        if weights is not None:
            out["weights"] = torch.tensor(weights, dtype=torch.float64).float()
        return out

    # -------------------------------------------------------------- priorities

    def update_priorities(self, indices, priorities) -> None:
        idx = [int(i) for i in torch.as_tensor(indices).reshape(-1).tolist()]
        pri = [float(p) for p in torch.as_tensor(priorities, dtype=torch.float64)
               .reshape(-1).tolist()]
        assert len(idx) == len(pri)
        for i, p in zip(idx, pri):
            if not 0 <= i < self.capacity:
                raise ValueError(f"index {i} out of range")
            if not (np.isfinite(p) and p >= 0):
                raise ValueError(f"priority {p} must be finite and >= 0")
        for i, p in zip(idx, pri):
            self.q[i] = p ** self.alpha
            self.max_p = max(self.max_p, p)
