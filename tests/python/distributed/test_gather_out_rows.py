"""Engine.gather_augment_for(..., out=, out_rows=): row b of the gathered,
augmented batch is written to out[out_rows[b]] (the sharded buffer's owners
write rows straight at the requester's draw positions). The rows equal the
ones written contiguously, the other rows of out are left alone, on both CPU
paths (fused, and per frame for pipelines with a barrier), and with no ops
(then each plane is one copy)."""
import pytest
import torch

import obsaug

PIPELINES = {
    "no_ops": [],
    "fused": [{"op": "shift", "pad": 2}, {"op": "crop", "size": 6}],
    "per_frame": [{"op": "random_conv", "init": "normal", "padding": "replicate",
                   "activation": "sigmoid"}],
}


def engine(pipeline, dtype="uint8"):
    return obsaug.Engine({"device": "cpu", "seed": 5,
                          "frames": {"stack": 3, "channels": 3, "height": 8, "width": 8},
                          "pipeline": pipeline, "output": {"dtype": dtype}})


@pytest.fixture
def storage():
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (40, 3, 8, 8), dtype=torch.uint8, generator=g)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
@pytest.mark.parametrize("path", sorted(PIPELINES))
def test_rows_land_at_out_rows_and_equal_the_contiguous_rows(storage, path, dtype):
    e = engine(PIPELINES[path], dtype)
    indices = torch.tensor([[0, 1, 2], [5, 6, 7], [9, 10, 11], [30, 31, 32], [3, 4, 5]])
    ids = torch.tensor([7, 3, 11, 12, 2])
    rows = torch.tensor([0, 1, 4, 5, 8])  # runs of consecutive rows and single rows
    want = e._native.gather_augment_for(storage, indices, 9, 4, ids)
    out = torch.full((10, *want.shape[1:]), 77, dtype=want.dtype)
    got = e._native.gather_augment_for(storage, indices, 9, 4, ids, out=out, out_rows=rows)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(out[rows], want)
    others = [r for r in range(10) if r not in rows.tolist()]
    assert bool((out[others] == 77).all()), "a row out of out_rows was written"
    e.close()


def test_out_rows_errors(storage):
    e = engine(PIPELINES["fused"])
    indices = torch.tensor([[0, 1, 2], [5, 6, 7]])
    ids = torch.tensor([0, 1])
    out = torch.empty((4, 9, 6, 6), dtype=torch.uint8)
    with pytest.raises(IndexError, match=r"out_rows\[1\] = 4 is not a row of out \[0, 4\)"):
        e._native.gather_augment_for(storage, indices, 0, 0, ids, out=out,
                                     out_rows=torch.tensor([0, 4]))
    with pytest.raises(TypeError, match="out_rows must be int64"):
        e._native.gather_augment_for(storage, indices, 0, 0, ids, out=out,
                                     out_rows=torch.tensor([0, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="one per row of indices"):
        e._native.gather_augment_for(storage, indices, 0, 0, ids, out=out,
                                     out_rows=torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="out_rows needs out"):
        e._native.gather_augment_for(storage, indices, 0, 0, ids,
                                     out_rows=torch.tensor([0, 1]))
    e.close()
