"""The distractor decoder (engine/decode/decode.h) against Pillow + torchvision semantics.

Runs obsaug_decode_tool (built with the engine) on images written here with
Pillow in every mode the pool meets, and on the embedded photographs
(data/photos, when scripts/fetch_photos.sh has run), and compares with PIL's
crop + antialiased BILINEAR resize + flip (+ convert("L")) on the same crop.
Skipped when the tool is not built (set OBSAUG_DECODE_TOOL to point at it).
"""
import os
import sys

import pytest

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")

from conftest import ENGINE_TESTS, PHOTOS, needs_photos, require_component  # noqa: E402

sys.path.insert(0, ENGINE_TESTS)
import pillow_compare as pc  # noqa: E402

TOOL = pc.find_tool()
pytestmark = require_component("obsaug_decode_tool (build/tools/; or set OBSAUG_DECODE_TOOL)",
                               present=TOOL is not None)

SIZE = (84, 84)


def _texture(h, w, seed=0):
    """A smooth colour field plus noise: enough detail for resampling to matter."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([255 * x / (w - 1), 255 * y / (h - 1), 128 + 90 * np.sin(x / 9.0) * np.cos(y / 13.0)], -1)
    return np.clip(base + rng.normal(0, 18, base.shape), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    """name -> path of images in each mode; the names say what they hold."""
    d = tmp_path_factory.mktemp("pillow_fixtures")
    rgb = Image.fromarray(_texture(250, 333))
    out = {}

    def save(name, im, **kw):
        path = str(d / name)
        im.save(path, **kw)
        out[name] = path

    save("rgb_420.jpg", rgb, quality=92)
    save("rgb_444.jpg", rgb, quality=92, subsampling=0)
    save("gray.jpg", rgb.convert("L"), quality=92)
    save("cmyk.jpg", rgb.convert("CMYK"), quality=95)
    save("progressive.jpg", rgb, quality=90, progressive=True)
    save("rgb.png", rgb)
    save("gray.png", rgb.convert("L"))
    save("palette.png", rgb.convert("P", palette=Image.ADAPTIVE, colors=64), transparency=3)
    rgba = rgb.copy()
    rgba.putalpha(Image.fromarray(_texture(250, 333, 1)[..., 0]))
    save("rgba.png", rgba)
    save("la.png", rgba.convert("LA"))
    # A PNG with a .jpg name: the format comes from the bytes.
    path = str(d / "png_named.jpg")
    rgb.save(path, format="PNG")
    out["png_named.jpg"] = path
    return out


NAMES = ["rgb_420.jpg", "rgb_444.jpg", "gray.jpg", "cmyk.jpg", "progressive.jpg", "rgb.png", "gray.png",
         "palette.png", "rgba.png", "la.png", "png_named.jpg"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("channels", [3, 1])
def test_resize_matches_pillow_without_dct_scaling(fixtures, name, channels):
    for serial in range(4):
        r = pc.compare(TOOL, fixtures[name], SIZE, channels, seed=3, serial=serial, dct=False)
        assert r["record"]["scale"] == [1, 1]
        # Pillow's own resampling math, so what is left is the decoders'
        # rounding (Pillow's wheel bundles another libjpeg-turbo) and, for
        # luma, the order of conversion and resize (obsaug converts first,
        # or decodes a JPEG's Y plane directly).
        assert r["mad"] <= 2.0, (name, serial, r)
        if channels == 3 and name != "cmyk.jpg":
            assert r["mad"] <= 0.5 and r["max"] <= 2, (name, serial, r)


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(".jpg") and n != "png_named.jpg"])
def test_dct_scaled_decode_stays_close_to_pillow(fixtures, name):
    # Small output from a 333x250 image: most crops decode at 1/2 or below.
    mads = []
    for serial in range(8):
        r = pc.compare(TOOL, fixtures[name], (24, 24), 3, seed=5, serial=serial, dct=True)
        mads.append(r["mad"])
        assert r["mad"] <= 6.0, (name, serial, r)
    assert np.mean(mads) <= 3.0, mads


def test_crop_and_flip_are_reproducible(fixtures):
    a = pc.run_tool(TOOL, fixtures["rgb.png"], SIZE, 3, seed=9, serial=123)
    b = pc.run_tool(TOOL, fixtures["rgb.png"], SIZE, 3, seed=9, serial=123)
    c = pc.run_tool(TOOL, fixtures["rgb.png"], SIZE, 3, seed=9, serial=124)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    assert a[0]["crop"] != c[0]["crop"]


def test_bad_files_fail_cleanly(tmp_path):
    cases = {"empty.jpg": b"", "random.jpg": os.urandom(4096),
             "truncated.jpg": None, "gif.png": b"GIF89a" + bytes(100)}
    buf = tmp_path / "good.jpg"
    Image.fromarray(_texture(120, 160)).save(buf, quality=90)
    cases["truncated.jpg"] = buf.read_bytes()[:1500]
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(RuntimeError, match=name):
            pc.run_tool(TOOL, str(path))


@pytest.mark.parametrize("args, needle", [
    (["--seed", "abc"], "--seed abc"), (["--seed", "010x"], "--seed 010x"),
    (["--serial", "-1"], "--serial -1"), (["--size", "84x84junk"], "--size wants HxW"),
    (["--size", "100000x100000"], "sides in 1..16384"), (["--channels", "3x"], "must be 1 or 3"),
])
def test_tool_arguments_are_checked(fixtures, tmp_path, args, needle):
    """Numbers are decimal and in range (no octal, hex or trailing junk); a bad one is
    exit status 2 naming it, before anything is decoded or allocated."""
    import subprocess
    r = subprocess.run([TOOL, fixtures["rgb.png"], str(tmp_path / "out.ppm"), *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr


@needs_photos
def test_embedded_photos_match_pillow():
    paths = sorted(os.path.join(PHOTOS, f) for f in os.listdir(PHOTOS) if f.lower().endswith((".jpg", ".png")))
    assert len(paths) >= 30
    dct_mads = []
    for i, path in enumerate(paths[::3]):  # a third of them keeps this quick
        exact = pc.compare(TOOL, path, SIZE, 3, seed=1, serial=i, dct=False)
        assert exact["mad"] <= 2.0, (path, exact)
        scaled = pc.compare(TOOL, path, SIZE, 3, seed=1, serial=i, dct=True)
        assert scaled["mad"] <= 6.0, (path, scaled)
        dct_mads.append(scaled["mad"])
    assert np.mean(dct_mads) <= 2.0, dct_mads
