"""The CPU ops' two sets of loops (kernels/augment_cpu.h): the hand-written
AVX2 ones, which run wherever the CPU has AVX2, and the baseline ones, which
run elsewhere and, with OBSAUG_CPU_AVX2=0, here. Each must write the same
bits. The setting is read when the library loads, so every baseline run is a
child process: the reference suites there, and the cases of cpu_loops_cases.py
compared bit for bit with this process's AVX2 results. A setting other than
0 or 1 is refused with a message that names it."""
import os
import subprocess
import sys

import pytest
import torch

import obsaug
from conftest import PYDIR, ROOT, TESTS

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cpu_loops_cases.py")
HAS_AVX2_LOOPS = obsaug._C.cpu_avx2_loops()

# The suites that check every op, fused pipelines and out= against the
# independent references (reference.py, reference_ops.py).
REFERENCE_SUITES = ["test_ops.py", "test_ops_out.py", "test_pipeline.py", "test_second_family.py",
                    "test_second_family_rows.py", "test_gather_sample_ids.py"]


def child(args, setting, timeout=600):
    path = os.pathsep.join(p for p in (PYDIR, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, OBSAUG_CPU_AVX2=setting, PYTHONPATH=path)
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == torch.float32:  # -0.0 and NaN payloads count too
        a, b = a.view(torch.int32), b.view(torch.int32)
    return torch.equal(a, b)


def test_this_process_follows_the_cpu():
    # pytest itself runs without the setting (a CI job exporting it would
    # make the comparison below a comparison of the baseline with itself)
    assert os.environ.get("OBSAUG_CPU_AVX2") in (None, "", "1")
    with open("/proc/cpuinfo") as f:
        has_avx2 = " avx2" in f.read()
    assert HAS_AVX2_LOOPS == has_avx2


@pytest.mark.skipif(not HAS_AVX2_LOOPS,
                    reason="this CPU has no AVX2: only the baseline loops exist here")
def test_baseline_loops_write_the_avx2_loops_bits(tmp_path):
    saved = tmp_path / "baseline.pt"
    run = child([CASES, str(saved)], "0")
    assert run.returncode == 0, run.stderr[-4000:]
    baseline = torch.load(saved)
    assert baseline["avx2_loops"] is False
    sys.path.insert(0, HERE)
    try:
        import cpu_loops_cases
    finally:
        sys.path.remove(HERE)
    avx2 = cpu_loops_cases.outputs()
    assert avx2.keys() == baseline["outputs"].keys()
    differ = [name for name, out in avx2.items() if not same_bits(out, baseline["outputs"][name])]
    assert not differ, f"{len(differ)} of {len(avx2)} cases differ, first: {differ[:3]}"


def test_reference_suites_pass_with_the_baseline_loops():
    suites = [os.path.join(HERE, name) for name in REFERENCE_SUITES]
    run = child(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", TESTS, *suites], "0")
    summary = run.stdout.strip().splitlines()[-1:] or [run.stderr[-2000:]]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in summary[0] and "failed" not in summary[0], summary


def test_an_unknown_setting_is_refused_before_anything_is_written():
    script = (
        "import torch, obsaug\n"
        "try:\n"
        "    obsaug._C.cpu_avx2_loops()\n"
        "except ValueError as e:\n"
        "    print('loops:', e)\n"
        "x = torch.zeros(2, 3, 8, 8, dtype=torch.uint8)\n"
        "out = torch.full((2, 3, 8, 8), 7, dtype=torch.uint8)\n"
        "for name, call in [('shift out=', lambda: obsaug.ops.shift(x, seed=1, step=0, out=out)),\n"
        "                   ('gather', lambda: obsaug.ops.gather_augment(\n"
        "                       x.reshape(6, 1, 8, 8), torch.zeros(2, 3, dtype=torch.long), None,\n"
        "                       ops=[{'op': 'shift', 'pad': 4}], seed=1, step=0))]:\n"
        "    try:\n"
        "        call()\n"
        "        print(name, 'ran')\n"
        "    except ValueError as e:\n"
        "        print(name + ':', e)\n"
        "print('out untouched:', bool((out == 7).all()))\n"
        "print('cuda ops unaffected:', not torch.cuda.is_available() or bool(\n"
        "      obsaug.ops.shift(x.cuda(), seed=1, step=0).is_cuda))\n")
    run = child(["-c", script], "off")
    assert run.returncode == 0, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    want = ("the environment variable OBSAUG_CPU_AVX2 is 'off'; set it to 0 (the baseline CPU "
            "loops), 1 (AVX2 where the CPU has it, the default) or leave it unset")
    assert [line.split(":")[0] for line in lines] == [
        "loops", "shift out=", "gather", "out untouched", "cuda ops unaffected"], lines
    assert all(want in line for line in lines[:3]), lines
    assert lines[3:] == ["out untouched: True", "cuda ops unaffected: True"], lines


@pytest.mark.parametrize("setting, loops", [("1", HAS_AVX2_LOOPS), ("", HAS_AVX2_LOOPS),
                                            ("0", False)])
def test_the_known_settings(setting, loops):
    run = child(["-c", "import obsaug; print(obsaug._C.cpu_avx2_loops())"], setting)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip() == str(loops)
