#!/usr/bin/env bash
# The main job: sets up, builds and runs the side-by-side ops benchmark on
# this machine (obsaug fused overlay+shift against a plain copy and plain
# PyTorch), on the embedded default sizes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
scripts/build.sh
exec .venv/bin/python benchmarks/bench_ops.py "$@"
