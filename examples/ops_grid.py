"""One row per op on real DMControl frames: docs/img/ops_grid.png (docs/ops.md).

    PYTHONPATH=python .venv/bin/python examples/ops_grid.py [--out docs/img/ops_grid.png]

The frames are real dm_control renders without needing dm_control: the six
stacks of 3 RGB 84x84 frames (cartpole/swingup and walker/walk) that
examples/fill_replay.py drew into docs/img/preview_real.png, cut back out of
that PNG (lossless). Each row applies one op (probabilities set to 1 so that
every sample shows it) or one preset to the whole batch in one call, seed 0;
each column is one sample, shown by its newest frame. Parameters differ per
sample and are shared by its stacked frames.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import obsaug
except ImportError:  # a source checkout without the development .pth
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import obsaug

SOURCE = os.path.join(ROOT, "docs", "img", "preview_real.png")
# preview_real.png's layout: stacks of 3 frames 84x84 at x = 4, 90, 176, rows at these y
STACK_ROWS = (32, 120, 208, 312, 400, 488)   # cartpole/swingup x3, walker/walk x3
FRAME_X = (4, 90, 176)

ROWS = [  # (label, pipeline); None: the original
    ("original", None),
    ("flip", [{"op": "flip", "p": 1.0}]),
    ("flip vertical", [{"op": "flip", "p": 1.0, "axis": "vertical"}]),
    ("rotate", [{"op": "rotate", "p": 1.0}]),
    ("translate 100", [{"op": "translate", "size": 100}]),
    ("cutout 10..30", [{"op": "cutout"}]),
    ("cutout color", [{"op": "cutout", "fill": "color"}]),
    ("grayscale", [{"op": "grayscale"}]),
    ("color_jitter", [{"op": "color_jitter"}]),
    ("random_conv", [{"op": "random_conv"}]),
    ("random_conv RAD", [{"op": "random_conv", "init": "xavier", "padding": "zeros",
                          "activation": "none"}]),
    ("svea_conv.yaml", "svea_conv.yaml"),
    ("rad.yaml", "rad.yaml"),
]


def real_stacks() -> torch.Tensor:
    """[6, 9, 84, 84] uint8: the stacks shown in preview_real.png."""
    from PIL import Image
    img = np.asarray(Image.open(SOURCE).convert("RGB"))
    stacks = [np.concatenate([img[y:y + 84, x:x + 84].transpose(2, 0, 1) for x in FRAME_X])
              for y in STACK_ROWS]
    return torch.from_numpy(np.stack(stacks)).contiguous()


def preset_pipeline(name: str):
    """The pipeline of configs/<name> (read with the Engine's own loader)."""
    with obsaug.Engine(os.path.join(ROOT, "configs", name)) as engine:
        return [{k: v for k, v in op.items()} for op in engine.config["pipeline"]], \
            engine.config["frames"]


def apply(obs: torch.Tensor, spec) -> torch.Tensor:
    if spec is None:
        return obs
    if isinstance(spec, str):
        ops, frames = preset_pipeline(spec)
        if (frames["height"], frames["width"]) != tuple(obs.shape[-2:]):  # rad.yaml: 100x100
            obs = F.interpolate(obs.float(), size=(frames["height"], frames["width"]),
                                mode="bilinear", align_corners=False).round().clamp(0, 255)
            obs = obs.to(torch.uint8)
        return obsaug.ops.augment(obs, ops=ops, seed=0, step=1)
    return obsaug.ops.augment(obs, ops=spec, seed=0, step=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "ops_grid.png"))
    args = p.parse_args()
    from PIL import Image, ImageDraw

    obs = real_stacks()
    results = [(label, apply(obs, spec)) for label, spec in ROWS]
    cell = max(max(r.shape[-2], r.shape[-1]) for _, r in results)
    label_w, gap = 104, 4
    width = label_w + obs.shape[0] * (cell + gap)
    height = len(results) * (cell + gap) + gap
    canvas = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(canvas)
    for row, (label, out) in enumerate(results):
        top = gap + row * (cell + gap)
        draw.text((4, top + cell // 2 - 6), label, fill="black")
        newest = out[:, -3:].permute(0, 2, 3, 1).numpy()  # [B, H, W, 3]
        for b in range(out.shape[0]):
            h, w = newest[b].shape[:2]
            left = label_w + b * (cell + gap) + (cell - w) // 2
            canvas.paste(Image.fromarray(np.ascontiguousarray(newest[b])),
                         (left, top + (cell - h) // 2))
    out_path = pathlib.Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    canvas.save(out_path)
    print(f"wrote {out_path}: {width}x{height}, {len(results)} rows x {obs.shape[0]} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
