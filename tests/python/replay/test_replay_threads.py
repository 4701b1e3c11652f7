"""A ReplayBuffer shared between threads (docs/replay.md, "Threads") and
checkpoints written into one directory at once (docs/replay.md, "Checkpoints")."""
import fcntl
import os
import threading
import time

import pytest
import torch

import obsaug

pytestmark = pytest.mark.skipif(not hasattr(obsaug, "ReplayBuffer"),
                                reason="built without the replay buffer")

FRAME = (3, 8, 8)


class Frames:
    """Frames tagged with their order of adding: pixels (0, 0, 0) and (0, 0, 1) hold
    the count's low and high bytes."""

    def __init__(self):
        self.count = 0

    def next(self):
        f = torch.zeros(FRAME, dtype=torch.uint8)
        f[0, 0, 0], f[0, 0, 1] = self.count % 256, (self.count // 256) % 256
        self.count += 1
        return f


def newest_tags(stacks):
    """The tag of each stack's newest frame (its last 3 channels)."""
    return stacks[:, -3, 0, 0].long() + 256 * stacks[:, -3, 0, 1].long()


def add_steps(rb, frames, steps):
    """Steps of episodes 37 frames long (then truncated and restarted)."""
    for t in range(steps):
        rb.add(torch.tensor([t, -t], dtype=torch.float32), float(t % 7), frames.next(),
               truncated=t % 37 == 36)
        if t % 37 == 36:
            rb.add_first(frames.next())


def stocked(capacity, prioritized, frames=None):
    frames = frames or Frames()
    rb = obsaug.ReplayBuffer(capacity=capacity, frame_shape=FRAME, frame_stack=3,
                             action_shape=(2,), n_step=3, prioritized=prioritized, seed=3)
    rb.add_first(frames.next())
    add_steps(rb, frames, capacity)
    return rb


def run_together(*jobs):
    """Runs the jobs in threads; the exceptions they raised, by job."""
    errors = [[] for _ in jobs]

    def guarded(job, sink):
        try:
            job()
        except Exception as e:  # noqa: BLE001 - every failure is reported below
            sink.append(e)

    threads = [threading.Thread(target=guarded, args=(job, sink)) for job, sink in zip(jobs, errors)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_an_actor_adding_while_a_learner_samples(prioritized):
    """Adds in one thread, sample + update_priorities in another: no call fails and every
    sampled next_obs is 1..n_step frames after its obs (without the buffer's lock the
    sampler read rings half-way through an add)."""
    frames = Frames()
    rb = stocked(256, prioritized, frames)
    torn = []

    def actor():
        add_steps(rb, frames, 4000)

    def learner():
        for _ in range(1500):
            out = rb.sample(32)
            ahead = (newest_tags(out["next_obs"]) - newest_tags(out["obs"])) % 65536
            if not bool(((ahead >= 1) & (ahead <= 3)).all()):
                torn.append(ahead.tolist())
            if prioritized:
                rb.update_priorities(out["indices"], torch.rand(32) + 0.1)

    errors = run_together(actor, learner)
    assert errors == [[], []]
    assert not torn, f"next_obs not 1..n_step frames after obs: {torn[:2]}"
    assert rb.total_frames > 4000


def test_two_saves_into_one_directory_publish_a_whole_checkpoint(tmp_path):
    """Each save writes a temporary of its own: both succeed, the published file is one of
    the two buffers whole, and no temporary is left behind."""
    small, large = stocked(64, True), stocked(96, False)
    target = tmp_path / "ckpt"
    stocked(32, False).save(str(target))  # a previous checkpoint
    for trial in range(10):
        errors = run_together(lambda: small.save(str(target)), lambda: large.save(str(target)))
        assert errors == [[], []], f"trial {trial}"
        loaded = obsaug.ReplayBuffer.load(str(target))
        winner = small if loaded.capacity == small.capacity else large
        assert loaded.capacity == winner.capacity and loaded.prioritized == winner.prioritized
        assert torch.equal(loaded.storage, winner.storage), f"trial {trial}"
        assert sorted(p.name for p in target.iterdir()) == ["replay.obsaug"], f"trial {trial}"


def test_a_save_removes_only_the_temporaries_of_dead_writers(tmp_path):
    """A killed save leaves replay.obsaug.tmp.XXXXXX behind; a later save removes it once it
    is a minute old, but not a temporary some live writer holds locked, nor a recent one
    (a writer on a host whose locks this one cannot see)."""
    target = tmp_path / "ckpt"
    target.mkdir()
    old = time.time() - 120
    files = {"replay.obsaug.tmp.dead01": b"half a checkpoint",
             "replay.obsaug.tmp": b"half a checkpoint",       # the name older versions used
             "replay.obsaug.tmp.live01": b"being written",
             "replay.obsaug.tmp.recent": b"being written elsewhere",
             "notes.txt": b"mine"}
    for name, data in files.items():
        (target / name).write_bytes(data)
        if name != "replay.obsaug.tmp.recent":
            os.utime(target / name, (old, old))
    with open(target / "replay.obsaug.tmp.live01", "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        stocked(32, False).save(str(target))
    assert sorted(p.name for p in target.iterdir()) == [
        "notes.txt", "replay.obsaug", "replay.obsaug.tmp.live01", "replay.obsaug.tmp.recent"]
    stocked(32, False).save(str(target))             # unlocked now: removed
    assert sorted(p.name for p in target.iterdir()) == [
        "notes.txt", "replay.obsaug", "replay.obsaug.tmp.recent"]


def test_many_writers_into_one_directory_all_succeed(tmp_path):
    """Four buffers saving into one directory over and over: every save succeeds (a
    finished temporary stays locked until its rename, so no sweep takes it)."""
    buffers = [stocked(16 + 8 * k, False) for k in range(4)]
    target = str(tmp_path / "ckpt")

    def saves(rb):
        return lambda: [rb.save(target) for _ in range(150)]

    assert run_together(*(saves(rb) for rb in buffers)) == [[], [], [], []]
    assert obsaug.ReplayBuffer.load(target).capacity in {rb.capacity for rb in buffers}
