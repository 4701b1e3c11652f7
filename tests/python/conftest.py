"""Shared set-up for the obsaug Python tests.

The tests live in kernels/, engine/, replay/ and tools/ (mirroring the source
tree); every one of them imports its paths and seeded factories from here
(``from conftest import ROOT, random_obs``). This file makes ``import obsaug``
(the checkout's python/) and ``import reference`` (this folder) work without
PYTHONPATH. Test basenames are unique across the subfolders: pytest imports
each test file by its basename (no __init__.py files).
"""
import os
import sys

import pytest
import torch

TESTS = os.path.dirname(os.path.abspath(__file__))  # tests/python: conftest.py, reference.py
ROOT = os.path.normpath(os.path.join(TESTS, os.pardir, os.pardir))
PYDIR = os.path.join(ROOT, "python")
PHOTOS = os.path.join(ROOT, "data", "photos")
CONFIGS = os.path.join(ROOT, "configs")
ENGINE_TESTS = os.path.join(ROOT, "tests", "engine")  # pillow_compare.py
CLI = os.environ.get("OBSAUG_CLI") or os.path.join(ROOT, "build", "tools", "obsaug")

for path in (TESTS, PYDIR):
    if path not in sys.path:
        sys.path.insert(0, path)

import obsaug  # noqa: E402  (registers torch.ops.obsaug)

# Skip markers: what a test needs beyond the kernels (the native module's
# optional components, a GPU, the embedded photographs, a built tool).
HAS_CUDA = torch.cuda.is_available()
HAS_PHOTOS = os.path.isdir(PHOTOS)
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
needs_photos = pytest.mark.skipif(not HAS_PHOTOS,
                                  reason="needs data/photos (run scripts/fetch_photos.sh)")
needs_pool = pytest.mark.skipif(
    not hasattr(obsaug, "DistractorPool") or not HAS_PHOTOS,
    reason="needs obsaug.DistractorPool (TurboJPEG/libpng) and data/photos")
needs_engine = pytest.mark.skipif(
    not hasattr(obsaug, "Engine") or not HAS_PHOTOS,
    reason="needs obsaug.Engine (pool, yaml-cpp) and data/photos (scripts/fetch_photos.sh)")
needs_replay = pytest.mark.skipif(not hasattr(obsaug, "ReplayBuffer"),
                                  reason="obsaug._C built without the ReplayBuffer")
needs_cli = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"obsaug CLI not built at {CLI}")


def random_obs(shape, dtype=torch.uint8, seed=0, device="cpu"):
    """uint8 noise, or float32 in [0, 255] with non-integer values (and exact 0 / 255)."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        x = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    else:
        x = torch.rand(shape, generator=g, dtype=torch.float64) * 255.0
        x = x.to(dtype)
        flat = x.view(-1)
        if flat.numel() >= 2:
            flat[0], flat[-1] = 0.0, 255.0
    return x.to(device)


def random_pool(p, c, h, w, seed=1, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (p, c, h, w), dtype=torch.uint8, generator=g).to(device)


@pytest.fixture
def make_obs():
    return random_obs


@pytest.fixture
def make_pool():
    return random_pool
