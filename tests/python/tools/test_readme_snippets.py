"""README snippets that run from an empty folder (issue 42, item 14): the
Stable-Baselines3 and TorchRL examples, copied out of README.md as they are
and run in a fresh interpreter whose working directory holds nothing
(so a ``configs/...`` path would fail: the snippets name presets); and the
error a preset's path gives there, naming the preset."""
import os
import re
import subprocess
import sys

import pytest

import obsaug
from conftest import PHOTOS, PYDIR, ROOT, needs_engine

README = os.path.join(ROOT, "README.md")


def python_blocks():
    with open(README) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def block_with(marker):
    found = [b for b in python_blocks() if marker in b]
    assert len(found) == 1, f"README: {len(found)} python blocks hold {marker!r}"
    return found[0]


def run_snippet(code, tmp_path, timeout=600):
    folder = tmp_path / "empty"
    folder.mkdir()
    script = tmp_path / "snippet.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=PYDIR, OBSAUG_PHOTOS=os.path.abspath(PHOTOS))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout, cwd=str(folder), env=env)


def test_the_python_snippets_name_presets_not_checkout_paths():
    for block in python_blocks():
        code = "\n".join(line.split("#", 1)[0] for line in block.splitlines())
        assert not re.search(r"[\"']configs/\w+\.yaml", code), block


@needs_engine
def test_the_sb3_snippet_runs_from_an_empty_folder(tmp_path):
    pytest.importorskip("stable_baselines3")
    code = block_with("obsaug.sb3.ReplayBuffer")
    assert "model.learn(150)" in code
    code = code.replace("model.learn(150)", "model.learn(104)")  # 4 updates, not 50: quick
    code += "\nassert model._n_updates > 0 and model.replay_buffer.engine.step > 0\nprint('ok')\n"
    r = run_snippet(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


@needs_engine
def test_the_torchrl_snippet_runs_from_an_empty_folder(tmp_path):
    pytest.importorskip("torchrl")
    code = block_with("obsaug.torchrl.Augment(eng)") + "\nprint('ok')\n"
    r = run_snippet(code, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().endswith("ok")


@needs_engine
def test_a_presets_path_outside_the_checkout_names_the_preset(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as err:
        obsaug.Engine("configs/drq_shift.yaml")
    message = str(err.value)
    assert "cannot open the config file" in message
    assert '"drq_shift" is a preset: give its name (obsaug.Engine("drq_shift")' in message
    with pytest.raises(ValueError, match="cannot open the config file") as err:
        obsaug.Engine("configs/not_a_preset.yaml")   # no preset of that name: no hint
    assert "is a preset" not in str(err.value)
