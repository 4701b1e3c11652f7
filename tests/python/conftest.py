"""Shared set-up for the obsaug Python tests.

Makes ``import obsaug`` (python/) and ``import reference`` (this folder) work
without PYTHONPATH, and provides seeded random observation / pool factories.
"""
import os
import sys

import pytest
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
for path in (_HERE, os.path.join(_HERE, os.pardir, os.pardir, "python")):
    path = os.path.normpath(path)
    if path not in sys.path:
        sys.path.insert(0, path)

import obsaug  # noqa: E402,F401  (registers torch.ops.obsaug)


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


# --- components of the build ------------------------------------------------
# Built with OBSAUG_REQUIRE_ALL (scripts/test.sh, CI): every component must
# be there, so a missing one fails the run instead of skipping its tests.
REQUIRED_ALL = bool(getattr(obsaug._C, "required_all", False))


def require_component(name, present=None):
    """A mark for tests that need a component of the build: ``obsaug.<name>``
    (e.g. "Engine", "DistractorPool", "ReplayBuffer"), or, with ``present``, a
    built binary. No-op when it is there; a skip when it is not and the build
    did not require every component; when the build did, a collection error
    naming it (scripts/test.sh must not pass with a component untested)."""
    if present is None:
        present = hasattr(obsaug, name)
    if present:
        return pytest.mark.skipif(False, reason=f"{name} is built")
    reason = f"obsaug was built without {name}"
    if REQUIRED_ALL:
        pytest.fail(f"{reason}, but the build required every component (OBSAUG_REQUIRE_ALL)",
                    pytrace=False)
    return pytest.mark.skip(reason=reason)
