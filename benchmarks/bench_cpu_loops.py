#!/usr/bin/env python3
"""The CPU's sets of loops side by side (README, "The CPU's sets of loops").

OBSAUG_CPU_LOOPS is read when the library loads, so each set this CPU has
(baseline, avx2, avx512) runs in a child process of its own. Each child
times, with the harness's rotated rounds, a copy of the batch (the floor of
issue 15's targets) and the in-place shift pad 4 + overlay at each alpha on
[B, S*C, H, W] uint8 with a pool of 1024 images. The children run in turn,
the order of the sets rotated each round, so that the machine's noise hits
every set alike; the table gives, per set, the median over the children of
their median ms, 'x copy' (t_copy / t, in the same child) and the speedup
over the avx2 set (t_avx2 / t).

  PYTHONPATH=python .venv/bin/python benchmarks/bench_cpu_loops.py
  PYTHONPATH=python .venv/bin/python benchmarks/bench_cpu_loops.py --batch 1024 --threads 2
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

import harness

obsaug = harness.import_obsaug()

SETS = ["baseline", "avx2", "avx512"]


def sets_on_this_cpu():
    """The sets this CPU has, narrowest first (the library runs the last)."""
    return SETS[:SETS.index(obsaug._C.cpu_loops()) + 1]


def measure_child(args) -> dict:
    """This process's set: {"loops": name, "ms": {method: median ms}}."""
    torch.set_num_threads(args.threads)
    sc, h, w = (int(v) for v in args.frames.lower().split("x"))
    c = 3 if sc % 3 == 0 else 1
    g = torch.Generator().manual_seed(args.seed + args.batch)
    obs = torch.randint(0, 256, (args.batch, sc, h, w), dtype=torch.uint8, generator=g)
    src, dst = obs.clone(), torch.empty_like(obs)
    pool = torch.randint(0, 256, (1024, c, h, w), dtype=torch.uint8, generator=g)
    step = [0]

    def in_place(alpha):
        ops = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": alpha}]

        def call():
            step[0] += 1
            obsaug.ops.augment(obs, pool, ops=ops, seed=args.seed, step=step[0], inplace=True)
        return call

    methods = [harness.Method("copy", lambda: dst.copy_(src))]
    methods += [harness.Method(f"alpha {a:g}", in_place(a)) for a in args.alphas]
    harness.run_rounds(methods, args.child_rounds)
    return {"loops": obsaug._C.cpu_loops(),
            "ms": {m.key: harness.median(m) * 1e3 for m in methods}}


def run_child(args, setting: str) -> dict:
    env = dict(os.environ, OBSAUG_CPU_LOOPS=setting)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--batch", str(args.batch),
           "--frames", args.frames, "--threads", str(args.threads), "--child-rounds",
           str(args.child_rounds), "--seed", str(args.seed), "--alphas",
           *[str(a) for a in args.alphas]]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"the {setting} child failed:\n{run.stderr[-3000:]}")
    result = json.loads(run.stdout.strip().splitlines()[-1])
    if result["loops"] != setting:
        raise SystemExit(f"asked for {setting}, the child ran {result['loops']}")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--frames", default="9x84x84", help="S*C x H x W")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--alphas", type=float, nargs="+", default=[0.5, 0.3],
                   help="the overlay's alpha (0.5 blends with one pavgb, others by 16-bit lanes)")
    p.add_argument("--rounds", type=int, default=6, help="children per set")
    p.add_argument("--child-rounds", type=int, default=7, help="rounds inside each child")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = harness.parse_args(p, argv)
    if args.child:
        print(json.dumps(measure_child(args)))
        return 0

    torch.set_num_threads(args.threads)
    env = harness.environment(batch=args.batch, frames=args.frames)
    harness.print_header(env)
    sets = sets_on_this_cpu()
    print(f"sets of loops on this CPU: {', '.join(sets)}; in place shift pad 4 + overlay, "
          f"[{args.batch}, {args.frames}] uint8, pool 1024, {args.threads} thread(s); "
          f"{args.rounds} children per set, {args.child_rounds} rounds in each\n")
    t_start = time.perf_counter()
    children = []
    for r in range(args.rounds):
        for setting in harness.rotated(sets, r):
            children.append(run_child(args, setting))
    return harness.finish(children, env, t_start, args.json,
                          lambda rows: report(rows, sets, args.alphas))


def report(children, sets, alphas) -> None:
    """The table: per set, medians over its children."""
    def med(setting, value):
        return statistics.median(value(c["ms"]) for c in children if c["loops"] == setting)

    keys = [f"alpha {a:g}" for a in alphas]
    head = ["loops", "copy ms"] + [f"{k} {col}" for k in keys for col in ("ms", "x copy", "x avx2")]
    rows = []
    for setting in sets:
        row = [setting, f"{med(setting, lambda ms: ms['copy']):.3f}"]
        for k in keys:
            t = med(setting, lambda ms: ms[k])
            x_copy = med(setting, lambda ms: ms["copy"] / ms[k])
            over_avx2 = f"{med('avx2', lambda ms: ms[k]) / t:.2f}x" if "avx2" in sets else "-"
            row += [f"{t:.3f}", f"{x_copy:.2f}", over_avx2]
        rows.append(row)
    harness.print_md_table(head, "l" + "r" * (len(head) - 1), rows)


if __name__ == "__main__":
    sys.exit(main())
