#!/usr/bin/env bash
# Collects a few dozen real photographs from Debian packages into data/photos/,
# the embedded default distractor set (DESIGN.md section 4).
#
# Each package is fetched with `apt-get download` and unpacked with
# `dpkg-deb --fsys-tarfile | tar -x` into a temporary folder: nothing is
# installed. Only the files of the curated list below are copied (photographs,
# not icons, logos or abstract renders), and only when their header says they
# are a JPEG or PNG of at least 256 x 256. data/photos/SOURCES.md records every
# file's package, package version, copyright holder and licence (the matching
# stanza of the package's machine-readable /usr/share/doc/<pkg>/copyright); the
# copyright files themselves are kept in data/photos/licenses/.
#
# Idempotent: when data/photos/.stamp matches this selection and every listed
# file is present, it returns at once. --force re-fetches.
#
# Usage: scripts/fetch_photos.sh [--force] [DEST]   (DEST defaults to data/photos)
set -euo pipefail

FORCE=0
if [[ "${1:-}" == "--force" ]]; then FORCE=1; shift; fi
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${1:-$REPO_ROOT/data/photos}"
PY="$(command -v python3 || true)"
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
[[ -n "$PY" ]] || { echo "fetch_photos: python3 is needed to read image headers" >&2; exit 1; }

# package | member path inside the package | file name in DEST
read -r -d '' SELECTION <<'EOF' || true
lomiri-wallpapers-16.04|usr/share/backgrounds/aitzgorri_by_Aitzol_Berasategi.jpg|lomiri_aitzgorri.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg|lomiri_bridge.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/Dragonfly_by_Bolly.jpg|lomiri_dragonfly.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/free_by_Peter_Nerlich.jpg|lomiri_free.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/friends_by_Aitzol_Berasategi.jpg|lomiri_friends.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/greentock_by_Peter_Nerlich.jpg|lomiri_greentock.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/life_by_Aitzol_Berasategi.jpg|lomiri_life.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/picosdeeuropa_by_Aitzol_Berasategi.jpg|lomiri_picosdeeuropa.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/Picture_0B_by_freespace.jpg|lomiri_picture_0b.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/Picture_1A_by_freespace.jpg|lomiri_picture_1a.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/seeding_by_Clements_Engelhardt.jpg|lomiri_seeding.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/sunset_by_Aitzol_Berasategi.jpg|lomiri_sunset.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/umang_by_Abhishek_Mudgal.jpg|lomiri_umang.jpg
lomiri-wallpapers-16.04|usr/share/backgrounds/Wine_by_Jakkub_Mede.jpg|lomiri_wine.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Aqua.jpg|mate_aqua.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Blinds.jpg|mate_blinds.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Dune.jpg|mate_dune.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/FreshFlower.jpg|mate_freshflower.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Garden.jpg|mate_garden.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/GreenMeadow.jpg|mate_greenmeadow.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/LadyBird.jpg|mate_ladybird.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/RainDrops.jpg|mate_raindrops.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Storm.jpg|mate_storm.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/TwoWings.jpg|mate_twowings.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/Wood.jpg|mate_wood.jpg
mate-backgrounds|usr/share/backgrounds/mate/nature/YellowFlower.jpg|mate_yellowflower.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/Autumn/contents/images/2560x1600.jpg|plasma_autumn.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/BytheWater/contents/images/2560x1600.jpg|plasma_bythewater.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/ColdRipple/contents/images/2560x1600.jpg|plasma_coldripple.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/ColorfulCups/contents/images/2560x1600.jpg|plasma_colorfulcups.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/DarkestHour/contents/images/2560x1600.jpg|plasma_darkesthour.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/EveningGlow/contents/images/2560x1600.jpg|plasma_eveningglow.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/FallenLeaf/contents/images/2560x1600.jpg|plasma_fallenleaf.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/Grey/contents/images/2560x1600.jpg|plasma_grey.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/Kite/contents/images/2560x1600.jpg|plasma_kite.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/OneStandsOut/contents/images/2560x1600.jpg|plasma_onestandsout.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/Path/contents/images/2560x1600.jpg|plasma_path.jpg
plasma-workspace-wallpapers|usr/share/wallpapers/summer_1am/contents/images/2560x1600.jpg|plasma_summer_1am.jpg
python3-skimage|usr/lib/python3/dist-packages/skimage/data/astronaut.png|skimage_astronaut.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/brick.png|skimage_brick.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/camera.png|skimage_camera.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/chelsea.png|skimage_chelsea.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/coffee.png|skimage_coffee.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/coins.png|skimage_coins.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/grass.png|skimage_grass.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/gravel.png|skimage_gravel.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/hubble_deep_field.jpg|skimage_hubble_deep_field.jpg
python3-skimage|usr/lib/python3/dist-packages/skimage/data/moon.png|skimage_moon.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/motorcycle_left.png|skimage_motorcycle_left.png
python3-skimage|usr/lib/python3/dist-packages/skimage/data/rocket.jpg|skimage_rocket.jpg
python3-sklearn|usr/lib/python3/dist-packages/sklearn/datasets/images/china.jpg|sklearn_china.jpg
python3-sklearn|usr/lib/python3/dist-packages/sklearn/datasets/images/flower.jpg|sklearn_flower.jpg
python-matplotlib-data|usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg|matplotlib_grace_hopper.jpg
EOF

STAMP="$DEST/.stamp"
SELECTION_HASH="$(printf '%s\n' "$SELECTION" | sha256sum | cut -d' ' -f1)"

already_fetched() {
  [[ -f "$STAMP" && -f "$DEST/SOURCES.md" ]] || return 1
  [[ "$(cat "$STAMP")" == "$SELECTION_HASH" ]] || return 1
  local name
  # Every file the last run kept (the first column of SOURCES.md's table).
  while read -r name; do
    [[ -s "$DEST/$name" ]] || return 1
  done < <(sed -n 's/^| `\([^`]*\)` |.*/\1/p' "$DEST/SOURCES.md")
}

if [[ $FORCE -eq 0 ]] && already_fetched; then
  echo "fetch_photos: $DEST is up to date ($(ls "$DEST" | grep -ciE '\.(jpe?g|png)$') photos)"
  exit 0
fi

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || {
  echo "fetch_photos: needs apt-get and dpkg-deb (a Debian/Ubuntu system)" >&2; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/obsaug-photos.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/debs" "$WORK/root"

PACKAGES=$(printf '%s\n' "$SELECTION" | cut -d'|' -f1 | sort -u)
# A fresh machine may have empty package lists: refresh them once (as root).
first_pkg=$(printf '%s\n' "$PACKAGES" | head -n 1)
first_policy=$(apt-cache policy "$first_pkg" 2>/dev/null || true)
if [ "$(id -u)" -eq 0 ] && ! [[ "$first_policy" =~ Candidate:\ [^\(] ]]; then
  apt-get update -qq || true
fi
AVAILABLE=()
COMPLETE=1  # every package and member found: only then is the stamp written
for pkg in $PACKAGES; do
  # (no `| grep -q`: under pipefail its early exit fails the pipeline)
  policy=$(apt-cache policy "$pkg" 2>/dev/null || true)
  if [[ "$policy" =~ Candidate:\ [^\(] ]]; then
    AVAILABLE+=("$pkg")
  else
    echo "fetch_photos: $pkg has no installable candidate here, skipping it" >&2
    COMPLETE=0
  fi
done
[[ ${#AVAILABLE[@]} -gt 0 ]] || {
  echo "fetch_photos: none of the packages is known to apt; run 'apt-get update' first" >&2; exit 1; }

echo "fetch_photos: downloading ${AVAILABLE[*]}"
# apt drops privileges to _apt for downloads; a mktemp folder is private, so
# let it write there.
chmod 755 "$WORK" && chmod 777 "$WORK/debs"
if ! (cd "$WORK/debs" && apt-get download -q "${AVAILABLE[@]}" >"$WORK/apt.log" 2>&1); then
  echo "fetch_photos: 'apt-get download ${AVAILABLE[*]}' failed (offline, or stale package lists?):" >&2
  tail -n 5 "$WORK/apt.log" >&2
  exit 1
fi

mkdir -p "$DEST/licenses"
# Remove what an earlier selection put here, keep anything the user added.
if [[ -f "$DEST/SOURCES.md" ]]; then
  sed -n 's/^| `\([^`]*\)` |.*/\1/p' "$DEST/SOURCES.md" | while read -r name; do rm -f "$DEST/$name"; done
fi

ROWS="$WORK/rows.tsv"
: >"$ROWS"
for pkg in "${AVAILABLE[@]}"; do
  deb=$(ls "$WORK/debs/${pkg}"_*.deb)
  version=$(dpkg-deb -f "$deb" Version)
  members=("./usr/share/doc/$pkg/copyright")
  while IFS='|' read -r p member name; do
    [[ "$p" == "$pkg" ]] && members+=("./$member")
  done <<<"$SELECTION"
  # Members missing from this version of the package are reported below.
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$WORK/root" "${members[@]}" 2>/dev/null || true
  cp "$WORK/root/usr/share/doc/$pkg/copyright" "$DEST/licenses/$pkg.copyright" 2>/dev/null || true
  while IFS='|' read -r p member name; do
    [[ "$p" == "$pkg" ]] || continue
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$pkg" "$version" "$WORK/root/$member" "/$member" >>"$ROWS"
  done <<<"$SELECTION"
done

# Check every file's header (JPEG or PNG, >= 256 x 256), copy it and look up
# its licence in the package's DEP-5 copyright file.
"$PY" - "$ROWS" "$DEST" <<'PYEOF' || { [[ $? -eq 3 ]] && COMPLETE=0; } || exit 1
import fnmatch, os, shutil, struct, sys

rows_path, dest = sys.argv[1], sys.argv[2]
MIN_SIDE = 256

def image_size(path):
    """(kind, width, height) from the header, or None."""
    with open(path, 'rb') as f:
        head = f.read(32)
        if head[:8] == b'\x89PNG\r\n\x1a\n' and head[12:16] == b'IHDR':
            w, h = struct.unpack('>II', head[16:24])
            return 'PNG', w, h
        if head[:2] != b'\xff\xd8':
            return None
        f.seek(2)
        while True:
            byte = f.read(1)
            while byte and byte != b'\xff':
                byte = f.read(1)
            while byte == b'\xff':
                byte = f.read(1)
            if not byte:
                return None
            marker = byte[0]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                continue
            length = struct.unpack('>H', f.read(2))[0]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                _, h, w = struct.unpack('>BHH', f.read(5))
                return 'JPEG', w, h
            f.seek(length - 2, 1)

def dep5_stanzas(path):
    stanzas, cur, key = [], {}, None
    with open(path, encoding='utf-8', errors='replace') as f:
        for line in f:
            line = line.rstrip('\n')
            if not line.strip():
                if cur: stanzas.append(cur)
                cur, key = {}, None
            elif line[0] in ' \t' and key:
                cur[key] += '\n' + line.strip()
            elif ':' in line:
                key, value = line.split(':', 1)
                cur[key] = value.strip()
    if cur: stanzas.append(cur)
    return stanzas

def licence_for(copyright_path, installed_path):
    """(licence, copyright holder) of the DEP-5 Files stanza for the file.
    Patterns name source-tree paths, not installed ones, so the last stanza
    whose pattern matches a suffix of the installed path wins, then one whose
    pattern's file name matches, then `Files: *`."""
    if not os.path.exists(copyright_path):
        return 'unknown (no copyright file)', ''
    by_suffix = by_name = catch_all = None
    base = os.path.basename(installed_path)
    for st in dep5_stanzas(copyright_path):
        for pattern in st.get('Files', '').split():
            if pattern == '*':
                catch_all = st
            elif fnmatch.fnmatch(installed_path, '*/' + pattern.lstrip('./')):
                by_suffix = st
            elif os.path.basename(pattern) != '*' and fnmatch.fnmatch(base, os.path.basename(pattern)):
                by_name = st
    best = by_suffix or by_name or catch_all
    if best is None:
        return 'see licenses/ (not machine-readable)', ''
    lic = best.get('License', '')
    first, _, rest = lic.partition('\n')
    if not first.strip():
        first = (rest.split('\n')[0] if rest else 'unnamed')[:70] + ' ...'
    holder = best.get('Copyright', '').split('\n')[0]
    return first.strip(), holder.strip()

missing, out = 0, []
for line in open(rows_path):
    name, pkg, version, extracted, installed = line.rstrip('\n').split('\t')
    if not os.path.exists(extracted):
        print(f'fetch_photos: {pkg} {version} has no {installed}, skipping it', file=sys.stderr)
        missing += 1
        continue
    info = image_size(extracted)
    if info is None or min(info[1], info[2]) < MIN_SIDE:
        print(f'fetch_photos: {installed} is not a JPEG/PNG of at least {MIN_SIDE}x{MIN_SIDE} ({info}), skipping it', file=sys.stderr)
        continue
    shutil.copyfile(extracted, os.path.join(dest, name))
    lic, holder = licence_for(os.path.join(dest, 'licenses', pkg + '.copyright'), installed)
    out.append(f'| `{name}` | {info[0]} {info[1]}x{info[2]} | {pkg} {version} | `{installed}` | {lic} | {holder.replace("|", "/")} |')

with open(os.path.join(dest, 'SOURCES.md'), 'w') as f:
    f.write('# Embedded distractor photographs\n\n'
            'Collected by scripts/fetch_photos.sh from Debian packages (apt-get download,\n'
            'dpkg-deb --fsys-tarfile; nothing installed). Licence and copyright holder are\n'
            'taken from the matching stanza of the package\'s /usr/share/doc/<pkg>/copyright,\n'
            'kept in full under licenses/.\n\n'
            '| file | image | package version | path in package | licence | copyright |\n'
            '|---|---|---|---|---|---|\n')
    f.write('\n'.join(out) + '\n')
print(f'fetch_photos: {len(out)} photos in {dest}')
if not out:
    sys.exit(1)
sys.exit(3 if missing else 0)
PYEOF

if [[ $COMPLETE -eq 1 ]]; then
  printf '%s\n' "$SELECTION_HASH" >"$STAMP"
else
  rm -f "$STAMP"
  echo "fetch_photos: some packages or files were missing; the next run will try again" >&2
fi
