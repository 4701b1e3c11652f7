#!/usr/bin/env bash
# Optional extras for real observations (examples/fill_replay.py, benchmarks/bench_agent.py):
# DMControl (dm_control + MuJoCo, rendered on the CPU by Mesa's llvmpipe through EGL
# or OSMesa) and Atari (ale-py, whose wheels ship the ROMs, + gymnasium).
# Installs the Debian packages below and requirements-envs.txt into .venv (made by
# scripts/setup.sh; numpy and torch keep the pins of requirements.txt).
# Idempotent: once done it only checks and returns in about a second.
#
# Rendering: MUJOCO_GL=egl (libegl1 + libegl-mesa0, surfaceless llvmpipe; the
# default of the examples) or MUJOCO_GL=osmesa (libosmesa6). Both render 84x84
# frames on this CPU-only VM.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libosmesa6 libglfw3)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup_envs: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup_envs: .venv missing; run scripts/setup.sh first" >&2
  exit 1
fi
stamp=.venv/.obsaug-requirements-envs
want="$(cat requirements.txt requirements-envs.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup_envs: installing requirements-envs.txt into .venv"
  # requirements.txt as constraints: the extras must not move numpy / torch / pillow
  .venv/bin/python -m pip install -q -r requirements-envs.txt -c requirements.txt
  # mujoco 4 pulls mujoco-core / mujoco-studio, which overwrite mujoco/ files; a
  # .venv that ever had them needs mujoco 3.17 reinstalled over a clean tree
  if .venv/bin/python -m pip show -q mujoco-core >/dev/null 2>&1; then
    .venv/bin/python -m pip uninstall -q -y mujoco-core mujoco-studio
    .venv/bin/python -m pip install -q --force-reinstall --no-deps "$(grep '^mujoco==' requirements-envs.txt)"
  fi
  echo "$want" > "$stamp"
fi

# a quick check that both render (fast; skipped with SETUP_ENVS_CHECK=0)
if [ "${SETUP_ENVS_CHECK:-1}" != 0 ]; then
  MUJOCO_GL="${MUJOCO_GL:-egl}" .venv/bin/python - <<'PY'
import os
from dm_control import suite
env = suite.load("cartpole", "swingup", task_kwargs={"random": 0})
env.reset()
img = env.physics.render(84, 84, camera_id=0)
assert img.shape == (84, 84, 3) and img.std() > 0, img.shape
env.close()
import ale_py, gymnasium as gym
gym.register_envs(ale_py)
e = gym.make("ALE/Pong-v5")
obs, _ = e.reset(seed=0)
e.close()
print(f"setup_envs: DMControl renders with MUJOCO_GL={os.environ['MUJOCO_GL']}, "
      f"ALE {ale_py.__version__} Pong {obs.shape}")
PY
fi
echo "setup_envs: ok"
