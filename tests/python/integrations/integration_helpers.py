"""Helpers for the integration tests (TorchRL, SB3, Hydra/OmegaConf).

Puts examples/ on sys.path (``pixel_envs.CartPolePixels``, the numpy-drawn
pixel CartPole) and builds shift-only engines, which need no photos.
"""
import os
import sys

import pytest

import obsaug

_EXAMPLES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          os.pardir, os.pardir, os.pardir, "examples"))
if _EXAMPLES not in sys.path:
    sys.path.insert(0, _EXAMPLES)

needs_engine = pytest.mark.skipif(not hasattr(obsaug, "Engine"),
                                  reason="obsaug._C built without the Engine (yaml-cpp)")


def shift_config(stack=3, channels=3, size=16, seed=0, device="cpu", dtype="uint8", pad=4):
    """A DrQ random-shift engine config for [B, stack*channels, size, size] observations."""
    return {"device": device, "seed": seed,
            "frames": {"stack": stack, "channels": channels, "height": size, "width": size},
            "pipeline": [{"op": "shift", "pad": pad, "padding": "replicate"}],
            "output": {"dtype": dtype}}
