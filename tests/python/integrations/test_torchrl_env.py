"""obsaug.torchrl.Augment inside a TorchRL environment (TransformedEnv), and its copies.

The environments are mocks: TorchRL's ContinuousActionConvMockEnv (float32 pixels,
Unbounded spec) and ``FramesEnv`` below (uint8 pixels, Bounded spec, each frame a
function of its episode and step, so a test can rebuild the raw frames). Augmented
frames are compared with a twin engine's ``augment`` of the raw frames at the step
the contract names: one step per augment call, reset frames included.
"""
import copy
import pickle

import pytest
import torch

import obsaug
from integration_helpers import needs_engine, shift_config

torchrl = pytest.importorskip("torchrl")
from tensordict import TensorDict  # noqa: E402
from torchrl.data import Bounded, Composite, Unbounded  # noqa: E402
from torchrl.envs import CatFrames, Compose, EnvBase, TransformedEnv  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402
from torchrl.testing.mocking_classes import ContinuousActionConvMockEnv  # noqa: E402

from obsaug.torchrl import Augment  # noqa: E402

pytestmark = needs_engine
C, H = 3, 16


class FramesEnv(EnvBase):
    """uint8 ``[*batch, channels, H, H]`` pixels in a Bounded 0..255 spec; episodes of
    ``length`` steps; the frame at step t of episode e is ``frame(e, t)``."""

    def __init__(self, channels=C, length=10, batch_size=()):
        super().__init__(batch_size=torch.Size(batch_size))
        self.channels, self.length = channels, length
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, (*self.batch_size, channels, H, H), dtype=torch.uint8),
            shape=self.batch_size)
        self.action_spec = Unbounded((*self.batch_size, 1))
        self.reward_spec = Unbounded((*self.batch_size, 1))
        self.episode, self.t = -1, 0

    def frame(self, episode, t):
        g = torch.Generator().manual_seed(1000 * episode + t)
        return torch.randint(0, 256, (*self.batch_size, self.channels, H, H), generator=g,
                             dtype=torch.uint8)

    def _observation(self):
        done = torch.full((*self.batch_size, 1), self.t >= self.length)
        return TensorDict(pixels=self.frame(self.episode, self.t), done=done,
                          terminated=done.clone(), reward=torch.zeros(*self.batch_size, 1),
                          batch_size=self.batch_size)

    def _reset(self, tensordict, **kwargs):
        self.episode, self.t = self.episode + 1, 0
        return self._observation().exclude("reward")

    def _step(self, tensordict):
        self.t += 1
        return self._observation()

    def _set_seed(self, seed):
        return seed


def crop_config(dtype="uint8", **output):
    return {"device": "cpu", "seed": 2, "frames": {"stack": 1, "channels": C, "height": H,
                                                     "width": H},
            "pipeline": [{"op": "crop", "size": 12}], "output": {"dtype": dtype, **output}}


def test_default_keys_augment_every_step_inside_an_env():
    eng, twin = obsaug.Engine(shift_config(stack=1, seed=4)), obsaug.Engine(
        shift_config(stack=1, seed=4))
    base = FramesEnv()
    td = TransformedEnv(base, Augment(eng)).rollout(3)      # ("next", "pixels") by default
    assert torch.equal(td["pixels"][0], twin.augment(base.frame(0, 0)[None], step=0)[0])
    for t in range(3):
        assert torch.equal(td["next", "pixels"][t],
                           twin.augment(base.frame(0, t + 1)[None], step=t + 1)[0]), f"step {t}"
    # each frame is augmented once: next obs at t is obs at t + 1
    assert torch.equal(td["pixels"][1:], td["next", "pixels"][:-1])
    assert eng.step == 4


def test_reset_frames_are_augmented():
    eng, twin = obsaug.Engine(shift_config(stack=1, seed=6)), obsaug.Engine(
        shift_config(stack=1, seed=6))
    base = FramesEnv(length=2)
    env = TransformedEnv(base, Augment(eng, in_keys=["pixels"]))
    # steps: reset 0, step 1, step 2 (done), reset 3, step 4
    td = env.rollout(4, break_when_any_done=False)
    assert torch.equal(td["pixels"][0], twin.augment(base.frame(0, 0)[None], step=0)[0])
    assert torch.equal(td["pixels"][2], twin.augment(base.frame(1, 0)[None], step=3)[0])
    assert torch.equal(env.reset()["pixels"], twin.augment(base.frame(2, 0)[None],
                                                           step=eng.step - 1)[0])


def test_specs_follow_a_cropping_float_pipeline():
    cfg = crop_config("float32", scale=1 / 255, bias=-0.5)
    env = TransformedEnv(ContinuousActionConvMockEnv(pixel_shape=[C, H, H]),
                         Augment(obsaug.Engine(cfg), in_keys=["pixels"]))
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Unbounded), "a float input's range is not the output's"
    assert (spec.shape, spec.dtype) == ((C, 12, 12), torch.float32)
    check_env_specs(env)
    assert env.reset()["pixels"].shape == (C, 12, 12)
    assert env.rollout(3)["next", "pixels"].shape == (3, C, 12, 12)


@pytest.mark.parametrize("output, dtype, low, high", [
    ({}, torch.uint8, 0, 255),
    ({"scale": 1 / 255, "bias": -0.5}, torch.float32, -0.5, 0.5),
    ({"scale": -2.0, "bias": 1.0}, torch.float32, -509.0, 1.0),
], ids=["uint8", "float32", "float32-negative-scale"])
def test_bounded_uint8_specs_stay_bounded_over_what_the_pipeline_gives(output, dtype, low, high):
    cfg = crop_config("float32" if dtype == torch.float32 else "uint8", **output)
    env = TransformedEnv(FramesEnv(), Augment(obsaug.Engine(cfg)))
    spec = env.observation_spec["pixels"]
    assert isinstance(spec, Bounded)
    assert (spec.shape, spec.dtype) == ((C, 12, 12), dtype)
    assert spec.space.low.unique().tolist() == [low]
    assert spec.space.high.unique().tolist() == [high]
    check_env_specs(env)
    td = env.rollout(3)
    assert spec.is_in(td["pixels"][0]) and spec.is_in(td["next", "pixels"][2])
    # the spec's ends are the values the kernels give for 0 and 255
    halves = torch.zeros(1, C, H, H, dtype=torch.uint8)
    halves[..., H // 2:] = 255                             # every 12x12 crop holds both
    ends = obsaug.Engine(cfg).augment(halves, step=0)
    assert (ends.min().item(), ends.max().item()) == (low, high)


def test_out_keys_add_specs_and_keep_the_raw_frames():
    eng, twin = obsaug.Engine(crop_config()), obsaug.Engine(crop_config())
    base = FramesEnv()
    env = TransformedEnv(base, Augment(eng, out_keys=["aug", ("next", "aug")]))
    assert env.observation_spec["pixels"].shape == (C, H, H)
    assert env.observation_spec["aug"].shape == (C, 12, 12)
    check_env_specs(env)
    start = eng.step                                     # check_env_specs took steps
    td = env.rollout(2)
    assert torch.equal(td["pixels"], torch.stack([base.frame(base.episode, t) for t in (0, 1)]))
    assert torch.equal(td["aug"][0], twin.augment(td["pixels"][:1], step=start)[0])
    assert torch.equal(td["next", "aug"][1],
                       twin.augment(td["next", "pixels"][1:], step=start + 2)[0])


def test_batched_env_and_catframes_stacks():
    eng, twin = obsaug.Engine(shift_config(stack=3, seed=8)), obsaug.Engine(
        shift_config(stack=3, seed=8))
    base = FramesEnv(batch_size=[2])
    cat = CatFrames(N=3, dim=-3, in_keys=["pixels"], out_keys=["stack"])
    env = TransformedEnv(base, Compose(cat, Augment(eng, in_keys=["stack"])))
    assert env.observation_spec["stack"].shape == (2, 3 * C, H, H)
    check_env_specs(env)
    steps_before = eng.step
    td = env.rollout(3)
    assert td["stack"].shape == (2, 3, 3 * C, H, H)
    stack1 = torch.cat([base.frame(base.episode, t) for t in (0, 0, 1)], dim=-3)
    assert torch.equal(td["next", "stack"][:, 0], twin.augment(stack1, step=steps_before + 1))


def test_a_spec_of_another_frame_size_is_refused():
    env = TransformedEnv(ContinuousActionConvMockEnv(pixel_shape=[C, 20, 20]),
                         Augment(obsaug.Engine(crop_config()), in_keys=["pixels"]))
    with pytest.raises(ValueError, match=r"the spec of 'pixels' must be \[\.\.\., S\*3, 16, "
                                         r"16\] \(the engine's frames\), got torch.float32 "
                                         r"\[3, 20, 20\]"):
        env.observation_spec


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda a: pickle.loads(pickle.dumps(a))],
                         ids=["deepcopy", "pickle"])
def test_copies_rebuild_the_engine_at_its_step(copier):
    eng = obsaug.Engine(shift_config(stack=1, seed=11), rank=1, world_size=2)
    twin = obsaug.Engine(shift_config(stack=1, seed=11), rank=1, world_size=2)
    aug = Augment(eng, in_keys=["pixels"], share=True)
    frames = FramesEnv(batch_size=[4]).frame(0, 0)
    aug(TensorDict(pixels=frames.clone(), batch_size=[4]))
    copied = copier(aug)
    assert copied.engine is not eng and copied.engine.config == eng.config
    assert (copied.engine.rank, copied.engine.world_size, copied.engine.step) == (1, 2, 1)
    assert copied.share and copied.in_keys == ["pixels"]
    out = copied(TensorDict(pixels=frames.clone(), batch_size=[4]))["pixels"]
    assert torch.equal(out, twin.augment(frames, step=1))
    assert eng.step == 1, "the copy's counter is its own"
    env = copier(TransformedEnv(FramesEnv(), Augment(eng)))
    assert env.rollout(2)["pixels"].shape == (2, C, H, H)


def test_an_augment_with_a_closed_engine_is_not_copied():
    eng = obsaug.Engine(shift_config(stack=1))
    aug = Augment(eng)
    eng.close()
    with pytest.raises(RuntimeError, match="its engine is closed, so it cannot be copied"):
        copy.deepcopy(aug)
    with pytest.raises(RuntimeError, match="its engine is closed, so it cannot be copied"):
        pickle.dumps(aug)
