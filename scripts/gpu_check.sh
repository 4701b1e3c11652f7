#!/usr/bin/env bash
# GPU check (DESIGN.md section 8): on a machine with an NVIDIA GPU and PyTorch
# (+ CUDA toolkit) in the system python3, builds obsaug with CUDA into
# build-gpu/ and runs, each under `timeout`, in one go:
#   env        nvidia-smi and tool versions
#   deps       .gpu_bundle/ (scripts/gpu_bundle.sh, run beforehand on a machine
#              with apt) unpacked into build-gpu/deps: TurboJPEG, libpng,
#              yaml-cpp, GoogleTest and the Boost.Lockfree headers, so that the
#              pool, the Engine and the C++ tests build where none is installed;
#              then the photos in data/photos counted and Python.h looked for
#   configure  cmake -G Ninja -DOBSAUG_CUDA=ON (GoogleTest optional: tests OFF
#              when find_package(GTest) fails)
#   build      ninja, then `import obsaug` must report CUDA
#   bitexact   first: tests/python/kernels/test_cuda_bitexact.py, CPU vs CUDA
#              bit for bit on large random batches (every op, uint8 and float32,
#              in place / out of place / float output, odd sizes, both sides of
#              the 48128-byte shared-memory edge, non-contiguous input, a side
#              stream, a CUDA graph capture, torch.compile)
#   ctest      the C++ tests (when GoogleTest was found)
#   pytest     the CUDA tests only: tests/python/kernels/test_cuda.py and
#              test_cuda_host.py (the host-side CUDA code, docs/cuda.md), and
#              `-k cuda` of tests/python/engine/test_pool.py and
#              tests/python/replay/test_replay.py
#   nccl       the ShardedReplayBuffer checks on CUDA shards over NCCL:
#              OBSAUG_SHARD_DEVICE=cuda torchrun --standalone --nproc_per_node 1
#              tests/python/distributed/sharded_worker.py checks all_to_all
#              (log appended to pytest.log). One rank only: NCCL (>= 2.5)
#              refuses two ranks on one GPU ("Duplicate GPU detected"), so the
#              2-rank NCCL run needs 2 GPUs; one rank still runs the CUDA
#              path (all_gather, all_to_all, CUDA tensors), the single shard
#              against the CPU oracle, update_priorities, a checkpoint round
#              trip and the transport choice. The multi-rank checks print
#              SKIP lines; they run with gloo in tests/python/distributed.
#   bench      benchmarks/bench_ops.py --device cuda (9x84x84 and 4x84x84)
#   sanitizer  compute-sanitizer memcheck, racecheck, synccheck and initcheck
#              on tests/python/kernels/cuda_sanitizer_workload.py (probed
#              first: a runtime that answers "Device not supported" is a SKIP)
#   bench-pool, bench-replay, bench-prioritized
#              last, when time is left: benchmarks/bench_pool.py (refresh
#              running vs stopped), bench_replay.py (the fused sample on a
#              CUDA buffer vs DrQ-v2's sample, copy, augment) and
#              bench_prioritized.py (the GPU's tree at 64 Ki and 1 Mi), --device cuda
# Every log goes to $OUT (default ./out), 8 files at most:
#   summary.log build.log ctest.log pytest.log bitexact.log bench.log
#   bench.json sanitizer.log
# The last lines printed are one PASS/FAIL/SKIP line per step. Exit status:
# 0 when no step failed. Total budget: GPU_CHECK_BUDGET_S (default 450 s).
# The build is a small part of it: a cold build as configured here (sm_90,
# tests on, no ccache) took 3 min 11 s on a 2-core VM, 361 s of CPU in 114
# steps, the longest translation unit 23 s; on 16 cores well under a minute.
#
# Usage (repository root is the working directory):  scripts/gpu_check.sh
# On the lent H200 (nothing can be downloaded there): run scripts/gpu_bundle.sh
# here first, then the device call carries [".gpu_bundle", "data/photos"].
# Environment: OUT, PYTHON (default python3), CUDA_ARCH (default 90),
#              GPU_CHECK_BUDGET_S, BUILD_DIR (default build-gpu),
#              GPU_CHECK_SKIP (step names not to run, as the "== name" lines
#              print them, e.g. "ctest memcheck racecheck synccheck initcheck"
#              for a second run whose time should go to the benchmarks, which
#              come last; configure, build, import and sanitizer-probe gate
#              other steps and always run).
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
OUT="${OUT:-$ROOT/out}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD_DIR="${BUILD_DIR:-build-gpu}"
CUDA_ARCH="${CUDA_ARCH:-90}"
BUDGET="${GPU_CHECK_BUDGET_S:-450}"
START=$SECONDS
SUMMARY_LOG="$OUT/summary.log"
: >"$SUMMARY_LOG"

# nvcc and compute-sanitizer are often outside PATH.
for d in /usr/local/cuda/bin /usr/local/cuda-*/bin /opt/cuda/bin; do
  if [ -x "$d/nvcc" ]; then
    case ":$PATH:" in *":$d:"*) ;; *) PATH="$PATH:$d" ;; esac
    break
  fi
done
export PATH
if [ -z "${CUDACXX:-}" ] && command -v nvcc >/dev/null 2>&1; then
  CUDACXX="$(command -v nvcc)"
  export CUDACXX
fi
PY="${PYTHON:-$(command -v python3)}"
export PYTHONPATH="$ROOT/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
NPROC="$(nproc 2>/dev/null || echo 4)"

STEPS=()
RESULTS=()
say() { echo "$*" | tee -a "$SUMMARY_LOG"; }
record() {  # name status detail
  STEPS+=("$1")
  RESULTS+=("$(printf '%-17s %-4s %s' "$1" "$2" "$3")")
  say "-- $1: $2 $3"
}
left_s() { echo $((BUDGET - (SECONDS - START))); }

# run_step NAME LOG LIMIT CMD...: runs CMD with its output appended to LOG under
# timeout min(LIMIT, time left); sets STEP_RC (124 = timed out, 125 = no time).
run_step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local left
  case "$name" in
    configure | build | import | sanitizer-probe) ;;  # they gate other steps: always run
    *)
      case " ${GPU_CHECK_SKIP:-} " in
        *" $name "*)
          STEP_RC=126
          STEP_S=0
          echo "== $name: not run, named in GPU_CHECK_SKIP" >>"$log"
          return
          ;;
      esac
      ;;
  esac
  left=$(($(left_s) - 5))
  if [ "$left" -lt 20 ]; then
    STEP_RC=125
    STEP_S=0
    echo "== $name: not run, the ${BUDGET}s budget is spent" >>"$log"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  {
    echo "== $name: $* (timeout ${limit}s)"
  } >>"$log"
  echo "== $name (timeout ${limit}s, log $(basename "$log"))"
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  STEP_RC=$?
  STEP_S=$((SECONDS - t0))
  echo "== $name: exit $STEP_RC after ${STEP_S}s" >>"$log"
}
status_of() {  # rc -> PASS / FAIL (timeout) / FAIL
  case "$1" in
    0) echo PASS ;;
    124 | 137) echo FAIL ;;
    125 | 126) echo SKIP ;;
    *) echo FAIL ;;
  esac
}
detail_of() {  # rc seconds
  case "$1" in
    0) echo "(${2}s)" ;;
    124 | 137) echo "(timed out after ${2}s)" ;;
    125) echo "(no time left)" ;;
    126) echo "(named in GPU_CHECK_SKIP)" ;;
    *) echo "(exit $1 after ${2}s)" ;;
  esac
}
show_tail() {  # a failed step: its log tail on stdout too
  echo "---- last 25 lines of $(basename "$1") ----"
  tail -n 25 "$1"
  echo "----"
}

# ---------------------------------------------------------------- env --
{
  echo "obsaug gpu_check  $(date -Is)  host $(hostname)  root $ROOT"
  echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '(no commit)')"
  echo "== nvidia-smi"
  timeout 30 nvidia-smi 2>&1 || echo "nvidia-smi failed or missing"
  timeout 30 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit --format=csv 2>&1
  echo "== versions"
  echo "python: $PY ($("$PY" --version 2>&1))"
  timeout 60 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'available', torch.cuda.is_available(), 'devices', torch.cuda.device_count()); print('gpu', torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)) if torch.cuda.is_available() else None" 2>&1
  "$PY" -c "import pytest; print('pytest', pytest.__version__)" 2>&1 | tail -1
  "$PY" -c "import kornia; print('kornia', kornia.__version__)" 2>&1 | tail -1
  echo "cmake: $(cmake --version 2>&1 | head -1)"
  echo "ninja: $(ninja --version 2>&1 | head -1)"
  echo "nvcc: $(nvcc --version 2>&1 | tail -2 | tr '\n' ' ')"
  echo "c++: $(c++ --version 2>&1 | head -1)"
  echo "compute-sanitizer: $(compute-sanitizer --version 2>&1 | tail -1)"
  echo "cpus: $NPROC  budget: ${BUDGET}s"
} 2>&1 | tee -a "$SUMMARY_LOG"
if timeout 60 "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  HAVE_GPU=1
  record env PASS "(torch sees a GPU)"
else
  HAVE_GPU=0
  record env FAIL "(torch.cuda.is_available() is False: GPU steps are skipped)"
fi

# --------------------------------------------------------------- deps --
# .gpu_bundle/ (scripts/gpu_bundle.sh, carried with the call): Debian's
# packages of TurboJPEG, libpng, zlib1g-dev, yaml-cpp and GoogleTest, and
# the Boost.Lockfree headers, unpacked into $DEPS_PREFIX, which CMake searches
# before the system (CMAKE_PREFIX_PATH) and the loader too (LD_LIBRARY_PATH,
# besides the build tree's RPATH). Their .pc files name /usr: rewritten to the
# prefix. Without the bundle, what the machine has is used, and whatever lacks
# its library is skipped (cmake/components.cmake; the configure log says which).
DEPS_LOG="$OUT/build.log"
: >"$DEPS_LOG"
DEPS_PREFIX="$ROOT/$BUILD_DIR/deps"
unpack_deb() {  # deb dir: dpkg-deb where there is one, else ar + tar
  if command -v dpkg-deb >/dev/null 2>&1; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  local work member rc
  work="$(mktemp -d)"
  member="$(ar t "$1" | grep -m1 '^data\.tar')" && (cd "$work" && ar x "$1" "$member") &&
    tar -xf "$work/$member" -C "$2"
  rc=$?
  rm -rf "$work"
  return $rc
}
if ls "$ROOT"/.gpu_bundle/*.deb >/dev/null 2>&1; then
  rm -rf "$DEPS_PREFIX"
  mkdir -p "$DEPS_PREFIX/usr/include"
  DEPS_RC=0
  for deb in "$ROOT"/.gpu_bundle/*.deb; do
    unpack_deb "$deb" "$DEPS_PREFIX" >>"$DEPS_LOG" 2>&1 || { echo "could not unpack $deb" >>"$DEPS_LOG"; DEPS_RC=1; }
  done
  if [ -f "$ROOT/.gpu_bundle/boost-lockfree-headers.tar.gz" ]; then
    tar -xzf "$ROOT/.gpu_bundle/boost-lockfree-headers.tar.gz" -C "$DEPS_PREFIX/usr/include" >>"$DEPS_LOG" 2>&1 || DEPS_RC=1
  fi
  for pc in "$DEPS_PREFIX"/usr/lib/*/pkgconfig/*.pc "$DEPS_PREFIX"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i -E "s#^(prefix|exec_prefix|libdir|includedir)=/usr#\1=$DEPS_PREFIX/usr#" "$pc"
  done
  DEPS_LIB="$(ls -d "$DEPS_PREFIX"/usr/lib/*-linux-gnu 2>/dev/null | head -1)"
  # zlib1g-dev's libz.so links to Debian's /lib/<arch>/libz.so.1.2.x, absent
  # elsewhere: point it at the machine's own libz.so.1 (zlib1g is everywhere).
  if [ -L "$DEPS_LIB/libz.so" ] && [ ! -e "$DEPS_LIB/libz.so" ]; then
    for z in /lib/"$(basename "$DEPS_LIB")"/libz.so.1 /usr/lib/"$(basename "$DEPS_LIB")"/libz.so.1; do
      [ -e "$z" ] && { ln -sfn "$z" "$DEPS_LIB/libz.so"; echo "deps: libz.so -> $z" >>"$DEPS_LOG"; break; }
    done
  fi
  export CMAKE_PREFIX_PATH="$DEPS_PREFIX/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export PKG_CONFIG_PATH="$DEPS_LIB/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$DEPS_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  DEPS_WHAT="$(ls "$ROOT"/.gpu_bundle/*.deb | wc -l) packages$([ -d "$DEPS_PREFIX/usr/include/boost" ] && echo ' + Boost.Lockfree headers') in $DEPS_PREFIX"
  echo "deps: $DEPS_WHAT" >>"$DEPS_LOG"
  if [ "$DEPS_RC" -eq 0 ]; then
    record deps PASS "($DEPS_WHAT)"
  else
    record deps FAIL "(unpacking .gpu_bundle failed; see build.log)"
    show_tail "$DEPS_LOG"
  fi
else
  record deps SKIP "(no .gpu_bundle: the machine's own libraries; run scripts/gpu_bundle.sh here and carry .gpu_bundle)"
fi
N_PHOTOS=$(find "$ROOT/data/photos" -maxdepth 1 \( -name '*.jpg' -o -name '*.png' \) 2>/dev/null | wc -l)
say "photos: $N_PHOTOS in data/photos (carry data/photos: the pool's tests and benchmarks read them)"
PY_INCLUDE="$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)"
if [ -f "$PY_INCLUDE/Python.h" ]; then
  say "Python.h: $PY_INCLUDE"
else
  record python-h FAIL "(no Python.h in '$PY_INCLUDE': obsaug._C cannot build; bring the headers of $("$PY" --version 2>&1))"
fi

# ---------------------------------------------------------- configure --
BUILD_LOG="$OUT/build.log"  # begun by the deps step
CMAKE_ARGS=(-S "$ROOT" -B "$ROOT/$BUILD_DIR" -G Ninja
  "-DPython3_EXECUTABLE=$PY" -DOBSAUG_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCH"
  "-DOBSAUG_PYTHON_PACKAGE_DIR=$ROOT/python/obsaug" -DCMAKE_BUILD_TYPE=Release)
TESTS_ON=1
run_step configure "$BUILD_LOG" 180 cmake "${CMAKE_ARGS[@]}" -DOBSAUG_BUILD_TESTS=ON
CONF_RC=$STEP_RC
CONF_S=${STEP_S:-0}
if [ "$CONF_RC" -ne 0 ] && [ "$CONF_RC" -ne 124 ] && [ "$CONF_RC" -ne 125 ] &&
  grep -q -E "Could NOT find GTest|GTestConfig|gtest-config|package\(GTest|GTest::" "$BUILD_LOG"; then
  echo "GoogleTest not found: configuring again with -DOBSAUG_BUILD_TESTS=OFF" | tee -a "$BUILD_LOG"
  TESTS_ON=0
  rm -f "$ROOT/$BUILD_DIR/CMakeCache.txt"
  run_step configure "$BUILD_LOG" 180 cmake "${CMAKE_ARGS[@]}" -DOBSAUG_BUILD_TESTS=OFF
  CONF_RC=$STEP_RC
  CONF_S=$((CONF_S + ${STEP_S:-0}))
fi
if [ "$CONF_RC" -eq 0 ]; then
  if [ "$TESTS_ON" -eq 1 ]; then
    record configure PASS "(${CONF_S}s, tests ON)"
  else
    record configure PASS "(${CONF_S}s, GoogleTest missing: tests OFF)"
  fi
else
  record configure "$(status_of "$CONF_RC")" "$(detail_of "$CONF_RC" "$CONF_S")"
  show_tail "$BUILD_LOG"
fi

# -------------------------------------------------------------- build --
BUILT=0
if [ "$CONF_RC" -eq 0 ]; then
  run_step build "$BUILD_LOG" 330 ninja -C "$ROOT/$BUILD_DIR" -j "$NPROC"
  B_RC=$STEP_RC
  B_S=${STEP_S:-0}
  if [ "$B_RC" -eq 0 ]; then
    run_step import "$BUILD_LOG" 60 "$PY" -c "
import torch, obsaug
print('obsaug', obsaug.__version__, 'from', obsaug.__file__, 'built_with_cuda', obsaug.built_with_cuda)
assert obsaug.built_with_cuda, 'obsaug was built without CUDA'
if torch.cuda.is_available():
    x = torch.zeros(2, 3, 8, 8, dtype=torch.uint8, device='cuda')
    y = obsaug.ops.shift(x, seed=0, step=0, pad=1)
    torch.cuda.synchronize(); assert y.is_cuda
    print('import and a CUDA call: ok')
else:
    print('import ok; no GPU visible, no CUDA call made')"
    if [ "$STEP_RC" -eq 0 ]; then
      BUILT=1
      record build PASS "(${B_S}s; $(tail -2 "$BUILD_LOG" | head -1))"
    else
      record build FAIL "(built in ${B_S}s, but import/CUDA call failed: exit $STEP_RC)"
      show_tail "$BUILD_LOG"
    fi
  else
    record build "$(status_of "$B_RC")" "$(detail_of "$B_RC" "$B_S")"
    show_tail "$BUILD_LOG"
  fi
else
  record build SKIP "(configure failed)"
fi

# ----------------------------------------------------------- bitexact --
HAVE_PYTEST=0
"$PY" -c "import pytest" >/dev/null 2>&1 && HAVE_PYTEST=1
# --rootdir: tests/python/conftest.py is loaded (and importable) however few
# files are named (pytest >= 7.4 stops the conftest search at the rootdir it
# infers, here tests/python/kernels, when no ini file names one).
PYTEST=("$PY" -m pytest -q -ra -p no:cacheprovider --rootdir "$ROOT")
BITEXACT_LOG="$OUT/bitexact.log"
: >"$BITEXACT_LOG"
if [ "$BUILT" -ne 1 ] || [ "$HAVE_GPU" -ne 1 ]; then
  record bitexact SKIP "(no build or no GPU)"
elif [ "$HAVE_PYTEST" -ne 1 ]; then
  record bitexact SKIP "(pytest is not installed in $PY)"
else
  run_step bitexact "$BITEXACT_LOG" 180 "${PYTEST[@]}" "$ROOT/tests/python/kernels/test_cuda_bitexact.py"
  record bitexact "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S") $(grep -E '(passed|failed|error|skipped)' "$BITEXACT_LOG" | tail -1)"
  [ "$STEP_RC" -ne 0 ] && show_tail "$BITEXACT_LOG"
fi

# -------------------------------------------------------------- ctest --
CTEST_LOG="$OUT/ctest.log"
: >"$CTEST_LOG"
if [ "$BUILT" -eq 1 ] && [ "$TESTS_ON" -eq 1 ]; then
  run_step ctest "$CTEST_LOG" 120 ctest --test-dir "$ROOT/$BUILD_DIR" --output-on-failure -j "$NPROC"
  if [ "$STEP_RC" -eq 0 ] && grep -q "No tests were found" "$CTEST_LOG"; then
    record ctest SKIP "(no tests were found)"
  else
    record ctest "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S") $(grep -E 'tests passed|tests failed' "$CTEST_LOG" | tail -1)"
    [ "$STEP_RC" -ne 0 ] && show_tail "$CTEST_LOG"
  fi
elif [ "$BUILT" -eq 1 ]; then
  echo "GoogleTest was not found at configure time: C++ tests not built" >"$CTEST_LOG"
  record ctest SKIP "(GoogleTest missing: C++ tests not built)"
else
  record ctest SKIP "(no build)"
fi

# ------------------------------------------------------------- pytest --
PYTEST_LOG="$OUT/pytest.log"
: >"$PYTEST_LOG"
if [ "$BUILT" -ne 1 ]; then
  record pytest SKIP "(no build)"
elif [ "$HAVE_PYTEST" -ne 1 ]; then
  echo "pytest is not installed in $PY: the CUDA tests not run" | tee -a "$PYTEST_LOG"
  record pytest SKIP "(pytest is not installed in $PY)"
else
  T="$ROOT/tests/python"
  run_step pytest "$PYTEST_LOG" 150 "${PYTEST[@]}" "$T/kernels/test_cuda.py" "$T/kernels/test_cuda_host.py"
  P_RC=$STEP_RC
  P_S=$STEP_S
  P_LINE="$(grep -E '(passed|failed|error|skipped)' "$PYTEST_LOG" | tail -1)"
  run_step pytest-k-cuda "$PYTEST_LOG" 90 "${PYTEST[@]}" -k cuda "$T/engine/test_pool.py" "$T/replay/test_replay.py"
  K_RC=$STEP_RC
  [ "$K_RC" -eq 5 ] && K_RC=0  # no test selected (built without the engine): nothing failed
  if [ "$P_RC" -eq 0 ] || [ "$P_RC" -eq 126 ]; then P_RC=$K_RC; fi
  record pytest "$(status_of "$P_RC")" "$(detail_of "$P_RC" $((P_S + STEP_S))) $P_LINE; -k cuda: $(grep -E '(passed|failed|error|deselected)' "$PYTEST_LOG" | tail -1)"
  [ "$P_RC" -ne 0 ] && show_tail "$PYTEST_LOG"
fi

# --------------------------------------------------------------- nccl --
# Appends to pytest.log (the 8 files in $OUT). The group timeout (30 s) is
# under the step's limit, so a stuck collective raises and shows its traceback.
if [ "$BUILT" -ne 1 ] || [ "$HAVE_GPU" -ne 1 ]; then
  record nccl SKIP "(no build or no GPU)"
elif ! "$PY" -c "import obsaug, sys; sys.exit(0 if hasattr(obsaug._C, 'shard_draws') else 1)" >>"$PYTEST_LOG" 2>&1; then
  record nccl SKIP "(obsaug was built without the replay buffer)"
elif ! "$PY" -c "import torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_nccl_available() else 1)" >>"$PYTEST_LOG" 2>&1; then
  record nccl SKIP "(torch.distributed has no NCCL in $PY)"
else
  run_step nccl "$PYTEST_LOG" 60 env OBSAUG_SHARD_DEVICE=cuda OMP_NUM_THREADS=1 \
    "$PY" -m torch.distributed.run --standalone --nproc_per_node 1 \
    "$ROOT/tests/python/distributed/sharded_worker.py" checks all_to_all 30
  N_OK=$(sed -n '/^== nccl: /,$p' "$PYTEST_LOG" | grep -c '^CHECK .* OK')
  N_SKIP=$(sed -n '/^== nccl: /,$p' "$PYTEST_LOG" | grep -c '^SKIP ')
  record nccl "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S") 1 rank: $N_OK checks OK, $N_SKIP multi-rank parts skipped"
  [ "$STEP_RC" -ne 0 ] && show_tail "$PYTEST_LOG"
fi

# -------------------------------------------------------------- bench --
BENCH_LOG="$OUT/bench.log"
: >"$BENCH_LOG"
if [ "$BUILT" -eq 1 ] && [ "$HAVE_GPU" -eq 1 ]; then
  run_step bench "$BENCH_LOG" 200 "$PY" "$ROOT/benchmarks/bench_ops.py" --device cuda \
    --frames 9x84x84 4x84x84 --json "$OUT/bench.json"
  record bench "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S")"
  if [ "$STEP_RC" -eq 0 ]; then
    sed -n '/^Summary/,/^(wall/p' "$BENCH_LOG"
  else
    show_tail "$BENCH_LOG"
  fi
else
  record bench SKIP "(no build or no GPU)"
fi

# ---------------------------------------------------------- sanitizer --
SAN_LOG="$OUT/sanitizer.log"
: >"$SAN_LOG"
WORKLOAD="$ROOT/tests/python/kernels/cuda_sanitizer_workload.py"
# No caching allocator, so that an out-of-bounds access hits unallocated memory.
# API errors are not reported (torch probes the driver and handles the
# errors); a failed obsaug launch raises in Python and fails the run anyway.
SANITIZE=(env PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --error-exitcode 99
  --report-api-errors no)
if [ "$BUILT" -ne 1 ] || [ "$HAVE_GPU" -ne 1 ]; then
  record sanitizer SKIP "(no build or no GPU)"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
  echo "compute-sanitizer not found (PATH=$PATH)" >>"$SAN_LOG"
  record sanitizer SKIP "(compute-sanitizer not found)"
else
  # Probe: some runtimes answer "Device not supported" and then error 999
  # for every program; that is a SKIP with the tool's words, not a failure.
  run_step sanitizer-probe "$SAN_LOG" 90 "${SANITIZE[@]}" --tool memcheck "$PY" -c \
    "import torch; torch.ones(4, device='cuda').add_(1); torch.cuda.synchronize(); print('probe ok')"
  PROBE_LINE="$(grep -m1 -E 'Device not supported|not supported on this device' "$SAN_LOG")"
  if [ -n "$PROBE_LINE" ]; then
    record sanitizer SKIP "(compute-sanitizer: $PROBE_LINE; probe exit $STEP_RC)"
  elif [ "$STEP_RC" -ne 0 ]; then
    record sanitizer FAIL "(the probe failed: exit $STEP_RC)"
    show_tail "$SAN_LOG"
  else
    SAN_STATUS=PASS
    SAN_DETAIL=""
    for tool in memcheck racecheck synccheck initcheck; do
      extra=()
      [ "$tool" = racecheck ] && extra=(--racecheck-report all)
      run_step "$tool" "$SAN_LOG" 120 "${SANITIZE[@]}" --tool "$tool" "${extra[@]}" "$PY" "$WORKLOAD"
      SAN_DETAIL="$SAN_DETAIL $tool:$(status_of "$STEP_RC")$(detail_of "$STEP_RC" "$STEP_S")"
      if [ "$STEP_RC" -eq 125 ] || [ "$STEP_RC" -eq 126 ]; then
        [ "$SAN_STATUS" = PASS ] && SAN_STATUS=SKIP
      elif [ "$STEP_RC" -ne 0 ]; then
        SAN_STATUS=FAIL
      fi
    done
    record sanitizer "$SAN_STATUS" "(${SAN_DETAIL# }; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$SAN_LOG" | tr '\n' ' '))"
    [ "$SAN_STATUS" = FAIL ] && show_tail "$SAN_LOG"
  fi
fi

# --------------------------------------------------------- bench-more --
# The GPU numbers beside the ops' (appended to bench.log, each table printed):
# augment latency with the pool's refresh running and stopped, the fused
# replay sample on a CUDA buffer against DrQ-v2's sample-copy-augment, and the
# prioritized tree at 64 Ki and 1 Mi slots. Last, after the correctness steps.
if [ "$BUILT" -eq 1 ] && [ "$HAVE_GPU" -eq 1 ]; then
  for b in pool replay prioritized; do
    case $b in
      pool) cmd=("$PY" "$ROOT/benchmarks/bench_pool.py" --device cuda --threads 4 --calls 2000 --rounds 3) ;;
      replay) cmd=("$PY" "$ROOT/benchmarks/bench_replay.py" --device cuda --capacity 20000 --rounds 5
        --min-time 0.05) ;;
      prioritized) cmd=("$PY" "$ROOT/benchmarks/bench_prioritized.py" --device cuda
        --sizes 65536 1048576 --rounds 5) ;;
    esac
    run_step "bench-$b" "$BENCH_LOG" 90 "${cmd[@]}"
    record "bench-$b" "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S")"
    if [ "$STEP_RC" -eq 0 ]; then
      sed -n "/^== bench-$b: /,\$p" "$BENCH_LOG" | grep -E '^\||^(phase|median change|refresh)' | tail -n 14
    else
      case "$STEP_RC" in 125 | 126) ;; *) show_tail "$BENCH_LOG" ;; esac
    fi
  done
else
  record bench-more SKIP "(no build or no GPU)"
fi

# ------------------------------------------------------------ summary --
say ""
say "== gpu_check summary ($((SECONDS - START))s of ${BUDGET}s; logs in $OUT)"
FAILED=0
for line in "${RESULTS[@]}"; do
  say "$line"
  case "$line" in *" FAIL "*) FAILED=1 ;; esac
done
exit $FAILED
