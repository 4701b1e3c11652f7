"""benchmarks/bench_second_family.py runs (a smoke test: --quick at B = 8 on the
CPU) and reports every op group with obsaug's row and its baselines; the
harness warms up the slow methods it times."""
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


def test_slow_methods_are_warmed_up_before_their_timed_rounds():
    """A method timed one call per round (fixed_iters) gets one untimed call first,
    so a run of one or two rounds does not report its cold start."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import harness
    calls = []
    slow = harness.Method("slow", lambda: calls.append(1), "slow", fixed_iters=1, max_rounds=3)
    harness.calibrate(slow)
    assert len(calls) == 1 and slow.iters == 1
