"""obsaug.sb3.ReplayBuffer as SB3's replay_buffer_class.

SAC ("CnnPolicy") and DQN learn a few hundred steps on the numpy-drawn pixel
CartPole through VecFrameStack(3) + VecTransposeImage; the buffer's samples
equal an ``obsaug.ReplayBuffer`` fed the same frames with the same seed and
engine; timeouts bootstrap (or not, as SB3's flag says); a wrong frame layout
is caught at ``add``, an engine that does not fit the space when the buffer is
built; an env reset without done (a second DQN ``learn()``, ``learn()`` after
loading model and buffer) starts a new episode in the stored stacks.
"""
import gymnasium as gym
import numpy as np
import pytest
import torch

import obsaug
from integration_helpers import needs_engine, shift_config

sb3 = pytest.importorskip("stable_baselines3")
from gymnasium import spaces  # noqa: E402
from pixel_envs import CartPolePixels  # noqa: E402
from stable_baselines3 import DQN, SAC  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack  # noqa: E402

from obsaug.sb3 import ReplayBuffer  # noqa: E402

pytestmark = needs_engine
SIZE = 40  # the smallest comfortable size for SB3's NatureCNN (>= 36): quick on CPU


def pixel_env(continuous, n_envs=1, max_steps=40):
    env = make_vec_env(CartPolePixels, n_envs=n_envs, seed=0,
                       env_kwargs={"size": SIZE, "continuous": continuous,
                                   "max_steps": max_steps})
    return VecFrameStack(env, n_stack=3)


def params(model):
    return torch.cat([p.detach().flatten().clone() for p in model.policy.parameters()])


@pytest.mark.parametrize("algo", ["SAC", "DQN"])
def test_learns_through_the_adapter_on_pixels(algo):
    env = pixel_env(continuous=algo == "SAC")
    kw = dict(buffer_size=300, learning_starts=64, batch_size=8, seed=0, verbose=0,
              replay_buffer_class=ReplayBuffer,
              replay_buffer_kwargs={"augment": shift_config(size=SIZE)})
    if algo == "SAC":
        model = SAC("CnnPolicy", env, train_freq=4, gradient_steps=1,
                    policy_kwargs={"features_extractor_kwargs": {"features_dim": 32}}, **kw)
    else:
        model = DQN("CnnPolicy", env, train_freq=4, target_update_interval=50,
                    policy_kwargs={"features_extractor_kwargs": {"features_dim": 32}}, **kw)
    rb = model.replay_buffer
    assert isinstance(rb, ReplayBuffer)
    assert (rb.frame_stack, rb.frame_channels) == (3, 3)      # 9 channels read from the space
    assert model.observation_space.shape == (9, SIZE, SIZE)   # VecTransposeImage: channel first
    before = params(model)
    model.learn(total_timesteps=200)
    assert model._n_updates >= 30
    assert not torch.equal(before, params(model)), "the policy did not change"
    assert rb.engine.step == 2 * model._n_updates            # obs and next_obs per update
    assert rb.replay.total_frames > 200                       # one first frame per episode too
    batch = rb.sample(8)
    assert batch.observations.shape == (8, 9, SIZE, SIZE)
    assert batch.observations.dtype == torch.uint8            # SB3 divides by 255 itself
    assert batch.dones.shape == batch.rewards.shape == (8, 1)
    assert batch.actions.shape == (8, 1)


def frames_stream(steps=60, seed=3):
    """VecFrameStack-like observations of one env ([9, H, W]; zero padding at starts) with
    the newest frames, rewards, dones and time-limit flags, ending episodes now and then."""
    g = np.random.default_rng(seed)
    stack = np.zeros((9, 16, 16), np.uint8)
    frame = g.integers(0, 256, (3, 16, 16), dtype=np.uint8)
    stack[-3:] = frame
    out = []
    for t in range(steps):
        nxt_frame = g.integers(0, 256, (3, 16, 16), dtype=np.uint8)
        nxt = np.concatenate([stack[3:], nxt_frame])
        done, timeout = t % 17 == 16, t % 17 == 16 and t % 2 == 0
        out.append((stack, nxt, np.array([[g.standard_normal()]], np.float32),
                    np.array([float(t)]), np.array([done]),
                    [{"TimeLimit.truncated": timeout}]))
        if done:
            stack = np.zeros((9, 16, 16), np.uint8)
            stack[-3:] = g.integers(0, 256, (3, 16, 16), dtype=np.uint8)
        else:
            stack = nxt
    return out


def small_buffer(**kw):
    space = spaces.Box(0, 255, (9, 16, 16), np.uint8)
    action = spaces.Box(-1, 1, (1,), np.float32)
    return ReplayBuffer(100, space, action, device="cpu", seed=kw.pop("seed", 5), **kw)


def fed_pair(**kw):
    """The adapter and an obsaug.ReplayBuffer with the same seed, fed frames_stream() (3-step
    returns, gamma 0.9): the adapter as SB3 calls add, the plain buffer frame by frame."""
    rb = small_buffer(n_steps=3, gamma=0.9, **kw)
    plain = obsaug.ReplayBuffer(100, (3, 16, 16), 3, (1,), n_step=3, gamma=0.9, seed=5)
    start = True
    for obs, nxt, action, reward, done, infos in frames_stream():
        rb.add(obs[None], nxt[None], action, reward, done, infos)
        if start:
            plain.add_first(torch.from_numpy(obs[-3:]))
        timeout = infos[0]["TimeLimit.truncated"]
        plain.add(torch.from_numpy(action[0]), float(reward[0]), torch.from_numpy(nxt[-3:]),
                  terminated=bool(done[0]) and not timeout, truncated=bool(done[0]) and timeout)
        start = bool(done[0])
    return rb, plain


def test_samples_equal_obsaug_replay_buffer_with_the_same_seed():
    rb, plain = fed_pair(augment=shift_config(size=16, pad=2))
    eng = obsaug.Engine(shift_config(size=16, pad=2))
    assert rb.num_valid == plain.num_valid and rb.size() == 60  # SB3: steps per env
    for call in range(3):
        got, want = rb.sample(32), plain.sample(32, augment=eng)
        assert torch.equal(got.observations, want["obs"]), f"call {call}"
        assert torch.equal(got.next_observations, want["next_obs"])
        assert torch.equal(got.actions, want["action"])
        assert torch.equal(got.rewards[:, 0], want["reward"])
        assert torch.equal(got.dones[:, 0], (want["discount"] == 0).float())
        terminal = want["discount"] == 0
        assert torch.equal(got.discounts[~terminal, 0], want["discount"][~terminal])


@pytest.mark.parametrize("handle", [True, False], ids=["bootstrap", "terminal"])
def test_time_limits_bootstrap_when_handled(handle):
    rb = small_buffer(handle_timeout_termination=handle)
    stream = frames_stream(17)                   # one episode, ended by a time limit (t = 16)
    assert stream[-1][4][0] and stream[-1][5][0]["TimeLimit.truncated"]
    for item in stream:
        rb.add(*item)
    batch = rb.sample(400)
    last = batch.rewards[:, 0] == 16.0           # the transition into the time-limited frame
    assert last.any()
    assert torch.all(batch.dones[last] == (0.0 if handle else 1.0))
    assert torch.all(batch.dones[~last] == 0.0)


def test_a_wrong_frame_layout_is_caught_at_add():
    rb = small_buffer(frame_stack=9)             # 9 grayscale frames: next_obs is not shifted by 1
    obs, nxt, action, reward, done, infos = frames_stream(1)[0]
    with pytest.raises(ValueError, match=r"not 9 stacked frames of 1.*frame_stack="):
        rb.add(obs[None], nxt[None], action, reward, done, infos)
    with pytest.raises(ValueError, match="frame_stack must divide the observation's 9"):
        small_buffer(frame_stack=4)
    with pytest.raises(ValueError, match="uint8 image Box"):
        ReplayBuffer(10, spaces.Box(0, 1, (4,), np.float32), spaces.Discrete(2))
    with pytest.raises(TypeError, match="augment must be None, an obsaug.Engine"):
        small_buffer(augment=3)


def test_an_engine_decides_the_frame_layout_and_is_checked_against_the_space():
    """3 channels guess one RGB frame (S = 1, which no add can check); an engine's frames
    decide instead, and one that does not fit the space is refused at construction."""
    space = spaces.Box(0, 255, (3, 16, 16), np.uint8)        # 3 grayscale frames
    assert ReplayBuffer(10, space, spaces.Discrete(2), device="cpu").frame_stack == 1
    gray = shift_config(stack=3, channels=1, size=16, pad=2)
    rb = ReplayBuffer(10, space, spaces.Discrete(2), device="cpu", augment=gray)
    assert (rb.frame_stack, rb.frame_channels) == (3, 1)
    obs = np.zeros((1, 3, 16, 16), np.uint8)
    nxt = obs.copy()
    nxt[0, 2] = 1
    rb.add(obs, nxt, np.array([[0]]), np.array([1.0]), np.array([False]), [{}])  # checked
    assert rb.sample(4).observations.shape == (4, 3, 16, 16)
    with pytest.raises(ValueError, match="not 3 stacked frames of 1"):        # not shifted by one
        rb.add(nxt, obs, np.array([[0]]), np.array([1.0]), np.array([False]), [{}])
    # the engine's frames.stack does not bind (the engine takes any multiple of C)
    rb = ReplayBuffer(10, space, spaces.Discrete(2), device="cpu",
                      augment=shift_config(stack=2, channels=1, size=16, pad=2))
    assert (rb.frame_stack, rb.frame_channels) == (3, 1)
    with pytest.raises(ValueError, match=r"augment's engine takes frames of 3 channels of 16x16 "
                                         r"\(its config's frames.channels, height, width\), but "
                                         r"the observations are 4 channels of 16x16"):
        ReplayBuffer(10, spaces.Box(0, 255, (4, 16, 16), np.uint8), spaces.Discrete(2),
                     device="cpu", augment=shift_config(stack=1, channels=3, size=16, pad=2))
    with pytest.raises(ValueError, match=r"observations are 3 channels of 20x20; set frames: "
                                         r"\{height: 20, width: 20\}"):
        ReplayBuffer(10, spaces.Box(0, 255, (3, 20, 20), np.uint8), spaces.Discrete(2),
                     device="cpu", augment=gray)
    with pytest.raises(ValueError, match=r"frame_stack=1 disagrees with augment's engine: its "
                                         r"frames.channels = 1 makes the 3-channel observations "
                                         r"3 stacked frames of 1 channels; drop frame_stack="):
        ReplayBuffer(10, space, spaces.Discrete(2), device="cpu", augment=gray, frame_stack=1)
    with pytest.raises(TypeError, match="frame_channels must be an int or None, got str"):
        ReplayBuffer(10, space, spaces.Discrete(2), device="cpu", augment=gray,
                     frame_channels="1")


def test_a_reset_without_done_is_found_per_env():
    """Two envs; env 1 is reset without a done: its open episode ends (truncated, so it
    bootstraps) and its reset frame starts a new one; env 0's episode goes on. Then env 0
    is reset onto its newest frame: the whole stack differs, and that is found too."""
    space = spaces.Box(0, 255, (3, 8, 8), np.uint8)
    rb = ReplayBuffer(100, space, spaces.Discrete(2), device="cpu", n_envs=2, frame_stack=3,
                      gamma=0.5)

    def stacks(*values):
        return np.stack([np.stack([np.full((8, 8), v, np.uint8) for v in env])
                         for env in values])

    def add(obs, nxt, reward):
        rb.add(obs, nxt, np.zeros((2, 1)), np.array(reward, np.float32), np.zeros(2, bool),
               [{}, {}])

    add(stacks((0, 0, 0), (100, 100, 100)), stacks((0, 0, 1), (100, 100, 101)), [1, 1])
    add(stacks((0, 0, 1), (100, 100, 101)), stacks((0, 1, 2), (100, 101, 102)), [2, 2])
    add(stacks((0, 1, 2), (0, 0, 200)), stacks((1, 2, 3), (0, 200, 201)), [3, 1])  # env 1 reset
    # env 0 reset onto the frame it had (VecFrameStack pads with zeros): the stack tells
    add(stacks((0, 0, 3), (0, 200, 201)), stacks((0, 3, 4), (200, 201, 202)), [1, 2])
    batch = rb.sample(2000)
    got = {(tuple(o), tuple(n), r) for o, n, r in zip(
        batch.observations[:, :, 0, 0].tolist(), batch.next_observations[:, :, 0, 0].tolist(),
        batch.rewards[:, 0].tolist())}
    assert got == {((0, 0, 0), (0, 0, 1), 1.0), ((0, 0, 1), (0, 1, 2), 2.0),
                   ((0, 1, 2), (1, 2, 3), 3.0), ((100, 100, 100), (100, 100, 101), 1.0),
                   ((100, 100, 101), (100, 101, 102), 2.0), ((200, 200, 200), (200, 200, 201), 1.0),
                   ((3, 3, 3), (3, 3, 4), 1.0), ((200, 200, 201), (200, 201, 202), 2.0)}
    assert torch.all(batch.dones == 0)


def test_a_pickle_without_the_last_next_obs_starts_new_episodes():
    """A buffer pickled before the last next_obs was kept cannot tell a reset: after
    loading, each env's next add starts a new episode."""
    rb = small_buffer()
    stream = frames_stream(5)
    for item in stream[:3]:
        rb.add(*item)
    state = rb.__getstate__()
    del state["_last_next_obs"]
    back = ReplayBuffer.__new__(ReplayBuffer)
    back.__setstate__(state)
    assert not back._open.any()
    back.add(*stream[3])
    assert back.replay.total_frames == rb.replay.total_frames + 2  # a first frame and a next


def test_memory_is_reported_and_a_fraction_of_sb3s():
    rb = small_buffer()
    m = rb.memory_bytes
    assert m["frames"] == 100 * 3 * 16 * 16 == rb.replay.storage.nbytes
    assert m["sb3_total"] > 5 * m["frames"]
    assert "SB3's ReplayBuffer would take" in rb.memory_report(16, 16)


def test_pickles_for_save_replay_buffer(tmp_path):
    rb = small_buffer(augment=shift_config(size=16, pad=2))
    for item in frames_stream(30):
        rb.add(*item)
    rb.sample(4)
    path = tmp_path / "rb.pkl"
    from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl
    save_to_pkl(path, rb)
    back = load_from_pkl(path)
    assert back.engine.step == rb.engine.step == 2
    a, b = rb.sample(16), back.sample(16)
    assert torch.equal(a.observations, b.observations)
    assert torch.equal(a.next_observations, b.next_observations)
    with pytest.raises(TypeError, match="pass the engine's config"):
        save_to_pkl(tmp_path / "x.pkl", small_buffer(augment=obsaug.Engine(
            shift_config(size=16, pad=2))))


def test_n_step_returns_with_reward_normalisation():
    """SB3 normalises and clips each step's reward before the n-step sum; the buffer keeps
    the sum, so a finite clip is refused by name and without one the sum is scaled exactly."""
    from stable_baselines3.common.vec_env import VecNormalize

    rb, plain = fed_pair()
    clipped = VecNormalize(pixel_env(continuous=True), norm_obs=False, norm_reward=True,
                           clip_reward=5.0)
    with pytest.raises(ValueError, match=r"n_steps=3 with VecNormalize\(norm_reward=True, "
                                         r"clip_reward=5\.0\).*clip_reward=np\.inf"):
        rb.sample(8, env=clipped)
    unclipped = VecNormalize(pixel_env(continuous=True), norm_obs=False, norm_reward=True,
                             clip_reward=np.inf)
    unclipped.ret_rms.var = np.array(4.0)
    got, want = rb.sample(32, env=unclipped), plain.sample(32)
    scale = np.sqrt(4.0 + unclipped.epsilon)
    assert torch.equal(got.rewards[:, 0], (want["reward"].double() / scale).float())
    one_step = small_buffer(n_steps=1)
    for obs, nxt, action, reward, done, infos in frames_stream(steps=5):
        one_step.add(obs[None], nxt[None], action, reward, done, infos)
    assert one_step.sample(4, env=clipped).rewards.abs().max() <= 5.0


class Counting(gym.Env):
    """Grayscale frames whose every pixel is ``base + 50 * episode + t``; 30-step episodes.
    ``log`` records each step as (frame before, frame after)."""
    observation_space = spaces.Box(0, 255, (SIZE, SIZE, 1), np.uint8)
    action_space = spaces.Discrete(2)

    def __init__(self, base=0):
        self.base, self.episode, self.log = base, -1, []

    def _frame(self):
        return np.full((SIZE, SIZE, 1), self.base + 50 * self.episode + self.t, np.uint8)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.episode, self.t = self.episode + 1, 0
        return self._frame(), {}

    def step(self, action):
        before = self.base + 50 * self.episode + self.t
        self.t += 1
        self.log.append((before, before + 1))
        return self._frame(), float(self.t), self.t >= 30, False, {}


def counting_model(base=0):
    counting = Counting(base)
    env = VecFrameStack(DummyVecEnv([lambda: counting]), n_stack=3)
    model = DQN("CnnPolicy", env, buffer_size=1000, learning_starts=10_000, seed=0,
                policy_kwargs={"features_extractor_kwargs": {"features_dim": 8}},
                replay_buffer_class=ReplayBuffer, replay_buffer_kwargs={"frame_stack": 3})
    return model, counting


def expected_transitions(*logs):
    """(obs frames, next obs frames, reward) of every logged step: stacks of the episode's
    last 3 frames, the first frame repeated at its start (as the buffer rebuilds them)."""
    want = set()
    for log in logs:
        episode = []
        for before, after in log:
            if not episode or episode[-1] != before:   # a reset: a new episode
                episode = [before]
            stack = lambda frames: tuple(([frames[0]] * 2 + frames)[-3:])  # noqa: E731
            obs = stack(episode)
            episode.append(after)
            want.add((obs, stack(episode), float(after % 50)))
    return want


def stored_transitions(rb):
    batch = rb.sample(4000)                     # with replacement: every transition, surely
    assert torch.all(batch.dones == 0), "no episode terminated: cut ones must be truncated"
    obs = batch.observations[:, :, 0, 0].tolist()
    nxt = batch.next_observations[:, :, 0, 0].tolist()
    return {(tuple(o), tuple(n), r) for o, n, r in zip(obs, nxt, batch.rewards[:, 0].tolist())}


def test_a_second_learn_starts_a_new_episode_after_its_reset():
    """learn() with reset_num_timesteps=True resets the env mid-episode without a done: the
    episode that was open ends there (truncated) and the reset's frame starts a new one."""
    model, counting = counting_model()
    model.learn(5)
    model.learn(5)
    assert {before // 50 for before, _ in counting.log} == {0, 1}  # two episodes, both cut
    assert stored_transitions(model.replay_buffer) == expected_transitions(counting.log)


def test_learn_after_loading_the_buffer_starts_a_new_episode(tmp_path):
    """A model and its buffer loaded and learning again (SB3 resets the new env): the
    loaded buffer's open episode ends where it was saved and the new env's frames start
    one of their own."""
    model, first = counting_model()
    model.learn(5, reset_num_timesteps=False)
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "rb.pkl")
    resumed, second = counting_model(base=100)
    resumed = DQN.load(tmp_path / "model.zip", env=resumed.get_env())
    resumed.load_replay_buffer(tmp_path / "rb.pkl")
    resumed.learn(5, reset_num_timesteps=False)
    assert first.log and second.log
    assert (stored_transitions(resumed.replay_buffer)
            == expected_transitions(first.log, second.log))
