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
import collections
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir, "python"))
sys.path.insert(0, HERE)
import obsaug  # noqa: E402
from obsaug.distributed import ShardedReplayBuffer  # noqa: E402
from drqv2_agent import FRAME_STACK, N_STEP, SIZE, DrQV2, linear_schedule, make_env  # noqa: E402


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
    engine = obsaug.Engine.from_torch_distributed({  # key seed + rank: ranks draw apart
        "device": str(device), "seed": args.seed,
        "frames": {"stack": FRAME_STACK, "channels": 3, "height": SIZE, "width": SIZE},
        "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}],
        "output": {"dtype": "float32", "scale": 1.0 / 255.0, "bias": -0.5}})
    agent = DrQV2(env.action_dim, device)
    std = linear_schedule(1.0, 0.1, max(1, args.steps // 2))
    print(f"rank {rank}/{world}: {env_name} on {device}; {rb}", flush=True)

    frames = collections.deque(maxlen=FRAME_STACK)

    def start() -> None:
        f = env.reset()
        rb.add_first(f)
        frames.extend([torch.from_numpy(f)] * FRAME_STACK)

    start()
    episode_return, losses, updates = 0.0, (float("nan"), float("nan")), 0
    owners = torch.zeros(world, dtype=torch.int64)
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        if step <= args.seed_steps:
            action = np.random.uniform(-1, 1, env.action_dim).astype(np.float32)
        else:
            action = agent.act(torch.cat(list(frames)), std(step), explore=True)
        frame, reward, terminated, truncated = env.step(action)
        rb.add(action, float(reward), frame, terminated=terminated, truncated=truncated)
        frames.append(torch.from_numpy(frame))
        episode_return += reward
        if terminated or truncated:
            print(f"rank {rank} step {step:6d}  return {episode_return:8.1f}  "
                  f"critic {losses[0]:.3f}  actor {losses[1]:.3f}  "
                  f"{step / (time.perf_counter() - t0):.1f} steps/s", flush=True)
            episode_return = 0.0
            start()
        # every rank reaches the same steps: the collective sample is called in step
        if step > min(args.seed_steps, args.steps // 4) and step % args.update_every == 0:
            batch = rb.sample(args.batch, augment=engine)
            owners += torch.bincount((batch["indices"] // rb.capacity).cpu(), minlength=world)
            losses = agent.update(batch, std(step))
            updates += 1
    share = ", ".join(f"rank {r} {int(n)}" for r, n in enumerate(owners))
    print(f"rank {rank}: {updates} updates; transitions drawn from {share}", flush=True)
    engine.close()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
