"""obsaug.nn: RandomShift against obsaug.ops.shift and against DrQ-v2's
RandomShiftsAug (copied below as the reference: both give integer shifts in
[-pad, pad]^2 of the replicate-padded input, every shift about equally
often), under torch.compile(fullgraph=True), and the DMControl-GB functions
inside an agent update step written against DMControl-GB's names."""

import pytest
import torch
import torch.nn.functional as F

import obsaug
import obsaug.nn as onn
from obsaug.nn import _steps

from conftest import PHOTOS, needs_engine


class DrQv2RandomShiftsAug(torch.nn.Module):
    """DrQ-v2's augmentation (facebookresearch/drqv2, drqv2.py), verbatim."""

    def __init__(self, pad):
        super().__init__()
        self.pad = pad

    def forward(self, x):
        n, c, h, w = x.size()
        assert h == w
        padding = tuple([self.pad] * 4)
        x = F.pad(x, padding, "replicate")
        eps = 1.0 / (h + 2 * self.pad)
        arange = torch.linspace(-1.0 + eps, 1.0 - eps, h + 2 * self.pad, device=x.device,
                                dtype=x.dtype)[:h]
        arange = arange.unsqueeze(0).repeat(h, 1).unsqueeze(2)
        base_grid = torch.cat([arange, arange.transpose(1, 0)], dim=2)
        base_grid = base_grid.unsqueeze(0).repeat(n, 1, 1, 1)
        shift = torch.randint(0, 2 * self.pad + 1, size=(n, 1, 1, 2), device=x.device,
                              dtype=x.dtype)
        shift *= 2.0 / (h + 2 * self.pad)
        grid = base_grid + shift
        return F.grid_sample(x, grid, padding_mode="zeros", align_corners=False)


def shift_of(out, x, pad, atol=1e-3):
    """The (dx, dy) with out == replicate-padded x shifted by it, per sample (None: no match)."""
    h, w = x.shape[-2:]
    padded = F.pad(x, (pad,) * 4, mode="replicate")
    found = []
    for b in range(x.shape[0]):
        match = None
        for dy in range(-pad, pad + 1):
            for dx in range(-pad, pad + 1):
                window = padded[b, :, pad + dy:pad + dy + h, pad + dx:pad + dx + w]
                if torch.allclose(out[b], window, atol=atol, rtol=0):
                    match = (dx, dy)
                    break
            if match:
                break
        found.append(match)
    return found


def distinct_images(n, c, h, w):
    """Float 0..255 images whose integer shifts are all distinguishable."""
    base = torch.arange(c * h * w, dtype=torch.float32).reshape(1, c, h, w)
    return (base * 7 % 251).repeat(n, 1, 1, 1) + torch.arange(n).view(n, 1, 1, 1) % 3


def test_random_shift_is_obsaug_shift_with_a_step_counter():
    aug = onn.RandomShift(pad=4, seed=5)
    x = torch.rand(6, 9, 84, 84) * 255
    for step in range(3):
        out = aug(x)
        assert out.dtype == torch.float32 and out.shape == x.shape
        assert torch.equal(out, obsaug.ops.shift(x, seed=5, step=step, pad=4))
    assert aug.step == 3
    restored = onn.RandomShift(pad=4, seed=5)
    restored.load_state_dict(aug.state_dict())
    assert restored.step == 3 and torch.equal(restored(x), aug(x))


def test_random_shift_state_carries_its_seed_and_takes_every_step():
    """A loaded module goes on with the saved module's draws, whatever seed it was
    built with; a step near 2**64 goes on as ops' steps do."""
    x = torch.rand(2, 6, 12, 12) * 255
    saved = onn.RandomShift(pad=2, seed=5)
    saved.load_state_dict({"_extra_state": {"seed": 5, "step": 2**64 - 1}})
    assert saved.step == 2**64 - 1
    assert torch.equal(saved(x), obsaug.ops.shift(x, seed=5, step=2**64 - 1, pad=2))
    assert saved.step == 0 and torch.equal(saved(x), obsaug.ops.shift(x, seed=5, step=0, pad=2))
    loaded = onn.RandomShift(pad=2, seed=0)
    loaded.load_state_dict(saved.state_dict())
    assert loaded.seed == 5 and loaded.step == 1
    assert torch.equal(loaded(x), saved(x))
    old = onn.RandomShift(pad=2, seed=9)  # a state saved before the seed was
    old.load_state_dict({"_extra_state": {"step": 4}})
    assert old.seed == 9 and old.step == 4
    default = onn.RandomShift(pad=2)  # ... by a module of the default seed then, 0
    default.load_state_dict({"_extra_state": {"step": 4}})
    assert default.seed == 0 and default.step == 4


@pytest.mark.parametrize("state,exc,words", [
    ({"step": -1}, ValueError, "RandomShift state 'step' must be in [0, 2**64), got -1"),
    ({"step": 2.0}, TypeError, "RandomShift state 'step' must be an int"),
    ({"step": True}, TypeError, "RandomShift state 'step' must be an int"),
    ({"step": "5"}, TypeError, "RandomShift state 'step' must be an int"),
    ({"step": 3, "seed": 2**64}, ValueError, "RandomShift state 'seed' must be in [0, 2**64)"),
    ({"seed": 3}, ValueError, "RandomShift state must be a dict with 'step'"),
    ({"step": None, "seed": 3}, ValueError, "'step' None (a module that follows torch's"),
    ({"step": 3, "seed": None}, ValueError, "'seed' None needs 'step' None"),
])
def test_random_shift_refuses_a_bad_state_and_keeps_its_own(state, exc, words):
    aug = onn.RandomShift(pad=2, seed=7)
    aug(torch.rand(1, 3, 8, 8))
    with pytest.raises(exc) as err:
        aug.load_state_dict({"_extra_state": state})
    assert words in str(err.value)
    assert aug.seed == 7 and aug.step == 1


def test_random_shift_without_a_seed_follows_torchs_generator():
    """As DrQ-v2's RandomShiftsAug (torch.randint per call): torch.manual_seed repeats a
    module built without a seed, each call being ops.shift at seed 0 and one
    torch.randint draw; its state says so and loads into a seeded module."""
    before = torch.initial_seed()
    try:
        x = distinct_images(4, 9, 16, 16)
        aug = onn.RandomShift(pad=3)
        assert aug.seed is None and aug.step is None and "seed=None" in repr(aug)
        torch.manual_seed(123)
        first = aug(x)
        torch.manual_seed(123)
        again = aug(x)
        assert torch.equal(first, again)
        torch.manual_seed(123)
        seed, step = _steps.draw()
        assert (seed, torch.equal(first, obsaug.ops.shift(x, seed=0, step=step, pad=3))) == \
            (0, True)
        assert not torch.equal(aug(x), aug(x))  # consecutive calls draw apart
        assert aug.state_dict()["_extra_state"] == {"seed": None, "step": None}
        seeded = onn.RandomShift(pad=3, seed=8)
        assert seeded.seed == 8
        seeded.load_state_dict(aug.state_dict())
        assert seeded.seed is None
        torch.manual_seed(123)
        assert torch.equal(seeded(x), first)
    finally:
        torch.manual_seed(before)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_random_shift_takes_drqv2s_other_float_dtypes_exactly(dtype):
    """DrQ-v2's module takes any float dtype; these are shifted as their bytes: the
    same shift as float32's, every value kept bit for bit, the dtype returned."""
    x = (distinct_images(4, 9, 20, 20).double() + 0.123456789).to(dtype)  # float64's own bits
    aug = onn.RandomShift(pad=2, seed=5)
    out = aug(x)
    assert out.dtype == dtype and out.shape == x.shape
    want = obsaug.ops.shift(x.float(), seed=5, step=0, pad=2)
    assert torch.equal(out.float(), want)
    assert None not in shift_of(out.double(), x.double(), 2, atol=0)
    with pytest.raises(TypeError, match="uint8, float32, float64, float16 or bfloat16"):
        aug(torch.zeros(2, 3, 8, 8, dtype=torch.int32))


def test_random_shift_refuses_a_channels_last_batch():
    aug = onn.RandomShift(pad=4, seed=1)
    with pytest.raises(ValueError, match=r"looks channels-last.*x\.permute\(0, 3, 1, 2\)"):
        aug(torch.rand(2, 84, 84, 9) * 255)
    assert aug.step == 0
    assert aug(torch.rand(2, 9, 84, 84)).shape == (2, 9, 84, 84)


def test_random_shift_keeps_its_count_when_the_input_is_rejected():
    aug = onn.RandomShift(pad=4, seed=3)
    x = torch.rand(2, 9, 84, 84) * 255
    aug(x)
    with pytest.raises(ValueError, match="4 dims"):
        aug(x[0])
    with pytest.raises(ValueError, match="pad"):
        onn.RandomShift(pad=-1)
    assert aug.step == 1
    assert torch.equal(aug(x), obsaug.ops.shift(x, seed=3, step=1, pad=4))


def test_random_shift_from_several_threads_uses_every_step_once():
    """Calls from several threads (the op releases the GIL) each take their own step:
    the outputs are ops.shift at steps 0..N-1, each once."""
    import threading
    aug = onn.RandomShift(pad=4, seed=7)
    x = distinct_images(16, 9, 32, 32)
    outs, lock = [], threading.Lock()

    def work():
        for _ in range(15):
            out = aug(x)
            with lock:
                outs.append(out)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert aug.step == 60
    want = [obsaug.ops.shift(x, seed=7, step=s, pad=4) for s in range(60)]
    used = sorted(next(s for s, w in enumerate(want) if torch.equal(o, w)) for o in outs)
    assert used == list(range(60))


@pytest.mark.parametrize("seed", [2**63, 2**64 - 1])
def test_random_shift_takes_every_seed_ops_shift_takes(seed):
    x = torch.rand(2, 9, 16, 16) * 255
    aug = onn.RandomShift(pad=2, seed=seed)
    assert aug.seed == seed and torch.equal(aug(x), obsaug.ops.shift(x, seed=seed, step=0, pad=2))


@pytest.mark.parametrize("seed,exc,words", [(-1, ValueError, "seed must be in [0, 2**64), got -1"),
                                            (2**64, ValueError, "seed must be in [0, 2**64)"),
                                            (1.5, TypeError, "seed must be an int")])
def test_random_shift_rejects_a_seed_ops_shift_rejects(seed, exc, words):
    with pytest.raises(exc) as info:
        onn.RandomShift(pad=2, seed=seed)
    assert words in str(info.value)


def test_random_shift_seed_set_later_is_the_one_used_and_checked():
    x = torch.rand(2, 9, 16, 16) * 255
    aug = onn.RandomShift(pad=2, seed=0)
    aug.seed = 2**64 - 7
    assert aug.seed == 2**64 - 7 and "seed=18446744073709551609" in repr(aug)
    assert torch.equal(aug(x), obsaug.ops.shift(x, seed=2**64 - 7, step=0, pad=2))
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2\*\*64\), got -1"):
        aug.seed = -1
    assert aug.seed == 2**64 - 7


def test_random_shift_takes_a_whole_pad_and_rejects_any_other():
    assert onn.RandomShift(pad=3.0).pad == 3 and type(onn.RandomShift(pad=3.0).pad) is int
    for pad in (2.7, float("nan"), -1, 2**21):
        with pytest.raises(ValueError, match=r"pad must be a whole number of pixels in 0\.\.1048576"):
            onn.RandomShift(pad=pad)
    for pad in ("3", True, None):
        with pytest.raises(TypeError, match="pad must be an int"):
            onn.RandomShift(pad=pad)


def test_counted_shift_names_a_wrong_counter():
    x = torch.rand(2, 9, 84, 84)
    for step in (torch.zeros(1, dtype=torch.long), torch.zeros((), dtype=torch.int32),
                 torch.zeros((), dtype=torch.float64)):
        with pytest.raises(ValueError, match="step must be the CPU int64 scalar tensor"):
            torch.ops.obsaug.counted_shift(x, step, 0, 4)
        assert step.sum() == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8])
def test_counted_shift_passes_opcheck(dtype):
    x = (torch.rand(3, 6, 8, 9) * 255).to(dtype)
    torch.library.opcheck(torch.ops.obsaug.counted_shift.default,
                          (x, torch.tensor(5, dtype=torch.int64), 3, 2))


def test_random_shift_matches_drqv2_distribution():
    pad, n = 2, 2000
    x = distinct_images(n, 1, 10, 10)
    ours = shift_of(onn.RandomShift(pad=pad)(x), x, pad)
    torch.manual_seed(0)
    theirs = shift_of(DrQv2RandomShiftsAug(pad)(x), x, pad)
    assert None not in ours, "an output is not an integer replicate-padded shift"
    assert None not in theirs, "the DrQ-v2 reference is not an integer shift (reference broken)"
    offsets = [(dx, dy) for dy in range(-pad, pad + 1) for dx in range(-pad, pad + 1)]
    for name, found in (("obsaug", ours), ("DrQ-v2", theirs)):
        counts = [found.count(o) for o in offsets]
        # 25 offsets, 80 expected each: [40, 125] holds with overwhelming probability.
        assert min(counts) >= 40 and max(counts) <= 125, (name, counts)


def test_random_shift_non_square_and_uint8():
    aug = onn.RandomShift(pad=3)
    x = distinct_images(8, 3, 12, 20)
    assert None not in shift_of(aug(x), x, 3)
    u = torch.randint(0, 256, (4, 9, 12, 20), dtype=torch.uint8)
    assert aug(u).dtype == torch.uint8


def test_random_shift_under_torch_compile_fullgraph():
    aug = onn.RandomShift(pad=4, seed=11)
    compiled = torch.compile(aug, fullgraph=True)
    x = torch.rand(4, 9, 84, 84) * 255
    outs = [compiled(x) for _ in range(12)]  # more steps than the recompile limit
    for step, out in enumerate(outs):
        assert torch.equal(out, obsaug.ops.shift(x, seed=aug.seed, step=step, pad=4))
    assert aug.step == 12


def test_random_shift_following_torch_under_torch_compile_fullgraph():
    """Compiled, the draw is inductor's (itself seeded from torch's generator), so
    torch.manual_seed repeats the compiled module too; every output is a shift."""
    compiled = torch.compile(onn.RandomShift(pad=2), fullgraph=True)
    x = distinct_images(4, 3, 12, 12)
    torch.manual_seed(9)
    first = [compiled(x) for _ in range(3)]
    torch.manual_seed(9)
    again = [compiled(x) for _ in range(3)]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert None not in shift_of(first[0], x, 2)
    assert not torch.equal(first[0], first[1])


@needs_engine
def test_dmcontrol_gb_update_step_runs_unchanged(monkeypatch):
    monkeypatch.setenv("OBSAUG_POOL_SIZE", "16")  # a quick fill for the built-in engine
    import obsaug.nn as augmentations  # where DMControl-GB has `import augmentations`

    torch.manual_seed(0)
    encoder = torch.nn.Sequential(
        torch.nn.Conv2d(9, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.LazyLinear(4))
    critic = torch.nn.Linear(4 + 2, 1)

    def update_critic(obs, action, target_q, optimizer):
        # An SVEA-style step: shifted obs and shifted+overlaid obs share the critic loss.
        obs = augmentations.random_shift(obs, pad=4)
        aug_obs = augmentations.random_overlay(obs.clone())
        obs = torch.cat([obs, aug_obs], dim=0)
        action = torch.cat([action, action], dim=0)
        target_q = torch.cat([target_q, target_q], dim=0)
        q = critic(torch.cat([encoder(obs / 255.0 - 0.5), action], dim=1))
        loss = F.mse_loss(q, target_q)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    rendered = torch.rand(8, 9, 100, 100) * 255  # float 0..255, DMControl-GB's replay format
    obs = augmentations.random_crop(rendered, size=84)
    assert obs.shape == (8, 9, 84, 84) and obs.dtype == torch.float32
    encoder(obs)  # materialise the lazy layer before building the optimizer
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(critic.parameters()), lr=1e-3)
    before = [p.detach().clone() for p in critic.parameters()]
    losses = [update_critic(obs, torch.rand(8, 2), torch.rand(8, 1), optimizer) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))
    assert any(not torch.equal(a, b) for a, b in zip(before, critic.parameters()))

    overlaid = augmentations.random_overlay(obs)
    assert overlaid.dtype == torch.float32 and overlaid.shape == obs.shape
    assert 0 <= overlaid.min() and overlaid.max() <= 255 and not torch.equal(overlaid, obs)

    # set_default_engine: the given engine decides (here alpha 1: out is the photo).
    engine = obsaug.Engine({"frames": {"height": 84, "width": 84},
                            "pipeline": [{"op": "overlay", "alpha": 1.0}],
                            "pool": {"size": 4, "sources": [PHOTOS],
                                     "refresh": {"threads": 0}}})
    augmentations.set_default_engine(engine)
    try:
        photo = augmentations.random_overlay(obs)
        assert torch.equal(photo[:, 0:3], photo[:, 3:6])  # one photo per sample, all frames
    finally:
        augmentations.set_default_engine(None)
        engine.close()


@needs_engine
def test_random_overlay_gives_the_samples_of_a_call_different_photos(monkeypatch):
    """DMControl-GB overlays a fresh photo per sample; the drop-in draws its pool without
    replacement within a call: 16 samples of a 16-photo pool see 16 different photos
    (with replacement, about 6 would repeat)."""
    monkeypatch.setenv("OBSAUG_POOL_SIZE", "16")
    torch.manual_seed(0)
    out = onn.random_overlay(torch.zeros(16, 3, 24, 24))   # 0.5 * photo
    assert len({tuple(o.flatten().tolist()) for o in out}) == 16
