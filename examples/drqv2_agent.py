"""A DrQ-v2-style agent (Yarats et al. 2021) on DMControl pixels, with obsaug end to end.

    python examples/drqv2_agent.py --smoke                     # a few minutes on a CPU
    python examples/drqv2_agent.py --steps 100000 --domain cheetah --task run

How long: an update (batch 256) took 4.9 s on this project's 2-core CPU VM
(measured), so the real run's 48,000 updates (100,000 steps, one update every
2 after 4,000 random ones) take about 65 hours on such a CPU: run it on a GPU
(not measured yet). ``--smoke`` (600 steps, batch 32, 200 random steps first:
225 updates) took 171 s there, on CartPolePixels. It
runs from a clone with obsaug pip-installed (the clone's python/ is used only
where its native module is built, as scripts/build.sh builds it) and checks
its optional imports (matplotlib for the curve) before it trains.

What obsaug does here: ``obsaug.ReplayBuffer`` stores every 84x84 RGB frame once
and rebuilds stacks of 3 at sample time, with 3-step returns; ``sample(B,
augment=engine)`` gathers the stacks and applies DrQ's random shift (pad 4,
replicate) in the same pass, writing float32 ``v/255 - 0.5`` as DrQ-v2's encoder
expects, so the agent never sees an un-augmented batch and never normalises.
The rest is DrQ-v2: a conv encoder trained by the critic, a deterministic actor
with scheduled Gaussian exploration noise (clipped), double Q with an EMA target,
updates every ``--update-every`` steps. CUDA when present (``--device``), CPU
otherwise. Writes the learning curve (episode return against env steps) to
``--out`` (PNG).

DMControl comes with scripts/setup_envs.sh (dm_control + MuJoCo, rendered by
EGL/OSMesa). Without it the agent runs on examples/pixel_envs.CartPolePixels
(a numpy-drawn pixel cart-pole with a continuous force) and says so.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import sys
import time
from typing import Callable, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def checkout_package(examples: str = HERE) -> Optional[str]:
    """The checkout's python/ folder when its obsaug is built (python/obsaug/_C*.so, as
    scripts/build.sh makes it), else None: then the installed obsaug is used (a
    clone's unbuilt sources would shadow it and fail to import their _C)."""
    python = os.path.normpath(os.path.join(examples, os.pardir, "python"))
    return python if glob.glob(os.path.join(python, "obsaug", "_C*.so")) else None


if checkout_package():
    sys.path.insert(0, checkout_package())
sys.path.insert(0, HERE)
import obsaug  # noqa: E402

FRAME_STACK, SIZE, N_STEP = 3, 84, 3


# --- environments: (reset() -> frame [3, H, W] uint8, step(a) -> (frame, r, terminated, truncated))

def make_env(domain: str, task: str, seed: int, action_repeat: int) -> Tuple[object, int, str]:
    try:
        os.environ.setdefault("MUJOCO_GL", "egl")
        from dm_control import suite
    except ImportError:
        print("drqv2_agent: dm_control is not installed (scripts/setup_envs.sh installs it); "
              "running on the numpy-drawn CartPolePixels instead", flush=True)
        return CartPoleAdapter(seed), 1, "CartPolePixels (dm_control missing)"
    return DMCAdapter(suite.load(domain, task, task_kwargs={"random": seed}), action_repeat), \
        0, f"DMControl {domain}-{task}"


class DMCAdapter:
    def __init__(self, env, action_repeat: int):
        self.env, self.repeat = env, action_repeat
        self.action_dim = env.action_spec().shape[0]

    def _frame(self) -> np.ndarray:
        return self.env.physics.render(SIZE, SIZE, camera_id=0).transpose(2, 0, 1).copy()

    def reset(self) -> np.ndarray:
        self.env.reset()
        return self._frame()

    def step(self, action: np.ndarray):
        reward = 0.0
        for _ in range(self.repeat):
            ts = self.env.step(action)
            reward += ts.reward or 0.0
            if ts.last():
                break
        # DMControl episodes end by time limit only: a truncation, which bootstraps
        return self._frame(), reward, False, ts.last()


class CartPoleAdapter:
    def __init__(self, seed: int):
        from pixel_envs import CartPolePixels
        self.env, self.seed, self.action_dim = CartPolePixels(SIZE, continuous=True,
                                                              max_steps=500), seed, 1

    def reset(self) -> np.ndarray:
        frame, _ = self.env.reset(seed=self.seed)
        self.seed += 1
        return frame.transpose(2, 0, 1).copy()

    def step(self, action: np.ndarray):
        frame, reward, terminated, truncated, _ = self.env.step(action)
        return frame.transpose(2, 0, 1).copy(), reward, terminated, truncated


# --- networks (DrQ-v2's shapes) ----------------------------------------------------

class Encoder(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.convnet = nn.Sequential(nn.Conv2d(channels, 32, 3, stride=2), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3, stride=1), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3, stride=1), nn.ReLU(),
                                     nn.Conv2d(32, 32, 3, stride=1), nn.ReLU())
        self.repr_dim = 32 * 35 * 35

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # obs: float, already v/255 - 0.5
        return self.convnet(obs).flatten(1)


def mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(inplace=True),
                         nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, out))


class Actor(nn.Module):
    def __init__(self, repr_dim: int, action_dim: int, feature_dim: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim),
                                   nn.Tanh())
        self.policy = mlp(feature_dim, hidden, action_dim)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.policy(self.trunk(h)))


class Critic(nn.Module):
    def __init__(self, repr_dim: int, action_dim: int, feature_dim: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(repr_dim, feature_dim), nn.LayerNorm(feature_dim),
                                   nn.Tanh())
        self.q1 = mlp(feature_dim + action_dim, hidden, 1)
        self.q2 = mlp(feature_dim + action_dim, hidden, 1)

    def forward(self, h: torch.Tensor, a: torch.Tensor):
        x = torch.cat([self.trunk(h), a], dim=-1)
        return self.q1(x), self.q2(x)


def noisy(mu: torch.Tensor, std: float, clip: float = 0.3) -> torch.Tensor:
    """DrQ-v2's clipped Gaussian around the deterministic action, within [-1, 1]."""
    eps = (torch.randn_like(mu) * std).clamp(-clip, clip)
    return (mu + eps).clamp(-1.0, 1.0)


def optimizer_step(opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """One gradient step of ``opt`` on ``loss``."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


@torch.no_grad()
def soft_update(net: nn.Module, target: nn.Module, tau: float) -> None:
    """Moves ``target``'s parameters a fraction ``tau`` towards ``net``'s (Polyak averaging)."""
    for p, tp in zip(net.parameters(), target.parameters()):
        tp.lerp_(p, tau)


class DrQV2:
    def __init__(self, action_dim: int, device: torch.device, lr: float = 1e-4,
                 feature_dim: int = 50, hidden: int = 1024, tau: float = 0.01):
        self.device, self.tau = device, tau
        self.encoder = Encoder(3 * FRAME_STACK).to(device)
        rd = self.encoder.repr_dim
        self.actor = Actor(rd, action_dim, feature_dim, hidden).to(device)
        self.critic = Critic(rd, action_dim, feature_dim, hidden).to(device)
        self.critic_target = Critic(rd, action_dim, feature_dim, hidden).to(device)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    @torch.no_grad()
    def act(self, stack: torch.Tensor, std: float, explore: bool) -> np.ndarray:
        obs = stack.to(self.device, torch.float32).unsqueeze(0) / 255.0 - 0.5
        mu = self.actor(self.encoder(obs))
        return (noisy(mu, std) if explore else mu)[0].cpu().numpy()

    def update(self, batch: dict, std: float) -> Tuple[float, float]:
        obs, next_obs = self.encoder(batch["obs"]), batch["next_obs"]
        with torch.no_grad():
            h_next = self.encoder(next_obs)
            next_a = noisy(self.actor(h_next), std)
            tq1, tq2 = self.critic_target(h_next, next_a)
            # n-step return; discount = gamma^n' (0 after a termination), from the buffer
            target = batch["reward"][:, None] + batch["discount"][:, None] * torch.min(tq1, tq2)
        q1, q2 = self.critic(obs, batch["action"])
        critic_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
        self.encoder_opt.zero_grad(set_to_none=True)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        h = obs.detach()
        a = noisy(self.actor(h), std)
        aq1, aq2 = self.critic(h, a)
        actor_loss = -torch.min(aq1, aq2).mean()
        optimizer_step(self.actor_opt, actor_loss)
        soft_update(self.critic, self.critic_target, self.tau)
        return critic_loss.item(), actor_loss.item()


def linear_schedule(start: float, end: float, duration: int) -> Callable[[int], float]:
    return lambda step: end + (start - end) * max(0.0, 1.0 - step / duration)


def drq_engine_config(device: torch.device, seed: int) -> dict:
    """DrQ's shift (pad 4, replicate), fused with the encoder's v/255 - 0.5."""
    return {"device": str(device), "seed": seed,
            "frames": {"stack": FRAME_STACK, "channels": 3, "height": SIZE, "width": SIZE},
            "pipeline": [{"op": "shift", "pad": 4, "padding": "replicate"}],
            "output": {"dtype": "float32", "scale": 1.0 / 255.0, "bias": -0.5}}


def run_steps(env, rb, agent: "DrQV2", std: Callable[[int], float], steps: int, seed_steps: int,
              update_every: int, update: Callable[[int], Optional[Tuple[float, float]]],
              on_episode: Callable[[int, float, Tuple[float, float], float], None]) -> None:
    """The DrQ-v2 acting loop: steps env for steps steps (uniform random actions for
    the first seed_steps, then agent.act with noise std(step)) and adds every frame
    to rb. From step min(seed_steps, steps // 4) + 1 on, every update_every-th step
    calls update(step), which returns the (critic, actor) losses or None when it did
    not update. At each episode's end calls on_episode(step, episode_return, the last
    losses, steps per second so far) before the next reset."""
    frames = collections.deque(maxlen=FRAME_STACK)  # the acting stack, first frame repeated

    def start() -> None:
        f = env.reset()
        rb.add_first(f)
        frames.extend([torch.from_numpy(f)] * FRAME_STACK)

    start()
    episode_return, losses = 0.0, (float("nan"), float("nan"))
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        if step <= seed_steps:
            action = np.random.uniform(-1, 1, env.action_dim).astype(np.float32)
        else:
            action = agent.act(torch.cat(list(frames)), std(step), explore=True)
        frame, reward, terminated, truncated = env.step(action)
        rb.add(action, float(reward), frame, terminated=terminated, truncated=truncated)
        frames.append(torch.from_numpy(frame))
        episode_return += reward
        if terminated or truncated:
            on_episode(step, episode_return, losses, step / (time.perf_counter() - t0))
            episode_return = 0.0
            start()
        if step > min(seed_steps, steps // 4) and step % update_every == 0:
            new = update(step)
            if new is not None:
                losses = new


def pyplot_or_exit(out: str):
    """matplotlib.pyplot for the curve (None when ``out`` is ''), checked before training:
    without matplotlib, exit saying how to install it or to skip the plot."""
    if not out:
        return None
    try:
        import matplotlib
    except ImportError:
        sys.exit("drqv2_agent: the learning curve needs matplotlib (pip install matplotlib); "
                 "or pass --out '' to train without the plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=100_000, help="environment steps")
    ap.add_argument("--domain", default="cheetah")
    ap.add_argument("--task", default="run")
    ap.add_argument("--action-repeat", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--capacity", type=int, default=100_000, help="frames in the buffer")
    ap.add_argument("--seed-steps", type=int, default=4000, help="random actions first")
    ap.add_argument("--update-every", type=int, default=2)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="drqv2_curve.png", help="learning-curve PNG ('': none)")
    ap.add_argument("--smoke", action="store_true",
                    help="a check that finishes in minutes: 600 steps, batch 32, 200 random")
    args = ap.parse_args()
    if args.smoke:
        args.steps, args.batch, args.seed_steps = 600, 32, 200
    plt = pyplot_or_exit(args.out)  # before training: a missing matplotlib loses no run
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)

    env, _, env_name = make_env(args.domain, args.task, args.seed, args.action_repeat)
    rb = obsaug.ReplayBuffer(capacity=min(args.capacity, args.steps + 1000),
                             frame_shape=(3, SIZE, SIZE), frame_stack=FRAME_STACK,
                             action_shape=(env.action_dim,), device=device, n_step=N_STEP,
                             gamma=args.gamma, seed=args.seed)
    engine = obsaug.Engine(drq_engine_config(device, args.seed))
    agent = DrQV2(env.action_dim, device)
    std = linear_schedule(1.0, 0.1, max(1, args.steps // 2))
    print(f"drqv2_agent: {env_name} on {device}, {args.steps} steps; {rb}", flush=True)

    curve = []

    def on_episode(step: int, episode_return: float, losses: Tuple[float, float],
                   rate: float) -> None:
        curve.append((step, episode_return))
        print(f"step {step:7d}  return {episode_return:8.1f}  critic {losses[0]:.3f}  "
              f"actor {losses[1]:.3f}  {rate:.1f} steps/s", flush=True)

    def update(step: int) -> Optional[Tuple[float, float]]:
        if not rb.num_valid:
            return None
        return agent.update(rb.sample(args.batch, augment=engine), std(step))

    run_steps(env, rb, agent, std, args.steps, args.seed_steps, args.update_every, update,
              on_episode)
    engine.close()

    if plt is None:
        print(f"drqv2_agent: {len(curve)} episodes", flush=True)
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if curve:
        xs, ys = zip(*curve)
        ax.plot(xs, ys, marker=".")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(f"DrQ-v2 + obsaug on {env_name}")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"drqv2_agent: {len(curve)} episodes; learning curve in {args.out}", flush=True)


if __name__ == "__main__":
    main()
