#!/usr/bin/env python3
"""obsaug ops benchmark (DESIGN.md section 9): one command, one run, one table.

For each device (cpu, and cuda when available), frame layout (default
9x84x84, DMControl: 3 stacked RGB frames; 4x84x84 is Atari, 4 grayscale
frames with a 1-channel pool) and batch size B, it times side by side:

  copy            dst.copy_(src) of the uint8 batch into a preallocated tensor:
                  the floor the issue's targets name ("a plain copy of the same
                  bytes"), measured in the same run ('x copy')
  in-place floor  buf.bitwise_not_() on a batch-sized uint8 buffer: read and
                  write one buffer, the memory traffic of an in-place pass
                  (a copy into another buffer also fetches the destination's
                  lines before writing them); 'x own' of the in-place rows
  obsaug in place obsaug.ops.augment(obs, pool, ops=[shift pad 4, overlay 0.5
                  (--alpha)], inplace=True): one fused pass
  obsaug out      the same, out of place (allocates the output each call)
  obsaug out=     the same into a preallocated tensor (out=)
  obsaug reuse    the same through an obsaug.Engine with output.reuse (the
                  engine keeps its output between calls; its pool is the
                  embedded photos, P = 256, never refreshed)
  eager           the same two ops in plain PyTorch as DMControl-GB writes them,
                  with the pool preloaded on the device: a shift as F.pad
                  replicate + random_crop (view_as_windows gather crop, from
                  DMControl-GB/RAD, verbatim; some DMControl-GB versions'
                  random_shift; upstream's crops with kornia RandomCrop) then random_overlay
                  (index_select of random pool images, float blend, back to uint8)
  obsaug shift f32  obsaug.ops.shift(x, pad=4) on float32 input, out of place
  obsaug shift f32 out=  the same into a preallocated tensor
  nn.RandomShift  obsaug.nn.RandomShift(4) on float32 input (DrQ-v2's semantics;
                  it hands out again the outputs the caller released)
  DrQ-v2 shift    DrQ-v2's RandomShiftsAug (replicate pad + grid_sample) on float32
  f32 copy        fdst.copy_(fsrc) of float32 tensors of the batch's shape: the
                  floor of the float32-output rows, measured in the same run
  u8->f32 convert fdst.copy_(src): the uint8 batch converted to float32, the
                  traffic of the affine rows without the pool; 'x own' of those
  f32 affine      the fused shift+overlay on the uint8 batch with float32
                  output, v * (1/255) - 0.5 (DrQ-v2's encoder scaling), out of
                  place and into out=
  kornia crop     DrQ's nn.Sequential(ReplicationPad2d(4), kornia RandomCrop) on
                  float32 (when kornia is installed; by default on CUDA only, see --kornia)

Method: every method is warmed up, its calls per measurement are calibrated
to --min-time, then --rounds rounds run every method once each, the order
rotated per round, so machine noise hits all methods alike; the reported time
is the median over rounds of (measurement time / calls). CUDA times use CUDA
events on the current stream.

Bytes counted (GB/s = bytes / time, 1 GB = 1e9 bytes), N = B*S*C*H*W:
  copy:                    2*N        (read src + write dst)
  obsaug overlay+shift:    2*N + B*C*H*W  (read batch + write batch + one
                           distractor of C channels per sample, shared by its
                           S frames); the eager row is credited the same
                           useful bytes (it moves several times more)
  shift f32 rows, f32 copy: 2*N*4    (read + write float32)
  f32 affine:              N + B*C*H*W + 4*N  (read uint8 + distractor + write float32)
"x copy" = t_copy / t_method (1.0 = as fast as copying the uint8 batch once);
for the float32-output rows it is t_f32copy / t_method (the float32 copy);
"speedup" = t_baseline / t_obsaug, baseline = eager for the fused uint8 rows
and DrQ-v2 RandomShiftsAug for the f32 shift row.

Example:
  PYTHONPATH=python .venv/bin/python benchmarks/bench_ops.py
  PYTHONPATH=python .venv/bin/python benchmarks/bench_ops.py --device cuda \
      --frames 9x84x84 4x84x84 --json out/bench.json
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

import harness
from baselines import RandomShiftsAug, dmcgb_random_shift
from harness import Method

obsaug = harness.import_obsaug()
import obsaug.nn  # noqa: E402

try:
    import kornia
    import kornia.augmentation
except Exception:  # noqa: BLE001  (kornia is optional)
    kornia = None


PAD = 4
ALPHA = 0.5


def shift_overlay(alpha):
    """obsaug's pipeline of the fused rows: shift pad 4, then overlay at alpha."""
    return [{"op": "shift", "pad": PAD}, {"op": "overlay", "alpha": alpha}]


OBSAUG_OPS = shift_overlay(ALPHA)


# --------------------------------------------------------------------------
# Baselines, written after the published code.
# --------------------------------------------------------------------------

# DMControl-GB's random_shift (view_as_windows crop, offsets 0..7 for pad 4) and
# DrQ-v2's RandomShiftsAug live in benchmarks/baselines.py.

def eager_random_overlay(x, pool, alpha=None):
    """DMControl-GB random_overlay with the Places DataLoader replaced by a pool
    preloaded on the device (uint8 [P, C, H, W]): pick one random image per
    sample, repeat it over the S stacked frames, blend in float, back to uint8."""
    alpha = ALPHA if alpha is None else alpha
    idx = torch.randint(0, pool.size(0), (x.size(0),), device=pool.device)
    imgs = pool.index_select(0, idx).float().div_(255.)
    imgs = imgs.repeat(1, x.size(1) // pool.size(1), 1, 1)
    return (((1 - alpha) * (x / 255.) + alpha * imgs) * 255.).to(torch.uint8)


def eager_shift_overlay(x, pool):
    """obsaug's pipeline [shift pad 4, overlay ALPHA] in eager PyTorch, DMControl-GB
    style (SVEA: the replay sample is shifted, then overlaid). The shift runs on
    the uint8 batch (F.pad replicate supports uint8 in torch 2.x)."""
    return eager_random_overlay(dmcgb_random_shift(x, PAD), pool)


def kornia_drq_aug(h, w):
    """DrQ (denisyarats/drq), drq.py: nn.Sequential(ReplicationPad2d(4), RandomCrop)."""
    return nn.Sequential(nn.ReplicationPad2d(PAD), kornia.augmentation.RandomCrop((h, w)))


def reuse_engine(device: torch.device, stack: int, channels: int, h: int, w: int, seed: int):
    """An Engine running OBSAUG_OPS with output.reuse over the embedded photos
    (P = 256, filled once, never refreshed)."""
    return obsaug.Engine({
        "device": str(device), "seed": seed,
        "frames": {"stack": stack, "channels": channels, "height": h, "width": w},
        "pipeline": OBSAUG_OPS,
        "pool": {"size": 256, "sources": [obsaug.nn.default_photos()],
                 "refresh": {"threads": 0}},
        "output": {"reuse": True},
    })


def run_config(device: torch.device, frames: str, channels: Optional[int], batch: int,
               pool_size: int, rounds: int, warmup: int, min_time: float,
               use_kornia: bool, seed: int, threads: Sequence[int] = ()) -> List[Dict]:
    sc, h, w = (int(v) for v in frames.lower().split("x"))
    c = channels if channels else (3 if sc % 3 == 0 else 1)
    if sc % c:
        raise SystemExit(f"--frames {frames}: {sc} channels is not a whole number of "
                         f"{c}-channel frames")
    g = torch.Generator().manual_seed(seed + batch)
    obs_cpu = torch.randint(0, 256, (batch, sc, h, w), dtype=torch.uint8, generator=g)
    pool_cpu = torch.randint(0, 256, (pool_size, c, h, w), dtype=torch.uint8, generator=g)
    obs = obs_cpu.to(device)
    src = obs.clone()          # the copy's source (obs itself is augmented in place)
    dst = torch.empty_like(obs)
    pool = pool_cpu.to(device)
    obs_f = obs.float()
    dst_f = torch.empty_like(obs_f)      # out= of the float rows
    src_f = obs_f.clone()                # the float32 copy's source
    dst_f_copy = torch.empty_like(obs_f)
    rmw = obs.clone()                    # the in-place floor's buffer
    drqv2 = RandomShiftsAug(PAD)
    nn_shift = obsaug.nn.RandomShift(PAD, seed=seed)
    engine = reuse_engine(device, sc // c, c, h, w, seed)
    kaug = kornia_drq_aug(h, w).to(device) if (use_kornia and kornia is not None) else None

    eager_label = "eager PyTorch shift+overlay (DMC-GB)"
    try:  # uint8 replicate padding: supported on CPU and CUDA in torch 2.x
        F.pad(obs[:1], (PAD,) * 4, mode="replicate")
        eager = lambda: eager_shift_overlay(obs, pool)  # noqa: E731
    except (RuntimeError, NotImplementedError):
        eager_label += " [f32 pad]"
        eager = lambda: eager_random_overlay(dmcgb_random_shift(obs.float(), PAD), pool)  # noqa: E731

    # Sanity: every method yields the expected shape and dtype.
    ref = eager()
    assert ref.shape == obs.shape and ref.dtype == torch.uint8, (ref.shape, ref.dtype)
    del ref
    assert obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=0).shape == obs.shape
    assert drqv2(obs_f).shape == obs_f.shape
    if kaug is not None:
        assert kaug(obs_f).shape == obs_f.shape

    n = obs.numel()
    fused_bytes = 2 * n + batch * c * h * w
    f32_bytes = 2 * n * 4
    affine_bytes = n + batch * c * h * w + 4 * n
    affine = dict(out_dtype=torch.float32, scale=1 / 255, bias=-0.5)
    step = [0]

    def obsaug_inplace():
        step[0] += 1
        obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=step[0], inplace=True)

    def obsaug_out():
        step[0] += 1
        return obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=step[0])

    def obsaug_out_into():
        step[0] += 1
        return obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=step[0], out=dst)

    def obsaug_shift_f32():
        step[0] += 1
        return obsaug.ops.shift(obs_f, seed=seed, step=step[0], pad=PAD)

    def obsaug_shift_f32_into():
        step[0] += 1
        return obsaug.ops.shift(obs_f, seed=seed, step=step[0], pad=PAD, out=dst_f)

    def obsaug_affine():
        step[0] += 1
        return obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=step[0], **affine)

    def obsaug_affine_into():
        step[0] += 1
        return obsaug.ops.augment(obs, pool, ops=OBSAUG_OPS, seed=seed, step=step[0], **affine,
                                  out=dst_f)

    methods = [
        Method("copy", lambda: dst.copy_(src), "copy (floor: dst.copy_(src))", nbytes=2 * n),
        Method("rmw", lambda: rmw.bitwise_not_(), "in-place floor (buf.bitwise_not_())",
               nbytes=2 * n),
        Method("obsaug_inplace", obsaug_inplace, "obsaug shift+overlay in place",
               nbytes=fused_bytes, baseline="eager", own_floor="rmw"),
        Method("obsaug_out", obsaug_out, "obsaug shift+overlay out of place",
               nbytes=fused_bytes, baseline="eager"),
        Method("obsaug_out_into", obsaug_out_into, "obsaug shift+overlay out=",
               nbytes=fused_bytes, baseline="eager"),
        Method("obsaug_reuse", lambda: engine.augment(obs), "obsaug shift+overlay Engine reuse",
               nbytes=fused_bytes, baseline="eager"),
        Method("eager", eager, eager_label, nbytes=fused_bytes),
        Method("copy_f32", lambda: dst_f_copy.copy_(src_f), "f32 copy (floor: fdst.copy_(fsrc))",
               nbytes=f32_bytes, floor="copy_f32"),
        Method("convert_f32", lambda: dst_f_copy.copy_(src), "u8->f32 convert (fdst.copy_(src))",
               nbytes=5 * n, floor="copy_f32"),
        Method("obsaug_affine", obsaug_affine, "obsaug shift+overlay u8->f32 affine out",
               nbytes=affine_bytes, floor="copy_f32", own_floor="convert_f32"),
        Method("obsaug_affine_into", obsaug_affine_into, "obsaug shift+overlay u8->f32 affine out=",
               nbytes=affine_bytes, floor="copy_f32", own_floor="convert_f32"),
        Method("obsaug_shift_f32", obsaug_shift_f32, "obsaug shift f32 out of place",
               nbytes=f32_bytes, baseline="drqv2", floor="copy_f32"),
        Method("obsaug_shift_f32_into", obsaug_shift_f32_into, "obsaug shift f32 out=",
               nbytes=f32_bytes, baseline="drqv2", floor="copy_f32"),
        Method("nn_shift", lambda: nn_shift(obs_f), "obsaug.nn.RandomShift f32",
               nbytes=f32_bytes, baseline="drqv2", floor="copy_f32"),
        Method("drqv2", lambda: drqv2(obs_f), "DrQ-v2 RandomShiftsAug f32 (grid_sample)",
               nbytes=f32_bytes, floor="copy_f32"),
    ]
    if kaug is not None:
        methods.append(Method("kornia", lambda: kaug(obs_f), "DrQ pad+kornia RandomCrop f32",
                              nbytes=f32_bytes, floor="copy_f32"))
    if len(threads) > 1:
        # The same in-place call and copy at each thread count, in the same rounds.
        # torch.set_num_threads costs milliseconds, so it runs untimed (prepare)
        # before every measurement, each method setting its own.
        def at(t):
            return lambda n: torch.set_num_threads(t)
        for m in methods:
            m.prepare = at(threads[0])
        for t in threads:
            methods.append(Method(f"copy@{t}", lambda: dst.copy_(src),
                                  f"copy, {t} threads", nbytes=2 * n, prepare=at(t),
                                  threads=t))
            methods.append(Method(f"obsaug_inplace@{t}", obsaug_inplace,
                                  f"obsaug shift+overlay in place, {t} threads",
                                  nbytes=fused_bytes, prepare=at(t), threads=t,
                                  floor=f"copy@{t}"))

    try:
        with torch.no_grad():
            harness.run_rounds(methods, rounds, device, warmup, min_time)
    finally:
        engine.close()

    by_key = {m.key: m for m in methods}
    rows = []
    for m in methods:
        t = harness.median(m)
        floor = m.info.get("floor", "copy")
        uint8 = floor == "copy"
        base = by_key[m.info["baseline"]] if m.info.get("baseline") else None
        rows.append({
            "device": str(device), "frames": frames, "stack": sc // c, "channels": c,
            "batch": batch, "pool": pool_size, "method": m.key, "label": m.label,
            "dtype": "uint8" if uint8 else "float32",
            "seconds_per_call": t, "ms_per_call": t * 1e3,
            "iqr": harness.iqr(m.times) / t,
            "calls_per_round": m.iters, "rounds": len(m.times),
            "samples_per_s": batch / t, "bytes_per_call": m.info["nbytes"],
            "GB_per_s": m.info["nbytes"] / t / 1e9,
            "floor": floor, "x_copy": harness.median(by_key[floor]) / t,
            "own_floor": m.info.get("own_floor"),
            "x_own": (harness.median(by_key[m.info["own_floor"]]) / t
                      if m.info.get("own_floor") else None),
            "threads": m.info.get("threads"),
            "baseline": m.info.get("baseline"),
            "speedup": (harness.median(base) / t) if base else None,
            "times": m.times,
        })
    return rows


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def _fmt(v, spec, empty=""):
    return empty if v is None else format(v, spec)


def print_table(rows: List[Dict]) -> None:
    head = (f"{'device':<7} {'frames':<8} {'B':>5}  {'method':<42} {'ms/call':>9} "
            f"{'iqr':>5} {'samples/s':>11} {'GB/s':>7} {'x copy':>6} {'x own':>6} {'speedup':>8}")

    def line(r: Dict) -> str:
        speed = _fmt(r["speedup"], ".2f")
        if speed:
            speed += "x"
        def ratio(x):
            return " " * 6 if x is None else format(x, "6.3f" if x < 0.1 else "6.2f")
        return (f"{r['device']:<7} {r['frames']:<8} {r['batch']:>5}  {r['label']:<42} "
                f"{r['ms_per_call']:>9.3f} {r['iqr'] * 100:>4.0f}% {r['samples_per_s']:>11,.0f} "
                f"{r['GB_per_s']:>7.2f} {ratio(r['x_copy'])} {ratio(r['x_own'])} "
                f"{speed:>8}".rstrip())
    harness.print_grouped_table(head, rows, lambda r: (r["device"], r["frames"], r["batch"]), line)


def print_summary(rows: List[Dict]) -> None:
    """Two summaries: where the uint8 result goes (x copy), and the float paths
    (x the float32 copy; speedup over DrQ-v2's RandomShiftsAug)."""
    groups: Dict[tuple, Dict[str, Dict]] = {}
    for r in rows:
        groups.setdefault((r["device"], r["frames"], r["batch"]), {})[r["method"]] = r

    def summary(title: str, columns: str, cells: Callable[[Dict[str, Dict]], str]) -> None:
        head = f"{'device':<7} {'frames':<8} {'B':>5}  " + columns
        print(title)
        print(head)
        print("-" * len(head))
        for (dev, frames, b), g in groups.items():
            print(f"{dev:<7} {frames:<8} {b:>5}  " + cells(g))

    def uint8_cells(g: Dict[str, Dict]) -> str:
        x = {k: g[k]["x_copy"] for k in ("obsaug_inplace", "obsaug_out", "obsaug_out_into",
                                         "obsaug_reuse")}
        return (f"{x['obsaug_inplace']:>8.2f} {x['obsaug_out']:>6.2f} "
                f"{x['obsaug_out_into']:>6.2f} {x['obsaug_reuse']:>6.2f}  "
                f"{g['obsaug_inplace']['x_own']:>14.2f}  "
                f"{g['obsaug_inplace']['speedup']:>16.2f}x")

    def float_cells(g: Dict[str, Dict]) -> str:
        return (f"{g['obsaug_affine']['x_copy']:>10.2f} "
                f"{g['obsaug_affine_into']['x_copy']:>11.2f} "
                f"{g['obsaug_affine_into']['x_own']:>14.2f}  "
                f"{g['obsaug_shift_f32']['speedup']:>8.2f}x "
                f"{g['obsaug_shift_f32_into']['speedup']:>9.2f}x "
                f"{g['nn_shift']['speedup']:>13.2f}x")

    summary("\nSummary 1: fused shift+overlay, uint8, x copy (t_copy / t; 1.0 = one copy of the "
            "batch), in place x its own floor (t_bitwise_not_ / t), and vs eager:",
            f"{'in place':>8} {'out':>6} {'out=':>6} {'reuse':>6}  {'in place x own':>14}  "
            f"{'in place vs eager':>17}",
            uint8_cells)
    summary("\nSummary 2: float paths. u8->f32 affine (v/255 - 0.5) x f32 copy (t_f32copy / t) "
            "and out= x the bare u8->f32 conversion; "
            "shift f32 and nn.RandomShift vs DrQ-v2 RandomShiftsAug (t_drqv2 / t):",
            f"{'affine out':>10} {'affine out=':>11} {'affine= x own':>14}  "
            f"{'shift out':>9} {'shift out=':>10} {'nn.RandomShift':>14}",
            float_cells)
    counts = sorted({r["threads"] for r in rows if r.get("threads")})
    if len(counts) > 1:
        def thread_cells(g: Dict[str, Dict]) -> str:
            one = g[f"obsaug_inplace@{counts[0]}"]["seconds_per_call"]
            copy_one = g[f"copy@{counts[0]}"]["seconds_per_call"]
            return "".join(
                f"{one / g[f'obsaug_inplace@{t}']['seconds_per_call']:>10.2f}x"
                f"{copy_one / g[f'copy@{t}']['seconds_per_call']:>9.2f}x"
                f"{g[f'obsaug_inplace@{t}']['x_copy']:>9.2f}" for t in counts[1:])
        summary(f"\nSummary 3: threads, in place shift+overlay: speedup of t threads over "
                f"{counts[0]} (t_{counts[0]} / t_t), the copy's, and in place x copy at t threads "
                f"(all in the same rounds):",
                "".join(f"{f'in place {t}':>11}{f'copy {t}':>10}{f'x copy {t}':>9}"
                        for t in counts[1:]),
                thread_cells)

def main(argv=None) -> int:
    global ALPHA, OBSAUG_OPS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", nargs="+", default=None,
                   help="cpu and/or cuda[:N] (default: cpu, plus cuda when available)")
    p.add_argument("--batches", nargs="+", type=int, default=[32, 128, 256, 1024])
    p.add_argument("--frames", nargs="+", default=["9x84x84"],
                   help="S*C x H x W; C is 3 when S*C is a multiple of 3, else 1 "
                        "(9x84x84 DMControl, 4x84x84 Atari); see --channels")
    p.add_argument("--channels", type=int, default=None,
                   help="channels per frame C (= pool channels); overrides the guess")
    p.add_argument("--pool", type=int, default=1024, help="distractor pool size P")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warmup", type=int, default=3, help="warm-up calls per method")
    p.add_argument("--min-time", type=float, default=None,
                   help="seconds per measurement (default 0.04 cpu, 0.02 cuda)")
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="torch.set_num_threads; several values (e.g. 1 2) add in-place and "
                        "copy rows at each count, measured in the same rounds, the rest at "
                        "the first")
    p.add_argument("--alpha", type=float, default=ALPHA,
                   help="the overlay's alpha, obsaug's and eager's (default 0.5, DMControl-GB's; "
                        "obsaug blends at 0.5 with one pavgb, at other weights by 16-bit lanes)")
    p.add_argument("--kornia", choices=["auto", "on", "off"], default="auto",
                   help="the DrQ kornia RandomCrop row: auto = on CUDA only (on the CPU it "
                        "takes seconds per call at B=1024), on, off")
    args = harness.parse_args(p, argv)
    ALPHA = args.alpha
    OBSAUG_OPS = shift_overlay(ALPHA)

    if args.threads:
        torch.set_num_threads(args.threads[0])
    devices, env = harness.start_with_kornia(kornia, args.device)
    print(f"kornia {env['kornia']}")
    print(f"pipeline {OBSAUG_OPS}, pool P={args.pool}, rounds {args.rounds}, "
          f"warm-up {args.warmup}; time = median over rounds of the per-call mean, "
          f"iqr = interquartile range of the rounds / median")
    print("GB/s counts 1e9 bytes: copy 2*N; fused shift+overlay 2*N + B*C*H*W (one "
          "distractor per sample), the eager row credited the same; f32 shift 8*N; "
          "u8->f32 affine N + B*C*H*W + 4*N; N = B*S*C*H*W.\n'x copy' = t_copy/t (float32 "
          "rows: t_f32copy/t); 'x own' = t_floor/t against the floor of the row's own traffic "
          "(in place: buf.bitwise_not_(), one buffer read and written; u8->f32 affine: the "
          "bare u8->f32 conversion); 'speedup' = t_baseline/t (baseline: eager for the fused "
          "rows, DrQ-v2 RandomShiftsAug for the f32 shift rows).\n")

    rows: List[Dict] = []
    t_start = time.perf_counter()
    for dev_name in devices:
        device = harness.usable_device(dev_name, obsaug, select=True)
        if device is None:
            continue
        min_time = args.min_time if args.min_time else (0.02 if device.type == "cuda" else 0.04)
        for frames in args.frames:
            for b in args.batches:
                rows += run_config(device, frames, args.channels, b, args.pool, args.rounds,
                                   args.warmup, min_time,
                                   args.kornia == "on" or (args.kornia == "auto" and device.type == "cuda"),
                                   args.seed, args.threads or ())
    return harness.finish(rows, env, t_start, args.json, print_table, print_summary)


if __name__ == "__main__":
    sys.exit(main())
