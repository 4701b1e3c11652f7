"""obsaug: fused observation augmentation for pixel-based RL (overlay, shift, crop).

Importing the package loads the native library, which registers the
``torch.ops.obsaug`` operators (CPU, and CUDA when built with nvcc).
"""
import torch  # noqa: F401  (loads libtorch before the extension)

from . import _C  # noqa: F401  (registers torch.ops.obsaug.*)
from . import ops

__version__ = "0.1.0"
built_with_cuda = _C.built_with_cuda

__all__ = ["ops", "built_with_cuda", "__version__"]

# The distractor pool exists where the native module was built with the
# engine (TurboJPEG, libpng); a machine without them has the ops only.
if hasattr(_C, "DistractorPool"):
    DistractorPool = _C.DistractorPool
    DistractorPool.__module__ = "obsaug"
    __all__.append("DistractorPool")
