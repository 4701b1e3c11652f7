#!/usr/bin/env bash
# Prepares, on a Debian machine with the internet, what scripts/gpu_check.sh
# needs on a GPU machine that can download nothing (the lent H200: PyTorch,
# nvcc, CMake and ninja, but no TurboJPEG, libpng, LZ4, zstd, yaml-cpp, Boost
# or GoogleTest). Without them the distractor pool, the Engine, the YAML
# config, the frame codecs and the C++ tests are skipped there
# (cmake/components.cmake), and so are their CUDA paths.
#
# Writes .gpu_bundle/ (ignored by git):
#   *.deb                       Debian's packages, fetched with `apt-get
#                               download` (nothing is installed here): the
#                               runtime and -dev packages of TurboJPEG, libpng
#                               (with zlib1g-dev: FindPNG needs zlib's header
#                               and library), LZ4 and zstd (the frame codecs,
#                               kernels/codecs), yaml-cpp, and GoogleTest's
#                               prebuilt libgtest-dev
#   boost-lockfree-headers.tar.gz  the Boost headers that
#                               <boost/lockfree/spsc_queue.hpp> includes (as
#                               g++ lists them) plus all of boost/config, from
#                               this machine's libboost-dev: the pool needs
#                               only Boost.Lockfree, and the whole package is
#                               9.5 MB of the 64 MiB a device call carries
# and makes sure data/photos holds the embedded photographs
# (scripts/fetch_photos.sh), which the pool's CUDA tests and benchmarks read.
# gpu_check.sh unpacks .gpu_bundle/ into a prefix searched before the system
# when it finds it. A device call then carries both folders:
#   carry: [".gpu_bundle", "data/photos"]   command: bash scripts/gpu_check.sh
#
# Idempotent: a package already downloaded at the version apt would fetch is
# kept; the tarball is rebuilt only when missing. Prints the bundle's size.
#
# Usage: bash scripts/gpu_bundle.sh [--force]   (--force: fetch everything again)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$ROOT/.gpu_bundle"
FORCE=0
[[ "${1:-}" == "--force" ]] && FORCE=1

PACKAGES=(libturbojpeg0 libturbojpeg0-dev libpng16-16 libpng-dev zlib1g-dev
  liblz4-1 liblz4-dev libzstd1 libzstd-dev libyaml-cpp0.7 libyaml-cpp-dev libgtest-dev)
BOOST_TAR="$BUNDLE/boost-lockfree-headers.tar.gz"

[[ "$FORCE" -eq 1 ]] && rm -rf "$BUNDLE"
mkdir -p "$BUNDLE"

# ------------------------------------------------------------- packages --
# The file name apt-get download gives a package at its candidate version
# (an epoch's ':' is written '%3a').
deb_name() {
  local pkg=$1 version arch
  version="$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
  arch="$(apt-cache show "$pkg=$version" 2>/dev/null | awk '/^Architecture:/ {print $2; exit}')"
  if [[ -z "$version" || "$version" == "(none)" || -z "$arch" ]]; then
    echo "gpu_bundle: apt knows no package '$pkg' (run apt-get update, or fix the list)" >&2
    return 1
  fi
  echo "${pkg}_${version//:/%3a}_${arch}.deb"
}

wanted=()
to_fetch=()
for pkg in "${PACKAGES[@]}"; do
  name="$(deb_name "$pkg")"
  wanted+=("$name")
  [[ -s "$BUNDLE/$name" ]] || to_fetch+=("$pkg")
done
if [[ ${#to_fetch[@]} -gt 0 ]]; then
  echo "gpu_bundle: apt-get download ${to_fetch[*]}"
  # apt's sandbox user cannot write a root-owned folder: download in a
  # world-writable temporary one, then move.
  tmp="$(mktemp -d)"
  chmod 0777 "$tmp"
  (cd "$tmp" && apt-get download -q "${to_fetch[@]}")
  mv "$tmp"/*.deb "$BUNDLE/"
  rm -rf "$tmp"
fi
# Older versions of the same packages would both be unpacked: keep only the wanted.
for f in "$BUNDLE"/*.deb; do
  keep=0
  for name in "${wanted[@]}"; do [[ "$(basename "$f")" == "$name" ]] && keep=1; done
  [[ "$keep" -eq 1 ]] || { echo "gpu_bundle: removing stale $(basename "$f")"; rm -f "$f"; }
done

# ---------------------------------------------------------------- boost --
if [[ ! -s "$BOOST_TAR" ]]; then
  header=boost/lockfree/spsc_queue.hpp
  include_dir=/usr/include
  if [[ ! -f "$include_dir/$header" ]]; then
    echo "gpu_bundle: $include_dir/$header is missing: install libboost-dev (scripts/setup.sh does)" >&2
    exit 1
  fi
  list="$(mktemp)"
  # Every header the include pulls in, relative to /usr/include, and all of
  # boost/config (its compiler and library selection differs between compilers).
  echo "#include <$header>" | g++ -std=c++17 -M -x c++ - | tr ' \\' '\n\n' |
    sed -n "s#^$include_dir/\(boost/.*\)#\1#p" | sort -u >"$list"
  (cd "$include_dir" && find boost/config -type f) >>"$list"
  sort -u -o "$list" "$list"
  tar -czf "$BOOST_TAR" -C "$include_dir" -T "$list"
  echo "gpu_bundle: $(wc -l <"$list") Boost headers -> $(basename "$BOOST_TAR")"
  rm -f "$list"
fi

# --------------------------------------------------------------- photos --
bash "$ROOT/scripts/fetch_photos.sh"

echo "gpu_bundle: $(du -sh "$BUNDLE" | cut -f1) in .gpu_bundle ($(ls "$BUNDLE" | wc -l) files)," \
  "$(du -sh "$ROOT/data/photos" | cut -f1) in data/photos"
echo "gpu_bundle: a device call carries [\".gpu_bundle\", \"data/photos\"] and runs bash scripts/gpu_check.sh"
