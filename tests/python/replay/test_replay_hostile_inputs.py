"""Hostile inputs to obsaug.ReplayBuffer: each rejected call raises the one
documented type for its kind of bad input (README, "Errors": TypeError for a
wrong dtype or type, ValueError for a wrong value or shape, IndexError for an
index out of range) with a message naming the argument, and changes nothing;
and hostile checkpoints: saved files edited and resealed (checkpoint_edit.py
recomputes both checksums), so that each edit meets the loader's validation,
which refuses it naming the field and the slot, or loads a working buffer.
The ops' hostile inputs are in kernels/test_hostile_inputs.py (which also
runs the over-large replay capacity in its address-space-capped child).
"""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import obsaug
from checkpoint_edit import CheckpointEdit
from conftest import PYDIR, needs_replay, raises

NAN, INF = float("nan"), float("inf")

pytestmark = needs_replay




RB_ARGS = dict(capacity=16, frame_shape=(3, 8, 8), frame_stack=3, action_shape=(2,))


def rb(**over):
    return obsaug.ReplayBuffer(**{**RB_ARGS, **over})


@pytest.mark.parametrize("over,exc,words", [
    ({"capacity": 0}, ValueError, ["capacity", ">= 1"]),
    ({"capacity": -1}, ValueError, ["capacity"]),
    ({"capacity": 2**62}, ValueError, ["capacity", "at most 2^32"]),
    ({"capacity": 2**32 + 1}, ValueError, ["capacity must be at most 2^32 = 4294967296", "32 bits"]),
    ({"capacity": 2**64}, ValueError, ["capacity", "must lie in [0, 9223372036854775808)"]),
    ({"frame_shape": (0, 8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, -8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (1, 3, 8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, 2**20, 2**20)}, ValueError, ["too large"]),
    ({"frame_stack": 0}, ValueError, ["frame_stack"]),
    ({"frame_stack": -1}, ValueError, ["frame_stack"]),
    ({"n_step": 0}, ValueError, ["n_step"]),
    ({"n_step": -1}, ValueError, ["n_step"]),
    ({"gamma": NAN}, ValueError, ["gamma"]),
    ({"gamma": INF}, ValueError, ["gamma"]),
    ({"gamma": -0.1}, ValueError, ["gamma"]),
    ({"prioritized": True, "alpha": NAN}, ValueError, ["alpha"]),
    ({"prioritized": True, "beta": NAN}, ValueError, ["beta"]),
    ({"prioritized": True, "alpha": -1.0}, ValueError, ["alpha"]),
    ({"prioritized": True, "beta": INF}, ValueError, ["beta"]),
    ({"action_shape": (-1,)}, ValueError, ["action_shape"]),
    ({"device": "meta"}, ValueError, ["device", "meta"]),
], ids=repr)
def test_replay_constructor_arguments(over, exc, words):
    raises(exc, lambda: rb(**over), *words)


def test_replay_capacity_beyond_memory_is_a_clear_error():
    raises(ValueError, lambda: rb(capacity=2**32), "capacity 4294967296 needs",
           "more than this machine")


def _filled(prioritized=True, n=6):
    buf = rb(prioritized=prioritized)
    frame = torch.zeros(3, 8, 8, dtype=torch.uint8)
    buf.add_first(frame)
    for i in range(n):
        buf.add(torch.zeros(2), 1.0, frame + i)
    return buf


def test_replay_add_with_wrong_frames_changes_nothing():
    buf = _filled()
    before = (len(buf), buf.num_valid, buf.total_frames, buf.storage.clone())
    f = torch.zeros(3, 8, 8, dtype=torch.uint8)
    bad = {
        "float": (TypeError, f.float(), ["frame", "uint8", "float32"]),
        "int16": (TypeError, f.short(), ["frame", "uint8", "int16"]),
        "bool": (TypeError, f.bool(), ["frame", "uint8", "bool"]),
        "shape": (ValueError, f[:, :, :7], ["frame", "[3, 8, 8]"]),
        "2-D": (ValueError, f[0], ["frame"]),
        "5-D": (ValueError, f[None, None], ["frame"]),
    }
    for name, (exc, frame, words) in bad.items():
        raises(exc, lambda: buf.add(torch.zeros(2), 1.0, frame), *words)
        raises(exc, lambda: buf.add_first(frame), *words)
    raises(ValueError, lambda: buf.add(torch.zeros(3), 1.0, f), "action")
    raises(ValueError, lambda: buf.add(torch.zeros(2, device="meta"), 1.0, f),
           "action must be on cpu or cuda", "meta")
    raises(ValueError, lambda: buf.add(torch.zeros(2), NAN, f), "reward")
    raises(ValueError, lambda: buf.add_first(torch.zeros(0, 3, 8, 8, dtype=torch.uint8)), "N = 0")
    assert (len(buf), buf.num_valid, buf.total_frames) == before[:3]
    assert torch.equal(buf.storage, before[3])
    # a strided frame is stored as its values
    buf.add(torch.zeros(2), 1.0, torch.arange(3 * 8 * 16, dtype=torch.int64).remainder(256)
            .to(torch.uint8).view(3, 8, 16)[..., ::2])
    assert len(buf) == before[0] + 1


def test_replay_sample_sizes():
    buf = _filled()
    raises(ValueError, lambda: buf.sample(0), "batch size", ">= 1")
    raises(ValueError, lambda: buf.sample(-1), "batch size")
    raises(ValueError, lambda: buf.sample(10**12), "1000000000000", "4294967296")
    assert buf.sample(buf.num_valid + 5)["obs"].shape == (buf.num_valid + 5, 9, 8, 8)
    raises(ValueError, lambda: buf.sample(2**63), "batch_size", "must fit in int64")
    raises(TypeError, lambda: buf.sample(2.0), "batch_size")
    raises(ValueError, lambda: buf.sample(2, beta=NAN), "beta")
    raises(ValueError, lambda: rb().sample(1), "valid")
    assert buf.sample(buf.num_valid)["obs"].shape == (buf.num_valid, 9, 8, 8)


def test_replay_update_priorities_bad_arguments_change_nothing():
    buf = _filled()
    idx = buf.sample(3)["indices"]
    calls = buf.sample_calls
    raises(ValueError, lambda: buf.update_priorities(idx, torch.ones(2)), "priorities", "K = 3")
    raises(ValueError, lambda: buf.update_priorities(idx[:1], torch.ones(3)), "priorities", "K = 1")
    raises(ValueError, lambda: buf.update_priorities(idx, torch.full((3,), NAN)), "finite")
    raises(ValueError, lambda: buf.update_priorities(idx, torch.full((3,), INF)), "finite")
    raises(ValueError, lambda: buf.update_priorities(idx, -torch.ones(3)), ">= 0")
    raises(IndexError, lambda: buf.update_priorities(torch.tensor([-1]), torch.ones(1)), "-1")
    raises(IndexError, lambda: buf.update_priorities(torch.tensor([16]), torch.ones(1)), "16")
    raises(TypeError, lambda: buf.update_priorities(torch.tensor([1.0]), torch.ones(1)), "indices",
           "integer")
    raises(ValueError, lambda: buf.update_priorities(idx[None], torch.ones(1, 3)), "indices")
    buf.update_priorities(torch.zeros(0, dtype=torch.long), torch.zeros(0))  # empty: a no-op
    # the rejected calls changed nothing: the same call counter gives the same sample
    again = _filled()
    again.sample(3)
    assert buf.sample_calls == calls == again.sample_calls
    assert torch.equal(buf.sample(4)["indices"], again.sample(4)["indices"])


def test_replay_all_zero_priorities():
    buf = _filled()
    valid = buf.sample(buf.num_valid)["indices"].unique()
    buf.update_priorities(torch.arange(len(buf)), torch.zeros(len(buf)))
    try:
        batch = buf.sample(3)
    except ValueError as e:
        assert "priorit" in str(e).lower()
        return
    assert torch.isfinite(batch["weights"]).all()
    assert set(batch["indices"].tolist()) <= set(valid.tolist())


@pytest.mark.parametrize("method", ["add", "add_first"])
def test_replay_meta_frame_is_rejected_before_anything_is_written(method):
    buf = _filled()
    before = (len(buf), buf.num_valid, buf.total_frames)
    frame = torch.empty(3, 8, 8, dtype=torch.uint8, device="meta")
    call = ((lambda: buf.add(torch.zeros(2), 1.0, frame)) if method == "add"
            else (lambda: buf.add_first(frame)))
    raises(ValueError, call, "frame must be on cpu or cuda", "meta")
    assert (len(buf), buf.num_valid, buf.total_frames) == before


def _state(buf):
    return (len(buf), buf.num_valid, buf.total_frames, buf.storage.clone())


def _same_state(buf, before):
    assert (len(buf), buf.num_valid, buf.total_frames) == before[:3]
    assert torch.equal(buf.storage, before[3])


@pytest.mark.parametrize("method", ["add", "add_first"])
def test_replay_sparse_frame_is_a_type_error_that_changes_nothing(method):
    # A sparse frame passes the dtype and shape checks; it must be refused
    # before the ring takes a step, not by a conversion after it.
    buf, twin = _filled(), _filled()
    before = _state(buf)
    frame = torch.full((3, 8, 8), 9, dtype=torch.uint8).to_sparse()
    call = ((lambda: buf.add(torch.zeros(2), 1.0, frame)) if method == "add"
            else (lambda: buf.add_first(frame)))
    raises(TypeError, call, f"ReplayBuffer.{method}", "frame must be a dense (strided)", "sparse",
           "to_dense()")
    _same_state(buf, before)
    assert torch.equal(buf.sample(8)["indices"], twin.sample(8)["indices"])


def test_replay_numpy_integers_name_envs_and_batch_sizes():
    np = pytest.importorskip("numpy")
    buf, twin = rb(n_step=1), rb(n_step=1)
    f = torch.zeros(3, 8, 8, dtype=torch.uint8)
    buf.add_first(f, env=np.int64(2))
    buf.add(torch.zeros(2), 1.0, f, env=np.int32(2))
    buf.add_first(torch.stack([f, f]), env=np.array([0, 5]))
    buf.add_first(torch.stack([f, f]), env=[np.int64(6), 7])
    twin.add_first(f, env=2)
    twin.add(torch.zeros(2), 1.0, f, env=2)
    twin.add_first(torch.stack([f, f]), env=[0, 5])
    twin.add_first(torch.stack([f, f]), env=[6, 7])
    assert buf.total_frames == twin.total_frames == 6
    assert torch.equal(buf.sample(np.int64(4))["indices"], twin.sample(4)["indices"])
    before = _state(buf)
    raises(TypeError, lambda: buf.add_first(torch.stack([f, f]), env=[0, 2.5]), "env", "float",
           "2.5")
    raises(TypeError, lambda: buf.add_first(f, env=2.0), "env", "int", "float")
    raises(TypeError, lambda: buf.add_first(f, env="0"), "env", "str")
    raises(TypeError, lambda: buf.add_first(torch.stack([f, f]), env=[True, False]), "env", "bool")
    raises(TypeError, lambda: buf.sample(np.float64(2)), "batch_size", "float64")
    raises(TypeError, lambda: buf.sample(True), "batch_size", "bool")
    _same_state(buf, before)


def test_replay_batched_add_takes_rewards_per_env_and_an_empty_env_list_names_none():
    buf = rb(n_step=1)
    f2 = torch.zeros(2, 3, 8, 8, dtype=torch.uint8)
    raises(ValueError, lambda: buf.add_first(f2, env=[]), "add_first",
           "env names 0 envs for 2 frames")
    raises(ValueError, lambda: buf.add_first(f2, env=torch.zeros(0, dtype=torch.int64)),
           "env names 0 envs for 2 frames")
    assert buf.total_frames == 0
    buf.add_first(f2)                                   # not given: envs 0 and 1
    before = _state(buf)
    raises(ValueError, lambda: buf.add(torch.zeros(2, 2), 5.0, f2 + 1), "reward must be [N] = [2]",
           "one per env")
    raises(ValueError, lambda: buf.add(torch.zeros(2, 2), torch.tensor(5.0), f2 + 1),
           "reward must be [N] = [2]")
    raises(ValueError, lambda: buf.add(torch.zeros(2, 2), torch.ones(2), f2 + 1, env=[]),
           "env names 0 envs for 2 frames")
    _same_state(buf, before)
    buf.add(torch.zeros(2, 2), torch.tensor([1.0, 2.0]), f2 + 1, terminated=False)
    assert buf.num_valid == 2
    assert sorted(set(buf.sample(32)["reward"].tolist())) == [1.0, 2.0]


def test_replay_priorities_of_a_non_real_dtype_are_a_type_error():
    buf = _filled()
    idx = buf.sample(2)["indices"]
    raises(TypeError, lambda: buf.update_priorities(idx, torch.tensor([True, False])),
           "priorities must be a real", "bool")
    raises(TypeError, lambda: buf.update_priorities(idx, torch.tensor([1 + 0j, 2 + 0j])),
           "priorities must be a real", "complex")
    raises(ValueError, lambda: buf.update_priorities(idx, torch.ones(3)), "priorities", "K = 2")


def test_replay_shape_options_given_as_an_int():
    assert rb(action_shape=6).action_shape == (6,)
    assert rb(action_shape=(6,)).action_shape == (6,)
    np = pytest.importorskip("numpy")
    assert rb(action_shape=np.int64(4)).action_shape == (4,)
    raises(ValueError, lambda: rb(action_shape=0), "action_shape")
    raises(TypeError, lambda: rb(frame_shape=84), "frame_shape", "sequence of ints", "(3, 84, 84)",
           "84")
    raises(TypeError, lambda: rb(action_shape=2.0), "action_shape", "(6,)", "float")
    raises(TypeError, lambda: rb(action_shape="6"), "action_shape", "(6,)", "str")
    raises(TypeError, lambda: rb(frame_shape=None), "frame_shape", "(3, 84, 84)", "None")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_replay_float_actions_must_be_finite_in_the_action_dtype(dtype):
    buf = rb(action_dtype=dtype, n_step=1)
    f = torch.zeros(3, 8, 8, dtype=torch.uint8)
    buf.add_first(f)
    before = _state(buf)
    beyond = {torch.float16: 1e5, torch.bfloat16: 1e39, torch.float32: 1e39}.get(dtype)
    if beyond is not None:
        raises(ValueError, lambda: buf.add([0.5, beyond], 1.0, f), "action must be finite",
               "beyond the range of action_dtype", str(dtype).replace("torch.", ""))
    raises(ValueError, lambda: buf.add([NAN, 0.0], 1.0, f), "action must be finite", "nan")
    raises(ValueError, lambda: buf.add([0.0, -INF], 1.0, f), "action must be finite", "-inf")
    raises(ValueError, lambda: buf.add(torch.tensor([[0.0, 1.0], [NAN, 0.0]]), torch.ones(2),
                                       torch.stack([f, f]), env=[0, 1]),
           "action must be finite", "element 2")
    _same_state(buf, before)
    buf.add([-1.5, 1000.0], 1.0, f)
    assert buf.sample(1)["action"].tolist() == [[-1.5, 1000.0]]


# --- checkpoints edited and resealed (checkpoint_edit.py recomputes both checksums) ---------

def _saved(tmp_path, capacity=3, steps=4, prioritized=False, name="ckpt"):
    """A buffer of two envs stepping together (episodes of 5 steps) and its checkpoint."""
    buf = obsaug.ReplayBuffer(capacity, (1, 2, 2), 2, (2,), n_step=2, prioritized=prioritized)
    f = torch.zeros(2, 1, 2, 2, dtype=torch.uint8)
    for t in range(steps):
        if t % 5 == 0:
            buf.add_first(f + t)
        else:
            buf.add(torch.full((2, 2), 0.25 * t), torch.full((2,), 0.5 * t), f + t,
                    torch.full((2,), t % 5 == 4))
    path = tmp_path / name
    buf.save(path)
    return buf, CheckpointEdit.of_dir(path), path


def _refused(edit, path, *words):
    edit.write_sealed(path)
    return raises(ValueError, lambda: obsaug.ReplayBuffer.load(path), "is corrupt or truncated",
                  *words)


def test_checkpoint_reseal_alone_loads(tmp_path):
    buf, edit, path = _saved(tmp_path, capacity=6, steps=9)
    edit.write_sealed(path)
    assert obsaug.ReplayBuffer.load(path).total_frames == buf.total_frames


def test_checkpoint_frame_count_near_2_63_is_refused(tmp_path):
    # case 1: accepted before, and six add_first calls later frames were written outside
    # the storage (slots -2 and -1)
    _, edit, path = _saved(tmp_path)
    for slot in range(edit.slots):
        edit.set_slot(slot, "prev", -1).set_slot(slot, "next", -1)
    for env in range(edit.envs):
        edit.set_env(env, "last", -1)
    edit.set_header("total_frames", 2**63 - 2)
    _refused(edit, path, "header field 'total_frames' is 9223372036854775806",
             "outside [0, 2^62 = 4611686018427387904]")
    edit.set_header("total_frames", 8).set_header("sample_calls", 2**64 - 1)
    _refused(edit, path, "header field 'sample_calls' is 18446744073709551615")


@pytest.mark.parametrize("field, value, words", [
    ("reward", NAN, ["slot 2 (frame 2): 'reward' is nan"]),
    ("reward", INF, ["slot 2 (frame 2): 'reward' is inf"]),
    ("action", NAN, ["the action of slot 2 holds nan at element 1", "must be finite"]),
    ("action", -INF, ["the action of slot 2 holds -inf at element 1"]),
    ("priority", NAN, ["the priority weight of slot 2 is nan"]),
    ("gamma", NAN, ["header: gamma must be in [0, 1], got nan"]),
    ("alpha", INF, ["header: alpha must be finite and >= 0, got inf"]),
    ("beta", NAN, ["header: beta must be finite and >= 0, got nan"]),
    ("max_priority", NAN, ["max_priority nan"]),
], ids=repr)
def test_checkpoint_non_finite_values_are_refused_naming_them(tmp_path, field, value, words):
    # case 2: add() refuses NaN rewards and actions; a checkpoint must not bring them in
    _, edit, path = _saved(tmp_path, capacity=8, steps=3, prioritized=True)
    if field == "reward":
        edit.set_slot(2, "reward", value)
    elif field == "action":
        edit.set_action_float(2, 1, value)
    elif field == "priority":
        edit.set_priority(2, value)
    else:
        edit.set_header(field, value)
    _refused(edit, path, *words)


def test_checkpoint_links_that_disagree_are_refused_and_the_old_buffer_is_kept(tmp_path):
    # case 3: env 0 recorded as open at frame 2 although frame 2 has a successor; after one
    # add_first every sample raised a bare IndexError
    buf, edit, path = _saved(tmp_path, capacity=12, steps=4)
    before = buf.sample(8)
    edit.set_env(0, "last", 2)
    _refused(edit, path, "replay state is inconsistent", "env 0: 'open' is 1 but its 'last'",
             "frame 2 (slot 2) has a successor (its 'next' is 4)")
    # the caller's buffer is the one it had: the same state, the same next sample
    twin, _, _ = _saved(tmp_path, capacity=12, steps=4, name="twin")
    twin.sample(8)
    assert torch.equal(buf.sample(8)["indices"], twin.sample(8)["indices"])
    assert before["obs"].shape == (8, 2, 2, 2)


def test_checkpoint_that_is_a_fifo_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "replay.obsaug")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        import obsaug
        try:
            obsaug.ReplayBuffer.load(sys.argv[2])
        except ValueError as e:
            print("ValueError:", e)
    """), PYDIR, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert "ValueError:" in proc.stdout and "replay.obsaug: is a FIFO, not a regular file" \
        in proc.stdout, (proc.stdout, proc.stderr)


# --- the property test: random structure-aware edits --------------------------------------

_HEADER_VALUES = {
    "capacity": [0, -1, 1, 2**32 + 1, 2**62], "frame_stack": [0, 1, 65, -3],
    "n_step": [0, 1, 1001], "gamma": [NAN, INF, -0.5, 0.0, 1.0, 1.5],
    "alpha": [NAN, INF, -1.0, 0.0, 2.0], "beta": [NAN, -1.0, 0.0], "seed": [0, 2**64 - 1],
    "total_frames": [0, 1, 5, 2**62, 2**62 + 1, 2**63 - 1, -1],
    "sample_calls": [0, 2**62, 2**62 + 1, 2**64 - 1],
    "max_priority": [NAN, INF, 0.0, -1.0, 1e300, 0.5],
}


def _random_edit(edit, rng):
    """1 to 3 random field edits of `edit` (in place): header values, links, flags,
    rewards, env records, priorities, actions, each from values near the valid ones."""
    total = edit.values["total_frames"]
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        if kind == 0:
            name = rng.choice(sorted(_HEADER_VALUES))
            edit.set_header(name, rng.choice(_HEADER_VALUES[name]))
        elif kind == 1 and edit.slots:
            slot, field = rng.randrange(edit.slots), rng.choice(["prev", "next"])
            edit.set_slot(slot, field, rng.randint(-2, total + 1))
        elif kind == 2 and edit.slots:
            slot = rng.randrange(edit.slots)
            field = rng.choice(["terminated", "ended", "reward"])
            edit.set_slot(slot, field, rng.choice([NAN, INF, 0.0, 3.5]) if field == "reward"
                          else rng.randint(0, 2))
        elif kind == 3 and edit.envs:
            env = rng.randrange(edit.envs)
            if rng.random() < 0.5:
                edit.set_env(env, "last", rng.randint(-2, total + 1))
            else:
                edit.set_env(env, "open", rng.randint(0, 2))
        elif kind == 4 and edit.slots and edit.values["prioritized"]:
            edit.set_priority(rng.randrange(edit.slots), rng.choice([NAN, -1.0, 0.0, 1e308, 2.0]))
        elif edit.slots:
            edit.set_action_float(rng.randrange(edit.slots), rng.randrange(2),
                                  rng.choice([NAN, -INF, 0.5]))


def test_checkpoint_property_every_edit_is_refused_by_name_or_loads_a_working_buffer(tmp_path):
    """Seeded random edits of three checkpoints (wrapped, prioritized, multi-env), each
    resealed: loading raises ValueError naming the file as corrupt, or gives a buffer
    that adds and samples (no IndexError, no other exception, no crash)."""
    import random
    rng = random.Random(41)
    bases = [_saved(tmp_path, capacity=6, steps=9, name="wrapped")[1],
             _saved(tmp_path, capacity=10, steps=7, prioritized=True, name="prioritized")[1],
             _saved(tmp_path, capacity=16, steps=4, name="young")[1]]
    path = tmp_path / "edited"
    loaded = refused = 0
    f = torch.zeros(2, 1, 2, 2, dtype=torch.uint8)
    for i in range(400):
        edit = bases[i % len(bases)].copy()
        _random_edit(edit, rng)
        edit.write_sealed(path)
        try:
            buf = obsaug.ReplayBuffer.load(path)
        except ValueError as e:
            assert "is corrupt or truncated" in str(e), str(e)
            refused += 1
            continue
        loaded += 1
        buf.add_first(f)
        buf.add(torch.zeros(2, 2), torch.zeros(2), f, False)
        if buf.num_valid:
            assert buf.sample(4)["obs"].shape == (4, buf.frame_stack, 2, 2)
    assert refused > 200 and loaded > 10, (loaded, refused)


# --- sample and gather_augment: the memory a call would take, checked first ----------------

def test_sample_too_large_for_memory_is_refused_with_its_size_before_allocating():
    # case 4: sample(2**32) ended in a bare MemoryError (std::bad_alloc), and
    # sample(2**31) began allocating 16 GiB of host vectors before anything refused
    buf = _filled(prioritized=False, n=7)
    calls = buf.sample_calls
    for batch in (2**32, 2**31):
        e = raises(ValueError, lambda: buf.sample(batch), f"batch size {batch} needs",
                   "of host memory", "bytes per draw", "more than the", "lower the batch size")
        assert "MemoryError" not in type(e).__name__
    assert buf.sample_calls == calls
    assert buf.sample(8)["obs"].shape == (8, 9, 8, 8)


def test_gather_augment_of_an_expanded_index_too_large_for_memory_is_refused():
    storage = torch.zeros(4, 3, 8, 8, dtype=torch.uint8)
    huge = torch.zeros(1, 3, dtype=torch.int64).expand(2**40, 3)
    raises(ValueError, lambda: obsaug.ops.gather_augment(storage, huge, None, ops=[], seed=0,
                                                         step=0),
           "a contiguous copy of indices", "needs", "more than the", "lower the batch size")
