#!/usr/bin/env python3
"""Captures the real frames the frame codecs are measured on
(benchmarks/bench_codecs.py, BENCHMARKS.md "Compressed frames"): DMControl
renders from dm_control and Atari frames from ale-py, with seeded random
actions, so that a fresh machine captures the same frames.

  DMControl  cartpole swingup, walker walk, cheetah run, finger spin,
             reacher easy, ball_in_cup catch, quadruped walk (camera 2, the
             one that follows the body; the others camera 0): 3 episodes of
             50 frames, a frame every second physics step, 84x84 RGB ->
             [150, 3, 84, 84] uint8
  Atari      Pong, Breakout, MsPacman, Seaquest through gymnasium's
             AtariPreprocessing (frame skip 4, 84x84 grey, no no-op starts):
             one run of 300 frames, reset at an episode's end ->
             [300, 1, 84, 84] uint8

Writes data/frames/<name>.npy and data/frames/index.json (per name: the kind,
the file and the first frame of every episode). Needs scripts/setup_envs.sh;
renders on the CPU through EGL (MUJOCO_GL=egl, the default here) or OSMesa.

  MUJOCO_GL=egl .venv/bin/python benchmarks/capture_frames.py
"""
from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

DMC_TASKS = [("cartpole", "swingup", 0), ("walker", "walk", 0), ("cheetah", "run", 0),
             ("finger", "spin", 0), ("reacher", "easy", 0), ("ball_in_cup", "catch", 0),
             ("quadruped", "walk", 2)]
ATARI_GAMES = ["Pong", "Breakout", "MsPacman", "Seaquest"]


def capture_dmc(domain: str, task: str, camera: int, episodes: int, length: int, seed: int):
    from dm_control import suite
    env = suite.load(domain, task, task_kwargs={"random": seed})
    spec = env.action_spec()
    rng = np.random.default_rng(seed)
    frames, starts = [], []
    for _ in range(episodes):
        env.reset()
        starts.append(len(frames))
        for _ in range(length):
            for _ in range(2):
                env.step(rng.uniform(spec.minimum, spec.maximum))
            frames.append(env.physics.render(84, 84, camera_id=camera).transpose(2, 0, 1).copy())
    env.close()
    return np.stack(frames), starts


def capture_atari(game: str, length: int, seed: int):
    import ale_py
    import gymnasium as gym
    gym.register_envs(ale_py)
    env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, frame_skip=4, screen_size=84, grayscale_obs=True,
                                          noop_max=0)
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    frames, starts = [obs], [0]
    while len(frames) < length:
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
            starts.append(len(frames))
        frames.append(obs)
    env.close()
    return np.stack(frames)[:, None], starts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "data", "frames"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=None, help="names to capture (default: all)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    index_path = os.path.join(args.out, "index.json")
    index = {}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    jobs = [(d, "dmc") for d, _, _ in DMC_TASKS] + [(g, "atari") for g in ATARI_GAMES]
    for name, kind in jobs:
        if args.only is not None and name not in args.only:
            continue
        if kind == "dmc":
            domain, task, camera = next(t for t in DMC_TASKS if t[0] == name)
            frames, starts = capture_dmc(domain, task, camera, 3, 50, args.seed)
        else:
            frames, starts = capture_atari(name, 300, args.seed)
        np.save(os.path.join(args.out, f"{name}.npy"), frames)
        index[name] = {"kind": kind, "file": f"{name}.npy", "episode_starts": starts,
                       "shape": list(frames.shape), "seed": args.seed}
        print(f"{name}: {list(frames.shape)}, episodes start at {starts}", flush=True)
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
