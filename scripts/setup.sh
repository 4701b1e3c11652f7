#!/usr/bin/env bash
# Installs everything obsaug needs on a fresh machine of this project's kind
# (Debian 12, nvcc 13 on the PATH, no GPU needed): Debian packages, the
# virtual environment .venv/ with the pinned requirements, the development
# .pth that makes `import obsaug` find python/, and the embedded photos.
# Idempotent: a second run only checks and returns in a few seconds.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

apt_packages=(cmake ninja-build ccache g++ pkg-config libgtest-dev libbenchmark-dev
              libyaml-cpp-dev libboost-dev libturbojpeg0-dev libpng-dev liblz4-dev libzstd-dev
              clang)
missing=()
for pkg in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($python --version)"
  "$python" -m venv .venv
fi
stamp=.venv/.obsaug-requirements
want="$(sha256sum requirements.txt | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements.txt into .venv (PyTorch is large; this takes minutes once)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -r requirements.txt
  echo "$want" > "$stamp"
fi

# PyTorch's CUDA major version must match nvcc's, or the CUDA kernels would
# be built against one runtime and loaded beside another.
if command -v nvcc >/dev/null 2>&1; then
  nvcc_major="$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
  torch_major="$(.venv/bin/python -c 'import torch; print((torch.version.cuda or "none").split(".")[0])')"
  if [ "$nvcc_major" != "$torch_major" ]; then
    echo "setup: nvcc is CUDA $nvcc_major but torch was built for CUDA $torch_major; pin a matching torch in requirements.txt" >&2
    exit 1
  fi
fi

# Development install: the package is python/obsaug, the native libraries are
# built into it by scripts/build.sh.
site="$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$root/python" > "$site/obsaug-dev.pth"

if [ -x scripts/fetch_photos.sh ]; then
  scripts/fetch_photos.sh
fi
# Optional: real environments (DMControl, Atari) for examples/: OBSAUG_ENVS=1.
if [ "${OBSAUG_ENVS:-0}" = 1 ]; then
  scripts/setup_envs.sh
fi
echo "setup: ok"
