"""augment(ops=[...]) equals the single ops applied one after another (op k uses op_index k).

(DESIGN.md's "one fused pass" claim is about memory traffic and is not testable here.)
"""
import contextlib

import pytest
import torch

import obsaug
import reference as R
from conftest import random_obs, random_pool

ops = obsaug.ops
SEED, STEP = 99, 2**40 + 3
H, W = 16, 15

SHIFT = {"op": "shift", "pad": 4}
SHIFT_Z = {"op": "shift", "pad": 3, "padding": "zeros"}
OVERLAY = {"op": "overlay", "alpha": 0.5}
OVERLAY_R = {"op": "overlay", "alpha": 0.1, "alpha_max": 0.9}
OVERLAY_PF = {"op": "overlay", "alpha": 0.3, "alpha_max": 0.6, "per_frame": True}
CROP = {"op": "crop", "size": (12, 11)}

# (name, ops, pool image size)
PIPELINES = [
    ("shift_overlay", [SHIFT, OVERLAY], (H, W)),
    ("overlay_shift", [OVERLAY, SHIFT], (H, W)),
    ("crop_shift_overlay", [CROP, SHIFT, OVERLAY_R], (12, 11)),
    ("shiftzeros_overlay", [SHIFT_Z, OVERLAY], (H, W)),
    ("overlay_shiftzeros_overlay", [OVERLAY, SHIFT_Z, OVERLAY_R], (H, W)),
    ("overlay_crop_shiftzeros", [OVERLAY_PF, CROP, SHIFT_Z], (H, W)),
    ("shift_shiftzeros_crop_shift", [SHIFT, SHIFT_Z, CROP, {"op": "shift", "pad": 2}], (H, W)),
    ("shiftzeros_overlaypf_shift_overlay", [SHIFT_Z, OVERLAY_PF, SHIFT, OVERLAY], (H, W)),
    ("centercrop_overlay", [{"op": "crop", "size": 10, "center": True}, OVERLAY_R], (10, 10)),
]


def sequential(obs, pool, pipeline, seed, step):
    """The library's single ops, one after another, op_index = position."""
    v = obs
    for k, op in enumerate(pipeline):
        kw = {key: val for key, val in op.items() if key != "op"}
        if op["op"] == "shift":
            v = ops.shift(v, seed=seed, step=step, op_index=k, **kw)
        elif op["op"] == "crop":
            v = ops.crop(v, seed=seed, step=step, op_index=k, **kw)
        else:
            v = ops.overlay(v, pool, seed=seed, step=step, op_index=k, **kw)
    return v


def inputs(pool_hw, dtype, c=3, s=3, b=12):
    return random_obs((b, s * c, H, W), dtype, seed=7), random_pool(6, c, *pool_hw, seed=8)


@pytest.mark.parametrize("name,pipeline,pool_hw", PIPELINES, ids=[p[0] for p in PIPELINES])
@pytest.mark.parametrize("c", [1, 3])
def test_augment_equals_sequential_uint8(name, pipeline, pool_hw, c):
    x, pool = inputs(pool_hw, torch.uint8, c=c)
    fused = ops.augment(x, pool, ops=pipeline, seed=SEED, step=STEP)
    seq = sequential(x, pool, pipeline, SEED, STEP)
    assert fused.shape == seq.shape
    assert torch.equal(fused, seq), f"{(fused.int() - seq.int()).abs().max()} max diff"


@pytest.mark.parametrize("name,pipeline,pool_hw", PIPELINES, ids=[p[0] for p in PIPELINES])
def test_augment_equals_sequential_float(name, pipeline, pool_hw):
    x, pool = inputs(pool_hw, torch.float32)
    fused = ops.augment(x, pool, ops=pipeline, seed=SEED, step=STEP)
    assert torch.equal(fused, sequential(x, pool, pipeline, SEED, STEP))


@pytest.mark.parametrize("name,pipeline,pool_hw", PIPELINES, ids=[p[0] for p in PIPELINES])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_augment_equals_reference(name, pipeline, pool_hw, dtype):
    x, pool = inputs(pool_hw, dtype)
    fused = ops.augment(x, pool, ops=pipeline, seed=SEED, step=STEP)
    want = R.augment(x, pool, ops=pipeline, seed=SEED, step=STEP)
    assert torch.equal(fused, want)


@pytest.mark.parametrize("name,pipeline,pool_hw", PIPELINES[:5], ids=[p[0] for p in PIPELINES[:5]])
def test_augment_float_output_equals_reference(name, pipeline, pool_hw):
    x, pool = inputs(pool_hw, torch.uint8)
    got = ops.augment(x, pool, ops=pipeline, seed=SEED, step=STEP, out_dtype=torch.float32,
                      scale=1 / 255, bias=-0.5)
    want = R.augment(x, pool, ops=pipeline, seed=SEED, step=STEP, out_dtype=torch.float32,
                     scale=1 / 255, bias=-0.5)
    assert torch.equal(got, want)


def test_order_matters():
    x, pool = inputs((H, W), torch.uint8)
    a = ops.augment(x, pool, ops=[SHIFT, OVERLAY], seed=SEED, step=STEP)
    b = ops.augment(x, pool, ops=[OVERLAY, SHIFT], seed=SEED, step=STEP)
    assert not torch.equal(a, b)


def test_single_op_pipeline_equals_op():
    x, pool = inputs((H, W), torch.uint8)
    assert torch.equal(ops.augment(x, None, ops=[SHIFT_Z], seed=SEED, step=STEP),
                       ops.shift(x, seed=SEED, step=STEP, pad=3, padding="zeros"))
    assert torch.equal(ops.augment(x, None, ops=[CROP], seed=SEED, step=STEP),
                       ops.crop(x, seed=SEED, step=STEP, size=(12, 11)))
    assert torch.equal(ops.augment(x, pool, ops=[OVERLAY_PF], seed=SEED, step=STEP),
                       ops.overlay(x, pool, seed=SEED, step=STEP, alpha=0.3, alpha_max=0.6,
                                   per_frame=True))


def test_empty_pipeline_is_identity():
    x, _ = inputs((H, W), torch.uint8)
    assert torch.equal(ops.augment(x, None, ops=[], seed=SEED, step=STEP), x)
    before = x.clone()
    assert ops.augment(x, None, ops=[], seed=SEED, step=STEP, inplace=True) is x
    assert torch.equal(x, before)


@contextlib.contextmanager
def torch_threads(n):
    """torch.set_num_threads(n) for the block, the previous count restored after."""
    saved = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
@pytest.mark.parametrize("batch,h,w,threads",
                         [(7, 17, 23, 1), (300, 84, 84, 2), (128, 84, 84, 1), (128, 84, 84, 2)])
def test_empty_pipeline_gather_is_indexing(dtype, batch, h, w, threads):
    # With no ops a gather is one copy per plane (a replay buffer's sample
    # without augmentation); at 300 x 9 planes of 84 x 84 two threads share it.
    # With uint8 at 128 x 9 planes (8.1 MB) on a 32 MiB cache, one thread
    # streams it (kernels/streaming_stores.h) and two do not.
    g = torch.Generator().manual_seed(5)
    storage = torch.randint(0, 256, (40, 3, h, w), generator=g).to(dtype)
    idx = torch.randint(0, 40, (batch, 3), generator=g)
    want = storage[idx].reshape(batch, 9, h, w)
    with torch_threads(threads):
        assert torch.equal(ops.gather_augment(storage, idx, ops=[], seed=SEED, step=STEP), want)
        out = torch.full_like(want, 7)
        assert ops.gather_augment(storage, idx, ops=[], seed=SEED, step=STEP, out=out) is out
        assert torch.equal(out, want)
        # an affine output is no copy: it still goes through the per-pixel path
        scaled = ops.gather_augment(storage, idx, ops=[], seed=SEED, step=STEP,
                                    out_dtype=torch.float32, scale=0.5, bias=-1.0)
        assert torch.equal(scaled, want.float() * 0.5 - 1.0)


@pytest.mark.parametrize("pipeline", [
    [{"op": "shift", "pad": 4}],
    [{"op": "shift", "pad": 4}, {"op": "flip", "p": 0.5}],
])
def test_float_moves_same_bits_streamed_or_not(pipeline):
    # At B = 32 (8.1 MB of float32) on a 32 MiB cache, one thread streams
    # the planes straight from the input (kernels/streaming_stores.h), a
    # flipped sample's built in scratch, and two threads write them all with
    # plain stores. The bits are those of the uint8 path, converted.
    g = torch.Generator().manual_seed(11)
    x8 = torch.randint(0, 256, (32, 9, 84, 84), generator=g, dtype=torch.uint8)
    want = ops.augment(x8, None, ops=pipeline, seed=SEED, step=STEP).float()
    x = x8.float()
    for threads in (1, 2):
        with torch_threads(threads):
            assert torch.equal(ops.augment(x, None, ops=pipeline, seed=SEED, step=STEP), want)
            out = torch.full_like(x, -1.0)
            ops.augment(x, None, ops=pipeline, seed=SEED, step=STEP, out=out)
            assert torch.equal(out, want)


def test_same_op_twice_draws_independently():
    # [shift, shift] uses op_index 0 and 1: not the same shift applied twice
    x, _ = inputs((H, W), torch.uint8, b=32)
    two = ops.augment(x, None, ops=[SHIFT, SHIFT], seed=SEED, step=STEP)
    once = ops.shift(x, seed=SEED, step=STEP, pad=4)
    assert not torch.equal(two, ops.shift(once, seed=SEED, step=STEP, pad=4))
    assert torch.equal(two, ops.shift(once, seed=SEED, step=STEP, pad=4, op_index=1))
