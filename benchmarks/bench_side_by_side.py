#!/usr/bin/env python3
"""obsaug against the published PyTorch paths, side by side in one run (DESIGN.md section 9).

One command prints a markdown table (ms/call and samples/s per method) and a
ratio table, and writes a PNG plot of samples/s against batch size B, for
B in {32, 128, 256, 1024} and two observation layouts, uint8 on the CPU (and
CUDA when torch.cuda.is_available() and obsaug was built with CUDA):

  9x84x84  DMControl: 3 stacked RGB frames, 3-channel distractors
  4x84x84  Atari: 4 stacked grayscale frames, 1-channel distractors

Every row is one call on a [B, S*C, 84, 84] uint8 batch doing the same work,
shift (pad 4, replicate) then overlay (alpha 0.5, one photo per sample shared
by its S frames), in the order SVEA (DMControl-GB) applies them (the replay
sample is shifted, then overlaid) and obsaug's configs/default.yaml uses:

 1 obsaug in place / out of place
     obsaug.Engine(dict config: frames, pipeline [shift pad 4, overlay 0.5],
     pool of --pool (256) photos from data/photos, refresh threads
     --refresh-threads (default 0: the pool is filled once at construction
     and not refreshed while timing, so no decoder thread competes for the
     2 cores); eng.augment_(obs) and eng.augment(obs). obsaug uses torch's
     intra-op threads (--threads).
 2 DMC-GB (DataLoader per call)
     nicklashansen/dmcontrol-generalization-benchmark, src/augmentations.py,
     re-implemented from its published behaviour: `_load_places` builds
     torchvision ImageFolder(TF.Compose([RandomResizedCrop(84),
     RandomHorizontalFlip(), ToTensor()])) in a DataLoader(batch_size=B,
     shuffle=True, num_workers=16 upstream, pin_memory=True) on the first call;
     every call runs `_get_places_batch(B)` (next(iter), re-iterating on
     StopIteration or a short batch) and `.cuda()` (here .to(device)), then
     `imgs.repeat(1, x.size(1)//3, 1, 1)` and `((1-alpha)*(x/255.) +
     alpha*imgs)*255.` with alpha 0.5. Before it, its `random_shift`:
     F.pad(x, (4,4,4,4), mode='replicate') then kornia RandomCrop((h, w)) (a
     new module per call, as published). The input is made float first, as its
     replay buffer hands float tensors to the augmentations; the output is float
     0..255, as published. The DataLoader fetch is inside the timed call, as
     that code pays it. Adaptation for Atari (upstream is RGB only): the
     transform adds Grayscale(1) and the repeat is by S = 4.
 3 optimised PyTorch (persistent DataLoader)
     what people are advised to write instead: the same dataset in a DataLoader
     with persistent_workers=True, prefetch_factor=4, drop_last=True
     (pin_memory on CUDA), DrQ-v2 RandomShiftsAug on obs.float(), the batch of
     photos broadcast with expand (not repeat) and one in-place float blend
     (torch.lerp, weight 0.5), cast to uint8.
 4 preloaded pool PyTorch
     plain PyTorch with a preloaded uint8 pool tensor [P, C, 84, 84] on the
     device (the obsaug engine's own pool images, the same bytes): random index
     per sample (torch.randint + index_select), DrQ-v2 RandomShiftsAug on
     obs.float(), one in-place float lerp against the expanded distractors,
     cast to uint8.
 5 DrQ-v2 RandomShiftsAug alone
     facebookresearch/drqv2, drqv2.py RandomShiftsAug(pad=4), written from its
     published behaviour (replicate pad, a base grid plus an integer shift
     drawn in 0..2*pad, grid_sample, zeros padding, align_corners=False) on
     obs.float() (the agent calls self.aug(obs.float())).
   kornia RandomCrop alone
     kornia.augmentation.RandomCrop((84, 84), padding=4,
     padding_mode='replicate') on obs.float().
 6 copy
     dst.copy_(src) of the same uint8 bytes into a preallocated tensor: the floor.

Photos used by the DataLoader paths (2, 3), --dl-images:
  places256 (the default) the same photos, re-encoded once before any
            timing at Places365-standard's format (256x256 JPEG, quality 90),
            the format the published loader decodes per image (~2.6 ms per
            image here): the per-call decode cost upstream pays.
  photos    a temporary ImageFolder of symlinks to the files in data/photos
            themselves (53 photos, most of them multi-megapixel JPEGs: ~0.1 s
            to decode and crop each on this VM, 40x upstream's cost per image;
            ~10 s per call at B=128 with 2 workers, so use it with --quick or
            --batches 32 128: a full run with it takes far more than 6 minutes).
            The ratios against obsaug grow accordingly.
  The class folder holds each image many times (symlinks) so that an epoch
  is at least 16 batches: like Places365's 1.8M images, no re-iteration
  (which respawns non-persistent workers) happens inside the timed calls.
  num_workers: --workers, default min(16, cpu count): upstream's 16 where the
  machine has 16 cores, 2 on the 2-core VM.

Method. Fast rows (1, 4, 5, 6): warm-up, calls per measurement calibrated to
--min-time, --rounds rounds of every fast method once each in a rotated order,
time = median over rounds of the per-call mean (CUDA: CUDA events).
DataLoader rows (2, 3) are timed on their own after the fast rows of the same
configuration, with no worker process alive during the fast rows: a warm-up
call (loader construction, worker start, first batch), then --dl-calls
back-to-back calls (a multiple of the worker count, so that the workers'
initially synchronised batches average out), time = total / calls; their
workers are shut down before the next configuration.
Ratios are t_method / t_obsaug (how many times faster obsaug is; "vs copy"
is t_copy / t_obsaug, 1.0 = as fast as copying the batch once). Targets at
B=128: obsaug >= 20x the DMC-GB path and >= 5x the optimised variant.

Examples (from the repository root):
  .venv/bin/python benchmarks/bench_side_by_side.py                 # full run
  .venv/bin/python benchmarks/bench_side_by_side.py --quick         # B 32, 128, fewer reps
  .venv/bin/python benchmarks/bench_side_by_side.py --dl-images places256 --json out/sbs.json
"""
from __future__ import annotations

import argparse
import concurrent.futures
import math
import os
import shutil
import sys
import time
import warnings
from typing import Dict, List

import torch

import harness
from baselines import DMCGB, RandomShiftsAug, build_image_folder, places_transform
from harness import ROOT, Method, loadavg_str, md_row, md_rule, print_md_table

obsaug = harness.import_obsaug()

import torchvision.datasets as datasets

try:
    import kornia
    import kornia.augmentation
except Exception:  # noqa: BLE001  (kornia is pinned in requirements.txt, but optional here)
    kornia = None


PAD = 4
ALPHA = 0.5
SIZE = 84
LAYOUTS = {"9x84x84": (3, 3), "4x84x84": (4, 1)}   # frames -> (stack S, channels C)
LAYOUT_NAMES = {"9x84x84": "DMControl 9x84x84 (3 RGB frames)",
                "4x84x84": "Atari 4x84x84 (4 grayscale frames)"}


# --------------------------------------------------------------------------
# DrQ-v2's RandomShiftsAug and DMControl-GB's random_overlay over a Places
# DataLoader (class DMCGB, random_shift = replicate pad + kornia RandomCrop),
# with the image folder they read (build_image_folder), live in
# benchmarks/baselines.py.
# --------------------------------------------------------------------------

class Optimised:
    """Persistent workers, prefetch, expand, one float lerp into uint8, DrQ-v2 shift."""

    def __init__(self, root, device, stack, channels, num_workers, batch):
        self.device, self.stack, self.channels = device, stack, channels
        kw = dict(persistent_workers=True, prefetch_factor=4) if num_workers > 0 else {}
        self.loader = torch.utils.data.DataLoader(
            datasets.ImageFolder(root, places_transform(SIZE, channels)),
            batch_size=batch, shuffle=True, drop_last=True, num_workers=num_workers,
            pin_memory=device.type == "cuda", **kw)
        self.it = None
        self.shift = RandomShiftsAug(PAD)

    def _next(self):
        if self.it is None:
            self.it = iter(self.loader)
        try:
            imgs, _ = next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            imgs, _ = next(self.it)
        return imgs.to(self.device, non_blocking=True)

    def __call__(self, obs):
        b = obs.size(0)
        x = self.shift(obs.float())
        d = self._next().mul_(255.)                       # [B, C, H, W], small
        x5 = x.view(b, self.stack, self.channels, SIZE, SIZE)
        x5.lerp_(d.unsqueeze(1).expand_as(x5), ALPHA)     # expand, not repeat
        return x.to(torch.uint8)

    def close(self):
        it = getattr(self.loader, "_iterator", None) or self.it
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        self.it = self.loader = None


def preloaded_overlay_shift(obs, pool, stack, channels, shift):
    b = obs.size(0)
    idx = torch.randint(0, pool.size(0), (b,), device=pool.device)
    d = pool.index_select(0, idx).float()
    x = shift(obs.float())
    x5 = x.view(b, stack, channels, SIZE, SIZE)
    x5.lerp_(d.unsqueeze(1).expand_as(x5), ALPHA)
    return x.to(torch.uint8)


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

def time_dataloader(m, device, calls):
    """One warm-up call (loader construction, worker start, first batch), then
    the latency of each of `calls` calls."""
    m.fn()
    harness.sync(device)
    m.iters = calls
    m.times = harness.latencies(lambda _: m.fn(), calls, device)


# --------------------------------------------------------------------------
# One configuration
# --------------------------------------------------------------------------

def make_engine(device: torch.device, frames: str, pool: int, refresh_threads: int):
    s, c = LAYOUTS[frames]
    refresh = {"threads": refresh_threads}
    if refresh_threads > 0:
        refresh["mode"] = "async"
    return obsaug.Engine({
        "device": str(device), "seed": 0,
        "frames": {"stack": s, "channels": c, "height": SIZE, "width": SIZE},
        "pipeline": [{"op": "shift", "pad": PAD, "padding": "replicate"},
                     {"op": "overlay", "alpha": ALPHA}],
        "pool": {"size": pool, "sources": [os.path.join(ROOT, "data", "photos")],
                 "refresh": refresh},
    })


def run_config(device, frames, batch, eng, image_root, args) -> List[Dict]:
    s, c = LAYOUTS[frames]
    g = torch.Generator().manual_seed(batch)
    obs = torch.randint(0, 256, (batch, s * c, SIZE, SIZE), dtype=torch.uint8, generator=g).to(device)
    src, dst = obs.clone(), torch.empty_like(obs)
    pool = eng.pool_images.clone()          # same bytes as obsaug's pool, on the device
    drqv2 = RandomShiftsAug(PAD)
    kaug = (kornia.augmentation.RandomCrop((SIZE, SIZE), padding=PAD, padding_mode="replicate")
            if kornia is not None else None)

    fast = [
        Method("copy", lambda: dst.copy_(src), "copy (dst.copy_(src), floor)"),
        Method("obsaug_inplace", lambda: eng.augment_(obs), "obsaug Engine augment_ (in place)"),
        Method("obsaug_out", lambda: eng.augment(obs), "obsaug Engine augment (out of place)"),
        Method("preloaded", lambda: preloaded_overlay_shift(obs, pool, s, c, drqv2),
               "PyTorch preloaded uint8 pool + DrQ-v2 shift"),
        Method("drqv2", lambda: drqv2(obs.float()), "DrQ-v2 RandomShiftsAug alone (f32)"),
    ]
    if kaug is not None:
        fast.append(Method("kornia", lambda: kaug(obs.float()),
                           "kornia RandomCrop pad 4 replicate alone (f32)"))

    # sanity: shapes and dtypes
    with torch.no_grad():
        assert eng.augment(obs).shape == obs.shape
        assert preloaded_overlay_shift(obs, pool, s, c, drqv2).dtype == torch.uint8
        harness.run_rounds(fast, args.rounds, device, warmup=3, min_time=args.min_time,
                           warmup_budget=0.2)

        dl_methods = []
        if not args.no_dataloader:
            dmc = DMCGB(image_root, device, c, args.workers)
            m = Method("dmcgb", lambda: dmc(obs),
                       "DMC-GB random_shift + random_overlay (DataLoader/call)", dataloader=True)
            try:
                out = dmc(obs)
                assert out.shape == obs.shape and out.dtype == torch.float32
                time_dataloader(m, device, args.dl_calls)
            finally:
                dmc.close()
            dl_methods.append(m)
            opt = Optimised(image_root, device, s, c, args.workers, batch)
            m = Method("optimised", lambda: opt(obs),
                       "optimised PyTorch (persistent DL, expand, lerp) + DrQ-v2", dataloader=True)
            try:
                time_dataloader(m, device, args.dl_calls)
            finally:
                opt.close()
            dl_methods.append(m)

    rows = []
    for m in fast + dl_methods:
        dataloader = m.info.get("dataloader", False)
        t = harness.median(m) if not dataloader else sum(m.times) / len(m.times)
        rows.append({"device": str(device), "frames": frames, "batch": batch, "method": m.key,
                     "label": m.label, "seconds_per_call": t, "ms_per_call": t * 1e3,
                     "samples_per_s": batch / t,
                     "calls": len(m.times) if dataloader else m.iters * len(m.times),
                     "times": m.times, "timing": "dataloader" if dataloader else "rounds"})
    return rows


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def fmt_ratio(v):
    return "n/a" if v is None else (f"{v:.2f}x" if v < 10 else f"{v:.0f}x" if v >= 100 else f"{v:.1f}x")


def ratios(rows):
    by: Dict[tuple, Dict[str, Dict]] = {}
    for r in rows:
        by.setdefault((r["device"], r["frames"], r["batch"]), {})[r["method"]] = r
    out = []
    for key, g in by.items():
        rec = {"device": key[0], "frames": key[1], "batch": key[2]}
        for which in ("obsaug_inplace", "obsaug_out"):
            t = g[which]["seconds_per_call"]
            for base in ("dmcgb", "optimised", "preloaded", "copy"):
                rec[f"{which}_vs_{base}"] = (g[base]["seconds_per_call"] / t) if base in g else None
        out.append(rec)
    return out


def print_tables(rows, rat):
    print_md_table(["device", "frames", "B", "method", "ms/call", "samples/s", "timed calls"],
                   "llrlrrr",
                   ([r['device'], r['frames'], r['batch'], r['label'], f"{r['ms_per_call']:.3f}",
                     f"{r['samples_per_s']:,.0f}", r['calls']] for r in rows))
    print("\nRatios = t_method / t_obsaug (how many times faster obsaug is); "
          "vs copy = t_copy / t_obsaug (1.0 = copy speed). ip = in place, oop = out of place.\n")
    print(md_row(["device", "frames", "B", "ip vs DMC-GB", "ip vs optimised", "ip vs preloaded",
                  "ip vs copy", "oop vs DMC-GB", "oop vs optimised", "oop vs preloaded",
                  "oop vs copy"]))
    print(md_rule("llr" + "r" * 8))
    for q in rat:
        cells = [fmt_ratio(q[f"{w}_vs_{b}"]) for w in ("obsaug_inplace", "obsaug_out")
                 for b in ("dmcgb", "optimised", "preloaded", "copy")]
        print(md_row([q['device'], q['frames'], q['batch']] + cells))


def check_targets(rat):
    lines, ok_all = [], True
    for q in rat:
        if q["batch"] != 128:
            continue
        for w, name in (("obsaug_inplace", "in place"), ("obsaug_out", "out of place")):
            for base, target in (("dmcgb", 20.0), ("optimised", 5.0)):
                v = q[f"{w}_vs_{base}"]
                if v is None:
                    lines.append(f"  {q['device']} {q['frames']} B=128 obsaug {name} vs {base}: not measured")
                    continue
                ok = v >= target
                ok_all &= ok
                lines.append(f"  {q['device']} {q['frames']} B=128 obsaug {name} vs {base}: "
                             f"{v:.1f}x (target >= {target:.0f}x) {'PASS' if ok else 'FAIL'}")
    return ok_all, lines


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install -r requirements.txt)")
        return False
    frames_list = list(dict.fromkeys(r["frames"] for r in rows))
    fig, axes = plt.subplots(1, len(frames_list), figsize=(7 * len(frames_list), 5.5), squeeze=False)
    styles = {"cpu": "-", "cuda": "--"}
    markers = {"copy": "s", "obsaug_inplace": "o", "obsaug_out": "^", "preloaded": "D",
               "drqv2": "v", "kornia": "<", "dmcgb": "x", "optimised": "P"}
    for ax, frames in zip(axes[0], frames_list):
        sel = [r for r in rows if r["frames"] == frames]
        for dev in dict.fromkeys(r["device"] for r in sel):
            for key in dict.fromkeys(r["method"] for r in sel):
                pts = sorted((r["batch"], r["samples_per_s"], r["label"]) for r in sel
                             if r["device"] == dev and r["method"] == key)
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts],
                        linestyle=styles.get(dev.split(":")[0], ":"), marker=markers.get(key, "."),
                        label=f"{pts[0][2]} [{dev}]")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        bs = sorted({r["batch"] for r in sel})
        ax.set_xticks(bs)
        ax.set_xticklabels([str(b) for b in bs])
        ax.set_xlabel("batch size B")
        ax.set_ylabel("samples/s (higher is better)")
        ax.set_title(LAYOUT_NAMES.get(frames, frames))
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.05 + 0.022 * math.ceil(len(labels) / 2), 1, 0.97))
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="B in {32, 128}, 3 rounds, 2 DataLoader calls (development)")
    p.add_argument("--batches", nargs="+", type=int, default=None,
                   help="default 32 128 256 1024 (--quick: 32 128)")
    p.add_argument("--frames", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    p.add_argument("--device", nargs="+", default=None,
                   help="cpu and/or cuda (default: cpu, plus cuda when available)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads, used by torch and obsaug alike (default 1)")
    p.add_argument("--pool", type=int, default=256, help="obsaug pool size P (default 256)")
    p.add_argument("--refresh-threads", type=int, default=0,
                   help="obsaug pool refresh threads (default 0: fill once, no refresh while timing)")
    p.add_argument("--workers", type=int, default=min(16, os.cpu_count() or 1),
                   help="DataLoader num_workers (upstream 16; default min(16, cpus))")
    p.add_argument("--dl-images", choices=["places256", "photos"], default="places256",
                   help="DataLoader images: the photos of data/photos at Places365-standard's "
                        "256x256 (default) or symlinks to the original files")
    p.add_argument("--dl-calls", type=int, default=None,
                   help="timed DataLoader calls after one warm-up (default: 2*workers, "
                        "--quick: workers)")
    p.add_argument("--no-dataloader", action="store_true", help="skip rows 2 and 3")
    p.add_argument("--rounds", type=int, default=None, help="rounds of the fast rows (5, --quick 3)")
    p.add_argument("--min-time", type=float, default=None,
                   help="seconds per measurement of the fast rows (0.04, --quick 0.02)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "side_by_side.png"),
                   help="PNG plot path (default docs/img/side_by_side.png)")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = p.parse_args(argv)

    args.batches = args.batches or ([32, 128] if args.quick else [32, 128, 256, 1024])
    args.rounds = args.rounds or (3 if args.quick else 5)
    args.min_time = args.min_time or (0.02 if args.quick else 0.04)
    w = max(1, args.workers)
    args.dl_calls = args.dl_calls or (w if args.quick else 2 * w)
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message=".*pin_memory.*")

    devices, env = harness.start_with_kornia(kornia, args.device)
    print(f"threads {env['threads']} (torch and obsaug), kornia {env['kornia']}")
    print(f"pipeline: shift pad 4 replicate, then overlay alpha 0.5; uint8 input; obsaug Engine pool "
          f"P={args.pool} from data/photos, refresh threads {args.refresh_threads}"
          f"{' (filled once, no refresh while timing)' if args.refresh_threads == 0 else ' (async)'}")
    print(f"DataLoader rows: images '{args.dl_images}', num_workers {args.workers} (upstream 16), "
          f"1 warm-up + {args.dl_calls} timed calls each; fast rows: {args.rounds} rounds of "
          f"~{args.min_time * 1e3:.0f} ms, median")

    t_start = time.perf_counter()
    image_root = None
    rows: List[Dict] = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as ex:
            # pool fills release the GIL: build the engines while the image folder is made
            jobs = {}
            for dev_name in devices:
                device = harness.usable_device(dev_name, obsaug)
                if device is None:
                    continue
                for frames in args.frames:
                    jobs[(dev_name, frames)] = ex.submit(make_engine, device, frames, args.pool,
                                                         args.refresh_threads)
            if not args.no_dataloader:
                image_root = build_image_folder(os.path.join(ROOT, "data", "photos"),
                                                args.dl_images, 16 * max(args.batches))
            engines = {k: f.result() for k, f in jobs.items()}
        print(f"set-up (engines + image folder): {time.perf_counter() - t_start:.0f} s\n")

        for (dev_name, frames), eng in engines.items():
            device = torch.device(dev_name)
            for b in args.batches:
                t0 = time.perf_counter()
                rows += run_config(device, frames, b, eng, image_root, args)
                print(f"  measured {dev_name} {frames} B={b} in {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr, flush=True)
            eng.close()
    finally:
        if image_root:
            shutil.rmtree(image_root, ignore_errors=True)
    if not rows:
        print("nothing was measured")
        return 1

    rat = ratios(rows)
    print_tables(rows, rat)
    ok, lines = check_targets(rat)
    print("\nTargets at B=128 (obsaug >= 20x DMC-GB path, >= 5x optimised variant):")
    print("\n".join(lines) if lines else "  B=128 not measured")
    load_end = os.getloadavg()
    wall = time.perf_counter() - t_start
    title = (f"obsaug vs PyTorch baselines: shift pad 4 + overlay 0.5, uint8; threads {args.threads}, "
             f"DataLoader workers {args.workers}, images {args.dl_images}; {env['cpu']}; "
             f"torch {env['torch']}; load {env['loadavg_start'][0]:.1f}")
    if plot(rows, args.out, title):
        print(f"\nwrote {args.out}")
    print(f"wall time {wall:.0f} s; load average at end: {loadavg_str(load_end)}")
    if args.json:
        env["loadavg_end"] = load_end
        harness.write_json(args.json, {"environment": env, "args": vars(args), "results": rows,
                               "ratios": rat, "targets_pass": ok})
    return 0


if __name__ == "__main__":
    sys.exit(main())
