#!/usr/bin/env python3
"""The second family of ops (DESIGN.md sections 3a and 9) against the code people run today.

    PYTHONPATH=python .venv/bin/python benchmarks/bench_second_family.py [--quick]
        [--device cpu cuda] [--batches 32 128 256 1024] [--rounds 5] [--json out/sf.json]

For each device and batch size B, on 9x84x84 observations (3 stacked RGB
frames; RAD's crop starts from 9x100x100), one group per op or pipeline, each
timed side by side in the same rounds (benchmarks/harness.py):

  random_conv      obsaug.ops.random_conv (float 0..255) | DMControl-GB's
                   random_conv (a Python loop over the batch) | the same as one
                   grouped conv2d (groups=B)
  random_convolution  obsaug.nn.rad.random_convolution | RAD's (a loop, xavier)
  color_jitter     obsaug.ops.color_jitter (float 0..255) | RAD's ColorJitterLayer
                   (random_color_jitter, HSV) | kornia ColorJitter | torchvision v2
                   ColorJitter per sample (v2 draws once per call)
  grayscale p .3   obsaug.ops.grayscale (uint8) and nn.rad (float 0..1) | RAD's
                   random_grayscale | kornia RandomGrayscale | torchvision v2 per sample
  flip p .2        obsaug.ops.flip (uint8) and nn.rad | RAD's random_flip | kornia
                   RandomHorizontalFlip | torchvision v2 per sample
  rotate p .3      obsaug.ops.rotate (uint8) and nn.rad | RAD's random_rotation
  cutout 10..29    obsaug.ops.cutout (uint8) and nn.rad (numpy) | RAD's random_cutout
                   (numpy) | kornia RandomErasing | torchvision v2 per sample
  cutout_color     obsaug.nn.rad.random_cutout_color | RAD's (numpy)
  translate 92     obsaug.nn.rad.random_translate | RAD's (numpy)
  crop 100->84     obsaug.nn.rad.random_crop | RAD's (numpy)
  svea_conv        obsaug.ops.augment [shift 4, random_conv] (float 0..255) |
                   DMControl-GB's random_shift then random_conv | shift then grouped conv
  rad              obsaug.ops.augment of configs/rad.yaml's pipeline on uint8
                   9x100x100, float 0..1 out | RAD's sample_rad order: crop, cutout
                   (numpy), as_tensor / 255, flip, rotate, grayscale (torch)
  fusion           obsaug [shift 4, flip, rotate, translate 88, cutout, grayscale,
                   overlay 0.5] against obsaug [shift 4, overlay 0.5] alone (uint8;
                   the fused output is 88x88, (88/84)^2 = 1.10x the bytes)

"x" = t_method / t_obsaug for a baseline (how many times obsaug is faster);
for the fusion group, t_fused / t_shift+overlay. kornia and torchvision run on
float 0..1 input, per frame ([B*S, 3, H, W]) where they need 3 channels.
Baselines that loop over the batch in Python are timed up to --max-loop-batch
(the DMControl-GB loop also re-concatenates its output every iteration).
Targets at B = 256 (issue "second family"): random_conv >= 20x DMControl-GB's
loop and >= 3x grouped conv2d; color_jitter >= 10x kornia and RAD's layer;
fusion <= 1.3x.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Dict, List, Optional

import numpy as np
import torch

import baselines as bl
import harness
from harness import Method

obsaug = harness.import_obsaug()
from obsaug.nn import rad as orad  # noqa: E402

try:
    import kornia
    import kornia.augmentation as K
except Exception:  # noqa: BLE001  (kornia is optional)
    kornia = None
try:
    from torchvision.transforms import v2 as T2
except Exception:  # noqa: BLE001  (torchvision is optional)
    T2 = None

S, C, H, W = 3, 3, 84, 84
RENDER = 100                       # RAD renders 100x100 and crops to 84
TRANSLATE = 92                     # RAD translates 100 onto 108: the same ratio at 84
FUSION_CANVAS = 88
CUT_MIN, CUT_MAX = 10, 29          # RAD's randint(10, 30)
RAD_PIPELINE = [{"op": "crop", "size": 84}, {"op": "cutout", "min": CUT_MIN, "max": CUT_MAX},
                {"op": "flip", "p": 0.2}, {"op": "rotate", "p": 0.3},
                {"op": "grayscale", "p": 0.3}]
SVEA_CONV_PIPELINE = [{"op": "shift", "pad": 4}, {"op": "random_conv"}]
SHIFT_OVERLAY = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]
FUSED = [{"op": "shift", "pad": 4}, {"op": "flip", "p": 0.2}, {"op": "rotate", "p": 0.3},
         {"op": "translate", "size": FUSION_CANVAS},
         {"op": "cutout", "min": CUT_MIN, "max": CUT_MAX}, {"op": "grayscale", "p": 0.3},
         {"op": "overlay", "alpha": 0.5}]
# The targets of the issue, at B = 256: (group, baseline key, how, bound).
TARGETS = [("random_conv", "dmcgb_loop", ">=", 20.0), ("random_conv", "grouped", ">=", 3.0),
           ("color_jitter", "kornia", ">=", 10.0), ("color_jitter", "rad_layer", ">=", 10.0),
           ("fusion", "fused", "<=", 1.3)]


class Group:
    """One op or pipeline: its obsaug method (the reference of the ratios), the
    other obsaug forms and the baselines, timed in the same rounds."""

    def __init__(self, name: str, what: str):
        self.name, self.what = name, what
        self.methods: List[Method] = []
        self.reference: Optional[Method] = None

    def add(self, key: str, fn: Callable[[], object], label: str, *, reference: bool = False,
            obsaug_row: bool = False, slow: bool = False) -> None:
        m = Method(key, fn, label, obsaug=obsaug_row or reference,
                   **({"fixed_iters": 1, "max_rounds": 3} if slow else {}))
        self.methods.append(m)
        if reference:
            self.reference = m


def _steps():
    """A call counter for obsaug.ops rows: every call gets the next step."""
    step = [0]

    def nxt() -> int:
        step[0] += 1
        return step[0]
    return nxt


def build_groups(device: torch.device, batch: int, seed: int, max_loop: int,
                 pool84: torch.Tensor, pool_canvas: torch.Tensor) -> List[Group]:
    g = torch.Generator().manual_seed(seed + batch)
    u8 = torch.randint(0, 256, (batch, S * C, H, W), dtype=torch.uint8, generator=g).to(device)
    u8_render = torch.randint(0, 256, (batch, S * C, RENDER, RENDER), dtype=torch.uint8,
                              generator=g)
    f255 = u8.float()                              # DMControl-GB: float 0..255
    f01 = f255 / 255.                              # RAD after obs / 255.
    frames01 = f01.reshape(batch * S, C, H, W)     # kornia / torchvision: 3-channel images
    np_u8 = u8.cpu().numpy()                       # RAD's replay arrays (host, uint8)
    np_render = u8_render.numpy()
    nxt = _steps()
    loop_ok = batch <= max_loop
    dev_np = device.type == "cpu"                  # the numpy functions run on the host

    def ops(name, x, **kw):
        return lambda: getattr(obsaug.ops, name)(x, seed=seed, step=nxt(), **kw)

    def per_sample(transform, images):
        """torchvision v2 draws once per call: one call per sample (its S frames)."""
        def run():
            return torch.stack([transform(images[b].reshape(S, C, H, W))
                                for b in range(batch)]).reshape(batch, S * C, H, W)
        return run

    groups: List[Group] = []

    grp = Group("random_conv", "init normal, replicate, sigmoid; float 0..255")
    grp.add("obsaug", ops("random_conv", f255), "obsaug.ops.random_conv f32", reference=True)
    grp.add("obsaug_u8", ops("random_conv", u8), "obsaug.ops.random_conv uint8", obsaug_row=True)
    if loop_ok:
        grp.add("dmcgb_loop", lambda: bl.dmcgb_random_conv(f255),
                "DMControl-GB random_conv (loop)", slow=True)
    grp.add("grouped", lambda: bl.grouped_random_conv(f255), "grouped conv2d (groups=B)")
    groups.append(grp)

    grp = Group("random_convolution", "RAD: xavier, zeros, no activation; float 0..1")
    grp.add("obsaug", lambda: orad.random_convolution(f01), "obsaug.nn.rad.random_convolution",
            reference=True)
    if loop_ok:
        grp.add("rad", lambda: bl.rad_random_convolution(f01), "RAD random_convolution (loop)",
                slow=True)
    groups.append(grp)

    grp = Group("color_jitter", "0.4/0.4/0.4/0.5, p 1")
    grp.add("obsaug", ops("color_jitter", f255), "obsaug.ops.color_jitter f32", reference=True)
    grp.add("obsaug_u8", ops("color_jitter", u8), "obsaug.ops.color_jitter uint8",
            obsaug_row=True)
    grp.add("obsaug_rad", lambda: orad.random_color_jitter(f01),
            "obsaug.nn.rad.random_color_jitter", obsaug_row=True)
    grp.add("rad_layer", lambda: bl.rad_random_color_jitter(f01.clone()),
            "RAD ColorJitterLayer (HSV)")
    if kornia is not None:
        kj = K.ColorJitter(0.4, 0.4, 0.4, 0.5, p=1.0)
        grp.add("kornia", lambda: kj(frames01), "kornia ColorJitter f32 (per frame)")
    if T2 is not None and loop_ok:
        tj = T2.ColorJitter(0.4, 0.4, 0.4, 0.5)
        grp.add("torchvision", per_sample(tj, f01), "torchvision v2 ColorJitter per sample",
                slow=True)
    groups.append(grp)

    def rad_gate_group(op, what, p, rad_name, aug=None, kornia_per_frame=False):
        """A gated op of RAD's: nn.rad (the reference: float32 0..1, the input RAD,
        kornia and torchvision get) and obsaug.ops on uint8, RAD's rad_name, and
        where aug (a class name) is given kornia's and torchvision v2's aug (kornia
        per frame or on whole observations)."""
        grp = Group(op, what)
        grp.add("obsaug", ops(op, u8, p=p), f"obsaug.ops.{op} uint8", obsaug_row=True)
        ours, theirs = getattr(orad, rad_name), getattr(bl, "rad_" + rad_name)
        grp.add("obsaug_rad", lambda: ours(f01), f"obsaug.nn.rad.{rad_name} f32", reference=True)
        grp.add("rad", lambda: theirs(f01), f"RAD {rad_name}")
        if aug is not None and kornia is not None:
            ka, k_in = getattr(K, aug)(p=p), frames01 if kornia_per_frame else f01
            grp.add("kornia", lambda: ka(k_in),
                    f"kornia {aug} f32" + (" (per frame)" if kornia_per_frame else ""))
        if aug is not None and T2 is not None and loop_ok:
            grp.add("torchvision", per_sample(getattr(T2, aug)(p=p), f01),
                    f"torchvision v2 {aug} per sample", slow=True)
        groups.append(grp)

    rad_gate_group("grayscale", "p 0.3", 0.3, "random_grayscale", "RandomGrayscale",
                   kornia_per_frame=True)
    rad_gate_group("flip", "horizontal, p 0.2", 0.2, "random_flip", "RandomHorizontalFlip")
    rad_gate_group("rotate", "quarter turns, p 0.3", 0.3, "random_rotation")

    grp = Group("cutout", f"sides {CUT_MIN}..{CUT_MAX}, black")
    grp.add("obsaug", ops("cutout", u8, min=CUT_MIN, max=CUT_MAX), "obsaug.ops.cutout uint8",
            reference=True)
    if dev_np:
        grp.add("obsaug_rad", lambda: orad.random_cutout(np_u8),
                "obsaug.nn.rad.random_cutout (numpy)", obsaug_row=True)
        grp.add("rad", lambda: bl.rad_random_cutout(np_u8), "RAD random_cutout (numpy)")
    if kornia is not None:
        # areas of 10x10 .. 29x29 boxes on 84x84, any aspect in RAD's range
        ke = K.RandomErasing(scale=(0.014, 0.12), ratio=(0.3, 3.3), value=0.0, p=1.0)
        grp.add("kornia", lambda: ke(f01), "kornia RandomErasing f32")
    if T2 is not None and loop_ok:
        te = T2.RandomErasing(p=1.0, scale=(0.014, 0.12), ratio=(0.3, 3.3), value=0)
        grp.add("torchvision", per_sample(te, f01), "torchvision v2 RandomErasing per sample",
                slow=True)
    groups.append(grp)

    if dev_np:  # RAD's numpy functions: host arrays in, host arrays out
        grp = Group("cutout_color", f"sides {CUT_MIN}..{CUT_MAX}, numpy uint8")
        grp.add("obsaug", lambda: orad.random_cutout_color(np_u8),
                "obsaug.nn.rad.random_cutout_color", reference=True)
        grp.add("rad", lambda: bl.rad_random_cutout_color(np_u8), "RAD random_cutout_color")
        groups.append(grp)

        grp = Group("translate", f"84 onto {TRANSLATE}, numpy uint8")
        grp.add("obsaug", lambda: orad.random_translate(np_u8, TRANSLATE),
                "obsaug.nn.rad.random_translate", reference=True)
        grp.add("rad", lambda: bl.rad_random_translate(np_u8, TRANSLATE),
                "RAD random_translate")
        groups.append(grp)

        grp = Group("crop", f"{RENDER} to 84, numpy uint8")
        grp.add("obsaug", lambda: orad.random_crop(np_render, 84), "obsaug.nn.rad.random_crop",
                reference=True)
        grp.add("rad", lambda: bl.rad_random_crop(np_render, 84), "RAD random_crop")
        groups.append(grp)

    grp = Group("svea_conv", "shift 4 + random_conv, float 0..255")
    grp.add("obsaug", lambda: obsaug.ops.augment(f255, ops=SVEA_CONV_PIPELINE, seed=seed,
                                                 step=nxt()),
            "obsaug augment [shift, random_conv] f32", reference=True)
    if loop_ok:
        grp.add("dmcgb_loop", lambda: bl.dmcgb_random_conv(bl.dmcgb_random_shift(f255, 4)),
                "DMControl-GB random_shift + random_conv", slow=True)
    grp.add("grouped", lambda: bl.grouped_random_conv(bl.dmcgb_random_shift(f255, 4)),
            "random_shift + grouped conv2d")
    groups.append(grp)

    render_dev = u8_render.to(device)

    def rad_sample_path():
        """RAD's sample_rad: numpy crop and cutout, to the device as float / 255,
        then flip, rotate and grayscale on the tensor."""
        x = bl.rad_random_cutout(bl.rad_random_crop(np_render, 84))
        x = torch.as_tensor(x, device=device).float() / 255.
        x = bl.rad_random_flip(x, p=0.2)
        x = bl.rad_random_rotation(x, p=0.3)
        return bl.rad_random_grayscale(x, p=0.3)

    grp = Group("rad", "crop 100->84, cutout, flip .2, rotate .3, grayscale .3")
    grp.add("obsaug", lambda: obsaug.ops.augment(render_dev, ops=RAD_PIPELINE, seed=seed,
                                                 step=nxt(), out_dtype=torch.float32,
                                                 scale=1 / 255.0),
            "obsaug augment (uint8 in, float 0..1 out)", reference=True)
    grp.add("rad", rad_sample_path, "RAD sample_rad's augmentations")
    groups.append(grp)

    grp = Group("fusion", "uint8; ratio = fused / shift+overlay")
    grp.add("obsaug", lambda: obsaug.ops.augment(u8, pool84, ops=SHIFT_OVERLAY, seed=seed,
                                                 step=nxt()),
            "obsaug [shift, overlay]", reference=True)
    grp.add("fused", lambda: obsaug.ops.augment(u8, pool_canvas, ops=FUSED, seed=seed,
                                                step=nxt()),
            "obsaug [shift, flip, rotate, translate, cutout, gray, overlay]", obsaug_row=True)
    groups.append(grp)
    return groups


def run(device: torch.device, batches: List[int], args) -> List[Dict]:
    g = torch.Generator().manual_seed(args.seed)
    pool84 = torch.randint(0, 256, (64, C, H, W), dtype=torch.uint8, generator=g).to(device)
    pool_canvas = torch.randint(0, 256, (64, C, FUSION_CANVAS, FUSION_CANVAS), dtype=torch.uint8,
                                generator=g).to(device)
    rows: List[Dict] = []
    for batch in batches:
        groups = build_groups(device, batch, args.seed, args.max_loop_batch, pool84, pool_canvas)
        for grp in groups:
            with torch.no_grad():
                harness.run_rounds(grp.methods, args.rounds, device, args.warmup, args.min_time)
            t_ref = harness.median(grp.reference)
            for m in grp.methods:
                t = harness.median(m)
                rows.append({"device": str(device), "batch": batch, "group": grp.name,
                             "what": grp.what, "method": m.key, "label": m.label,
                             "obsaug": m.info["obsaug"], "ms_per_call": t * 1e3,
                             "samples_per_s": batch / t, "iqr": harness.iqr(m.times) / t,
                             "rounds": len(m.times), "calls_per_round": m.iters,
                             "x": None if m is grp.reference else t / t_ref, "times": m.times})
            print(f"  {device} B={batch:<5} {grp.name:<19} done", file=sys.stderr, flush=True)
    return rows


def print_table(rows: List[Dict]) -> None:
    head = (f"{'device':<6} {'B':>5}  {'group':<19} {'method':<64} {'ms/call':>10} {'iqr':>5} "
            f"{'samples/s':>11} {'x':>8}")

    def line(r: Dict) -> str:
        x = "" if r["x"] is None else f"{r['x']:.2f}x"
        return (f"{r['device']:<6} {r['batch']:>5}  {r['group']:<19} {r['label']:<64} "
                f"{r['ms_per_call']:>10.3f} {r['iqr'] * 100:>4.0f}% {r['samples_per_s']:>11,.0f} "
                f"{x:>8}")
    harness.print_grouped_table(head, rows, lambda r: (r["device"], r["batch"]), line)


def print_summary(rows: List[Dict]) -> None:
    """The ratios side by side: one line per device and B, one column per comparison."""
    cols = [("random_conv", "dmcgb_loop", "conv/DMC-GB"), ("random_conv", "grouped", "conv/grouped"),
            ("random_convolution", "rad", "conv/RAD"), ("color_jitter", "kornia", "jit/kornia"),
            ("color_jitter", "rad_layer", "jit/RAD"), ("color_jitter", "torchvision", "jit/tv2"),
            ("grayscale", "kornia", "gray/kornia"), ("grayscale", "rad", "gray/RAD"),
            ("flip", "kornia", "flip/kornia"), ("flip", "rad", "flip/RAD"),
            ("rotate", "rad", "rot/RAD"), ("cutout", "kornia", "cut/kornia"),
            ("cutout", "rad", "cut/RAD"), ("cutout_color", "rad", "cutc/RAD"),
            ("translate", "rad", "trans/RAD"), ("crop", "rad", "crop/RAD"),
            ("svea_conv", "dmcgb_loop", "svea/DMC-GB"), ("svea_conv", "grouped", "svea/grouped"),
            ("rad", "rad", "rad/RAD"), ("fusion", "fused", "fusion")]
    by = {(r["device"], r["batch"], r["group"], r["method"]): r for r in rows}
    configs = sorted({(r["device"], r["batch"]) for r in rows}, key=lambda k: (k[0], k[1]))
    present = [c for c in cols if any((d, b, c[0], c[1]) in by for d, b in configs)]
    print("\nobsaug's speed-up over each baseline (t_baseline / t_obsaug; fusion: "
          "t_fused / t_shift+overlay):")
    harness.print_md_table(["device", "B"] + [c[2] for c in present], "ll" + "r" * len(present),
                           [[d, b] + [_ratio(by.get((d, b, g, k))) for g, k, _ in present]
                            for d, b in configs])
    print("\nTargets at B = 256:")
    for g, k, how, bound in TARGETS:
        for d, b in configs:
            r = by.get((d, b, g, k))
            if b != 256 or r is None:
                continue
            x = r["x"]
            ok = x >= bound if how == ">=" else x <= bound
            print(f"  {d} {g} vs {k}: {x:.2f}x (target {how} {bound}x) "
                  f"{'met' if ok else 'NOT met'}")


def _ratio(r: Optional[Dict]) -> str:
    return "-" if r is None or r["x"] is None else f"{r['x']:.2f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", nargs="+", default=None,
                   help="cpu and/or cuda[:N] (default: cpu, plus cuda when available)")
    p.add_argument("--batches", nargs="+", type=int, default=None,
                   help="batch sizes (default 32 128 256 1024; --quick: 32)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2, help="warm-up calls per method")
    p.add_argument("--min-time", type=float, default=0.04, help="seconds per measurement")
    p.add_argument("--max-loop-batch", type=int, default=256,
                   help="largest B at which the per-sample Python loops are timed")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = harness.parse_args(
        p, argv, quick_help="a short run (B 32 unless --batches, 1 round, short measurements)")
    if args.quick:
        args.rounds, args.warmup, args.min_time = 1, 1, 0.005
    if args.batches is None:
        args.batches = [32] if args.quick else [32, 128, 256, 1024]
    if args.threads:
        torch.set_num_threads(args.threads)

    devices, env = harness.start_with_kornia(kornia, args.device)
    print(f"kornia {env['kornia']}; torchvision v2 {'yes' if T2 is not None else 'no'}; "
          f"frames {S * C}x{H}x{W}; rounds {args.rounds}; time = median over rounds of the "
          f"per-call mean; Python-loop baselines up to B = {args.max_loop_batch}\n")
    rows: List[Dict] = []
    t0 = time.perf_counter()
    for name in devices:
        device = torch.device(name)
        if device.type == "cuda":
            if not torch.cuda.is_available() or not getattr(obsaug, "built_with_cuda", False):
                print(f"skipping {name}: no CUDA GPU or obsaug built without CUDA")
                continue
            if device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(device)
        rows += run(device, args.batches, args)
    return harness.finish(rows, env, t0, args.json, print_table, print_summary)


if __name__ == "__main__":
    sys.exit(main())
