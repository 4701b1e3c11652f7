"""Regions in /dev/shm for obsaug.distributed's same-host transport: one per
rank of a group, mapped by every rank (docs/distributed.md, "Transports").

A region is a header page, which only its rank writes, then its receive
area, which the owners of its rank's draws write. Header words (int64):
[0] this rank's pid; [1] `done`: the last call whose rows this rank has
written, as owner, into every requester's area; [2] `failed`: the last
call whose rows this rank could not write (its error stopped it; the
ranks waiting for them raise instead of waiting out the timeout);
[8 + 16 p] the call whose values follow in slot p = 2 * phase + call % 2,
[9 + 16 p ...] those values (the per-call values every rank publishes
instead of an all_gather: phase 0 the stats, phase 1 the engine steps of
an accepted call). Two slots per phase: a rank writes call n + 1's values
of a phase while a slower rank may still be reading call n's, never call
n - 1's (it published n + 1 after finishing call n, which needed every
rank's call-n values of every phase).

Ordering relies on the stores of one process reaching the other processes
in program order and loads not passing loads (x86-64's TSO; the transport
is used there only): a rank writes its values or rows, then the word that
announces them; a reader waits for that word, then reads.

A receive area is `slots` batch slots of `slot_bytes` each; a requester's
batch lives in one slot, which the owners write at the draw positions and
``sample`` returns views of (the batch is not copied). The requester maps
its own file a second time with one tensor per slot, each with a storage of
its own, so ``free_slot`` can tell from the storage's use count whether the
caller still holds any tensor of the batch in that slot (the engine's output
recycler's rule). The last slot is the scratch slot: used, and copied out
of, only when the caller holds every other one.

``grow(slot_bytes, slots)`` is a collective (every rank, same values). Each rank
creates its file ``/dev/shm/obsaug-<token>-<generation>-r<rank>`` (`token`
agreed by all ranks), reserves its bytes (posix_fallocate: a full /dev/shm
fails here, not with a SIGBUS at the first write), and every rank maps
every rank's file; each rank unlinks its own file as soon as every rank has
mapped it (the mappings stay valid), so a process that dies later leaves
nothing behind. Both steps end with an all_gather of a success flag, so
every rank returns the same verdict: True, or False (nothing new mapped:
the regions of before, if any, stay as they were; the caller falls back to
another transport or raises) with the first failure in ``failure``.
``close()`` drops every mapping.
"""
from __future__ import annotations

import datetime
import mmap
import os
import socket
import time
from typing import Any, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

SHM_DIR = "/dev/shm"
HEADER = 4096  # bytes before a region's receive area
_PID, _DONE, _FAILED, _SLOTS, _SLOT_WORDS = 0, 1, 2, 8, 16


def host_identity() -> str:
    """This host's name, boot id and PID namespace: equal on two processes
    exactly when they share a kernel (and so /dev/shm, outside containers
    with private ones, which the mapping step then detects) and see each
    other's pids (the wait for a rank checks that its pid is alive)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    try:
        pids = os.readlink("/proc/self/ns/pid")
    except OSError:
        pids = "no-pid-namespace"
    return f"{socket.gethostname()}/{boot}/{pids}"


def group_timeout(group: Optional[Any]) -> datetime.timedelta:
    """The group's collective timeout (init_process_group(timeout=...))."""
    try:
        pg = group if group is not None else dist.group.WORLD
        return pg._get_backend(torch.device("cpu")).options._timeout
    except (AttributeError, RuntimeError):
        return dist.default_pg_timeout


def owner_failed(rank: int, call: int) -> RuntimeError:
    """The error of a requester whose rows of `call` owner `rank` could not write
    (both transports). Every rank counted the call, so the next one works."""
    return RuntimeError(f"rank {rank} failed to write its rows of sample call {call} (its "
                        "own error names the problem), so this rank has no batch; every "
                        "rank counted the call: fix that rank's cause and sample again")


class SharedRegions:
    def __init__(self, group: Optional[Any], rank: int, world_size: int, token: int):
        self.group, self.rank, self.world_size = group, rank, world_size
        self.token = token & ((1 << 64) - 1)
        self.timeout = group_timeout(group).total_seconds()
        self.generation = 0
        self.capacity = -1  # receive-area bytes per region; -1: nothing mapped
        self.slot_bytes, self.slots = -1, 0
        self.failure = ""
        # this rank's slots: (base tensor, its storage, the storage's use count
        # when nothing but this list refers to it)
        self._own: List[Tuple[torch.Tensor, Any, int]] = []
        self._regions: List[torch.Tensor] = []
        self._headers: List[torch.Tensor] = []
        self._pids: List[int] = []

    def _path(self, rank: int) -> str:
        return os.path.join(SHM_DIR, f"obsaug-{self.token:016x}-{self.generation}-r{rank}")

    def _agree(self, ok: bool) -> List[bool]:
        mine = torch.tensor([int(ok)], dtype=torch.int64)
        every = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine, group=self.group)
        return [bool(t.item()) for t in every]

    def grow(self, slot_bytes: int, slots: int) -> bool:
        """Receive areas of at least `slots` slots of `slot_bytes` (a multiple of
        8) each (see the module's contract). Batches the caller holds from
        earlier slots stay valid (their mapping lives as long as they do)."""
        if slot_bytes <= self.slot_bytes and slots <= self.slots:
            return True
        slot_bytes, slots = max(slot_bytes, self.slot_bytes), max(slots, self.slots)
        nbytes = slot_bytes * slots
        done = int(self._headers[self.rank][_DONE]) if self._headers else 0
        # the current regions stay mapped until the new ones are: a growth that
        # fails leaves them usable (for batches that fit, or a later retry)
        self.generation += 1
        own = self._path(self.rank)
        size = HEADER + nbytes
        created, error, mapping = False, "", None
        try:
            fd = os.open(own, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            created = True
            try:
                os.posix_fallocate(fd, 0, size)
                mapping = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except OSError as e:
            error = f"rank {self.rank} could not reserve {size} bytes at {own}: {e}"
        try:
            made = self._agree(not error)
            regions: List[torch.Tensor] = []
            if all(made):
                try:
                    regions = [torch.from_file(self._path(r), shared=True, size=size,
                                               dtype=torch.uint8)
                               for r in range(self.world_size)]
                except (OSError, RuntimeError) as e:
                    error = f"rank {self.rank} could not map the other ranks' regions: {e}"
                else:
                    header = regions[self.rank][:HEADER].view(torch.int64)
                    header[_PID] = os.getpid()
                    header[_DONE] = done
            else:
                error = error or (f"rank {made.index(False)} could not reserve {size} bytes "
                                  f"in {SHM_DIR}")
            mapped = self._agree(not error) if all(made) else made
        finally:
            if created:
                os.unlink(own)  # every rank has mapped it (or given up): nothing to leak
        if not all(mapped):
            self.failure = error or f"rank {mapped.index(False)} could not map the regions"
            return False
        self.close()
        self._regions = [r[HEADER:] for r in regions]
        self._headers = [r[:HEADER].view(torch.int64) for r in regions]
        self._pids = [int(h[_PID]) for h in self._headers]
        self.capacity, self.slot_bytes, self.slots = nbytes, slot_bytes, slots
        for j in range(slots):
            base = torch.frombuffer(mapping, dtype=torch.uint8, count=max(slot_bytes, 1),
                                    offset=HEADER + j * slot_bytes) if slot_bytes else \
                torch.empty(0, dtype=torch.uint8)
            storage = base.untyped_storage()
            self._own.append((base, storage, torch._C._storage_Use_Count(storage._cdata)))
        return True

    def slot(self, rank: int, j: int) -> torch.Tensor:
        """Slot j of rank `rank`'s receive area, flat uint8 (for its owners)."""
        return self._regions[rank][j * self.slot_bytes:(j + 1) * self.slot_bytes]

    def own_slot(self, j: int) -> torch.Tensor:
        """Slot j of this rank's area as the tensor whose views sample returns."""
        return self._own[j][0]

    def free_slot(self) -> int:
        """A slot no tensor outside this object refers to, the lowest; the
        scratch slot (the last) when the caller holds every other one."""
        for j, (_, storage, alone) in enumerate(self._own[:-1]):
            if torch._C._storage_Use_Count(storage._cdata) == alone:
                return j
        return self.slots - 1

    def exchange(self, call: int, values: Sequence[int], phase: int = 0) -> torch.Tensor:
        """Every rank's `values` for `call` (an all_gather through the headers),
        in the call's exchange `phase` (0 or 1): [world_size, len(values)] int64."""
        if len(values) >= _SLOT_WORDS:
            raise ValueError(f"at most {_SLOT_WORDS - 1} values per call, got {len(values)}")
        if phase not in (0, 1):
            raise ValueError(f"phase must be 0 or 1, got {phase}")
        at = _SLOTS + _SLOT_WORDS * (2 * phase + call % 2)
        mine = self._headers[self.rank]
        mine[at + 1:at + 1 + len(values)] = torch.tensor(values, dtype=torch.int64)
        mine[at] = call  # after the values
        self._wait(lambda h: int(h[at]) == call, range(self.world_size), call,
                   "publish its values for")
        return torch.stack([h[at + 1:at + 1 + len(values)] for h in self._headers])

    def mark_done(self, call: int) -> None:
        """This rank has written its rows of `call` into every requester's area."""
        self._headers[self.rank][_DONE] = call

    def mark_failed(self, call: int) -> None:
        """This rank could not write its rows of `call` (it raises its error)."""
        self._headers[self.rank][_FAILED] = call

    def wait_done(self, call: int, owners: Sequence[int]) -> None:
        """Until every rank in `owners` has written its rows of `call`, or marked
        it failed (mark_failed): then a RuntimeError naming the first such rank."""
        self._wait(lambda h: int(h[_DONE]) >= call or int(h[_FAILED]) == call, owners, call,
                   "write its rows of")
        failed = [r for r in owners if int(self._headers[r][_FAILED]) == call]
        if failed:
            raise owner_failed(failed[0], call)

    def _wait(self, ready: Any, ranks: Sequence[int], call: int, what: str) -> None:
        waiting = [r for r in ranks if not ready(self._headers[r])]
        if not waiting:
            return
        start = time.monotonic()
        next_check, pause = start + 0.5, 20e-6
        while True:
            waiting = [r for r in waiting if not ready(self._headers[r])]
            if not waiting:
                return
            now = time.monotonic()
            if now >= next_check:  # a rank whose process is gone never arrives
                next_check = now + 0.5
                for r in waiting:
                    try:
                        os.kill(self._pids[r], 0)
                    except ProcessLookupError:
                        raise RuntimeError(f"rank {r} (pid {self._pids[r]}) exited before it "
                                           f"could {what} sample call {call}; restart every "
                                           "rank from the last checkpoint") from None
                    except PermissionError:
                        pass
                if now - start > self.timeout:
                    raise RuntimeError(f"ranks {waiting} did not {what} sample call {call} "
                                       f"within the group's timeout ({self.timeout:g} s): they "
                                       "stopped calling sample, which is a collective")
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def close(self) -> None:
        # the tensors own the mappings: munmap when the last view goes
        self._regions, self._headers, self._own = [], [], []
        self.capacity, self.slot_bytes, self.slots = -1, -1, 0
