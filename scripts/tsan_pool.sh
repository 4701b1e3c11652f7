#!/usr/bin/env bash
# ThreadSanitizer run of the distractor pool tests (issue 3): configures
# build-tsan/ once (-DOBSAUG_TSAN=ON, no CUDA, its own package folder so the
# development build in python/obsaug is left alone), builds only
# obsaug_pool_tests and runs it; any reported race fails the run. Extra
# arguments go to the test binary (e.g. --gtest_filter=*Stress*).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build_dir="${OBSAUG_TSAN_BUILD_DIR:-build-tsan}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DPython3_EXECUTABLE="$root/.venv/bin/python" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DOBSAUG_TSAN=ON -DOBSAUG_CUDA=OFF \
    -DOBSAUG_PYTHON_PACKAGE_DIR="$root/$build_dir/obsaug"
fi
ninja -C "$build_dir" obsaug_pool_tests
export TSAN_OPTIONS="halt_on_error=1 abort_on_error=0 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
run=("$build_dir/tests/engine/obsaug_pool_tests" "$@")
# TSan's shadow memory needs the classic address layout on kernels with high
# mmap randomisation ("unexpected memory mapping"): run without ASLR if we can.
if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
  exec setarch "$(uname -m)" -R "${run[@]}"
fi
exec "${run[@]}"
