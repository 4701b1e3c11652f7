#!/usr/bin/env python3
"""Prioritized replay latency against buffer size (DESIGN.md sections 5 and 9):
sample(B) and update_priorities(B) at N = 64 Ki, 1 Mi and 8 Mi slots, side by
side in one run, and how each scales from the smallest N to the largest.

Implementations, each on the CPU, alpha 0.6, beta 0.4, every slot filled and
given a random priority in [0.01, 10) before timing:

  obsaug      obsaug.ReplayBuffer(prioritized=True): a sum tree and a min tree
              over the slots (docs/replay.md). Frames (1, 1, 1) uint8, frame
              stack 1, 1-step, a scalar float32 action, filled by batched adds
              of 4096 envs (one open episode each, so every slot but the last
              of each env is a valid transition). sample(B) is the whole call:
              the B draws, importance weights, and the batch (obs, next_obs,
              action, reward, discount, indices, weights) gathered.
  torchrl     torchrl.data PrioritizedSampler(N, alpha, beta), its C++ segment
              trees (float32, the default), used directly on a
              LazyTensorStorage of N entries of one uint8: sample(storage, B)
              returns indices and weights only (no data gathered).
  cpprb       cpprb.PrioritizedReplayBuffer(N, {"obs": (1,) uint8}): its C++
              segment trees; sample(B, beta) returns the obs, indexes and
              weights. Skipped, the reason printed, when cpprb does not import
              (requirements.txt lists it as benchmark-only).

update_priorities(B) gets B indices of an earlier sample and new priorities
(a pool of 64 such pairs prepared before timing, used in turn): the tree paths
it rewrites are cold, as after a long step between. step(B) is a learner's
order: sample(B), then update_priorities of the B indices it just returned
(new priorities from the same pool), timed as one.

Method: torch threads 1 (--threads), harness.run_rounds (calibrated calls per
measurement, rounds rotated so that noise hits all methods alike), median
seconds per call. Every size is built first and all are measured in the same
rounds, so that a change of load on a shared machine hits every N alike and
the N-to-N ratios (the scaling table) compare like with like.

    .venv/bin/python benchmarks/bench_prioritized.py            # 64 Ki, 1 Mi, 8 Mi
    .venv/bin/python benchmarks/bench_prioritized.py --quick    # 64 Ki, 1 Mi
    python3 benchmarks/bench_prioritized.py --device cuda --sizes 65536 1048576   # the GPU's tree
"""
from __future__ import annotations

import argparse
import gc
import importlib.metadata
import sys
import time

import numpy as np
import torch

import harness

ALPHA, BETA = 0.6, 0.4
POOL = 64  # prepared (indices, priorities) pairs for the timed updates
OPS = ("sample", "update", "step")
ENVS = 4096


def obsaug_methods(obsaug, n, batch, rng, device):
    rb = obsaug.ReplayBuffer(capacity=n, frame_shape=(1, 1, 1), frame_stack=1, action_shape=(),
                             device=device, n_step=1, prioritized=True, alpha=ALPHA, beta=BETA,
                             seed=1)
    envs = min(ENVS, n)
    frames = torch.zeros(envs, 1, 1, 1, dtype=torch.uint8)
    rb.add_first(frames)
    actions, rewards = torch.zeros(envs), torch.zeros(envs)
    no = torch.zeros(envs, dtype=torch.bool)
    for _ in range(n // envs - 1):
        rb.add(actions, rewards, frames, no, no)
    chunk = 1 << 20
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(n, start + chunk), device=device)
        rb.update_priorities(idx, torch.from_numpy(rng.uniform(0.01, 10, len(idx))).to(device))
    pool = [(rb.sample(batch)["indices"],
             torch.from_numpy(rng.uniform(0.01, 10, batch)).to(device)) for _ in range(POOL)]
    turn = iter(range(1 << 62))

    def update():
        idx, pri = pool[next(turn) % POOL]
        rb.update_priorities(idx, pri)

    def step():
        rb.update_priorities(rb.sample(batch)["indices"], pool[next(turn) % POOL][1])

    return rb, {"sample": lambda: rb.sample(batch), "update": update, "step": step}


def torchrl_methods(n, batch, rng):
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage
    from torchrl.data.replay_buffers.samplers import PrioritizedSampler

    storage = LazyTensorStorage(n)
    storage.set(torch.arange(n), TensorDict({"obs": torch.zeros(n, 1, dtype=torch.uint8)},
                                            batch_size=[n]))
    sampler = PrioritizedSampler(n, alpha=ALPHA, beta=BETA)
    sampler.extend(torch.arange(n))
    sampler.update_priority(torch.arange(n), torch.from_numpy(rng.uniform(0.01, 10, n)).float())
    pool = [(sampler.sample(storage, batch)[0],
             torch.from_numpy(rng.uniform(0.01, 10, batch)).float()) for _ in range(POOL)]
    turn = iter(range(1 << 62))

    def update():
        idx, pri = pool[next(turn) % POOL]
        sampler.update_priority(idx, pri)

    def step():
        sampler.update_priority(sampler.sample(storage, batch)[0], pool[next(turn) % POOL][1])

    return (storage, sampler), {"sample": lambda: sampler.sample(storage, batch),
                                "update": update, "step": step}


def cpprb_methods(cpprb, n, batch, rng):
    rb = cpprb.PrioritizedReplayBuffer(n, {"obs": {"shape": 1, "dtype": np.uint8}}, alpha=ALPHA)
    chunk = 1 << 20
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        rb.add(obs=np.zeros((k, 1), dtype=np.uint8), priorities=rng.uniform(0.01, 10, k))
    pool = [(rb.sample(batch, beta=BETA)["indexes"], rng.uniform(0.01, 10, batch))
            for _ in range(POOL)]
    turn = iter(range(1 << 62))

    def update():
        idx, pri = pool[next(turn) % POOL]
        rb.update_priorities(idx, pri)

    def step():
        rb.update_priorities(rb.sample(batch, beta=BETA)["indexes"], pool[next(turn) % POOL][1])

    return rb, {"sample": lambda: rb.sample(batch, beta=BETA), "update": update, "step": step}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1 << 16, 1 << 20, 1 << 23])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--device", default="cpu",
                   help="obsaug's buffer on this device (cuda: its tree and draws on the GPU, "
                        "timed with CUDA events; TorchRL and cpprb stay on the CPU)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: on a shared machine a parallel region "
                        "waits for a busy core)")
    args = harness.parse_args(p, argv, quick_help="sizes 64 Ki and 1 Mi only, 5 rounds")
    if args.quick:
        args.sizes, args.rounds = [1 << 16, 1 << 20], 5
    torch.set_num_threads(args.threads)
    obsaug = harness.import_obsaug()
    if not hasattr(obsaug, "ReplayBuffer"):
        print("obsaug was built without the replay buffer")
        return 1
    device = harness.usable_device(args.device, obsaug, select=True)
    if device is None:
        return 1
    try:
        import cpprb
        cpprb_version = importlib.metadata.version("cpprb")
    except ImportError as e:
        cpprb, cpprb_version = None, None
        print(f"skipping cpprb: {e} (pip install cpprb; requirements.txt pins it)")
    try:
        import torchrl
        torchrl_version = torchrl.__version__
    except ImportError as e:
        torchrl, torchrl_version = None, None
        print(f"skipping torchrl: {e}")
    env = harness.environment(batch=args.batch, sizes=args.sizes, device=str(device),
                              torchrl=torchrl_version, cpprb=cpprb_version)
    harness.print_header(env)
    print(f"batch {args.batch}, alpha {ALPHA}, beta {BETA}, rounds {args.rounds}; obsaug on "
          f"{device}; torchrl {torchrl_version}, cpprb {cpprb_version} (CPU)\n")
    t_start = time.perf_counter()
    libs = ["obsaug"] + (["torchrl"] if torchrl else []) + (["cpprb"] if cpprb else [])
    built, methods = {}, []
    for n in args.sizes:
        rng = np.random.default_rng(args.seed)
        t0 = time.perf_counter()
        built[n, "obsaug"] = obsaug_methods(obsaug, n, args.batch, rng, device)
        if torchrl:
            built[n, "torchrl"] = torchrl_methods(n, args.batch, rng)
        if cpprb:
            built[n, "cpprb"] = cpprb_methods(cpprb, n, args.batch, rng)
        print(f"N = {n}: filled in {time.perf_counter() - t0:.0f} s")
        methods += [harness.Method(f"{lib} {op} N={n}", fn, lib=lib, op=op, n=n)
                    for lib in libs for op, fn in built[n, lib][1].items()]
    # On a GPU every method is timed with CUDA events (a CPU method's events
    # bracket its wall time, the GPU being idle then).
    harness.run_rounds(methods, args.rounds, device if device.type == "cuda" else None)
    rows = [{"n": m.info["n"], "lib": m.info["lib"], "op": m.info["op"],
             "us": harness.median(m) * 1e6, "iqr_us": harness.iqr(m.times) * 1e6}
            for m in methods]
    built.clear()
    gc.collect()

    def us(n, lib, op):
        return next((r["us"] for r in rows if (r["n"], r["lib"], r["op"]) == (n, lib, op)), None)

    print("\nmedian microseconds per call (lower is better); x = the other / obsaug\n")
    header = ["N", "op"] + [f"{lib} us" for lib in libs] + [f"{lib} / obsaug" for lib in libs[1:]]
    table = []
    for n in args.sizes:
        for op in OPS:
            mine = us(n, "obsaug", op)
            table.append([f"{n:,}", f"{op}({args.batch})"]
                         + [f"{us(n, lib, op):.1f}" for lib in libs]
                         + [f"{us(n, lib, op) / mine:.2f}x" for lib in libs[1:]])
    harness.print_md_table(header, "lr" + "r" * (len(header) - 2), table)
    small, large = args.sizes[0], args.sizes[-1]
    print(f"\nscaling: N = {large:,} over N = {small:,} (1.00 = flat)\n")
    harness.print_md_table(["op"] + libs, "l" + "r" * len(libs),
                           [[f"{op}({args.batch})"]
                            + [f"{us(large, lib, op) / us(small, lib, op):.2f}" for lib in libs]
                            for op in OPS])
    print(f"\n(wall time {time.perf_counter() - t_start:.0f} s, "
          f"load average now {harness.loadavg_str(harness.loadavg())})")
    if args.json:
        harness.write_json(args.json, {"environment": env, "results": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
