"""A pixel environment that renders without OpenGL: CartPole drawn with numpy.

``CartPolePixels`` is a ``gymnasium.Env`` with the classic cart-pole dynamics
(Barto, Sutton & Anderson 1983; the constants of gymnasium's CartPole-v1) whose
observation is an ``[H, W, 3]`` uint8 RGB picture of the cart and pole (channel
last, as gymnasium's pixel wrappers and SB3's VecFrameStack expect). Discrete
actions {0: push left, 1: push right} (DQN), or ``continuous=True`` for a force
in [-1, 1] (SAC, TD3, DrQ-v2). Reward 1 per step; ``terminated`` when the pole
falls past 12 degrees or the cart leaves the track, ``truncated`` after
``max_steps``. The examples (drqv2_agent.py's fallback without dm_control),
the integration tests and benchmarks/bench_integrations.py use it.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import gymnasium as gym
import numpy as np

__all__ = ["CartPolePixels"]

GRAVITY, CART_MASS, POLE_MASS, HALF_POLE, FORCE, TAU = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
THETA_LIMIT, X_LIMIT = 12 * 2 * math.pi / 360, 2.4


class CartPolePixels(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 50}

    def __init__(self, size: int = 84, continuous: bool = False, max_steps: int = 200,
                 render_mode: Optional[str] = "rgb_array"):
        self.size, self.continuous, self.max_steps = size, continuous, max_steps
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = (gym.spaces.Box(-1.0, 1.0, (1,), np.float32) if continuous
                             else gym.spaces.Discrete(2))
        ys, xs = np.mgrid[0:size, 0:size].astype(np.float32)
        self._ys, self._xs = ys, xs
        self.state = np.zeros(4)
        self.steps = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self.state = self.np_random.uniform(-0.05, 0.05, size=4)
        self.steps = 0
        return self.render(), {}

    def step(self, action: Any):
        if self.continuous:
            force = FORCE * float(np.clip(np.asarray(action, dtype=np.float64).reshape(-1)[0],
                                          -1.0, 1.0))
        else:
            force = FORCE if int(action) == 1 else -FORCE
        x, x_dot, theta, theta_dot = self.state
        cos, sin = math.cos(theta), math.sin(theta)
        total = CART_MASS + POLE_MASS
        temp = (force + POLE_MASS * HALF_POLE * theta_dot ** 2 * sin) / total
        theta_acc = (GRAVITY * sin - cos * temp) / (
            HALF_POLE * (4.0 / 3.0 - POLE_MASS * cos ** 2 / total))
        x_acc = temp - POLE_MASS * HALF_POLE * theta_acc * cos / total
        x, x_dot = x + TAU * x_dot, x_dot + TAU * x_acc
        theta, theta_dot = theta + TAU * theta_dot, theta_dot + TAU * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        terminated = bool(abs(x) > X_LIMIT or abs(theta) > THETA_LIMIT)
        truncated = bool(not terminated and self.steps >= self.max_steps)
        return self.render(), 1.0, terminated, truncated, {}

    def render(self) -> np.ndarray:
        """The scene as ``[size, size, 3]`` uint8: sky, track, cart and pole."""
        n = self.size
        img = np.empty((n, n, 3), np.uint8)
        img[...] = (235, 240, 250)
        track_y = int(n * 0.7)
        img[track_y:track_y + 1] = (90, 90, 90)
        scale = n / (2 * X_LIMIT + 1.0)
        cx = n / 2 + self.state[0] * scale
        w, h = 0.5 * scale, 0.3 * scale
        x0, x1 = max(0, math.ceil(cx - w / 2)), min(n, math.floor(cx + w / 2) + 1)
        img[max(0, math.ceil(track_y - h)):track_y + 1, x0:x1] = (40, 40, 160)
        # pole: pixels within 1.2 px of the segment from the cart's top along theta,
        # searched in the segment's bounding box
        px, py = cx, track_y - h
        length = 2 * HALF_POLE * scale
        qx, qy = px + length * math.sin(self.state[2]), py - length * math.cos(self.state[2])
        bx0, bx1 = max(0, int(min(px, qx)) - 2), min(n, int(max(px, qx)) + 3)
        by0, by1 = max(0, int(min(py, qy)) - 2), min(n, int(max(py, qy)) + 3)
        if bx0 < bx1 and by0 < by1:
            xs, ys = self._xs[by0:by1, bx0:bx1], self._ys[by0:by1, bx0:bx1]
            dx, dy = qx - px, qy - py
            t = np.clip(((xs - px) * dx + (ys - py) * dy) / (dx * dx + dy * dy), 0, 1)
            dist2 = (xs - px - t * dx) ** 2 + (ys - py - t * dy) ** 2
            img[by0:by1, bx0:bx1][dist2 <= 1.44] = (200, 120, 40)
        return img
