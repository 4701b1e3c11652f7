"""Two (or more) ranks, one obsaug.Engine each: parameters and files per rank.

    torchrun --nproc_per_node=2 examples/distributed.py [--pool-size 16] [--check]

Every rank builds its engine from configs/default.yaml with
``obsaug.Engine.from_torch_distributed``: the engine's Philox key is
``seed + rank`` (rank 0 keeps the configured seed) and its distractor pool
reads only this rank's share of data/photos. Each rank augments the same
fixed batch at the same explicit step, all_gathers (gloo, CPU) a SHA-256 of
the output and its pool's file list, and rank 0 prints whether the ranks drew
different parameters and whether their files are disjoint and together cover
every file. With --check the script exits 1 when any of that fails.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import tempfile

import torch
import torch.distributed as dist

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import obsaug
except ImportError:  # a source checkout without PYTHONPATH or an installed package
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import obsaug


def config_file(args: argparse.Namespace, out_dir: str) -> str:
    """configs/default.yaml with the pool size and refresh threads overridden."""
    with open(os.path.join(ROOT, "configs", "default.yaml"), encoding="utf-8") as f:
        text = f.read()
    text, n_size = re.subn(r"(?m)^(  size:\s*)\d+", rf"\g<1>{args.pool_size}", text)
    text, n_threads = re.subn(r"(?m)^(    threads:\s*)\d+", rf"\g<1>{args.threads}", text)
    text, n_src = re.subn(r"(?m)^(    - )data/photos",
                          rf"\g<1>{os.path.join(ROOT, 'data', 'photos')}", text)
    if (n_size, n_threads, n_src) != (1, 1, 1):
        raise SystemExit("configs/default.yaml changed shape: pool.size, pool.refresh.threads "
                         "or the data/photos source not found")
    path = os.path.join(out_dir, "default.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-size", type=int, default=16, help="pool.size (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="pool.refresh.threads (default 1)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless parameters differ and the files are disjoint "
                             "and cover every file")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with tempfile.TemporaryDirectory(prefix=f"obsaug-rank{rank}-") as tmp:
        path = config_file(args, tmp)
        with obsaug.Engine.from_torch_distributed(path) as engine:
            assert (engine.rank, engine.world_size) == (rank, world)
            # The same input on every rank, augmented at the same explicit step:
            # any difference comes from the rank's key (and pool).
            g = torch.Generator().manual_seed(1234)
            obs = torch.randint(0, 256, (args.batch, 9, 84, 84), dtype=torch.uint8, generator=g)
            out = engine.augment(obs, step=0)
            engine.augment(obs)  # and a normal call with the engine's own counter
            mine = {
                "rank": rank,
                "seed": engine.seed,
                "digest": hashlib.sha256(out.numpy().tobytes()).hexdigest(),
                "files": engine.pool_files(),
            }
            print(f"rank {rank}/{world}: seed {engine.seed}, {len(mine['files'])} files, "
                  f"output sha256 {mine['digest'][:16]}", flush=True)
        gathered = [None] * world
        dist.all_gather_object(gathered, mine)

        ok = True
        if rank == 0:
            with obsaug.Engine(path) as whole:  # rank 0 of 1: every file
                all_files = set(whole.pool_files())
            digests = [g["digest"] for g in gathered]
            differ = len(set(digests)) == world
            seen, overlap = set(), set()
            for g in gathered:
                files = set(g["files"])
                overlap |= seen & files
                seen |= files
            disjoint = not overlap
            covers = seen == all_files
            nonempty = all(g["files"] for g in gathered)
            print(f"parameters differ across ranks: {'yes' if differ else 'NO'}")
            print(f"pool files disjoint: {'yes' if disjoint else 'NO'}"
                  + ("" if disjoint else f" ({len(overlap)} shared)"))
            print(f"union of pool files is all {len(all_files)} files: "
                  f"{'yes' if covers else 'NO'}")
            ok = differ and disjoint and covers and nonempty
            print("VERDICT: " + ("OK" if ok else "FAIL"), flush=True)
        flag = [ok]
        dist.broadcast_object_list(flag, src=0)
        ok = flag[0]
    dist.destroy_process_group()
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
