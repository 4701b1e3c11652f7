"""A sharded checkpoint's manifest as a hostile user leaves it, in one process
(a gloo group of one rank): a save that fails while it stages or publishes its
manifest removes the staged ``manifest.json.<rank>-<id>`` (and only it) and
leaves the previous checkpoint whole; a manifest that is a FIFO, a device or
too large is refused by its kind or size at once; and a seeded random mutation
loop over a valid manifest (values of other types, keys removed or added, deep
nesting, huge numbers) is refused with ValueError or names this rank's own
shard folder, never another exception."""
import json
import os
import random
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

import obsaug
import obsaug.distributed as sharded

from conftest import PYDIR

pytestmark = pytest.mark.skipif(not hasattr(obsaug._C, "shard_draws"),
                                reason="obsaug was built without the replay buffer")


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def filled(n=6):
    rb = sharded.ShardedReplayBuffer(16, (1, 2, 2), 2, (), transport="all_to_all")
    rb.add_first(torch.zeros(1, 2, 2, dtype=torch.uint8))
    for t in range(1, n):
        rb.add(0.0, 1.0, torch.full((1, 2, 2), t, dtype=torch.uint8), False, False)
    return rb


def listing(root):
    return sorted(os.listdir(root))


@pytest.mark.parametrize("stage", ["staging", "publishing"])
def test_a_failed_save_removes_its_staged_manifest_and_keeps_the_checkpoint(group, tmp_path,
                                                                            monkeypatch, stage):
    root = tmp_path / "ckpt"
    rb = filled()
    rb.save(root)
    before = listing(root)
    manifest_before = (root / "manifest.json").read_bytes()
    rb.add(0.0, 1.0, torch.ones(1, 2, 2, dtype=torch.uint8), False, False)
    if stage == "staging":  # the disk fills while the manifest is written
        def full(*args, **kwargs):
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(sharded.os, "fsync", full)
    else:  # the rename that publishes it fails
        def refused(*args, **kwargs):
            raise OSError(13, "Permission denied")
        monkeypatch.setattr(sharded.os, "replace", refused)
    with pytest.raises(OSError) as info:
        rb.save(root)
    assert "No space left on device" in str(info.value) or "Permission denied" in str(info.value)
    monkeypatch.undo()
    leftovers = [name for name in listing(root) if name.startswith("manifest.json.")]
    assert leftovers == [], f"staged manifests left behind: {leftovers}"
    assert (root / "manifest.json").read_bytes() == manifest_before
    if stage == "staging":
        assert listing(root) == before
    back = sharded.ShardedReplayBuffer.load(root, transport="all_to_all")
    assert len(back) == 6
    back.close()
    rb.close()


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "is a FIFO, not a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device, not a regular file"),
])
def test_a_manifest_that_is_not_a_regular_file_is_refused_at_once(tmp_path, make, kind):
    make(tmp_path / "manifest.json")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import obsaug.distributed as sharded
        try:
            sharded.ShardedReplayBuffer._shard_folder(sys.argv[2], 0, 1)
        except ValueError as e:
            print("ValueError:", e)
    """), PYDIR, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert f"ValueError: {tmp_path / 'manifest.json'}: {kind}" in proc.stdout, (proc.stdout,
                                                                                  proc.stderr)


def test_a_manifest_over_its_size_limit_is_refused(tmp_path):
    (tmp_path / "manifest.json").write_bytes(b" " * (16 * 2**20 + 1))
    with pytest.raises(ValueError) as info:
        sharded.ShardedReplayBuffer._shard_folder(tmp_path, 0, 1)
    assert "a manifest of 16777217 bytes, more than the limit of 16777216" in str(info.value)


# --- the property test -------------------------------------------------------------------

_ODD_VALUES = [None, True, False, 0, 1, -1, 2, 2**64, 1.5, float("inf"), "", "x", "0" * 16,
               [], {}, [0], {"rank": 0}]


def _mutations(value, rng, depth=0):
    """A copy of the JSON value `value` with one random change somewhere in it."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.15:
            del out[key]
        elif roll < 0.25:
            out[key + "_extra"] = rng.choice(_ODD_VALUES)
        else:
            out[key] = _mutations(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.8:
        out = list(value)
        roll, k = rng.random(), rng.randrange(len(value))
        if roll < 0.15:
            del out[k]
        elif roll < 0.3:
            out.append(out[k])
        else:
            out[k] = _mutations(value[k], rng, depth + 1)
        return out
    roll = rng.random()
    if isinstance(value, int) and not isinstance(value, bool) and roll < 0.5:
        return value + rng.choice([-1, 1, 2**40, -(2**40)])
    if isinstance(value, str) and roll < 0.5:
        return value[:-1] + rng.choice("0af-/.")
    return rng.choice(_ODD_VALUES)


def test_manifest_property_every_mutation_is_refused_or_names_this_rank_s_shard(group,
                                                                                tmp_path):
    root = tmp_path / "ckpt"
    rb = filled()
    rb.save(root)
    rb.close()
    valid = json.loads((root / "manifest.json").read_text())
    own = os.path.join(str(root), valid["shards"][0]["folder"])
    assert sharded.ShardedReplayBuffer._shard_folder(root, 0, 1)[0] == own
    rng = random.Random(41)
    refused = 0
    for i in range(600):
        mutated = valid
        for _ in range(rng.randint(1, 3)):
            mutated = _mutations(mutated, rng)
        text = json.dumps(mutated)
        roll = rng.random()
        if roll < 0.05:  # cut short
            text = text[:-rng.randint(1, 9)]
        elif roll < 0.08:  # a value nested past Python's recursion limit
            text = text.replace('"shards": ', '"shards": ' + "[" * 100000 + "]" * 100000 + ", \"x\": ", 1)
        (root / "manifest.json").write_text(text)
        try:
            folder, save_id = sharded.ShardedReplayBuffer._shard_folder(root, 0, 1)
        except ValueError:
            refused += 1
            continue
        # accepted: it names a shard folder of this root that the manifest's save id names
        assert os.path.dirname(folder) == str(root), (text, folder)
        assert os.path.basename(folder) == f"rank0-of-1-{save_id:016x}", (text, folder)
    assert refused > 400, refused
