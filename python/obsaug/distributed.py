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
its sampler counter and the requester's engine seed (then, once every rank
has accepted the call, one more of the engine steps each reserved); every rank
computes every rank's draws from the gathered sizes (they are a pure function
of the buffer seed, the call and the draw id b_global = rank * B + b), so the
owners know their requests without a message of their own. The owners write
every draw's augmented obs / next_obs and its action, reward, discount, index
and weight straight to where the requester reads them: when every rank is on
one host, at the draw's position in a batch slot of the requester's
shared-memory region, whose views sample returns (no copy; a slot is reused
only once the caller holds no tensor of its batch); else into a send buffer
that one all_to_all_single delivers, which the requester reads into draw
order with one call per field.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import shutil
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.distributed as dist

from . import _C
from . import ops as _ops
from ._devices import same_device
from ._files import read_regular_file
from ._shared_regions import SharedRegions, host_identity, owner_failed
from .replay import ReplayBuffer, _Envs, _tensor

__all__ = ["ShardedReplayBuffer"]

_DRAW_IDS = 1 << 32  # the Philox counter's b word numbers every draw of a call
_TSO = ("x86_64", "AMD64")  # the shared-memory transport's ordering (_shared_regions)
_TRANSPORTS = ("auto", "all_to_all", "shared_memory")
_STATS = ("valid", "total", "smallest", "call", "batch", "engine_seed", "engine", "slot")
_HELD_SLOTS = 3  # batch slots per shared region the caller may hold; one more is scratch


def _as_bits(x: float) -> int:
    return int(torch.tensor([x], dtype=torch.float64).view(torch.int64).item())


def _signed(x: int) -> int:
    """An unsigned 64-bit value as the int64 with its bits."""
    return x - (1 << 64) if x >= 1 << 63 else x


def _from_bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.float64)


def _digest(text: str) -> int:
    """A signed 64-bit digest of `text` (never 0: 0 stands for "no engine")."""
    d = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little", signed=True)
    return d or 1


def _row_elements(t: torch.Tensor) -> int:
    return math.prod(t.shape[1:])


def _padded(size: int) -> int:
    """`size` bytes rounded up to a multiple of 8."""
    return (size + 7) // 8 * 8


def _at_least(buffer: Optional[torch.Tensor], nbytes: int,
              device: torch.device) -> torch.Tensor:
    """`buffer` when it holds `nbytes` bytes, else a new flat uint8 buffer (kept
    across calls: its pages are faulted in once, not on every call)."""
    if buffer is not None and buffer.numel() >= nbytes:
        return buffer
    return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)


def _parts(mine: Sequence[torch.Tensor]):
    """(requester r, the slice of this owner's rows that are r's) for every r
    that has any: the owned rows are laid out requester after requester."""
    start = 0
    for r, pos in enumerate(mine):
        if len(pos):
            yield r, slice(start, start + len(pos))
        start += len(pos)


_SHARD_FILE = "replay.obsaug"
_MANIFEST = "manifest.json"
_MANIFEST_FORMAT = "obsaug sharded replay checkpoint 1"
_SHARD_FOLDER = re.compile(r"rank(\d+)-of-(\d+)(?:-([0-9a-f]{16}))?")


def _shard_name(rank: int, world: int, save_id: str) -> str:
    return f"rank{rank}-of-{world}-{save_id}"


def _stage_manifest(root: str, manifest: Dict[str, Any], suffix: str) -> str:
    """The manifest written and synced beside ``root/manifest.json`` (its path);
    _publish_manifest puts it in place. A file of its own (O_EXCL: never one obsaug
    did not create); on any error it is removed and the error raised."""
    temporary = os.path.join(root, _MANIFEST) + suffix
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _remove_staged(temporary)
        raise
    return temporary


def _remove_staged(temporary: str) -> None:
    """Removes a staged manifest this save wrote (and only it); a failure to remove
    it is no reason to hide the error that made the save fail."""
    try:
        os.remove(temporary)
    except OSError:
        pass


def _publish_manifest(root: str, temporary: str) -> None:
    """A staged manifest becomes ``root/manifest.json`` by one rename, made durable
    (fsync of the folder) before old shards go. The staged file is removed when the
    rename fails."""
    try:
        os.replace(temporary, os.path.join(root, _MANIFEST))
    except BaseException:
        _remove_staged(temporary)
        raise
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# A manifest names world_size shards in about 100 bytes each.
_MAX_MANIFEST_BYTES = 16 << 20


def _read_manifest(root: str) -> Dict[str, Any]:
    """The manifest of the sharded checkpoint in `root`, checked for its form;
    ValueError naming what is wrong (a manifest.json that is a FIFO or device, or
    larger than _MAX_MANIFEST_BYTES, is refused before it is read)."""
    file = os.path.join(root, _MANIFEST)
    try:
        text = read_regular_file(file, _MAX_MANIFEST_BYTES, "a manifest")
    except FileNotFoundError:
        found = sorted(name for name in (os.listdir(root) if os.path.isdir(root) else [])
                       if _SHARD_FOLDER.fullmatch(name))
        what = (f"shard folders {', '.join(found[:4])}{', ...' if len(found) > 4 else ''} "
                "but no manifest.json: a save that did not finish; load another checkpoint"
                if found else "no manifest.json")
        raise ValueError(f"{root} holds no sharded replay checkpoint ({what})") from None
    try:
        manifest = json.loads(text)
        world = manifest["world_size"]
        shards = manifest["shards"]
        ok = (manifest["format"] == _MANIFEST_FORMAT and type(world) is int and world >= 1
              and re.fullmatch(r"[0-9a-f]{16}", manifest["save_id"]) is not None
              and isinstance(shards, list) and len(shards) == world
              and all(type(shard["rank"]) is int and shard["rank"] == r
                      and type(shard["bytes"]) is int
                      and shard["folder"] == _shard_name(r, world, manifest["save_id"])
                      for r, shard in enumerate(shards)))
    except (ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nesting
        ok = False
    if not ok:
        raise ValueError(f"{file} is not a manifest of a sharded replay checkpoint "
                         f"({_MANIFEST_FORMAT!r}): it is corrupt; load another checkpoint")
    return manifest


def _legacy_shard_folder(root: str, rank: int, world: int) -> Optional[str]:
    """A checkpoint saved before manifests (``root/rank{r}-of-{W}`` folders, no
    save id): this rank's folder, loaded as those versions loaded it (the next
    save writes the manifest layout); None when ``root`` holds none; ValueError
    for another world size or a missing shard."""
    names = os.listdir(root) if os.path.isdir(root) else []
    found = sorted({int(m.group(2)) for name in names
                    for m in [_SHARD_FOLDER.fullmatch(name)] if m and m.group(3) is None})
    if not found:
        return None
    folder = os.path.join(root, f"rank{rank}-of-{world}")
    if world not in found:
        raise ValueError(f"{root} holds a checkpoint of world size "
                         f"{', '.join(map(str, found))} (saved before manifests), but this "
                         f"group has {world} ranks; load it with the world size that saved it")
    if not os.path.isdir(folder):
        raise ValueError(f"{root} holds a checkpoint of world size {world} without rank "
                         f"{rank}'s shard (no rank{rank}-of-{world} folder): it is incomplete; "
                         "restore that folder or load another checkpoint")
    return folder


class _Layout:
    """Where a requester's rows lie. Shared memory: a batch slot (slot_bytes)
    holds the batch in its final form, the segment of one owner with all B
    rows. all_to_all: the receive buffer holds one segment per owner, in rank
    order, of segment(k) bytes for its k rows: the k augmented obs rows, the
    k augmented next_obs rows, at the next multiple of 8 the small fields
    (widest element first, so each lands aligned to its element; each
    [k, *shape]), then padding to a multiple of `unit` = lcm(row bytes, 8):
    every segment starts at a whole augmented row, so the area's augmented
    rows of all owners are rows of one [R, *row shape] view, read into draw
    order by one gather. An owner's segment for requester r lies in the
    owner's send buffer after its segments for ranks < r."""

    def __init__(self, row_dtype: torch.dtype, row_shape: Tuple[int, ...],
                 small: List[Tuple[str, torch.dtype, Tuple[int, ...]]]):
        self.row_dtype, self.row_shape = row_dtype, row_shape
        self.row_bytes = row_dtype.itemsize * math.prod(row_shape)
        small = sorted(small, key=lambda f: -f[1].itemsize)  # stable: ties keep their order
        self.small_fields = [(name, dtype, shape, dtype.itemsize * math.prod(shape))
                             for name, dtype, shape in small]
        self.small_bytes = sum(width for *_, width in self.small_fields)
        self._small_before = [sum(width for *_, width in self.small_fields[:i])
                              for i in range(len(self.small_fields))]
        self.unit = math.lcm(self.row_bytes, 8)
        self.index_field = [name for name, *_ in self.small_fields].index("indices")

    def segment(self, k: int) -> int:
        if k == 0:
            return 0
        end = _padded(2 * k * self.row_bytes) + k * self.small_bytes
        return -(-end // self.unit) * self.unit

    def slot_bytes(self, batch_size: int) -> int:
        """The bytes of a shared-memory batch slot: the batch in final form
        (obs [B, ...], next_obs [B, ...], then the small fields), the segment
        of one owner holding all B rows, rounded up to whole pages."""
        end = _padded(2 * batch_size * self.row_bytes) + batch_size * self.small_bytes
        return -(-end // 4096) * 4096

    def payload(self, k: int) -> int:
        """The bytes of k rows without padding."""
        return k * (2 * self.row_bytes + self.small_bytes)

    def big(self, area: torch.Tensor, at: int, k: int, which: int) -> torch.Tensor:
        """The obs (which=0) or next_obs (1) rows of the k-row segment at byte `at`."""
        begin = at + which * k * self.row_bytes
        return (area[begin:begin + k * self.row_bytes].view(self.row_dtype)
                .view(k, *self.row_shape))

    def small(self, area: torch.Tensor, at: int, k: int, i: int) -> torch.Tensor:
        """Small field i of the k-row segment at byte `at`."""
        begin = at + _padded(2 * k * self.row_bytes) + k * self._small_before[i]
        _, dtype, shape, width = self.small_fields[i]
        return area[begin:begin + k * width].view(dtype).view(k, *shape)

    def rows(self, area: torch.Tensor) -> torch.Tensor:
        """Every whole augmented row of the area: [R, *row shape]."""
        n = area.numel() // self.row_bytes
        return area[:n * self.row_bytes].view(self.row_dtype).view(n, *self.row_shape)


class ShardedReplayBuffer:
    """A ReplayBuffer per rank whose ``sample`` draws from the union of all
    ranks' shards. Constructor arguments are ``obsaug.ReplayBuffer``'s plus
    ``group`` (default: the default process group) and ``transport``; they
    must be equal on every rank (checked with one all_gather).

    ``transport`` carries the sampled rows from their owners to their
    requesters: ``"shared_memory"`` (each rank maps every rank's receive
    region in /dev/shm and owners write the rows straight into it; needs
    every rank on one host and CPU shards), ``"all_to_all"`` (one
    all_to_all_single; any group, CUDA shards with NCCL), or ``"auto"`` (the
    default: shared memory where it can work, else all_to_all). The one in
    use is ``self.transport``."""

    def __init__(self, capacity: int, frame_shape: Sequence[int], frame_stack: int = 3,
                 action_shape: Sequence[int] = (), *, group: Optional[Any] = None,
                 transport: str = "auto", _local: Optional[ReplayBuffer] = None,
                 **options: Any):
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("ShardedReplayBuffer needs torch.distributed initialised: call "
                             "torch.distributed.init_process_group first (torchrun sets the "
                             "environment)")
        if not isinstance(transport, str):
            raise TypeError(f"transport must be a str, one of {', '.join(_TRANSPORTS)}; got "
                            f"{type(transport).__name__}")
        if transport not in _TRANSPORTS:
            raise ValueError(f"transport must be one of {', '.join(_TRANSPORTS)}, got "
                             f"{transport!r}")
        self.group = group
        self.bytes_sent = 0  # to other ranks: by collectives, and into their shared regions
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self.local = _local if _local is not None else ReplayBuffer(
            capacity, frame_shape, frame_stack, action_shape, **options)
        mine = repr((self.local.capacity, self.local.frame_shape, self.local.frame_stack,
                     self.local.action_shape, str(self.local.action_dtype),
                     self.local.device.type, self.local.n_step, self.local.gamma,
                     self.local.prioritized, self.local.alpha, self.local.beta,
                     self.local.seed, transport))
        token = int.from_bytes(os.urandom(8), "little", signed=True)
        gathered = self._all_gather([_digest(mine), self.local.sample_calls,
                                     _digest(host_identity()), token])
        if len(set(gathered[:, 0].tolist())) != 1:
            raise ValueError("ShardedReplayBuffer options differ across ranks: capacity, "
                             "frame_shape, frame_stack, action_shape, action_dtype, device type, "
                             "n_step, gamma, prioritized, alpha, beta, seed and transport must "
                             f"be equal on every rank (this rank {self.rank} has {mine})")
        if len(set(gathered[:, 1].tolist())) != 1:
            raise ValueError("the shards' sample counters differ across ranks "
                             f"({gathered[:, 1].tolist()}): load every rank's shard from the "
                             "same checkpoint")
        hosts = len(set(gathered[:, 2].tolist()))
        on_cpu = self.local.device.type == "cpu"
        machine = platform.machine()
        if transport == "shared_memory" and (hosts > 1 or not on_cpu or machine not in _TSO):
            raise ValueError("transport='shared_memory' needs every rank on one host, the "
                             "shards on the CPU and an x86-64 machine, got "
                             f"{hosts} hosts, shards on {self.local.device} and {machine}; "
                             "use transport='all_to_all' or 'auto'")
        self.transport_option = transport
        self.transport = ("shared_memory" if transport != "all_to_all" and hosts == 1 and on_cpu
                          and machine in _TSO else "all_to_all")
        self._regions = SharedRegions(group, self.rank, self.world_size,
                                      int(gathered[0, 3]))  # rank 0's token names the files
        self._call = 0  # sample calls on this object: the regions' control words count them
        if self.transport == "shared_memory" and not self._regions.grow(0, 0):
            self._fall_back()
        self._send: Optional[torch.Tensor] = None
        self._recv: Optional[torch.Tensor] = None
        self._send_sizes: List[int] = []
        self._row_of: Tuple[Any, Any] = (None, None)
        self._layout_of: Tuple[Any, Any] = (None, None)
        self._views: Dict[Tuple[int, ...], Any] = {}
        self._engine_digest: Tuple[Any, int] = (None, 0)
        self._closed = False
        # held by add / add_first and by this rank's part as owner of a sample call
        # (the choice of its slots through the gathers of their rows), so rows
        # are never gathered from a shard an add is changing
        self._lock = threading.Lock()

    def close(self) -> None:
        """Releases the transport's memory (shared regions, send and receive
        buffers; their /dev/shm files were unlinked when every rank had mapped
        them). The buffer cannot sample afterwards; its shard stays readable."""
        self._closed = True
        self._regions.close()
        self._send = self._recv = None
        self._views.clear()
        # the last engine's caches: a closed buffer keeps no engine alive
        self._engine_digest, self._row_of = (None, 0), (None, None)

    def __enter__(self) -> "ShardedReplayBuffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

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
        with self._lock:
            self.local.add_first(frame, env)

    def add(self, action: Any, reward: Any, frame: Any, terminated: Any = False,
            truncated: Any = False, env: _Envs = None) -> None:
        """One step into this rank's shard (ReplayBuffer.add)."""
        with self._lock:
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
            # each rank's engine is on its own shard's device (checked in sample):
            # cuda:0 on rank 0, cuda:1 on rank 1 agree
            config.pop("device", None)
            self._engine_digest = (augment, _digest(repr(sorted(config.items()))))
        return native, self._engine_digest[1]

    def sample(self, batch_size: int, augment: Optional[Any] = None, *,
               share_augmentation: bool = False,
               beta: Optional[float] = None) -> Dict[str, torch.Tensor]:
        """A collective: every rank calls it with the same ``batch_size`` and
        engine config; returns ``batch_size`` transitions per rank drawn from the
        union of the shards (uniformly, or by priority), as ``ReplayBuffer.sample``
        returns them. ``indices`` are global: ``owner_rank * capacity + slot``."""
        if self._closed:
            raise ValueError("this ShardedReplayBuffer is closed; sample from a new one")
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
        if native is not None and not same_device(native.device, self.local.device):
            raise ValueError(f"augment's engine is on {native.device} but this shard is on "
                             f"{self.local.device}; they must match")
        local = self.local._native
        total, smallest = local.priority_summary()
        engine_seed = native.seed if native else 0
        layout = self._layout(native)
        slot = 0
        if self.transport == "shared_memory":
            need = layout.slot_bytes(batch_size)
            # a region about to grow is all free slots (held batches keep the old one)
            slot = 0 if need > self._regions.slot_bytes else self._regions.free_slot()
        values = [local.num_valid, _as_bits(total), _as_bits(smallest), local.sample_calls,
                  batch_size, _signed(engine_seed),
                  (engine_digest >> 2) * 2 + int(share_augmentation), slot]
        self._call += 1
        if self.transport == "shared_memory":
            stats = self._regions.exchange(self._call, values)
        else:
            stats = self._all_gather(values)
        column = {name: stats[:, i] for i, name in enumerate(_STATS)}
        self._check_agreement(column)  # refused on every rank alike: no step, not counted
        shared = (self.transport == "shared_memory"
                  and self._regions.grow(layout.slot_bytes(batch_size), _HELD_SLOTS + 1))
        if self.transport == "shared_memory" and not shared:
            self._fall_back()
        column["step"] = self._reserve_steps(native, share_augmentation, shared)
        call = int(column["call"][0]) & ((1 << 64) - 1)
        # From here the call is consumed on every rank, whatever its outcome on
        # each: every rank counts it (a rank that raises too), so the shards'
        # counters stay equal and the next call works once the cause is fixed.
        try:
            out = self._sample_accepted(native, column, batch_size, call, share_augmentation,
                                        layout, slot, shared, b_exp)
        finally:
            local.count_sample_call()
        return out

    def _reserve_steps(self, native: Optional[Any], share: bool, shared: bool) -> torch.Tensor:
        """Every rank's first reserved engine step for an accepted call (0 without
        an engine: every rank agreed on that). The steps are taken only once
        the call is accepted, so a refused call takes none (as a local
        buffer's); the values are exchanged once more (through the headers on
        the shared-memory transport, an all_gather else). A rank whose engine
        gives no steps raises its error, the others a RuntimeError naming it,
        and the call is not counted anywhere."""
        if native is None:
            return torch.zeros(self.world_size, dtype=torch.int64)
        try:
            step, error = native.reserve_steps(1 if share else 2), None
        except Exception as e:  # raised below, once every rank knows
            step, error = 0, e
        values = [_signed(step), int(error is not None)]
        if shared:
            got = self._regions.exchange(self._call, values, phase=1)
        else:
            got = self._all_gather(values)
        if error is not None:
            raise error
        failed = [r for r in range(self.world_size) if int(got[r, 1])]
        if failed:
            raise RuntimeError(f"rank {failed[0]} could not reserve its engine's steps for "
                               "this sample call (its own error names the problem); no rank "
                               "sampled: fix that rank's cause and sample again")
        return got[:, 0]

    def _sample_accepted(self, native: Optional[Any], column: Dict[str, torch.Tensor],
                         batch_size: int, call: int, share: bool, layout: "_Layout",
                         slot: int, shared: bool, b_exp: float) -> Dict[str, torch.Tensor]:
        """The draws, this rank's part as owner and its batch as requester of an
        accepted call (sample)."""
        prioritized = self.local.prioritized
        mass = (_from_bits(column["total"]) if prioritized
                else column["valid"].to(torch.float64)).tolist()
        owners, targets = [], []
        for r in range(self.world_size):
            o, t = _C.shard_draws(self.local.seed, call, r * batch_size, batch_size, mass,
                                  prioritized)
            owners.append(torch.tensor(o, dtype=torch.int64))
            targets.append(torch.tensor(t, dtype=torch.float64))
        # positions[r][o]: the draws of requester r that rank o owns, ascending
        positions = [[torch.nonzero(own == o).flatten() for o in range(self.world_size)]
                     for own in owners]
        if shared:
            try:
                self._serve_shared(native, column, positions, targets, batch_size, call, mass,
                                   share, layout)
            except BaseException:
                self._regions.mark_failed(self._call)  # the requesters raise, not wait
                raise
            # A requester returns its slot once every owner of its draws has marked
            # this call done (after writing its rows there); an owner writes that slot
            # again only when the requester publishes it in a later call's values,
            # which it does only once the caller holds no tensor of this batch.
            self._regions.mark_done(self._call)
            self._regions.wait_done(self._call, [o for o in range(self.world_size)
                                                 if len(positions[self.rank][o])])
            out = self._batch_in_slot(layout, slot, batch_size)
        else:
            counts = [[len(p) for p in row] for row in positions]
            layout, error = self._serve(native, column, positions, targets, batch_size, call,
                                        mass, share, counts)
            # an owner that failed still takes part in the all_to_all (its segments
            # say so), so its requesters raise at once instead of timing out
            out, failed = self._receive(layout, counts, positions[self.rank], batch_size)
            if error is not None:
                raise error
            if failed:
                raise owner_failed(failed[0], self._call)
        if prioritized:
            q_min = min(s for s, t in zip(_from_bits(column["smallest"]).tolist(), mass) if t > 0)
            out["weights"] = (out.pop("weight") / q_min).pow(-b_exp).to(torch.float32)
        else:
            out.pop("weight")
        return out

    def _check_agreement(self, column: Dict[str, torch.Tensor]) -> None:
        for name, what in (("batch", "batch_size"), ("call", "the shards' sample counters"),
                           ("engine", "augment (the engine's config without its seed "
                                      "and device, or None) and share_augmentation")):
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

    def _owned(self, native: Optional[Any], mine: List[torch.Tensor],
               targets: List[torch.Tensor], batch_size: int, call: int,
               mass: List[float]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """The draws this rank owns, requester by requester (mine[r]: their
        positions in r's batch): their sample ids r * B + b and their rows
        (obs_index, next_index and the small fields, on the shard's device)."""
        local = self.local._native
        ids = torch.cat([r * batch_size + b for r, b in enumerate(mine)])
        if self.local.prioritized:
            fractions = torch.cat([targets[r][b] for r, b in enumerate(mine)])
            fractions = (fractions / mass[self.rank]).clamp(max=1.0 - 2.0 ** -53)
            slots = local.priority_slots_for(fractions.tolist()) if len(fractions) else []
        else:
            slots = local.uniform_slots_for(call, ids.tolist()) if len(ids) else []
        rows = local.rows_at(slots)
        device = self.local.device
        rows["indices"] = torch.tensor(slots, dtype=torch.int64) + self.rank * self.local.capacity
        return ids.to(device), {name: t.to(device) for name, t in rows.items()}

    def _serve_shared(self, native: Optional[Any], column: Dict[str, torch.Tensor],
                      positions: List[List[torch.Tensor]], targets: List[torch.Tensor],
                      batch_size: int, call: int, mass: List[float], share: bool,
                      layout: "_Layout") -> None:
        """This rank's part as owner on the shared-memory transport: the rows of
        every draw it owns, gathered and augmented with each requester's seed
        and step, written at their draw positions into the slot the requester
        published (column["slot"])."""
        mine = [positions[r][self.rank] for r in range(self.world_size)]
        with self._lock:
            self._write_shared(native, column, mine, targets, batch_size, call, mass, share,
                               layout)

    def _write_shared(self, native: Optional[Any], column: Dict[str, torch.Tensor],
                      mine: List[torch.Tensor], targets: List[torch.Tensor], batch_size: int,
                      call: int, mass: List[float], share: bool, layout: "_Layout") -> None:
        """_serve_shared's rows (the caller holds the lock)."""
        ids, rows = self._owned(native, mine, targets, batch_size, call, mass)
        storage = self.local.storage
        seeds, steps, slots = (column[name].tolist() for name in ("engine_seed", "step", "slot"))
        for r, part in _parts(mine):
            pos, k = mine[r], part.stop - part.start
            big, small = self._slot_views(layout, r, slots[r], batch_size)
            for which, name in enumerate(("obs_index", "next_index")):
                out = big[which]
                if native is not None:
                    step_r = (steps[r] + (which and not share)) & ((1 << 64) - 1)
                    native.gather_augment_for(storage, rows[name][part],
                                              seeds[r] & ((1 << 64) - 1), step_r, ids[part],
                                              out=out, out_rows=pos)
                else:
                    out.index_copy_(0, pos, _ops.gather_augment(storage, rows[name][part],
                                                                ops=[], seed=0, step=0))
            for (name, *_), view in zip(layout.small_fields, small):
                view.index_copy_(0, pos, rows[name][part])
            if r != self.rank:
                self.bytes_sent += layout.payload(k)

    def _slot_views(self, layout: "_Layout", rank: int, slot: int, batch_size: int
                    ) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
        """The obs and next_obs views, and the small fields' views, of slot
        `slot` of rank `rank`'s region (the owners' mapping, never the
        requester's slot tensors, whose use counts tell held batches apart),
        cached per region generation and layout."""
        key = (self._regions.generation, rank, slot, batch_size)
        views = self._views.get(key)
        if views is None:
            if len(self._views) > 64 or any(k[0] != key[0] for k in self._views):
                self._views.clear()
            area = self._regions.slot(rank, slot)
            views = ([layout.big(area, 0, batch_size, which) for which in (0, 1)],
                     [layout.small(area, 0, batch_size, i)
                      for i in range(len(layout.small_fields))])
            self._views[key] = views
        return views

    def _batch_in_slot(self, layout: "_Layout", slot: int,
                       batch_size: int) -> Dict[str, torch.Tensor]:
        """This rank's batch: views of its slot (copies when it is the scratch
        slot, which the next call may overwrite)."""
        area = self._regions.own_slot(slot)
        out = {"obs": layout.big(area, 0, batch_size, 0),
               "next_obs": layout.big(area, 0, batch_size, 1)}
        for i, (name, *_) in enumerate(layout.small_fields):
            out[name] = layout.small(area, 0, batch_size, i)
        if slot == self._regions.slots - 1:
            out = {name: t.clone() for name, t in out.items()}
        return out

    def _serve(self, native: Optional[Any], column: Dict[str, torch.Tensor],
               positions: List[List[torch.Tensor]], targets: List[torch.Tensor],
               batch_size: int, call: int, mass: List[float], share: bool,
               counts: List[List[int]]) -> Tuple["_Layout", Optional[Exception]]:
        """This rank's part as owner on the all_to_all transport: the rows of
        every draw it owns, gathered and augmented with each requester's seed
        and step, written into this rank's send buffer, where _Layout places
        them. Returns the layout and the error that stopped this owner, if
        any: its segments then hold index -1 (no stored slot has it), which
        tells their requesters that it failed."""
        mine = [positions[r][self.rank] for r in range(self.world_size)]
        device = self.local.device
        layout = self._layout(native)
        # requester r's receive buffer holds owner o's segment at sum(sizes[r][:o]);
        # this rank's segments go into its send buffer in rank order
        sizes = [[layout.segment(k) for k in counts[r]] for r in range(self.world_size)]
        send = [sizes[r][self.rank] for r in range(self.world_size)]
        self._send = _at_least(self._send, sum(send), device)
        self._send_sizes = send
        at = [sum(send[:r]) for r in range(self.world_size)]
        try:
            with self._lock:
                self._write_segments(native, column, mine, targets, batch_size, call, mass,
                                     share, layout, at)
        except Exception as e:  # raised by sample after the all_to_all
            for r, part in _parts(mine):
                layout.small(self._send, at[r], part.stop - part.start,
                             layout.index_field).fill_(-1)
            return layout, e
        return layout, None

    def _write_segments(self, native: Optional[Any], column: Dict[str, torch.Tensor],
                        mine: List[torch.Tensor], targets: List[torch.Tensor],
                        batch_size: int, call: int, mass: List[float], share: bool,
                        layout: "_Layout", at: List[int]) -> None:
        """_serve's rows, requester r's segment at byte at[r] of the send buffer
        (the caller holds the lock)."""
        ids, rows = self._owned(native, mine, targets, batch_size, call, mass)
        storage = self.local.storage
        for r, part in _parts(mine):
            k = part.stop - part.start
            area, base = self._send, at[r]
            for which, name in enumerate(("obs_index", "next_index")):
                out = layout.big(area, base, k, which)
                if native is not None:
                    seed_r = int(column["engine_seed"][r]) & ((1 << 64) - 1)
                    step_r = (int(column["step"][r]) + (which and not share)) & ((1 << 64) - 1)
                    native.gather_augment_for(storage, rows[name][part], seed_r, step_r,
                                              ids[part], out=out)
                else:
                    _ops.gather_augment(storage, rows[name][part], ops=[], seed=0, step=0,
                                        out=out)
            for i, (name, *_) in enumerate(layout.small_fields):
                layout.small(area, base, k, i).copy_(rows[name][part])

    def _layout(self, native: Optional[Any]) -> "_Layout":
        """Where the rows of a call lie (one per engine and storage, cached)."""
        dtype, shape = self._augmented_row(native, self.local.storage)
        if self._layout_of[0] != (dtype, shape):
            empty = self.local._native.rows_at([])
            small = [(name, empty[name].dtype, tuple(empty[name].shape[1:]))
                     for name in ("action", "reward", "discount")]
            small += [("indices", torch.int64, ()), ("weight", empty["weight"].dtype, ())]
            self._layout_of = ((dtype, shape), _Layout(dtype, shape, small))
            self._views.clear()
        return self._layout_of[1]

    def _augmented_row(self, native: Optional[Any],
                       storage: torch.Tensor) -> Tuple[torch.dtype, Tuple[int, ...]]:
        """The dtype and shape of one augmented stack (the engine's output for this
        storage: a call on 0 rows, cached per engine)."""
        key = (native, tuple(storage.shape), storage.dtype)
        if self._row_of[0] != key:
            empty = torch.empty((0, self.local.frame_stack), dtype=torch.int64,
                                device=storage.device)
            if native is not None:
                probe = native.gather_augment_for(storage, empty, 0, 0,
                                                  torch.empty(0, dtype=torch.int64,
                                                              device=storage.device))
            else:
                probe = _ops.gather_augment(storage, empty, ops=[], seed=0, step=0)
            self._row_of = (key, (probe.dtype, tuple(probe.shape[1:])))
        return self._row_of[1]

    def _fall_back(self) -> None:
        """transport="auto" after /dev/shm refused the regions (every rank agreed);
        "shared_memory" raises (a failed growth keeps the regions it had, so
        batches that fit them, and a retry once /dev/shm has room, still work)."""
        if self.transport_option == "shared_memory":
            if self._regions.capacity >= 0:
                raise RuntimeError(f"transport='shared_memory' could not grow its regions for "
                                   f"this batch: {self._regions.failure}; free space in "
                                   "/dev/shm and call again, sample at most the batch size "
                                   "that worked before, or use transport='all_to_all'")
            raise RuntimeError(f"transport='shared_memory' could not set up its regions: "
                               f"{self._regions.failure}; free space in /dev/shm or use "
                               "transport='all_to_all'")
        self.transport = "all_to_all"
        self.transport_note = f"all_to_all (shared memory failed: {self._regions.failure})"
        self._regions.close()
        self._views.clear()

    def _receive(self, layout: "_Layout", counts: List[List[int]],
                 positions: List[torch.Tensor], batch_size: int
                 ) -> Tuple[Dict[str, torch.Tensor], List[int]]:
        """This rank's batch from the all_to_all, in draw order: owner o's rows
        go to the draws positions[o]. Every tensor returned is a fresh copy (one
        call per field), never a view of the receive buffer. Also the owners
        whose segments say they failed (_serve): then no batch."""
        sizes = [layout.segment(k) for k in counts[self.rank]]
        self._recv = _at_least(self._recv, sum(sizes), self.local.device)
        area = self._recv
        self.bytes_sent += sum(n for r, n in enumerate(self._send_sizes) if r != self.rank)
        dist.all_to_all_single(area[:sum(sizes)], self._send[:sum(self._send_sizes)],
                               sizes, self._send_sizes, group=self.group)
        failed, base = [], 0
        for o, (pos, size) in enumerate(zip(positions, sizes)):
            if len(pos) and bool((layout.small(area, base, len(pos), layout.index_field) < 0)
                                 .any()):
                failed.append(o)
            base += size
        if failed:
            return {}, failed
        device = self.local.device
        obs_rows = torch.empty(batch_size, dtype=torch.int64)
        next_rows = torch.empty(batch_size, dtype=torch.int64)
        small: List[List[torch.Tensor]] = [[] for _ in layout.small_fields]
        base = 0
        for pos, size in zip(positions, sizes):
            k = len(pos)
            if k:
                first = base // layout.row_bytes
                obs_rows[pos] = torch.arange(first, first + k)
                next_rows[pos] = torch.arange(first + k, first + 2 * k)
                for i, parts in enumerate(small):
                    parts.append(layout.small(area, base, k, i))
            base += size
        order = torch.argsort(torch.cat(positions)).to(device)
        rows = layout.rows(area)  # a frame storage [R, S*C, H, W]: gather = copy rows
        out = {name: _ops.gather_augment(rows, index[:, None].to(device), ops=[], seed=0,
                                         step=0)
               for name, index in (("obs", obs_rows), ("next_obs", next_rows))}
        for (name, _, _, _), parts in zip(layout.small_fields, small):
            out[name] = torch.cat(parts).index_select(0, order)
        return out, []

    # --- priorities ----------------------------------------------------------------

    def update_priorities(self, indices: Any, priorities: Any) -> None:
        """A collective: new priorities for global ``indices`` from ``sample``, each
        sent to the rank that owns it. Every rank calls it (with K = 0 rows if it has
        none); a rank whose arguments are rejected, here or by an owner, raises its
        error and the others a ValueError naming it, and no priority changes.

        Three collectives: the counts per owner (with this rank's verdict on its
        own arguments), the pairs, and the owners' verdicts on the pairs they
        received (each owner checks them against its shard as its
        ReplayBuffer.update_priorities would); only when every verdict is good
        does any owner apply its pairs."""
        if not self.local.prioritized:
            raise ValueError("update_priorities needs a buffer built with prioritized=True")
        try:
            idx, pri = self._pairs(indices, priorities)
            error: Optional[Exception] = None
        except Exception as e:  # any: raised below, once every rank knows
            error = e
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
        slots, weights = received[:, 0], received[:, 1].contiguous().view(torch.float64)
        verdicts = self._all_gather([len(self.local)] + self._refusals(slots, weights, got_list))
        refused = [(o, r) for o in range(self.world_size) for r in range(self.world_size)
                   if verdicts[o, 1 + 2 * r] != 0]
        if refused:
            mine = [o for o, r in refused if r == self.rank]
            if not mine:
                raise ValueError(f"update_priorities was rejected on rank {refused[0][1]} "
                                 "(its error names the problem); no priority changed")
            o = mine[0]
            code, at = (int(v) for v in verdicts[o, 1 + 2 * self.rank:3 + 2 * self.rank])
            i = int(order[sum(counts[:o]) + at])
            raise self._refusal(code, o, int(verdicts[o, 0]), int(idx[i]), float(pri[i]), i)
        with self._lock:  # not between an owner's choice of slots and its gathers
            self.local.update_priorities(slots, weights)

    def _pairs(self, indices: Any, priorities: Any) -> Tuple[torch.Tensor, torch.Tensor]:
        """update_priorities' arguments as int64 and float64 CPU tensors [K],
        after the checks that need no owner (TypeError, ValueError, IndexError
        as a local buffer raises them)."""
        idx, pri = _tensor("indices", indices), _tensor("priorities", priorities)
        if idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.dim() != 1:
            raise TypeError(f"indices must be an integer tensor [K], got {idx.dtype} "
                            f"{list(idx.shape)}")
        if pri.dim() != 1 or len(pri) != len(idx) or pri.dtype == torch.bool:
            raise ValueError(f"priorities must be a real tensor [K] with K = {len(idx)}, "
                             f"got {pri.dtype} {list(pri.shape)}")
        idx = idx.to("cpu", torch.int64)
        pri = pri.to("cpu", torch.float64)
        limit = self.world_size * self.local.capacity
        if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= limit):
            bad = idx[(idx < 0) | (idx >= limit)][0]
            raise IndexError(f"index {int(bad)} is not a global slot [0, {limit}) "
                             "(owner_rank * capacity + slot)")
        if len(pri) and not bool(torch.isfinite(pri).all() and (pri >= 0).all()):
            raise ValueError("priorities must be finite and >= 0")
        return idx, pri

    def _refusals(self, slots: torch.Tensor, weights: torch.Tensor,
                  counts: List[int]) -> List[int]:
        """This owner's verdict on the pairs it received (counts[r] from rank r,
        in rank order), [code, position] per requester: code 0 when its shard
        takes every pair of r, else the first pair it refuses, at that
        position among r's pairs, with 1 for an IndexError (a slot it does not
        hold) and 2 for a ValueError (a priority its sum tree cannot hold).
        Changes nothing."""
        check = self.local._native.check_priorities
        verdict = [0] * (2 * self.world_size)
        try:
            check(slots, weights)
            return verdict
        except (IndexError, ValueError):
            pass  # find who sent the first refused pair of each requester
        start = 0
        for r, k in enumerate(counts):
            for j in range(start, start + k):
                try:
                    check(slots[j:j + 1], weights[j:j + 1])
                except (IndexError, ValueError) as e:
                    verdict[2 * r:2 * r + 2] = [1 if isinstance(e, IndexError) else 2, j - start]
                    break
            start += k
        return verdict

    def _refusal(self, code: int, owner: int, stored: int, index: int, priority: float,
                 position: int) -> Exception:
        """The error for this rank's pair (index, priority) at `position` that
        `owner` (holding `stored` frames) refused with `code` (_refusals)."""
        if code == 1:
            first = owner * self.local.capacity
            return IndexError(f"index {index} at position {position} is not a stored slot: its "
                              f"owner, rank {owner}, holds {stored} frames (global slots "
                              f"[{first}, {first + stored})); no priority changed")
        q = float(torch.tensor(priority, dtype=torch.float64).pow(self.local.alpha))
        return ValueError(f"priority {priority} at position {position} gives p^alpha = {q} "
                          f"(alpha {self.local.alpha}), more than the sum tree of its owner, "
                          f"rank {owner}, can hold; give a smaller priority (no priority "
                          "changed)")

    # --- checkpoints ---------------------------------------------------------------

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """A collective: every rank writes its shard to
        ``path/rank{r}-of-{world_size}-{save id}/replay.obsaug`` (atomically, as
        ReplayBuffer.save); once every rank's shard is written, every rank
        stages the manifest ``path/manifest.json`` (world size, save id, each
        shard's folder and size) beside it, and once every rank has, puts it
        in place with one rename; only then are the shards of earlier saves
        removed. A save that fails on any rank before the renames leaves the
        checkpoint in ``path`` as it was (on every rank, whether or not they
        share the folder): the failing rank raises its error, the others a
        RuntimeError naming it."""
        root = os.fspath(path)
        token = int(self._all_gather([int.from_bytes(os.urandom(8), "little", signed=True)])[0, 0])
        save_id = f"{token & ((1 << 64) - 1):016x}"  # rank 0's
        folder = os.path.join(root, _shard_name(self.rank, self.world_size, save_id))
        error: Optional[Exception] = None
        size = -1
        try:
            with self._lock:  # the shard as it is between adds
                self.local.save(folder)
            size = os.path.getsize(os.path.join(folder, _SHARD_FILE))
        except Exception as e:  # raised below, once every rank knows
            error = e
        sizes = self._all_gather([size])[:, 0].tolist()
        if -1 in sizes:
            shutil.rmtree(folder, ignore_errors=True)  # this save's, never in a manifest
            if error is not None:
                raise error
            raise RuntimeError(f"ShardedReplayBuffer.save: rank {sizes.index(-1)} could not "
                               f"write its shard (its error names the problem); the "
                               f"checkpoint in {root} is unchanged")
        manifest = {"format": _MANIFEST_FORMAT, "world_size": self.world_size,
                    "save_id": save_id,
                    "shards": [{"rank": r, "folder": _shard_name(r, self.world_size, save_id),
                                "bytes": n} for r, n in enumerate(sizes)]}
        # Two phases, so that a failure on any rank leaves every rank's manifest
        # as it was (ranks may not share the folder): every rank stages its copy,
        # and only once all have is it put in place (one rename per copy).
        temporary: Optional[str] = None
        try:
            temporary = _stage_manifest(root, manifest, f".{self.rank}-{save_id}")
        except Exception as e:
            error = e
        staged = self._all_gather([int(error is None)])[:, 0].tolist()
        if 0 in staged:
            if temporary is not None:
                _remove_staged(temporary)
            shutil.rmtree(folder, ignore_errors=True)  # this save's, never in a manifest
            if error is not None:
                raise error
            raise RuntimeError(f"ShardedReplayBuffer.save: rank {staged.index(0)} could not "
                               f"write the manifest of {root} (its error names the problem); "
                               "the checkpoint there is unchanged")
        try:
            _publish_manifest(root, temporary)
        except Exception as e:
            error = e
        published = self._all_gather([int(error is None)])[:, 0].tolist()
        if error is not None:
            raise error
        if 0 in published:
            raise RuntimeError(f"ShardedReplayBuffer.save: rank {published.index(0)} could not "
                               f"put the manifest of {root} in place (its error names the "
                               "problem); the shards of both saves are kept")
        self._remove_stale_shards(root, save_id)

    def _remove_stale_shards(self, root: str, save_id: str) -> None:
        """The shard folders in `root` that the manifest of save `save_id` does not
        name: this rank's of earlier saves (any world size), and on rank 0 also
        those of ranks this world does not have."""
        keep = _shard_name(self.rank, self.world_size, save_id)
        for name in os.listdir(root):
            m = _SHARD_FOLDER.fullmatch(name)
            if m is None or name == keep:
                continue
            rank = int(m.group(1))
            if rank == self.rank or (self.rank == 0 and rank >= self.world_size):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], *, group: Optional[Any] = None,
             device: Optional[Union[str, torch.device]] = None,
             transport: str = "auto") -> "ShardedReplayBuffer":
        """This rank's shard of the checkpoint ``save(path)`` wrote last (its
        manifest); a collective (whether every rank could read its shard, and
        of one save, then the options, are checked equal). A rank that cannot
        read its shard raises its error (ValueError for a folder without a
        manifest, a checkpoint of another world size, a shard missing or not
        the one the manifest names, or a corrupt one; FileNotFoundError for a
        shard folder without its file), the others a ValueError naming it."""
        rank, world = dist.get_rank(group), dist.get_world_size(group)
        local: Optional[ReplayBuffer] = None
        save_id = 0
        try:
            folder, save_id = cls._shard_folder(path, rank, world)
            local = ReplayBuffer.load(folder, device=device)
            error: Optional[Exception] = None
        except Exception as e:  # raised below, once every rank knows
            error = e
        flag_device = torch.device("cpu")
        try:  # the agreement's own device; an unusable one is this rank's error too
            flag_device = torch.device(device) if device is not None else flag_device
            torch.empty(0, device=flag_device)
        except Exception as e:
            error, flag_device = error or e, torch.device("cpu")
        flag = torch.tensor([int(error is not None), _signed(save_id)], dtype=torch.int64,
                            device=flag_device)
        every = [torch.empty_like(flag) for _ in range(world)]
        dist.all_gather(every, flag, group=group)
        failed = [r for r, t in enumerate(every) if int(t[0])]
        if error is not None:
            raise error
        if failed:
            raise ValueError(f"ShardedReplayBuffer.load: rank {failed[0]} could not load its "
                             f"shard of {os.fspath(path)} (its error names the problem); every "
                             "rank must load its own shard of one checkpoint")
        ids = [int(t[1]) & ((1 << 64) - 1) for t in every]
        if len(set(ids)) != 1:
            raise ValueError(f"ShardedReplayBuffer.load: the ranks read the manifests of "
                             f"different saves ({', '.join(f'{i:016x}' for i in ids)} by "
                             f"rank) in {os.fspath(path)}; every rank must load its shard of "
                             "one checkpoint")
        return cls(0, (), group=group, transport=transport, _local=local)

    @staticmethod
    def _shard_folder(path: Union[str, "os.PathLike[str]"], rank: int,
                      world: int) -> Tuple[str, int]:
        """This rank's shard folder as the manifest of ``path`` names it, and the
        save id, or a ValueError saying why it cannot be loaded: no manifest,
        a checkpoint of another world size, a shard folder missing, or a
        shard that is not the one the manifest names (another size)."""
        root = os.fspath(path)
        if not os.path.exists(os.path.join(root, _MANIFEST)):
            legacy = _legacy_shard_folder(root, rank, world)
            if legacy is not None:
                return legacy, 0
        manifest = _read_manifest(root)
        if manifest["world_size"] != world:
            raise ValueError(f"{root} holds a checkpoint of world size "
                             f"{manifest['world_size']}, but this group has {world} ranks; "
                             "load it with the world size that saved it")
        shard = manifest["shards"][rank]
        folder = os.path.join(root, shard["folder"])
        if not os.path.isdir(folder):
            raise ValueError(f"{root} holds a checkpoint of world size {world} without rank "
                             f"{rank}'s shard (no {shard['folder']} folder, which its manifest "
                             "names): it is incomplete; restore that folder or load another "
                             "checkpoint")
        file = os.path.join(folder, _SHARD_FILE)
        if os.path.isfile(file) and os.path.getsize(file) != shard["bytes"]:
            raise ValueError(f"{file} holds {os.path.getsize(file)} bytes, but the manifest "
                             f"of {root} names a shard of {shard['bytes']} bytes: it is not "
                             "the shard that save wrote; restore that file or load another "
                             "checkpoint")
        return folder, int(manifest["save_id"], 16)

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
