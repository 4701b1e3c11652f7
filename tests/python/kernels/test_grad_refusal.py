"""Inputs that require grad: the ops have no derivative, so with grad mode on
every torch.ops.obsaug op (through its Autograd kernel, eager and under
torch.compile) refuses them with a ValueError naming the argument; under
torch.no_grad() or detached they run as before."""
import pytest
import torch

import obsaug
from conftest import random_obs, random_pool

ops = obsaug.ops


def leaf(*shape):
    return (torch.rand(shape) * 255).requires_grad_()


CALLS = {
    "shift": ("obs", lambda x, p: ops.shift(x, seed=0, step=1, pad=2)),
    "crop": ("obs", lambda x, p: ops.crop(x, seed=0, step=1, size=6)),
    "flip": ("obs", lambda x, p: ops.flip(x, seed=0, step=1, p=1.0)),
    "overlay": ("obs", lambda x, p: ops.overlay(x, p, seed=0, step=1)),
    "augment": ("obs", lambda x, p: ops.augment(x, p, ops=[{"op": "shift"}, {"op": "overlay"}],
                                                seed=0, step=1)),
    "augment out=": ("obs", lambda x, p: ops.augment(x, ops=[{"op": "shift"}], seed=0, step=1,
                                                     out=torch.empty(x.shape))),
    "gather_augment": ("storage", lambda x, p: ops.gather_augment(
        x.reshape(4, 3, 8, 8), torch.tensor([[0, 1], [2, 3]]), ops=[{"op": "shift"}], seed=0,
        step=1)),
    "RandomShift": ("obs", lambda x, p: obsaug.nn.RandomShift(2, seed=0)(x)),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_an_input_that_requires_grad_is_refused(name):
    arg, call = CALLS[name]
    with pytest.raises(ValueError, match=f"{arg} requires grad.*{arg}.detach\\(\\).*torch.no_grad"):
        call(leaf(2, 6, 8, 8), random_pool(3, 3, 8, 8, seed=1))


@pytest.mark.parametrize("name", list(CALLS))
def test_no_grad_or_detach_runs_as_before(name):
    x, p = leaf(2, 6, 8, 8), random_pool(3, 3, 8, 8, seed=1)
    call = CALLS[name][1]
    with torch.no_grad():
        under_no_grad = call(x, p)
    detached = call(x.detach(), p)
    assert not under_no_grad.requires_grad and torch.equal(under_no_grad, detached)


def test_an_out_tensor_that_requires_grad_is_refused():
    x = random_obs((2, 6, 8, 8), torch.float32, seed=2)
    with pytest.raises(ValueError, match="out requires grad"):
        ops.shift(x, seed=0, step=0, out=leaf(2, 6, 8, 8))


def test_compile_refuses_it_at_trace_time():
    torch._dynamo.reset()
    compiled = torch.compile(CALLS["shift"][1], fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError, match="obs requires grad"):
        compiled(leaf(2, 6, 8, 8), None)
    with torch.no_grad():
        x = leaf(2, 6, 8, 8)
        assert torch.equal(compiled(x, None), CALLS["shift"][1](x.detach(), None))


IN_PLACE = {
    "augment inplace": lambda x: ops.augment(x, ops=[{"op": "shift", "pad": 2}], seed=0, step=1,
                                             inplace=True),
    "overlay_": lambda x: ops.overlay(x, random_pool(3, 3, 8, 8, seed=1), seed=0, step=1,
                                      inplace=True),
    "shift out=": lambda x: ops.shift(x.clone(), seed=0, step=1, pad=2, out=x),
}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_writing_a_tensor_autograd_saved_fails_backward(name):
    """An encoder's forward saves obs; an op that then writes obs in place bumps its version,
    so backward raises instead of computing gradients from the changed obs."""
    obs = torch.rand(2, 6, 8, 8) * 255
    weight = torch.rand(4, 6, 3, 3, requires_grad=True)
    loss = torch.nn.functional.conv2d(obs, weight).sum()
    version = obs._version
    IN_PLACE[name](obs)
    assert obs._version > version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    with torch.inference_mode():
        frozen = torch.rand(2, 6, 8, 8) * 255
    IN_PLACE[name](frozen)  # no version counter to bump: still written


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_writing_under_inference_mode_still_bumps_a_normal_tensor(name):
    """torch.inference_mode() skips the Autograd key but not ADInplaceOrView, where the
    write is noted (once), as PyTorch's own in-place ops do: a saved obs written there
    still fails backward."""
    obs = torch.rand(2, 6, 8, 8) * 255
    weight = torch.rand(4, 6, 3, 3, requires_grad=True)
    loss = torch.nn.functional.conv2d(obs, weight).sum()
    version = obs._version
    with torch.inference_mode():
        IN_PLACE[name](obs)
    assert obs._version == version + 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
