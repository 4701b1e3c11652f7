"""benchmarks/bench_cpu_loops.py runs (a smoke test at B = 4): one child per
set of loops this CPU has and round, each child running the set it was
asked for (the script refuses a child that ran another), and a table row
per set."""
import json
import os
import subprocess
import sys

from conftest import ROOT

BENCH = os.path.join(ROOT, "benchmarks", "bench_cpu_loops.py")


def test_a_short_run_times_every_set_the_cpu_has(tmp_path):
    out = tmp_path / "loops.json"
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    env.pop("OBSAUG_CPU_LOOPS", None)
    r = subprocess.run([sys.executable, BENCH, "--batch", "4", "--rounds", "2", "--child-rounds",
                        "1", "--alphas", "0.5", "0.25", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    sys.path.insert(0, os.path.dirname(BENCH))
    try:
        from bench_cpu_loops import sets_on_this_cpu
    finally:
        sys.path.remove(os.path.dirname(BENCH))
    sets = sets_on_this_cpu()
    children = json.loads(out.read_text())["results"]
    assert sorted(c["loops"] for c in children) == sorted(sets * 2)
    for child in children:
        assert set(child["ms"]) == {"copy", "alpha 0.5", "alpha 0.25"}
        assert all(ms > 0 for ms in child["ms"].values())
    table = [line for line in r.stdout.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in table[1:]] == sets
