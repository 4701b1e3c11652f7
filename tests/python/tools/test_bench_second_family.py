"""benchmarks/bench_second_family.py runs (a smoke test: --quick at B = 8 on the
CPU) and reports every op group with obsaug's row and its baselines."""
import json
import os
import subprocess
import sys

from conftest import ROOT

BENCH = os.path.join(ROOT, "benchmarks", "bench_second_family.py")
GROUPS = {"random_conv", "random_convolution", "color_jitter", "grayscale", "flip", "rotate",
          "cutout", "cutout_color", "translate", "crop", "svea_conv", "rad", "fusion"}


def test_quick_run_reports_every_group(tmp_path):
    out = tmp_path / "sf.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    r = subprocess.run([sys.executable, BENCH, "--quick", "--batches", "8", "--device", "cpu",
                        "--threads", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = json.loads(out.read_text())["results"]
    assert {row["group"] for row in rows} == GROUPS
    for group in GROUPS:
        mine = [row for row in rows if row["group"] == group]
        assert sum(row["x"] is None for row in mine) == 1, group  # one reference row
        assert any(row["x"] is not None for row in mine), group   # compared with something
        assert all(row["ms_per_call"] > 0 for row in mine), group
    assert "obsaug's speed-up over each baseline" in r.stdout
