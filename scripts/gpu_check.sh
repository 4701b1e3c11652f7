#!/usr/bin/env bash
# GPU check (DESIGN.md section 8): on a machine with an NVIDIA GPU and PyTorch
# (+ CUDA toolkit) in the system python3, builds obsaug with CUDA into
# build-gpu/ and runs, each under `timeout`, in one go:
#   env        nvidia-smi and tool versions
#   configure  cmake -G Ninja -DOBSAUG_CUDA=ON (GoogleTest optional: tests OFF
#              when find_package(GTest) fails)
#   build      ninja, then `import obsaug` must report CUDA
#   ctest      the C++ tests (when GoogleTest was found)
#   pytest     tests/python (when pytest is installed)
#   bitexact   CPU vs CUDA, bit for bit, on large random batches: every op,
#              uint8 and float32, in place / out of place / float output,
#              odd and shared-memory-edge frame sizes, non-contiguous input,
#              a side stream and a CUDA graph capture
#   bench      benchmarks/bench_ops.py --device cuda (9x84x84 and 4x84x84)
#   memcheck   compute-sanitizer memcheck + racecheck on a short run of the ops
# Every log goes to $OUT (default ./out), 8 files at most:
#   summary.log build.log ctest.log pytest.log bitexact.log bench.log
#   bench.json sanitizer.log
# The last lines printed are one PASS/FAIL/SKIP line per step. Exit status:
# 0 when no step failed. Total budget: GPU_CHECK_BUDGET_S (default 450 s).
#
# Usage (repository root is the working directory):  scripts/gpu_check.sh
# Environment: OUT, PYTHON (default python3), CUDA_ARCH (default 90),
#              GPU_CHECK_BUDGET_S, BUILD_DIR (default build-gpu).
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
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

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
  RESULTS+=("$(printf '%-9s %-4s %s' "$1" "$2" "$3")")
  say "-- $1: $2 $3"
}
left_s() { echo $((BUDGET - (SECONDS - START))); }

# run_step NAME LOG LIMIT CMD...: runs CMD with its output appended to LOG under
# timeout min(LIMIT, time left); sets STEP_RC (124 = timed out, 125 = no time).
run_step() {
  local name=$1 log=$2 limit=$3
  shift 3
  local left
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
    125) echo SKIP ;;
    *) echo FAIL ;;
  esac
}
detail_of() {  # rc seconds
  case "$1" in
    0) echo "(${2}s)" ;;
    124 | 137) echo "(timed out after ${2}s)" ;;
    125) echo "(no time left)" ;;
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

# ---------------------------------------------------------- configure --
BUILD_LOG="$OUT/build.log"
: >"$BUILD_LOG"
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
elif ! "$PY" -c "import pytest" >/dev/null 2>&1; then
  echo "pytest is not installed in $PY: tests/python not run" | tee -a "$PYTEST_LOG"
  record pytest SKIP "(pytest is not installed in $PY)"
else
  run_step pytest "$PYTEST_LOG" 180 "$PY" -m pytest "$ROOT/tests/python" -q -ra -p no:cacheprovider
  if [ "$STEP_RC" -eq 5 ]; then
    record pytest SKIP "(no tests collected)"
  else
    record pytest "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S") $(grep -E '(passed|failed|error)' "$PYTEST_LOG" | tail -1)"
    [ "$STEP_RC" -ne 0 ] && show_tail "$PYTEST_LOG"
  fi
fi

# ----------------------------------------------------------- bitexact --
cat >"$TMP/bitexact.py" <<'PYEOF'
"""CPU vs CUDA, bit for bit (DESIGN.md section 3), on large random batches."""
import sys, time, traceback
import torch
import obsaug
from obsaug import ops as O

SEED = (1 << 63) + 12345          # exercises both key words
STEP = (1 << 40) + 7              # and both step words
dev = torch.device("cuda")
gen = torch.Generator().manual_seed(0)
results = {"ok": 0, "warn": 0, "fail": 0}
FLOAT_TOL = 2e-4                  # each side within 1e-4 of float64 math (DESIGN 3)


def rnd_u8(*shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=gen)


def compare(name, cpu, gpu):
    gpu = gpu.cpu()
    if cpu.shape != gpu.shape or cpu.dtype != gpu.dtype:
        results["fail"] += 1
        print(f"FAIL  {name}: cpu {tuple(cpu.shape)} {cpu.dtype} vs cuda {tuple(gpu.shape)} {gpu.dtype}")
        return
    if torch.equal(cpu, gpu):
        results["ok"] += 1
        print(f"ok    {name}  {tuple(cpu.shape)} {cpu.dtype}")
        return
    if cpu.dtype == torch.float32:
        nan = torch.isnan(cpu) | torch.isnan(gpu)
        diff = (cpu.double() - gpu.double()).abs().max().item()
        count = int((cpu != gpu).sum())
        if not nan.any() and diff <= FLOAT_TOL:
            results["warn"] += 1
            print(f"WARN  {name}: float32 not bit-exact, {count} values differ, max |diff| {diff:.3g} <= {FLOAT_TOL}")
            return
    diff = (cpu.double() - gpu.double()).abs()
    bad = (cpu != gpu).nonzero()
    results["fail"] += 1
    print(f"FAIL  {name}  {tuple(cpu.shape)} {cpu.dtype}: {bad.shape[0]} of {cpu.numel()} differ, "
          f"max |diff| {diff.max().item():.4g}, first at {bad[0].tolist()}: "
          f"cpu {cpu[tuple(bad[0])].item()} cuda {gpu[tuple(bad[0])].item()}")


def case(name, fn, obs, pool):
    """fn(obs, pool) on CPU and on CUDA (inputs copied), then compared."""
    try:
        out_c = fn(obs.clone(), pool)
        og = obs.to(dev)
        out_g = fn(og, None if pool is None else pool.to(dev))
        torch.cuda.synchronize()
        compare(name, out_c, out_g)
    except Exception as e:  # noqa: BLE001
        results["fail"] += 1
        print(f"FAIL  {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def pipelines(h, w):
    """(label, ops, frame size at which overlay runs, keeps size)."""
    ch, cw = max(1, h - 16), max(1, w - 12)
    return [
        ("shift4", [{"op": "shift", "pad": 4}], None, True),
        ("shift9-zeros", [{"op": "shift", "pad": 9, "padding": "zeros"}], None, True),
        ("crop", [{"op": "crop", "size": [ch, cw]}], None, False),
        ("crop-center", [{"op": "crop", "size": [ch, cw], "center": True}], None, False),
        ("overlay.5", [{"op": "overlay", "alpha": 0.5}], (h, w), True),
        ("overlay.3-.8", [{"op": "overlay", "alpha": 0.3, "alpha_max": 0.8}], (h, w), True),
        ("overlay-perframe", [{"op": "overlay", "alpha": 0.25, "alpha_max": 1.0, "per_frame": True}], (h, w), True),
        ("overlay0+1", [{"op": "overlay", "alpha": 0.0}, {"op": "overlay", "alpha": 1.0}], (h, w), True),
        ("shift+overlay", [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}], (h, w), True),
        ("overlay+shift", [{"op": "overlay", "alpha": 0.4}, {"op": "shift", "pad": 4}], (h, w), True),
        ("crop+overlay", [{"op": "crop", "size": [ch, cw]}, {"op": "overlay", "alpha": 0.5}], (ch, cw), False),
        ("shift+crop+overlay", [{"op": "shift", "pad": 2, "padding": "zeros"}, {"op": "crop", "size": [ch, cw]},
                                {"op": "overlay", "alpha": 0.6, "alpha_max": 0.9, "per_frame": True}], (ch, cw), False),
    ]


def run_shape(label, b, sc, h, w, c, pool_n=97, dtypes=("uint8", "float32"), full=True):
    for dt in dtypes:
        base = rnd_u8(b, sc, h, w)
        if dt == "float32":  # 0..255 with fractions (DMControl-GB convention)
            obs = base.float() + torch.rand(base.shape, generator=gen) * 0.999
        else:
            obs = base
        for pname, ops, ov_hw, keeps in (pipelines(h, w) if full else pipelines(h, w)[8:9]):
            pool = None if ov_hw is None else rnd_u8(pool_n, c, *ov_hw)
            tag = f"{label} {dt} {pname}"
            case(f"{tag} out", lambda x, p, ops=ops: O.augment(x, p, ops=ops, seed=SEED, step=STEP), obs, pool)
            if keeps:
                case(f"{tag} inplace", lambda x, p, ops=ops: O.augment(x, p, ops=ops, seed=SEED, step=STEP, inplace=True), obs, pool)
            if dt == "uint8":
                case(f"{tag} ->f32", lambda x, p, ops=ops: O.augment(x, p, ops=ops, seed=SEED, step=STEP,
                                                                       out_dtype=torch.float32, scale=1 / 255, bias=-0.5), obs, pool)
        if full:  # the single-op functions, with a non-zero op_index
            pool = rnd_u8(pool_n, c, h, w)
            case(f"{label} {dt} ops.shift", lambda x, p: O.shift(x, seed=SEED, step=STEP, pad=4, op_index=3), obs, None)
            case(f"{label} {dt} ops.crop", lambda x, p: O.crop(x, seed=SEED, step=STEP, size=(h - 8, w - 8), op_index=2), obs, None)
            case(f"{label} {dt} ops.overlay", lambda x, p: O.overlay(x, p, seed=SEED, step=STEP, alpha=0.2, alpha_max=0.7, op_index=1), obs, pool)
            case(f"{label} {dt} ops.overlay_", lambda x, p: O.overlay(x, p, seed=SEED, step=STEP, per_frame=True, inplace=True), obs, pool)


t0 = time.time()
print(f"torch {torch.__version__}, gpu {torch.cuda.get_device_name(0)}, obsaug {obsaug.__file__}")
# DMControl (3 RGB frames) and Atari (4 gray frames), large batches.
run_shape("dmc B1024 9x84x84", 1024, 9, 84, 84, 3)
run_shape("atari B1000 4x84x84", 1000, 4, 84, 84, 1)
# RAD-style 100x100 input, odd sizes, and the 48 KiB shared-memory edge
# (uint8 192x256 and float32 96x128 planes are exactly 49152 bytes; 256x256
# planes do not fit and take the unstaged path).
run_shape("rad B256 9x100x100", 256, 9, 100, 100, 3)
run_shape("odd B33 6x61x47", 33, 6, 61, 47, 3)
run_shape("smem-edge u8 B16 2x192x256", 16, 2, 192, 256, 1, dtypes=("uint8",))
run_shape("smem-edge f32 B16 2x96x128", 16, 2, 96, 128, 1, dtypes=("float32",))
run_shape("smem-edge-1 u8 B16 2x191x256", 16, 2, 191, 256, 1, dtypes=("uint8",), full=False)
run_shape("big B8 3x256x256", 8, 3, 256, 256, 3, full=False)
run_shape("big f32 B8 3x256x256", 8, 3, 256, 256, 3, dtypes=("float32",), full=False)

# Non-contiguous input (a slice of a larger buffer, and channels_last).
SO = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]
big = rnd_u8(256, 9, 92, 92)
pool = rnd_u8(64, 3, 84, 84)
case("noncontig slice out", lambda x, p: O.augment(x[:, :, 4:88, 4:88], p, ops=SO, seed=SEED, step=STEP), big, pool)
def _inplace_slice(x, p):
    v = x[:, :, 4:88, 4:88]
    O.augment(v, p, ops=SO, seed=SEED, step=STEP, inplace=True)
    return x
case("noncontig slice inplace (whole buffer)", _inplace_slice, big, pool)
cl = rnd_u8(128, 9, 84, 84)
case("channels_last out", lambda x, p: O.augment(x.contiguous(memory_format=torch.channels_last), p, ops=SO, seed=SEED, step=STEP), cl, pool)

# Seeds and steps: independence of steps, same call twice on CUDA is identical.
x = rnd_u8(512, 9, 84, 84).to(dev); p = pool.to(dev)
a = O.augment(x, p, ops=SO, seed=7, step=1); b2 = O.augment(x, p, ops=SO, seed=7, step=1); c2 = O.augment(x, p, ops=SO, seed=7, step=2)
torch.cuda.synchronize()
if torch.equal(a, b2) and not torch.equal(a, c2):
    results["ok"] += 1; print("ok    cuda determinism (same step equal, next step differs)")
else:
    results["fail"] += 1; print("FAIL  cuda determinism")

# Fused == one op after another (uint8, on CUDA).
seq = O.overlay(O.shift(x, seed=9, step=3, pad=4, op_index=0), p, seed=9, step=3, alpha=0.5, op_index=1)
compare("cuda fused == sequential", seq.cpu(), O.augment(x, p, ops=SO, seed=9, step=3))

# A side stream: the op must run on the current stream.
s = torch.cuda.Stream()
ref = O.augment(x.cpu(), pool, ops=SO, seed=11, step=5)
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    xs = x.clone()
    out_s = O.augment(xs, p, ops=SO, seed=11, step=5)
    O.augment(xs, p, ops=SO, seed=11, step=5, inplace=True)
s.synchronize()
compare("side stream out", ref, out_s)
compare("side stream inplace", ref, xs)

# CUDA graph capture and replay (DESIGN 8: no sync, no allocation outside torch).
try:
    static = x.clone()
    s2 = torch.cuda.Stream()
    s2.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s2):
        for _ in range(2):
            O.augment(static, p, ops=SO, seed=13, step=21, inplace=True)
            O.augment(static, p, ops=SO, seed=13, step=22)
    torch.cuda.current_stream().wait_stream(s2)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        O.augment(static, p, ops=SO, seed=13, step=21, inplace=True)
        gout = O.augment(static, p, ops=SO, seed=13, step=22)
    fresh = rnd_u8(512, 9, 84, 84)
    static.copy_(fresh.to(dev))
    g.replay()
    torch.cuda.synchronize()
    ref1 = O.augment(fresh, pool, ops=SO, seed=13, step=21)
    compare("cuda graph replay inplace", ref1, static)
    compare("cuda graph replay out", O.augment(ref1, pool, ops=SO, seed=13, step=22), gout)
except Exception as e:  # noqa: BLE001
    results["fail"] += 1
    print(f"FAIL  cuda graph capture: {type(e).__name__}: {e}")
    traceback.print_exc()

# torch.compile(fullgraph=True) on CUDA, compared with eager.
try:
    f = torch.compile(lambda t, q: O.augment(t, q, ops=SO, seed=3, step=4), fullgraph=True)
    compare("torch.compile fullgraph cuda", O.augment(x, p, ops=SO, seed=3, step=4).cpu(), f(x, p))
except Exception as e:  # noqa: BLE001
    results["fail"] += 1
    print(f"FAIL  torch.compile fullgraph cuda: {type(e).__name__}: {str(e).splitlines()[0]}")

print(f"RESULT: {results['ok']} ok, {results['warn']} float warnings, {results['fail']} failed "
      f"({time.time() - t0:.0f}s)")
sys.exit(1 if results["fail"] else 0)
PYEOF
BITEXACT_LOG="$OUT/bitexact.log"
: >"$BITEXACT_LOG"
if [ "$BUILT" -eq 1 ] && [ "$HAVE_GPU" -eq 1 ]; then
  run_step bitexact "$BITEXACT_LOG" 180 "$PY" "$TMP/bitexact.py"
  record bitexact "$(status_of "$STEP_RC")" "$(detail_of "$STEP_RC" "$STEP_S") $(grep '^RESULT' "$BITEXACT_LOG" | tail -1)"
  if [ "$STEP_RC" -ne 0 ]; then
    grep -E '^(FAIL|WARN)' "$BITEXACT_LOG" | head -20
    show_tail "$BITEXACT_LOG"
  fi
else
  record bitexact SKIP "(no build or no GPU)"
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
cat >"$TMP/sanitize.py" <<'PYEOF'
"""A short run of every CUDA op path, for compute-sanitizer (small batches)."""
import sys
import torch
import obsaug  # noqa: F401
from obsaug import ops as O

dev = torch.device("cuda")
g = torch.Generator().manual_seed(1)
failed = 0


def u8(*shape):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g).to(dev)


shapes = [(4, 9, 84, 84, 3), (3, 4, 84, 84, 1), (2, 6, 61, 47, 3), (2, 2, 192, 256, 1),
          (2, 2, 96, 128, 1), (1, 3, 256, 256, 3)]
for b, sc, h, w, c in shapes:
    for dt in (torch.uint8, torch.float32):
        x = u8(b, sc, h, w).to(dt)
        pool = u8(5, c, h, w)
        cpool = u8(5, c, h - 8, w - 6)
        calls = [
            ("shift+overlay", lambda: O.augment(x, pool, ops=[{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}], seed=1, step=2)),
            ("inplace", lambda: O.augment(x.clone(), pool, ops=[{"op": "overlay", "alpha": 0.3, "alpha_max": 0.9, "per_frame": True},
                                                                  {"op": "shift", "pad": 5, "padding": "zeros"}], seed=1, step=3, inplace=True)),
            ("crop+overlay", lambda: O.augment(x, cpool, ops=[{"op": "crop", "size": [h - 8, w - 6]}, {"op": "overlay", "alpha": 0.5}], seed=1, step=4)),
            ("noncontig", lambda: O.augment(x[:, :, 1:, 2:], None, ops=[{"op": "shift", "pad": 4}], seed=1, step=5)),
        ]
        if dt == torch.uint8:
            calls.append(("->f32", lambda: O.augment(x, pool, ops=[{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}],
                                                       seed=1, step=6, out_dtype=torch.float32, scale=1 / 255, bias=-0.5)))
        for name, fn in calls:
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                failed += 1
                print(f"FAIL {b}x{sc}x{h}x{w} {dt} {name}: {type(e).__name__}: {str(e).splitlines()[0]}")
print(f"sanitize run: {failed} calls failed")
sys.exit(1 if failed else 0)
PYEOF
SAN_LOG="$OUT/sanitizer.log"
: >"$SAN_LOG"
if [ "$BUILT" -ne 1 ] || [ "$HAVE_GPU" -ne 1 ]; then
  record memcheck SKIP "(no build or no GPU)"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
  echo "compute-sanitizer not found (PATH=$PATH)" >>"$SAN_LOG"
  record memcheck SKIP "(compute-sanitizer not found)"
else
  # No caching allocator, so that an out-of-bounds access hits unallocated memory.
  # API errors are not reported (torch probes the driver and handles the
  # errors); a failed obsaug launch raises in Python and fails the run anyway.
  SAN_STATUS=PASS
  SAN_DETAIL=""
  for tool in memcheck racecheck; do
    run_step "$tool" "$SAN_LOG" 150 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
      compute-sanitizer --tool "$tool" --error-exitcode 99 --report-api-errors no \
      "$PY" "$TMP/sanitize.py"
    SAN_DETAIL="$SAN_DETAIL $tool:$(status_of "$STEP_RC")$(detail_of "$STEP_RC" "$STEP_S")"
    if [ "$STEP_RC" -ne 0 ]; then
      SAN_STATUS=FAIL
      [ "$STEP_RC" -eq 125 ] && SAN_STATUS=SKIP
    fi
  done
  record memcheck "$SAN_STATUS" "(${SAN_DETAIL# }; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$SAN_LOG" | tr '\n' ' '))"
  [ "$SAN_STATUS" = FAIL ] && show_tail "$SAN_LOG"
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
