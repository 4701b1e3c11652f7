"""obsaug.torchrl.Augment in TorchRL replay buffers.

Every augmented sample is compared with a twin engine's ``augment`` of the same
tensors at the step the contract names (obs: the engine's next step, next obs:
the one after, or the same with share=True), so the tests see which step each
key took; the stored data stays as written (``inv`` is the identity).
"""
import subprocess
import sys
import threading

import pytest
import torch

import obsaug
from integration_helpers import needs_engine, shift_config

torchrl = pytest.importorskip("torchrl")
from tensordict import TensorDict  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402
from torchrl.envs import CatFrames  # noqa: E402

from obsaug.torchrl import Augment  # noqa: E402

pytestmark = needs_engine
S, C, H = 3, 3, 16


def test_import_obsaug_imports_neither_torchrl_nor_sb3():
    code = ("import sys, obsaug; assert 'torchrl' not in sys.modules, 'torchrl'; "
            "assert 'stable_baselines3' not in sys.modules, 'sb3'; "
            "import obsaug.torchrl; assert 'torchrl' in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"PYTHONPATH": ":".join(p for p in sys.path if p)})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def transitions(n, dtype=torch.uint8, seed=0):
    g = torch.Generator().manual_seed(seed)
    pix = torch.randint(0, 256, (n, S * C, H, H), generator=g, dtype=torch.uint8)
    nxt = torch.randint(0, 256, (n, S * C, H, H), generator=g, dtype=torch.uint8)
    return TensorDict({"pixels": pix.to(dtype), "action": torch.randn(n, 2, generator=g),
                       "next": {"pixels": nxt.to(dtype), "reward": torch.randn(n, 1)}},
                      batch_size=[n])


@pytest.mark.parametrize("share", [False, True], ids=["independent", "shared"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32], ids=["uint8", "float32"])
def test_sample_augments_obs_and_next_obs_with_the_contract_steps(share, dtype):
    eng, twin = obsaug.Engine(shift_config(seed=3)), obsaug.Engine(shift_config(seed=3))
    data = transitions(40, dtype)
    rb = ReplayBuffer(storage=LazyTensorStorage(64), batch_size=8,
                      transform=Augment(eng, share=share))
    rb.extend(data)
    assert torch.equal(rb.storage[:]["pixels"], data["pixels"]), "extend must store raw obs"
    for call in range(3):
        batch, info = rb.sample(return_info=True)
        idx = torch.as_tensor(info["index"])
        s = call if share else 2 * call
        want_obs = twin.augment(data["pixels"][idx], step=s)
        want_next = twin.augment(data["next", "pixels"][idx], step=s if share else s + 1)
        assert batch["pixels"].dtype == dtype
        assert torch.equal(batch["pixels"], want_obs), f"obs, call {call}"
        assert torch.equal(batch["next", "pixels"], want_next), f"next obs, call {call}"
        assert not torch.equal(batch["pixels"], data["pixels"][idx]), "nothing was augmented"
        assert torch.equal(batch["action"], data["action"][idx])
    assert eng.step == (3 if share else 6)


class ContendedEngine(obsaug.Engine):
    """An Engine that another thread also augments with (taking a step) around each use,
    as a TorchRL prefetch worker can: after a read of ``step``, before each ``augment``
    and before each ``reserve_steps``. Deterministic: the other thread is joined."""

    def __init__(self, config):
        super().__init__(config)
        self._probe = torch.zeros(1, S * C, H, H, dtype=torch.uint8)

    def _other_thread_augments(self):
        other = threading.Thread(target=obsaug.Engine.augment, args=(self, self._probe))
        other.start()
        other.join()

    @property
    def step(self):
        step = obsaug.Engine.step.fget(self)
        self._other_thread_augments()
        return step

    def augment(self, obs, step=None, *, out=None):
        self._other_thread_augments()
        return super().augment(obs, step, out=out)

    def reserve_steps(self, count=1):
        self._other_thread_augments()
        return super().reserve_steps(count)


@pytest.mark.parametrize("prefetch", [None, 3], ids=["no_prefetch", "prefetch"])
def test_share_gives_obs_and_next_obs_one_step_while_other_threads_augment(prefetch):
    eng, twin = ContendedEngine(shift_config(seed=3)), obsaug.Engine(shift_config(seed=3))
    data = transitions(40)
    rb = ReplayBuffer(storage=LazyTensorStorage(64), batch_size=8, prefetch=prefetch,
                      transform=Augment(eng, share=True))
    rb.extend(data)
    used = []
    for call in range(6):
        batch, info = rb.sample(return_info=True)
        idx = torch.as_tensor(info["index"])
        steps = {}
        for key in ("pixels", ("next", "pixels")):
            steps[key] = next((s for s in range(eng.step)
                               if torch.equal(twin.augment(data[key][idx], step=s), batch[key])),
                              None)
        assert steps["pixels"] is not None, f"call {call}: obs at no step below {eng.step}"
        assert steps["pixels"] == steps["next", "pixels"], f"call {call}: {steps}"
        used.append(steps["pixels"])
    assert len(set(used)) == len(used), f"two samples at one step: {used}"


def test_append_transform_and_out_keys_keep_the_raw_pixels():
    eng, twin = obsaug.Engine(shift_config(seed=1)), obsaug.Engine(shift_config(seed=1))
    data = transitions(16)
    rb = ReplayBuffer(storage=LazyTensorStorage(16), batch_size=4)
    rb.append_transform(Augment(eng, in_keys=["pixels"], out_keys=["pixels_aug"]))
    rb.extend(data)
    batch, info = rb.sample(return_info=True)
    idx = torch.as_tensor(info["index"])
    assert torch.equal(batch["pixels"], data["pixels"][idx])
    assert torch.equal(batch["pixels_aug"], twin.augment(data["pixels"][idx], step=0))
    assert torch.equal(batch["next", "pixels"], data["next", "pixels"][idx])


def rollout(episodes=(7, 9, 6)):
    """Per-step frames [T, C, H, W] of several episodes, as a collector writes them:
    next pixels of step t == pixels of step t+1 within an episode."""
    g = torch.Generator().manual_seed(5)
    tds = []
    for e, length in enumerate(episodes):
        frames = torch.randint(0, 256, (length + 1, C, H, H), generator=g, dtype=torch.uint8)
        done = torch.zeros(length, 1, dtype=torch.bool)
        done[-1] = True
        tds.append(TensorDict({
            "pixels": frames[:-1], "traj": torch.full((length,), e),
            "next": {"pixels": frames[1:], "done": done, "terminated": done,
                     "truncated": torch.zeros_like(done)}}, batch_size=[length]))
    return torch.cat(tds)


def catframes_buffer(batch, transform=None):
    # out_keys distinct from in_keys: the rb transform drops its out_keys at extend
    cat = CatFrames(N=S, dim=-3, in_keys=["pixels"], out_keys=["stack"], reset_key="_reset")
    rb_transform, sampler = cat.make_rb_transform_and_sampler(batch_size=batch, traj_key="traj",
                                                             strict_length=False)
    rb = ReplayBuffer(storage=LazyTensorStorage(64), sampler=sampler,
                      batch_size=batch, transform=rb_transform)
    if transform is not None:
        rb.append_transform(transform)
    rb.extend(rollout())
    return rb


@pytest.mark.filterwarnings("ignore:The last dimension of the tensordict")  # CatFrames' own
@pytest.mark.parametrize("share", [False, True], ids=["independent", "shared"])
def test_composes_with_catframes_rebuilt_stacks(share):
    eng, twin = obsaug.Engine(shift_config(seed=7)), obsaug.Engine(shift_config(seed=7))
    plain = catframes_buffer(4)
    augmented = catframes_buffer(4, Augment(eng, in_keys=["stack", ("next", "stack")],
                                            share=share))
    for call in range(3):
        torch.manual_seed(100 + call)            # the SliceSampler draws from torch's RNG
        want = plain.sample()
        torch.manual_seed(100 + call)
        got = augmented.sample()
        assert want["stack"].shape == (4, S * C, H, H) == got["stack"].shape
        s = call if share else 2 * call
        assert torch.equal(got["stack"], twin.augment(want["stack"], step=s))
        assert torch.equal(got["next", "stack"],
                           twin.augment(want["next", "stack"], step=s if share else s + 1))
        # the stack is CatFrames': the newest frame is the step's own pixels
        assert torch.equal(want["stack"][:, -C:], want["pixels"])


def test_state_dict_resumes_the_same_augmentations():
    def make():
        aug = Augment(obsaug.Engine(shift_config(seed=9)))
        rb = ReplayBuffer(storage=LazyTensorStorage(32), batch_size=6, transform=aug)
        rb.extend(transitions(32, seed=4))
        return rb, aug

    rb, aug = make()
    for _ in range(3):
        rb.sample()
    state = rb.state_dict()
    assert state["_transforms"]["transforms.0._extra_state"]["engine"]["step"] == 6
    resumed, resumed_aug = make()
    resumed.load_state_dict(state)
    assert resumed_aug.engine.step == aug.engine.step == 6
    data = transitions(32, seed=4)
    for _ in range(2):
        batch, info = rb.sample(return_info=True)
        idx = torch.as_tensor(info["index"])
        step = resumed_aug.engine.step
        again = resumed_aug(data[idx].clone())
        assert torch.equal(batch["pixels"], again["pixels"]), f"step {step}"
        assert torch.equal(batch["next", "pixels"], again["next", "pixels"])


def test_state_dict_restores_share():
    saved = Augment(obsaug.Engine(shift_config(seed=9)), share=True)
    saved(transitions(4))
    resumed = Augment(obsaug.Engine(shift_config(seed=9)))
    resumed.load_state_dict(saved.state_dict())
    assert resumed.share is True and resumed.engine.step == 1
    with pytest.raises(ValueError, match="'share' must be a bool, got 1"):
        resumed.set_extra_state({"engine": saved.engine.state_dict(), "share": 1})


def test_an_engine_reusing_its_outputs_gives_each_key_its_own_tensor():
    eng = obsaug.Engine(shift_config(seed=5), reuse_output=True)
    twin = obsaug.Engine(shift_config(seed=5))
    data = transitions(8)
    out = Augment(eng)(data.clone())
    assert torch.equal(out["pixels"], twin.augment(data["pixels"], step=0))
    assert torch.equal(out["next", "pixels"], twin.augment(data["next", "pixels"], step=1))
    again = Augment(eng)(data.clone())
    assert torch.equal(out["pixels"], twin.augment(data["pixels"], step=0)), "overwritten"
    assert again["pixels"].data_ptr() != out["pixels"].data_ptr()


def test_leading_batch_dims_are_flattened_and_restored():
    eng, twin = obsaug.Engine(shift_config()), obsaug.Engine(shift_config())
    x = transitions(12)["pixels"].reshape(3, 4, S * C, H, H)
    out = Augment(eng, in_keys=["pixels"])(TensorDict({"pixels": x}, batch_size=[3, 4]))
    assert out["pixels"].shape == x.shape
    assert torch.equal(out["pixels"].reshape(12, S * C, H, H),
                       twin.augment(x.reshape(12, S * C, H, H), step=0))


def test_bad_arguments():
    eng = obsaug.Engine(shift_config())
    with pytest.raises(TypeError, match="obsaug.Engine"):
        Augment(lambda x: x)
    with pytest.raises(TypeError, match="share must be a bool"):
        Augment(eng, share=1)
    with pytest.raises(ValueError, match="one key per in_key"):
        Augment(eng, in_keys=["a", "b"], out_keys=["c"])
    aug = Augment(eng, in_keys=["pixels"])
    with pytest.raises(KeyError, match="'pixels' not found"):
        aug(TensorDict({"other": torch.zeros(2, 9, H, H)}, batch_size=[2]))
    with pytest.raises(ValueError, match=r"on meta but the engine augments on cpu"):
        aug(TensorDict({"pixels": torch.zeros(2, 9, H, H, device="meta")}, batch_size=[2]))
    with pytest.raises(ValueError, match=r"\[\.\.\., S\*C, H, W\]"):
        aug(TensorDict({"pixels": torch.zeros(2, 9)}, batch_size=[2]))


@pytest.mark.skipif(not torch.cuda.is_available() or not obsaug.built_with_cuda,
                    reason="needs a CUDA GPU and a CUDA build")
def test_cuda_tensordicts_match_cpu():
    cpu_eng = obsaug.Engine(shift_config(seed=2))
    cuda_eng = obsaug.Engine(shift_config(seed=2, device="cuda"))
    data = transitions(24)
    rb = ReplayBuffer(storage=LazyTensorStorage(32, device="cuda"), batch_size=8,
                      transform=Augment(cuda_eng))
    rb.extend(data.to("cuda"))
    batch, info = rb.sample(return_info=True)
    idx = torch.as_tensor(info["index"]).cpu()
    assert batch["pixels"].is_cuda
    assert torch.equal(batch["pixels"].cpu(), cpu_eng.augment(data["pixels"][idx], step=0))
    assert torch.equal(batch["next", "pixels"].cpu(),
                       cpu_eng.augment(data["next", "pixels"][idx], step=1))


# --- float 0..1 observations (ToTensorImage's) and devices -----------------------------

def jitter_config(**kw):
    """A pipeline whose result depends on the value range (color_jitter), no photos."""
    return dict(shift_config(), pipeline=[{"op": "color_jitter"}], **kw)


def unit_transitions(n, seed=0):
    data = transitions(n, torch.float32, seed)
    for key in ("pixels", ("next", "pixels")):
        data.set(key, data.get(key) / 255.0)   # what ToTensorImage gives
    return data


def test_float_0_1_observations_are_refused_then_scaled_with_input_range():
    data = unit_transitions(16)
    rb = ReplayBuffer(storage=LazyTensorStorage(32), batch_size=8,
                      transform=Augment(obsaug.Engine(jitter_config())))
    rb.extend(data)
    with pytest.raises(ValueError, match=r"float observations are 0\.\.255.*input_range=\(0, 1\)"):
        rb.sample()
    eng, twin = obsaug.Engine(jitter_config(seed=4)), obsaug.Engine(jitter_config(seed=4))
    augment = Augment(eng, input_range=(0, 1))
    assert "input_range=(0, 1)" in repr(augment)
    out = augment(data[:4].clone())
    assert out["pixels"].max() <= 1.0 and out["pixels"].dtype == torch.float32
    assert torch.equal(out["pixels"], twin.augment(data["pixels"][:4] * 255, step=0) / 255)
    with pytest.raises(ValueError, match="input_range must be None"):
        Augment(eng, input_range=(0, 10))


def test_a_shift_takes_0_1_observations_as_they_are():
    out = Augment(obsaug.Engine(shift_config()))(unit_transitions(4))
    assert out["pixels"].max() <= 1.0


def test_to_keeps_the_engine_on_its_device_and_copies_keep_input_range():
    import copy
    eng = obsaug.Engine(shift_config())
    augment = Augment(eng, input_range=(0, 1))
    assert augment.to("cpu").engine is eng
    assert augment.to(torch.float64).engine is eng   # no device: nothing to move
    assert copy.deepcopy(augment).input_range == (0, 1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_to_a_device_gives_the_transform_an_engine_there():
    eng = obsaug.Engine(shift_config(seed=7))
    eng.augment(transitions(2)["pixels"])              # step 1
    augment = Augment(eng).to("cuda")
    assert augment.engine is not eng and augment.engine.device.type == "cuda"
    assert augment.engine.step == eng.step == 1 and eng.device.type == "cpu"
    out = augment(transitions(4).to("cuda"))
    assert out["pixels"].device.type == "cuda"


def test_to_another_device_rebuilds_the_engine_with_its_state(monkeypatch):
    """The move, seen on the CPU: with the devices taken as different, .to builds a new
    engine from the config and state (same seed, step, pipeline) and leaves the given one."""
    import obsaug.torchrl as otr
    eng, twin = obsaug.Engine(shift_config(seed=5)), obsaug.Engine(shift_config(seed=5))
    data = transitions(6)
    eng.augment(data["pixels"])
    twin.augment(data["pixels"])
    with monkeypatch.context() as patched:
        patched.setattr(otr, "same_device", lambda a, b: False)
        augment = Augment(eng).to("cpu")
    assert augment.engine is not eng and not eng.closed
    assert augment.engine.step == 1 and augment.engine.config == eng.config
    out = augment(data.clone())
    assert torch.equal(out["pixels"], twin.augment(data["pixels"], step=1))
