"""obsaug.ops.gather_augment(sample_ids=...): row i draws as sample sample_ids[i].

The rows of a call with sample_ids = a subset or permutation of 0..B-1 must
equal those rows of the call on the whole batch, bit for bit, for uint8 and
float32 storage, with and without overlay (per sample and per frame) and
with ops of the second family (the per-frame path, random_conv's weights),
on the CPU and (where present) on CUDA; ids beyond the batch are counter
words like any other (a requester's b_global on another rank).
"""
import pytest
import torch

from obsaug import ops

from conftest import HAS_CUDA, needs_cuda, random_obs, random_pool

SEED, STEP = 11, 5
PIPES = {
    "shift": [{"op": "shift", "pad": 2}],
    "shift_overlay": [{"op": "shift", "pad": 2}, {"op": "overlay", "alpha": 0.3,
                                                  "alpha_max": 0.7}],
    "overlay_per_frame_crop": [{"op": "overlay", "alpha": 0.5, "per_frame": True},
                               {"op": "crop", "size": 10}],
    "second_family": [{"op": "flip", "p": 0.5}, {"op": "cutout", "min": 2, "max": 4},
                      {"op": "color_jitter"}, {"op": "random_conv", "activation": "none"}],
}
DEVICES = ["cpu", pytest.param("cuda", marks=needs_cuda)]


def call(storage, indices, pool, pipe, device, **kw):
    pool = None if pool is None else pool.to(device)
    return ops.gather_augment(storage.to(device), indices.to(device), pool, ops=PIPES[pipe],
                              seed=SEED, step=STEP, **kw)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
@pytest.mark.parametrize("pipe", list(PIPES))
def test_rows_by_sample_id_equal_rows_of_the_whole_call(pipe, dtype, device):
    storage = random_obs((30, 3, 12, 12), dtype, seed=3)
    pool = random_pool(7, 3, 12, 12, seed=4) if "overlay" in pipe else None
    batch = 9
    indices = torch.randint(0, 30, (batch, 3), generator=torch.Generator().manual_seed(8))
    whole = call(storage, indices, pool, pipe, device)
    for ids in ([4, 0, 8, 8, 2], list(range(batch))[::-1], [7]):
        ids_t = torch.tensor(ids, dtype=torch.int64)
        got = call(storage, indices[ids_t], pool, pipe, device, sample_ids=ids_t.to(device))
        assert torch.equal(got.cpu(), whole.cpu()[ids_t]), ids
    if dtype == torch.uint8:  # the fused affine output too
        kw = dict(out_dtype=torch.float32, scale=1 / 255, bias=-0.5)
        whole_f = call(storage, indices, pool, pipe, device, **kw)
        ids_t = torch.tensor([5, 1, 3])
        got = call(storage, indices[ids_t], pool, pipe, device, sample_ids=ids_t.to(device), **kw)
        assert torch.equal(got.cpu(), whole_f.cpu()[ids_t])


def test_large_sample_ids_equal_the_rows_of_a_larger_batch():
    # id 40 of a call equals row 40 of the call on 41 rows: ids are counter words.
    storage = random_obs((50, 3, 8, 8), seed=5)
    indices = torch.arange(41 * 2).remainder(50).view(41, 2)
    whole = ops.gather_augment(storage, indices, ops=PIPES["shift"], seed=SEED, step=STEP)
    got = ops.gather_augment(storage, indices[[40, 17]], ops=PIPES["shift"], seed=SEED,
                             step=STEP, sample_ids=torch.tensor([40, 17]))
    assert torch.equal(got, whole[[40, 17]])
    # and they differ from rows 0 and 1 (the ids are not ignored)
    plain = ops.gather_augment(storage, indices[[40, 17]], ops=PIPES["shift"], seed=SEED,
                               step=STEP)
    assert not torch.equal(got, plain)


@pytest.mark.parametrize("ids, message", [
    (torch.tensor([0, 1 << 32]), r"sample_ids must lie in \[0, 2\^32\).*4294967296"),
    (torch.tensor([-1, 0]), r"sample_ids must lie in \[0, 2\^32\).*-1"),
    (torch.tensor([0, 1, 2]), r"sample_ids must be int64 \[B\] with B = 2"),
    (torch.tensor([[0, 1]]), r"sample_ids must be int64 \[B\] with B = 2"),
])
def test_bad_sample_ids_are_value_errors(ids, message):
    storage = random_obs((4, 3, 8, 8), seed=1)
    with pytest.raises(ValueError, match=message):
        ops.gather_augment(storage, torch.tensor([[0], [1]]), ops=PIPES["shift"], seed=0,
                           step=0, sample_ids=ids)


def test_sample_ids_of_another_dtype_are_a_type_error():
    storage = random_obs((4, 3, 8, 8), seed=1)
    with pytest.raises(TypeError, match=r"sample_ids must be int64 \[B\]"):
        ops.gather_augment(storage, torch.tensor([[0], [1]]), ops=PIPES["shift"], seed=0,
                           step=0, sample_ids=torch.tensor([0, 1], dtype=torch.int32))
