"""obsaug.nn.RandomShift's outputs: each call returns a tensor nothing else
holds; the memory of an output its caller released is handed out again
(obsaug._C.OutputRecycler), and an output still held (directly, through a
view, or saved elsewhere) never is."""
import torch

import obsaug
import obsaug.nn as onn
from conftest import random_obs


def test_released_output_is_handed_out_again():
    aug = onn.RandomShift(pad=2, seed=1)
    x = random_obs((4, 6, 10, 10), torch.float32, seed=1)
    first = aug(x)
    assert torch.equal(first, obsaug.ops.shift(x, seed=1, step=0, pad=2))
    ptr = first.data_ptr()
    del first
    second = aug(x)
    assert second.data_ptr() == ptr
    assert torch.equal(second, obsaug.ops.shift(x, seed=1, step=1, pad=2))


def test_held_outputs_are_never_overwritten():
    aug = onn.RandomShift(pad=2, seed=2)
    x = random_obs((4, 6, 10, 10), torch.float32, seed=2)
    obs = aug(x)
    kept = obs.clone()
    view = aug(x)[:, :3]  # only a view of the second output survives
    next_obs = aug(x)
    assert len({obs.data_ptr(), view.data_ptr(), next_obs.data_ptr()}) == 3
    assert torch.equal(obs, kept)
    assert torch.equal(view, obsaug.ops.shift(x, seed=2, step=1, pad=2)[:, :3])
    assert torch.equal(next_obs, obsaug.ops.shift(x, seed=2, step=2, pad=2))


def test_recycler_takes_only_released_tensors_of_the_same_kind():
    cpu = torch.device("cpu")
    r = obsaug._C.OutputRecycler(2)
    a = r.take([2, 3], torch.float32, cpu)
    assert a.shape == (2, 3) and a.dtype == torch.float32 and a.is_contiguous()
    b = r.take([2, 3], torch.float32, cpu)
    assert b.data_ptr() != a.data_ptr()  # a is still held
    a_ptr = a.data_ptr()
    del a
    c = r.take([2, 3], torch.float32, cpu)
    assert c.data_ptr() == a_ptr  # a was released
    u = r.take([2, 3], torch.uint8, cpu)  # another dtype: a new tensor, b pushed out (capacity 2)
    assert u.dtype == torch.uint8 and u.data_ptr() not in (b.data_ptr(), c.data_ptr())
    del b, u
    assert r.take([2, 3], torch.uint8, cpu).dtype == torch.uint8
    c_ptr = c.data_ptr()
    del c
    assert r.take([2, 3], torch.float32, cpu).data_ptr() == c_ptr
