"""N ranks, one replay buffer: obsaug.distributed.ShardedReplayBuffer in a DrQ-v2 loop.

    torchrun --nproc_per_node=3 examples/distributed_replay.py --steps 2000

Every rank steps its own environment (DMControl when dm_control is installed,
examples/pixel_envs.CartPolePixels otherwise, as examples/drqv2_agent.py
chooses) and adds its frames to its own shard; ``sample(B, augment=engine)``
is a collective that every rank calls at the same steps and that returns B
transitions drawn from the union of all ranks' shards, augmented (DrQ's shift,
float32 v/255 - 0.5) by the rank holding the frames, with this rank's engine
key and step. Each rank trains its own DrQ-v2 agent on its batches (one
training loop per rank). gloo for CPU shards, NCCL for CUDA ones
(``--device cuda``, one GPU per rank: cuda:LOCAL_RANK).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Tuple

import numpy as np
import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "python"))
sys.path.insert(0, HERE)
import obsaug  # noqa: E402
from obsaug.distributed import ShardedReplayBuffer  # noqa: E402
from drqv2_agent import (  # noqa: E402  (the agent example's networks, config and acting loop)
    FRAME_STACK, N_STEP, SIZE, DrQV2, drq_engine_config, linear_schedule, make_env, run_steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000, help="environment steps per rank")
    ap.add_argument("--domain", default="cheetah")
    ap.add_argument("--task", default="run")
    ap.add_argument("--batch", type=int, default=128, help="transitions per rank per update")
    ap.add_argument("--capacity", type=int, default=50_000, help="frames per shard")
    ap.add_argument("--seed-steps", type=int, default=500, help="random actions first")
    ap.add_argument("--update-every", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed + rank)
    np.random.seed(args.seed + rank)

    env, _, env_name = make_env(args.domain, args.task, args.seed + 1000 * rank, 2)
    rb = ShardedReplayBuffer(capacity=min(args.capacity, args.steps + 1000),
                             frame_shape=(3, SIZE, SIZE), frame_stack=FRAME_STACK,
                             action_shape=(env.action_dim,), device=device, n_step=N_STEP,
                             seed=args.seed)  # the same buffer seed on every rank
    # key seed + rank: ranks draw apart
    engine = obsaug.Engine.from_torch_distributed(drq_engine_config(device, args.seed))
    agent = DrQV2(env.action_dim, device)
    std = linear_schedule(1.0, 0.1, max(1, args.steps // 2))
    print(f"rank {rank}/{world}: {env_name} on {device}; {rb}", flush=True)

    owners = torch.zeros(world, dtype=torch.int64)
    updates = 0

    def on_episode(step: int, episode_return: float, losses: Tuple[float, float],
                   rate: float) -> None:
        print(f"rank {rank} step {step:6d}  return {episode_return:8.1f}  "
              f"critic {losses[0]:.3f}  actor {losses[1]:.3f}  {rate:.1f} steps/s", flush=True)

    def update(step: int) -> Tuple[float, float]:
        # every rank reaches the same steps: the collective sample is called in step
        nonlocal owners, updates
        batch = rb.sample(args.batch, augment=engine)
        owners += torch.bincount((batch["indices"] // rb.capacity).cpu(), minlength=world)
        losses = agent.update(batch, std(step))
        updates += 1
        return losses

    run_steps(env, rb, agent, std, args.steps, args.seed_steps, args.update_every, update,
              on_episode)
    share = ", ".join(f"rank {r} {int(n)}" for r, n in enumerate(owners))
    print(f"rank {rank}: {updates} updates; transitions drawn from {share}", flush=True)
    engine.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
