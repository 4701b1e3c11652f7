"""One rank of ShardedReplayBuffer's fault checks, launched through torchrun
with 2 ranks (gloo, CPU): ``faults_worker.py MODE TIMEOUT [I]``: every check
of MODE, or only its I-th, with a group timeout of TIMEOUT seconds (a check
that would leave a rank waiting for the others fails at it instead of
hanging). Prints ``CHECK <name> OK`` on rank 0
after each check that passed on every rank; an assertion stops the rank with a
traceback. Modes:

- ``priorities``: update_priorities whose pairs an owner refuses (a slot it
  does not hold, a priority its sum tree cannot hold), or whose priorities
  cannot be made a tensor: the wrong rank raises, the other a ValueError
  naming it, nothing changes anywhere, and a good call works afterwards.
- ``load``: a checkpoint missing one rank's shard, or with a corrupt one.
- ``engine``: engines on per-rank devices (the config's device differs) sample
  together; close() keeps no engine alive; a rank in another PID namespace is
  not on the same host; an owner that fails (its engine closed) is named by
  the rank waiting for its rows (shared memory).
- ``grow``: /dev/shm refusing the regions' growth (transport="shared_memory")
  leaves the regions usable.
"""
import datetime
import errno
import gc
import os
import shutil
import sys
import weakref

import torch
import torch.distributed as dist

import obsaug
from obsaug.distributed import ShardedReplayBuffer

from sharded_worker import CAPACITY, FRAME, engine_config, fill, ok

SIZES = [12, 14]


def expect(call, kind, words):
    """call() must raise exactly `kind` with every one of `words` in its message."""
    try:
        call()
    except Exception as e:  # the type is asserted below
        assert type(e) is kind, f"expected {kind.__name__}, got {type(e).__name__}: {e}"
        assert all(w in str(e) for w in words), (words, str(e))
    else:
        raise AssertionError(f"expected {kind.__name__} with {words}, nothing raised")


def prioritized(alpha=0.7, transport="all_to_all"):
    rank = dist.get_rank()
    rb = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), prioritized=True, alpha=alpha, beta=0.5,
                             seed=3, transport=transport)
    fill(rb, rank, SIZES[rank])
    return rb


def weights(rb):
    """Every stored slot's sampling weight and the shard's priority summary."""
    native = rb.local._native
    return native.rows_at(list(range(rb.local.num_valid)))["weight"], native.priority_summary()


def unchanged(rb, before, what):
    after = weights(rb)
    assert torch.equal(after[0], before[0]) and after[1] == before[1], what


# --- priorities ---------------------------------------------------------------------

def check_owner_refuses_a_slot():
    """Rank 0 sends its own slot 2 and rank 1's slot 200, which rank 1 does not
    hold (it stores 14 frames): rank 0 raises IndexError, rank 1 ValueError,
    and neither shard changes (rank 0's slot 2 included)."""
    rank = dist.get_rank()
    rb = prioritized()
    before = weights(rb)
    if rank == 0:
        call = lambda: rb.update_priorities(torch.tensor([2, CAPACITY + 200]),  # noqa: E731
                                            torch.tensor([5.0, 1.0]))
        expect(call, IndexError, [f"index {CAPACITY + 200} at position 1 is not a stored slot",
                                  "rank 1, holds 14 frames"])
    else:
        expect(lambda: rb.update_priorities(torch.tensor([], dtype=torch.int64),
                                            torch.tensor([])),
               ValueError, ["rejected on rank 0"])
    unchanged(rb, before, "a refused update changed priorities")
    ok("owner_refuses_a_slot")


def check_owner_refuses_a_priority():
    """alpha = 1: rank 0 gives rank 1's slot 3 the priority 1e308, above what
    rank 1's sum tree holds (DBL_MAX / leaves); rank 1 updates its own slot 2.
    Rank 0 raises ValueError naming p^alpha, rank 1 ValueError naming rank 0,
    and rank 1's own update does not happen either."""
    rank = dist.get_rank()
    rb = prioritized(alpha=1.0)
    before = weights(rb)
    if rank == 0:
        expect(lambda: rb.update_priorities(torch.tensor([CAPACITY + 3]),
                                            torch.tensor([1e308], dtype=torch.float64)),
               ValueError, ["priority 1e+308 at position 0 gives p^alpha", "rank 1"])
    else:
        expect(lambda: rb.update_priorities(torch.tensor([CAPACITY + 2]), torch.tensor([7.0])),
               ValueError, ["rejected on rank 0"])
    unchanged(rb, before, "a refused update changed priorities")
    ok("owner_refuses_a_priority")


def check_unconvertible_priorities():
    """priorities=None on rank 0: TypeError there, ValueError naming rank 0 on
    rank 1 (at once, not after the group's timeout); then a good call works."""
    rank = dist.get_rank()
    rb = prioritized()
    before = weights(rb)
    idx = torch.tensor([rank * CAPACITY + 1])
    if rank == 0:
        expect(lambda: rb.update_priorities(idx, None), TypeError,
               ["priorities must be given, got None"])
    else:
        expect(lambda: rb.update_priorities(idx, torch.tensor([2.0])), ValueError,
               ["rejected on rank 0"])
    unchanged(rb, before, "a refused update changed priorities")
    rb.update_priorities(idx, torch.tensor([4.0]))
    want = torch.tensor(4.0, dtype=torch.float64) ** 0.7
    assert torch.allclose(weights(rb)[0][1], want, rtol=1e-12), "the good call after"
    ok("unconvertible_priorities")


def check_indices_torch_cannot_read():
    """Indices on the meta device (NotImplementedError when read) on rank 1: any
    error of the arguments is inside the agreement, so rank 0 hears of it at once."""
    rank = dist.get_rank()
    rb = prioritized()
    before = weights(rb)
    if rank == 1:
        idx = torch.empty(1, dtype=torch.int64, device="meta")
        expect(lambda: rb.update_priorities(idx, torch.tensor([2.0])), NotImplementedError,
               ["meta"])
    else:
        expect(lambda: rb.update_priorities(torch.tensor([1]), torch.tensor([2.0])), ValueError,
               ["rejected on rank 1"])
    unchanged(rb, before, "a refused update changed priorities")
    ok("indices_torch_cannot_read")


# --- load ---------------------------------------------------------------------------

def saved_checkpoint(root, name):
    """A prioritized buffer saved by both ranks to root/name (its path)."""
    path = os.path.join(root, name)
    prioritized().save(path)
    dist.barrier()
    return path


def shard_folder(path, rank):
    """The folder of rank `rank`'s shard in the checkpoint at `path`."""
    [name] = [n for n in os.listdir(path) if n.startswith(f"rank{rank}-of-2-")]
    return os.path.join(path, name)


def check_load_without_a_shard(root):
    """Rank 1's folder is gone: rank 1 raises a ValueError saying its shard is
    missing, rank 0 one naming rank 1."""
    rank = dist.get_rank()
    path = saved_checkpoint(root, "missing")
    if rank == 1:
        shutil.rmtree(shard_folder(path, 1))
    dist.barrier()
    words = (["world size 2 without rank 1's shard", "no rank1-of-2-", "manifest names"]
             if rank == 1 else ["rank 1 could not load its shard"])
    expect(lambda: ShardedReplayBuffer.load(path), ValueError, words)
    ok("load_without_a_shard")


def check_load_onto_an_unusable_device(root):
    """Rank 1 loads onto a device it does not have: its error, and rank 0 hears
    of it through the agreement instead of waiting for the group's timeout."""
    rank = dist.get_rank()
    path = saved_checkpoint(root, "device")
    if rank == 1:
        try:
            ShardedReplayBuffer.load(path, device="cuda:77")
        except Exception as e:  # the type is torch's (no such device, or no CUDA)
            assert "could not load its shard" not in str(e), str(e)
        else:
            raise AssertionError("a load onto cuda:77 succeeded")
    else:
        expect(lambda: ShardedReplayBuffer.load(path), ValueError,
               ["rank 1 could not load its shard"])
    ok("load_onto_an_unusable_device")


def check_load_a_corrupt_shard(root):
    """A byte of rank 1's file is flipped (its size, which the manifest names,
    is right): rank 1 raises the corrupt file's ValueError, rank 0 one naming
    rank 1."""
    rank = dist.get_rank()
    path = saved_checkpoint(root, "corrupt")
    if rank == 1:
        file = os.path.join(shard_folder(path, 1), "replay.obsaug")
        with open(file, "r+b") as f:
            f.seek(os.path.getsize(file) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x5A]))
    dist.barrier()
    words = ["replay.obsaug"] if rank == 1 else ["rank 1 could not load its shard"]
    expect(lambda: ShardedReplayBuffer.load(path), ValueError, words)
    ok("load_a_corrupt_shard")


# --- engine -------------------------------------------------------------------------

class RankDeviceEngine(obsaug.Engine):
    """An engine whose config names a device of its rank's own (cuda:RANK, as
    on a machine with one GPU per rank); it runs on the CPU like the shards."""

    @property
    def config(self):
        return dict(super().config, device=f"cuda:{dist.get_rank()}")


def check_engines_on_per_rank_devices():
    rank = dist.get_rank()
    rb = prioritized()
    engine = RankDeviceEngine(engine_config(), rank=rank, world_size=2)
    batch = rb.sample(6, augment=engine)
    assert batch["obs"].shape == (6, 9, 6, 6), batch["obs"].shape
    engine.close()
    rb.close()
    ok("engines_on_per_rank_devices")


def check_close_keeps_no_engine(transport):
    rank = dist.get_rank()
    rb = prioritized(transport=transport)
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=2)
    rb.sample(6, augment=engine)
    alive = weakref.ref(engine)
    rb.close()
    engine.close()
    del engine
    gc.collect()
    assert alive() is None, f"a closed buffer ({transport}) keeps its last engine alive"
    ok(f"close_keeps_no_engine_{transport}")


def check_another_pid_namespace():
    """Rank 1 reports another PID namespace: not the same host, so "auto" picks
    all_to_all and "shared_memory" is refused."""
    rank = dist.get_rank()
    if rank == 1:
        real = os.readlink
        os.readlink = lambda p, *a, **k: ("pid:[1]" if str(p) == "/proc/self/ns/pid"
                                          else real(p, *a, **k))
    try:
        rb = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3, transport="auto")
        assert rb.transport == "all_to_all", rb.transport
        fill(rb, rank, SIZES[rank])
        assert rb.sample(4)["obs"].shape == (4, 9, 8, 8)
        rb.close()
        expect(lambda: ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3,
                                           transport="shared_memory"),
               ValueError, ["needs every rank on one host", "got 2 hosts"])
    finally:
        if rank == 1:
            os.readlink = real
    ok("another_pid_namespace")


def check_an_owner_that_fails_is_named():
    """transport="shared_memory": rank 1's engine is closed after the values
    exchange could still start (it fails as owner, while writing rows): rank 1
    raises the engine's error, rank 0 a RuntimeError naming rank 1 at once
    instead of waiting out the group's timeout; the next call works."""
    rank = dist.get_rank()
    rb = prioritized(transport="shared_memory")
    engine = obsaug.Engine(engine_config(), rank=rank, world_size=2)
    rb.sample(16, augment=engine)
    if rank == 1:
        engine.close()
        expect(lambda: rb.sample(16, augment=engine), RuntimeError, ["engine is closed"])
        engine = obsaug.Engine(engine_config(), rank=rank, world_size=2)
    else:
        expect(lambda: rb.sample(16, augment=engine), RuntimeError,
               ["rank 1 failed to write its rows of sample call 2"])
    assert rb.sample(16, augment=engine)["obs"].shape == (16, 9, 6, 6)
    engine.close()
    rb.close()
    ok("an_owner_that_fails_is_named")


# --- grow ---------------------------------------------------------------------------

def check_failed_growth_keeps_the_regions():
    """transport="shared_memory": /dev/shm refuses the reservation when a larger
    batch needs larger regions. That call raises a RuntimeError on every rank;
    batches that fit the regions still work while /dev/shm is full, and the
    larger batch works once it has room."""
    rank = dist.get_rank()
    rb = ShardedReplayBuffer(CAPACITY, FRAME, 3, (), seed=3, transport="shared_memory")
    fill(rb, rank, SIZES[rank])
    held = rb.sample(4)
    clone = {key: t.clone() for key, t in held.items()}
    real = os.posix_fallocate

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    os.posix_fallocate = full
    try:
        expect(lambda: rb.sample(4000), RuntimeError, ["free space in /dev/shm",
                                                        "No space left on device"])
        assert rb.sample(4)["obs"].shape == (4, 9, 8, 8)  # fits: no growth needed
    finally:
        os.posix_fallocate = real
    assert rb.transport == "shared_memory"
    assert rb.sample(4000)["obs"].shape == (4000, 9, 8, 8)
    assert all(torch.equal(held[key], clone[key]) for key in held), "a held batch changed"
    rb.close()
    ok("failed_growth_keeps_the_regions")


MODES = {
    "priorities": [check_owner_refuses_a_slot, check_owner_refuses_a_priority,
                   check_unconvertible_priorities, check_indices_torch_cannot_read],
    "load": [lambda: check_load_without_a_shard(os.environ["FAULTS_TMP"]),
             lambda: check_load_a_corrupt_shard(os.environ["FAULTS_TMP"]),
             lambda: check_load_onto_an_unusable_device(os.environ["FAULTS_TMP"])],
    "engine": [check_engines_on_per_rank_devices,
               lambda: check_close_keeps_no_engine("shared_memory"),
               lambda: check_close_keeps_no_engine("all_to_all"),
               check_another_pid_namespace, check_an_owner_that_fails_is_named],
    "grow": [check_failed_growth_keeps_the_regions],
}


def main():
    mode, timeout = sys.argv[1], float(sys.argv[2])
    if mode not in MODES:
        sys.exit(f"MODE must be one of {', '.join(MODES)}, got {mode!r}")
    only = int(sys.argv[3]) if len(sys.argv) > 3 else None  # run check `only` of the mode
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    assert dist.get_world_size() == 2, "faults_worker.py runs with 2 ranks"
    for i, check in enumerate(MODES[mode]):
        if only is None or i == only:
            check()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
