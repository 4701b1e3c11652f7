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
ENGINE_TESTS = os.path.join(ROOT, "tests", "engine", "decode")  # pillow_compare.py
CLI = os.environ.get("OBSAUG_CLI") or os.path.join(ROOT, "build", "tools", "obsaug")

for path in (TESTS, PYDIR):
    if path not in sys.path:
        sys.path.insert(0, path)

import obsaug  # noqa: E402  (registers torch.ops.obsaug)

# --- what a test needs beyond the kernels ------------------------------------
# A GPU and the embedded photographs may be absent (tests skip). A component
# of the build (the native module's DistractorPool, Engine, ReplayBuffer, a
# built tool) may be absent only when the build did not require every
# component: built with OBSAUG_REQUIRE_ALL (scripts/test.sh, CI), a missing
# component fails its tests instead of skipping them.
REQUIRED_ALL = bool(getattr(obsaug._C, "required_all", False))
HAS_CUDA = torch.cuda.is_available()
HAS_PHOTOS = os.path.isdir(PHOTOS)


def pytest_configure(config):
    config.addinivalue_line("markers", "obsaug_missing(name): a required component is not built")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("obsaug_missing"):
        pytest.fail(f"obsaug was built without {mark.args[0]}, but the build required every "
                    "component (OBSAUG_REQUIRE_ALL)", pytrace=False)


def require_component(name, present=None):
    """A mark for tests that need a component of the build: ``obsaug.<name>``
    (e.g. "Engine", "DistractorPool", "ReplayBuffer"), or, with ``present``, a
    built binary. No-op when it is there; a skip when it is not and the build
    did not require every component; a failure when the build did."""
    if present is None:
        present = hasattr(obsaug, name)
    if present:
        return pytest.mark.skipif(False, reason=f"{name} is built")
    if REQUIRED_ALL:
        return pytest.mark.obsaug_missing(name)
    return pytest.mark.skip(reason=f"obsaug was built without {name}")


needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
needs_photos = pytest.mark.skipif(not HAS_PHOTOS,
                                  reason="needs data/photos (run scripts/fetch_photos.sh)")


def _component_with_photos(name):
    return needs_photos if hasattr(obsaug, name) else require_component(name)


needs_pool = _component_with_photos("DistractorPool")
needs_engine = _component_with_photos("Engine")
needs_replay = require_component("ReplayBuffer")
needs_cli = require_component(f"the obsaug CLI ({CLI})", present=os.access(CLI, os.X_OK))


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


def raises(exc, call, *words):
    """call() raises exc with every word (case-insensitive) in its message."""
    with pytest.raises(exc) as info:
        call()
    message = str(info.value).lower()
    for word in words:
        assert word.lower() in message, f"{word!r} not in {str(info.value)!r}"
    return info.value
