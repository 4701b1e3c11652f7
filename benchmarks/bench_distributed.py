#!/usr/bin/env python3
"""obsaug.distributed benchmark: a sharded sample against a local one, same run.

    .venv/bin/python benchmarks/bench_distributed.py [--ranks 2 3] [--batch 256] [--rounds 30]

Launches itself under torchrun (gloo over loopback, CPU) once per rank count.
Every rank fills its shard with --frames synthetic frames (3, 84, 84) uint8
(episodes of 500 steps, action (6,) float32, stack 3) and builds an Engine
with DrQ's shift (pad 4, replicate; uint8 output). Then, in alternating
rounds (barrier before each timed call): (local) ``shard.local.sample(B,
augment=engine)`` - this rank's own ReplayBuffer, no communication; (sharded)
``shard.sample(B, augment=engine)`` - B draws from the union of all shards,
the owners gathering and augmenting, one all_gather + one all_to_all. Rank 0
prints the medians (the slowest rank's median per method), the ratio, and the
bytes each rank sent to the others per sampled transition, next to the
augmented obs + next_obs bytes of one transition (the payload; the rest is
the row's action, reward, discount, index and weight), and the floor: one
bare all_to_all_single of the batch's augmented bytes, split evenly.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args: argparse.Namespace) -> int:
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "python"),
                                                    env.get("PYTHONPATH")) if p)
    status = 0
    for n in args.ranks:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}",
               f"--master_port={free_port()}", os.path.abspath(__file__), "--worker",
               "--batch", str(args.batch), "--rounds", str(args.rounds),
               "--frames", str(args.frames)]
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("|")]
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr)
            status = 1
        if n == args.ranks[0]:
            print(f"command: {' '.join(sys.argv)}\ntorch threads per rank: "
                  f"{env['OMP_NUM_THREADS']}, cpus: {os.cpu_count()}\n")
            print("| ranks | local sample ms | sharded sample ms | ratio | bare all_to_all ms "
                  "| bytes sent per transition | augmented obs + next_obs bytes |")
            print("|---|---|---|---|---|---|---|")
        print("\n".join(lines), flush=True)
    return status


def worker(args: argparse.Namespace) -> int:
    import torch
    import torch.distributed as dist

    import obsaug
    from obsaug.distributed import ShardedReplayBuffer

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    rb = ShardedReplayBuffer(capacity=args.frames, frame_shape=(3, 84, 84), frame_stack=3,
                             action_shape=(6,), seed=0)
    g = torch.Generator().manual_seed(rank)
    bank = torch.randint(0, 256, (64, 3, 84, 84), dtype=torch.uint8, generator=g)
    for t in range(args.frames):
        if t % 500 == 0:
            rb.add_first(bank[t % 64])
        else:
            rb.add(torch.zeros(6), 1.0, bank[t % 64], terminated=(t % 500 == 499))
    engine = obsaug.Engine.from_torch_distributed(
        {"device": "cpu", "seed": 0, "frames": {"stack": 3, "channels": 3, "height": 84,
                                                "width": 84},
         "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}]})
    local_ms, sharded_ms = [], []
    for _ in range(3):  # warm-up
        rb.local.sample(args.batch, augment=engine)
        rb.sample(args.batch, augment=engine)
    sent_before = rb.bytes_sent
    for _ in range(args.rounds):
        dist.barrier()
        t0 = time.perf_counter()
        rb.local.sample(args.batch, augment=engine)
        local_ms.append((time.perf_counter() - t0) * 1e3)
        dist.barrier()
        t0 = time.perf_counter()
        batch = rb.sample(args.batch, augment=engine)
        sharded_ms.append((time.perf_counter() - t0) * 1e3)
    per_transition = (rb.bytes_sent - sent_before) / (args.rounds * args.batch)
    payload = (batch["obs"][0].nbytes + batch["next_obs"][0].nbytes)
    # the floor: one bare all_to_all_single of as many bytes, split evenly
    chunk = args.batch * payload // world
    send, recv = (torch.ones(chunk * world, dtype=torch.uint8),
                  torch.empty(chunk * world, dtype=torch.uint8))
    bare_ms = []
    for _ in range(args.rounds):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send)
        bare_ms.append((time.perf_counter() - t0) * 1e3)
    mine = torch.tensor([statistics.median(local_ms), statistics.median(sharded_ms),
                         per_transition, statistics.median(bare_ms)], dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if rank == 0:
        local = max(float(t[0]) for t in every)
        sharded = max(float(t[1]) for t in every)
        sent = statistics.mean(float(t[2]) for t in every)
        bare = max(float(t[3]) for t in every)
        print(f"| {world} | {local:.2f} | {sharded:.2f} | {sharded / local:.2f} | {bare:.2f} | "
              f"{sent:.0f} | {payload} |", flush=True)
    engine.close()
    dist.destroy_process_group()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--frames", type=int, default=5000, help="frames per shard")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    return worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    sys.exit(main())
