"""obsaug: fused observation augmentation for pixel-based RL (overlay, shift, crop).

Importing the package loads the native library, which registers the
``torch.ops.obsaug`` operators (CPU, and CUDA when built with nvcc).
"""
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


def __getattr__(name: str):
    """``obsaug.torchrl``, ``obsaug.sb3`` and ``obsaug.distributed`` load (and import
    their framework) on first use, so ``import obsaug`` imports neither torchrl nor
    stable_baselines3 nor torch.distributed."""
    if name in ("torchrl", "sb3", "distributed"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'obsaug' has no attribute {name!r}")
