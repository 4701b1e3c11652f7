#!/usr/bin/env bash
# Sanitizer runs of the C++ tests, each in its own build tree with
# its own package folder (the development build is left alone), no CUDA:
#   asan   every C++ test binary under AddressSanitizer + UndefinedBehaviorSanitizer
#          (build-asan/, -DOBSAUG_ASAN=ON); the ops' tests (obsaug_tests) once
#          more with OBSAUG_CPU_LOOPS=baseline, on the CPU's baseline loops
#   tsan   the threaded components under ThreadSanitizer: the distractor pool,
#          the engine (threads augmenting while the refresh runs) and the
#          replay tests with the soak (build-tsan/, -DOBSAUG_TSAN=ON)
#   both also run the CUDA kernels under the CPU emulation of the CUDA
#   execution model (tests/cuda_emulation/: its fibers are TSan fibers, so a
#   race between threads of a block is a TSan report)
# Usage: scripts/sanitize.sh [asan|tsan]...   (default: both)
# SANITIZE_ONLY=NAME runs only the test binary NAME (e.g. obsaug_cuda_emulation_tests).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# ccache keyed on paths relative to the checkout, so a fresh clone (CI) reuses
# what earlier builds of the same sources compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(asan tsan)

configure() {  # dir option
  if [ ! -f "$1/build.ninja" ]; then
    mkdir -p "$1"
    cmake -S . -B "$1" -G Ninja -DPython3_EXECUTABLE="$root/.venv/bin/python" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -D"$2"=ON -DOBSAUG_CUDA=OFF \
      -DOBSAUG_PYTHON_PACKAGE_DIR="$root/$1/obsaug" >"$1/configure.log" 2>&1 ||
      { cat "$1/configure.log"; return 1; }
  fi
}

# Runs the binaries that exist, each with a brief gtest report; returns 1 if any fails.
run_tests() {
  local status=0 bin
  for bin in "$@"; do
    [ -x "$bin" ] || continue
    echo "-- $(basename "$bin")"
    "$bin" --gtest_brief=1 2>&1 | tail -n 25 || status=1
  done
  return $status
}

# Keeps only $SANITIZE_ONLY in the array `tests`, when set.
select_tests() {
  [ -n "${SANITIZE_ONLY:-}" ] || return 0
  local t kept=()
  for t in "${tests[@]}"; do [ "$(basename "$t")" = "$SANITIZE_ONLY" ] && kept+=("$t"); done
  tests=("${kept[@]}")
  [ ${#tests[@]} -gt 0 ] || { echo "no $mode test binary is named $SANITIZE_ONLY"; return 1; }
}

# Torch's OpenMP runtime is not instrumented: one intra-op thread keeps
# at::parallel_for inline, so the sanitizers see only obsaug's threads.
export OMP_NUM_THREADS=1
status=0
for mode in "${modes[@]}"; do
  case "$mode" in
    asan)
      echo "== C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer =="
      configure build-asan OBSAUG_ASAN || { status=1; continue; }
      tests=(tests/obsaug_tests tests/files/obsaug_files_tests tests/engine/obsaug_source_tests tests/engine/obsaug_decode_tests
             tests/engine/obsaug_pool_tests tests/engine/obsaug_config_tests
             tests/engine/obsaug_engine_tests tests/replay/obsaug_replay_tests tests/tools/obsaug_tools_tests
             tests/cuda_emulation/obsaug_cuda_emulation_tests tests/obsaug_codecs_tests
             tests/cuda_emulation/obsaug_codecs_cuda_emulation_tests)
      select_tests || continue
      ninja -C build-asan $(for t in "${tests[@]}"; do basename "$t"; done) || { status=1; continue; }
      asan="detect_leaks=0:halt_on_error=1:detect_odr_violation=0:${ASAN_OPTIONS:-}"
      ubsan="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
      ASAN_OPTIONS="$asan" UBSAN_OPTIONS="$ubsan" run_tests "${tests[@]/#/build-asan/}" || status=1
      # the ops' tests once more on the CPU's baseline loops (README, "The
      # CPU's sets of loops"), whose scalar tails the wider sets never reach
      if [[ " ${tests[*]} " == *" tests/obsaug_tests "* ]]; then
        echo "-- with OBSAUG_CPU_LOOPS=baseline:"
        OBSAUG_CPU_LOOPS=baseline ASAN_OPTIONS="$asan" UBSAN_OPTIONS="$ubsan" \
          run_tests build-asan/tests/obsaug_tests || status=1
      fi
      ;;
    tsan)
      echo "== Threaded components under ThreadSanitizer =="
      configure build-tsan OBSAUG_TSAN || { status=1; continue; }
      tests=(tests/engine/obsaug_pool_tests tests/engine/obsaug_engine_tests
             tests/replay/obsaug_replay_tests
             tests/cuda_emulation/obsaug_cuda_emulation_tests
             tests/cuda_emulation/obsaug_codecs_cuda_emulation_tests)
      select_tests || continue
      ninja -C build-tsan $(for t in "${tests[@]}"; do basename "$t"; done) || { status=1; continue; }
      # TSan's shadow memory needs the classic address layout on kernels with
      # high mmap randomisation ("unexpected memory mapping"): no ASLR if we can.
      norand=()
      if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
        norand=(setarch "$(uname -m)" -R)
      fi
      export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
      for t in "${tests[@]}"; do
        [ -x "build-tsan/$t" ] || continue
        echo "-- $(basename "$t")"
        "${norand[@]}" "build-tsan/$t" --gtest_brief=1 2>&1 | tail -n 25 || status=1
      done
      ;;
    *) echo "unknown mode $mode (asan or tsan)"; exit 2 ;;
  esac
done
exit $status
