"""obsaug: fused observation augmentation for pixel-based RL (overlay, shift, crop).

Importing the package loads the native library, which registers the
``torch.ops.obsaug`` operators (CPU, and CUDA when built with nvcc). A build
that skipped a component (its system library was missing and the build did
not require every component) warns here, naming what is missing and why, and
``obsaug.Engine`` (``DistractorPool``, ``ReplayBuffer``, ``preview``) then
raises AttributeError saying the same.
"""
import warnings

import torch  # noqa: F401  (loads libtorch before the extension)

from . import _C  # noqa: F401  (registers torch.ops.obsaug.*)
from . import ops
from . import nn  # (RandomShift, DMControl-GB's random_overlay / shift / crop)

__version__ = "0.1.0"
built_with_cuda = _C.built_with_cuda

__all__ = ["ops", "nn", "built_with_cuda", "__version__"]

# The distractor pool exists where the native module was built with it
# (TurboJPEG, libpng, Boost); a machine without them has the ops only.
if hasattr(_C, "DistractorPool"):
    from .pool import DistractorPool  # noqa: E402

    DistractorPool.__module__ = "obsaug"
    __all__.append("DistractorPool")

# The Engine exists where the native module was built with the pool and the
# YAML config (yaml-cpp).
if hasattr(_C, "Engine"):
    from .engine import Engine  # noqa: E402

    Engine.__module__ = "obsaug"
    __all__.append("Engine")

# The replay buffer exists where the native module was built with it.
if hasattr(_C, "ReplayBuffer"):
    from .replay import ReplayBuffer  # noqa: E402

    ReplayBuffer.__module__ = "obsaug"
    __all__.append("ReplayBuffer")

# preview writes PNGs with the CLI's writer (libpng) and augments with an Engine.
if hasattr(_C, "write_png") and hasattr(_C, "Engine"):
    from .preview import preview  # noqa: E402

    __all__.append("preview")

# What a full build has, with the native name each needs.
_COMPONENTS = {"DistractorPool": "DistractorPool", "Engine": "Engine",
               "ReplayBuffer": "ReplayBuffer", "preview": "write_png"}


def _missing_components(native=_C) -> str:
    """'' for a full build; else which of obsaug's components ``native`` (the built
    module) lacks and why (the configure's skips: the dependency and its Debian
    package), with how to build them."""
    missing = [name for name, attr in _COMPONENTS.items() if not hasattr(native, attr)]
    if not missing:
        return ""
    reasons = "; ".join(getattr(native, "skipped_components", [])) or "no reason recorded"
    return (f"obsaug was built without {', '.join(missing)}: {reasons}. Install the packages "
            "named and build again (pip install -v --no-build-isolation . in the checkout; "
            "README, 'Installing it outside the checkout')")


_MISSING = _missing_components()
if _MISSING:
    warnings.warn(_MISSING, RuntimeWarning, stacklevel=2)


def __getattr__(name: str):
    """``obsaug.torchrl``, ``obsaug.sb3`` and ``obsaug.distributed`` load (and import
    their framework) on first use, so ``import obsaug`` imports neither torchrl nor
    stable_baselines3 nor torch.distributed. A component this build lacks is an
    AttributeError saying why."""
    if name in ("torchrl", "sb3", "distributed"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    if name in _COMPONENTS and _MISSING:
        raise AttributeError(f"module 'obsaug' has no attribute {name!r}: {_MISSING}")
    raise AttributeError(f"module 'obsaug' has no attribute {name!r}")
