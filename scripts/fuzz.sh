#!/usr/bin/env bash
# libFuzzer runs: builds the fuzz targets with clang into
# build-fuzz/ (-DOBSAUG_FUZZ=ON: ASan + UBSan + libFuzzer, no CUDA), makes
# the seed corpora from the project's own data, replays every saved
# regression input (tests/fuzz/regressions/<target>/), then fuzzes each
# target for SECONDS (default 60; CI uses the default, longer local runs:
# scripts/fuzz.sh 3600). Findings land in build-fuzz/findings/<target>/;
# copy them into tests/fuzz/regressions/<target>/ once fixed.
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# ccache keyed on paths relative to the checkout, so a fresh clone (CI) reuses
# what earlier builds of the same sources compiled.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_decode fuzz_tar fuzz_config fuzz_replay_checkpoint
                                     fuzz_replay_fields fuzz_frame_record)
build_dir="${OBSAUG_FUZZ_BUILD_DIR:-build-fuzz}"
if [ ! -f "$build_dir/build.ninja" ]; then
  mkdir -p "$build_dir"
  CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja \
    -DPython3_EXECUTABLE="$root/.venv/bin/python" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DOBSAUG_FUZZ=ON -DOBSAUG_CUDA=OFF -DOBSAUG_BUILD_TESTS=OFF \
    -DOBSAUG_PYTHON_PACKAGE_DIR="$root/$build_dir/obsaug" >"$build_dir/configure.log" 2>&1 ||
    { cat "$build_dir/configure.log"; exit 1; }
fi
ninja -C "$build_dir" "${targets[@]}"

# Seed corpora, made once from the project's data (again when a target's is missing).
seeds="$build_dir/seeds"
for target in "${targets[@]}"; do
  if [ ! -d "$seeds/$target" ]; then
    rm -rf "$seeds"
    .venv/bin/python scripts/make_fuzz_seeds.py "$seeds"
    break
  fi
done

export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
status=0
for target in "${targets[@]}"; do
  bin="$build_dir/tests/fuzz/$target"
  regressions="tests/fuzz/regressions/$target"
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    echo "== $target: replaying $(ls "$regressions" | wc -l) regression inputs =="
    "$bin" -runs=0 "$regressions"/* >"$build_dir/$target.regressions.log" 2>&1 ||
      { tail -40 "$build_dir/$target.regressions.log"; status=1; continue; }
  fi
  corpus="$build_dir/corpus/$target"
  findings="$build_dir/findings/$target"
  mkdir -p "$corpus" "$findings"
  echo "== $target: fuzzing for ${seconds}s =="
  if ! "$bin" -max_total_time="$seconds" -rss_limit_mb=3072 -malloc_limit_mb=2048 -timeout=20 \
      -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$seeds/$target" \
      >"$build_dir/$target.log" 2>&1; then
    tail -60 "$build_dir/$target.log"
    echo "FAIL $target: finding saved under $findings"
    status=1
    continue
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build_dir/$target.log" | grep -o '[0-9]*$' || echo '?')
  cov=$(grep -o 'cov: [0-9]*' "$build_dir/$target.log" | tail -1 || true)
  echo "PASS $target: $runs inputs in ${seconds}s, $cov, corpus $(ls "$corpus" | wc -l) files"
done
exit $status
