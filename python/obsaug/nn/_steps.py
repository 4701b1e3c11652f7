"""The one (seed, step) source of the obsaug.nn drop-ins that follow a global generator.

The functions of ``obsaug.nn`` (``random_shift``, ``random_crop``,
``random_overlay``, ``random_conv``), the torch functions of
``obsaug.nn.rad`` and ``RandomShift`` modules built without a seed draw
their parameters as the upstream code does, from torch's default generator:
each call takes one integer ``d`` in ``[0, 2**63)`` from it
(``torch.randint``, :func:`draw`) and then runs exactly the obsaug op at
``seed=SEED`` (0) and ``step=d``, obsaug's Philox stream for that call. RAD's
numpy functions take ``d`` from numpy's global generator instead
(``np.random.randint``, :func:`draw_numpy`), as RAD's own do. So:

- ``torch.manual_seed(s)`` (``np.random.seed(s)`` for RAD's numpy
  functions) makes a script repeat its augmentations, as it repeated the
  upstream functions' (which draw from the same generators);
- consecutive calls draw independent parameters (``d`` differs);
- DataLoader workers, which torch (and, since PyTorch 1.9, numpy) seeds
  apart, draw apart;
- a call consumes one value of the generator, as an upstream call consumes some.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import torch

SEED = 0  # the Philox key of every call that follows a global generator
_HIGH = 2**63 - 1  # torch.randint's high is exclusive and must fit in int64


def draw_tensor() -> torch.Tensor:
    """One draw from torch's default generator as a CPU int64 scalar tensor (what
    ``torch.ops.obsaug.counted_shift`` takes as its step; traceable)."""
    return torch.randint(0, _HIGH, (), dtype=torch.int64)


def draw() -> Tuple[int, int]:
    """This call's (seed, step): ``SEED`` and one draw from torch's default generator."""
    return SEED, int(draw_tensor().item())


def draw_numpy() -> Tuple[int, int]:
    """This call's (seed, step) for RAD's numpy functions: ``SEED`` and one draw from
    numpy's global generator (``np.random.randint``)."""
    return SEED, int(np.random.randint(0, _HIGH, dtype=np.int64))
