"""obsaug.nn's built-in engines (the ones random_overlay builds on first use)
are closed at interpreter exit: checked in a child interpreter whose own
exit hook runs after obsaug.nn's and sees the engine closed."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import PHOTOS, PYDIR, needs_engine

CHILD = textwrap.dedent("""
    import atexit, sys
    sys.path.insert(0, PYDIR)
    seen = {}

    def report():  # registered before obsaug.nn's hook, so it runs after it
        print("closed at exit:", seen["engine"].closed, flush=True)

    atexit.register(report)
    import torch
    import obsaug.nn as onn

    x = torch.rand(2, 9, 20, 24) * 255
    out = onn.random_overlay(x)
    assert out.shape == x.shape
    (engine,) = onn._engines.values()
    seen["engine"] = engine
    print("open before exit:", not engine.closed, flush=True)
""")


@needs_engine
def test_builtin_engines_are_closed_at_exit(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(f"PYDIR = {PYDIR!r}\n" + CHILD)
    env = dict(os.environ, OBSAUG_POOL_SIZE="8", OBSAUG_PHOTOS=os.path.abspath(PHOTOS))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "open before exit: True" in proc.stdout, proc.stdout
    assert "closed at exit: True" in proc.stdout, proc.stdout
    assert "error while closing" not in proc.stderr, proc.stderr
