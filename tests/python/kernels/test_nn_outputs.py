"""Fresh outputs of obsaug.ops on the CPU (kernels/output_tensor.h): a large
one (4 MiB or more) reuses the memory of an earlier output that its caller
released, and never that of an output still held (directly or through a
view). Seen through obsaug.nn.RandomShift, whose DrQ-v2 training loop drops
both results of an update before the next."""
import torch

import obsaug
import obsaug.nn as onn
from conftest import random_obs

LARGE = (32, 9, 84, 84)  # float32: 8 MiB


def test_released_output_is_handed_out_again():
    aug = onn.RandomShift(pad=2, seed=1)
    x = random_obs(LARGE, torch.float32, seed=1)
    want = [obsaug.ops.shift(x, seed=1, step=k, pad=2) for k in range(2)]  # held throughout
    first = aug(x)
    assert torch.equal(first, want[0])
    ptr = first.data_ptr()
    del first
    second = aug(x)
    assert second.data_ptr() == ptr
    assert torch.equal(second, want[1])


def test_held_outputs_are_never_overwritten():
    aug = onn.RandomShift(pad=2, seed=2)
    x = random_obs(LARGE, torch.float32, seed=2)
    obs = aug(x)
    kept = obs.clone()
    view = aug(x)[:, :3]  # only a view of the second output survives
    next_obs = aug(x)
    assert len({obs.data_ptr(), view.data_ptr(), next_obs.data_ptr()}) == 3
    assert torch.equal(obs, kept)
    assert torch.equal(view, obsaug.ops.shift(x, seed=2, step=1, pad=2)[:, :3])
    assert torch.equal(next_obs, obsaug.ops.shift(x, seed=2, step=2, pad=2))


def test_released_memory_serves_another_op_of_the_same_size():
    x = random_obs(LARGE, torch.float32, seed=3)
    want = obsaug.ops.shift(x, seed=1, step=3)
    a = obsaug.ops.flip(x, seed=1, step=2, p=1.0)
    ptr = a.data_ptr()
    del a
    b = obsaug.ops.shift(x, seed=1, step=3)
    assert b.data_ptr() == ptr
    assert torch.equal(b, want)
