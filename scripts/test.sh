#!/usr/bin/env bash
# The test command: sets up, builds (CUDA included when nvcc is present) and
# runs every C++ test (ctest) and Python test (pytest). GPU tests skip
# cleanly on machines without a GPU. Exits non-zero if anything fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh || exit 1
scripts/build.sh || exit 1

status=0
echo "== C++ tests (ctest) =="
ctest --test-dir build --output-on-failure -j2 || status=1
echo "== Python tests (pytest) =="
.venv/bin/python -m pytest tests/python -q -ra || status=1
if [ -x scripts/tsan_pool.sh ] && [ -d build/tests/engine ] && grep -q obsaug_pool_tests build/build.ninja; then
  echo "== Distractor pool under ThreadSanitizer =="
  scripts/tsan_pool.sh --gtest_brief=1 || status=1
fi
exit $status
