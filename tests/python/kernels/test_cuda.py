"""CUDA kernels agree bit for bit with the CPU ones (DESIGN.md sections 3 and 8).

Skips cleanly without a GPU. OBSAUG_TEST_DEVICE=cpu runs the comparisons
against the CPU itself (a dry run of this file's logic on a machine without one).
"""
import os

import pytest
import torch

import obsaug
from conftest import HAS_CUDA, needs_cuda, random_obs, random_pool

ops = obsaug.ops
DEV = os.environ.get("OBSAUG_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEV.startswith("cuda") and not HAS_CUDA, reason="needs a CUDA GPU")

SEED, STEP = 0xC0FFEE, 2**63 + 17
DTYPES = [torch.uint8, torch.float32]

PIPES = {
    "shift": [{"op": "shift", "pad": 4}],
    "shiftzeros": [{"op": "shift", "pad": 6, "padding": "zeros"}],
    "overlay": [{"op": "overlay", "alpha": 0.5}],
    "overlay_range_pf": [{"op": "overlay", "alpha": 0.1, "alpha_max": 0.9, "per_frame": True}],
    "shift_overlay": [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}],
    "overlay_shiftzeros_overlay": [{"op": "overlay", "alpha": 0.3}, {"op": "shift", "pad": 3, "padding": "zeros"},
                                   {"op": "overlay", "alpha": 0.2, "alpha_max": 0.7}],
    "fullcrop_shift_overlay": [{"op": "crop", "size": "FULL"}, {"op": "shift", "pad": 2},
                               {"op": "overlay", "alpha": 0.6}],
}


def resolve(pipe, h, w):
    return [dict(op, size=(h, w)) if op.get("size") == "FULL" else op for op in pipe]


def both(fn, *tensors):
    """fn on CPU tensors and on device copies; returns (cpu result, device result on CPU)."""
    want = fn(*tensors)
    got = fn(*[t.to(DEV) for t in tensors])
    assert got.device.type == torch.device(DEV).type
    return want, got.cpu()


def assert_equal(want, got):
    """Bit for bit: float32 compared as int32 bits, so -0.0 != +0.0."""
    assert want.shape == got.shape and want.dtype == got.dtype
    bits = (lambda t: t.view(torch.int32)) if want.dtype == torch.float32 else (lambda t: t)
    assert torch.equal(bits(want.contiguous()), bits(got.contiguous())), \
        f"{(want.double() - got.double()).abs().max()} max diff, " \
        f"{(want != got).sum()} elements differ"


# ------------------------------------------------------------- single ops

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(64, 9, 84, 84), (33, 4, 83, 85), (5, 3, 17, 1), (7, 1, 1, 31)])
def test_single_ops_match_cpu(dtype, shape):
    x = random_obs(shape, dtype, seed=1)
    c = 3 if shape[1] % 3 == 0 else 1
    pool = random_pool(11, c, *shape[2:], seed=2)
    h, w = shape[2:]
    for padding in ("replicate", "zeros"):
        assert_equal(*both(lambda t: ops.shift(t, seed=SEED, step=STEP, pad=5, padding=padding), x))
    assert_equal(*both(lambda t: ops.crop(t, seed=SEED, step=STEP, size=(max(1, h - 7), max(1, w - 5))), x))
    assert_equal(*both(lambda t: ops.crop(t, seed=SEED, step=STEP, size=(max(1, h // 2), w), center=True), x))
    for kw in (dict(alpha=0.5), dict(alpha=0.0, alpha_max=1.0, per_frame=True), dict(alpha=1.0)):
        assert_equal(*both(lambda t, p: ops.overlay(t, p, seed=SEED, step=STEP, op_index=3, **kw), x, pool))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(PIPES))
@pytest.mark.parametrize("shape", [(256, 9, 84, 84), (31, 6, 83, 85)])
def test_augment_matches_cpu(dtype, name, shape):
    x = random_obs(shape, dtype, seed=3)
    pool = random_pool(17, 3, *shape[2:], seed=4)
    pipe = resolve(PIPES[name], *shape[2:])
    assert_equal(*both(lambda t, p: ops.augment(t, p, ops=pipe, seed=SEED, step=STEP), x, pool))
    assert_equal(*both(lambda t, p: ops.augment(t, p, ops=pipe, seed=SEED, step=STEP,
                                                out_dtype=torch.float32, scale=1 / 255, bias=-0.5), x, pool))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(PIPES))
@pytest.mark.parametrize("shape", [(64, 9, 84, 84), (13, 6, 83, 85), (8, 3, 256, 256)])
def test_augment_inplace_matches_cpu(dtype, name, shape):
    x = random_obs(shape, dtype, seed=5)
    pool = random_pool(9, 3, *shape[2:], seed=6)
    pipe = resolve(PIPES[name], *shape[2:])
    want = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP)
    y = x.to(DEV)
    assert ops.augment(y, pool.to(DEV), ops=pipe, seed=SEED, step=STEP, inplace=True) is y
    assert_equal(want, y.cpu())


@pytest.mark.parametrize("dtype", DTYPES)
def test_overlay_inplace_matches_cpu(dtype):
    x = random_obs((40, 9, 83, 85), dtype, seed=7)
    pool = random_pool(9, 3, 83, 85, seed=8)
    want = ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.2, alpha_max=0.8, per_frame=True)
    y = x.to(DEV)
    assert ops.overlay(y, pool.to(DEV), seed=SEED, step=STEP, alpha=0.2, alpha_max=0.8, per_frame=True,
                       inplace=True) is y
    assert_equal(want, y.cpu())


@pytest.mark.parametrize("dtype", DTYPES)
def test_large_batch(dtype):
    x = random_obs((1024, 9, 84, 84), dtype, seed=9)
    pool = random_pool(64, 3, 84, 84, seed=10)
    pipe = PIPES["shift_overlay"]
    assert_equal(*both(lambda t, p: ops.augment(t, p, ops=pipe, seed=SEED, step=STEP), x, pool))
    assert_equal(*both(lambda t: ops.crop(t, seed=SEED, step=STEP, size=76), x))


def test_big_float_frames_inplace_shift():
    # 256x256 float planes are too big to stage in shared memory: in-place shift must still be right
    x = random_obs((6, 6, 256, 256), torch.float32, seed=11)
    pool = random_pool(4, 3, 256, 256, seed=12)
    for pipe in ([{"op": "shift", "pad": 16}], [{"op": "shift", "pad": 8, "padding": "zeros"},
                                                {"op": "overlay", "alpha": 0.4}]):
        want = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP)
        y = x.to(DEV)
        ops.augment(y, pool.to(DEV), ops=pipe, seed=SEED, step=STEP, inplace=True)
        assert_equal(want, y.cpu())


@pytest.mark.parametrize("dtype", DTYPES)
def test_noncontiguous_and_misaligned(dtype):
    x = random_obs((16, 9, 83, 85), dtype, seed=13)
    pool = random_pool(5, 3, 83, 85, seed=14)
    pipe = PIPES["overlay_shiftzeros_overlay"]
    want = ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP)
    flat = torch.zeros(x.numel() + 1, dtype=dtype, device=DEV)
    misaligned = flat[1:].view(x.shape)          # contiguous, data pointer off by one element
    misaligned.copy_(x)
    views = {
        "channels_last": x.to(DEV).contiguous(memory_format=torch.channels_last),
        "transposed": x.transpose(2, 3).contiguous().to(DEV).transpose(2, 3),
        "misaligned": misaligned,
    }
    for name, v in views.items():
        assert_equal(want, ops.augment(v, pool.to(DEV), ops=pipe, seed=SEED, step=STEP).cpu())
        ops.augment(v, pool.to(DEV), ops=pipe, seed=SEED, step=STEP, inplace=True)
        assert_equal(want, v.cpu())


def test_empty_batch():
    x = torch.zeros(0, 9, 84, 84, dtype=torch.uint8, device=DEV)
    pool = random_pool(3, 3, 84, 84).to(DEV)
    out = ops.augment(x, pool, ops=PIPES["shift_overlay"], seed=SEED, step=STEP)
    assert out.shape == x.shape and out.device == x.device


def test_pool_on_another_device_is_an_error():
    if not DEV.startswith("cuda"):
        pytest.skip("needs two devices")
    x = torch.zeros(2, 9, 8, 8, dtype=torch.uint8, device=DEV)
    with pytest.raises(ValueError, match="pool must be on obs's device"):
        ops.overlay(x, random_pool(3, 3, 8, 8), seed=0, step=0)


# --------------------------------------------------- compile and CUDA graphs

@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_compile_on_cuda(dtype):
    torch._dynamo.reset()

    def f(obs, pool):
        y = ops.augment(obs, pool, ops=PIPES["shift_overlay"], seed=SEED, step=STEP)
        return ops.crop(y, seed=SEED, step=STEP + 1, size=80)

    x = random_obs((32, 9, 84, 84), dtype, seed=15).cuda()
    pool = random_pool(8, 3, 84, 84, seed=16).cuda()
    compiled = torch.compile(f, fullgraph=True)
    assert_equal(f(x, pool).cpu(), compiled(x, pool).cpu())


@needs_cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_graph_capture(dtype):
    x = random_obs((64, 9, 84, 84), dtype, seed=17).cuda()
    pool = random_pool(8, 3, 84, 84, seed=18).cuda()
    pipe = PIPES["overlay_shiftzeros_overlay"]

    def call():
        return ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP, out_dtype=torch.float32,
                           scale=1 / 255, bias=-0.5)

    eager = call()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture
        call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = call()
    graph.replay()
    torch.cuda.synchronize()
    assert_equal(eager.cpu(), static_out.cpu())

    # in place under capture: replaying on fresh data in the captured buffer
    buf = x.clone()
    with torch.cuda.stream(side):
        ops.augment(buf, pool, ops=pipe, seed=SEED, step=STEP, inplace=True)
    torch.cuda.current_stream().wait_stream(side)
    graph2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph2):
        ops.augment(buf, pool, ops=pipe, seed=SEED, step=STEP, inplace=True)
    buf.copy_(x)
    graph2.replay()
    torch.cuda.synchronize()
    assert_equal(ops.augment(x, pool, ops=pipe, seed=SEED, step=STEP).cpu(), buf.cpu())


def test_nn_random_shift_on_device_counts_on_the_host():
    import obsaug.nn as onn

    x = random_obs((8, 9, 84, 84), torch.float32, seed=19)
    aug = onn.RandomShift(pad=4, seed=SEED).to(DEV)
    for step in range(3):
        got = aug(x.to(DEV))
        assert got.device.type == torch.device(DEV).type
        assert_equal(ops.shift(x, seed=SEED, step=step, pad=4), got.cpu())
    assert aug._step.device.type == "cpu" and aug.step == 3


def test_float_bits_survive_geometric_ops():
    """-0.0 stays -0.0 on both backends (a same-dtype result is stored as is)."""
    x = torch.rand(4, 6, 17, 19) * 255
    x[:, :, ::3, ::2] = -0.0
    for fn in (lambda t: ops.shift(t, seed=SEED, step=STEP, pad=3),
               lambda t: ops.crop(t, seed=SEED, step=STEP, size=(11, 13)),
               lambda t: ops.augment(t, ops=[{"op": "shift", "pad": 2, "padding": "zeros"}],
                                     seed=SEED, step=STEP)):
        want, got = both(fn, x)
        assert_equal(want, got)
        assert (torch.signbit(want) & (want == 0)).any()


# ------------------------------------------------------------- gather + replay

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pipe", ["shift_overlay", "overlay_range_pf", "fullcrop_shift_overlay"])
def test_gather_augment_matches_cpu(dtype, pipe):
    storage = random_obs((300, 3, 84, 84), dtype=dtype, seed=21)
    pool = random_pool(13, 3, 84, 84, seed=22)
    idx = torch.randint(0, 300, (64, 3), generator=torch.Generator().manual_seed(5))
    ops_ = resolve(PIPES[pipe], 84, 84)

    def fn(s, i, p):
        return ops.gather_augment(s, i, p, ops=ops_, seed=SEED, step=STEP)

    want, got = both(fn, storage, idx, pool)
    assert_equal(want, got)
    if dtype == torch.uint8:
        want, got = both(lambda s, i, p: ops.gather_augment(
            s, i, p, ops=ops_, seed=SEED, step=STEP, out_dtype=torch.float32, scale=1 / 255,
            bias=-0.5), storage, idx, pool)
        assert_equal(want, got)


def test_gather_augment_rejects_out_of_range_indices_on_device():
    storage = random_obs((10, 3, 8, 8), seed=1).to(DEV)
    idx = torch.tensor([[0, 1, 10]], device=DEV)
    with pytest.raises(IndexError, match=r"\[0, N\)"):
        ops.gather_augment(storage, idx, ops=[], seed=1, step=0)


def _filled_buffer(device, prioritized):
    rb = obsaug.ReplayBuffer(500, (3, 16, 16), 3, (2,), device=device, n_step=3, gamma=0.9,
                             prioritized=prioritized, alpha=1.0, beta=0.5, seed=9)
    g = torch.Generator().manual_seed(3)
    for t in range(900):  # wraps the ring; episodes of 50 steps
        frame = torch.randint(0, 256, (3, 16, 16), dtype=torch.uint8, generator=g)
        if t % 50 == 0:
            rb.add_first(frame)
        else:
            rb.add(torch.rand(2, generator=g), float(t % 7), frame, terminated=t % 50 == 49)
    return rb


@pytest.mark.parametrize("prioritized", [False, True])
def test_replay_on_device_samples_what_the_cpu_buffer_samples(prioritized):
    """Uniform sampling is host-side; prioritized walks the sum tree on the device,
    with the host's arithmetic, so both pick the same slots."""
    cpu, dev = _filled_buffer("cpu", prioritized), _filled_buffer(DEV, prioritized)
    for round_ in range(5):
        a, b = cpu.sample(128), dev.sample(128)
        assert b["obs"].device.type == torch.device(DEV).type
        for key in a:
            assert torch.equal(a[key], b[key].cpu()), key
        if prioritized:
            prio = (a["indices"] % 5 + 1).double()
            cpu.update_priorities(a["indices"], prio)
            dev.update_priorities(b["indices"], prio.to(DEV))
