"""examples/drqv2_agent.py outside the development tree (issue 42, item 15): the
clone's python/ goes first on sys.path only where its native module is built
(else a pip-installed obsaug is shadowed by sources without _C), matplotlib is
checked before training, and a tiny run completes on the numpy CartPole (no
dm_control needed)."""
import os
import subprocess
import sys

from conftest import ROOT, needs_engine

EXAMPLE = os.path.join(ROOT, "examples", "drqv2_agent.py")
sys.path.insert(0, os.path.join(ROOT, "examples"))
import drqv2_agent  # noqa: E402


def test_the_checkout_is_put_first_only_where_it_is_built(tmp_path):
    examples = tmp_path / "clone" / "examples"
    package = tmp_path / "clone" / "python" / "obsaug"
    examples.mkdir(parents=True)
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    assert drqv2_agent.checkout_package(str(examples)) is None   # a clone, not built
    (package / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    assert drqv2_agent.checkout_package(str(examples)) == str(tmp_path / "clone" / "python")
    assert drqv2_agent.checkout_package() == os.path.join(ROOT, "python")  # this checkout


def run_example(*args, code=None, timeout=300):
    runner = code or f"import runpy, sys; sys.argv = {['drqv2_agent.py', *args]!r}; " \
                     f"runpy.run_path({EXAMPLE!r}, run_name='__main__')"
    return subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_a_missing_matplotlib_stops_it_before_training():
    code = ("import runpy, sys; sys.modules['matplotlib'] = None; "
            f"sys.argv = ['drqv2_agent.py', '--steps', '20']; "
            f"runpy.run_path({EXAMPLE!r}, run_name='__main__')")
    r = run_example(code=code)
    assert r.returncode != 0
    assert "needs matplotlib (pip install matplotlib); or pass --out ''" in r.stderr
    assert "steps;" not in r.stdout   # it never started the run


@needs_engine
def test_a_tiny_run_completes_without_the_plot():
    r = run_example("--steps", "40", "--seed-steps", "10", "--batch", "4", "--out", "")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "drqv2_agent: " in r.stdout and "episodes" in r.stdout.splitlines()[-1]
