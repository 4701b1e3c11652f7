"""One rank of ShardedReplayBuffer's consistency checks, launched through
torchrun (gloo, CPU shards): ``consistency_worker.py MODE TIMEOUT [ARGS]``
with a group timeout of TIMEOUT seconds (it only bounds a hang). A check
prints ``CHECK <name> OK`` on rank 0 when it passed on every rank (each rank's
verdict is gathered; a rank whose check failed prints its traceback). Modes:

- ``threads`` (any world size): an actor thread adds to each rank's shard
  while the main thread samples, on both transports: every batch is a set of
  whole, consistent stacks (as a local buffer's under the same threads), and
  no sample raises.
- ``owner_fails`` (2 or 3 ranks): in one sample call the last rank fails as
  owner (its engine closed) while rank 0 needs none of its rows (a buffer
  seed chosen so): rank 0 returns its batch, the others raise, every rank
  counts the call, and after the failing rank's cause is fixed the next
  call works on every rank; on both transports.
- ``steps`` (2 ranks): a refused sample (all shards empty; ranks that
  disagree) takes no engine step; an accepted one takes 2 (1 with
  share_augmentation); on both transports.
- ``save DIR N`` / ``load DIR N``: every rank saves a shard of N frames per
  rank to DIR, or loads DIR and prints ``LOADED <rank> <frames> <calls>``,
  or ``REFUSED <rank> <type>: <message>``.
- ``save_fails`` (2 ranks): a save that fails on one rank leaves the previous
  checkpoint whole and loadable (and no folder of the failed save); a shard
  that is not the one the manifest names is refused.
"""
import datetime
import os
import shutil
import sys
import tempfile
import threading
import traceback

import torch
import torch.distributed as dist

import obsaug
from obsaug import _C
from obsaug.distributed import ShardedReplayBuffer

from faults_worker import expect

TRANSPORTS = ["shared_memory", "all_to_all"]
ENGINE = {"device": "cpu", "seed": 5, "frames": {"stack": 3, "channels": 3, "height": 8,
                                                 "width": 8},
          "pipeline": [{"op": "shift", "pad": 2}], "output": {"dtype": "uint8"}}


def check(name, run):
    """run() on every rank; CHECK name OK on rank 0 when it passed on every rank."""
    try:
        run()
        good = 1
    except Exception:  # any failure: printed, and the verdict says so
        traceback.print_exc()
        sys.stderr.flush()
        good = 0
    every = [torch.zeros(1, dtype=torch.int64) for _ in range(dist.get_world_size())]
    dist.all_gather(every, torch.tensor([good]))
    if dist.get_rank() == 0:
        verdict = [int(t) for t in every]
        print(f"CHECK {name} OK" if all(verdict) else f"CHECK {name} FAILED on ranks "
              f"{[r for r, g in enumerate(verdict) if not g]}", flush=True)


# --- threads ------------------------------------------------------------------------

THREAD_FRAME = (1, 8, 8)


def frame(t):
    """Frame t: t % 256 in every pixel but [0, 0, 1], which holds t // 256."""
    f = torch.full(THREAD_FRAME, t % 256, dtype=torch.uint8)
    f[0, 0, 1] = t // 256
    return f


def frame_times(stacks):
    """The time t of every frame of stacks [B, S, 1, H, W], or -1 where the frame is
    not whole (its pixels disagree)."""
    body = stacks.flatten(2).long()
    low = body[:, :, 0]
    rest = torch.cat([body[:, :, :1], body[:, :, 2:]], dim=2)
    whole = (rest == low[:, :, None]).all(dim=2)
    return torch.where(whole, low + 256 * body[:, :, 1], torch.full_like(low, -1))


def torn_rows(batch):
    """Rows of `batch` whose stacks are not one consistent transition: obs frames
    consecutive (the episode's first frame, t = 0, repeated in front), next_obs
    the same stack one step on."""
    s = 3
    obs = frame_times(batch["obs"].view(-1, s, *THREAD_FRAME))
    nxt = frame_times(batch["next_obs"].view(-1, s, *THREAD_FRAME))
    bad = (obs < 0).any(dim=1) | (nxt < 0).any(dim=1)
    d = obs[:, 1:] - obs[:, :-1]
    bad |= ~((d == 1) | ((d == 0) & (obs[:, 1:] == 0))).all(dim=1)
    bad |= nxt[:, -1] != obs[:, -1] + 1
    return int(bad.sum())


def threads_check(transport):
    rb = ShardedReplayBuffer(48, THREAD_FRAME, 3, (), seed=1, transport=transport)
    rb.add_first(frame(0))
    for t in range(1, 40):
        rb.add(0.0, 1.0, frame(t), False, False)
    stop = threading.Event()

    def actor():
        t = 40
        while not stop.is_set() and t < 60000:
            rb.add(0.0, 1.0, frame(t), False, False)
            t += 1

    thread = threading.Thread(target=actor)
    thread.start()
    torn, errors = 0, []
    try:
        for _ in range(150):
            try:
                torn += torn_rows(rb.sample(16))
            except Exception as e:  # counted: none may happen
                errors.append(f"{type(e).__name__}: {e}")
    finally:
        stop.set()
        thread.join()
    rb.close()
    assert not errors, f"{transport}: {len(errors)} samples raised, first {errors[0]}"
    assert torn == 0, f"{transport}: {torn} torn rows in 150 batches of 16"


# --- owner_fails --------------------------------------------------------------------

OWNER_FRAME = (3, 8, 8)
OWNER_FRAMES = 10  # per rank: 9 valid transitions each


def failing_seed(world, batch):
    """A buffer seed whose call 1 makes rank 0 need no row of the last rank while
    the last rank owns at least one draw (of itself or another rank)."""
    mass = [float(OWNER_FRAMES - 1)] * world
    for seed in range(10000):
        owners = [_C.shard_draws(seed, 1, r * batch, batch, mass, False)[0]
                  for r in range(world)]
        if world - 1 not in owners[0] and any(world - 1 in o for o in owners[1:]):
            return seed, owners
    raise AssertionError("no seed found")


def owner_fails_check(transport):
    rank, world = dist.get_rank(), dist.get_world_size()
    last, batch = world - 1, 4
    seed, owners = failing_seed(world, batch)
    rb = ShardedReplayBuffer(64, OWNER_FRAME, 3, (), seed=seed, transport=transport)
    rb.add_first(torch.zeros(OWNER_FRAME, dtype=torch.uint8))
    for t in range(1, OWNER_FRAMES):
        rb.add(0.0, 1.0, torch.full(OWNER_FRAME, t, dtype=torch.uint8), False, False)
    engine = obsaug.Engine(ENGINE, rank=rank, world_size=world)
    rb.sample(batch, augment=engine)  # call 0: every rank
    if rank == last:
        engine.close()  # fails as owner of call 1
        expect(lambda: rb.sample(batch, augment=engine), RuntimeError, ["engine is closed"])
        engine = obsaug.Engine(ENGINE, rank=rank, world_size=world)  # the cause, fixed
    elif last in owners[rank]:
        expect(lambda: rb.sample(batch, augment=engine), RuntimeError,
               [f"rank {last} failed to write its rows of sample call",
                "fix that rank's cause and sample again"])
    else:
        assert rb.sample(batch, augment=engine)["obs"].shape == (batch, 9, 8, 8)
    calls = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(calls, torch.tensor([rb.local.sample_calls]))
    assert [int(c) for c in calls] == [2] * world, \
        f"every rank must count the failed call: sample counters {[int(c) for c in calls]}"
    for _ in range(2):  # sampling again works on every rank
        assert rb.sample(batch, augment=engine)["obs"].shape == (batch, 9, 8, 8)
    assert rb.local.sample_calls == 4, rb.local.sample_calls
    engine.close()
    rb.close()


# --- steps --------------------------------------------------------------------------

def steps_check(transport):
    rank = dist.get_rank()
    rb = ShardedReplayBuffer(32, OWNER_FRAME, 3, (), seed=3, transport=transport)
    engine = obsaug.Engine(ENGINE, rank=rank, world_size=dist.get_world_size())
    expect(lambda: rb.sample(4, augment=engine), ValueError, ["0 valid transitions"])
    assert engine.step == 0, f"{transport}: a sample of empty shards took {engine.step} steps"
    rb.add_first(torch.zeros(OWNER_FRAME, dtype=torch.uint8))
    for t in range(1, 8):
        rb.add(0.0, 1.0, torch.full(OWNER_FRAME, t, dtype=torch.uint8), False, False)
    expect(lambda: rb.sample(4 + rank, augment=engine), ValueError,
           ["batch_size must be equal on every rank"])
    assert engine.step == 0, f"{transport}: a refused sample took {engine.step} steps"
    rb.sample(4, augment=engine)
    assert engine.step == 2, f"{transport}: an accepted sample took {engine.step} steps, not 2"
    rb.sample(4, augment=engine, share_augmentation=True)
    assert engine.step == 3, f"{transport}: a shared-step sample took {engine.step - 2}, not 1"
    assert rb.local.sample_calls == 2, rb.local.sample_calls
    engine.close()
    rb.close()


# --- checkpoints --------------------------------------------------------------------

CKPT_FRAME = (1, 4, 4)


def filled(n, transport="all_to_all"):
    rb = ShardedReplayBuffer(64, CKPT_FRAME, 1, (), seed=0, transport=transport)
    rb.add_first(torch.zeros(CKPT_FRAME, dtype=torch.uint8))
    for t in range(1, n):
        rb.add(0.0, 1.0, torch.full(CKPT_FRAME, t, dtype=torch.uint8), False, False)
    return rb


def say(line):
    """One line in one write: the ranks share torchrun's output pipe, and print's
    separate write of the newline (unbuffered) lets another rank's line in between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def run_save(root, n):
    rb = filled(n)
    rb.sample(2)
    rb.save(root)
    say(f"SAVED {dist.get_rank()} {len(rb)}")
    rb.close()


def run_load(root):
    rank = dist.get_rank()
    try:
        rb = ShardedReplayBuffer.load(root, transport="all_to_all")
    except Exception as e:  # printed for the test to assert
        say(f"REFUSED {rank} {type(e).__name__}: {e}")
        return
    say(f"LOADED {rank} {len(rb)} {rb.local.sample_calls}")
    rb.close()


def one_folder():
    tmp = [tempfile.mkdtemp(prefix="obsaug-ckpt-") if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(tmp, src=0)
    return tmp[0]


def shard_folders(root):
    return sorted(name for name in os.listdir(root) if name.startswith("rank"))


def save_fails_check():
    """Checkpoint A (5 frames per rank) is saved; then a save of 12 frames per rank
    fails on rank 1 (its shard's write raises): rank 1 raises its OSError, rank 0
    a RuntimeError naming rank 1; A still loads whole, and no folder of the
    failed save is left."""
    rank = dist.get_rank()
    root = one_folder()
    try:
        rb = filled(5)
        rb.save(root)
        dist.barrier()
        before = shard_folders(root)
        for t in range(5, 12):
            rb.add(0.0, 1.0, torch.full(CKPT_FRAME, t, dtype=torch.uint8), False, False)
        if rank == 1:
            def broken(path):
                raise OSError(28, "No space left on device")
            rb.local.save = broken
            expect(lambda: rb.save(root), OSError, ["No space left on device"])
        else:
            expect(lambda: rb.save(root), RuntimeError,
                   ["rank 1 could not write its shard", "unchanged"])
        dist.barrier()
        assert shard_folders(root) == before, (shard_folders(root), before)
        back = ShardedReplayBuffer.load(root, transport="all_to_all")
        assert len(back) == 5, f"rank {rank} loaded {len(back)} frames, not checkpoint A's 5"
        back.close()
        rb.close()
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)


def foreign_shard_check():
    """Rank 1's file in checkpoint X is replaced by its file of checkpoint Y (another
    save): rank 1 refuses it with a ValueError saying it is not the shard the
    manifest names, rank 0 raises a ValueError naming rank 1."""
    rank = dist.get_rank()
    x, y = one_folder(), one_folder()
    try:
        filled(5).save(x)
        filled(9).save(y)
        dist.barrier()
        if rank == 1:
            [fx] = [n for n in shard_folders(x) if n.startswith("rank1-")]
            [fy] = [n for n in shard_folders(y) if n.startswith("rank1-")]
            shutil.copyfile(os.path.join(y, fy, "replay.obsaug"),
                            os.path.join(x, fx, "replay.obsaug"))
        dist.barrier()
        words = (["not the shard", "manifest"] if rank == 1
                 else ["rank 1 could not load its shard"])
        expect(lambda: ShardedReplayBuffer.load(x, transport="all_to_all"), ValueError, words)
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(x, ignore_errors=True)
            shutil.rmtree(y, ignore_errors=True)


def manifest_fails_check():
    """Each rank saves into a folder of its own (ranks on hosts without a shared
    folder): checkpoint A, then a save whose manifest rank 1 cannot stage. No
    rank's manifest changed, so every rank still loads A whole."""
    rank = dist.get_rank()
    top = one_folder()
    root = os.path.join(top, f"host{rank}")
    stage = obsaug.distributed._stage_manifest
    try:
        rb = filled(5)
        rb.save(root)
        for t in range(5, 12):
            rb.add(0.0, 1.0, torch.full(CKPT_FRAME, t, dtype=torch.uint8), False, False)
        before = shard_folders(root)
        if rank == 1:
            def broken(*args):
                raise OSError(28, "No space left on device")
            obsaug.distributed._stage_manifest = broken
            expect(lambda: rb.save(root), OSError, ["No space left on device"])
        else:
            expect(lambda: rb.save(root), RuntimeError,
                   ["rank 1 could not write the manifest", "unchanged"])
        assert shard_folders(root) == before, (shard_folders(root), before)
        assert sorted(os.listdir(root)) == sorted(before + ["manifest.json"]), os.listdir(root)
        back = ShardedReplayBuffer.load(root, transport="all_to_all")
        assert len(back) == 5, f"rank {rank} loaded {len(back)} frames, not checkpoint A's 5"
        back.close()
        rb.close()
    finally:
        obsaug.distributed._stage_manifest = stage
        dist.barrier()
        if rank == 0:
            shutil.rmtree(top, ignore_errors=True)


def legacy_layout_check():
    """A checkpoint saved before manifests (rank{r}-of-{W} folders) loads; the next
    save writes the manifest layout and removes the old folders."""
    rank, world = dist.get_rank(), dist.get_world_size()
    root = one_folder()
    try:
        filled(7).save(root)
        dist.barrier()
        [mine] = [n for n in shard_folders(root) if n.startswith(f"rank{rank}-")]
        os.rename(os.path.join(root, mine), os.path.join(root, f"rank{rank}-of-{world}"))
        dist.barrier()
        if rank == 0:
            os.remove(os.path.join(root, "manifest.json"))
        dist.barrier()
        back = ShardedReplayBuffer.load(root, transport="all_to_all")
        assert len(back) == 7, f"rank {rank} loaded {len(back)} frames, not 7"
        back.save(root)
        dist.barrier()
        names = shard_folders(root)
        assert len(names) == world and all("-of-%d-" % world in n for n in names), names
        again = ShardedReplayBuffer.load(root, transport="all_to_all")
        assert len(again) == 7
        again.close()
        back.close()
    finally:
        dist.barrier()
        if rank == 0:
            shutil.rmtree(root, ignore_errors=True)


def main():
    mode, timeout = sys.argv[1], float(sys.argv[2])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout))
    if mode == "threads":
        for transport in TRANSPORTS:
            check(f"threads_{transport}", lambda: threads_check(transport))
    elif mode == "owner_fails":
        for transport in TRANSPORTS:
            check(f"owner_fails_{transport}", lambda: owner_fails_check(transport))
    elif mode == "steps":
        for transport in TRANSPORTS:
            check(f"steps_{transport}", lambda: steps_check(transport))
    elif mode == "save":
        run_save(sys.argv[3], int(sys.argv[4]))
    elif mode == "load":
        run_load(sys.argv[3])
    elif mode == "save_fails":
        check("save_fails_keeps_the_checkpoint", save_fails_check)
        check("foreign_shard_refused", foreign_shard_check)
        check("manifest_fails_keeps_every_rank_s_checkpoint", manifest_fails_check)
        check("legacy_layout_loads", legacy_layout_check)
    else:
        sys.exit(f"unknown mode {mode!r}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
