#!/usr/bin/env bash
# Builds the wheel and the sdist (pip / scikit-build-core on the same CMake)
# and checks what they hold; then installs obsaug exactly as README.md's
# "Installing it outside the checkout" says, into a fresh virtual environment
# that has only torch (and what torch requires), from a `git clone` of this
# checkout's HEAD: the block's `pip install` lines run as written (with the
# venv's pip), its apt-get line is checked (the packages must be installed).
# From an empty temporary folder it then runs an op, an Engine over a photo
# folder ($OBSAUG_PHOTOS = the checkout's data/photos), a replay sample with
# augmentation, the block's last two lines, the `obsaug` console command and
# the error with no photographs anywhere. (`obsaug fetch-photos` itself is not
# run: it downloads Debian packages; $OBSAUG_PHOTOS stands in for its cache.)
#
# The README's prerequisites (numpy, scikit-build-core, pybind11, ninja) come
# from the package index; offline, from .venv (said so). The wheel builds in
# build-wheel/ (kept: a second run is incremental), the README's install in
# the clone's build-wheel/ (SKBUILD_BUILD_DIR), with ccache keyed on
# checkout-relative paths as scripts/build.sh does; the folder sits beside
# build/ at the same depth, so the compile commands match and a warm cache from
# scripts/build.sh serves both.
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

say "installing as README.md says, into a fresh venv with only torch"
# The README's block: its `sudo apt-get install` line and its `pip install` lines.
"$python" - "$root/README.md" "$work" <<'PY'
import sys
text = open(sys.argv[1]).read()
section = text.split("### Installing it outside the checkout", 1)[1]
block = section.split("```", 2)[1]
lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
apt = [l for l in lines if l.startswith("sudo apt-get install")]
pip = [l for l in lines if l.startswith("pip install")]
assert len(apt) == 1 and len(pip) >= 2, f"wheel_check: the README's install block changed: {lines}"
open(f"{sys.argv[2]}/apt.txt", "w").write(" ".join(w for w in apt[0].split()[3:] if w != "-y"))
open(f"{sys.argv[2]}/pip.txt", "w").write("\n".join(pip) + "\n")
PY
missing=()
for pkg in $(cat "$work/apt.txt"); do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
((${#missing[@]} == 0)) || { say "the README's system packages are not installed: ${missing[*]}"; exit 1; }
git -C "$root" diff --quiet HEAD -- || say "note: uncommitted changes are not in the clone (it is HEAD)"
git clone -q "$root" "$work/clone"

"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
site="$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
venv_site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# torch and the distributions it requires, linked from .venv's site-packages into a
# folder on the new venv's path: torch is not downloaded again, and nothing else
# (numpy, the build's prerequisites) is there.
expose() {
  "$python" - "$venv_site" "$work/only" "$@" <<'PY'
import importlib.metadata as md, os, re, sys
site, into, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
os.makedirs(into, exist_ok=True)
seen, todo = set(), list(wanted)
while todo:
    name = re.split(r"[ ;<>=!~\[(]", todo.pop())[0].lower().replace("_", "-")
    if name in seen:
        continue
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        continue  # a requirement for another platform or Python
    seen.add(name)
    todo += [r for r in dist.requires or [] if "extra ==" not in r]
    for top in {f.parts[0] for f in dist.files or [] if not f.parts[0].startswith("..")}:
        source, target = os.path.join(site, top), os.path.join(into, top)
        if os.path.exists(source) and not os.path.lexists(target):
            os.symlink(source, target)
print(f"wheel_check: exposed from .venv: {', '.join(sorted(seen))}")
PY
}
expose torch
echo "$work/only" >"$site/zz_obsaug_only_torch.pth"
if "$venv_python" -c "import numpy" 2>/dev/null; then say "the venv has numpy before the install"; exit 1; fi
if ! "$venv_python" -m pip download -q --no-deps --timeout 20 -d "$work/probe" pybind11 >/dev/null 2>&1; then
  say "offline: the README's pip prerequisites come from .venv"
  expose numpy scikit-build-core pybind11 ninja
fi
cd "$work/clone"
started=$SECONDS
while read -r line; do
  say "README: $line"
  # pip as the venv's; the build in the clone's build-wheel/ for ccache (see the header)
  CCACHE_BASEDIR="$work/clone" SKBUILD_BUILD_DIR="$work/clone/build-wheel" \
    "$venv_python" -m ${line} >>"$work/install.log" 2>&1 ||
    { tail -n 40 "$work/install.log" >&2; say "the README's '$line' failed"; exit 1; }
done <"$work/pip.txt"
say "the README's install took $((SECONDS - started)) s"
cd "$root"

say "running from an empty folder outside the checkout"
outside="$work/outside"
mkdir -p "$outside" "$work/empty_cache"
cd "$outside"
unset PYTHONPATH
export OBSAUG_PHOTOS="$root/data/photos" OBSAUG_CHECKOUT="$root"
[ -d "$OBSAUG_PHOTOS" ] || { say "needs $OBSAUG_PHOTOS (scripts/fetch_photos.sh)"; exit 1; }
"$work/venv/bin/python" - <<'PY'
import os, warnings
import numpy, torch  # numpy: the package's dependency, installed by the README's pip line
with warnings.catch_warnings():
    warnings.simplefilter("error")  # a build that left a component out warns at import
    import obsaug
assert obsaug._C.skipped_components == [], obsaug._C.skipped_components
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
# The README block's last two lines, as written, with the venv's commands first on PATH.
PATH="$work/venv/bin:$PATH" obsaug check-config drq_shift >"$work/check.txt"
grep -q "op: shift" "$work/check.txt" || { cat "$work/check.txt"; say "check-config drq_shift printed no shift"; exit 1; }
PATH="$work/venv/bin:$PATH" python -c 'import obsaug; obsaug.Engine("default")'
"$work/venv/bin/obsaug" fetch-photos --help >/dev/null
say "obsaug check-config drq_shift and obsaug.Engine(\"default\") ok"

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
