"""Helpers for the integration tests (TorchRL, SB3, Hydra/OmegaConf).

Puts examples/ on sys.path (``pixel_envs.CartPolePixels``, the numpy-drawn
pixel CartPole) and builds shift-only engines, which need no photos.
"""
import os
import sys


from conftest import ROOT, require_component

_EXAMPLES = os.path.join(ROOT, "examples")
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

# Shift-only engines need no photos: the Engine component alone.
needs_engine = require_component("Engine")


def shift_config(stack=3, channels=3, size=16, seed=0, device="cpu", dtype="uint8", pad=4):
    """A DrQ random-shift engine config for [B, stack*channels, size, size] observations."""
    return {"device": device, "seed": seed,
            "frames": {"stack": stack, "channels": channels, "height": size, "width": size},
            "pipeline": [{"op": "shift", "pad": pad, "padding": "replicate"}],
            "output": {"dtype": dtype}}
