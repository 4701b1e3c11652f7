"""A build that skipped a component says so (issue 42, item 13): the configure
records each skip with its reason (cmake/components.cmake), the native module
carries the list (``obsaug._C.skipped_components``), and ``import obsaug``
warns naming what is missing and why; ``obsaug.Engine`` on such a build is an
AttributeError saying the same, not a bare "no attribute".
"""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import obsaug
from conftest import PYDIR, ROOT

CHILD = textwrap.dedent("""
    import importlib.util, sys, types, warnings
    import torch
    # the real native module, seen through a stand-in without the Engine, the pool and
    # the PNG writer, as a build without TurboJPEG and yaml-cpp makes it
    spec = importlib.util.spec_from_file_location("obsaug._C", NATIVE)
    real = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real)
    stand_in = types.ModuleType("obsaug._C")
    for name in dir(real):
        if name not in ("Engine", "DistractorPool", "write_png"):
            setattr(stand_in, name, getattr(real, name))
    stand_in.skipped_components = [
        "decode (JPEG, PNG): missing libturbojpeg, by pkg-config or in CMAKE_PREFIX_PATH "
        "(Debian: libturbojpeg0-dev)",
        "config (YAML): missing yaml-cpp (Debian: libyaml-cpp-dev)"]
    sys.modules["obsaug._C"] = stand_in
    sys.path.insert(0, PYDIR)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import obsaug
    print("WARNING:", *[str(w.message) for w in caught if "built without" in str(w.message)])
    try:
        obsaug.Engine
    except AttributeError as e:
        print("ERROR:", e)
    print("OPS:", obsaug.ops.shift(torch.zeros(1, 3, 4, 4), seed=0, step=0).shape)
""")


def test_import_names_the_missing_components_and_why(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(f"NATIVE = {obsaug._C.__file__!r}\nPYDIR = {PYDIR!r}\n" + CHILD)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    warning = next(line for line in r.stdout.splitlines() if line.startswith("WARNING:"))
    assert "obsaug was built without DistractorPool, Engine, preview" in warning
    assert "libturbojpeg0-dev" in warning and "libyaml-cpp-dev" in warning
    assert "pip install -v --no-build-isolation" in warning
    error = next(line for line in r.stdout.splitlines() if line.startswith("ERROR:"))
    assert "no attribute 'Engine': obsaug was built without" in error and "yaml-cpp" in error
    assert "OPS: torch.Size([1, 3, 4, 4])" in r.stdout


def test_a_full_build_says_nothing():
    assert obsaug._missing_components() == ""
    assert isinstance(obsaug._C.skipped_components, list)


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_the_configure_records_a_skip_for_the_native_module(tmp_path):
    """yaml-cpp hidden from the configure: the config is skipped, and the generated
    header the native module is built with holds the skip and its Debian package."""
    build = tmp_path / "build"
    r = subprocess.run(
        ["cmake", "-S", ROOT, "-B", str(build), f"-DPython3_EXECUTABLE={sys.executable}",
         "-DOBSAUG_CUDA=OFF", "-DOBSAUG_BUILD_TESTS=OFF", "-DCMAKE_DISABLE_FIND_PACKAGE_yaml-cpp=ON",
         f"-DOBSAUG_PYTHON_PACKAGE_DIR={build / 'package'}"],
        capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "config (YAML) skipped: missing yaml-cpp" in r.stdout
    header = (build / "bindings" / "generated" / "skipped_components.h").read_text()
    assert 'R"obsaug(config (YAML): missing yaml-cpp (Debian: libyaml-cpp-dev))obsaug"' in header
    assert os.path.isfile(build / "build.ninja") or os.path.isfile(build / "Makefile")
