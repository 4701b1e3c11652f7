"""obsaug.sb3.ReplayBuffer where SB3's own code touches its buffer (issue 42, items 7-11).

Real SB3 algorithms on the numpy-drawn pixel CartPole (40x40, a few dozen steps
each): two ``learn()`` calls with ``optimize_memory_usage=True`` (SB3 writes
``replay_buffer.dones[pos] = True`` between them), ``load_replay_buffer`` of a
buffer pickled on a CUDA device into a CPU process (SB3 then sets
``replay_buffer.device``), ``size()`` in SB3's unit, n-step returns trained
from ``learning_starts`` below ``n_steps`` (truncated at the newest step, as
SB3's NStepReplayBuffer does), unstacked 2- and 4-channel observations, and
``VecNormalize(norm_obs=True)`` named in the error.
"""
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

from conftest import HAS_CUDA
from integration_helpers import needs_engine, shift_config

pytest.importorskip("stable_baselines3")
from gymnasium import spaces  # noqa: E402
from pixel_envs import CartPolePixels  # noqa: E402
from stable_baselines3 import DQN, SAC, TD3  # noqa: E402
from stable_baselines3.common.buffers import NStepReplayBuffer  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack, VecNormalize  # noqa: E402

from obsaug.sb3 import ReplayBuffer  # noqa: E402

pytestmark = needs_engine
SIZE = 40


def small():
    """A small policy (SB3 adds its own keys to the dict it is given: a new one each time)."""
    return {"features_extractor_kwargs": {"features_dim": 8}, "net_arch": [16]}


def pixel_env(continuous, n_envs=1, stack=3, max_steps=25):
    env = make_vec_env(CartPolePixels, n_envs=n_envs, seed=0,
                       env_kwargs={"size": SIZE, "continuous": continuous,
                                   "max_steps": max_steps})
    return VecFrameStack(env, n_stack=stack) if stack > 1 else env


def model_of(algo, **kw):
    env = pixel_env(continuous=algo is not DQN)
    kw = dict(dict(buffer_size=400, learning_starts=10, batch_size=8, seed=0, verbose=0,
                   policy_kwargs=small(), replay_buffer_class=ReplayBuffer), **kw)
    if algo is DQN:
        kw.setdefault("train_freq", 4)
    return algo("CnnPolicy", env, **kw)


# --- item 7: optimize_memory_usage and a second learn() ------------------------------

@pytest.mark.parametrize("algo", [DQN, SAC, TD3], ids=["DQN", "SAC", "TD3"])
def test_a_second_learn_with_optimize_memory_usage(algo):
    """SB3 marks the last stored step done before a continued run
    (``replay_buffer.dones[pos] = True``): the buffer ends its open episodes there
    (the next add starts new ones, so no stack or n-step return spans the runs)."""
    model = model_of(algo, optimize_memory_usage=True,
                     replay_buffer_kwargs={"augment": shift_config(size=SIZE)})
    rb = model.replay_buffer
    assert rb.optimize_memory_usage
    model.learn(30)
    frames, open_before = rb.replay.total_frames, rb._open.copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The last trajectory")  # SB3's own warning
        model.learn(30)
    assert model._n_updates > 0
    # the second run began with a first frame for the env (its episode was ended)
    assert rb.replay.total_frames >= frames + 30 + (1 if open_before.any() else 0)
    batch = rb.sample(16)
    assert batch.observations.shape == (16, 9, SIZE, SIZE)


def test_dones_takes_the_newest_step_only():
    model = model_of(SAC)
    model.learn(12)
    rb = model.replay_buffer
    newest = (rb.pos - 1) % rb.buffer_size
    with pytest.raises(IndexError, match=f"only the newest step \\({newest}\\)"):
        rb.dones[newest - 1] = True
    with pytest.raises(TypeError, match="keeps no dones array"):
        rb.dones[newest]
    rb._open[:] = True
    rb.dones[newest] = True
    assert not rb._open.any()


# --- item 8: the device after load_replay_buffer --------------------------------------

def fed(rb, steps=20, seed=0):
    """``steps`` VecFrameStack-like adds of one env (zero padding at the start)."""
    g = np.random.default_rng(seed)
    k = rb._frame_shape()[0]
    stack = np.zeros((1, k, 16, 16), np.uint8)
    stack[:, -3:] = g.integers(0, 256, (1, 3, 16, 16))
    for _ in range(steps):
        nxt = np.concatenate([stack[:, 3:], g.integers(0, 256, (1, 3, 16, 16), np.uint8)], 1)
        rb.add(stack, nxt, np.zeros((1, 1), np.float32), np.ones(1), np.zeros(1, bool), [{}])
        stack = nxt
    return rb


def small_buffer(**kw):
    return ReplayBuffer(100, spaces.Box(0, 255, (9, 16, 16), np.uint8),
                        spaces.Box(-1, 1, (1,), np.float32), device="cpu", seed=3, **kw)


def test_a_buffer_pickled_on_a_cuda_device_loads_in_any_process(tmp_path):
    """Saved on a GPU machine (its device and its engine config say cuda), loaded by
    SB3's load_replay_buffer: it unpickles (onto the CPU where this process has no
    CUDA device, with a warning) and SB3's ``replay_buffer.device = model.device``
    puts it on the model's device, engine included."""
    rb = fed(small_buffer(augment=shift_config(size=16, pad=2, device="cpu")))
    want = rb.sample(8)
    rb._device = torch.device("cuda")                 # as a CUDA run pickles it
    rb._augment_config = shift_config(size=16, pad=2, device="cuda")
    save_to_pkl(tmp_path / "rb.pkl", rb)
    model = model_of(SAC, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.load_replay_buffer(tmp_path / "rb.pkl")
    loaded = model.replay_buffer
    if not HAS_CUDA:
        assert any("pickled on cuda" in str(w.message) for w in caught), caught
    assert loaded.device == torch.device("cpu") and loaded.replay.device.type == "cpu"
    assert loaded.engine.device.type == "cpu"
    # the same sampler counter and engine step as the saved buffer: the same next batch
    again, after = loaded.sample(8), rb.sample(8)
    assert torch.equal(again.observations, after.observations)
    assert not torch.equal(again.observations, want.observations)


def test_setting_the_device_is_kept_and_a_same_device_moves_nothing():
    rb = fed(small_buffer())
    native = rb.replay
    rb.device = "cpu"
    assert rb.replay is native and rb.device == torch.device("cpu")
    rb.device = "auto"  # SB3's get_device: cuda where there is one
    assert rb.device.type == ("cuda" if HAS_CUDA else "cpu")


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_setting_the_device_moves_frames_and_engine():
    rb = fed(small_buffer(augment=shift_config(size=16, pad=2)))
    frames = rb.replay.storage.clone()
    rb.device = "cuda"
    assert rb.replay.device.type == "cuda" and rb.engine.device.type == "cuda"
    assert torch.equal(rb.replay.storage.cpu(), frames)
    assert rb.sample(4).observations.device.type == "cuda"


# --- item 9: size() as SB3 counts ------------------------------------------------------

def test_size_counts_steps_per_env_as_sb3_and_num_valid_transitions():
    space = spaces.Box(0, 255, (3, 8, 8), np.uint8)
    rb = ReplayBuffer(100, space, spaces.Discrete(2), device="cpu", n_envs=2)
    for t in range(10):
        obs = np.full((2, 3, 8, 8), t, np.uint8)
        rb.add(obs, obs + 1, np.zeros((2, 1)), np.ones(2), np.zeros(2, bool), [{}, {}])
    assert rb.size() == 10                       # SB3: pos, steps per env
    assert rb.num_valid == 20 == rb.replay.num_valid
    assert "size=10 steps per env of 2 envs" in repr(rb) and "num_valid=20" in repr(rb)


# --- item 10: n-step returns from learning_starts < n_steps ---------------------------

def test_the_issues_sac_command_trains_with_n_steps_above_learning_starts():
    env = pixel_env(continuous=True)
    model = SAC("CnnPolicy", env, learning_starts=1, batch_size=8, buffer_size=1000,
                replay_buffer_class=ReplayBuffer, replay_buffer_kwargs={"n_steps": 5},
                policy_kwargs=small())
    model.learn(12)
    assert model._n_updates >= 10
    assert model.replay_buffer._head is None     # transitions with their 5 steps exist now


def test_before_the_first_full_n_step_transition_returns_stop_at_the_newest_step():
    """Three steps stored, n = 5: every stored transition is sampled with its return
    truncated at the newest step and bootstrapped from it, as SB3's NStepReplayBuffer
    samples at its write head (checked against it, transition by transition)."""
    gamma = 0.5
    rb = small_buffer(n_steps=5, gamma=gamma)
    sb3 = NStepReplayBuffer(100, rb.observation_space, rb.action_space, device="cpu",
                            n_steps=5, gamma=gamma)
    stack = np.zeros((1, 9, 16, 16), np.uint8)
    for t in range(3):
        nxt = np.concatenate([stack[:, 3:], np.full((1, 3, 16, 16), t + 1, np.uint8)], 1)
        args = (stack, nxt, np.zeros((1, 1), np.float32), np.array([t + 1.0]),
                np.zeros(1, bool), [{}])
        rb.add(*args)
        sb3.add(*args)
        stack = nxt
    assert rb.num_valid == 0
    ours = rb.sample(400)

    def rows(batch):
        return {(int(o[-1, 0, 0]), round(float(r), 6), round(float(d), 6), int(n[-1, 0, 0]))
                for o, r, d, n in zip(batch.observations, batch.rewards[:, 0],
                                      batch.discounts[:, 0], batch.next_observations)}

    want = rows(sb3._get_samples(np.array([0, 1, 2])))
    assert rows(ours) == want
    assert want == {(0, 1 + 2 * gamma + 3 * gamma ** 2, gamma ** 3, 3),
                    (1, 2 + 3 * gamma, gamma ** 2, 3), (2, 3.0, gamma, 3)}
    assert torch.all(ours.dones == 0)
    for t in range(3, 5):  # the fifth step gives the first transition its 5 steps
        assert rb._head is not None
        nxt = np.concatenate([stack[:, 3:], np.full((1, 3, 16, 16), t + 1, np.uint8)], 1)
        rb.add(stack, nxt, np.zeros((1, 1), np.float32), np.ones(1), np.zeros(1, bool), [{}])
        stack = nxt
    assert rb.num_valid == 1 and rb._head is None


# --- item 11: unstacked observations, VecNormalize -----------------------------------

class Channels(gym.Env):
    """``channels`` unstacked channels per observation (RGBD, two cameras): random frames."""
    action_space = spaces.Box(-1, 1, (1,), np.float32)

    def __init__(self, channels):
        self.observation_space = spaces.Box(0, 255, (SIZE, SIZE, channels), np.uint8)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def _frame(self):
        return self.np_random.integers(0, 256, self.observation_space.shape, dtype=np.uint8)

    def step(self, action):
        self.t += 1
        return self._frame(), 0.0, False, self.t >= 20, {}


@pytest.mark.parametrize("channels", [2, 4])
def test_unstacked_observations_of_2_or_4_channels_learn(channels):
    """No VecFrameStack: 2 or 4 channels guessed as stacked grayscale frames, found
    unstacked at the first add, stored as one frame of all channels."""
    model = SAC("CnnPolicy", DummyVecEnv([lambda: Channels(channels)]), buffer_size=200,
                learning_starts=10, batch_size=8, seed=0, policy_kwargs=small(),
                replay_buffer_class=ReplayBuffer)
    model.learn(25)
    rb = model.replay_buffer
    assert (rb.frame_stack, rb.frame_channels) == (1, channels)
    assert model._n_updates > 0
    assert rb.sample(4).observations.shape == (4, channels, SIZE, SIZE)


def test_a_wrong_given_layout_names_frame_stack_1():
    rb = ReplayBuffer(10, spaces.Box(0, 255, (4, 8, 8), np.uint8), spaces.Discrete(2),
                      device="cpu", frame_stack=4)
    obs = np.random.default_rng(0).integers(0, 256, (2, 1, 4, 8, 8), dtype=np.uint8)
    with pytest.raises(ValueError, match="frame_stack=1 when the observations are not stacked"):
        rb.add(obs[0], obs[1], np.zeros((1, 1)), np.ones(1), np.zeros(1, bool), [{}])


def test_vecnormalize_of_pixels_is_named():
    env = VecNormalize(pixel_env(continuous=True), norm_obs=True)
    with pytest.raises(ValueError, match=r"VecNormalize\(norm_obs=True\).*VecNormalize\("
                                         r"norm_obs=False\)"):
        SAC("CnnPolicy", env, buffer_size=100, replay_buffer_class=ReplayBuffer)


def test_pickled_state_round_trips_the_new_attributes(tmp_path):
    rb = small_buffer(n_steps=3)
    fed(rb, steps=1)
    save_to_pkl(tmp_path / "rb.pkl", rb)
    back = load_from_pkl(tmp_path / "rb.pkl")
    assert back.device == torch.device("cpu") and len(back._head) == 1
    assert back.sample(4).rewards.shape == (4, 1)


def test_setting_another_device_moves_the_frames_and_rebuilds_the_engine(monkeypatch):
    """The move, seen on the CPU: with the devices taken as different, setting the device
    reloads the frames there and builds the engine there from its config and state."""
    import obsaug.sb3 as osb3
    rb = fed(small_buffer(augment=shift_config(size=16, pad=2)))
    twin = fed(small_buffer(augment=shift_config(size=16, pad=2)))
    native, engine = rb.replay, rb.engine
    monkeypatch.setattr(osb3, "same_device", lambda a, b: False)
    rb.device = "cpu"
    monkeypatch.undo()
    assert rb.replay is not native and rb.engine is not engine and engine.closed
    assert torch.equal(rb.replay.storage, native.storage)
    a, b = rb.sample(8), twin.sample(8)
    assert torch.equal(a.observations, b.observations)
