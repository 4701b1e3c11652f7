#!/usr/bin/env bash
# The test command: sets up, builds (CUDA included when nvcc is present) and
# runs every C++ test (ctest) and Python test (pytest), the wheel check
# (scripts/wheel_check.sh: the wheel run outside the checkout), the C++
# package check (scripts/cxx_package_check.sh: a C++ program built against
# `cmake --install`'s package), then the
# reliability runs: the C++ tests under ASan+UBSan and TSan
# (scripts/sanitize.sh), each libFuzzer target for 60 s (scripts/fuzz.sh) and
# a 2-minute soak (scripts/soak.py). The build requires every component
# (-DOBSAUG_REQUIRE_ALL=ON): a missing dependency fails the configure with
# the package to install, and the Python tests fail rather than skip a
# missing component. Only tests that need a GPU (or optional extras) skip.
# Exits non-zero if anything fails.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh || exit 1
# An argument makes build.sh re-run cmake, so the option also reaches an
# existing build/ configured without it (a fresh clone configures anyway).
scripts/build.sh -DOBSAUG_REQUIRE_ALL=ON || exit 1

status=0
echo "== C++ tests (ctest) =="
ctest --test-dir build --output-on-failure -j2 || status=1
echo "== Python tests (pytest) =="
.venv/bin/python -m pytest tests/python -q -ra || status=1
echo "== Wheel: pip wheel + sdist, installed into a fresh venv, run outside the checkout =="
start=$SECONDS
scripts/wheel_check.sh || status=1
echo "wheel check: $((SECONDS - start)) s"
echo "== C++ package: cmake --install, examples/cpp built against it by find_package(obsaug) and run =="
scripts/cxx_package_check.sh || status=1
echo "== Sanitizers: ASan + UBSan (all C++ tests), TSan (threaded components) =="
scripts/sanitize.sh asan tsan || status=1
echo "== Fuzzing: libFuzzer, ${OBSAUG_FUZZ_SECONDS:-60} s per target =="
scripts/fuzz.sh "${OBSAUG_FUZZ_SECONDS:-60}" || status=1
echo "== Soak: augment + replay sampling from two threads, refresher at full speed =="
.venv/bin/python scripts/soak.py --seconds "${OBSAUG_SOAK_SECONDS:-120}" || status=1
exit $status
