"""The one (seed, step) source of the obsaug.nn functions.

Every function of ``obsaug.nn`` and ``obsaug.nn.rad`` that calls an
``obsaug.ops`` op takes the next step of this process-wide counter (one step
per call, from 0, thread-safe) with seed ``SEED``: call k of any of them is
that op at ``(SEED, k)``, so consecutive calls draw independent parameters and
a run is reproducible from its call order. (``RandomShift`` modules keep their
own counter; ``random_overlay``'s engines keep theirs.)
"""
from __future__ import annotations

import threading

SEED = 0

_lock = threading.Lock()
_next = 0


def take() -> int:
    """The step of this call; the counter moves on by one."""
    global _next
    with _lock:
        step = _next
        _next += 1
    return step


def peek() -> int:
    """The step the next call will take (the counter does not move)."""
    with _lock:
        return _next
