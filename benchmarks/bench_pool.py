#!/usr/bin/env python3
"""Distractor pool benchmark: augment-call latency with the
background refresh at full speed versus stopped, in the same run.

Each round builds an async obsaug.DistractorPool (--pool images of the frame
size) on the photographs, then times --calls augment calls
  pool.refresh(); obsaug.ops.augment(obs, pool.images, ops=[shift 4, overlay 0.5], inplace=True)
while the decoder threads run unthrottled ("refresh running"), closes the pool
(the workers stop and join; the tensor stays) and times the same calls on the
same tensor without refresh ("refresh stopped"). The per-call latencies of
all rounds are pooled; median and p99 are reported for both, with the decode
rate and the uploads per call the running phase achieved. CUDA calls are
timed with a synchronisation after each call (latency, not throughput).

Example:
  PYTHONPATH=python .venv/bin/python benchmarks/bench_pool.py
  PYTHONPATH=python .venv/bin/python benchmarks/bench_pool.py --intra-op-threads 1  # 2-core machine
  PYTHONPATH=python .venv/bin/python benchmarks/bench_pool.py --threads 2 --device cuda
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

import harness
from harness import ROOT

obsaug = harness.import_obsaug()

OPS = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]


def time_calls(pool_images, obs, calls, refresh, device, first_step):
    """Latency of each call: refresh (when given) + one in-place augment."""
    def call(i):
        if refresh is not None:
            refresh()
        obsaug.ops.augment(obs, pool_images, ops=OPS, seed=1, step=first_step + i, inplace=True)
    return harness.latencies(call, calls, device)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="+", default=[os.path.join(ROOT, "data", "photos")])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--frames", default="9x84x84", help="S*C x H x W of one observation")
    parser.add_argument("--pool", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="decoder threads")
    parser.add_argument("--worker-nice", type=int, default=10,
                        help="decoder threads' niceness above the caller's (0: same priority)")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--intra-op-threads", type=int, default=0,
                        help="torch.set_num_threads for the augment calls (0: torch's default); "
                             "on a small machine leave cores to the decoders")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()

    if args.intra_op_threads > 0:
        torch.set_num_threads(args.intra_op_threads)
    device = torch.device(args.device)
    sc, h, w = (int(v) for v in args.frames.split("x"))
    channels = 3 if sc % 3 == 0 else 1
    obs = torch.randint(0, 256, (args.batch, sc, h, w), dtype=torch.uint8,
                        generator=torch.Generator().manual_seed(0)).to(device)
    running, stopped, rates, uploads_per_call = [], [], [], []
    for r in range(args.rounds):
        pool = obsaug.DistractorPool(sources=args.sources, size=args.pool, image_size=(h, w),
                                     channels=channels, device=args.device,
                                     threads=args.threads, mode="async", progress=False,
                                     worker_nice=args.worker_nice)
        images = pool.images
        time_calls(images, obs, 20, pool.refresh, device, 0)  # warm-up
        before = pool.stats()
        t0 = time.perf_counter()
        running += time_calls(images, obs, args.calls, pool.refresh, device, 1000)
        elapsed = time.perf_counter() - t0
        after = pool.stats()
        rates.append((after["decoded"] - before["decoded"]) / elapsed)
        uploads_per_call.append((after["uploaded"] - before["uploaded"]) / args.calls)
        pool.close()
        time_calls(images, obs, 20, None, device, 0)
        stopped += time_calls(images, obs, args.calls, None, device, 1000)

    rows = {
        "refresh stopped": stopped,
        "refresh running": running,
    }
    env = harness.environment()
    harness.print_header(env)
    print(f"obsaug pool benchmark: {torch.get_num_threads()} intra-op threads, device {device}")
    print(f"batch {args.batch} x {args.frames}, pool {args.pool}, {args.threads} decoder "
          f"thread(s) at nice +{args.worker_nice}, {args.rounds} rounds x {args.calls} calls, ops shift 4 + overlay 0.5")
    print(f"{'phase':<18}{'median ms':>11}{'p99 ms':>10}")
    results = {}
    for name, values in rows.items():
        med, p99 = statistics.median(values) * 1e3, harness.percentile(values, 99) * 1e3
        results[name] = {"median_ms": med, "p99_ms": p99}
        print(f"{name:<18}{med:>11.3f}{p99:>10.3f}")
    change = results["refresh running"]["median_ms"] / results["refresh stopped"]["median_ms"] - 1
    print(f"median change with refresh running: {change * 100:+.1f}% "
          f"(decode rate {statistics.mean(rates):.0f} images/s, "
          f"{statistics.mean(uploads_per_call):.2f} uploads per call)")
    if args.json:
        harness.write_json(args.json, {"environment": env, "args": vars(args), "results": results,
                                       "median_change": change,
                                       "decode_rate": statistics.mean(rates),
                                       "uploads_per_call": statistics.mean(uploads_per_call)})


if __name__ == "__main__":
    main()
