"""obsaug.ReplayBuffer and obsaug.ops.gather_augment against docs/replay.md.

The oracle is ``replay_reference.ReferenceReplay`` (pure Python, written from
the document): random streams of single and batched calls over several
environments go to both, and every sample must agree (indices, obs,
next_obs, action, reward, discount, weights). Hand-computed cases pin down
stacks at episode starts and at the ring wrap, parallel environments and
n-step returns; chi-square tests check the sampling distributions without
the oracle; the fused sample + augment equals sample-then-augment bit for
bit; checkpoints round-trip and survive SIGKILL; bad input raises the one
type of its kind (README "Errors") naming the problem, and changes nothing.

Frames carry their logical index in pixels ``[0, 0, 0]`` (t % 256),
``[0, 0, 1]`` (t // 256) and ``[0, 0, 2]`` (env), so a sampled stack says
which frames it holds.
"""
import math
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

import obsaug
import reference
from conftest import random_pool
from replay_reference import ReferenceReplay, sample_block

from conftest import PHOTOS, PYDIR, TESTS, needs_cuda, needs_engine

HERE = os.path.dirname(os.path.abspath(__file__))

HAS_RB = hasattr(obsaug, "ReplayBuffer")


@pytest.fixture(autouse=True)
def _needs_replay_buffer(request):
    """Like the Engine tests: skip where the native module was built without the replay
    buffer (obsaug/__init__.py exports it only then); the gather_augment op tests run."""
    if not HAS_RB and "gather_augment" not in request.node.name:
        pytest.skip("obsaug._C built without the ReplayBuffer")


PIPE = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]

DEFAULTS = dict(capacity=48, frame_shape=(3, 4, 5), frame_stack=3, action_shape=(2,),
                action_dtype=torch.float32, n_step=1, gamma=0.9, prioritized=False,
                alpha=0.6, beta=0.4, seed=11)


def options(**kw):
    return {**DEFAULTS, **kw}


def make_rb(device="cpu", **kw):
    return obsaug.ReplayBuffer(device=device, **options(**kw))


def make_pair(**kw):
    return make_rb(**kw), ReferenceReplay(**options(**kw))


# ------------------------------------------------------------------ frames

def tagged(t, env=0, shape=(3, 4, 5), noise=None):
    """A frame whose pixels [0,0,0..2] say (t % 256, t // 256, env); the rest noise or t."""
    if noise is None:
        f = torch.full(shape, t % 256, dtype=torch.uint8)
    else:
        f = torch.randint(0, 256, shape, dtype=torch.uint8, generator=noise)
    flat = f.view(-1)
    flat[0], flat[1], flat[2] = t % 256, (t // 256) % 256, env
    return f


def tag_of(frame):
    flat = frame.reshape(-1)
    return int(flat[0]) + 256 * int(flat[1])


def stack_tags(stacked, c):
    """Logical indices of the frames of one sampled stack [S*C, H, W], oldest first."""
    return [tag_of(stacked[s * c:(s + 1) * c]) for s in range(stacked.shape[0] // c)]


def f32(x):
    return float(np.float32(x))


# ------------------------------------------------------------- comparisons

BATCH_KEYS = {"obs", "next_obs", "action", "reward", "discount", "indices"}


def assert_matches(got, want, c, what=""):
    """A real batch against the reference's."""
    keys = BATCH_KEYS | ({"weights"} if "weights" in want else set())
    assert keys <= set(got), f"{what}: batch keys {sorted(got)}"
    assert ("weights" in got) == ("weights" in want), f"{what}: weights only when prioritized"
    gi, wi = got["indices"], want["indices"]
    assert gi.dtype == torch.int64 and gi.shape == wi.shape, \
        f"{what}: indices {gi.dtype} {gi.shape}"
    assert torch.equal(gi.cpu(), wi), f"{what}: indices {gi.tolist()} != reference {wi.tolist()}"
    for key in ("obs", "next_obs"):
        g, w = got[key].cpu(), want[key]
        assert g.dtype == torch.uint8 and g.shape == w.shape, f"{what}: {key} {g.dtype} {g.shape}"
        if not torch.equal(g, w):
            bad = [b for b in range(w.shape[0]) if not torch.equal(g[b], w[b])]
            b = bad[0]
            raise AssertionError(
                f"{what}: {key} differs in samples {bad}; sample {b} (slot {int(wi[b])}) holds "
                f"frames {stack_tags(g[b], c)}, reference {stack_tags(w[b], c)}")
    g, w = got["action"].cpu(), want["action"]
    assert g.dtype == w.dtype and g.shape == w.shape, f"{what}: action {g.dtype} {g.shape}"
    assert torch.equal(g, w), f"{what}: action {g.tolist()} != {w.tolist()}"
    for key, rtol in (("reward", 1e-6), ("discount", 1e-6), ("weights", 1e-5)):
        if key not in want:
            continue
        g, w = got[key].cpu(), want[key]
        assert g.dtype == torch.float32 and g.shape == w.shape, f"{what}: {key} {g.dtype}"
        torch.testing.assert_close(g, w, rtol=rtol, atol=1e-6, msg=lambda m: f"{what}: {key}: {m}")


def assert_same(a, b, what=""):
    """Two real batches, bit for bit."""
    assert set(a) == set(b), what
    for key in a:
        x, y = a[key].cpu(), b[key].cpu()
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {key}"
        if x.dtype == torch.float32:
            x, y = x.view(torch.int32), y.view(torch.int32)
        assert torch.equal(x, y), f"{what}: {key} differs"


def counters(rb):
    return (len(rb), rb.num_valid, rb.total_frames, rb.sample_calls)


# ------------------------------------------------------------ random streams

class Stream:
    """Sends the same random add_first / add calls to a real buffer and the reference."""

    def __init__(self, rb, ref, seed, n_envs=1, batched=False, p_term=0.06, p_trunc=0.04,
                 p_reset=0.03, env_weights=None):
        self.rb, self.ref = rb, ref
        self.rng = random.Random(seed)
        self.noise = torch.Generator().manual_seed(seed)
        self.n_envs, self.batched = n_envs, batched
        self.p_term, self.p_trunc, self.p_reset = p_term, p_trunc, p_reset
        self.env_weights = env_weights or [1] * n_envs

    def frame(self, t, env):
        return tagged(t, env, self.ref.frame_shape, self.noise)

    def action(self):
        shape, dtype = self.ref.action_shape, self.ref.action_dtype
        if dtype.is_floating_point:
            return torch.tensor([f32(self.rng.uniform(-1, 1)) for _ in range(math.prod(shape))],
                                dtype=dtype).reshape(shape)
        return torch.tensor([self.rng.randrange(6) for _ in range(math.prod(shape))],
                            dtype=dtype).reshape(shape)

    def reward(self):
        return f32(self.rng.uniform(-2, 2))

    def ends(self):
        term = self.rng.random() < self.p_term
        trunc = not term and self.rng.random() < self.p_trunc
        return term, trunc

    def step(self):
        (self.batched_step if self.batched else self.single_step)()

    def single_step(self):
        rng, ref = self.rng, self.ref
        env = rng.choices(range(self.n_envs), self.env_weights)[0]
        kw = {} if env == 0 and rng.random() < 0.5 else {"env": env}
        f = self.frame(ref.total, env)
        if env not in ref.open or rng.random() < self.p_reset:
            self.rb.add_first(f, **kw)
            ref.add_first(f, env)
        else:
            a, r = self.action(), self.reward()
            term, trunc = self.ends()
            self.rb.add(a, r, f, terminated=term, truncated=trunc, **kw)
            ref.add(a, r, f, term, trunc, env)

    def env_arg(self, ids):
        if ids == list(range(len(ids))) and self.rng.random() < 0.5:
            return {}
        if self.rng.random() < 0.5:
            return {"env": list(ids)}
        return {"env": torch.tensor(ids, dtype=torch.int64)}

    def batched_step(self):
        rng, ref = self.rng, self.ref
        if rng.random() < 0.4:
            ids = list(range(self.n_envs))
        else:
            ids = rng.sample(range(self.n_envs), rng.randint(1, self.n_envs))
        firsts = [e for e in ids if e not in ref.open or rng.random() < self.p_reset]
        adds = [e for e in ids if e not in firsts]
        if firsts:
            frames = torch.stack([self.frame(ref.total + i, e) for i, e in enumerate(firsts)])
            self.rb.add_first(frames, **self.env_arg(firsts))
            for e, f in zip(firsts, frames):
                ref.add_first(f, e)
        if adds:
            frames = torch.stack([self.frame(ref.total + i, e) for i, e in enumerate(adds)])
            actions = torch.stack([self.action() for _ in adds])
            rewards = torch.tensor([self.reward() for _ in adds], dtype=torch.float32)
            ends = [self.ends() for _ in adds]
            if not any(t or u for t, u in ends) and rng.random() < 0.5:
                flags = {"terminated": False, "truncated": False}   # one bool for all
            else:
                flags = {"terminated": torch.tensor([t for t, _ in ends]),
                         "truncated": torch.tensor([u for _, u in ends])}
            self.rb.add(actions, rewards, frames, **flags, **self.env_arg(adds))
            for e, f, a, r, (t, u) in zip(adds, frames, actions, rewards.tolist(), ends):
                ref.add(a, r, f, t, u, e)


def compare_sample(rb, ref, batch_size, what):
    if ref.num_valid == 0:
        with pytest.raises(ValueError):
            rb.sample(1)
        return None
    want = ref.sample(batch_size)                 # B > num_valid too: with replacement
    got = rb.sample(batch_size)
    assert_matches(got, want, ref.frame_shape[0], what)
    return got


def check_counters(rb, ref, what=""):
    assert len(rb) == len(ref), what
    assert rb.total_frames == ref.total, what
    assert rb.num_valid == ref.num_valid, f"{what}: num_valid {rb.num_valid} != {ref.num_valid}"
    assert rb.sample_calls == ref.calls, what


STREAMS = {
    # name: (options, stream kwargs, steps)
    "single_n1": (dict(), dict(), 160),
    "single_n3_wrap": (dict(n_step=3, capacity=37), dict(), 170),
    "stack1_n2": (dict(frame_stack=1, n_step=2, capacity=20), dict(), 90),
    "stack4_bigseed": (dict(frame_stack=4, seed=2**40 + 5, capacity=30, n_step=2),
                       dict(p_term=0.03, p_trunc=0.02), 120),
    # env 2 is rare: its latest frame is often overwritten before its next add
    "parallel_skewed": (dict(n_step=3, frame_stack=2, capacity=30),
                        dict(n_envs=3, env_weights=[12, 4, 1], p_term=0.02, p_trunc=0.01), 200),
    "batched": (dict(capacity=50, n_step=3), dict(n_envs=4, batched=True), 60),
    "discrete_actions": (dict(action_shape=(), action_dtype=torch.int64, capacity=25),
                         dict(n_envs=2), 100),
    "few_valid": (dict(capacity=60, frame_stack=2), dict(p_reset=0.85), 140),
}


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize("name", list(STREAMS))
def test_matches_reference_on_random_streams(name, prioritized):
    opts, stream_kw, steps = STREAMS[name]
    rb, ref = make_pair(prioritized=prioritized, **opts)
    stream = Stream(rb, ref, seed=10 * sorted(STREAMS).index(name) + prioritized, **stream_kw)
    rng = random.Random(5)
    for i in range(steps):
        stream.step()
        if i % 4 == 3:
            check_counters(rb, ref, f"{name} step {i}")
            got = compare_sample(rb, ref, 12, f"{name} step {i}")
            if prioritized and got is not None and rng.random() < 0.7:
                idx = sorted(set(got["indices"].tolist()))
                pri = torch.tensor([f32(rng.choice([0.0, 0.01, 0.5, 1.0, 2.5, 7.0]) *
                                        rng.uniform(0.5, 1.5)) for _ in idx],
                                   dtype=torch.float32)
                rb.update_priorities(torch.tensor(idx, dtype=torch.int64), pri)
                ref.update_priorities(idx, pri)
    check_counters(rb, ref, name)
    assert ref.calls > 5


def test_len_counters_properties_and_storage():
    rb = make_rb(capacity=10)
    assert len(rb) == 0 and rb.num_valid == 0 and rb.total_frames == 0 and rb.sample_calls == 0
    assert rb.capacity == 10 and rb.frame_stack == 3
    assert torch.device(rb.device).type == "cpu"
    assert rb.storage.shape == (10, 3, 4, 5) and rb.storage.dtype == torch.uint8
    rb.add_first(tagged(0))
    assert len(rb) == 1 and rb.num_valid == 0
    for t in range(1, 14):
        rb.add(torch.zeros(2), 0.0, tagged(t))
        assert len(rb) == min(t + 1, 10) and rb.total_frames == t + 1
    # frames 4..13 in the ring; stacks need t - 2 >= 4, and a successor: t in 6..12
    assert rb.num_valid == 7
    for t in range(4, 14):
        assert tag_of(rb.storage[t % 10]) == t
        assert torch.equal(rb.storage[t % 10], tagged(t))
    rb.sample(3)
    assert rb.sample_calls == 1


def test_frames_are_copied_from_views_and_numpy():
    rb = make_rb(capacity=4, frame_stack=1)
    first = tagged(0)
    rb.add_first(first)
    first.fill_(0)                                              # the caller reuses its buffer
    wide = torch.stack([tagged(1, noise=torch.Generator().manual_seed(1))] * 2, dim=-1)
    view = wide[..., 1]                                         # non-contiguous [3, 4, 5]
    assert not view.is_contiguous()
    rb.add(torch.zeros(2), 0.0, view)
    arr = tagged(2).numpy().copy()
    rb.add(np.zeros(2, dtype=np.float32), 0.0, arr)
    arr[...] = 0
    assert torch.equal(rb.storage[0], tagged(0))
    assert torch.equal(rb.storage[1], view)
    assert torch.equal(rb.storage[2], tagged(2))


# ------------------------------------------------- hand-computed cases

def sample_all(rb, calls=40):
    """{slot: (obs tags, next_obs tags, action, reward, discount)} over many uniform samples."""
    seen = {}
    c = rb.storage.shape[1]
    for _ in range(calls):
        batch = rb.sample(rb.num_valid)
        for b, slot in enumerate(batch["indices"].tolist()):
            row = (stack_tags(batch["obs"][b], c), stack_tags(batch["next_obs"][b], c),
                   batch["action"][b].tolist(), float(batch["reward"][b]),
                   float(batch["discount"][b]))
            assert seen.setdefault(slot, row) == row, f"slot {slot}: {row} != {seen[slot]}"
    return seen


def test_stacks_repeat_the_first_frame_at_episode_starts():
    rb = make_rb(capacity=32, gamma=0.5)
    rb.add_first(tagged(0))
    rb.add(torch.tensor([0.0, 1.0]), 1.0, tagged(1))
    rb.add(torch.tensor([0.0, 2.0]), 2.0, tagged(2))
    rb.add(torch.tensor([0.0, 3.0]), 3.0, tagged(3), terminated=True)
    rb.add_first(tagged(4))
    rb.add(torch.tensor([0.0, 5.0]), 5.0, tagged(5))
    assert rb.num_valid == 4
    seen = sample_all(rb)
    assert seen == {
        0: ([0, 0, 0], [0, 0, 1], [0.0, 1.0], 1.0, 0.5),
        1: ([0, 0, 1], [0, 1, 2], [0.0, 2.0], 2.0, 0.5),
        2: ([0, 1, 2], [1, 2, 3], [0.0, 3.0], 3.0, 0.0),
        4: ([4, 4, 4], [4, 4, 5], [0.0, 5.0], 5.0, 0.5),
    }


@pytest.mark.parametrize("n_step, second_episode, valid", [
    (1, None, list(range(17, 24))),          # one episode: stacks need t - 2 >= 15
    (3, None, list(range(17, 22))),
    (1, 16, list(range(16, 24))),            # episode 2 starts at 16: 15 ends (truncated)
    (3, 16, list(range(16, 22))),
])
def test_stacks_never_cross_the_write_head(n_step, second_episode, valid):
    rb = make_rb(capacity=10, n_step=n_step)
    rb.add_first(tagged(0))
    for t in range(1, 25):
        if t == second_episode:
            rb.add_first(tagged(t))
        else:
            rb.add(torch.zeros(2), 0.0, tagged(t))
    assert len(rb) == 10 and rb.total_frames == 25
    assert rb.num_valid == len(valid)
    seen = sample_all(rb, calls=30)
    assert sorted(seen) == sorted(t % 10 for t in valid)
    start = second_episode if second_episode is not None else 0
    for t in valid:
        obs, nxt = seen[t % 10][:2]
        assert min(obs + nxt) >= 15, f"transition {t} reads an overwritten frame: {obs} {nxt}"
        assert obs == [max(start, t - 2), max(start, t - 1), t]
        u = t + n_step
        assert nxt == [max(start, u - 2), max(start, u - 1), u]


def test_parallel_envs_batched_calls_follow_their_own_episodes():
    rb = make_rb(capacity=32, gamma=0.5)

    def frames(*pairs):
        return torch.stack([tagged(t, e) for t, e in pairs])

    def actions(*pairs):
        return torch.tensor([[float(t), float(e)] for t, e in pairs])

    rb.add_first(frames((0, 0), (1, 1)))                                  # envs 0..N-1
    rb.add(actions((2, 0), (3, 1)), torch.tensor([0.5, 1.5]), frames((2, 0), (3, 1)))
    rb.add(actions((4, 0), (5, 1)), torch.tensor([2.5, 3.5]), frames((4, 0), (5, 1)),
           terminated=torch.tensor([False, True]), truncated=torch.tensor([False, False]))
    rb.add_first(frames((6, 1)), env=torch.tensor([1]))
    rb.add(actions((7, 1), (8, 0)), torch.tensor([4.5, 5.5]), frames((7, 1), (8, 0)),
           env=[1, 0])
    assert rb.total_frames == 9 and rb.num_valid == 6
    seen = sample_all(rb)
    assert seen == {
        0: ([0, 0, 0], [0, 0, 2], [2.0, 0.0], 0.5, 0.5),
        1: ([1, 1, 1], [1, 1, 3], [3.0, 1.0], 1.5, 0.5),
        2: ([0, 0, 2], [0, 2, 4], [4.0, 0.0], 2.5, 0.5),
        3: ([1, 1, 3], [1, 3, 5], [5.0, 1.0], 3.5, 0.0),
        4: ([0, 2, 4], [2, 4, 8], [8.0, 0.0], 5.5, 0.5),
        6: ([6, 6, 6], [6, 6, 7], [7.0, 1.0], 4.5, 0.5),
    }
    # single-step calls name env 0 by default; env 1 is open at frame 7
    rb.add(torch.tensor([9.0, 1.0]), 6.5, tagged(9, 1), env=1)
    rb.add(torch.tensor([10.0, 0.0]), 7.5, tagged(10, 0))
    seen = sample_all(rb)
    assert seen[7] == ([6, 6, 7], [6, 7, 9], [9.0, 1.0], 6.5, 0.5)
    assert seen[8] == ([2, 4, 8], [4, 8, 10], [10.0, 0.0], 7.5, 0.5)


N_STEP_CASES = {
    # (n, terminated): {slot: (reward, discount, next_obs frames)}; gamma = 0.5,
    # episode 1 = frames 0..3 (rewards 1, 2, 4), episode 2 = frames 4..6 (8, 16), open
    (3, False): {0: (3.0, 0.125, [1, 2, 3]), 1: (4.0, 0.25, [1, 2, 3]),
                 2: (4.0, 0.5, [1, 2, 3])},
    (3, True): {0: (3.0, 0.0, [1, 2, 3]), 1: (4.0, 0.0, [1, 2, 3]), 2: (4.0, 0.0, [1, 2, 3])},
    (1, False): {0: (1.0, 0.5, [0, 0, 1]), 1: (2.0, 0.5, [0, 1, 2]), 2: (4.0, 0.5, [1, 2, 3]),
                 4: (8.0, 0.5, [4, 4, 5]), 5: (16.0, 0.5, [4, 5, 6])},
    (1, True): {0: (1.0, 0.5, [0, 0, 1]), 1: (2.0, 0.5, [0, 1, 2]), 2: (4.0, 0.0, [1, 2, 3]),
                4: (8.0, 0.5, [4, 4, 5]), 5: (16.0, 0.5, [4, 5, 6])},
}


@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("ending", ["terminated", "truncated", "add_first"])
def test_n_step_returns_and_discounts(n_step, ending):
    rb = make_rb(capacity=32, gamma=0.5, n_step=n_step, frame_stack=3)
    rb.add_first(tagged(0))
    rb.add(torch.zeros(2), 1.0, tagged(1))
    rb.add(torch.zeros(2), 2.0, tagged(2))
    rb.add(torch.zeros(2), 4.0, tagged(3), terminated=ending == "terminated",
           truncated=ending == "truncated")
    rb.add_first(tagged(4))                      # closes episode 1 as truncated if still open
    rb.add(torch.zeros(2), 8.0, tagged(5))
    rb.add(torch.zeros(2), 16.0, tagged(6))      # episode 2 stays open
    want = N_STEP_CASES[n_step, ending == "terminated"]
    assert rb.num_valid == len(want)             # n = 3: frame 6 has no successor, so 4, 5 wait
    seen = sample_all(rb)
    got = {slot: (row[3], row[4], row[1]) for slot, row in seen.items()}
    assert got == want


# ------------------------------------------------- sampling distributions

def wilson_hilferty(df, z=4.265):
    """chi-square quantile by the Wilson-Hilferty approximation; z = 4.265 is p = 1e-5."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi_square(counts, expected):
    return float(((counts - expected) ** 2 / expected).sum())


def one_episode(rb, frames, shape=(1, 3, 3)):
    rb.add_first(tagged(0, shape=shape))
    for t in range(1, frames):
        rb.add(torch.zeros(2), 0.0, tagged(t, shape=shape))


class Both:
    """The same single-environment calls to a real buffer and the reference."""

    def __init__(self, rb, ref):
        self.rb, self.ref = rb, ref

    def add_first(self, frame, env=0):
        self.rb.add_first(frame, env=env)
        self.ref.add_first(frame, env)

    def add(self, action, reward, frame, terminated=False, truncated=False, env=0):
        self.rb.add(action, reward, frame, terminated=terminated, truncated=truncated, env=env)
        self.ref.add(action, reward, frame, terminated, truncated, env)


def test_prioritized_frequencies_follow_p_to_the_alpha():
    alpha, beta = 0.7, 0.5
    rb = make_rb(capacity=40, frame_shape=(1, 3, 3), frame_stack=1, prioritized=True,
                 alpha=alpha, beta=beta, seed=123)
    one_episode(rb, 40)
    assert rb.num_valid == 39                    # frame 39 has no successor yet
    slots = torch.arange(39)
    p = torch.tensor([0.2 + 0.9 * (i % 5) + 0.05 * i for i in range(39)], dtype=torch.float32)
    rb.update_priorities(slots, p)
    q = p.double() ** alpha
    prob = (q / q.sum()).numpy()
    counts = np.zeros(40)
    draws, batch = 0, 32
    while draws < 20000:
        out = rb.sample(batch)
        idx = out["indices"].numpy()
        np.add.at(counts, idx, 1)
        want_w = ((q[idx] / q.min()) ** -beta).float()
        torch.testing.assert_close(out["weights"], want_w, rtol=1e-5, atol=1e-6)
        draws += batch
    assert counts[39] == 0, "the invalid transition was sampled"
    stat = chi_square(counts[:39], prob * draws)
    assert stat < wilson_hilferty(38), f"chi-square {stat:.1f} with 38 degrees of freedom"
    # and it can fail: the same counts against p (alpha = 1) are far off
    prob1 = (p.double() / p.double().sum()).numpy()
    assert chi_square(counts[:39], prob1 * draws) > 3 * wilson_hilferty(38)


def test_prioritized_draws_follow_the_tree_after_many_updates():
    """The buffer keeps its sum tree current incrementally; the reference rebuilds
    it from scratch on every sample (docs/replay.md). A capacity that is not a
    power of two (padding leaves), a ring that wraps, episode ends (slots turning
    invalid), many updates of rounding sums with repeats and zeros: every draw and
    weight agrees, and no zero weight is ever drawn."""
    shape = (3, 1, 1)
    rb, ref = make_pair(capacity=300, frame_shape=shape, frame_stack=2, n_step=2,
                        prioritized=True, alpha=0.6, beta=0.7, seed=21)
    both = Both(rb, ref)
    rng = random.Random(4)
    t = 0
    for round_ in range(40):
        for _ in range(rng.randrange(1, 40)):
            if t % 57 == 0:
                both.add_first(tagged(t, shape=shape))
            else:
                both.add(torch.tensor([t, 0.5], dtype=torch.float32), 0.25,
                         tagged(t, shape=shape), terminated=t % 57 == 56)
            t += 1
        if rb.num_valid == 0:
            continue
        got, want = rb.sample(256), ref.sample(256)
        assert_matches(got, want, 3, f"round {round_}")
        weights = ref.slot_weights()
        assert (weights[got["indices"].numpy()] > 0).all(), "a zero weight was drawn"
        idx = [rng.randrange(len(rb)) for _ in range(rng.randrange(1, 300))]
        pri = [0.0 if rng.random() < 0.15 else rng.uniform(0, 5) ** 3 for _ in idx]
        rb.update_priorities(torch.tensor(idx), torch.tensor(pri, dtype=torch.float64))
        ref.update_priorities(idx, pri)
    assert t > 300, "the ring wrapped"


def test_all_zero_priorities_raise_then_one_positive_is_always_drawn():
    """total = 0: ValueError naming the zero priorities, no call counted; then one
    positive priority among zeros (and padding leaves: capacity 12 -> 16) is the
    only slot any target reaches, including the last stratum's."""
    rb = make_rb(capacity=12, frame_shape=(1, 3, 3), frame_stack=1, prioritized=True, seed=3)
    one_episode(rb, 12)
    rb.update_priorities(torch.arange(11), torch.zeros(11))
    with pytest.raises(ValueError, match="every valid transition has priority 0"):
        rb.sample(4)
    assert rb.sample_calls == 0
    rb.update_priorities(torch.tensor([6]), torch.tensor([0.5]))
    out = rb.sample(64)
    assert out["indices"].tolist() == [6] * 64
    assert torch.equal(out["weights"], torch.ones(64))


def test_uniform_frequencies_and_invalid_slots_never_drawn():
    kw = dict(capacity=30, frame_shape=(1, 3, 3), frame_stack=2, seed=9)
    both = Both(*make_pair(**kw))
    open_episode = False
    for t in range(45):                # episodes end by termination, truncation and reset
        f = tagged(t, shape=(1, 3, 3))
        if not open_episode or t in (20, 40):
            both.add_first(f)
            open_episode = True
        else:
            term, trunc = t % 15 == 5, t == 27
            both.add(torch.zeros(2), 0.0, f, terminated=term, truncated=trunc)
            open_episode = not (term or trunc)
    rb, valid = both.rb, both.ref.valid_slots()
    assert rb.num_valid == len(valid) and 10 < len(valid) < 25
    counts = np.zeros(30)
    draws = 0
    while draws < 8000:
        np.add.at(counts, rb.sample(8)["indices"].numpy(), 1)
        draws += 8
    invalid = sorted(set(range(30)) - set(valid))
    assert counts[invalid].sum() == 0, f"invalid slots drawn: {counts[invalid]}"
    stat = chi_square(counts[valid], np.full(len(valid), draws / len(valid)))
    assert stat < wilson_hilferty(len(valid) - 1), f"chi-square {stat:.1f}"


def test_uniform_fallback_when_almost_nothing_is_valid():
    """One valid transition among 200 slots: most samples need the fallback rule."""
    both = Both(*make_pair(capacity=256, frame_shape=(1, 3, 3), frame_stack=1, seed=77))
    for t in range(200):
        f = tagged(t, shape=(1, 3, 3))
        if t == 100:
            both.add(torch.ones(2), 1.0, f, terminated=True)
        else:
            both.add_first(f)
    rb, ref = both.rb, both.ref
    assert rb.num_valid == ref.num_valid == 1
    for k in range(30):
        got, want = rb.sample(1), ref.sample(1)
        assert_matches(got, want, 1, f"call {k}")
        assert int(got["indices"]) == 99
    # the fallback really ran: all 64 attempts miss with probability (199/200)^64 ~ 0.73
    misses = sum(all(reference.below(sample_block(77, call, 0, a)[0], 200) != 99
                     for a in range(64)) for call in range(30))
    assert misses > 10


def test_update_priorities_changes_frequencies_weights_and_new_frames():
    rb = make_rb(capacity=16, frame_shape=(1, 3, 3), frame_stack=1, prioritized=True,
                 alpha=0.5, beta=1.0, seed=4)
    one_episode(rb, 12)                            # transitions 0..10 valid, frame 11 open
    n = rb.num_valid
    assert n == 11
    p = torch.ones(n)
    p[5], p[3] = 4.0, 0.0                          # q = 2 at slot 5, 0 at slot 3, else 1
    rb.update_priorities(torch.arange(n), p)
    counts = np.zeros(16)
    for _ in range(300):
        out = rb.sample(8)
        idx = out["indices"].numpy()
        np.add.at(counts, idx, 1)
        want = torch.where(out["indices"] == 5, 0.5, 1.0).float()   # (q / q_min)^-1
        torch.testing.assert_close(out["weights"], want)
    assert counts[3] == 0, "priority 0 was sampled"
    share = counts[5] / counts.sum()
    assert abs(share - 2 / 11) < 0.03, share   # q sum = 9 * 1 + 2
    # a frame written now gets the largest priority given so far (4): q = 2;
    # frame 11 was written before the update and keeps q = 1
    rb.add(torch.zeros(2), 0.0, tagged(12, shape=(1, 3, 3)))
    rb.add(torch.zeros(2), 0.0, tagged(13, shape=(1, 3, 3)))
    weights = {}
    for _ in range(200):
        out = rb.sample(8)
        for i, w in zip(out["indices"].tolist(), out["weights"].tolist()):
            weights[i] = w
    assert weights.get(11) == pytest.approx(1.0) and weights.get(12) == pytest.approx(0.5)


def test_update_priorities_of_invalid_and_zero_weight_slots():
    """An update reaches slots of every kind: valid ones (at weight 0 or above),
    ones that turned invalid since they were sampled, ones never valid. Invalid
    slots stay at weight 0 whatever their priority, a valid slot at weight 0
    comes back, and every draw and weight is the reference's, bit for bit."""
    both = Both(*make_pair(capacity=12, frame_shape=(1, 3, 3), frame_stack=2, n_step=2,
                           prioritized=True, alpha=0.7, beta=0.6, seed=8))
    for t in range(9):
        f = tagged(t, shape=(1, 3, 3))
        if t in (0, 6):
            both.add_first(f)
        else:
            both.add(torch.zeros(2), 0.0, f)
    rb, ref = both.rb, both.ref
    everything = torch.arange(len(rb))
    rb.update_priorities(everything, torch.zeros(len(rb)))  # every weight 0, valid or not
    ref.update_priorities(everything, torch.zeros(len(rb)))
    sampled = torch.tensor(ref.valid_slots())
    rb.update_priorities(sampled[:2], torch.tensor([3.0, 0.5]))
    ref.update_priorities(sampled[:2], torch.tensor([3.0, 0.5]))
    compare_sample(rb, ref, 16, "two valid slots back from weight 0")
    # wrap the ring: the oldest slots are overwritten and turn invalid
    for t in range(9, 16):
        both.add(torch.zeros(2), 0.0, tagged(t, shape=(1, 3, 3)))
    invalid = sorted(set(range(len(rb))) - set(ref.valid_slots()))
    assert invalid and set(sampled.tolist()) & set(invalid)
    everything = torch.arange(len(rb))
    pri = torch.linspace(0.5, 4.0, len(rb))
    rb.update_priorities(everything, pri)
    ref.update_priorities(everything, pri)
    for call in range(6):
        got = compare_sample(rb, ref, 32, f"after updating every slot, call {call}")
        assert not set(got["indices"].tolist()) & set(invalid)
    check_counters(rb, ref)


# ------------------------------------------------- gather_augment primitive

GATHER_PIPES = {
    "none": [],
    "shift_overlay": PIPE,
    "overlay_pf_shiftzeros": [{"op": "overlay", "alpha": 0.2, "alpha_max": 0.8, "per_frame": True},
                              {"op": "shift", "pad": 3, "padding": "zeros"}],
    "crop": [{"op": "crop", "size": (10, 12)}, {"op": "overlay", "alpha": 0.4}],
}


def gather_inputs(device="cpu", n=20, b=6, s=3, c=3, h=14, w=16):
    g = torch.Generator().manual_seed(21)
    storage = torch.randint(0, 256, (n, c, h, w), dtype=torch.uint8, generator=g)
    indices = torch.randint(0, n, (b, s), dtype=torch.int64, generator=g)
    return storage.to(device), indices.to(device)


@pytest.mark.parametrize("out", ["uint8", "float32"])
@pytest.mark.parametrize("pipe", list(GATHER_PIPES))
def test_gather_augment_equals_augment_of_the_gathered_batch(pipe, out):
    storage, indices = gather_inputs()
    b, s = indices.shape
    _, c, h, w = storage.shape
    ops = GATHER_PIPES[pipe]
    pool = random_pool(5, c, 10, 12, seed=3) if pipe == "crop" else random_pool(5, c, h, w, seed=3)
    kw = dict(ops=ops, seed=2**63 + 9, step=2**40 + 3)
    if out == "float32":
        kw.update(out_dtype=torch.float32, scale=1 / 255, bias=-0.5)
    got = obsaug.ops.gather_augment(storage, indices, pool, **kw)
    gathered = storage[indices].reshape(b, s * c, h, w)
    want = obsaug.ops.augment(gathered, pool, **kw)
    assert got.dtype == want.dtype and got.shape == want.shape
    bits = (lambda t: t.view(torch.int32)) if got.dtype == torch.float32 else (lambda t: t)
    assert torch.equal(bits(got), bits(want))
    oracle = reference.augment(gathered, pool, **kw)
    if out == "uint8":
        assert torch.equal(got, oracle)
    else:
        torch.testing.assert_close(got, oracle, rtol=1e-6, atol=1e-6)
    if pipe == "none" and out == "uint8":
        assert torch.equal(got, gathered)


@pytest.mark.parametrize("bad,exc,message", [
    ("negative", IndexError, r"indices must lie in \[0, N\) = \[0, 20\).*got values in \[-1, "),
    ("too_large", IndexError, r"indices must lie in \[0, N\) = \[0, 20\).*, 20\]"),
    ("int32", TypeError, r"indices must be int64 \[B, S\].*got int32"),
    ("one_dim", ValueError, r"indices must be int64 \[B, S\].*got int64 \[\d+\]"),
])
def test_gather_augment_rejects_bad_indices(bad, exc, message):
    storage, indices = gather_inputs()
    if bad == "negative":
        indices[2, 1] = -1
    elif bad == "too_large":
        indices[4, 0] = storage.shape[0]
    elif bad == "int32":
        indices = indices.int()
    else:
        indices = indices[:, 0]
    pool = random_pool(5, 3, 14, 16)
    # docs/replay.md: "every index in [0, N), checked"; README "Errors": one type per kind
    with pytest.raises(exc, match=message):
        obsaug.ops.gather_augment(storage, indices, pool, ops=PIPE, seed=1, step=0)


# ------------------------------------------------- fused sample + augment

def engine_config(seed=3, device="cpu", threads=0, mode="async", hw=84, **output):
    config = {
        "device": device, "seed": seed,
        "frames": {"stack": 3, "channels": 3, "height": hw, "width": hw},
        "pipeline": PIPE,
        "pool": {"size": 8, "sources": [PHOTOS], "refresh": {"threads": threads}},
    }
    if mode == "sync":
        config["pool"]["refresh"].update(mode="sync", per_call=1)
    if output:
        config["output"] = output
    return config


def fill(rbs, frames, shape, seed=0, n_envs=1):
    """The same deterministic stream into several buffers (noise frames, a few episode ends)."""
    g = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    open_envs = set()
    for t in range(frames):
        env = t % n_envs
        f = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
        if env not in open_envs:
            for rb in rbs:
                rb.add_first(f, env=env)
            open_envs.add(env)
            continue
        a = torch.tensor([f32(rng.uniform(-1, 1)), f32(rng.uniform(-1, 1))])
        r = f32(rng.uniform(-1, 1))
        term = rng.random() < 0.05
        trunc = not term and rng.random() < 0.05
        for rb in rbs:
            rb.add(a, r, f, terminated=term, truncated=trunc, env=env)
        if term or trunc:
            open_envs.discard(env)


@pytest.mark.parametrize("output", [{}, {"dtype": "float32", "scale": 1 / 255, "bias": -0.5}],
                         ids=["uint8", "float32"])
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@needs_engine
def test_fused_sample_equals_sample_then_augment(prioritized, output):
    shape = (3, 84, 84)
    kw = dict(capacity=40, frame_shape=shape, n_step=2, prioritized=prioritized, seed=5)
    rb, rb2 = make_rb(**kw), make_rb(**kw)
    fill([rb, rb2], 60, shape, seed=1, n_envs=2)
    with obsaug.Engine(engine_config(**output)) as eng:
        pool = eng.pool_images
        for k in range(3):
            s = eng.step
            got = rb.sample(6, augment=eng)
            assert eng.step == s + 2, "obs takes the next step and next_obs the one after"
            plain = rb2.sample(6)
            assert plain["obs"].dtype == torch.uint8
            for key in plain:
                if key not in ("obs", "next_obs"):
                    assert torch.equal(got[key], plain[key]), key
            for key, step in (("obs", s), ("next_obs", s + 1)):
                want = eng.augment(plain[key], step=step)
                assert got[key].dtype == want.dtype and got[key].shape == want.shape
                bits = (lambda t: t.view(torch.int32)) if want.dtype == torch.float32 else \
                    (lambda t: t)
                assert torch.equal(bits(got[key]), bits(want)), f"call {k}: {key}"
            if not output:
                oracle = reference.augment(plain["obs"], pool, ops=PIPE, seed=3, step=s)
                assert torch.equal(got["obs"], oracle)
                assert not torch.equal(got["obs"], plain["obs"])
            if prioritized:
                pri = torch.arange(1, 7, dtype=torch.float32) * (k + 1) / 3
                rb.update_priorities(got["indices"], pri)
                rb2.update_priorities(plain["indices"], pri)
        # share_augmentation: obs and next_obs with the same step
        s = eng.step
        got = rb.sample(6, augment=eng, share_augmentation=True)
        plain = rb2.sample(6)
        assert torch.equal(got["obs"], eng.augment(plain["obs"], step=s))
        assert torch.equal(got["next_obs"], eng.augment(plain["next_obs"], step=s))
        assert not torch.equal(got["next_obs"], eng.augment(plain["next_obs"], step=s + 1))


# --------------------------------------------------------------- checkpoints

def build_stocked(prioritized, seed=8, steps=90):
    """A buffer part-way through a random multi-env stream, plus its reference."""
    kw = dict(capacity=40, n_step=3, prioritized=prioritized, seed=seed)
    rb, ref = make_pair(**kw)
    stream = Stream(rb, ref, seed=seed, n_envs=2)
    rng = random.Random(seed)
    for i in range(steps):
        stream.step()
        if i % 10 == 9 and ref.num_valid:
            b = min(4, ref.num_valid)
            out = rb.sample(b)
            ref.sample(b)
            if prioritized:
                idx = sorted(set(out["indices"].tolist()))
                pri = torch.tensor([f32(rng.uniform(0.1, 3)) for _ in idx])
                rb.update_priorities(torch.tensor(idx), pri)
                ref.update_priorities(idx, pri)
    return rb, ref, stream


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_checkpoint_round_trip_continues_sampling(tmp_path, prioritized):
    rb, _, _ = build_stocked(prioritized)
    twin, _, _ = build_stocked(prioritized)
    rb.save(str(tmp_path / "ckpt"))
    assert (tmp_path / "ckpt" / "replay.obsaug").is_file()
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["replay.obsaug"]
    loaded = obsaug.ReplayBuffer.load(str(tmp_path / "ckpt"), device="cpu")
    assert counters(loaded) == counters(twin)
    assert loaded.capacity == twin.capacity and loaded.frame_stack == twin.frame_stack
    assert torch.equal(loaded.storage, twin.storage)
    for k in range(5):
        a, b, c = loaded.sample(4), twin.sample(4), rb.sample(4)
        assert_same(a, b, f"loaded, call {k}")
        assert_same(c, b, f"saved, call {k}")
        if prioritized:
            pri = torch.rand(4) + 0.05
            loaded.update_priorities(a["indices"], pri)
            twin.update_priorities(b["indices"], pri)
            rb.update_priorities(c["indices"], pri)
    rb.save(str(tmp_path / "ckpt"))                # a second save overwrites the first
    again = obsaug.ReplayBuffer.load(str(tmp_path / "ckpt"), device="cpu")
    assert again.sample_calls == twin.sample_calls


def test_checkpoint_keeps_open_episodes(tmp_path):
    """After load, the environments' open episodes continue (adds link to the saved frames)."""
    rb, ref, stream = build_stocked(prioritized=True)
    rb.save(str(tmp_path / "ckpt"))
    stream.rb = obsaug.ReplayBuffer.load(str(tmp_path / "ckpt"), device="cpu")
    for i in range(40):
        stream.step()
        if i % 5 == 4:
            compare_sample(stream.rb, ref, 6, f"after load, step {i}")
    check_counters(stream.rb, ref)


def corrupt(path, how):
    data = bytearray(path.read_bytes())
    if how == "flipped_byte":
        data[len(data) // 2] ^= 0x40
    elif how == "truncated":
        data = data[:len(data) * 2 // 3]
    elif how == "magic":
        data[:8] = b"NOTMAGIC"
    elif how == "version":           # the format version follows the magic
        data[8] ^= 0x7F
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how, message", [
    ("flipped_byte", r"is corrupt or truncated: checksum mismatch"),
    ("truncated", r"is corrupt or truncated: it ends inside the frames \(\d+ bytes needed from here, \d+ left\)"),
    ("magic", r"is corrupt or truncated: it does not start with OBSAUGRB"),
    ("version", r"is corrupt or truncated: format version \d+, this obsaug reads version 1"),
    ("empty", r"is corrupt or truncated: it ends inside the magic \(8 bytes needed, 0 left\)"),
])
def test_load_rejects_damaged_checkpoints(tmp_path, how, message):
    rb, _, _ = build_stocked(False, steps=50)
    rb.save(str(tmp_path / "ckpt"))
    good = (tmp_path / "ckpt" / "replay.obsaug").read_bytes()
    assert good[:8] == b"OBSAUGRB"
    corrupt(tmp_path / "ckpt" / "replay.obsaug", how)
    with pytest.raises(ValueError, match=message):
        obsaug.ReplayBuffer.load(str(tmp_path / "ckpt"), device="cpu")
    (tmp_path / "ckpt" / "replay.obsaug").write_bytes(good)
    assert counters(obsaug.ReplayBuffer.load(str(tmp_path / "ckpt"), device="cpu")) == counters(rb)


def test_load_missing_checkpoint_is_file_not_found(tmp_path):
    """As open() would: `except FileNotFoundError` starts a run afresh."""
    with pytest.raises(FileNotFoundError, match=r"no replay checkpoint \(replay\.obsaug\) in "
                                                r"'.*nowhere'; ReplayBuffer\.save\(path\) writes one"):
        obsaug.ReplayBuffer.load(str(tmp_path / "nowhere"), device="cpu")


# ------------------------------------------------- resume after SIGKILL

RESUME_SHAPE = (3, 24, 24)


def resume_setup():
    rb = make_rb(capacity=50, frame_shape=RESUME_SHAPE, n_step=2, prioritized=True, seed=31)
    eng = obsaug.Engine(engine_config(seed=6, threads=1, mode="sync", hw=24))
    return rb, eng


def resume_feed(rb, t):
    """Frame t of a deterministic single-env stream (episodes of 17 frames)."""
    g = torch.Generator().manual_seed(1000 + t)
    f = torch.randint(0, 256, RESUME_SHAPE, dtype=torch.uint8, generator=g)
    if t % 17 == 0:
        rb.add_first(f)
    else:
        rb.add(torch.tensor([t / 7.0, -t / 3.0]), f32(math.sin(t)), f,
               terminated=t % 17 == 16 and t % 2 == 0)


def resume_sample(rb, eng):
    out = rb.sample(5, augment=eng)
    rb.update_priorities(out["indices"], out["reward"].abs() + 0.01)
    return out


CHILD = r"""
import sys
sys.path[:0] = [{here!r}, {tests!r}, {python!r}]
import torch
import test_replay as T
ckpt = sys.argv[1]
rb, eng = T.resume_setup()
for t in range(60):
    T.resume_feed(rb, t)
    if t >= 10 and t % 4 == 0:
        T.resume_sample(rb, eng)
rb.save(ckpt + "/replay")
torch.save(eng.state_dict(), ckpt + "/engine.pt")
print("SAVED", flush=True)
t = 60
while True:
    T.resume_feed(rb, t)
    T.resume_sample(rb, eng)
    print("LOOP", t, flush=True)
    t += 1
"""


class Child:
    """A child process running `source`; `kill_after(n)` waits for n lines, then SIGKILLs it."""

    def __init__(self, tmp_path, source):
        script = tmp_path / "child.py"
        script.write_text(source.format(here=HERE, tests=TESTS, python=PYDIR))
        self.proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),
                         daemon=True).start()

    def kill_after(self, until, extra_wait=0.0):
        proc = self.proc
        try:
            deadline = time.time() + 90
            while len(self.lines) < until and proc.poll() is None and time.time() < deadline:
                time.sleep(0.005)
            time.sleep(extra_wait)
            assert proc.poll() is None, \
                f"child exited: {self.lines} {proc.stderr.read()[-3000:]}"
            assert len(self.lines) >= until, f"child too slow: {self.lines}"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
        finally:
            self.close()
        return [line.strip() for line in self.lines]

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@needs_engine
def test_resume_after_sigkill_continues_the_same_samples_and_augmentations(tmp_path):
    child = Child(tmp_path, CHILD)
    try:                                   # the uninterrupted twin, while the child runs
        twin, twin_eng = resume_setup()
        for t in range(60):
            resume_feed(twin, t)
            if t >= 10 and t % 4 == 0:
                resume_sample(twin, twin_eng)
    except BaseException:
        child.close()
        raise
    lines = child.kill_after(4)
    assert lines[0] == "SAVED" and lines[-1].startswith("LOOP")
    rb = obsaug.ReplayBuffer.load(str(tmp_path / "replay"), device="cpu")
    with twin_eng, obsaug.Engine(engine_config(seed=6, threads=1, mode="sync", hw=24)) as eng:
        eng.load_state_dict(torch.load(tmp_path / "engine.pt"))
        assert counters(rb) == counters(twin) and eng.step == twin_eng.step
        for t in range(60, 66):
            resume_feed(rb, t)
            resume_feed(twin, t)
            assert_same(resume_sample(rb, eng), resume_sample(twin, twin_eng), f"frame {t}")


SAVER = r"""
import sys
sys.path[:0] = [{here!r}, {tests!r}, {python!r}]
import test_replay as T
rb = T.make_rb(capacity=100, frame_shape=(3, 32, 32), seed=3)
k = 0
while True:
    T.saver_step(rb, k)
    rb.save(sys.argv[1] + "/replay")
    print("SAVED", k, flush=True)
    k += 1
"""


def saver_step(rb, k):
    g = torch.Generator().manual_seed(k)
    for j in range(20):
        t = 20 * k + j
        f = torch.randint(0, 256, (3, 32, 32), dtype=torch.uint8, generator=g)
        if t % 25 == 0:
            rb.add_first(f)
        else:
            rb.add(torch.zeros(2), 1.0, f)
    if rb.num_valid >= 4:
        rb.sample(4)


def test_a_kill_during_save_leaves_a_loadable_checkpoint(tmp_path):
    lines = Child(tmp_path, SAVER).kill_after(6, extra_wait=0.013)
    rb = obsaug.ReplayBuffer.load(str(tmp_path / "replay"), device="cpu")
    k = rb.total_frames // 20 - 1                    # the last complete save
    assert rb.total_frames == 20 * (k + 1) and k >= 5, lines
    twin = make_rb(capacity=100, frame_shape=(3, 32, 32), seed=3)
    for j in range(k + 1):
        saver_step(twin, j)
    assert counters(rb) == counters(twin)
    assert torch.equal(rb.storage, twin.storage)
    assert_same(rb.sample(4), twin.sample(4))


# ------------------------------------------------------------- bad input

def stocked_pair(**kw):
    """Two identical prioritized buffers with an open episode on env 0."""
    rbs = [make_rb(capacity=16, prioritized=True, n_step=1, **kw) for _ in range(2)]
    for rb in rbs:
        rb.add_first(tagged(0))
        for t in range(1, 10):
            rb.add(torch.tensor([t, -t], dtype=torch.float32), f32(t / 4), tagged(t))
        rb.update_priorities(torch.tensor([1, 2]), torch.tensor([2.0, 3.0]))
    return rbs


def assert_unchanged(rb, twin):
    assert counters(rb) == counters(twin)
    assert torch.equal(rb.storage, twin.storage)
    for x in (rb, twin):            # env 0's episode continues from the same frame
        x.add(torch.tensor([1.0, 2.0]), 0.25, tagged(200))
        x.add(torch.tensor([3.0, 4.0]), 0.75, tagged(201))
    assert counters(rb) == counters(twin)
    for k in range(3):              # every valid slot, so changed priorities show in weights
        assert_same(rb.sample(rb.num_valid), twin.sample(twin.num_valid), f"call {k}")


F, A = tagged(99), torch.tensor([0.5, 0.5])
BAD_CALLS = {  # name: (call, the one exception type, a regex the message must match)
    "add_first_frame_shape": (lambda rb: rb.add_first(torch.zeros(3, 4, 4, dtype=torch.uint8)),
                              ValueError, r"frame must be uint8 \[3, 4, 5\].*got uint8 \[3, 4, 4\]"),
    "add_first_frame_dtype": (lambda rb: rb.add_first(torch.zeros(3, 4, 5)),
                              TypeError, r"frame must be uint8 \[3, 4, 5\].*got float32"),
    "add_frame_shape": (lambda rb: rb.add(A, 1.0, torch.zeros(4, 4, 5, dtype=torch.uint8)),
                        ValueError, r"frame must be uint8 \[3, 4, 5\].*got uint8 \[4, 4, 5\]"),
    "add_frame_dtype": (lambda rb: rb.add(A, 1.0, F.float()),
                        TypeError, r"frame must be uint8 \[3, 4, 5\].*got float32"),
    "add_action_shape": (lambda rb: rb.add(torch.zeros(3), 1.0, F),
                         ValueError, r"action must have shape \[2\].*got float32 \[3\]"),
    "add_before_add_first": (lambda rb: rb.add(A, 1.0, F, env=3),
                             ValueError, r"env 3 has no open episode: call add_first"),
    "batched_one_env_not_started": (
        lambda rb: rb.add(torch.zeros(2, 2), torch.zeros(2), torch.stack([F, F]), env=[0, 3]),
        ValueError, r"env 3 has no open episode: call add_first"),
    "batched_duplicate_envs": (
        lambda rb: rb.add(torch.zeros(2, 2), torch.zeros(2), torch.stack([F, F]), env=[0, 0]),
        ValueError, r"env 0 appears twice"),
    "batched_length_mismatch": (
        lambda rb: rb.add(torch.zeros(2, 2), torch.zeros(1), F[None], env=[0]),
        ValueError, r"action must have shape \[1, 2\].*got float32 \[2, 2\]"),
    "batched_add_first_duplicate_envs": (
        lambda rb: rb.add_first(torch.stack([F, F]), env=[1, 1]),
        ValueError, r"env 1 appears twice"),
    "priority_negative": (lambda rb: rb.update_priorities(torch.tensor([1, 2]),
                                                          torch.tensor([50.0, -0.5])),
                          ValueError, r"priorities must be finite and >= 0, got -0\.5"),
    "priority_nan": (lambda rb: rb.update_priorities(torch.tensor([1, 2]),
                                                     torch.tensor([float("nan"), 50.0])),
                     ValueError, r"priorities must be finite and >= 0, got nan"),
    "priority_inf": (lambda rb: rb.update_priorities(torch.tensor([1, 2]),
                                                     torch.tensor([50.0, float("inf")])),
                     ValueError, r"priorities must be finite and >= 0, got inf"),
    "priority_index_too_large": (lambda rb: rb.update_priorities(torch.tensor([1, 16]),
                                                                 torch.tensor([5.0, 5.0])),
                                 IndexError, r"index 16 is not a stored slot \[0, 10\)"),
    "priority_index_negative": (lambda rb: rb.update_priorities(torch.tensor([-1, 2]),
                                                                torch.tensor([5.0, 5.0])),
                                IndexError, r"index -1 is not a stored slot \[0, 10\)"),
    "priority_length_mismatch": (lambda rb: rb.update_priorities(torch.tensor([1, 2, 3]),
                                                                 torch.tensor([5.0, 5.0])),
                                 ValueError, r"priorities must be a real tensor \[K\] with K = 3"),
    "sample_past_the_draw_limit": (lambda rb: rb.sample(2**32 + 1),
                                   ValueError, r"4294967297.*4294967296"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
def test_bad_input_raises_and_changes_nothing(name):
    rb, twin = stocked_pair()
    assert rb.num_valid == 9
    call, exc, message = BAD_CALLS[name]
    with pytest.raises(exc, match=message):
        call(rb)
    assert_unchanged(rb, twin)


def test_actions_convert_from_numbers_and_numpy():
    rb = make_rb(capacity=8, frame_stack=1)
    rb.add_first(tagged(0))
    rb.add(np.array([0.25, -0.5]), 1, tagged(1))                 # float64 numpy, int reward
    rb.add([0.75, 1.0], np.float32(2.0), tagged(2))              # a list
    got = {}
    for _ in range(10):
        out = rb.sample(2)
        assert out["action"].dtype == torch.float32
        for i, a, r in zip(out["indices"].tolist(), out["action"].tolist(),
                           out["reward"].tolist()):
            got[i] = (a, r)
    assert got == {0: ([0.25, -0.5], 1.0), 1: ([0.75, 1.0], 2.0)}
    discrete = make_rb(capacity=8, frame_stack=1, action_shape=(), action_dtype=torch.int64)
    discrete.add_first(tagged(0))
    discrete.add(3, 0.5, tagged(1))
    discrete.add(np.int64(4), 0.5, tagged(2))
    assert sorted(discrete.sample(2)["action"].tolist()) in ([3, 3], [3, 4], [4, 4])
    with pytest.raises(TypeError, match=r"action must be int64 \(or another integer dtype\), got float64"):
        discrete.add(2.5, 0.5, tagged(3))                        # not without loss
    with pytest.raises(ValueError, match=r"action values do not fit action_dtype uint8"):
        byte = make_rb(capacity=8, frame_stack=1, action_shape=(), action_dtype=torch.uint8)
        byte.add_first(tagged(0))
        byte.add(300, 0.5, tagged(1))
    assert discrete.total_frames == 3


def test_python_floats_keep_float64_precision():
    """Python floats are float64 values: a float64 buffer stores 0.1 and 1/3 exactly
    (torch.as_tensor alone would round them through float32)."""
    rb = make_rb(capacity=8, frame_stack=1, action_dtype=torch.float64)
    rb.add_first(tagged(0))
    rb.add([0.1, 1 / 3], 1.0, tagged(1))
    assert rb.sample(1)["action"].tolist() == [[0.1, 1 / 3]]
    scalar = make_rb(capacity=8, frame_stack=1, action_shape=(), action_dtype=torch.float64)
    scalar.add_first(tagged(0))
    scalar.add(0.1, 1.0, tagged(1))
    assert scalar.sample(1)["action"].tolist() == [0.1]


def test_numpy_frames_and_actions_with_negative_strides_are_copied():
    """A flipped render (img[::-1]) has negative strides, which torch cannot view."""
    rb = make_rb(capacity=8, frame_stack=1)
    frame = tagged(7).numpy()[:, ::-1]
    action = np.array([2.0, 1.0])[::-1]
    rb.add_first(tagged(0))
    rb.add(action, 1.0, frame)
    assert torch.equal(rb.storage[1], torch.from_numpy(frame.copy()))
    assert rb.sample(1)["action"].tolist() == [[1.0, 2.0]]


def test_frames_viewing_the_buffers_own_storage_are_copied_whole():
    """Re-adding stored frames (a view of rb.storage) writes what they held before the add."""
    rb = make_rb(capacity=3, frame_shape=(1, 1, 1), frame_stack=1, action_shape=())
    rb.add_first(torch.tensor([[[[40]]], [[[50]]], [[[30]]]], dtype=torch.uint8), env=[0, 1, 2])
    rb.add_first(torch.tensor([[[60]]], dtype=torch.uint8), env=3)
    assert rb.storage.flatten().tolist() == [60, 50, 30]
    source = rb.storage[0:2]             # [60, 50] into slots 1, 2: slot 1 is overwritten
    rb.add_first(source, env=[4, 5])     # by row 0 before row 1 is read from it
    assert rb.storage.flatten().tolist() == [60, 60, 50]


def test_a_priority_whose_power_overflows_is_refused_and_changes_nothing():
    """p finite but p^alpha past what a sum over the slots can hold: refused by name."""
    rb, twin = stocked_pair(alpha=2.0)
    with pytest.raises(ValueError, match=r"priority 1e\+200 at position 1 gives p\^alpha = inf "
                                         r"\(alpha 2\).*sum over 16 slots finite"):
        rb.update_priorities(torch.tensor([3, 4]), torch.tensor([2.0, 1e200], dtype=torch.float64))
    assert counters(rb) == counters(twin)
    for k in range(3):
        assert_same(rb.sample(rb.num_valid), twin.sample(twin.num_valid), f"call {k}")
    rb.update_priorities(torch.tensor([3]), torch.tensor([1e150], dtype=torch.float64))  # 1e300


@pytest.mark.parametrize("name, value, exc, message", [
    ("capacity", 100.7, TypeError, r"capacity must be an int, got float 100\.7"),
    ("frame_stack", 2.9, TypeError, r"frame_stack must be an int, got float 2\.9"),
    ("frame_stack", 2**31, ValueError, r"frame_stack must lie in \[0, 2147483648\), got 2147483648"),
    ("n_step", 2**32 + 1, ValueError, r"n_step must lie in \[0, 2147483648\)"),
    ("seed", -1, ValueError, r"seed must lie in \[0, 18446744073709551616\), got -1"),
    ("seed", 2**64, ValueError, r"seed must lie in \[0, 18446744073709551616\)"),
    ("frame_shape", (1, 2, 2**63), ValueError,
     r"frame_shape must lie in \[0, 9223372036854775808\), got 9223372036854775808"),
    ("capacity", True, TypeError, r"capacity must be an int, got bool"),
])
def test_constructor_options_out_of_type_or_range_are_named(name, value, exc, message):
    with pytest.raises(exc, match=message):
        make_rb(**{name: value})


def test_constructor_takes_numpy_integers_and_the_largest_seed():
    rb = make_rb(capacity=np.int64(8), frame_stack=np.int32(2), seed=2**64 - 1)
    assert rb.capacity == 8 and rb.frame_stack == 2 and rb.seed == 2**64 - 1


def test_add_after_episode_end_needs_add_first():
    rb, twin = stocked_pair()
    for x in (rb, twin):
        x.add(A, 1.0, tagged(10), terminated=True)
    with pytest.raises(ValueError, match=r"env 0 has no open episode: call add_first"):
        rb.add(A, 1.0, tagged(11))
    assert counters(rb) == counters(twin)
    for x in (rb, twin):
        x.add_first(tagged(12))
    assert_unchanged(rb, twin)


def test_batches_larger_than_the_valid_transitions_sample_with_replacement():
    """As SB3 and TorchRL: B > num_valid draws with replacement, uniformly over the valid
    transitions (chi-square), and equals the reference; 9 valid, batches of 10."""
    both = Both(*make_pair(capacity=16))
    both.add_first(tagged(0))
    for t in range(1, 10):
        both.add(torch.tensor([t, -t], dtype=torch.float32), f32(t / 4), tagged(t))
    rb, ref = both.rb, both.ref
    assert rb.num_valid == ref.num_valid == 9
    assert_matches(rb.sample(10), ref.sample(10), 3, "B = 10 > 9 valid")
    counts = np.zeros(16)
    for _ in range(40):
        np.add.at(counts, rb.sample(250)["indices"].numpy(), 1)
    valid = sorted(ref.valid_slots())
    draws = counts.sum()
    assert counts[valid].sum() == draws, "an invalid slot was drawn"
    stat = chi_square(counts[valid], np.full(len(valid), draws / len(valid)))
    assert stat < wilson_hilferty(len(valid) - 1), f"chi-square {stat:.1f} with 8 dof"
    # and it can fail: the same counts against a skewed expectation are far off
    skew = np.arange(1, len(valid) + 1, dtype=np.float64)
    assert chi_square(counts[valid], skew / skew.sum() * draws) > 3 * wilson_hilferty(8)


def test_prioritized_batches_larger_than_the_valid_transitions():
    """Prioritized B > num_valid: stratified draws still follow q = p^alpha (chi-square)."""
    alpha = 0.7
    rb = make_rb(capacity=16, frame_shape=(1, 3, 3), frame_stack=1, prioritized=True,
                 alpha=alpha, seed=5)
    one_episode(rb, 8)
    assert rb.num_valid == 7
    p = torch.tensor([0.5, 1.0, 2.0, 3.0, 0.25, 1.5, 4.0])
    rb.update_priorities(torch.arange(7), p)
    q = p.double() ** alpha
    counts = np.zeros(16)
    for _ in range(20):
        np.add.at(counts, rb.sample(500)["indices"].numpy(), 1)
    assert counts[7:].sum() == 0, "an invalid slot was drawn"
    stat = chi_square(counts[:7], (q / q.sum()).numpy() * counts.sum())
    assert stat < wilson_hilferty(6), f"chi-square {stat:.1f} with 6 dof"
    assert chi_square(counts[:7], np.full(7, counts.sum() / 7)) > 3 * wilson_hilferty(6)


def test_sampling_an_empty_buffer_names_both_numbers():
    rb = make_rb()
    with pytest.raises(ValueError, match=r"(?s)(?=.*\b4\b)(?=.*\b0\b)"):
        rb.sample(4)
    rb.add_first(tagged(0))
    with pytest.raises(ValueError, match=r"(?s)(?=.*\b4\b)(?=.*\b0\b)"):
        rb.sample(4)
    assert rb.sample_calls == 0 and rb.num_valid == 0 and len(rb) == 1


# -------------------------------------------------------------------- CUDA

@pytest.mark.skipif(torch.cuda.is_available() or not obsaug.built_with_cuda,
                    reason="a CUDA build on a machine without a GPU")
def test_buffer_on_cuda_without_a_gpu_is_refused_by_name():
    for device in ("cuda", "cuda:0"):
        with pytest.raises(ValueError, match=f"device is {device} but this process sees no CUDA"):
            make_rb(device=device)


@needs_cuda
@needs_engine
def test_cuda_engine_without_index_reports_the_device_it_resolved():
    with obsaug.Engine(engine_config(device="cuda")) as engine:
        assert engine.device == torch.device("cuda", torch.cuda.current_device())


@needs_cuda
def test_cuda_buffer_without_index_keeps_the_device_current_at_construction():
    rb = make_rb(device="cuda", capacity=16, prioritized=True)
    here = torch.device("cuda", torch.cuda.current_device())
    assert rb.device == here and rb.storage.device == here
    if torch.cuda.device_count() > 1:  # another device current later: the buffer's stays
        with torch.cuda.device((here.index + 1) % torch.cuda.device_count()):
            fill([rb], 30, (3, 4, 5), seed=1)
            b = rb.sample(4)
            rb.update_priorities(b["indices"], torch.rand(4, device=here) + 0.1)
        assert b["obs"].device == here


@needs_cuda
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_cuda_buffer_matches_cpu(prioritized):
    kw = dict(capacity=40, n_step=3, prioritized=prioritized, seed=17)
    cpu, gpu = make_rb(**kw), make_rb(device="cuda", **kw)
    assert gpu.storage.is_cuda
    fill([cpu, gpu], 70, (3, 4, 5), seed=2, n_envs=3)
    for k in range(20):
        a, b = cpu.sample(8), gpu.sample(8)
        assert all(v.is_cuda for v in b.values())
        assert_same(a, b, f"call {k}")   # the same sum tree arithmetic (docs/replay.md)
        if prioritized:
            pri = torch.rand(8) + 0.1
            cpu.update_priorities(a["indices"], pri)
            gpu.update_priorities(a["indices"].cuda(), pri.cuda())


@needs_cuda
@pytest.mark.parametrize("capacity", [100, 20000], ids=["depth7", "depth15"])
def test_cuda_prioritized_tree_matches_cpu_after_bulk_and_small_updates(capacity):
    """The sum tree keeps every other level (replay/proportional_tree.h); at an
    odd depth the root is recomputed from its two children. Both depths'
    parities, and both CUDA update paths (more than 8192 leaves: one launch
    per kept level; fewer: one block), give the CPU buffer's draws."""
    kw = dict(capacity=capacity, frame_shape=(1, 2, 2), frame_stack=1, prioritized=True, seed=23)
    cpu, gpu = make_rb(**kw), make_rb(device="cuda", **kw)
    fill([cpu, gpu], capacity + 50, (1, 2, 2), seed=4, n_envs=2)
    g = torch.Generator().manual_seed(capacity)
    everything = torch.arange(len(cpu))
    pri = torch.rand(len(cpu), generator=g, dtype=torch.float64) * 3
    cpu.update_priorities(everything, pri)
    gpu.update_priorities(everything.cuda(), pri.cuda())
    for k in range(6):
        a, b = cpu.sample(64), gpu.sample(64)
        assert_same(a, b, f"after the bulk update, call {k}")
        small = torch.rand(64, generator=g, dtype=torch.float64) + 0.01
        cpu.update_priorities(a["indices"], small)
        gpu.update_priorities(b["indices"], small.cuda())


@needs_cuda
@pytest.mark.parametrize("out", ["uint8", "float32"])
def test_cuda_gather_augment_matches_cpu(out):
    storage, indices = gather_inputs(n=30, b=16, h=84, w=84)
    pool = random_pool(6, 3, 84, 84)
    kw = dict(ops=PIPE, seed=5, step=11)
    if out == "float32":
        kw.update(out_dtype=torch.float32, scale=1 / 255, bias=-0.5)
    want = obsaug.ops.gather_augment(storage, indices, pool, **kw)
    got = obsaug.ops.gather_augment(storage.cuda(), indices.cuda(), pool.cuda(), **kw).cpu()
    bits = (lambda t: t.view(torch.int32)) if want.dtype == torch.float32 else (lambda t: t)
    assert torch.equal(bits(got), bits(want))
    bad = indices.cuda()
    bad[3, 2] = 30
    with pytest.raises(IndexError, match=r"indices must lie in \[0, N\) = \[0, 30\)"):
        obsaug.ops.gather_augment(storage.cuda(), bad, pool.cuda(), **kw)


@needs_cuda
@needs_engine
def test_cuda_fused_sample_matches_cpu():
    kw = dict(capacity=40, frame_shape=(3, 84, 84), n_step=2, seed=5)
    cpu, gpu = make_rb(**kw), make_rb(device="cuda", **kw)
    fill([cpu, gpu], 50, (3, 84, 84), seed=4)
    with obsaug.Engine(engine_config()) as ce, obsaug.Engine(engine_config(device="cuda")) as ge:
        assert torch.equal(ce.pool_images, ge.pool_images.cpu())
        for k in range(3):
            assert_same(cpu.sample(8, augment=ce), gpu.sample(8, augment=ge), f"call {k}")
