#!/usr/bin/env bash
# The C++ package as a C++ user gets it (README "C++"): `cmake --install` of
# build/ into a fresh prefix, examples/cpp configured against it with
# find_package(obsaug) alone, built and run on configs/default.yaml. Prints
# PASS or FAIL; exits non-zero on failure. Needs a build (scripts/build.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d "${TMPDIR:-/tmp}/obsaug-cxx-package.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "C++ package check: FAIL: $*"; exit 1; }

cmake --install build --prefix "$work/prefix" > "$work/install.log" || {
  cat "$work/install.log"; fail "cmake --install build"; }
# Nothing of the checkout reaches the example but through the package: no
# include path, no library path, only CMAKE_PREFIX_PATH.
export CCACHE_BASEDIR="$root/examples/cpp" CCACHE_NOHASHDIR=1
cmake -S examples/cpp -B "$work/example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$work/configure.log" 2>&1 || {
  cat "$work/configure.log"; fail "configuring examples/cpp against the installed package"; }
ninja -C "$work/example" > "$work/build.log" 2>&1 || {
  cat "$work/build.log"; fail "building examples/cpp against the installed package"; }
if grep -q "$root/\(kernels\|replay\|engine\)" "$work/example/compile_commands.json" 2>/dev/null; then
  fail "the example compiled with headers from the checkout instead of the install"
fi
OBSAUG_PHOTOS="${OBSAUG_PHOTOS:-$root/data/photos}" "$work/example/replay_augment" configs/default.yaml ||
  fail "examples/cpp/replay_augment exited $?"
echo "C++ package check: PASS (installed into a temporary prefix, examples/cpp built and run)"
