"""The `obsaug` command-line tool (tools/, one file per subcommand): check-config
on every preset and on bad files, bench and bench --replay on a small N,
preview writes a PNG of the right size whose augmented half differs from its
original half.

The binary is $OBSAUG_CLI, else build/tools/obsaug under the repository root;
the tests skip when neither exists (the CLI is built only with the engine).
"""
import glob
import os
import re
import struct
import subprocess
import zlib

import pytest

from conftest import CLI, CONFIGS, ROOT, needs_cli

PLACES = os.path.join(ROOT, "data", "places365_standard")

pytestmark = needs_cli


def run(*args, timeout=300):
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def preset(name):
    return os.path.join(CONFIGS, name)


# --- help and usage errors ------------------------------------------------------


@pytest.mark.parametrize("arg", ["--help", "help"])
def test_help(arg):
    r = run(arg)
    assert r.returncode == 0, r.stderr
    for command in ("check-config", "bench", "preview"):
        assert command in r.stdout


@pytest.mark.parametrize("args, needle", [
    ((), "usage"),
    (("frobnicate",), "unknown command 'frobnicate'"),
    (("bench",), "--config FILE is required"),
    (("bench", "--config", "configs/default.yaml", "--batch", "0"), "--batch: expected an integer >= 1"),
    (("bench", "--config", "configs/default.yaml", "--bacth", "8"), "unknown option '--bacth'"),
    (("bench", "--config", "configs/rad_crop.yaml", "--inplace"), "--inplace needs a pipeline"),
    (("preview", "--config", "configs/default.yaml"), "--out GRID.png is required"),
    # numbers: decimal, in range, each option once
    (("bench", "drq_shift", "--threads", "4294967297"), "--threads: expected an integer in 1..1024"),
    (("bench", "drq_shift", "--samples", "0x10"), "--samples: expected an integer in 1..100000000000000"),
    (("bench", "drq_shift", "--batch", "5", "--batch", "4"), "--batch given twice ('5', then '4')"),
    (("bench", "drq_shift", "--batch", "9223372036854775807"),
     "--batch 9223372036854775807 needs "),
    (("bench", "drq_shift", "--replay", "5000", "--inplace"), "--replay samples into new obs"),
    # the extra argument is named, an option is no value, an empty value says so
    (("check-config", "drq_shift", "extra.yaml"),
     "check-config: unexpected argument 'extra.yaml' (the config is already 'drq_shift')"),
    (("check-config", "--config", "drq_shift", "extra.yaml"),
     "unexpected argument 'extra.yaml' (the config is already --config drq_shift)"),
    (("bench", "--config", "--batch", "4"),
     "--config needs a value, but the next argument is the option --batch"),
    (("check-config", "--config="), "check-config: --config is empty; give a YAML file or a preset"),
    # a replay too small to hold a transition at every call
    (("bench", "drq_shift", "--replay", "2"), "--replay: expected an integer >= 3, got '2'"),
    (("bench", "drq_shift", "--replay", "4", "--samples", "10"),
     "--replay must be at least frames.stack + 2 = 5"),
    (("preview", "drq_shift", "--out", "x.png", "--seed-step", "-1"),
     "--seed-step: expected an integer in 0..18446744073709551615"),
    # checked before any engine is built or memory taken
    (("preview", "drq_shift", "--out", "x.png", "--batch", "4096", "--scale", "64"),
     "beyond 1000000 a side or 1 GiB; lower --batch (4096) or --scale (64)"),
])
def test_usage_errors_exit_2(args, needle):
    r = run(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr


# --- check-config ---------------------------------------------------------------

PRESETS = sorted(os.path.basename(p) for p in glob.glob(os.path.join(CONFIGS, "*.yaml")))


def test_every_preset_is_covered():
    assert {"default.yaml", "svea_overlay.yaml", "drq_shift.yaml", "rad_crop.yaml", "atari.yaml"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_check_config_presets(name, tmp_path):
    r = run("check-config", preset(name))
    if name == "svea_overlay.yaml" and not os.path.isdir(PLACES):
        # Places365 is not shipped: a one-line configuration error with the fix.
        assert r.returncode == 2, r.stdout
        assert r.stdout == ""
        message = r.stderr.strip()
        assert "\n" not in message
        assert "svea_overlay.yaml" in message and "pool.sources" in message
        assert "places365standard_easyformat.tar" in message
        return
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"# {preset(name)}: valid\n")
    for key in ("device:", "seed:", "frames:", "pipeline:", "output:"):
        assert key in r.stdout
    # The printed config is itself a valid config that prints the same.
    resolved = tmp_path / "resolved.yaml"
    resolved.write_text(r.stdout)
    again = run("check-config", str(resolved))
    assert again.returncode == 0, again.stderr
    assert again.stdout.split("\n", 1)[1] == r.stdout.split("\n", 1)[1]


@pytest.mark.parametrize("text, needles", [
    # unknown key: the full path and the nearest known key
    ("pool:\n  sizee: 16\n", ["pool.sizee", "unknown key", "did you mean 'size'"]),
    ("frames: {stack: 3, chanels: 3}\n", ["frames.chanels", "did you mean 'channels'"]),
    # out-of-set value: the allowed values
    ("pipeline:\n  - {op: overlay}\npool:\n  sources: [data/photos]\n  refresh: {mode: asnc}\n",
     ["pool.refresh.mode", "async", "sync", "asnc"]),
    # wrong type
    ("frames: {stack: three}\n", ["frames.stack"]),
    # missing source
    ("pipeline:\n  - {op: overlay}\npool:\n  sources: [no/such/folder]\n", ["pool.sources", "no/such/folder"]),
])
def test_check_config_bad_files(tmp_path, text, needles):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    r = run("check-config", str(bad))
    assert r.returncode == 2, (r.stdout, r.stderr)
    message = r.stderr.strip()
    assert "\n" not in message, message
    assert message.startswith(f"obsaug: {bad}: "), message
    for needle in needles:
        assert needle in message, message


def test_check_config_missing_file(tmp_path):
    missing = tmp_path / "nope.yaml"
    r = run("check-config", str(missing))
    assert r.returncode == 2
    assert str(missing) in r.stderr


# --- bench ----------------------------------------------------------------------


def field(stdout, name):
    m = re.search(rf"^{name}:\s+(\S+)", stdout, re.M)
    assert m, f"no '{name}:' line in\n{stdout}"
    return m.group(1)


def test_bench_default_in_place():
    r = run("bench", "--config", preset("default.yaml"), "--samples", "20000", "--batch", "256",
            "--threads", "2")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert int(field(out, "samples")) == 20000
    assert "in 79 calls" in out  # ceil(20000 / 256), the last one partial
    assert float(field(out, "samples/s")) > 0
    assert float(field(out, "seconds")) > 0
    assert "in place (augment_)" in out
    assert "distractor bytes read" in out  # the overlay's pool reads are counted
    pool = re.search(r"^pool:\s+decoded (\d+), failed (\d+), uploaded (\d+), decode rate ([\d.]+) "
                     r"images/s, mean age ([\d.]+) calls, queue depth (\d+)$", out, re.M)
    assert pool, out
    assert int(pool.group(1)) >= 256  # the fill alone decodes the whole pool (size 256)
    assert "rss start:" in out and "rss end:" in out
    # Not a terminal: plain progress lines, ending at 100 %.
    assert "100%" in r.stderr and "\r" not in r.stderr


def test_bench_out_of_place_crop_without_pool():
    r = run("bench", "--config", preset("rad_crop.yaml"), "--samples", "1000", "--batch", "100",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert int(field(r.stdout, "samples")) == 1000
    assert "out of place (augment)" in r.stdout  # a shrinking crop cannot run in place
    assert "pool:      none" in r.stdout
    # 9 planes of 100x100 read + 9 planes of 84x84 written per sample.
    assert "(153504 bytes per sample" in r.stdout


def test_bench_float_output_runs_out_of_place(tmp_path):
    """augment_ writes uint8 over its input: a float32 config is measured out of place,
    with 4-byte output counted, and --inplace is refused."""
    config = tmp_path / "float.yaml"
    config.write_text("pipeline: [{op: shift, pad: 4}]\n"
                      "output: {dtype: float32, scale: 0.00392156862745098}\n")
    r = run("bench", str(config), "--samples", "20", "--batch", "10", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert "out of place (augment)" in r.stdout
    assert "(317520 bytes per sample" in r.stdout  # 9x84x84 read + 4 bytes each written
    r = run("bench", str(config), "--samples", "20", "--batch", "10", "--inplace")
    assert r.returncode == 2 and "asks for float32 output" in r.stderr, r.stderr


def test_preview_step_takes_all_64_bits(tmp_path):
    out = tmp_path / "grid.png"
    r = run("preview", "drq_shift", "--out", str(out), "--batch", "2",
            "--seed-step", "18446744073709551615")
    assert r.returncode == 0, r.stderr
    assert "step 18446744073709551615" in r.stdout and out.stat().st_size > 0


def test_bench_replay_shares_the_summary():
    r = run("bench", "--config", preset("drq_shift.yaml"), "--samples", "250", "--batch", "100",
            "--threads", "1", "--replay", "300")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"^replay:    300 frames \[3, 84, 84\] filled in [\d.]+ s \([\d.]+ MiB\), "
                     r"299 valid transitions; per call: add 1 step, sample 100 with obs and "
                     r"next_obs augmented$", out, re.M), out
    assert "rss filled:" in out
    # 3 sample calls (100, 100, 50), each augmenting obs and next_obs: 6 engine calls.
    assert re.search(r"^samples:   250 transitions \(obs \+ next_obs each\) in 6 engine calls$",
                     out, re.M), out
    assert float(field(out, "seconds")) > 0
    assert float(field(out, "samples/s")) > 0
    assert "bytes/s:" not in out  # the plain bench's line only
    assert "pool:      none" in out
    assert "rss end:" in out
    assert "100%" in r.stderr


def test_bench_smallest_replay_samples_past_an_episode_end():
    """--replay frames.stack + 2 keeps a valid transition at every call, also when the
    frame before the newest ends an episode (the synthetic episodes have 1000 steps)."""
    r = run("bench", "drq_shift", "--replay", "5", "--samples", "1100", "--batch", "1",
            "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^samples:   1100 transitions", r.stdout, re.M), r.stdout


# --- preview --------------------------------------------------------------------


def png_size(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    ihdr = data[16:29]
    assert struct.unpack(">I", data[29:33])[0] == zlib.crc32(b"IHDR" + ihdr)
    width, height, depth, color = struct.unpack(">IIBB", ihdr[:10])
    assert depth == 8 and color == 2  # 8-bit RGB
    return width, height


def grid_size(batch, stack, h, w, ah, aw, scale):
    gap, group_gap = 2, 8
    width = stack * w * scale + (stack - 1) * gap + group_gap + stack * aw * scale + (stack - 1) * gap
    height = batch * max(h, ah) * scale + (batch - 1) * gap
    return width, height


@pytest.mark.parametrize("name, batch, scale, geometry", [
    ("default.yaml", 4, 1, (3, 84, 84, 84, 84)),
    ("rad_crop.yaml", 3, 2, (3, 100, 100, 84, 84)),
    ("atari.yaml", 2, 1, (4, 84, 84, 84, 84)),
    ("svea_conv.yaml", 2, 1, (3, 84, 84, 84, 84)),
    ("rad.yaml", 2, 1, (3, 100, 100, 84, 84)),
])
def test_preview_writes_png(tmp_path, name, batch, scale, geometry):
    out = tmp_path / "grid.png"
    r = run("preview", "--config", preset(name), "--out", str(out), "--batch", str(batch),
            "--scale", str(scale), "--seed-step", "3")
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    stack, h, w, ah, aw = geometry
    expected = grid_size(batch, stack, h, w, ah, aw, scale)
    assert png_size(out) == expected

    from PIL import Image
    import numpy as np
    img = np.asarray(Image.open(out).convert("RGB"))
    assert img.shape == (expected[1], expected[0], 3)
    # First row: each original frame is a picture (not flat), and the
    # augmented frames differ from the originals.
    fw, aw_px = w * scale, aw * scale
    first_orig = img[: h * scale, :fw]
    first_aug_left = stack * fw + (stack - 1) * 2 + 8
    first_aug = img[: ah * scale, first_aug_left: first_aug_left + aw_px]
    assert first_orig.std() > 10
    if (ah, aw) == (h, w):
        assert np.abs(first_orig.astype(int) - first_aug.astype(int)).mean() > 1
    if name == "atari.yaml":  # grayscale frames are written as equal R, G, B
        assert (img[..., 0] == img[..., 1]).all() and (img[..., 1] == img[..., 2]).all()


def test_preview_is_deterministic_per_step(tmp_path):
    # drq_shift has no pool, so the output is a pure function of (seed, step).
    paths = []
    for i, step in enumerate((5, 5, 6)):
        out = tmp_path / f"g{i}.png"
        r = run("preview", "--config", preset("drq_shift.yaml"), "--out", str(out), "--batch", "3",
                "--seed-step", str(step))
        assert r.returncode == 0, r.stderr
        paths.append(out.read_bytes())
    assert paths[0] == paths[1]
    assert paths[0] != paths[2]


def test_runtime_error_exits_1(tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "grid.png"
    r = run("preview", "--config", preset("drq_shift.yaml"), "--out", str(out), "--batch", "1")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"obsaug: error: cannot write {out}")


# --- hostile paths: the CLI goes through the library's bounded reads and atomic write ---


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "is a FIFO, not a regular file"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device, not a regular file"),
])
def test_check_config_refuses_a_path_that_is_not_a_regular_file_at_once(tmp_path, make, kind):
    path = tmp_path / "config.yaml"
    make(path)
    r = run("check-config", str(path), timeout=30)  # used to block (FIFO) or read 2 GiB (/dev/zero)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"obsaug: {path}: {kind}"), r.stderr


def _out_state(path):
    st = os.lstat(path)
    return st.st_ino, st.st_mode


def test_preview_refuses_an_out_that_is_not_a_regular_file_and_keeps_it(tmp_path):
    fifo = tmp_path / "grid.png"
    os.mkfifo(fifo)
    targets = {fifo: "it is a FIFO"}
    link = tmp_path / "full.png"
    os.symlink("/dev/full", link)
    targets[link] = "it is a symbolic link to a character device (/dev/full)"
    node = tmp_path / "node.png"
    try:  # a device node of its own where the system allows one (root)
        os.mknod(node, 0o600 | 0o020000, os.makedev(1, 7))
        targets[node] = "it is a character device"
    except PermissionError:
        pass
    for out, why in targets.items():
        before = _out_state(out)
        r = run("preview", "--config", preset("drq_shift.yaml"), "--out", str(out), "--batch", "1",
                timeout=60)
        assert r.returncode == 1, (out, r.stdout, r.stderr)
        assert r.stderr.startswith(f"obsaug: error: cannot write {out}: {why}"), r.stderr
        assert _out_state(out) == before, f"{out} was replaced or deleted"
    assert os.path.exists("/dev/full")
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in targets)  # no temporary left


def test_a_failed_preview_keeps_the_file_it_would_have_replaced(tmp_path):
    out = tmp_path / "grid.png"
    out.write_bytes(b"the user's own file")

    def small_files():  # a 4 KiB file-size limit: the PNG cannot be written
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    r = subprocess.run([CLI, "preview", "--config", preset("drq_shift.yaml"), "--out", str(out),
                        "--batch", "8", "--scale", "4"], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, preexec_fn=small_files)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.startswith(f"obsaug: error: cannot write {out}: libpng failed: Write Error "
                               "(File too large)"), r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    assert out.read_bytes() == b"the user's own file"
    assert os.listdir(tmp_path) == ["grid.png"]  # the temporary is gone, only it
