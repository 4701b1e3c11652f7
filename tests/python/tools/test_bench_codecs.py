"""benchmarks/bench_codecs.py runs (a smoke test on the codec tests' committed
real frames, tests/kernels/codecs/data, as a frames folder of four
environments): a row per environment, codec and scheme, every record
round-tripped by obsaug_codec_bench, and the geometric means' table."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

BENCH = os.path.join(ROOT, "benchmarks", "bench_codecs.py")
BINARY = os.environ.get("OBSAUG_CODEC_BENCH",
                        os.path.join(ROOT, "build", "benchmarks", "obsaug_codec_bench"))
FIXTURE = os.path.join(ROOT, "tests", "kernels", "codecs", "data")
KINDS = {"walker": "dmc", "cartpole": "dmc", "Pong": "atari", "MsPacman": "atari"}


def test_a_short_run_measures_every_codec_and_scheme(tmp_path):
    if not os.access(BINARY, os.X_OK):
        pytest.skip(f"{BINARY} is not built (ninja -C build obsaug_codec_bench)")
    frames = tmp_path / "frames"
    frames.mkdir()
    index = {}
    for name, kind in KINDS.items():
        shutil.copy(os.path.join(FIXTURE, f"{name}.npy"), frames / f"{name}.npy")
        index[name] = {"kind": kind, "file": f"{name}.npy", "episode_starts": [0]}
    (frames / "index.json").write_text(json.dumps(index))
    out = tmp_path / "codecs.json"
    r = subprocess.run([sys.executable, BENCH, "--frames-dir", str(frames), "--codecs",
                        "packed-4,zstd-1", "--schemes", "frame,key-2,rawkey-2", "--repeats", "1",
                        "--batch", "8", "--no-uncompressed", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    result = json.loads(out.read_text())
    rows = {(row["env"], row["codec"], row["scheme"]): row for row in result["rows"]}
    assert set(rows) == {(e, c, s) for e in KINDS for c in ("packed-4", "zstd-1")
                         for s in ("frame", "key-2", "rawkey-2")}
    for row in rows.values():
        assert row["ratio"] > 1 and row["encode_mbps"] > 0 and row["decode_mbps"] > 0
    # a delta against the key shrinks the real frames further than intra coding
    for env in KINDS:
        assert rows[(env, "packed-4", "key-2")]["ratio"] > rows[(env, "packed-4", "frame")]["ratio"]
    assert {(g["codec"], g["scheme"]) for g in result["summary"]} == {
        (c, s) for c in ("packed-4", "zstd-1") for s in ("frame", "key-2", "rawkey-2")}
    assert "### Geometric means" in r.stdout
