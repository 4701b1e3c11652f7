"""obsaug.Engine from Python: built from a YAML path and from a dict, augment /
augment_ against the stateless op, float output, state_dict round trips
(sync mode: identical outputs), stats, the context manager, threads, and
input errors. Skips where the native module has no Engine (built without
the pool or yaml-cpp) or the photographs are absent."""
import gc
import os
import pathlib
import shutil
import signal
import threading
import time

import pytest
import torch

import obsaug

from conftest import CONFIGS, PHOTOS, needs_engine

pytestmark = needs_engine

STATS_KEYS = {"calls", "samples", "step", "has_pool", "pool_decoded", "pool_failed",
              "pool_uploaded", "pool_decode_rate", "pool_mean_age_calls", "pool_queue_depth",
              "pool_first_failures", "pool_distinct_crops", "pool_new_crops_per_call"}


def small_config(mode="async", threads=2, seed=3, **output):
    config = {
        "seed": seed,
        "frames": {"stack": 3, "channels": 3, "height": 40, "width": 48},
        "pipeline": [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}],
        "pool": {"size": 12, "sources": [PHOTOS],
                 "refresh": {"threads": threads, "mode": mode, "per_call": 3}},
    }
    if output:
        config["output"] = output
    return config


def obs_batch(b=5, c=9, h=40, w=48, seed=0, dtype=torch.uint8):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (b, c, h, w), dtype=torch.uint8, generator=g)
    return x if dtype == torch.uint8 else x.to(dtype)


def reference(engine, obs, step, pipeline=None):
    ops = pipeline or [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]
    return obsaug.ops.augment(obs, engine.pool_images, ops=ops, seed=3, step=step)


def test_from_path_augments_uint8():
    with obsaug.Engine(pathlib.Path(CONFIGS) / "default.yaml") as engine:
        obs = obs_batch(4, 9, 84, 84)
        out = engine.augment(obs)
        assert out.shape == obs.shape and out.dtype == torch.uint8
        assert not torch.equal(out, obs)
        assert engine.step == 1
        config = engine.config
        assert [op["op"] for op in config["pipeline"]] == ["shift", "overlay"]
        assert config["pool"]["sources"][0].endswith("data/photos")
        text = engine.config_yaml()
        assert "overlay" in text and "data/photos" in text


def test_config_is_a_dict_that_builds_the_same_engine():
    with obsaug.Engine(small_config(threads=0)) as engine:
        config = engine.config
        assert config["pipeline"] == [
            {"op": "shift", "pad": 4, "padding": "replicate"},
            {"op": "overlay", "alpha": 0.5, "per_frame": False, "distinct": False}]
        assert config["pool"]["image_size"] == [40, 48]   # inferred: the overlay's frames
        assert config["frames"] == {"stack": 3, "channels": 3, "height": 40, "width": 48}
        with obsaug.Engine(config) as again:
            assert again.config == config
            assert again.config_yaml() == engine.config_yaml()


def test_dict_values_may_be_numpy_torch_scalars_and_paths():
    import numpy as np
    config = small_config(threads=0, seed=np.uint64(3))
    config["frames"]["stack"] = torch.tensor(3)
    config["pipeline"][1]["alpha"] = np.float32(0.25)
    config["pool"]["sources"] = [pathlib.Path(PHOTOS)]
    with obsaug.Engine(config) as engine:
        assert engine.config["seed"] == 3 and engine.config["frames"]["stack"] == 3
        assert engine.config["pipeline"][1]["alpha"] == 0.25
        assert engine.config["pool"]["sources"] == [str(pathlib.Path(PHOTOS).absolute())]
    for key, bad in (("seed", object()), ("pool", {"sources": [b"photos"]})):
        with pytest.raises(TypeError) as info:
            obsaug.Engine({**small_config(threads=0), key: bad})
        assert (f"config {key}" if key == "seed" else "config pool.sources[0]") in str(info.value)
        assert "expected a number, string, bool, list or mapping" in str(info.value)


def test_dict_finds_the_embedded_photos_from_any_working_directory(tmp_path, monkeypatch):
    """A dict's data/photos is found as a file's is (obsaug.locations.embedded_photos),
    however it is spelt."""
    monkeypatch.chdir(tmp_path)  # no data/photos here
    monkeypatch.delenv("OBSAUG_PHOTOS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # empty
    expected = obsaug.locations.embedded_photos()
    for spelling in ("data/photos", "./data/photos", "data/photos/"):
        config = small_config(threads=0)
        config["pool"]["sources"] = [spelling]
        with obsaug.Engine(config) as engine:
            assert engine.config["pool"]["sources"] == [expected]


def test_from_dict_matches_the_op_and_counts_steps():
    with obsaug.Engine(small_config(threads=0)) as engine:  # threads 0: a fixed pool
        obs = obs_batch()
        a, b = engine.augment(obs), engine.augment(obs)
        assert engine.step == 2
        assert torch.equal(a, reference(engine, obs, 0))
        assert torch.equal(b, reference(engine, obs, 1))
        assert torch.equal(engine.augment(obs, step=0), a)  # explicit step: counter unchanged
        assert engine.step == 2
        x = obs.clone()
        assert engine.augment_(x, step=1) is x
        assert torch.equal(x, b)


def test_float_output_config():
    config = small_config(threads=0, dtype="float32", scale=1 / 255, bias=-0.5)
    with obsaug.Engine(config) as engine:
        obs = obs_batch()
        out = engine.augment(obs, step=4)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, reference(engine, obs, 4).float() / 255 - 0.5,
                                   rtol=1e-6, atol=1e-6)


def test_float_input_stays_float():
    with obsaug.Engine(small_config(threads=0)) as engine:
        obs = obs_batch(dtype=torch.float32)
        out = engine.augment(obs, step=2)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, reference(engine, obs, 2))


def test_state_dict_round_trip_gives_identical_outputs():
    obs = obs_batch(6)
    with obsaug.Engine(small_config("sync")) as first:
        for _ in range(5):
            first.augment(obs)
        state = first.state_dict()
        assert state["step"] == 5 and state["pool_calls"] == 5 and len(state["pool_slots"]) == 12
        expected = [first.augment(obs) for _ in range(6)]
    with obsaug.Engine(small_config("sync")) as resumed:
        resumed.load_state_dict(state)
        assert resumed.step == 5
        for k, want in enumerate(expected):
            assert torch.equal(resumed.augment(obs), want), f"call {k}"
    with obsaug.Engine(small_config("sync", seed=4)) as other:
        with pytest.raises(ValueError, match="seed"):
            other.load_state_dict(state)
        with pytest.raises(ValueError, match="missing 'pool_serial'"):
            other.load_state_dict({"seed": 4, "step": 0})


def test_sync_state_is_refused_after_a_source_file_was_deleted(tmp_path):
    # The state names the pool's listing: with one file gone every serial
    # would name another file, and the resumed run would silently differ.
    names = sorted(n for n in os.listdir(PHOTOS) if n.lower().endswith((".jpg", ".jpeg")))[:6]
    for name in names:
        shutil.copy(os.path.join(PHOTOS, name), tmp_path / name)
    config = small_config("sync")
    config["pool"]["sources"] = [str(tmp_path)]
    config["pool"]["size"] = 4
    obs = obs_batch(4)
    with obsaug.Engine(config) as first:
        first.augment(obs)
        state = first.state_dict()
    assert state["pool_files"] == 6 and len(state["pool_checksums"]) == 4
    (tmp_path / names[0]).unlink()
    with obsaug.Engine(config) as changed:
        with pytest.raises(RuntimeError, match="the sources now list 5 files, 6 when the state "
                                               "was taken"):
            changed.load_state_dict(state)
        assert changed.step == 0
        with pytest.raises(ValueError, match="missing 'pool_listing'.*take a new one"):
            changed.load_state_dict({k: v for k, v in state.items() if k != "pool_listing"})


def test_stats_keys_and_counts():
    with obsaug.Engine(small_config()) as engine:
        engine.augment(obs_batch(3))
        engine.augment_(obs_batch(2))
        stats = engine.stats()
        assert set(stats) == STATS_KEYS
        assert stats["calls"] == 2 and stats["samples"] == 5 and stats["step"] == 2
        assert stats["has_pool"] and stats["pool_decoded"] >= 12
        assert stats["pool_failed"] == 0 and stats["pool_first_failures"] == []


def test_context_manager_closes():
    with obsaug.Engine(small_config()) as engine:
        engine.augment(obs_batch())
    assert engine.closed
    with pytest.raises(RuntimeError, match="engine is closed"):
        engine.augment(obs_batch())


def in_a_fork(check):
    """check()'s result (a string, or the exception it raised as "Type: message") when
    run in a forked child, as a DataLoader worker runs; fails if the child hangs."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one intra-op thread, as torch gives a DataLoader worker
        os.close(read_end)
        try:
            torch.set_num_threads(1)
            result = check()
        except BaseException as e:  # noqa: B902 (reported to the parent)
            result = f"{type(e).__name__}: {e}"
        os.write(write_end, result.encode())
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.05)
    with os.fdopen(read_end, "rb") as pipe:
        return pipe.read().decode()


def test_an_async_pool_used_in_a_fork_says_so_and_closes_there():
    """A fork's child has none of the pool's decoder threads: an async pool would never
    refresh there, so a call refuses by name; closing there returns (the parent's
    threads are not joined) and the parent's engine goes on."""
    obs = obs_batch()
    with obsaug.Engine(small_config(mode="async")) as engine:
        engine.augment(obs)

        def use_then_close():
            with pytest.raises(RuntimeError) as refused:
                engine.augment(obs)
            engine.close()
            return str(refused.value)

        assert in_a_fork(lambda: (engine.close(), "closed")[1]) == "closed"
        message = in_a_fork(use_then_close)
        assert "a fork of it, where its background decoders do not run" in message, message
        assert "build the Engine or pool in this process" in message
        assert engine.augment(obs).shape == obs.shape
        assert engine.stats()["calls"] == 2


def test_an_async_pool_freed_in_a_fork_does_not_hang_it():
    """The child's copy of the pool is the parent's memory, decoders waiting on its
    condition variable included: freeing it there (a worker_init_fn replacing an
    inherited engine, interpreter exit) must neither join nor wait for them."""
    holder = [obsaug.Engine(small_config(mode="async"))]
    try:
        holder[0].augment(obs_batch())
        time.sleep(0.5)  # the decoders fill the staging slots, then wait

        def free():
            holder.clear()
            gc.collect()
            return "freed"

        assert in_a_fork(free) == "freed"
        assert holder[0].augment(obs_batch()).shape == obs_batch().shape
    finally:
        holder[0].close()


def test_a_sync_pool_refreshes_in_a_fork():
    obs = obs_batch()
    with obsaug.Engine(small_config(mode="sync")) as engine:
        engine.augment(obs)

        def refreshes():
            before = engine.stats()["pool_uploaded"]
            engine.augment(obs)
            engine.close()
            return str(engine.stats()["pool_uploaded"] - before)

        assert in_a_fork(refreshes) == "3"  # per_call


def test_threads_share_one_engine():
    with obsaug.Engine(small_config()) as engine:
        errors = []

        def work(seed):
            try:
                obs = obs_batch(4, seed=seed)
                for _ in range(40):
                    assert engine.augment(obs).shape == obs.shape
            except Exception as e:  # noqa: BLE001  (reported below)
                errors.append(e)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert engine.step == 160


def test_reserve_steps_takes_consecutive_steps_atomically():
    with obsaug.Engine(small_config(threads=0)) as engine:
        obs = obs_batch(2)
        engine.augment(obs)
        assert engine.reserve_steps() == 1 and engine.step == 2
        assert engine.reserve_steps(3) == 2 and engine.step == 5
        assert torch.equal(engine.augment(obs), reference(engine, obs, 5))  # after the reserved
        firsts = []

        def work():
            firsts.extend(engine.reserve_steps(2) for _ in range(500))

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(firsts) == list(range(6, 6 + 4000, 2))  # no step handed out twice
        assert engine.step == 4006
        for bad, exc, message in [(True, TypeError, "count must be an int, got bool"),
                                  (2.0, TypeError, "count must be an int, got float"),
                                  (0, ValueError, r"count must be in \[1, 2\*\*63\), got 0"),
                                  (-1, ValueError, r"count must be in \[1, 2\*\*63\), got -1")]:
            with pytest.raises(exc, match=message):
                engine.reserve_steps(bad)
        assert engine.step == 4006
    with pytest.raises(RuntimeError, match="engine is closed"):
        engine.reserve_steps()


@pytest.mark.parametrize("obs, exc, message", [
    (obs_batch(2, 8), ValueError, r"8 channels, expected a positive multiple of frames.channels = 3"),
    (obs_batch(2, 9, 84, 84), ValueError, r"must be 40x48 \(frames.height x frames.width\), got 84x84"),
    (obs_batch(2).long(), TypeError, r"uint8 or float32 \[B, S\*C, H, W\], got int64"),
    (obs_batch(2)[0], ValueError, r"uint8 or float32 \[B, S\*C, H, W\], got uint8 \[9, 40, 48\]"),
])
def test_wrong_inputs_name_expected_and_got(obs, exc, message):
    """A wrong dtype is a TypeError, a wrong shape a ValueError (README "Errors")."""
    with obsaug.Engine(small_config(threads=0)) as engine:
        with pytest.raises(exc, match=message):
            engine.augment(obs)
        assert engine.step == 0


def test_calls_the_ops_refuse_take_no_step():
    """The ops' own checks (out=, in place on overlapping memory) run before the
    engine's counter is read: a refused call leaves it where it was."""
    with obsaug.Engine(small_config(threads=0)) as engine:
        obs = obs_batch(2)
        storage, index = obs.view(6, 3, 40, 48), torch.zeros(2, 3, dtype=torch.long)
        refused = [
            (TypeError, lambda: engine.augment(obs, out=torch.zeros(obs.shape))),
            (ValueError, lambda: engine.augment(obs, out=obs_batch(1))),
            (ValueError, lambda: engine.augment(obs, out=obs)),
            (TypeError, lambda: engine.gather_augment(storage, index, out=torch.zeros(obs.shape))),
            (ValueError, lambda: engine.augment_(obs_batch(1).expand(2, 9, 40, 48))),
        ]
        for exc, call in refused:
            with pytest.raises(exc):
                call()
            assert engine.step == 0
        first = engine.augment(obs)
        assert engine.step == 1 and torch.equal(first, reference(engine, obs, 0))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_calls_the_ops_refuse_leave_the_pool_as_it_was(mode):
    """A refused call refreshes no pool: its pool_calls stay, and in sync mode
    the calls after it give, bit for bit, what they give without it."""
    obs = obs_batch(4)
    outputs = []
    for refused in (False, True):
        with obsaug.Engine(small_config(mode, threads=1)) as engine:
            first = engine.augment(obs)
            if refused:
                with pytest.raises(ValueError, match="the result's shape"):
                    engine.augment(obs, out=obs_batch(1))
                with pytest.raises(ValueError, match="do not share memory"):
                    engine.augment_(obs_batch(1).expand(4, 9, 40, 48))
                assert engine.state_dict()["pool_calls"] == 1
            outputs.append((first, engine.augment(obs), engine.augment(obs)))
            assert engine.state_dict()["pool_calls"] == 3
    if mode == "sync":
        for want, got in zip(*outputs):
            assert torch.equal(got, want)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_calls_at_one_step_share_the_distractors(mode):
    """Calls in a row at one step draw the same parameters and see the same pool
    (the refresh runs only when the step changes), so the same obs gives the
    same result; a new step refreshes it."""
    obs = obs_batch(8)
    with obsaug.Engine(small_config(mode, threads=1)) as engine:
        for step in (0, 5, 5, 6):
            once, again = engine.augment(obs, step), engine.augment(obs, step)
            assert torch.equal(once, again), step
        calls = engine.state_dict()["pool_calls"]
        assert calls == 3, calls  # steps 0, 5 and 6
        engine.augment(obs, 6)
        assert engine.state_dict()["pool_calls"] == 3
        engine.augment(obs)  # the counter's step 0 differs from 6
        assert engine.state_dict()["pool_calls"] == 4


def test_a_resumed_engine_shares_the_last_step_as_the_original_does():
    """After load_state_dict, a call at the state's last step (the replay's
    next_obs of a shared sample) sees the pool as the original engine did."""
    obs = obs_batch(6)
    with obsaug.Engine(small_config("sync")) as first:
        for _ in range(4):
            first.augment(obs)
        state = first.state_dict()
        expected = [first.augment(obs, 3), first.augment(obs), first.augment(obs, 4)]
    with obsaug.Engine(small_config("sync")) as resumed:
        resumed.load_state_dict(state)
        got = [resumed.augment(obs, 3), resumed.augment(obs), resumed.augment(obs, 4)]
    for k, (want, result) in enumerate(zip(expected, got)):
        assert torch.equal(result, want), k


def test_shared_replay_samples_see_the_same_distractors():
    """ReplayBuffer.sample(share_augmentation=True) gathers obs and next_obs at
    one step: with every frame alike, the two are equal, overlay included."""
    rb = obsaug.ReplayBuffer(capacity=64, frame_shape=(3, 40, 48), frame_stack=3,
                             action_shape=(1,))
    frame = torch.full((3, 40, 48), 100, dtype=torch.uint8)
    rb.add_first(frame)
    for _ in range(20):
        rb.add(torch.zeros(1), 0.0, frame)
    for mode in ("sync", "async"):
        with obsaug.Engine(small_config(mode, threads=1)) as engine:
            for _ in range(3):
                batch = rb.sample(16, augment=engine, share_augmentation=True)
                assert torch.equal(batch["obs"], batch["next_obs"]), mode
                batch = rb.sample(16, augment=engine)
                assert not torch.equal(batch["obs"], batch["next_obs"]), mode


def test_wrong_device_names_expected_and_got():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to pass a tensor on the wrong device")
    with obsaug.Engine(small_config(threads=0)) as engine:
        with pytest.raises(ValueError, match=r"must be on cpu \(the config's device\), got cuda"):
            engine.augment(obs_batch().cuda())


def test_bad_configs_raise_value_error():
    with pytest.raises(ValueError, match=r"<dict>: pipeline\[0\]\.op: .*did you mean 'shift'"):
        obsaug.Engine({"pipeline": [{"op": "shft"}]})
    with pytest.raises(TypeError, match="path to a YAML file"):
        obsaug.Engine(42)


def test_an_input_that_requires_grad_is_refused():
    config = {"seed": 0, "frames": {"stack": 3, "channels": 3, "height": 16, "width": 16},
              "pipeline": [{"op": "shift", "pad": 2}]}
    x = (torch.rand(2, 9, 16, 16) * 255).requires_grad_()
    with obsaug.Engine(config) as engine:
        for call, arg in ((lambda: engine.augment(x), "obs"), (lambda: engine.augment_(x), "obs"),
                          (lambda: engine.gather_augment(x.view(6, 3, 16, 16),
                                                         torch.zeros(2, 3, dtype=torch.long)),
                           "storage")):
            with pytest.raises(ValueError, match=f"Engine.* {arg} requires grad.*{arg}.detach"):
                call()
        leaf = torch.zeros(2, 9, 16, 16, requires_grad=True)
        with pytest.raises(ValueError, match=r"Engine\.augment: out requires grad.*out\.detach"):
            engine.augment(x.detach(), out=leaf)
        with pytest.raises(ValueError, match=r"Engine\.gather_augment: out requires grad"):
            engine.gather_augment(x.detach().view(6, 3, 16, 16),
                                  torch.zeros(2, 3, dtype=torch.long), out=leaf)
        assert not leaf.detach().any()
        assert engine.step == 0  # refused before it took a step
        with torch.no_grad():
            assert torch.equal(engine.augment(x, step=0), engine.augment(x.detach(), step=0))


def test_writing_a_tensor_autograd_saved_fails_backward():
    """Engine.augment_ (and out=) bump the written tensor's version, as the ops do."""
    config = {"seed": 0, "frames": {"stack": 2, "channels": 3, "height": 8, "width": 8},
              "pipeline": [{"op": "shift", "pad": 2}]}
    weight = torch.rand(4, 6, 3, 3, requires_grad=True)
    with obsaug.Engine(config) as engine:
        for write in (lambda x: engine.augment_(x),
                      lambda x: engine.augment(x.clone(), out=x),
                      lambda x: engine.gather_augment(x.clone().view(4, 3, 8, 8),
                                                      torch.tensor([[0, 1], [2, 3]]), out=x)):
            obs = torch.rand(2, 6, 8, 8) * 255
            loss = torch.nn.functional.conv2d(obs, weight).sum()
            write(obs)
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward()


SHIFT_ONLY = {"seed": 0, "frames": {"stack": 3, "channels": 3, "height": 16, "width": 16},
              "pipeline": [{"op": "shift", "pad": 2}]}


@pytest.mark.parametrize("step, exc, message", [
    (-1, ValueError, r"^step must be in \[0, 2\*\*64\), got -1$"),
    (2**64, ValueError, r"^step must be in \[0, 2\*\*64\), got 18446744073709551616$"),
    (True, TypeError, r"^step must be an int in \[0, 2\*\*64\), got bool$"),
    (2.0, TypeError, r"^step must be an int in \[0, 2\*\*64\), got float$"),
    ("3", TypeError, r"^step must be an int in \[0, 2\*\*64\), got str$"),
])
def test_a_bad_step_names_the_argument(step, exc, message):
    """As the ops check `step` (obsaug.ops): a bool is not step 1, a negative step or one
    beyond 64 bits names the range, for every method that takes one."""
    obs = obs_batch(2, 9, 16, 16)
    storage = torch.zeros(4, 3, 16, 16, dtype=torch.uint8)
    indices = torch.zeros(2, 3, dtype=torch.int64)
    with obsaug.Engine(SHIFT_ONLY) as engine:
        for call in (lambda: engine.augment(obs, step), lambda: engine.augment_(obs, step),
                     lambda: engine.augment(obs, step=step),
                     lambda: engine.gather_augment(storage, indices, step)):
            with pytest.raises(exc, match=message):
                call()
        assert engine.step == 0


def test_a_step_may_be_a_numpy_or_torch_integer():
    np = pytest.importorskip("numpy")
    obs = obs_batch(2, 9, 16, 16)
    with obsaug.Engine(SHIFT_ONLY) as engine:
        expected = engine.augment(obs, 5)
        assert torch.equal(engine.augment(obs, np.int64(5)), expected)
        assert torch.equal(engine.augment(obs, torch.tensor(5)), expected)
        assert torch.equal(engine.augment(obs, 2**64 - 1), engine.augment(obs, 2**64 - 1))


@pytest.mark.parametrize("key, value, exc, message", [
    ("step", -1, ValueError, r"^state_dict\['step'\] must be an int in \[0, 2\*\*64\), got -1$"),
    ("step", 2**64, ValueError, r"^state_dict\['step'\] must be an int in \[0, 2\*\*64\), got 18446744073709551616$"),
    ("step", 2.0, TypeError, r"^state_dict\['step'\] must be an int in \[0, 2\*\*64\), got float$"),
    ("step", True, TypeError, r"^state_dict\['step'\] must be an int in \[0, 2\*\*64\), got bool$"),
    ("seed", None, TypeError, r"^state_dict\['seed'\] must be an int in \[0, 2\*\*64\), got NoneType$"),
    ("pool_slots", None, TypeError,
     r"^state_dict\['pool_slots'\] must be a list of ints in \[0, 2\*\*64\), got NoneType$"),
    ("pool_slots", [3, -1], ValueError,
     r"^state_dict\['pool_slots'\]\[1\] must be an int in \[0, 2\*\*64\), got -1$"),
    ("pool_checksums", [1.5], TypeError,
     r"^state_dict\['pool_checksums'\]\[0\] must be an int in \[0, 2\*\*64\), got float$"),
])
def test_a_bad_state_value_names_its_key(key, value, exc, message):
    with obsaug.Engine(SHIFT_ONLY) as engine:
        state = engine.state_dict()
        with pytest.raises(exc, match=message):
            engine.load_state_dict({**state, key: value})
        assert engine.state_dict() == state


def test_state_values_may_be_numpy_or_torch_integers():
    np = pytest.importorskip("numpy")
    with obsaug.Engine(SHIFT_ONLY) as engine:
        state = engine.state_dict()
        engine.load_state_dict({**state, "step": np.uint64(7)})
        assert engine.step == 7
        engine.load_state_dict({**state, "step": torch.tensor(9)})
        assert engine.step == 9
