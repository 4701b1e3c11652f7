#!/usr/bin/env bash
# The main job: sets up, builds, then streams 10 million samples through the
# engine of configs/default.yaml (shift + overlay with the embedded photos,
# refreshed in the background) with the C++ CLI, and writes a preview grid of
# original and augmented frames to build/preview.png.
# Extra arguments go to `obsaug bench` (e.g. --samples 1000000 --batch 128).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
scripts/build.sh
build/tools/obsaug bench --config configs/default.yaml --samples 10000000 "$@"
build/tools/obsaug preview --config configs/default.yaml --out build/preview.png
