"""The presets configs/svea_conv.yaml and configs/rad.yaml load into an Engine
and run: each equals obsaug.ops.augment of its pipeline at the engine's seed
and step, and svea_conv's output is random_conv of what drq_shift.yaml gives
at the same step (SVEA's augmented view of its unaugmented one)."""
import os

import torch

import obsaug

from conftest import CONFIGS, random_obs, require_component

needs_engine = require_component("Engine")

SVEA_CONV = [{"op": "shift", "pad": 4, "padding": "replicate"},
             {"op": "random_conv", "init": "normal", "padding": "replicate",
              "activation": "sigmoid"}]
RAD = [{"op": "crop", "size": 84}, {"op": "cutout", "min": 10, "max": 29, "fill": "zeros"},
       {"op": "flip", "p": 0.2}, {"op": "rotate", "p": 0.3}, {"op": "grayscale", "p": 0.3}]


@needs_engine
def test_svea_conv_preset_is_random_conv_of_the_drq_shift():
    obs = random_obs((6, 9, 84, 84), seed=1)
    with obsaug.Engine(os.path.join(CONFIGS, "svea_conv.yaml")) as engine, \
            obsaug.Engine(os.path.join(CONFIGS, "drq_shift.yaml")) as shift:
        out = engine.augment(obs, step=5)
        shifted = shift.augment(obs, step=5)
    assert out.dtype == torch.uint8 and out.shape == obs.shape
    assert torch.equal(out, obsaug.ops.augment(obs, ops=SVEA_CONV, seed=0, step=5))
    assert torch.equal(out, obsaug.ops.random_conv(shifted, seed=0, step=5, op_index=1))


@needs_engine
def test_rad_preset_crops_100_to_84_and_runs_rads_ops():
    obs = random_obs((8, 9, 100, 100), seed=2)
    with obsaug.Engine(os.path.join(CONFIGS, "rad.yaml")) as engine:
        first = engine.augment(obs)
        second = engine.augment(obs)
    assert first.dtype == torch.uint8 and first.shape == (8, 9, 84, 84)
    assert torch.equal(first, obsaug.ops.augment(obs, ops=RAD, seed=0, step=0))
    assert torch.equal(second, obsaug.ops.augment(obs, ops=RAD, seed=0, step=1))
    assert not torch.equal(first, second)
