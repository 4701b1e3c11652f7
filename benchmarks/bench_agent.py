"""A compact SVEA-style SAC on DMControl pixels, on the CPU, timing its data path.

    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_agent.py                     # both data paths
    MUJOCO_GL=egl .venv/bin/python benchmarks/bench_agent.py --data-path obsaug --steps 1000

Needs the optional environment extras (`bash scripts/setup_envs.sh`).

The agent: DMControl cartpole/swingup (default) with DMControl-GB's pixels (84x84
RGB, camera 0, action repeat 8 for cartpole and 4 otherwise, 3 stacked frames,
examples/fill_replay.py's DMCPixels); a small DrQ-v2-style conv encoder (obs/255 - 0.5,
3x3 convs, 32 filters) shared by the actor and critic (the actor detaches it, as in
SAC-AE / DMControl-GB), a LayerNorm+tanh trunk, twin Q heads, a tanh-Gaussian actor,
a learned temperature; DMControl-GB's SAC settings (lr 1e-3, tau 0.01 / encoder tau
0.05, actor and target updates every 2 steps, init temperature 0.1). The critic is
trained SVEA-style (svea_alpha = svea_beta = 0.5): on the shifted observation and on
an overlay of it, against a target computed from the shifted next observation.

Random actions for --seed-steps agent steps, then one update per agent step with a
batch of --batch. The defaults (500 steps, 300 seed steps, 16 filters) keep a run of
both paths near 10 minutes on the project's shared 2-core VM, where one update of
this small network takes ~0.6-0.9 s; scale up with --steps / --seed-steps / --filters. The wall time is split into: env (stepping + rendering), add
(storing the transition), sample+aug (indices, gather, shift, overlay: everything
that turns the buffer into the three float tensors the update reads), update (the
network update) and act (policy inference).

Data paths (--data-path; `both`, the default, runs them one after the other with the
same seed and initial weights and prints one table):

- obsaug: obsaug.ReplayBuffer (each frame stored once, stacks rebuilt at sample time);
  `rb.sample(B, augment=shift_engine)` gathers and shifts obs and next_obs in one pass
  each, straight to float32, and `overlay_engine.augment(obs)` adds the photo overlay
  (SVEA's augmented view of the same shifted obs). The pipelines are those of
  configs/default.yaml (shift pad 4 replicate, overlay alpha 0.5, pool of 256 photos
  from data/photos refreshed by one background thread, capped at --pool-rate photos/s).
- dmcontrol-gb: a re-implementation of DMControl-GB's (src/utils.py, src/augmentations.py):
  FrameStack observations as LazyFrames (a list of frame references), a ReplayBuffer
  holding (obs, next_obs) LazyFrames per transition and building each sampled stack
  with np.concatenate (sample_drq), torch.as_tensor(...).float(), random_shift
  (F.pad replicate 4 + kornia RandomCrop(84)) on obs and next_obs, and random_overlay:
  a DataLoader batch of B photos (ImageFolder, RandomResizedCrop(84) +
  RandomHorizontalFlip + ToTensor, shuffle) blended with alpha 0.5, per call.
  The photos are the same data/photos, in a temporary ImageFolder (see --gb-images).
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import shutil
import sys
import time
from collections import deque

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

os.environ.setdefault("MUJOCO_GL", "egl")

import harness  # noqa: E402
# The DMControl-GB re-implementations (LazyFrames, ReplayBuffer, random_shift,
# random_overlay over a DataLoader).
from baselines import DMCGB, DMCGBReplayBuffer, LazyFrames, build_image_folder  # noqa: E402
from harness import ROOT, loadavg_str, md_row, md_rule  # noqa: E402

obsaug = harness.import_obsaug()
# The DMControl pixel environment of the replay example.
sys.path.insert(0, os.path.join(ROOT, "examples"))
from drqv2_agent import (  # noqa: E402  (the same networks and steps as the example agent)
    Critic, mlp, optimizer_step, soft_update)
from fill_replay import DMCPixels  # noqa: E402

PHOTOS = os.path.join(ROOT, "data", "photos")


# --------------------------------------------------------------------------- network

class Encoder(nn.Module):
    """DrQ-v2's conv encoder, smaller: obs/255 - 0.5, then one 3x3 conv of `filters`
    channels + ReLU per entry of `strides` (DrQ-v2: 2,1,1,1; default here 2,2)."""

    def __init__(self, in_channels: int, filters: int, strides: list[int]):
        super().__init__()
        convs, c = [], in_channels
        for s in strides:
            convs += [nn.Conv2d(c, filters, 3, stride=s), nn.ReLU()]
            c = filters
        self.convnet = nn.Sequential(*convs)
        with torch.no_grad():
            self.repr_dim = self.convnet(torch.zeros(1, in_channels, 84, 84)).numel()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.convnet(obs / 255.0 - 0.5).flatten(1)


class Actor(nn.Module):
    def __init__(self, repr_dim: int, action_dim: int, feature_dim: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim),
                                   nn.Tanh())
        self.policy = mlp(feature_dim, hidden, 2 * action_dim)

    def forward(self, h: torch.Tensor):
        mu, log_std = self.policy(self.trunk(h)).chunk(2, dim=-1)
        log_std = -10 + 0.5 * (2 - (-10)) * (torch.tanh(log_std) + 1)   # DMControl-GB bounds
        std = log_std.exp()
        eps = torch.randn_like(mu)
        pre = mu + eps * std
        pi = torch.tanh(pre)
        log_pi = (-0.5 * eps.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1, keepdim=True)
        log_pi = log_pi - torch.log(F.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return torch.tanh(mu), pi, log_pi


class SVEAAgent:
    def __init__(self, obs_channels: int, action_dim: int, args):
        self.encoder = Encoder(obs_channels, args.filters, args.strides)
        rd = self.encoder.repr_dim
        self.actor = Actor(rd, action_dim, args.feature_dim, args.hidden)
        self.critic = Critic(rd, action_dim, args.feature_dim, args.hidden)
        self.encoder_target = copy.deepcopy(self.encoder)
        self.critic_target = copy.deepcopy(self.critic)
        self.log_alpha = torch.tensor(math.log(0.1), requires_grad=True)
        self.target_entropy = -float(action_dim)
        self.critic_opt = torch.optim.Adam(list(self.encoder.parameters())
                                           + list(self.critic.parameters()), lr=1e-3,
                                           betas=(0.9, 0.999))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-3, betas=(0.9, 0.999))
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=1e-4, betas=(0.5, 0.999))
        self.discount, self.tau, self.encoder_tau = 0.99, 0.01, 0.05
        self.svea_alpha = self.svea_beta = 0.5
        self.update_freq = 2

    @torch.no_grad()
    def act(self, obs: np.ndarray, sample: bool) -> np.ndarray:
        h = self.encoder(torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0))
        mu, pi, _ = self.actor(h)
        return (pi if sample else mu)[0].numpy()

    def update(self, obs, action, reward, next_obs, not_done, obs_aug, step: int) -> dict:
        with torch.no_grad():
            _, next_pi, next_log_pi = self.actor(self.encoder(next_obs))
            tq1, tq2 = self.critic_target(self.encoder_target(next_obs), next_pi)
            alpha = self.log_alpha.exp()
            target_q = reward + not_done * self.discount * (torch.min(tq1, tq2)
                                                             - alpha * next_log_pi)
        # SVEA with svea_alpha == svea_beta: one pass over [obs; overlay(obs)]
        h = self.encoder(torch.cat([obs, obs_aug], 0))
        q1, q2 = self.critic(h, torch.cat([action, action], 0))
        target_q = torch.cat([target_q, target_q], 0)
        critic_loss = (self.svea_alpha + self.svea_beta) * (F.mse_loss(q1, target_q)
                                                             + F.mse_loss(q2, target_q))
        optimizer_step(self.critic_opt, critic_loss)
        out = {"critic_loss": critic_loss.item()}

        if step % self.update_freq == 0:
            hd = h[:obs.shape[0]].detach()
            _, pi, log_pi = self.actor(hd)
            aq1, aq2 = self.critic(hd, pi)
            alpha = self.log_alpha.exp()
            actor_loss = (alpha.detach() * log_pi - torch.min(aq1, aq2)).mean()
            optimizer_step(self.actor_opt, actor_loss)
            alpha_loss = (alpha * (-log_pi - self.target_entropy).detach()).mean()
            optimizer_step(self.alpha_opt, alpha_loss)
            soft_update(self.critic, self.critic_target, self.tau)
            soft_update(self.encoder, self.encoder_target, self.encoder_tau)
            out["actor_loss"] = actor_loss.item()
        return out


# ------------------------------------------------------------- data path: obsaug

class ObsaugData:
    """obsaug.ReplayBuffer + fused gather/shift (float32 out) + overlay engine."""

    name = "obsaug"

    def __init__(self, frame_shape, frame_stack: int, action_dim: int, capacity: int, args):
        self.rb = obsaug.ReplayBuffer(capacity=capacity, frame_shape=frame_shape,
                                      frame_stack=frame_stack, action_shape=(action_dim,),
                                      device="cpu", n_step=1, gamma=0.99, seed=args.seed)
        frames = {"stack": frame_stack, "channels": frame_shape[0],
                  "height": frame_shape[1], "width": frame_shape[2]}
        f32 = {"dtype": "float32", "scale": 1.0, "bias": 0.0}    # 0..255, as DMControl-GB's
        self.shift = obsaug.Engine({"device": "cpu", "seed": args.seed, "frames": frames,
                                    "pipeline": [{"op": "shift", "pad": 4,
                                                  "padding": "replicate"}],
                                    "output": f32})
        self.overlay = obsaug.Engine({"device": "cpu", "seed": args.seed + 1, "frames": frames,
                                      "pipeline": [{"op": "overlay", "alpha": 0.5}],
                                      "pool": {"size": args.pool_size, "sources": [PHOTOS],
                                               "refresh": {"threads": 1,
                                                           "max_per_second": args.pool_rate,
                                                           "mode": "async"}},
                                      "output": f32})
        self.stack = deque(maxlen=frame_stack)

    def reset(self, frame: np.ndarray) -> np.ndarray:
        self.rb.add_first(torch.from_numpy(frame))
        for _ in range(self.stack.maxlen):
            self.stack.append(frame)
        return np.concatenate(self.stack, 0)        # the policy's input

    def add(self, action, reward, frame, terminated: bool, truncated: bool) -> np.ndarray:
        self.rb.add(action, reward, torch.from_numpy(frame), terminated=terminated,
                    truncated=truncated)
        self.stack.append(frame)
        return np.concatenate(self.stack, 0)

    def sample(self, batch_size: int):
        b = self.rb.sample(batch_size, augment=self.shift)   # obs step s, next_obs step s+1
        obs_aug = self.overlay.augment(b["obs"])              # SVEA's view: overlay(shift(obs))
        return (b["obs"], b["action"], b["reward"].unsqueeze(1), b["next_obs"],
                (b["discount"] > 0).float().unsqueeze(1), obs_aug)   # not_done

    def close(self) -> None:
        self.shift.close()
        self.overlay.close()


# ------------------------------------------------------- data path: DMControl-GB

class GBOverlay(DMCGB):
    """DMControl-GB's random_overlay (baselines.DMCGB): the next DataLoader batch of
    B photos (ImageFolder + RandomResizedCrop(84) + RandomHorizontalFlip + ToTensor,
    shuffle) per call, repeated over the stacked frames, blended with alpha 0.5 in
    [0, 255]. The loader and its workers start here, outside the timed loop."""

    def __init__(self, batch_size: int, image_size: int, args):
        # Places365 (1.8M images) never ends an epoch in a run this short; repeat the
        # photos so that the iterator does not restart (and respawn workers) either.
        self.tmp = build_image_folder(
            PHOTOS, "places256" if args.gb_images == "places256" else "photos",
            batch_size * (args.updates_expected + 2), prefix="gb_photos_")
        super().__init__(self.tmp, torch.device("cpu"), 3, args.gb_workers,
                         pin_memory=torch.cuda.is_available(), class_dir="photos")
        self._load_places(batch_size=batch_size, image_size=image_size)
        self.dataset_len = len(self.places_dataloader.dataset)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.random_overlay(x)

    def close(self) -> None:
        super().close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class GBData:
    """DMControl-GB's data path: FrameStack LazyFrames + ReplayBuffer.sample_drq +
    random_overlay(obs.clone())."""

    name = "dmcontrol-gb"

    def __init__(self, frame_shape, frame_stack: int, action_dim: int, capacity: int, args):
        # prefilled, indices from the global np.random, as DMControl-GB's
        self.rb = DMCGBReplayBuffer(frame_shape, (action_dim,), capacity, args.batch,
                                    prefill=True)
        self.overlay = GBOverlay(args.batch, frame_shape[-1], args)
        self.frames = deque(maxlen=frame_stack)
        self.obs = None

    def reset(self, frame: np.ndarray):
        for _ in range(self.frames.maxlen):
            self.frames.append(frame)
        self.obs = LazyFrames(list(self.frames))
        return self.obs

    def add(self, action, reward, frame, terminated: bool, truncated: bool):
        self.frames.append(frame)
        next_obs = LazyFrames(list(self.frames))
        # DMControl-GB's train.py: a time limit is not a terminal (done_bool = 0)
        self.rb.add(self.obs, action, reward, next_obs, terminated)
        self.obs = next_obs
        return next_obs

    def sample(self, batch_size: int):
        obs, action, reward, next_obs, not_done = self.rb.sample_drq(batch_size,
                                                                     reuse_crop=True)
        obs_aug = self.overlay(obs.clone())
        return obs, action, reward, next_obs, not_done, obs_aug

    def close(self) -> None:
        self.overlay.close()


# --------------------------------------------------------------------------- loop

def run(path: str, args) -> dict:
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    env = DMCPixels(args.domain, args.task, seed=args.seed, action_repeat=args.action_repeat)
    action_dim = env.action_shape[0]
    stack = 3
    t_setup = time.perf_counter()
    cls = ObsaugData if path == "obsaug" else GBData
    data = cls(env.frame_shape, stack, action_dim, args.steps + 1, args)
    agent = SVEAAgent(env.frame_shape[0] * stack, action_dim, args)
    t_setup = time.perf_counter() - t_setup
    times = dict(env=0.0, add=0.0, sample=0.0, update=0.0, act=0.0)
    pc = time.perf_counter

    t_start = pc()
    t0 = pc()
    frame = env.reset()
    times["env"] += pc() - t0
    t0 = pc()
    obs = data.reset(frame)
    times["add"] += pc() - t0
    episode_reward, episode_rewards, updates, losses = 0.0, [], 0, []
    for step in range(args.steps):
        t0 = pc()
        if step < args.seed_steps:
            action = env.random_action()
        else:
            action = agent.act(np.asarray(obs), sample=True).astype(np.float32)
        t1 = pc()
        frame, reward, terminated, truncated = env.step(action)
        t2 = pc()
        obs = data.add(action, reward, frame, terminated, truncated)
        t3 = pc()
        times["act"] += t1 - t0
        times["env"] += t2 - t1
        times["add"] += t3 - t2
        episode_reward += reward
        if step >= args.seed_steps:
            t0 = pc()
            batch = data.sample(args.batch)
            t1 = pc()
            out = agent.update(*batch, step=step)
            t2 = pc()
            times["sample"] += t1 - t0
            times["update"] += t2 - t1
            updates += 1
            losses.append(out["critic_loss"])
        if terminated or truncated:
            episode_rewards.append(episode_reward)
            episode_reward = 0.0
            t0 = pc()
            frame = env.reset()
            t1 = pc()
            obs = data.reset(frame)
            times["env"] += t1 - t0
            times["add"] += pc() - t1
        if args.log_every and (step + 1) % args.log_every == 0:
            print(f"  [{path}] step {step + 1}/{args.steps}  wall {pc() - t_start:6.1f}s  "
                  f"episodes {len(episode_rewards)}  "
                  f"last return {episode_rewards[-1] if episode_rewards else float('nan'):.1f}  "
                  f"critic loss {np.mean(losses[-50:]) if losses else float('nan'):.4f}",
                  flush=True)
    wall = pc() - t_start
    data.close()
    env.close()
    return dict(path=path, wall=wall, setup=t_setup, updates=updates,
                returns=episode_rewards, **times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-path", choices=["obsaug", "dmcontrol-gb", "both"], default="both")
    p.add_argument("--domain", default="cartpole")
    p.add_argument("--task", default="swingup")
    p.add_argument("--action-repeat", type=int, default=None,
                   help="default: DMControl-GB's, 8 for cartpole, 4 otherwise")
    p.add_argument("--steps", type=int, default=500,
                   help="agent (env) steps (default 500: both paths fit ~10 minutes on the "
                        "shared 2-core VM; 2000 with --seed-steps 500 takes ~45)")
    p.add_argument("--seed-steps", type=int, default=300,
                   help="random-action steps before updates start (default 300)")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--filters", type=int, default=16, help="conv filters (default 16; DrQ-v2: 32)")
    p.add_argument("--strides", type=lambda s: [int(v) for v in s.split(",")], default=[2, 2],
                   help="one 3x3 conv per entry, its stride (default 2,2; DrQ-v2: 2,1,1,1)")
    p.add_argument("--feature-dim", type=int, default=50)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--pool-size", type=int, default=256, help="obsaug pool photos (default 256)")
    p.add_argument("--pool-rate", type=float, default=0,
                   help="obsaug pool refresh cap, photos/s (default 0: none, as configs/default.yaml)")
    p.add_argument("--gb-workers", type=int, default=2,
                   help="DataLoader workers of the DMControl-GB overlay (DMControl-GB: 16; "
                        "default 2 on this 2-core machine)")
    p.add_argument("--gb-images", choices=["places256", "symlink"], default="places256",
                   help="DMControl-GB overlay photos: places256 (default) = data/photos resized "
                        "once to 256x256 JPEG, the format of Places365-standard that "
                        "DMControl-GB reads; symlink = links to the original multi-megapixel files")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (default 1: on 2 shared cores 2 threads ran the "
                        "update slower; 0 keeps torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=500)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    args.updates_expected = max(0, args.steps - args.seed_steps)
    if args.seed_steps < args.batch:
        p.error("--seed-steps must be >= --batch (obsaug samples at most the valid transitions)")

    env = harness.environment(mujoco_gl=os.environ.get("MUJOCO_GL"))
    harness.print_header(env)
    print(f"MUJOCO_GL={env['mujoco_gl']}")
    print(f"{args.domain}/{args.task}  steps {args.steps}  seed steps {args.seed_steps}  "
          f"batch {args.batch}  encoder {args.filters} filters strides {args.strides}")
    paths = ["obsaug", "dmcontrol-gb"] if args.data_path == "both" else [args.data_path]
    results = []
    for path in paths:
        r = run(path, args)
        results.append(r)
        print(f"  [{path}] done: wall {r['wall']:.1f}s (set-up {r['setup']:.1f}s untimed), "
              f"{r['updates']} updates, episode returns {[round(float(x), 1) for x in r['returns']]}",
              flush=True)

    print()
    print(f"load average after: {loadavg_str(os.getloadavg())}")
    print(md_row(["data path", "env (step+render) s", "replay add s", "sample+aug s",
                  "sample+aug ms/update", "update s", "act s", "other s", "wall s",
                  "sample+aug share"]))
    print(md_rule("l" * 10))
    for r in results:
        other = r["wall"] - r["env"] - r["add"] - r["sample"] - r["update"] - r["act"]
        per = 1000 * r["sample"] / max(1, r["updates"])
        r["share"] = r["sample"] / r["wall"]
        print(md_row([r['path'], f"{r['env']:.1f}", f"{r['add']:.2f}", f"{r['sample']:.1f}",
                      f"{per:.1f}", f"{r['update']:.1f}", f"{r['act']:.1f}", f"{other:.2f}",
                      f"{r['wall']:.1f}", f"{100 * r['share']:.1f}%"]))
    if len(results) == 2:
        a, b = results
        print()
        print(f"sample+aug time, obsaug / dmcontrol-gb: {a['sample'] / b['sample']:.3f} "
              f"({b['sample'] / a['sample']:.1f}x less)")
        ratio = a["share"] / b["share"]
        print(f"sample+aug share of wall, obsaug / dmcontrol-gb: {ratio:.3f} "
              f"(target <= 0.25: {'met' if ratio <= 0.25 else 'not met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
