#!/usr/bin/env bash
# Configures (once) and builds obsaug into build/: libobsaug and the Python
# extension land in python/obsaug/, the tests in build/tests/. CUDA kernels
# are compiled whenever nvcc is on the PATH. Extra arguments go to cmake and
# make it re-run (e.g. scripts/build.sh -DOBSAUG_REQUIRE_ALL=ON, what
# scripts/test.sh passes); without arguments cmake runs only when
# build/build.ninja is missing (ninja re-runs it when a CMakeLists changes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# ccache keyed on paths relative to the checkout, so a fresh clone (CI) reuses
# what earlier builds of the same sources compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
build_dir="${OBSAUG_BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$build_dir" -G Ninja -DPython3_EXECUTABLE="$root/.venv/bin/python" "$@"
fi
ninja -C "$build_dir"
