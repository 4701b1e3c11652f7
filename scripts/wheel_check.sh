#!/usr/bin/env bash
# Builds the wheel and the sdist (pip / scikit-build-core on the same CMake)
# and tries the wheel outside the checkout: installs it into a fresh virtual
# environment that sees .venv's packages (torch is not downloaded again) and,
# from an empty temporary folder, runs an op, an Engine over a photo folder
# ($OBSAUG_PHOTOS = the checkout's data/photos), a replay sample with
# augmentation, the `obsaug` console command (check-config by preset name) and
# the error with no photographs anywhere.
#
# The wheel builds in build-wheel/ (kept: a second run is incremental) with
# ccache keyed on checkout-relative paths as scripts/build.sh does; the
# folder sits beside build/ at the same depth, so the compile commands match
# and a warm cache from scripts/build.sh serves the wheel too.
# Usage: scripts/wheel_check.sh   (OBSAUG_WHEEL_KEEP=1 keeps the temporary folder)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-12G}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# scikit-build-core would set CC/CXX from Python's sysconfig (gcc, g++); ccache
# hashes the compiler's name, so keep the names scripts/build.sh's CMake picks.
export CC="${CC:-cc}" CXX="${CXX:-c++}"
python="$root/.venv/bin/python"
work="$(mktemp -d "${TMPDIR:-/tmp}/obsaug-wheel.XXXXXX")"
[ "${OBSAUG_WHEEL_KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
dist="$work/dist"
say() { echo "wheel_check: $*"; }

say "building the wheel (build-wheel/)"
# --no-build-isolation: scikit-build-core, pybind11, ninja and torch come from
# .venv (requirements.txt), nothing is downloaded.
"$python" -m pip wheel --no-build-isolation --no-deps -q -w "$dist" \
  --config-settings=build-dir=build-wheel \
  --config-settings=cmake.define.OBSAUG_REQUIRE_ALL=ON . >"$work/wheel.log" 2>&1 ||
  { tail -n 40 "$work/wheel.log" >&2; say "the wheel build failed"; exit 1; }
wheel="$(ls "$dist"/obsaug-*.whl)"
say "building the sdist"
"$python" -c "import sys; from scikit_build_core.build import build_sdist; build_sdist(sys.argv[1])" \
  "$dist" >"$work/sdist.log" 2>&1 || { cat "$work/sdist.log" >&2; exit 1; }
sdist="$(ls "$dist"/obsaug-*.tar.gz)"

# What each archive must hold, and must not.
"$python" - "$wheel" "$sdist" <<'PY'
import sys, tarfile, zipfile
wheel = set(zipfile.ZipFile(sys.argv[1]).namelist())
sdist = {name.split("/", 1)[1] for name in tarfile.open(sys.argv[2]).getnames() if "/" in name}
need_wheel = ["obsaug/__init__.py", "obsaug/cli.py", "obsaug/locations.py", "obsaug/libobsaug.so",
              "obsaug/bin/obsaug", "obsaug/configs/drq_shift.yaml", "obsaug/configs/default.yaml",
              "obsaug/scripts/fetch_photos.sh"]
need_sdist = ["pyproject.toml", "CMakeLists.txt", "configs/drq_shift.yaml", "scripts/fetch_photos.sh",
              "python/obsaug/cli.py", "engine/locations.cpp"]
missing = [n for n in need_wheel if n not in wheel] + [n for n in need_sdist if n not in sdist]
if not any(n.startswith("obsaug/_C.") and n.endswith(".so") for n in wheel):
    missing.append("obsaug/_C*.so")
if not any(n.endswith("entry_points.txt") and n.startswith("obsaug-") for n in wheel):
    missing.append("entry_points.txt")
stray = sorted(n for n in sdist if n.startswith(("data/", "build", ".venv/")))
if missing or stray:
    sys.exit(f"wheel_check: missing {missing}, must not ship {stray[:5]}")
print(f"wheel_check: {sys.argv[1].rsplit('/', 1)[1]}: {len(wheel)} files; sdist: {len(sdist)} files")
PY

say "installing into a fresh venv over .venv's packages"
"$python" -m venv "$work/venv"
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
venv_site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# .venv's site-packages as a plain path entry: torch and the rest are found,
# but .venv's own .pth files (the development obsaug-dev.pth) are not run.
echo "$venv_site" >"$site/zz_obsaug_dotvenv.pth"
"$work/venv/bin/python" -m pip install -q --no-deps --no-index "$wheel"

say "running from an empty folder outside the checkout"
outside="$work/outside"
mkdir -p "$outside" "$work/empty_cache"
cd "$outside"
unset PYTHONPATH
export OBSAUG_PHOTOS="$root/data/photos" OBSAUG_CHECKOUT="$root"
[ -d "$OBSAUG_PHOTOS" ] || { say "needs $OBSAUG_PHOTOS (scripts/fetch_photos.sh)"; exit 1; }
"$work/venv/bin/python" - <<'PY'
import os, torch
import obsaug
here = os.path.dirname(obsaug.__file__)
assert not here.startswith(os.environ["OBSAUG_CHECKOUT"]), f"imported the checkout's obsaug: {here}"
obs = torch.randint(0, 256, (4, 9, 84, 84), dtype=torch.uint8)
out = obsaug.ops.shift(obs, seed=0, step=0, pad=4)
assert out.shape == obs.shape and not torch.equal(out, obs)
with obsaug.Engine("default") as engine:  # a preset by name, photos from $OBSAUG_PHOTOS
    assert engine.config["pool"]["sources"] == [os.path.realpath(os.environ["OBSAUG_PHOTOS"])] \
        or engine.config["pool"]["sources"] == [os.environ["OBSAUG_PHOTOS"]], engine.config["pool"]
    aug = engine.augment(obs)
    assert aug.shape == obs.shape and engine.stats()["has_pool"]
    rb = obsaug.ReplayBuffer(capacity=64, frame_shape=(3, 84, 84), frame_stack=3, action_shape=(2,))
    rb.add_first(torch.randint(0, 256, (3, 84, 84), dtype=torch.uint8))
    for t in range(10):
        rb.add(torch.zeros(2), 1.0, torch.randint(0, 256, (3, 84, 84), dtype=torch.uint8))
    batch = rb.sample(8, augment=engine)
    assert batch["obs"].shape == (8, 9, 84, 84) and batch["next_obs"].shape == (8, 9, 84, 84)
devices = "cpu" + (" cuda" if torch.cuda.is_available() and obsaug.built_with_cuda else "")
if "cuda" in devices:
    assert torch.equal(obsaug.ops.shift(obs.cuda(), seed=0, step=0, pad=4).cpu(), out)
print(f"wheel_check: op, Engine over $OBSAUG_PHOTOS, replay sample+augment ok ({devices}) "
      f"from {here}")
PY
"$work/venv/bin/obsaug" check-config drq_shift >"$work/check.txt"
grep -q "op: shift" "$work/check.txt" || { cat "$work/check.txt"; say "check-config drq_shift printed no shift"; exit 1; }
"$work/venv/bin/obsaug" fetch-photos --help >/dev/null
say "obsaug check-config drq_shift ok"

# No photographs anywhere: no $OBSAUG_PHOTOS, an empty user cache.
unset OBSAUG_PHOTOS
export XDG_CACHE_HOME="$work/empty_cache"
if "$work/venv/bin/obsaug" check-config default >"$work/none.txt" 2>&1; then
  cat "$work/none.txt"; say "check-config default succeeded without photos"; exit 1
fi
grep -q "obsaug fetch-photos" "$work/none.txt" && grep -q "OBSAUG_PHOTOS" "$work/none.txt" ||
  { cat "$work/none.txt"; say "the no-photos error does not say how to get them"; exit 1; }
"$work/venv/bin/python" - <<'PY'
import obsaug
try:
    obsaug.Engine("default")
except ValueError as e:
    assert "obsaug fetch-photos" in str(e) and "OBSAUG_PHOTOS" in str(e), e
else:
    raise SystemExit("wheel_check: Engine('default') built without photos")
PY
say "the no-photos error names obsaug fetch-photos and OBSAUG_PHOTOS: $(head -c 160 "$work/none.txt")..."
say "ok"
