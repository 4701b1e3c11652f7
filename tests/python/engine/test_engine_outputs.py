"""Where Engine results go: out= (checked like obsaug.ops' out=) and
output.reuse (one kept buffer per call site and shape: the next call of the
same site returns the same storage; a replay sample's obs and next_obs and a
plain augment never alias; without reuse every call returns a fresh tensor)."""
import pytest
import torch

import obsaug

from conftest import needs_engine
from test_engine import obs_batch, small_config

pytestmark = needs_engine


def engines(**kw):
    """A fresh-output engine and a reusing one over the same fixed pool (threads 0)."""
    return (obsaug.Engine(small_config(threads=0)),
            obsaug.Engine(small_config(threads=0), reuse_output=True, **kw))


def test_default_returns_a_fresh_tensor_per_call():
    fresh, _ = engines()
    obs = obs_batch()
    a, b = fresh.augment(obs, 0), fresh.augment(obs, 0)
    assert a.data_ptr() != b.data_ptr() and torch.equal(a, b)
    assert fresh.config["output"]["reuse"] is False


def test_reuse_returns_the_same_storage_until_the_next_call():
    fresh, reusing = engines()
    obs = obs_batch()
    a = reusing.augment(obs, 0)
    assert torch.equal(a, fresh.augment(obs, 0))
    b = reusing.augment(obs, 1)
    assert b.data_ptr() == a.data_ptr()
    assert torch.equal(b, fresh.augment(obs, 1)) and torch.equal(a, b)  # a was overwritten
    # another batch size: its own buffer, and the first one is still kept
    c = reusing.augment(obs_batch(b=2), 2)
    assert c.data_ptr() != b.data_ptr()
    assert reusing.augment(obs, 3).data_ptr() == a.data_ptr()
    assert reusing.config["output"]["reuse"] is True


def test_reuse_from_the_config_key():
    with obsaug.Engine(small_config(threads=0, reuse=True)) as engine:
        obs = obs_batch()
        assert engine.augment(obs).data_ptr() == engine.augment(obs).data_ptr()
        assert "reuse: true" in engine.config_yaml()
    with pytest.raises(ValueError, match=r"output\.reuse: expected true or false, got"):
        obsaug.Engine(small_config(threads=0, reuse="yes please"))
    with pytest.raises(TypeError, match=r"reuse_output must be a bool or None, got int"):
        obsaug.Engine(small_config(threads=0), reuse_output=1)


def test_replay_sample_keeps_obs_and_next_obs_apart():
    _, reusing = engines()
    rb = obsaug.ReplayBuffer(capacity=32, frame_shape=(3, 40, 48), frame_stack=3,
                             action_shape=(2,))
    g = torch.Generator().manual_seed(1)
    rb.add_first(torch.randint(0, 256, (3, 40, 48), dtype=torch.uint8, generator=g))
    for _ in range(10):
        rb.add(torch.zeros(2), 1.0, torch.randint(0, 256, (3, 40, 48), dtype=torch.uint8,
                                                   generator=g))
    first = rb.sample(4, augment=reusing)
    plain = reusing.augment(obs_batch(b=4))
    ptrs = {first["obs"].data_ptr(), first["next_obs"].data_ptr(), plain.data_ptr()}
    assert len(ptrs) == 3
    storage = torch.randint(0, 256, (6, 3, 40, 48), dtype=torch.uint8, generator=g)
    gathered = reusing.gather_augment(storage, torch.randint(0, 6, (4, 3), generator=g))
    assert gathered.data_ptr() not in ptrs
    second = rb.sample(4, augment=reusing)
    assert second["obs"].data_ptr() == first["obs"].data_ptr()
    assert second["next_obs"].data_ptr() == first["next_obs"].data_ptr()


def test_out_is_written_and_checked():
    fresh, reusing = engines()
    obs = obs_batch()
    out = torch.empty_like(obs)
    assert reusing.augment(obs, 4, out=out) is out
    assert torch.equal(out, fresh.augment(obs, 4))
    storage = obs_batch(b=6, c=3)
    idx = torch.tensor([[0, 1, 5], [2, 2, 3]])
    gout = torch.empty(2, 9, 40, 48, dtype=torch.uint8)
    assert fresh.gather_augment(storage, idx, 6, out=gout) is gout
    assert torch.equal(gout, fresh.gather_augment(storage, idx, 6))
    with pytest.raises(TypeError, match=r"out must be uint8 \[5, 9, 40, 48\] on cpu .*got float32"):
        fresh.augment(obs, out=torch.empty(5, 9, 40, 48))
    with pytest.raises(ValueError, match=r"out must be uint8 \[5, 9, 40, 48\] .*shape.*got uint8 "
                                         r"\[4, 9, 40, 48\]"):
        fresh.augment(obs, out=torch.empty(4, 9, 40, 48, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"out shares memory with obs"):
        fresh.augment(obs, out=obs)
    with pytest.raises(TypeError, match=r"out must be a torch.Tensor"):
        fresh.augment(obs, out=[1])


def test_a_reused_result_passed_back_is_refused_by_the_lifetime_rule():
    """With output.reuse, augment(augment(x)) would write the input's own storage:
    a ValueError that says so (not the out= check's words: no out= was passed),
    with no step taken; a clone, or augment_ in place, is what works."""
    fresh, reusing = engines()
    obs = obs_batch()
    first = reusing.augment(obs, 0)
    calls = reusing.stats()["calls"]
    with pytest.raises(ValueError, match=r"^Engine\.augment: obs is this engine's reused output, "
                                         r"the buffer this call writes \(output\.reuse: a result is "
                                         r"valid until the next call of the same site with its shape "
                                         r"and dtype\); pass a clone, or augment it in place with "
                                         r"augment_$"):
        reusing.augment(first, 1)
    assert reusing.stats()["calls"] == calls
    twice = fresh.augment(fresh.augment(obs, 0), 1)
    assert torch.equal(reusing.augment(first.clone(), 1), twice)
    again = reusing.augment(obs, 0)
    assert torch.equal(reusing.augment_(again, 1), twice)
    # gather_augment's storage: frames [N, 3, H, W] that are its own earlier result
    with obsaug.Engine(small_config(threads=0), reuse_output=True) as one:
        storage = obs_batch(b=4, c=3)
        indices = torch.tensor([[0], [1], [2], [3]])
        gathered = one.gather_augment(storage, indices, 0)
        with pytest.raises(ValueError, match=r"^Engine\.gather_augment: storage is this engine's "
                                             r"reused output, .* pass a clone$"):
            one.gather_augment(gathered, indices, 1)
