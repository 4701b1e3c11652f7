"""Device comparison where "cuda" without an index may meet "cuda:N".

torch.device("cuda") != torch.device("cuda:0"), yet both name the same GPU
when device 0 is current. obsaug's native objects resolve "cuda" to the
current device at construction; frameworks (SB3's get_device, a user's
config) often keep it unindexed. Compare through same_device.
"""
from typing import Union

import torch

DeviceLike = Union[str, torch.device]


def resolved(device: DeviceLike) -> torch.device:
    """``device`` with a CUDA index: an index-less "cuda" is the current CUDA
    device (0 where CUDA is not available, so that comparisons still work)."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else 0
        return torch.device("cuda", index)
    return device


def same_device(a: DeviceLike, b: DeviceLike) -> bool:
    """Whether a and b name the same device, "cuda" taken as the current one."""
    return resolved(a) == resolved(b)
