"""The CPU op calls test_cpu_loops.py runs with the widest hand-written
loops the CPU has and, in child processes with OBSAUG_CPU_LOOPS, with each
narrower set (kernels/augment_cpu.h): sizes where every AVX2 path of
kernels/augment_cpu.cpp runs (vector row gathers of 84- and 100-wide rows,
the 32x32 transposes of rotate, the pmaddwd grayscale, the blend, the
streamed float32 conversion of an output past the streaming threshold), the
blend's weights (pavgb at alpha 0.5, per-sample and per-frame weights, 0 and
1) on whole planes and by rows, and random pipelines of both families on odd
sizes and C = 1 to 4.

``python cpu_loops_cases.py OUT.pt`` saves {"loops": name, "outputs": {name: tensor}}.
"""
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
for path in (HERE, os.path.dirname(HERE)):  # this folder, tests/python (conftest, reference)
    if path not in sys.path:
        sys.path.insert(0, path)

import obsaug  # noqa: E402
from test_second_family import random_pipeline  # noqa: E402

ops = obsaug.ops
SEED, STEP = 20261203, 7

# Past the CPU streaming threshold on every host (at most 32 MiB,
# kernels/streaming_stores.h): 160 x 9 x 84 x 84 float32 is 39 MiB.
STREAMED_BATCH = 160


def _frames(gen, shape, dtype):
    x = torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8)
    return x if dtype == torch.uint8 else x.to(torch.float32)


def _pool(gen, hw, c=3, images=5):
    return torch.randint(0, 256, (images, c, *hw), generator=gen, dtype=torch.uint8)


def _fixed_cases(gen):
    """(name, callable) for the shapes each AVX2 path is written for."""
    x84 = _frames(gen, (16, 9, 84, 84), torch.uint8)
    f84 = x84.to(torch.float32)
    x100 = _frames(gen, (8, 9, 100, 100), torch.uint8)
    pool84 = _pool(gen, (84, 84))
    drq = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]
    rad = [{"op": "crop", "size": 84}, {"op": "cutout", "min": 10, "max": 29},
           {"op": "flip", "p": 0.2}, {"op": "rotate", "p": 0.3}, {"op": "grayscale", "p": 0.3}]
    pool100 = _pool(gen, (100, 100))
    storage = x84.reshape(48, 3, 84, 84)
    indices = torch.randint(0, 48, (20, 3), generator=gen)
    big = _frames(gen, (STREAMED_BATCH, 9, 84, 84), torch.uint8)
    return [
        ("u8 shift+overlay in place", lambda: ops.augment(x84.clone(), pool84, ops=drq, seed=SEED,
                                                          step=STEP, inplace=True)),
        ("u8 shift+overlay out", lambda: ops.augment(x84, pool84, ops=drq, seed=SEED, step=STEP)),
        ("u8 shift+overlay alpha range per frame in place", lambda: ops.augment(
            x84.clone(), pool84, ops=[{"op": "shift", "pad": 4}, {
                "op": "overlay", "alpha": 0.1, "alpha_max": 0.9, "per_frame": True}],
            seed=SEED, step=STEP, inplace=True)),
        ("u8 overlay alpha 1 then 0 then 0.3", lambda: ops.augment(
            x84, pool84, ops=[{"op": "overlay", "alpha": a} for a in (1.0, 0.0, 0.3)],
            seed=SEED, step=STEP)),
        ("f32 shift+overlay out", lambda: ops.augment(f84, pool84, ops=drq, seed=SEED, step=STEP)),
        ("u8 shift zeros", lambda: ops.shift(x84, seed=SEED, step=STEP, pad=4, padding="zeros")),
        ("u8 rad 100 -> 84", lambda: ops.augment(x100, ops=rad, seed=SEED, step=STEP)),
        ("u8 rotate 100", lambda: ops.rotate(x100, seed=SEED, step=STEP, p=1.0)),
        ("u8 rotate 84 in place", lambda: ops.augment(x84.clone(), ops=[{"op": "rotate", "p": 1.0}],
                                                     seed=SEED, step=STEP, inplace=True)),
        ("u8 flip both axes", lambda: ops.augment(
            x84, ops=[{"op": "flip", "p": 1.0}, {"op": "flip", "p": 0.5, "axis": "vertical"}],
            seed=SEED, step=STEP)),
        ("u8 translate 108", lambda: ops.translate(x84, seed=SEED, step=STEP, size=108)),
        ("u8 translate+overlay", lambda: ops.augment(
            x84, pool100,
            ops=[{"op": "translate", "size": 100}, {"op": "overlay", "alpha": 0.3}],
            seed=SEED, step=STEP)),
        ("u8 grayscale 83 wide", lambda: ops.grayscale(x84[..., :83].contiguous(), seed=SEED,
                                                        step=STEP, p=1.0)),
        ("u8 jitter without contrast", lambda: ops.color_jitter(x84, seed=SEED, step=STEP,
                                                                contrast=0.0)),
        ("u8 -> f32 shift, streamed", lambda: ops.augment(
            big, ops=[{"op": "shift", "pad": 4}], seed=SEED, step=STEP,
            out_dtype=torch.float32, scale=1 / 255, bias=-0.5)),
        ("u8 -> f32 shift+overlay, streamed", lambda: ops.augment(
            big, pool84, ops=drq, seed=SEED, step=STEP, out_dtype=torch.float32, scale=1 / 255)),
        ("f32 shift, streamed", lambda: ops.shift(big.to(torch.float32), seed=SEED, step=STEP,
                                                  pad=4)),
        ("u8 gather shift+overlay", lambda: ops.gather_augment(storage, indices, pool84, ops=drq,
                                                               seed=SEED, step=STEP)),
    ]


def _random_cases(gen, count=60):
    rng = random.Random(SEED)
    cases = []
    for i in range(count):
        h = rng.choice([16, 31, 33, 64, 84])
        w = h if rng.random() < 0.6 else rng.choice([17, 40, 84, 97])
        c = rng.choice([1, 2, 3, 3, 4])
        stack = rng.choice([1, 3])
        pipe, pool_hw = random_pipeline(rng, h, w, c, rng.randint(1, 5))
        dtype = rng.choice([torch.uint8, torch.float32])
        x = _frames(gen, (rng.choice([1, 5, 12]), stack * c, h, w), dtype)
        pool = _pool(gen, pool_hw, c) if pool_hw else None
        out_dtype = torch.float32 if dtype == torch.uint8 and rng.random() < 0.3 else None
        cases.append((f"random {i}: {tuple(x.shape)} C = {c} {dtype} -> {out_dtype} {pipe}",
                      lambda i=i, x=x, c=c, pool=pool, pipe=pipe, out_dtype=out_dtype: ops.augment(
                          x, pool, ops=pipe, seed=SEED, step=STEP + i, out_dtype=out_dtype,
                          scale=1.0 if out_dtype is None else 0.5, frame_channels=c)))
    return cases


def outputs():
    """{name: output} for every case, computed in this process."""
    gen = torch.Generator().manual_seed(SEED)
    return {name: run() for name, run in _fixed_cases(gen) + _random_cases(gen)}


if __name__ == "__main__":
    torch.save({"loops": obsaug._C.cpu_loops(), "outputs": outputs()}, sys.argv[1])
