#!/usr/bin/env python3
"""Frame codecs on real frames (kernels/codecs, docs/compression.md): ratio,
encode and decode throughput per environment and per codec and coding
scheme, side by side in one run, and the geometric means over the DMControl
tasks and the Atari games; BENCHMARKS.md "Compressed frames (issue 44)".

Frames: data/frames/<name>.npy and index.json, from
benchmarks/capture_frames.py (7 DMControl tasks [150, 3, 84, 84], 4 Atari
games [300, 1, 84, 84]; run it once).

Per environment, build/benchmarks/obsaug_codec_bench measures, for every
codec x scheme, on one thread (the least thread CPU time of --repeats runs:
steadier than wall time where other jobs share the cores) unless stated:
  ratio      raw frame bytes / record bytes (header, tables and checksum counted)
  enc MB/s   frame bytes encoded per second; us/f: per frame (the add budget is
             50 us per 84x84x3 frame, i.e. >= 423 MB/s on DMControl)
  dec MB/s   frame bytes decoded per second, each frame once given its
             reference, the residual's add included (as the gather consumes it)
  sample     the decode work of a sampled batch: --batch transitions drawn
             uniformly, each decoding its S + 1 frames (stack and next stack:
             S = 3 on DMControl, 4 on Atari) and what their references need
             (key-K: the group's key once per transition; prev-K: the chain
             from the key), into scratch, on 1 thread and on 2 (wall time);
             against a memcpy of the same frames from raw storage (`copy`).
Schemes: frame (every frame intra), prev-K (a key frame every K frames of an
episode, the others against their predecessor), key-K (the others against
their group's key: a chain of two), rawkey-K (key-K with the keys stored as
they are: the gather reads a key's pixels in place, decoding no key).

Where obsaug's Python module is built (and data/photos is there), the same run
also times the uncompressed buffer's fused sample(--batch, augment=shift +
overlay) on 1 thread (CPU time) and 2 (wall time; torch.set_num_threads),
filled with the DMControl frames; the verdict then estimates a compressed sample as that time plus the
decode work above (phase 2 decodes inside the gather; this is its budget) and
checks the issue's targets:
  fast   DMC >= 2x, Atari >= 8x; sample <= 1.5x uncompressed on 1 thread, 1.25x on 2
  small  DMC >= 5x, Atari >= 20x; sample <= 3x uncompressed on 2 threads
  both   encode <= 50 us per 3x84x84 frame

  .venv/bin/python benchmarks/bench_codecs.py
  .venv/bin/python benchmarks/bench_codecs.py --quick
  .venv/bin/python benchmarks/bench_codecs.py --codecs packed-4,zstd-1 --schemes key-8,key-16
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import Dict, List, Optional

import harness
from harness import ROOT

DEFAULT_CODECS = ["packed-4", "packed-1", "packed-16", "lz4", "lz4-plain", "lz4hc-9", "zstd-1",
                  "zstd-3", "zstd-3-plain", "zstd-9"]
DEFAULT_SCHEMES = ["frame", "prev-8", "key-4", "key-8", "key-16", "key-32", "rawkey-8", "rawkey-16",
                   "rawkey-32"]
QUICK_CODECS = ["packed-4", "lz4", "zstd-1", "zstd-3"]
QUICK_SCHEMES = ["frame", "prev-8", "key-8", "key-16", "rawkey-16"]
STACK = {"dmc": 3, "atari": 4}
ENCODE_BUDGET_US = 50.0  # per 84x84x3 frame
TARGETS = {  # issue 44
    "fast": {"dmc": 2.0, "atari": 8.0, "sample_1t": 1.5, "sample_2t": 1.25},
    "small": {"dmc": 5.0, "atari": 20.0, "sample_2t": 3.0},
}


def bench_binary() -> str:
    return os.environ.get("OBSAUG_CODEC_BENCH",
                          os.path.join(ROOT, "build", "benchmarks", "obsaug_codec_bench"))


def geomean(values: List[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def run_environment(name: str, entry: Dict, frames_dir: str, args) -> List[Dict]:
    cmd = [bench_binary(), "--frames", os.path.join(frames_dir, entry["file"]),
           "--episode-starts", ",".join(str(s) for s in entry["episode_starts"]),
           "--codecs", ",".join(args.codecs), "--schemes", ",".join(args.schemes),
           "--repeats", str(args.repeats), "--batch", str(args.batch),
           "--stack", str(STACK[entry["kind"]]), "--threads", "2", "--seed", str(args.seed)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    rows = []
    for line in proc.stdout.splitlines():
        row = json.loads(line)
        row.update({"env": name, "kind": entry["kind"], "loadavg": harness.loadavg()})
        rows.append(row)
    return rows


def uncompressed_sample_ms(frames_dir: str, index: Dict, batch: int, seed: int,
                           repeats: int) -> Optional[Dict]:
    """The fused sample(batch, augment=shift+overlay) of an uncompressed
    obsaug.ReplayBuffer holding the DMControl frames, ms on 1 and 2 threads;
    None (with why) where obsaug's module or the photos are missing."""
    try:
        import numpy as np
        import torch
        import obsaug
        import bench_replay
    except Exception as e:  # noqa: BLE001 - any import failure means: not measured
        print(f"uncompressed sample: not measured ({type(e).__name__}: {e})")
        return None
    if not (hasattr(obsaug, "ReplayBuffer") and hasattr(obsaug, "Engine")
            and os.path.isdir(bench_replay.PHOTOS)):
        print("uncompressed sample: not measured (obsaug has no ReplayBuffer/Engine, or no data/photos)")
        return None
    frames = [np.load(os.path.join(frames_dir, e["file"])) for e in index.values() if e["kind"] == "dmc"]
    rb = obsaug.ReplayBuffer(capacity=len(frames) * 150, frame_shape=(3, 84, 84), frame_stack=3,
                             action_shape=(6,), action_dtype=torch.float32, seed=seed)
    action, reward = torch.zeros(6), torch.zeros(())
    for task in frames:
        for start in range(0, len(task), 50):
            rb.add_first(torch.from_numpy(task[start]))
            for t in range(start + 1, start + 50):
                rb.add(action, reward, torch.from_numpy(task[t]), terminated=t == start + 49)
    engine = bench_replay.make_engine(seed, 256)
    out = {}
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            for _ in range(3):  # warm-up
                rb.sample(batch, augment=engine)
            # one thread: the least thread CPU time, as obsaug_codec_bench times
            # its own; two threads: the least wall time
            clock = time.thread_time if n == 1 else time.perf_counter
            best = float("inf")
            for _ in range(repeats):
                t0 = clock()
                for _ in range(5):
                    rb.sample(batch, augment=engine)
                best = min(best, (clock() - t0) / 5)
            out[f"sample_ms_{n}t"] = best * 1e3
    finally:
        torch.set_num_threads(threads)
    return out


def summarize(rows: List[Dict]) -> List[Dict]:
    """Per (codec, scheme): geometric means over the DMControl tasks and the
    Atari games."""
    out = []
    keys = []
    for r in rows:
        if (r["codec"], r["scheme"]) not in keys:
            keys.append((r["codec"], r["scheme"]))
    for codec, scheme in keys:
        g = {"codec": codec, "scheme": scheme}
        for kind in ("dmc", "atari"):
            sel = [r for r in rows if r["codec"] == codec and r["scheme"] == scheme and r["kind"] == kind]
            if not sel:
                continue
            for field in ("ratio", "encode_mbps", "encode_us_per_frame", "decode_mbps", "sample_ms_1t",
                          "sample_ms_2t", "copy_ms"):
                g[f"{kind}_{field}"] = geomean([r[field] for r in sel])
            g[f"{kind}_encode_us_worst"] = max(r["encode_us_per_frame"] for r in sel)
            g[f"{kind}_ratio_min"] = min(r["ratio"] for r in sel)
        out.append(g)
    return out


def verdicts(summary: List[Dict], base: Optional[Dict]) -> List[Dict]:
    """Per (codec, scheme): which of the issue's targets it meets (the
    sampling ones estimated from the uncompressed sample + the decode work)."""
    out = []
    for g in summary:
        if "dmc_ratio" not in g or "atari_ratio" not in g:
            continue
        v = {"codec": g["codec"], "scheme": g["scheme"]}
        encode_ok = g["dmc_encode_us_worst"] <= ENCODE_BUDGET_US
        for preset, t in TARGETS.items():
            ok = g["dmc_ratio"] >= t["dmc"] and g["atari_ratio"] >= t["atari"] and encode_ok
            if base is not None:
                for n in (1, 2):
                    limit = t.get(f"sample_{n}t")
                    if limit is None:
                        continue
                    est = (base[f"sample_ms_{n}t"] + g[f"dmc_sample_ms_{n}t"]) / base[f"sample_ms_{n}t"]
                    v[f"{preset}_est_{n}t"] = est
                    ok = ok and est <= limit
            v[preset] = ok
        out.append(v)
    return out


def fmt(v, spec=".2f"):
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def print_environment_tables(rows: List[Dict]) -> None:
    for env in dict.fromkeys(r["env"] for r in rows):
        sel = [r for r in rows if r["env"] == env]
        print(f"\n### {env} ({sel[0]['kind']}, {sel[0]['frames']} frames; load {harness.loadavg_str(sel[0]['loadavg'])})\n")
        harness.print_md_table(
            ["codec", "scheme", "ratio", "enc MB/s", "enc us/f", "dec MB/s", "sample 1t ms",
             "sample 2t ms", "copy ms", "stored"], "llrrrrrrrr",
            [[r["codec"], r["scheme"], fmt(r["ratio"]), fmt(r["encode_mbps"], ".0f"),
              fmt(r["encode_us_per_frame"], ".1f"), fmt(r["decode_mbps"], ".0f"), fmt(r["sample_ms_1t"]),
              fmt(r["sample_ms_2t"]), fmt(r["copy_ms"]), str(r["stored_frames"])] for r in sel])


def print_summary(summary: List[Dict], base: Optional[Dict], checks: List[Dict]) -> None:
    print("\n### Geometric means: DMControl (7 tasks, 3x84x84, S = 3) and Atari (4 games, 1x84x84, S = 4)\n")
    harness.print_md_table(
        ["codec", "scheme", "DMC ratio", "Atari ratio", "DMC enc us/f (worst)", "DMC dec MB/s",
         "Atari dec MB/s", "DMC sample 1t ms", "DMC sample 2t ms", "Atari sample 1t ms", "copy ms"],
        "llrrrrrrrrr",
        [[g["codec"], g["scheme"], fmt(g.get("dmc_ratio")), fmt(g.get("atari_ratio")),
          f"{fmt(g.get('dmc_encode_us_per_frame'), '.1f')} ({fmt(g.get('dmc_encode_us_worst'), '.1f')})",
          fmt(g.get("dmc_decode_mbps"), ".0f"), fmt(g.get("atari_decode_mbps"), ".0f"),
          fmt(g.get("dmc_sample_ms_1t")), fmt(g.get("dmc_sample_ms_2t")),
          fmt(g.get("atari_sample_ms_1t")), fmt(g.get("dmc_copy_ms"))] for g in summary])
    if base is not None:
        print(f"\nuncompressed fused sample(B, augment=shift+overlay), DMControl frames: "
              f"{base['sample_ms_1t']:.2f} ms on 1 thread, {base['sample_ms_2t']:.2f} ms on 2")
    print("\n### Targets (sample: estimated as uncompressed + the decode work, x the uncompressed time)\n")
    harness.print_md_table(
        ["codec", "scheme", "fast", "est. 1t (<= 1.5)", "est. 2t (<= 1.25)", "small", "est. 2t (<= 3)"],
        "llcrrcr",
        [[v["codec"], v["scheme"], "yes" if v["fast"] else "no", fmt(v.get("fast_est_1t")),
          fmt(v.get("fast_est_2t")), "yes" if v["small"] else "no", fmt(v.get("small_est_2t"))]
         for v in checks])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames-dir", default=os.path.join(ROOT, "data", "frames"))
    parser.add_argument("--codecs", default=None, help="comma-separated codec names")
    parser.add_argument("--schemes", default=None, help="comma-separated schemes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--envs", default=None, help="comma-separated environment names (default: all)")
    parser.add_argument("--no-uncompressed", action="store_true",
                        help="skip timing the uncompressed buffer's sample")
    args = harness.parse_args(parser, argv, quick_help="4 codecs, 4 schemes, 3 repeats")
    args.codecs = args.codecs.split(",") if args.codecs else (QUICK_CODECS if args.quick else DEFAULT_CODECS)
    args.schemes = args.schemes.split(",") if args.schemes else (QUICK_SCHEMES if args.quick else DEFAULT_SCHEMES)
    if args.quick:
        args.repeats = min(args.repeats, 3)
    index_path = os.path.join(args.frames_dir, "index.json")
    if not os.path.exists(index_path):
        raise SystemExit(f"{index_path} is missing: run benchmarks/capture_frames.py first")
    if not os.access(bench_binary(), os.X_OK):
        raise SystemExit(f"{bench_binary()} is missing: ninja -C build obsaug_codec_bench")
    with open(index_path) as f:
        index = json.load(f)
    if args.envs:
        index = {k: v for k, v in index.items() if k in args.envs.split(",")}
    env = harness.environment(codecs=args.codecs, schemes=args.schemes, repeats=args.repeats,
                              batch=args.batch, bench=bench_binary())
    harness.print_header(env)
    t0 = time.time()
    rows = []
    for name, entry in index.items():
        rows += run_environment(name, entry, args.frames_dir, args)
        print(f"{name}: done ({time.time() - t0:.0f} s, load {harness.loadavg_str(harness.loadavg())})",
              flush=True)
    base = None if args.no_uncompressed else uncompressed_sample_ms(args.frames_dir, index, args.batch,
                                                                   args.seed, 2 * args.repeats)
    summary = summarize(rows)
    checks = verdicts(summary, base)
    print_environment_tables(rows)
    print_summary(summary, base, checks)
    env["loadavg_end"] = harness.loadavg()
    print(f"\nload average at the end: {harness.loadavg_str(env['loadavg_end'])}; {time.time() - t0:.0f} s")
    if args.json:
        harness.write_json(args.json, {"env": env, "rows": rows, "summary": summary,
                                       "uncompressed": base, "verdicts": checks})
    return 0


if __name__ == "__main__":
    sys.exit(main())
