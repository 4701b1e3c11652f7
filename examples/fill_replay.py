"""Fill obsaug.ReplayBuffer from real environments and save a preview of real frames.

    MUJOCO_GL=egl .venv/bin/python examples/fill_replay.py [--steps 300] [--out docs/img/preview_real.png]

Needs the optional environment extras: `bash scripts/setup_envs.sh` (dm_control +
MuJoCo rendered on the CPU through Mesa, ale-py + gymnasium). Environments:

- DMControl cartpole/swingup and walker/walk, pixels as DMControl-GB makes them
  (its dmc2gym wrapper): 84x84 RGB from camera 0 (2 for quadruped), action repeat
  8 for cartpole and 4 otherwise, one render per agent step, 3 stacked frames.
- Atari Pong (ale-py + gymnasium): AtariPreprocessing (frame skip 4, max-pool over
  the last two frames, 84x84 grayscale, up to 30 no-ops), sticky actions off,
  4 stacked frames.

Each environment runs uniformly random actions for --steps agent steps into its own
ReplayBuffer (the buffer stores each frame once and rebuilds stacks at sample time);
a batch is sampled, and the grid shows per row one sampled observation, its stacked
frames oldest first (left) and the same observation through obsaug.Engine with
shift + overlay (right): the pipelines of configs/default.yaml for RGB (pad 4,
alpha 0.5) and configs/atari.yaml for grayscale (pad 4, alpha 0.3), with a pool of
--pool-size photos from data/photos filled once. The script also checks that `sample(B, augment=engine)` equals
`sample(B)` followed by `engine.augment(obs, step=s)` on these real frames.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("MUJOCO_GL", "egl")
try:
    import obsaug
except ImportError:  # a source checkout without the development .pth
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import obsaug

DMC_CAMERA = {"quadruped": 2}          # DMControl-GB: camera 2 for quadruped, 0 otherwise
DMC_ACTION_REPEAT = {"cartpole": 8}    # DMControl-GB: 8 for cartpole, 4 otherwise


class DMCPixels:
    """dm_control task with DMControl-GB's pixel observations (dmc2gym semantics)."""

    def __init__(self, domain: str, task: str, seed: int = 0, size: int = 84,
                 action_repeat: int | None = None, camera_id: int | None = None):
        from dm_control import suite
        self.env = suite.load(domain, task, task_kwargs={"random": seed},
                              visualize_reward=False)
        self.size = size
        self.action_repeat = action_repeat or DMC_ACTION_REPEAT.get(domain, 4)
        self.camera_id = DMC_CAMERA.get(domain, 0) if camera_id is None else camera_id
        spec = self.env.action_spec()
        self.action_shape = spec.shape
        self.rng = np.random.default_rng(seed)
        self.frame_shape = (3, size, size)

    def render(self) -> np.ndarray:
        img = self.env.physics.render(height=self.size, width=self.size, camera_id=self.camera_id)
        return np.ascontiguousarray(img.transpose(2, 0, 1))        # [3, H, W] uint8

    def reset(self) -> np.ndarray:
        self.env.reset()
        return self.render()

    def step(self, action):
        """(frame, reward, terminated, truncated): DMControl episodes end by time limit."""
        reward, last = 0.0, False
        for _ in range(self.action_repeat):
            ts = self.env.step(action)
            reward += ts.reward or 0.0
            if ts.last():
                last = True
                break
        terminated = last and ts.discount == 0.0
        return self.render(), reward, terminated, last and not terminated

    def random_action(self) -> np.ndarray:
        return self.rng.uniform(-1.0, 1.0, self.action_shape).astype(np.float32)

    def close(self) -> None:
        self.env.close()


class AtariFrames:
    """ALE game through gymnasium's AtariPreprocessing: 84x84 grayscale, frame skip 4."""

    def __init__(self, game: str = "Pong", seed: int = 0, size: int = 84, frame_skip: int = 4):
        import ale_py
        import gymnasium as gym
        gym.register_envs(ale_py)
        env = gym.make(f"ALE/{game}-v5", frameskip=1, repeat_action_probability=0.0,
                       full_action_space=False)
        self.env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=frame_skip,
                                                   screen_size=size, grayscale_obs=True,
                                                   terminal_on_life_loss=False)
        self.seed = seed
        self.action_shape = ()
        self.frame_shape = (1, size, size)
        self.env.action_space.seed(seed)

    def reset(self) -> np.ndarray:
        obs, _ = self.env.reset(seed=self.seed)
        self.seed += 1
        return obs[None]

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(int(action))
        return obs[None], float(reward), bool(terminated), bool(truncated)

    def random_action(self) -> int:
        return int(self.env.action_space.sample())

    def close(self) -> None:
        self.env.close()


# configs/default.yaml (RGB) and configs/atari.yaml (grayscale) as dicts, with a
# smaller pool that is filled once (refresh threads 0): the photos do not change
# between the fused sample and the reference below, and start-up stays short.
DEFAULT = {"frames": {"stack": 3, "channels": 3, "height": 84, "width": 84},
           "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"},
                        {"op": "overlay", "alpha": 0.5}]}
ATARI = {"frames": {"stack": 4, "channels": 1, "height": 84, "width": 84},
         "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"},
                      {"op": "overlay", "alpha": 0.3}]}


def engine_config(base: dict, pool_size: int) -> dict:
    return dict(base, device="cpu", seed=0, output={"dtype": "uint8"},
                pool={"size": pool_size, "sources": [os.path.join(ROOT, "data", "photos")],
                      "refresh": {"threads": 0, "max_per_second": 0, "mode": "async"}})


def fill(env, rb: "obsaug.ReplayBuffer", steps: int) -> dict:
    t_env = t_add = 0.0
    t0 = time.perf_counter()
    frame = env.reset()
    t_env += time.perf_counter() - t0
    rb.add_first(torch.from_numpy(frame))
    episodes = 1
    for _ in range(steps):
        action = env.random_action()
        t0 = time.perf_counter()
        frame, reward, terminated, truncated = env.step(action)
        t1 = time.perf_counter()
        rb.add(action, reward, torch.from_numpy(frame), terminated=terminated, truncated=truncated)
        t2 = time.perf_counter()
        t_env += t1 - t0
        t_add += t2 - t1
        if terminated or truncated:
            t0 = time.perf_counter()
            frame = env.reset()
            t_env += time.perf_counter() - t0
            rb.add_first(torch.from_numpy(frame))
            episodes += 1
    return {"env_s": t_env, "add_s": t_add, "episodes": episodes}


def frames_row(obs: torch.Tensor, channels: int) -> np.ndarray:
    """[S*C, H, W] uint8 -> [H, S*W (+gaps), 3] image, frames oldest first."""
    s = obs.shape[0] // channels
    tiles = []
    for i in range(s):
        f = obs[i * channels:(i + 1) * channels].numpy()
        f = np.repeat(f, 3, axis=0) if channels == 1 else f
        tiles.append(f.transpose(1, 2, 0))
        tiles.append(np.full((f.shape[1], 2, 3), 255, np.uint8))
    return np.concatenate(tiles[:-1], axis=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300, help="agent steps per environment (default 300)")
    p.add_argument("--rows", type=int, default=3, help="samples shown per environment (default 3)")
    p.add_argument("--batch", type=int, default=64, help="batch sampled per environment (default 64)")
    p.add_argument("--envs", default="cartpole/swingup,walker/walk,atari/Pong",
                   help="comma-separated domain/task or atari/Game")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "img", "preview_real.png"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-size", type=int, default=64, help="distractor photos (default 64)")
    args = p.parse_args()

    from PIL import Image, ImageDraw

    torch.manual_seed(args.seed)
    print(f"MUJOCO_GL={os.environ.get('MUJOCO_GL')}  torch {torch.__version__}  "
          f"threads {torch.get_num_threads()}")
    print("| env | frame | stack | action repeat | steps | episodes | env s | env ms/step "
          "| add us/step | sample+aug ms (B) | sample == sample+augment |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    sections = []
    for spec in args.envs.split(","):
        domain, task = spec.split("/")
        if domain == "atari":
            env = AtariFrames(task, seed=args.seed)
            stack, config, repeat = 4, engine_config(ATARI, args.pool_size), 4
            action_shape, action_dtype = (), torch.int64
        else:
            env = DMCPixels(domain, task, seed=args.seed)
            stack, config, repeat = 3, engine_config(DEFAULT, args.pool_size), env.action_repeat
            action_shape, action_dtype = env.action_shape, torch.float32
        c = env.frame_shape[0]
        rb = obsaug.ReplayBuffer(capacity=args.steps + 16, frame_shape=env.frame_shape,
                                 frame_stack=stack, action_shape=action_shape,
                                 action_dtype=action_dtype, device="cpu", seed=args.seed)
        stats = fill(env, rb, args.steps)
        env.close()
        # exactness on real frames: a copy of the buffer (save/load keeps the sample
        # counter) samples the same indices; fused sample(B, augment) must equal
        # sample(B) followed by engine.augment(obs, step=s), bit for bit
        with tempfile.TemporaryDirectory() as tmp:
            rb.save(tmp)
            rb_copy = obsaug.ReplayBuffer.load(tmp, device="cpu")
        batch = min(args.batch, rb.num_valid)
        with obsaug.Engine(config) as eng:
            s = eng.step
            t0 = time.perf_counter()
            fused = rb.sample(batch, augment=eng)            # gather + shift + overlay, one pass
            t_sample = time.perf_counter() - t0
            raw = rb_copy.sample(batch)                      # the same indices, uint8, no op
            aug = eng.augment(raw["obs"], step=s)            # explicit step: the same parameters
            same = (torch.equal(fused["indices"], raw["indices"])
                    and torch.equal(fused["obs"], aug)
                    and torch.equal(fused["next_obs"], eng.augment(raw["next_obs"], step=s + 1)))
        print(f"| {domain}/{task} | {c}x84x84 | {stack} | {repeat} | {args.steps} | "
              f"{stats['episodes']} | {stats['env_s']:.1f} | {1000 * stats['env_s'] / args.steps:.1f} | "
              f"{1e6 * stats['add_s'] / args.steps:.0f} | {1000 * t_sample:.1f} ({batch}) | "
              f"{same} |")
        sections.append((f"{domain}/{task}", c, raw["obs"][:args.rows], aug[:args.rows]))

    # the grid: per environment a title, then rows "original stack | augmented stack"
    rows_img = []
    width = 0
    for title, c, orig, aug in sections:
        for i in range(orig.shape[0]):
            left, right = frames_row(orig[i], c), frames_row(aug[i], c)
            gap = np.full((left.shape[0], 12, 3), 255, np.uint8)
            rows_img.append((title if i == 0 else None, np.concatenate([left, gap, right], axis=1)))
            width = max(width, rows_img[-1][1].shape[1])
    title_h, pad = 16, 4
    height = sum(r.shape[0] + pad + (title_h if t else 0) for t, r in rows_img) + title_h
    canvas = Image.new("RGB", (width + 2 * pad, height + pad), "white")
    draw = ImageDraw.Draw(canvas)
    draw.text((pad, 2), "original stacked frames (oldest first)  |  obsaug.Engine shift + overlay",
              fill="black")
    y = title_h
    for t, r in rows_img:
        if t:
            draw.text((pad, y + 2), t, fill="black")
            y += title_h
        canvas.paste(Image.fromarray(r), (pad, y))
        y += r.shape[0] + pad
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    canvas.save(args.out)
    print(f"wrote {args.out} ({canvas.size[0]}x{canvas.size[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
