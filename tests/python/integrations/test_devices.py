"""obsaug._devices: "cuda" without an index compares equal to the current
CUDA device (0 where CUDA is not available), so an Engine or buffer that
resolved "cuda" to cuda:N at construction matches SB3's or a config's "cuda"."""
import pytest
import torch

from obsaug._devices import resolved, same_device

HERE = torch.cuda.current_device() if torch.cuda.is_available() else 0


def test_cuda_without_an_index_is_the_current_device():
    assert resolved("cuda") == torch.device("cuda", HERE)
    assert resolved(torch.device("cuda")) == torch.device("cuda", HERE)
    assert resolved("cuda:3") == torch.device("cuda", 3)
    assert resolved("cpu") == torch.device("cpu")


@pytest.mark.parametrize("a, b, same", [
    ("cuda", f"cuda:{HERE}", True),
    (torch.device("cuda"), "cuda", True),
    (f"cuda:{HERE}", torch.device("cuda", HERE), True),
    ("cuda", f"cuda:{HERE + 1}", False),
    ("cuda:0", "cuda:1", False),
    ("cpu", torch.device("cpu"), True),
    ("cpu", "cuda", False),
    ("cpu", f"cuda:{HERE}", False),
])
def test_same_device(a, b, same):
    assert same_device(a, b) is same
    assert same_device(b, a) is same
