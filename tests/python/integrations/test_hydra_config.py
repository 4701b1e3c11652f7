"""obsaug.Engine takes Hydra/OmegaConf configs (any Mapping), interpolations resolved."""
import pytest
import torch

import obsaug
from integration_helpers import needs_engine, shift_config

omegaconf = pytest.importorskip("omegaconf")
from omegaconf import OmegaConf  # noqa: E402

pytestmark = needs_engine


def test_dictconfig_builds_the_same_engine_as_the_dict():
    cfg = OmegaConf.create({"aug": shift_config(seed=4), "size": 16})
    cfg.aug.frames.height = "${size}"                 # an interpolation, resolved on access
    from_omegaconf, from_dict = obsaug.Engine(cfg.aug), obsaug.Engine(shift_config(seed=4))
    assert from_omegaconf.config == from_dict.config
    x = torch.randint(0, 256, (4, 9, 16, 16), dtype=torch.uint8)
    assert torch.equal(from_omegaconf.augment(x), from_dict.augment(x))


def test_dictconfig_errors_name_the_key_path():
    cfg = OmegaConf.create(shift_config())
    cfg.pipeline[0].pad = -1
    with pytest.raises(ValueError, match=r"pipeline\[0\]\.pad"):
        obsaug.Engine(cfg)
