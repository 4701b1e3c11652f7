"""obsaug.distributed.ShardedReplayBuffer: one replay buffer over the ranks of a
torch.distributed group, each rank keeping its own shard (DESIGN.md section 5a;
docs/distributed.md is the contract)::

    dist.init_process_group("gloo")           # "nccl" for CUDA shards
    rb = ShardedReplayBuffer(capacity=100_000, frame_shape=(3, 84, 84), frame_stack=3,
                             action_shape=(6,), device="cpu", seed=0)
    rb.add_first(frame); rb.add(action, reward, frame, terminated, truncated)   # local
    batch = rb.sample(256, augment=engine)    # collective: every rank, same call
    rb.update_priorities(batch["indices"], td.abs() + 1e-6)                   # collective

A sample call is one all_gather of each shard's size (or priority total),
its sampler counter, the requester's engine seed and step, and one
all_to_all_single that returns every draw's augmented obs / next_obs and
its action, reward, discount, index and weight from the rank that owns it.
Every rank computes every rank's draws from the gathered sizes (they are a
pure function of the buffer seed, the call and the draw id b_global = rank * B
+ b), so the owners know their requests without a message of their own.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist

from . import _C
from . import ops as _ops
from .replay import ReplayBuffer, _Envs

__all__ = ["ShardedReplayBuffer"]

_DRAW_IDS = 1 << 32  # the Philox counter's b word numbers every draw of a call
_STATS = ("valid", "total", "smallest", "call", "batch", "engine_seed", "step", "engine")


def _as_bits(x: float) -> int:
    return int(torch.tensor([x], dtype=torch.float64).view(torch.int64).item())


def _from_bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.float64)


def _digest(text: str) -> int:
    """A signed 64-bit digest of `text` (never 0: 0 stands for "no engine")."""
    d = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little", signed=True)
    return d or 1


def _row_elements(t: torch.Tensor) -> int:
    n = 1
    for d in t.shape[1:]:
        n *= d
    return n


def _padded(size: int) -> int:
    """`size` bytes rounded up to a multiple of 8."""
    return (size + 7) // 8 * 8


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    """`t`'s elements as flat uint8 (a view when contiguous)."""
    return t.contiguous().reshape(-1).view(torch.uint8)


class ShardedReplayBuffer:
    """A ReplayBuffer per rank whose ``sample`` draws from the union of all
    ranks' shards. Constructor arguments are ``obsaug.ReplayBuffer``'s plus
    ``group`` (default: the default process group); they must be equal on
    every rank (checked with one all_gather)."""

    def __init__(self, capacity: int, frame_shape: Sequence[int], frame_stack: int = 3,
                 action_shape: Sequence[int] = (), *, group: Optional[Any] = None,
                 _local: Optional[ReplayBuffer] = None, **options: Any):
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ShardedReplayBuffer needs torch.distributed initialised: call "
                             "torch.distributed.init_process_group first (torchrun sets the "
                             "environment)")
        self.group = group
        self.bytes_sent = 0  # to other ranks by collectives so far
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.local = _local if _local is not None else ReplayBuffer(
            capacity, frame_shape, frame_stack, action_shape, **options)
        mine = repr((self.local.capacity, self.local.frame_shape, self.local.frame_stack,
                     self.local.action_shape, str(self.local.action_dtype),
                     self.local.device.type, self.local.n_step, self.local.gamma,
                     self.local.prioritized, self.local.alpha, self.local.beta,
                     self.local.seed))
        digests = self._all_gather([_digest(mine), self.local.sample_calls])
        if len(set(digests[:, 0].tolist())) != 1:
            raise ValueError("ShardedReplayBuffer options differ across ranks: capacity, "
                             "frame_shape, frame_stack, action_shape, action_dtype, device type, "
                             "n_step, gamma, prioritized, alpha, beta and seed must be equal on "
                             f"every rank (this rank {self.rank} has {mine})")
        if len(set(digests[:, 1].tolist())) != 1:
            raise ValueError("the shards' sample counters differ across ranks "
                             f"({digests[:, 1].tolist()}): load every rank's shard from the "
                             "same checkpoint")
        self._engine_digest: Tuple[Any, int] = (None, 0)

    # --- collectives -------------------------------------------------------------

    def _all_gather(self, values: List[int]) -> torch.Tensor:
        """Every rank's int64 `values`: [world_size, len(values)] on the CPU."""
        mine = torch.tensor(values, dtype=torch.int64, device=self.local.device)
        self.bytes_sent += mine.nbytes * (self.world_size - 1)
        out = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(out, mine, group=self.group)
        return torch.stack(out).cpu()

    def _all_to_all(self, send: torch.Tensor, send_sizes: List[int],
                    recv_sizes: List[int]) -> torch.Tensor:
        """send_sizes[r] rows (dim 0) of `send` to rank r, in rank order; returns the
        rows received, recv_sizes[r] from rank r, in rank order."""
        recv = send.new_empty((sum(recv_sizes), *send.shape[1:]))
        row_bytes = send.element_size() * _row_elements(send)
        self.bytes_sent += row_bytes * sum(n for r, n in enumerate(send_sizes) if r != self.rank)
        dist.all_to_all_single(recv, send, recv_sizes, send_sizes, group=self.group)
        return recv

    # --- adding: this rank's shard ------------------------------------------------

    def add_first(self, frame: Any, env: _Envs = None) -> None:
        """Starts an episode in this rank's shard (ReplayBuffer.add_first)."""
        self.local.add_first(frame, env)

    def add(self, action: Any, reward: Any, frame: Any, terminated: Any = False,
            truncated: Any = False, env: _Envs = None) -> None:
        """One step into this rank's shard (ReplayBuffer.add)."""
        self.local.add(action, reward, frame, terminated, truncated, env)

    # --- sampling ------------------------------------------------------------------

    def _engine_of(self, augment: Optional[Any]) -> Tuple[Any, int]:
        if augment is None:
            return None, 0
        native = getattr(augment, "_native", None)
        if native is None or not isinstance(native, getattr(_C, "Engine", ())):
            raise TypeError(f"augment must be an obsaug.Engine or None, got "
                            f"{type(augment).__name__}")
        if self._engine_digest[0] is not augment:
            config = dict(augment.config)
            config.pop("seed", None)  # the key is seed + rank; the rest must agree
            self._engine_digest = (augment, _digest(repr(sorted(config.items()))))
        return native, self._engine_digest[1]

    def sample(self, batch_size: int, augment: Optional[Any] = None, *,
               share_augmentation: bool = False,
               beta: Optional[float] = None) -> Dict[str, torch.Tensor]:
        """A collective: every rank calls it with the same ``batch_size`` and
        engine config; returns ``batch_size`` transitions per rank drawn from the
        union of the shards (uniformly, or by priority), as ``ReplayBuffer.sample``
        returns them. ``indices`` are global: ``owner_rank * capacity + slot``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int):
            raise TypeError(f"batch_size must be an int, got {type(batch_size).__name__}")
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        if batch_size * self.world_size > _DRAW_IDS:
            raise ValueError(f"batch size {batch_size} times world size {self.world_size} "
                             "exceeds 2^32, the most draws one call can make")
        b_exp = self.local.beta if beta is None else float(beta)
        if not (b_exp >= 0.0 and b_exp < float("inf")):
            raise ValueError(f"beta must be finite and >= 0, got {b_exp}")
        native, engine_digest = self._engine_of(augment)
        if native is not None and torch.device(native.device) != self.local.device:
            raise ValueError(f"augment's engine is on {native.device} but this shard is on "
                             f"{self.local.device}; they must match")
        local = self.local._native
        step = native.reserve_steps(1 if share_augmentation else 2) if native else 0
        total, smallest = local.priority_summary()
        engine_seed = native.seed if native else 0
        stats = self._all_gather([
            local.num_valid, _as_bits(total), _as_bits(smallest), local.sample_calls,
            batch_size, engine_seed - (1 << 64) if engine_seed >= 1 << 63 else engine_seed,
            step - (1 << 64) if step >= 1 << 63 else step,
            (engine_digest >> 2) * 2 + int(share_augmentation)])
        column = {name: stats[:, i] for i, name in enumerate(_STATS)}
        self._check_agreement(column)
        call = int(column["call"][0]) & ((1 << 64) - 1)
        prioritized = self.local.prioritized
        mass = (_from_bits(column["total"]) if prioritized
                else column["valid"].to(torch.float64)).tolist()
        owners, targets = [], []
        for r in range(self.world_size):
            o, t = _C.shard_draws(self.local.seed, call, r * batch_size, batch_size, mass,
                                  prioritized)
            owners.append(torch.tensor(o, dtype=torch.int64))
            targets.append(torch.tensor(t, dtype=torch.float64))
        send, send_bytes, layout = self._serve(native, column, owners, targets, batch_size,
                                               call, mass, share_augmentation)
        mine = [torch.nonzero(owners[self.rank] == o).flatten() for o in range(self.world_size)]
        row_bytes = sum(width for _, _, _, width in layout)
        received = self._all_to_all(send, send_bytes, [_padded(len(p) * row_bytes) for p in mine])
        out = self._unpack(received, layout, mine, batch_size)
        if prioritized:
            q_min = min(s for s, t in zip(_from_bits(column["smallest"]).tolist(), mass) if t > 0)
            out["weights"] = (out.pop("weight") / q_min).pow(-b_exp).to(torch.float32)
        else:
            out.pop("weight")
        local.count_sample_call()
        return out

    def _check_agreement(self, column: Dict[str, torch.Tensor]) -> None:
        for name, what in (("batch", "batch_size"), ("call", "the shards' sample counters"),
                           ("engine", "augment (the engine's config without its seed, "
                                      "or None) and share_augmentation")):
            values = column[name].tolist()
            if len(set(values)) != 1:
                raise ValueError(f"ShardedReplayBuffer.sample is a collective: {what} must be "
                                 f"equal on every rank, got {values} by rank")
        if int(column["valid"].sum()) == 0:
            raise ValueError(f"cannot sample {int(column['batch'][0])} transitions: 0 valid "
                             f"transitions in all {self.world_size} shards")
        if self.local.prioritized and float(_from_bits(column["total"]).sum()) <= 0:
            raise ValueError("every valid transition of every shard has priority 0, so none "
                             "can be drawn; give some a positive priority with "
                             "update_priorities")

    def _serve(self, native: Optional[Any], column: Dict[str, torch.Tensor],
               owners: List[torch.Tensor], targets: List[torch.Tensor], batch_size: int,
               call: int, mass: List[float],
               share: bool) -> Tuple[torch.Tensor, List[int], List[Tuple[str, torch.dtype,
                                                                         tuple, int]]]:
        """This rank's part as owner: the rows of every draw it owns, gathered
        and augmented with each requester's seed and step. Returns the bytes to
        send (requester r's segment holds, field after field, its rows in b
        order), each segment's size, and the fields' (name, dtype, row shape,
        bytes per row)."""
        local = self.local._native
        mine = [torch.nonzero(owners[r] == self.rank).flatten() for r in range(self.world_size)]
        ids = torch.cat([r * batch_size + b for r, b in enumerate(mine)])
        if self.local.prioritized:
            fractions = torch.cat([targets[r][b] for r, b in enumerate(mine)])
            fractions = (fractions / mass[self.rank]).clamp(max=1.0 - 2.0 ** -53)
            slots = local.priority_slots_for(fractions.tolist()) if len(fractions) else []
        else:
            slots = local.uniform_slots_for(call, ids.tolist()) if len(ids) else []
        rows = local.rows_at(slots)
        device = self.local.device
        storage = self.local.storage
        obs_index, next_index = rows["obs_index"].to(device), rows["next_index"].to(device)
        obs_parts, next_parts = [], []
        start = 0
        for r, b in enumerate(mine):
            k = len(b)
            part = slice(start, start + k)
            start += k
            if native is not None:
                seed_r = int(column["engine_seed"][r]) & ((1 << 64) - 1)
                step_r = int(column["step"][r]) & ((1 << 64) - 1)
                ids_r = ids[part].to(device)
                obs_parts.append(native.gather_augment_for(storage, obs_index[part], seed_r,
                                                           step_r, ids_r))
                next_parts.append(native.gather_augment_for(
                    storage, next_index[part], seed_r, step_r if share else step_r + 1, ids_r))
            else:
                obs_parts.append(_ops.gather_augment(storage, obs_index[part], ops=[], seed=0,
                                                     step=0))
                next_parts.append(_ops.gather_augment(storage, next_index[part], ops=[], seed=0,
                                                      step=0))
        index = torch.tensor(slots, dtype=torch.int64) + self.rank * self.local.capacity
        fields = [("obs", obs_parts), ("next_obs", next_parts)]
        for name, t in (("action", rows["action"]), ("reward", rows["reward"]),
                        ("discount", rows["discount"]), ("indices", index),
                        ("weight", rows["weight"])):
            fields.append((name, list(torch.split(t.to(device), [len(b) for b in mine]))))
        # widest elements first and segments padded to 8 bytes: every field lands aligned
        fields.sort(key=lambda field: -field[1][0].element_size())
        layout = [(name, parts[0].dtype, tuple(parts[0].shape[1:]),
                   _row_elements(parts[0]) * parts[0].element_size()) for name, parts in fields]
        segments, send_bytes = [], []
        for r in range(self.world_size):
            size = sum(parts[r].numel() * parts[r].element_size() for _, parts in fields)
            segments += [_flat_bytes(parts[r]) for _, parts in fields]
            segments.append(torch.zeros(_padded(size) - size, dtype=torch.uint8, device=device))
            send_bytes.append(_padded(size))
        return torch.cat(segments), send_bytes, layout

    @staticmethod
    def _unpack(received: torch.Tensor, layout: List[Tuple[str, torch.dtype, tuple, int]],
                positions: List[torch.Tensor], batch_size: int) -> Dict[str, torch.Tensor]:
        """The owners' segments (in rank order, see _serve) back into tensors: owner
        o's rows go to the draws positions[o]."""
        out = {name: received.new_empty((batch_size, *shape), dtype=dtype)
               for name, dtype, shape, _ in layout}
        offset = 0
        for pos in positions:
            k = len(pos)
            end = offset + _padded(k * sum(width for _, _, _, width in layout))
            for name, dtype, shape, width in layout:
                part = received[offset:offset + k * width]
                offset += k * width
                if k == 0:
                    continue
                rows = part.view(dtype).reshape(k, *shape)
                if received.is_cuda or width < 4096:
                    out[name].index_copy_(0, pos.to(received.device), rows)
                else:  # a memcpy per frame stack: CPU index_copy_ goes element by element
                    target = out[name]
                    for j, b in enumerate(pos.tolist()):
                        target[b].copy_(rows[j])
            offset = end
        return out

    # --- priorities ----------------------------------------------------------------

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """A collective: new priorities for global ``indices`` from ``sample``, each
        sent to the rank that owns it. Every rank calls it (with K = 0 rows if it has
        none); a rank whose arguments are rejected raises its error and the others
        a ValueError naming it, and no priority changes."""
        if not self.local.prioritized:
            raise ValueError("update_priorities needs a buffer built with prioritized=True")
        idx = torch.as_tensor(indices)
        pri = torch.as_tensor(priorities)
        error: Optional[Exception] = None
        if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.dim() != 1:
            error = TypeError(f"indices must be an integer tensor [K], got {idx.dtype} "
                              f"{list(idx.shape)}")
        elif pri.dim() != 1 or len(pri) != len(idx) or pri.dtype == torch.bool:
            error = ValueError(f"priorities must be a real tensor [K] with K = {len(idx)}, "
                               f"got {pri.dtype} {list(pri.shape)}")
        else:
            idx = idx.to("cpu", torch.int64)
            pri = pri.to("cpu", torch.float64)
            limit = self.world_size * self.local.capacity
            if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= limit):
                bad = idx[(idx < 0) | (idx >= limit)][0]
                error = IndexError(f"index {int(bad)} is not a global slot [0, {limit}) "
                                   "(owner_rank * capacity + slot)")
            elif len(pri) and not bool(torch.isfinite(pri).all() and (pri >= 0).all()):
                error = ValueError("priorities must be finite and >= 0")
        owner = idx // self.local.capacity if error is None else None
        counts = ([-1] * self.world_size if error is not None else
                  [int((owner == r).sum()) for r in range(self.world_size)])
        device = self.local.device
        sent = torch.tensor(counts, dtype=torch.int64, device=device)
        got = torch.empty_like(sent)
        dist.all_to_all_single(got, sent, group=self.group)
        got_list = got.cpu().tolist()
        if error is not None:
            raise error
        if -1 in got_list:
            raise ValueError(f"update_priorities was rejected on rank {got_list.index(-1)} "
                             "(its error names the problem); no priority changed")
        order = torch.sort(owner, stable=True).indices
        send = torch.stack([idx[order] % self.local.capacity,
                            pri[order].view(torch.int64)], dim=1).to(device)
        received = self._all_to_all(send, counts, got_list).cpu()
        self.local.update_priorities(received[:, 0], received[:, 1].contiguous()
                                     .view(torch.float64))

    # --- checkpoints ---------------------------------------------------------------

    def _rank_dir(self, path: Union[str, "os.PathLike[str]"]) -> str:
        return os.path.join(os.fspath(path), f"rank{self.rank}-of-{self.world_size}")

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes this rank's shard to ``path/rank{r}-of-{world_size}/replay.obsaug``
        (atomically, as ReplayBuffer.save). Every rank saves its own."""
        self.local.save(self._rank_dir(path))

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], *, group: Optional[Any] = None,
             device: Optional[Union[str, torch.device]] = None) -> "ShardedReplayBuffer":
        """This rank's shard from ``save(path)``; a collective (the options are
        checked equal). A checkpoint of another world size is a ValueError."""
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        folder = os.path.join(os.fspath(path), f"rank{rank}-of-{world}")
        if not os.path.isdir(folder):
            found = sorted({int(m.group(1)) for name in
                            (os.listdir(path) if os.path.isdir(path) else [])
                            for m in [re.fullmatch(r"rank\d+-of-(\d+)", name)] if m})
            if found:
                raise ValueError(f"{os.fspath(path)} holds a checkpoint of world size "
                                 f"{', '.join(map(str, found))}, but this group has {world} "
                                 "ranks; load it with the world size that saved it")
            raise ValueError(f"{os.fspath(path)} holds no sharded replay checkpoint "
                             f"(no {os.path.basename(folder)} folder)")
        local = ReplayBuffer.load(folder, device=device)
        return cls(0, (), group=group, _local=local)

    # --- sizes ---------------------------------------------------------------------

    def __len__(self) -> int:
        """Frames stored in this rank's shard."""
        return len(self.local)

    num_valid = property(lambda self: self.local.num_valid,
                         doc="Transitions this rank's shard can supply.")
    capacity = property(lambda self: self.local.capacity, doc="Frames per shard.")
    prioritized = property(lambda self: self.local.prioritized)
    device = property(lambda self: self.local.device)

    def __repr__(self) -> str:
        return (f"obsaug.distributed.ShardedReplayBuffer(rank={self.rank}, "
                f"world_size={self.world_size}, shard={self.local!r})")
