"""obsaug.preview(obs, engine, "grid.png") (issue 42, item 17): one's own frames
and their augmentation in the CLI's grid, written with the CLI's PNG writer
(obsaug._C.write_png), the engine's counter left where it was."""
import numpy as np
import pytest
import torch

import obsaug
from conftest import needs_engine, random_obs

pytestmark = needs_engine
PIL = pytest.importorskip("PIL.Image")


def engine_of(pipeline, channels=3, size=16, **output):
    return obsaug.Engine({"frames": {"stack": 2, "channels": channels, "height": size,
                                     "width": size},
                          "pipeline": pipeline, "output": output or {"dtype": "uint8"}})


def read(path):
    return np.asarray(PIL.open(path).convert("RGB"))


def test_preview_writes_ones_frames_beside_their_augmentation(tmp_path):
    obs = random_obs((5, 6, 16, 16), seed=1)
    with engine_of([{"op": "shift", "pad": 3}]) as engine:
        engine.augment(obs)                                  # step 1 next
        grid = obsaug.preview(obs, engine, tmp_path / "grid.png", rows=3, scale=2)
        assert engine.step == 1                              # read, not taken
        augmented = engine.augment(obs, step=1)
    png = read(tmp_path / "grid.png")
    frame, gap, group = 32, 2, 8                            # 16 px magnified 2x
    assert grid.shape == png.shape == (3 * frame + 2 * gap, 4 * frame + 2 * gap + group, 3)
    assert np.array_equal(grid.numpy(), png)
    for row in range(3):
        top = row * (frame + gap)
        for s in range(2):
            left = s * (frame + gap)
            want = obs[row, 3 * s:3 * s + 3].permute(1, 2, 0).numpy()
            assert np.array_equal(png[top:top + frame:2, left:left + frame:2], want)
            right = 2 * frame + gap + group + s * (frame + gap)
            got = png[top:top + frame:2, right:right + frame:2]
            assert np.array_equal(got, augmented[row, 3 * s:3 * s + 3].permute(1, 2, 0).numpy())


def test_preview_of_a_crop_of_float_output_and_of_gray_frames(tmp_path):
    obs = random_obs((2, 6, 16, 16), seed=2).float()
    with engine_of([{"op": "crop", "size": 10}], dtype="float32", scale=1 / 255,
                   bias=-0.5) as engine:
        grid = obsaug.preview(obs, engine, step=4, scale=1)
        out = engine.augment(obs, step=4)
    assert grid.shape == (2 * 16 + 2, 2 * 16 + 2 + 8 + 2 * 10 + 2, 3)
    shown = grid[:10, 2 * 16 + 2 + 8:2 * 16 + 2 + 8 + 10].permute(2, 0, 1)
    assert torch.equal(shown, ((out[0, :3] + 0.5) * 255).round().clamp(0, 255).to(torch.uint8))
    gray = random_obs((1, 2, 16, 16), seed=3)
    with engine_of([{"op": "flip", "p": 1.0}], channels=1) as engine:
        grid = obsaug.preview(gray, engine, tmp_path / "gray.png", scale=1)
    assert (grid[..., 0] == grid[..., 1]).all() and (grid[..., 1] == grid[..., 2]).all()
    assert torch.equal(grid[:16, :16, 0], gray[0, 0])


def test_preview_errors_name_what_is_wrong(tmp_path):
    obs = random_obs((2, 6, 16, 16))
    with engine_of([{"op": "shift"}]) as engine:
        with pytest.raises(FileNotFoundError, match="does not exist"):
            obsaug.preview(obs, engine, tmp_path / "no" / "grid.png")
        with pytest.raises(TypeError, match="engine must be an obsaug.Engine"):
            obsaug.preview(obs, "drq_shift")
        with pytest.raises(ValueError, match=r"scale must be an int in 1\.\.64"):
            obsaug.preview(obs, engine, scale=0)
        with pytest.raises(ValueError, match="obs must be a .B, S.C, H, W. tensor"):
            obsaug.preview(obs[0], engine)
        with pytest.raises(ValueError, match="obs frames must be 16x16"):
            obsaug.preview(random_obs((2, 6, 8, 8)), engine)
