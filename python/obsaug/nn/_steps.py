"""The one (seed, step) source of the obsaug.nn functions.

Every function of ``obsaug.nn`` and ``obsaug.nn.rad`` that calls an
``obsaug.ops`` op draws at ``draw()``: torch's seed (``torch.initial_seed()``)
and the next step of this process-wide counter (one step per call, from 0,
thread-safe). So consecutive calls draw independent parameters; a run is
reproducible from its torch seed and call order, as the upstream functions
(which draw from torch's generator) are; runs seeded apart
(``torch.manual_seed``) get their own augmentations; and a DataLoader worker,
which torch seeds base seed + worker id, gets its own too. (``RandomShift``
modules keep their own counter; ``random_overlay``'s engines keep theirs.)
"""
from __future__ import annotations

import threading
from typing import Tuple

import torch

_lock = threading.Lock()
_next = 0


def seed() -> int:
    """The seed the functions draw with now: torch's (``torch.initial_seed()``)."""
    return torch.initial_seed()


def take() -> int:
    """The step of this call; the counter moves on by one."""
    global _next
    with _lock:
        step = _next
        _next += 1
    return step


def draw() -> Tuple[int, int]:
    """This call's (seed, step); the counter moves on by one."""
    return seed(), take()


def peek() -> int:
    """The step the next call will take (the counter does not move)."""
    with _lock:
        return _next
