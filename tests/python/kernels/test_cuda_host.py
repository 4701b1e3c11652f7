"""The host-side CUDA code the CPU emulation cannot reach (docs/cuda.md): each
claim of that review has a test here. Skips without a CUDA GPU; the
two-device tests skip with fewer than two."""
import os

import pytest
import torch

import obsaug
from conftest import random_obs, random_pool

ops = obsaug.ops
HAS_CUDA = torch.cuda.is_available()
pytestmark = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
two_devices = pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2,
                                 reason="needs two CUDA devices")

SO = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.3, "alpha_max": 0.9}]
PHOTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, os.pardir,
                      "data", "photos")
needs_pool = pytest.mark.skipif(not hasattr(obsaug, "DistractorPool") or not os.path.isdir(PHOTOS),
                                reason="needs the engine and data/photos")


def _bits(t):
    return t.view(torch.int32) if t.dtype == torch.float32 else t


def assert_equal(want, got):
    assert want.shape == got.shape and want.dtype == got.dtype
    assert torch.equal(_bits(want.contiguous()), _bits(got.cpu().contiguous()))


# ------------------------------------------------------------ kernels/augment.cpp

@pytest.mark.parametrize("hw", [(84, 84), (189, 256)])  # staged in place; in place from a copy
def test_augment_is_captured_in_a_cuda_graph_on_a_side_stream(hw):
    """Launches on the current stream, no host synchronisation, no allocation
    outside PyTorch's allocator: a global-mode capture fails on any of them."""
    h, w = hw
    x = random_obs((8, 6, h, w), seed=4)
    pool = random_pool(5, 3, h, w, seed=5)
    dx, dpool = x.cuda(), pool.cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        ops.augment(dx.clone(), dpool, ops=SO, seed=1, step=2, inplace=True)
    torch.cuda.current_stream().wait_stream(side)
    static = dx.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        ops.augment(static, dpool, ops=SO, seed=1, step=2, inplace=True)
        out_f32 = ops.augment(static, dpool, ops=SO, seed=1, step=3, out_dtype=torch.float32,
                              scale=1 / 255, bias=-0.5)
    fresh = random_obs((8, 6, h, w), seed=6)
    static.copy_(fresh.cuda())
    graph.replay()
    torch.cuda.synchronize()
    first = ops.augment(fresh, pool, ops=SO, seed=1, step=2)
    assert_equal(first, static)
    assert_equal(ops.augment(first, pool, ops=SO, seed=1, step=3, out_dtype=torch.float32,
                             scale=1 / 255, bias=-0.5), out_f32)


def test_augment_on_a_side_stream_is_ordered_on_that_stream():
    """Work queued on the current (side) stream is finished when that stream is."""
    x = random_obs((256, 9, 84, 84), seed=7)
    pool = random_pool(9, 3, 84, 84, seed=8)
    want = ops.augment(x, pool, ops=SO, seed=3, step=4)
    dx, dpool = x.cuda(), pool.cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = ops.augment(dx, dpool, ops=SO, seed=3, step=4)
        inplace = dx.clone()
        ops.augment(inplace, dpool, ops=SO, seed=3, step=4, inplace=True)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()  # the side stream only, not the device
    assert_equal(want, got)
    assert_equal(want, inplace)


@two_devices
def test_augment_runs_on_the_tensors_device_under_a_guard():
    """Tensors on cuda:1 while cuda:0 is current: the launch goes to cuda:1 (the
    stream and the SM count of that device) and the current device is kept."""
    x = random_obs((16, 6, 40, 44), seed=9)
    pool = random_pool(4, 3, 40, 44, seed=10)
    torch.cuda.set_device(0)
    got = ops.augment(x.to("cuda:1"), pool.to("cuda:1"), ops=SO, seed=5, step=6)
    inplace = x.to("cuda:1")
    ops.augment(inplace, pool.to("cuda:1"), ops=SO, seed=5, step=6, inplace=True)
    assert got.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    want = ops.augment(x, pool, ops=SO, seed=5, step=6)
    assert_equal(want, got)
    assert_equal(want, inplace)


# ------------------------------------------------------- engine/pool/distractor_pool.cpp

def _pool(**kwargs):
    args = dict(sources=[PHOTOS], size=6, image_size=(36, 40), channels=3, threads=2,
                progress=False, mode="sync", per_call=6, seed=11)
    args.update(kwargs)
    return obsaug.DistractorPool(**args)


@needs_pool
def test_pool_uploads_from_pinned_staging_are_complete_and_in_order():
    """Every call rewrites every slot from the staging buffers: a staging slot
    reused before its copy finished, or a copy not ordered before the next work
    on the stream, would show as an image that differs from the CPU pool's."""
    with _pool() as cpu, _pool(device="cuda") as cuda:
        side = torch.cuda.Stream()
        for _ in range(12):
            cpu.refresh()
            with torch.cuda.stream(side):  # uploads and the read on the same current stream
                cuda.refresh()
                got = cuda.images.clone()
            side.synchronize()
            assert torch.equal(cpu.images, got.cpu())


@needs_pool
@two_devices
def test_pool_on_the_second_device_uploads_there():
    torch.cuda.set_device(0)
    with _pool() as cpu, _pool(device="cuda:1") as cuda:
        for _ in range(3):
            cpu.refresh()
            cuda.refresh()
            assert cuda.images.device == torch.device("cuda:1")
            assert torch.cuda.current_device() == 0
            assert torch.equal(cpu.images, cuda.images.cpu())


# ------------------------------------------------------------------------ replay/

def _buffer(device):
    rb = obsaug.ReplayBuffer(300, (3, 8, 8), 2, (2,), device=device, n_step=2, gamma=0.9,
                             prioritized=True, alpha=1.0, beta=0.5, seed=13)
    g = torch.Generator().manual_seed(3)
    for t in range(400):
        frame = torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8, generator=g)
        if t % 40 == 0:
            rb.add_first(frame)
        else:
            rb.add(torch.rand(2, generator=g), float(t % 5), frame, terminated=t % 40 == 39)
    return rb


@pytest.mark.skipif(not hasattr(obsaug, "ReplayBuffer"), reason="built without the replay buffer")
@pytest.mark.parametrize("device", ["cuda", pytest.param("cuda:1", marks=two_devices)])
def test_prioritized_sampling_on_a_side_stream_matches_the_cpu(device):
    """The sum tree's kernels run on the current stream of the buffer's device (under
    a guard) and the result is read back after that stream: the same slots as the CPU."""
    cpu, dev = _buffer("cpu"), _buffer(device)
    torch.cuda.set_device(0)
    side = torch.cuda.Stream(device=torch.device(device))
    side.wait_stream(torch.cuda.current_stream(torch.device(device)))  # the tree's writes so far
    for round_ in range(4):
        a = cpu.sample(64)
        with torch.cuda.stream(side):
            b = dev.sample(64)
            prio = (a["indices"] % 7 + 1).double()
            dev.update_priorities(b["indices"], prio.to(device))
        cpu.update_priorities(a["indices"], prio)
        side.synchronize()
        for key in a:
            assert torch.equal(a[key], b[key].cpu()), (round_, key)
    assert torch.cuda.current_device() == 0
