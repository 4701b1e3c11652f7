"""Receive regions in /dev/shm for obsaug.distributed's same-host transport:
one region per rank of a group, mapped by every rank (docs/distributed.md,
"Transports").

Contract: ``grow(nbytes)`` is a collective (every rank, same ``nbytes``). Each
rank creates its file ``/dev/shm/obsaug-<token>-<generation>-r<rank>``
(``token`` agreed by all ranks), reserves its bytes (posix_fallocate: a full
/dev/shm fails here, not with a SIGBUS at the first write), and every rank
maps every rank's file; each rank unlinks its own file as soon as every rank
has mapped it (the mappings stay valid), so a process that dies later leaves
nothing behind. Both steps end with an all_gather of a success flag, so
every rank returns the same verdict: True, or False (nothing mapped; the
caller falls back to another transport) with the first failure in
``failure``. ``region(r)`` is rank r's region, flat uint8; ``close()`` drops
every mapping.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional

import torch
import torch.distributed as dist

SHM_DIR = "/dev/shm"


def host_identity() -> str:
    """This host's name and boot id: equal on two processes exactly when they
    share a kernel (and so /dev/shm, outside containers with private ones,
    which the mapping step then detects)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = "no-boot-id"
    import socket
    return f"{socket.gethostname()}/{boot}"


class SharedRegions:
    def __init__(self, group: Optional[Any], rank: int, world_size: int, token: int):
        self.group, self.rank, self.world_size = group, rank, world_size
        self.token = token & ((1 << 64) - 1)
        self.generation = 0
        self.capacity = 0  # bytes per region
        self.failure = ""
        self._regions: List[torch.Tensor] = []

    def _path(self, rank: int) -> str:
        return os.path.join(SHM_DIR, f"obsaug-{self.token:016x}-{self.generation}-r{rank}")

    def _agree(self, ok: bool) -> List[bool]:
        mine = torch.tensor([int(ok)], dtype=torch.int64)
        every = [torch.empty_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine, group=self.group)
        return [bool(t.item()) for t in every]

    def grow(self, nbytes: int) -> bool:
        """Regions of at least `nbytes` (see the module's contract)."""
        if nbytes <= self.capacity:
            return True
        self.close()
        self.generation += 1
        own = self._path(self.rank)
        created, error = False, ""
        try:
            fd = os.open(own, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            created = True
            try:
                os.posix_fallocate(fd, 0, nbytes)
            finally:
                os.close(fd)
        except OSError as e:
            error = f"rank {self.rank} could not reserve {nbytes} bytes at {own}: {e}"
        try:
            made = self._agree(not error)
            regions: List[torch.Tensor] = []
            if all(made):
                try:
                    regions = [torch.from_file(self._path(r), shared=True, size=nbytes,
                                               dtype=torch.uint8)
                               for r in range(self.world_size)]
                except (OSError, RuntimeError) as e:
                    error = f"rank {self.rank} could not map the other ranks' regions: {e}"
            else:
                failed = made.index(False)
                error = error or f"rank {failed} could not reserve {nbytes} bytes in {SHM_DIR}"
            mapped = self._agree(not error) if all(made) else made
        finally:
            if created:
                os.unlink(own)  # every rank has mapped it (or given up): nothing to leak
        if not all(mapped):
            failed = mapped.index(False)
            self.failure = error or f"rank {failed} could not map the shared regions"
            return False
        self._regions = regions
        self.capacity = nbytes
        return True

    def region(self, rank: int) -> torch.Tensor:
        return self._regions[rank]

    def close(self) -> None:
        self._regions = []  # the tensors own the mappings: munmap when the last goes
        self.capacity = 0
