"""The CMake configure on a machine without pkg-config, where TurboJPEG lies in
a prefix named by CMAKE_PREFIX_PATH (the GPU machine's case: Debian packages
unpacked there by scripts/gpu_check.sh): the decode component is still built,
against the prefix's library, found by engine/decode/CMakeLists.txt's
find_path / find_library fallback.

Configure only (CUDA and the C++ tests off), in a temporary build folder.
Skips where cmake or the system's TurboJPEG (the prefix is made from it) is
missing.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

HEADER = "/usr/include/turbojpeg.h"
LIBRARIES = sorted(glob.glob("/usr/lib/*-linux-gnu/libturbojpeg.so*"))

pytestmark = pytest.mark.skipif(
    shutil.which("cmake") is None or not os.path.isfile(HEADER) or not LIBRARIES,
    reason="needs cmake and the system's TurboJPEG (Debian: libturbojpeg0-dev)")


def configure(build, *extra):
    return subprocess.run(
        ["cmake", "-S", ROOT, "-B", str(build), f"-DPython3_EXECUTABLE={sys.executable}",
         "-DOBSAUG_CUDA=OFF", "-DOBSAUG_BUILD_TESTS=OFF",
         f"-DOBSAUG_PYTHON_PACKAGE_DIR={build / 'package'}", *extra],
        capture_output=True, text=True, timeout=600)


def cache_value(build, name):
    with open(build / "CMakeCache.txt") as f:
        m = re.search(rf"^{name}:[A-Z]+=(.*)$", f.read(), re.M)
    return m.group(1) if m else None


def test_turbojpeg_in_a_prefix_found_without_pkg_config(tmp_path):
    prefix = tmp_path / "prefix" / "usr"
    arch_dir = os.path.basename(os.path.dirname(LIBRARIES[0]))  # x86_64-linux-gnu
    (prefix / "include").mkdir(parents=True)
    (prefix / "lib" / arch_dir).mkdir(parents=True)
    shutil.copy(HEADER, prefix / "include")
    for lib in LIBRARIES:  # the symbolic links stay links, pointing inside the prefix
        shutil.copy(lib, prefix / "lib" / arch_dir, follow_symlinks=False)
    build = tmp_path / "build"
    r = configure(build, f"-DCMAKE_PREFIX_PATH={prefix}",
                  "-DPKG_CONFIG_EXECUTABLE=/nonexistent/pkg-config")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "found without pkg-config" in r.stdout, r.stdout
    assert "decode (JPEG, PNG) skipped" not in r.stdout, r.stdout
    assert cache_value(build, "OBSAUG_LIBTURBOJPEG_INCLUDE_DIR") == str(prefix / "include")
    assert cache_value(build, "OBSAUG_LIBTURBOJPEG_LIBRARY").startswith(str(prefix / "lib"))
