#!/usr/bin/env python3
"""Compare obsaug's decode + RandomResizedCrop + resize with Pillow's.

obsaug_decode_tool (tools/decode_tool.cpp) decodes an image through the
distractor pipeline and reports the crop box, flip and DCT scale it drew;
this module replays the same crop with PIL the way torchvision's
RandomResizedCrop does on a PIL image (crop, resize BILINEAR with
antialiasing, flip, then convert("L") for one channel) and measures the
difference. Used by tests/python/engine/test_decode_vs_pillow.py; also a CLI:

    tests/engine/decode/pillow_compare.py [--tool PATH] [--size 84x84] [--serials 4] FILE_OR_DIR...

prints the mean / max absolute difference per file with DCT scaling off
(should be ~0: the resampler is Pillow's) and on, and exits 1 when a
no-DCT mean difference exceeds 2 levels.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from PIL import Image

REPO_ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         os.pardir, os.pardir, os.pardir))
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def find_tool():
    """$OBSAUG_DECODE_TOOL, else build*/tools/obsaug_decode_tool in the repo; None if absent."""
    env = os.environ.get("OBSAUG_DECODE_TOOL")
    if env:
        return env if os.access(env, os.X_OK) else None
    candidates = [os.path.join(REPO_ROOT, "build", "tools", "obsaug_decode_tool")]
    for name in sorted(os.listdir(REPO_ROOT)):
        if name.startswith("build") and name != "build":
            candidates.append(os.path.join(REPO_ROOT, name, "tools", "obsaug_decode_tool"))
    for path in candidates:
        if os.access(path, os.X_OK):
            return path
    return None


def run_tool(tool, path, size=(84, 84), channels=3, seed=0, serial=0, dct=True, whole=False):
    """(record dict, HxWxC or HxW uint8 array) from obsaug_decode_tool."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.pnm")
        cmd = [tool, path, out, "--size", f"{size[0]}x{size[1]}", "--channels", str(channels),
               "--seed", str(seed), "--serial", str(serial)]
        if not dct:
            cmd.append("--no-dct")
        if whole:
            cmd.append("--whole")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stderr.strip()}")
        with Image.open(out) as im:
            return json.loads(proc.stdout), np.asarray(im).copy()


def pillow_reference(path, record, size=(84, 84), channels=3):
    """What torchvision's RandomResizedCrop (+ flip, + Grayscale) gives on a PIL image."""
    top, left, height, width = record["crop"]
    with Image.open(path) as im:
        im = im.convert("RGB")
        out = im.crop((left, top, left + width, top + height)).resize((size[1], size[0]), Image.BILINEAR)
    if record["flipped"]:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    if channels == 1:
        out = out.convert("L")
    return np.asarray(out)


def compare(tool, path, size=(84, 84), channels=3, seed=0, serial=0, dct=True):
    """dict(mad, max, record): obsaug against Pillow on the crop obsaug drew."""
    record, ours = run_tool(tool, path, size, channels, seed, serial, dct)
    ref = pillow_reference(path, record, size, channels)
    diff = np.abs(ours.astype(np.int32) - ref.astype(np.int32))
    return {"mad": float(diff.mean()), "max": int(diff.max()), "record": record}


def _expand(paths):
    for p in paths:
        if os.path.isdir(p):
            for root, _, files in os.walk(p):
                for f in sorted(files):
                    if f.lower().endswith(IMAGE_EXTENSIONS):
                        yield os.path.join(root, f)
        else:
            yield p


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--tool", default=None)
    parser.add_argument("--size", default="84x84")
    parser.add_argument("--serials", type=int, default=4)
    parser.add_argument("--channels", type=int, default=3)
    args = parser.parse_args(argv)
    tool = args.tool or find_tool()
    if not tool:
        print("obsaug_decode_tool not found: build it or set OBSAUG_DECODE_TOOL", file=sys.stderr)
        return 2
    size = tuple(int(v) for v in args.size.lower().split("x"))
    worst = 0.0
    print(f"{'file':40s} {'no-DCT mad/max':>16s} {'DCT mad/max':>14s}  scale")
    for path in _expand(args.paths):
        rows = {}
        for dct in (False, True):
            results = [compare(tool, path, size, args.channels, 0, s, dct) for s in range(args.serials)]
            rows[dct] = (np.mean([r["mad"] for r in results]), max(r["max"] for r in results),
                         results[-1]["record"]["scale"])
        worst = max(worst, rows[False][0])
        print(f"{os.path.basename(path)[:40]:40s} {rows[False][0]:9.3f}/{rows[False][1]:<6d}"
              f" {rows[True][0]:7.3f}/{rows[True][1]:<6d} {rows[True][2][0]}/{rows[True][2][1]}")
    return 1 if worst > 2.0 else 0


if __name__ == "__main__":
    sys.exit(main())
