#!/usr/bin/env python3
"""obsaug.distributed benchmark: a sharded sample against a local one, same run.

    .venv/bin/python benchmarks/bench_distributed.py [--ranks 2 3] [--batch 256] [--rounds 30]

Launches itself under torchrun (gloo over loopback, CPU) once per rank count.
Every rank fills its shard with --frames synthetic frames (3, 84, 84) uint8
(episodes of 500 steps, action (6,) float32, stack 3) and builds an Engine
with DrQ's shift (pad 4, replicate; uint8 output); two ShardedReplayBuffers
share that shard, one per transport. Then, in interleaved rounds (barrier
before each timed call): (local) ``shard.local.sample(B, augment=engine)`` -
this rank's own ReplayBuffer, no communication; (shared_memory) and
(all_to_all) ``sharded.sample(B, augment=engine)`` - B draws from the union
of all shards, the owners gathering and augmenting into a batch slot of the
requester's /dev/shm region, at the draw positions (returned without a
copy), or into a send buffer (then one all_to_all_single). The loop keeps
the last batch while it makes the next, as a training loop does. Rank 0
prints, per method, the median and the minimum of the rounds (each the slowest rank's), the ratios to local, and the bytes each
rank sent to the others per sampled transition, next to the augmented obs +
next_obs bytes of one transition (the payload; the rest is the row's action,
reward, discount, index and weight), and the floor of the all_to_all path:
one bare all_to_all_single of the batch's augmented bytes, split evenly.
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
            print("median (min) of the rounds, ms; each the slowest rank's\n")
            print("| ranks | local | shared_memory | ratio | all_to_all | ratio "
                  "| bare all_to_all | bytes sent per transition: shared_memory, all_to_all "
                  "| augmented obs + next_obs bytes |")
            print("|---|---|---|---|---|---|---|---|---|")
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
                             action_shape=(6,), seed=0, transport="shared_memory")
    g = torch.Generator().manual_seed(rank)
    bank = torch.randint(0, 256, (64, 3, 84, 84), dtype=torch.uint8, generator=g)
    for t in range(args.frames):
        if t % 500 == 0:
            rb.add_first(bank[t % 64])
        else:
            rb.add(torch.zeros(6), 1.0, bank[t % 64], terminated=(t % 500 == 499))
    sharded = {"shared_memory": rb,
               "all_to_all": ShardedReplayBuffer(0, (), _local=rb.local, transport="all_to_all")}
    engine = obsaug.Engine.from_torch_distributed(
        {"device": "cpu", "seed": 0, "frames": {"stack": 3, "channels": 3, "height": 84,
                                                "width": 84},
         "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}]})
    times = {name: [] for name in ("local", *sharded)}
    for _ in range(3):  # warm-up
        rb.local.sample(args.batch, augment=engine)
        for buffer in sharded.values():
            buffer.sample(args.batch, augment=engine)
    sent_before = {name: b.bytes_sent for name, b in sharded.items()}
    for i in range(args.rounds):
        order = ["local", *sharded]
        order = order[i % 3:] + order[:i % 3]  # each method in each place of the round
        for name in order:
            dist.barrier()
            t0 = time.perf_counter()
            if name == "local":
                rb.local.sample(args.batch, augment=engine)
            else:
                batch = sharded[name].sample(args.batch, augment=engine)
            times[name].append((time.perf_counter() - t0) * 1e3)
    per_transition = [(b.bytes_sent - sent_before[name]) / (args.rounds * args.batch)
                      for name, b in sharded.items()]
    payload = (batch["obs"][0].nbytes + batch["next_obs"][0].nbytes)
    # the floor of the all_to_all path: one bare all_to_all_single of as many bytes
    chunk = args.batch * payload // world
    send, recv = (torch.ones(chunk * world, dtype=torch.uint8),
                  torch.empty(chunk * world, dtype=torch.uint8))
    times["bare"] = []
    for _ in range(args.rounds):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send)
        times["bare"].append((time.perf_counter() - t0) * 1e3)
    names = ("local", "shared_memory", "all_to_all", "bare")
    mine = torch.tensor([f(times[n]) for n in names for f in (statistics.median, min)]
                        + per_transition, dtype=torch.float64)
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    if rank == 0:
        slowest = torch.stack(every).max(0).values.tolist()
        sent = torch.stack(every).mean(0).tolist()[-2:]
        med = {n: slowest[2 * i] for i, n in enumerate(names)}
        low = {n: slowest[2 * i + 1] for i, n in enumerate(names)}
        cell = {n: f"{med[n]:.2f} ({low[n]:.2f})" for n in names}
        ratio = {n: f"{med[n] / med['local']:.2f} ({low[n] / low['local']:.2f})"
                 for n in names}
        print(f"| {world} | {cell['local']} | {cell['shared_memory']} | "
              f"{ratio['shared_memory']} | {cell['all_to_all']} | {ratio['all_to_all']} | "
              f"{cell['bare']} | {sent[0]:.0f}, {sent[1]:.0f} | {payload} |", flush=True)
    for buffer in sharded.values():
        buffer.close()
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
