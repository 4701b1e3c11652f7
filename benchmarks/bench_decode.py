#!/usr/bin/env python3
"""Decode benchmark: distractor decode+crop+resize images/s per thread,
obsaug (TurboJPEG with and without DCT-domain scaling) against Pillow +
torchvision, on the same files in the same run.

Test sets, prepared in a temporary folder from the photographs of
data/photos (scripts/fetch_photos.sh), every one re-encoded by Pillow as a
baseline JPEG of quality 90 (4:2:0):
  places256  Places365-like: shorter side resized to 256, centre crop 256x256
  w512       512 pixels wide, aspect kept
  original   the original JPEG files as they are (PNGs left out; some of the
             originals are progressive JPEGs, up to 16 Mpx)
  original-baseline, original-progressive (only when named in --sets): the
             originals split by coding process; DCT scaling saves less on a
             progressive JPEG, whose whole coefficient image is still
             entropy-decoded and buffered

Methods, one thread each, every image read from disk each time:
  obsaug DCT      build/benchmarks/obsaug_decode_bench (decode with the smallest
                  DCT scale covering the crop, RandomResizedCrop, flip,
                  antialiased resize to 84x84, CHW uint8)
  obsaug no-DCT   the same with --no-dct (always a full-size decode)
  Pillow+tv       what DMControl-GB's Places loader runs per image through
                  torchvision's ImageFolder: PIL.Image.open(f).convert("RGB"),
                  then RandomResizedCrop(84) and RandomHorizontalFlip()
                  (--to-tensor adds DMC-GB's ToTensor()), with
                  torch.set_num_threads(1)

Each measurement runs whole passes over its set for at least --seconds (so
every image weighs the same whatever it costs to decode) after a short
warm-up; the rate is counted both per second of the thread's CPU time
(user + system, so file reads count, but not the time the thread waited
while other jobs ran: the steadier figure on a shared machine, and the one
the target verdict uses) and per wall-clock second. --rounds rounds, in each of which every (set, method) is measured
once, the method order rotated from round to round so that machine noise hits
the methods alike; the table gives the median over the rounds and the spread
(max - min) / median. Ratios are of the medians.

Example:
  .venv/bin/python benchmarks/bench_decode.py
  .venv/bin/python benchmarks/bench_decode.py --sets places256 --seconds 3 --rounds 5
  OBSAUG_DECODE_BENCH=/tmp/build/benchmarks/obsaug_decode_bench .venv/bin/python benchmarks/bench_decode.py
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness
from harness import ROOT

SETS = ("places256", "w512", "original")
# Not run by default: the originals split by JPEG coding process.
EXTRA_SETS = ("original-baseline", "original-progressive")
METHODS = ("obsaug DCT", "obsaug no-DCT", "Pillow+tv")
QUALITY = 90


def find_bench(explicit):
    for candidate in (explicit, os.environ.get("OBSAUG_DECODE_BENCH"),
                      os.path.join(ROOT, "build", "benchmarks", "obsaug_decode_bench")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("bench_decode: obsaug_decode_bench not found; build it (ninja -C build "
             "obsaug_decode_bench) or set OBSAUG_DECODE_BENCH")


def list_photos(photos_dir):
    files = sorted(p for p in glob.glob(os.path.join(photos_dir, "*"))
                   if os.path.splitext(p)[1].lower() in (".jpg", ".jpeg", ".png"))
    if not files:
        sys.exit(f"bench_decode: no photographs in {photos_dir}; run scripts/fetch_photos.sh")
    return files


def prepare_sets(photos, sets, out_dir):
    """Writes the re-encoded sets under out_dir/<set>/; returns {set: [files]}."""
    from PIL import Image

    made = {name: [] for name in sets}
    for name in sets:
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
    for path in photos:
        stem, ext = os.path.splitext(os.path.basename(path))
        is_jpeg = ext.lower() in (".jpg", ".jpeg")
        if is_jpeg and any(s.startswith("original") for s in sets):
            with Image.open(path) as im:
                progressive = bool(im.info.get("progressive") or im.info.get("progression"))
            for name in sets:
                if name == "original" or name == (
                        "original-progressive" if progressive else "original-baseline"):
                    made[name].append(path)
        wanted = [s for s in sets if not s.startswith("original")]
        if not wanted:
            continue
        with Image.open(path) as im:
            w, h = im.size
            if is_jpeg:
                # A DCT-scaled load that still covers 512 wide / 256 short
                # side: only the test set's preparation, not what is timed.
                need = min(1.0, max(512 / w, 256 / min(w, h)))
                im.draft("RGB", (max(1, int(w * need)), max(1, int(h * need))))
            im = im.convert("RGB")
            for name in wanted:
                if name == "places256":
                    s = 256 / min(w, h)
                    rw, rh = max(256, round(w * s)), max(256, round(h * s))
                    r = im.resize((rw, rh), Image.LANCZOS)
                    left, top = (rw - 256) // 2, (rh - 256) // 2
                    r = r.crop((left, top, left + 256, top + 256))
                else:  # w512
                    r = im.resize((512, max(1, round(h * 512 / w))), Image.LANCZOS)
                dst = os.path.join(out_dir, name, stem + ".jpg")
                r.save(dst, "JPEG", quality=QUALITY)
                made[name].append(dst)
    return made


def set_summary(files):
    from PIL import Image

    sizes = []
    for f in files:
        with Image.open(f) as im:
            sizes.append(im.size)
    mpx = statistics.mean(w * h for w, h in sizes) / 1e6
    kib = statistics.mean(os.path.getsize(f) for f in files) / 1024
    ws = sorted({w for w, _ in sizes})
    hs = sorted({h for _, h in sizes})
    def span(v):
        return str(v[0]) if len(v) == 1 else f"{v[0]}..{v[-1]}"

    dims = f"{ws[0]}x{hs[0]}" if len(ws) == 1 and len(hs) == 1 else f"{span(ws)} x {span(hs)}"
    return {"files": len(files), "dims": dims, "mean_mpx": mpx, "mean_kib": kib}


def run_obsaug(bench, list_file, size, seconds, dct):
    cmd = [bench, list_file, "--size", f"{size[0]}x{size[1]}", "--seconds", str(seconds),
           "--whole-passes", "--threads", "1"]
    if not dct:
        cmd.append("--no-dct")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_decode: {shlex.join(cmd)} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def make_pillow_runner(size, to_tensor):
    import torch
    from PIL import Image
    from torchvision import transforms

    torch.set_num_threads(1)
    steps = [transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip()]
    if to_tensor:
        steps.append(transforms.ToTensor())
    transform = transforms.Compose(steps)

    def load(path):
        # torchvision.datasets.folder.pil_loader, as ImageFolder calls it.
        with open(path, "rb") as f:
            img = Image.open(f)
            return img.convert("RGB")

    def run(files, seconds, warmup=0.2):
        n = len(files)
        end = time.perf_counter() + warmup
        i = 0
        while True:  # warm-up, at least one image
            transform(load(files[i % n]))
            i += 1
            if time.perf_counter() >= end:
                break
        count = 0
        cpu_start = time.thread_time()
        start = time.perf_counter()
        end = start + seconds
        while True:
            transform(load(files[count % n]))
            count += 1
            if count % n == 0 and time.perf_counter() >= end:
                break
        elapsed = time.perf_counter() - start
        cpu = time.thread_time() - cpu_start
        return {"images": count, "seconds": elapsed, "images_per_s": count / elapsed,
                "cpu_seconds": cpu, "images_per_cpu_s": count / cpu}

    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--photos", default=os.path.join(ROOT, "data", "photos"))
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS + EXTRA_SETS)
    parser.add_argument("--size", default="84x84", help="output HxW (default 84x84)")
    parser.add_argument("--seconds", type=float, default=1.5,
                        help="least time per measurement, in whole passes (default 1.5)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--to-tensor", action="store_true",
                        help="add torchvision ToTensor() to the Pillow pipeline (DMC-GB's full transform)")
    parser.add_argument("--bench", help="obsaug_decode_bench binary (default: $OBSAUG_DECODE_BENCH, "
                        "then build/benchmarks/obsaug_decode_bench)")
    parser.add_argument("--keep", metavar="DIR", help="write the test sets to DIR and keep them")
    parser.add_argument("--json", metavar="PATH", help="also write every measurement as JSON")
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.lower().split("x"))
    if len(size) != 2 or min(size) <= 0:
        sys.exit("bench_decode: --size wants HxW")

    bench = find_bench(args.bench)
    import PIL
    import PIL.features
    import torch
    import torchvision

    env = harness.environment(bench=bench, pillow=PIL.__version__,
                              torchvision=torchvision.__version__)
    harness.print_header(env)
    print(f"obsaug bench: {bench}")
    print(f"Pillow {PIL.__version__} (libjpeg-turbo {PIL.features.version('libjpeg_turbo')}), "
          f"torch {torch.__version__}, torchvision {torchvision.__version__}, torch threads 1")
    print(f"output {size[0]}x{size[1]}, {args.rounds} rounds, >= {args.seconds} s and whole "
          f"passes per measurement, 1 thread per method"
          + (", Pillow+tv with ToTensor" if args.to_tensor else ""))

    tmp = None
    out_dir = args.keep
    if out_dir is None:
        tmp = tempfile.mkdtemp(prefix="obsaug-bench-decode-")
        out_dir = tmp
    try:
        t0 = time.perf_counter()
        sets = prepare_sets(list_photos(args.photos), args.sets, out_dir)
        lists, summaries = {}, {}
        for name in args.sets:
            if not sets[name]:
                sys.exit(f"bench_decode: set {name} is empty")
            lists[name] = os.path.join(out_dir, name + ".txt")
            with open(lists[name], "w") as f:
                f.write("\n".join(os.path.abspath(p) for p in sets[name]) + "\n")
            summaries[name] = set_summary(sets[name])
        print(f"test sets prepared in {time.perf_counter() - t0:.1f} s "
              f"(JPEG quality {QUALITY}, Pillow, in {out_dir})")
        for name in args.sets:
            s = summaries[name]
            print(f"  {name:<20} {s['files']:3d} files  {s['dims']:<26} "
                  f"mean {s['mean_mpx']:.2f} Mpx, {s['mean_kib']:.0f} KiB")

        pillow = make_pillow_runner(size, args.to_tensor)
        results = {(name, m): [] for name in args.sets for m in METHODS}
        results_wall = {(name, m): [] for name in args.sets for m in METHODS}
        records = []
        for r in range(args.rounds):
            order = harness.rotated(METHODS, r)
            for name in args.sets:
                for method in order:
                    if method == "Pillow+tv":
                        res = pillow(sets[name], args.seconds)
                    else:
                        res = run_obsaug(bench, lists[name], size, args.seconds,
                                         dct=(method == "obsaug DCT"))
                    results[(name, method)].append(res["images_per_cpu_s"])
                    results_wall[(name, method)].append(res["images_per_s"])
                    records.append({"round": r, "set": name, "method": method, **res})
            print(f"round {r + 1}/{args.rounds} done ({time.perf_counter() - t0:.0f} s)", flush=True)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    def med(table, name, method):
        return statistics.median(table[(name, method)])

    def spread(table, name, method):
        v = table[(name, method)]
        return (max(v) - min(v)) / statistics.median(v)

    setw = max(len(n) for n in args.sets)
    for title, table in (
            ("images per CPU-second of the one thread (thread CPU time, user + system: the time "
             "the thread was descheduled left out)", results),
            ("images per wall-clock second (one thread; includes time lost to other jobs)",
             results_wall)):
        print()
        print(title + "; median of rounds, spr = (max - min) / median")
        header = (f"{'set':<{setw}} {'files':>5}  {'image size':<22}"
                  + "".join(f"{m:>15} {'spr':>4}" for m in METHODS)
                  + f"  {'DCT/Pillow':>10} {'noDCT/Pillow':>12} {'DCT/noDCT':>9}")
        print(header)
        print("-" * len(header))
        for name in args.sets:
            s = summaries[name]
            row = f"{name:<{setw}} {s['files']:>5}  {s['dims']:<22}"
            for m in METHODS:
                row += f"{med(table, name, m):>15.1f} {spread(table, name, m) * 100:>3.0f}%"
            dct, nodct, pil = (med(table, name, m) for m in METHODS)
            row += f"  {dct / pil:>9.2f}x {nodct / pil:>11.2f}x {dct / nodct:>8.2f}x"
            print(row)
    print()
    verdicts = []
    for name in args.sets:
        ratio = med(results, name, "obsaug DCT") / med(results, name, "Pillow+tv")
        ratio_wall = med(results_wall, name, "obsaug DCT") / med(results_wall, name, "Pillow+tv")
        verdicts.append(f"{name} {ratio:.2f}x {'met' if ratio >= 2.0 else 'NOT met'} "
                        f"(wall clock {ratio_wall:.2f}x)")
    print("target: obsaug with DCT scaling >= 2x Pillow + torchvision per thread on "
          "256x256-or-larger JPEGs, by CPU time: " + "; ".join(verdicts))
    if args.json:
        harness.write_json(args.json, {
            "environment": env, "size": size, "rounds": args.rounds, "seconds": args.seconds,
            "sets": summaries, "measurements": records,
            "median_images_per_cpu_s": {f"{n}/{m}": med(results, n, m) for n, m in results},
            "median_images_per_s": {f"{n}/{m}": med(results_wall, n, m) for n, m in results_wall}})


if __name__ == "__main__":
    main()
