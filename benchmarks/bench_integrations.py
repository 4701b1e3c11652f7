#!/usr/bin/env python3
"""obsaug in the RL libraries people use: SB3 and TorchRL, side by side in one run.

    .venv/bin/python benchmarks/bench_integrations.py [--capacity 3000] [--rounds 7]

(a) SB3, SAC on pixels, VecFrameStack(3) of 3x84x84 frames (obs [9, 84, 84] uint8):
    - replay memory for the same capacity: obsaug.sb3.ReplayBuffer (frames once,
      stacks at sample time) against SB3's own ReplayBuffer (obs and next_obs
      stacked); bytes of the arrays each allocates (target <= 0.4x);
    - per update: obsaug.sb3's sample(256) with DrQ's random shift fused in the
      gather, against SB3's sample(256) with no augmentation at all (target <= 1x).
      Both buffers hold the same --capacity transitions (the same frames, episodes
      of 250 steps), on the CPU.
(b) TorchRL: a batch of 256 stacks (pixels and ("next", "pixels") [256, 9, 84, 84]
    uint8, as CatFrames' rb transform rebuilds them) augmented by
    obsaug.torchrl.Augment (shift pad 4 replicate, independent draws per key), against
    the same augmentation as kornia (ReplicationPad2d(4) + kornia.augmentation.RandomCrop
    (84), on float input, as DrQ's code) and torchvision.transforms.v2 (RandomCrop(84,
    padding=4, padding_mode="edge") per sample: v2 draws one crop per call). Target
    obsaug >= 20x the baselines.

Timing: ``time_side_by_side`` (one small function, to be ported to the shared
harness): every round runs each method ``reps`` times in a rotated order, after
one warm-up call; the figure is the median over rounds of the mean time per call.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Callable, Dict

import numpy as np
import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))
sys.path.insert(0, os.path.join(ROOT, "python"))
import obsaug  # noqa: E402

B, S, C, H = 256, 3, 3, 84


def time_side_by_side(methods: Dict[str, Callable[[], object]], rounds: int,
                      reps: int) -> Dict[str, float]:
    """Median over ``rounds`` of the mean seconds per call; the order rotates each round."""
    names = list(methods)
    for name in names:
        methods[name]()                                   # warm-up
    samples: Dict[str, list] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            t0 = time.perf_counter()
            for _ in range(reps):
                methods[name]()
            samples[name].append((time.perf_counter() - t0) / reps)
    return {name: statistics.median(v) for name, v in samples.items()}


def shift_engine(seed: int = 0) -> "obsaug.Engine":
    return obsaug.Engine({"device": "cpu", "seed": seed,
                          "frames": {"stack": S, "channels": C, "height": H, "width": H},
                          "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}]})


def bench_sb3(capacity: int, rounds: int) -> None:
    from gymnasium import spaces
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    import obsaug.sb3
    obs_space = spaces.Box(0, 255, (S * C, H, H), np.uint8)
    act_space = spaces.Box(-1, 1, (6,), np.float32)
    ours = obsaug.sb3.ReplayBuffer(capacity, obs_space, act_space, device="cpu",
                                   augment={"device": "cpu", "seed": 0,
                                            "frames": {"stack": S, "channels": C,
                                                       "height": H, "width": H},
                                            "pipeline": [{"op": "shift", "pad": 4}]})
    sb3 = SB3ReplayBuffer(capacity, obs_space, act_space, device="cpu")
    sb3_bytes = sum(a.nbytes for a in (sb3.observations, sb3.next_observations, sb3.actions,
                                       sb3.rewards, sb3.dones, sb3.timeouts))
    ours_bytes = ours.memory_bytes["total"]
    # the same stream into both: VecFrameStack-style stacks, episodes of 250 steps
    rng = np.random.default_rng(0)
    bank = rng.integers(0, 256, (64, C, H, H), dtype=np.uint8)
    stack = np.concatenate([np.zeros((6, H, H), np.uint8), bank[0]])
    for t in range(capacity - capacity // 250 - 1):
        nxt = np.concatenate([stack[C:], bank[(t + 1) % 64]])
        done = np.array([t % 250 == 249])
        infos = [{"TimeLimit.truncated": bool(done[0])}]
        action = rng.uniform(-1, 1, (1, 6)).astype(np.float32)
        reward = np.array([1.0], np.float32)
        for rb in (ours, sb3):
            rb.add(stack[None], nxt[None], action, reward, done, infos)
        stack = (np.concatenate([np.zeros((6, H, H), np.uint8), bank[t % 64]]) if done[0]
                 else nxt)
    times = time_side_by_side({
        "SB3 ReplayBuffer.sample(256), no augmentation": lambda: sb3.sample(B),
        "obsaug.sb3 sample(256) + shift (fused)": lambda: ours.sample(B),
    }, rounds, reps=10)
    t_sb3, t_ours = times["SB3 ReplayBuffer.sample(256), no augmentation"], \
        times["obsaug.sb3 sample(256) + shift (fused)"]
    print(f"\n(a) SB3 SAC on pixels, frame_stack {S}, capacity {capacity}, B = {B}, "
          f"{torch.get_num_threads()} torch threads")
    print("| | SB3 ReplayBuffer | obsaug.sb3.ReplayBuffer | ratio | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| replay memory | {sb3_bytes / 2**20:.1f} MiB | {ours_bytes / 2**20:.1f} MiB | "
          f"{ours_bytes / sb3_bytes:.3f}x | <= 0.4x |")
    print(f"| time per update | {t_sb3 * 1e3:.2f} ms (sample, no aug) | {t_ours * 1e3:.2f} ms "
          f"(sample + shift) | {t_ours / t_sb3:.2f}x | <= 1x |")


def bench_torchrl(rounds: int) -> None:
    from tensordict import TensorDict

    from obsaug.torchrl import Augment
    g = torch.Generator().manual_seed(0)
    batch = TensorDict({"pixels": torch.randint(0, 256, (B, S * C, H, H), generator=g,
                                                dtype=torch.uint8),
                        "next": {"pixels": torch.randint(0, 256, (B, S * C, H, H), generator=g,
                                                         dtype=torch.uint8)}}, batch_size=[B])
    aug = Augment(shift_engine())
    methods = {"obsaug.torchrl.Augment": lambda: aug(batch.clone(False))}
    baselines = []
    try:
        import kornia.augmentation as K
        pad, crop = torch.nn.ReplicationPad2d(4), K.RandomCrop((H, H))

        def kornia_shift():
            td = batch.clone(False)
            for key in ("pixels", ("next", "pixels")):
                td.set(key, crop(pad(td.get(key).float())))
            return td
        methods["kornia pad + RandomCrop (float)"] = kornia_shift
        baselines.append("kornia pad + RandomCrop (float)")
    except ImportError as e:
        print(f"(b) kornia skipped: {e}")
    try:
        from torchvision.transforms import v2
        tv_crop = v2.RandomCrop(H, padding=4, padding_mode="edge")

        def torchvision_shift():
            td = batch.clone(False)
            for key in ("pixels", ("next", "pixels")):
                td.set(key, torch.stack([tv_crop(x) for x in td.get(key)]))
            return td
        methods["torchvision v2 RandomCrop per sample (uint8)"] = torchvision_shift
        baselines.append("torchvision v2 RandomCrop per sample (uint8)")
    except ImportError as e:
        print(f"(b) torchvision skipped: {e}")
    times = time_side_by_side(methods, rounds, reps=3)
    ours = times["obsaug.torchrl.Augment"]
    print(f"\n(b) TorchRL: shift pad 4 on pixels and next pixels, [{B}, {S * C}, {H}, {H}] uint8 "
          f"each, {torch.get_num_threads()} torch threads")
    print("| method | ms per batch | obsaug speed-up | target |")
    print("|---|---:|---:|---|")
    print(f"| obsaug.torchrl.Augment | {ours * 1e3:.2f} | 1x | |")
    for name in baselines:
        print(f"| {name} | {times[name] * 1e3:.2f} | {times[name] / ours:.1f}x | >= 20x |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--capacity", type=int, default=3000, help="transitions in (a)'s buffers")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    bench_sb3(args.capacity, args.rounds)
    bench_torchrl(args.rounds)


if __name__ == "__main__":
    main()
