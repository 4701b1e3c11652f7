"""ShardedReplayBuffer's outcomes stay consistent across threads and ranks
(consistency_worker.py under torchrun, gloo, CPU): an actor thread adding
while the learner samples, an owner failing in a sample call, the engine
steps of a refused call, and checkpoints that are complete or refused
(a manifest names the shards of the last finished save)."""
import os
import re
import shutil
import tempfile

import pytest

import obsaug

from test_sharded_replay import torchrun

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "consistency_worker.py")
GROUP_TIMEOUT = 15  # bounds a hang; no check waits for it

pytestmark = pytest.mark.skipif(not hasattr(obsaug._C, "shard_draws"),
                                reason="obsaug was built without the replay buffer")


def run(nproc, *args, timeout=150):
    return torchrun(nproc, args[0], GROUP_TIMEOUT, *args[1:], worker=WORKER, timeout=timeout)


def assert_checks(out, names):
    for name in names:
        assert f"CHECK {name} OK" in out, out[-6000:]


TRANSPORTS = ["shared_memory", "all_to_all"]


def test_an_actor_thread_adding_while_sampling_never_tears_a_batch():
    rc, out = run(2, "threads")
    assert_checks(out, [f"threads_{t}" for t in TRANSPORTS])
    assert rc == 0, out[-6000:]


@pytest.mark.parametrize("nproc", [2, 3])
def test_an_owner_failing_counts_the_call_on_every_rank(nproc):
    rc, out = run(nproc, "owner_fails")
    assert_checks(out, [f"owner_fails_{t}" for t in TRANSPORTS])
    assert rc == 0, out[-6000:]


def test_a_refused_sample_takes_no_engine_step():
    rc, out = run(2, "steps")
    assert_checks(out, [f"steps_{t}" for t in TRANSPORTS])
    assert rc == 0, out[-6000:]


def loaded(out):
    """rank -> (frames, sample calls) of LOADED lines; rank -> message of REFUSED."""
    got = {int(m.group(1)): (int(m.group(2)), int(m.group(3)))
           for m in re.finditer(r"LOADED (\d+) (\d+) (\d+)", out)}
    refused = {int(m.group(1)): m.group(2)  # (up to another rank's line, should one cut in)
               for m in re.finditer(r"REFUSED (\d+) (.*?)(?=REFUSED \d+ |LOADED \d+ |$)", out,
                                    re.MULTILINE)}
    return got, refused


def test_a_checkpoint_of_another_world_size_saved_later_is_the_one_load_sees():
    root = tempfile.mkdtemp(prefix="obsaug-ckpt-")
    try:
        for nproc, frames in ((3, 5), (2, 20)):
            rc, out = run(nproc, "save", root, frames)
            assert rc == 0 and out.count("SAVED") == nproc, out[-4000:]
        rc, out = run(3, "load", root)
        got, refused = loaded(out)
        assert not got, f"world 3 loaded the stale world-3 shards: {out[-4000:]}"
        assert sorted(refused) == [0, 1, 2], out[-4000:]
        for message in refused.values():
            assert message.startswith("ValueError: "), message
            assert "world size 2" in message and "this group has 3" in message, message
        rc, out = run(2, "load", root)
        got, refused = loaded(out)
        assert got == {0: (20, 1), 1: (20, 1)}, out[-4000:]
        # the world-3 shards went once the world-2 save was complete
        names = sorted(n for n in os.listdir(root) if n.startswith("rank"))
        assert len(names) == 2, names
        assert all(re.fullmatch(rf"rank{r}-of-2-[0-9a-f]{{16}}", n)
                   for r, n in enumerate(names)), names
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_failed_save_keeps_the_checkpoint_and_foreign_shards_are_refused():
    rc, out = run(2, "save_fails")
    assert_checks(out, ["save_fails_keeps_the_checkpoint", "foreign_shard_refused",
                        "manifest_fails_keeps_every_rank_s_checkpoint", "legacy_layout_loads"])
    assert rc == 0, out[-6000:]
