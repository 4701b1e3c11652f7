"""The CPU ops' sets of loops (kernels/augment_cpu.h): the hand-written
AVX-512 and AVX2 ones, which run wherever the CPU has them, and the baseline
ones, which run elsewhere. OBSAUG_CPU_LOOPS caps the set a process runs, so
every narrower set the CPU has is tested here too. Each must write the same
bits. The setting is read when the library loads, so every capped run is a
child process: the reference suites with the baseline loops, and the cases
of cpu_loops_cases.py compared bit for bit with this process's results (the
widest set). A setting other than baseline, avx2 or avx512 is refused with a
message that names it."""
import os
import subprocess
import sys

import pytest
import torch

import obsaug
from conftest import PYDIR, ROOT, TESTS

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cpu_loops_cases.py")
SETS = ["baseline", "avx2", "avx512"]


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    raise AssertionError("no flags line in /proc/cpuinfo")


FLAGS = cpu_flags()
# the widest set this CPU has, read from /proc/cpuinfo rather than as the library reads it
WIDEST = ("avx512" if {"avx512f", "avx512bw"} <= FLAGS else "avx2" if "avx2" in FLAGS
          else "baseline")
NARROWER = SETS[:SETS.index(WIDEST)]

# The suites that check every op, fused pipelines and out= against the
# independent references (reference.py, reference_ops.py).
REFERENCE_SUITES = ["test_ops.py", "test_ops_out.py", "test_pipeline.py", "test_second_family.py",
                    "test_second_family_rows.py", "test_gather_sample_ids.py"]


def child(args, setting, timeout=600):
    path = os.pathsep.join(p for p in (PYDIR, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, OBSAUG_CPU_LOOPS=setting, PYTHONPATH=path)
    return subprocess.run([sys.executable, *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def same_bits(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype == torch.float32:  # -0.0 and NaN payloads count too
        a, b = a.view(torch.int32), b.view(torch.int32)
    return torch.equal(a, b)


def test_this_process_runs_the_widest_loops_the_cpu_has():
    # pytest itself runs without the setting (a CI job exporting it would
    # make the comparisons below comparisons of one set with itself)
    assert os.environ.get("OBSAUG_CPU_LOOPS") in (None, "")
    assert obsaug._C.cpu_loops() == WIDEST


@pytest.mark.parametrize("setting", SETS[:-1])
def test_a_narrower_set_writes_the_widest_sets_bits(setting, tmp_path):
    if setting not in NARROWER:
        pytest.skip(f"this CPU's widest loops are {WIDEST}: there is nothing wider to compare")
    saved = tmp_path / f"{setting}.pt"
    run = child([CASES, str(saved)], setting)
    assert run.returncode == 0, run.stderr[-4000:]
    narrow = torch.load(saved)
    assert narrow["loops"] == setting
    sys.path.insert(0, HERE)
    try:
        import cpu_loops_cases
    finally:
        sys.path.remove(HERE)
    widest = cpu_loops_cases.outputs()
    assert widest.keys() == narrow["outputs"].keys()
    differ = [name for name, out in widest.items() if not same_bits(out, narrow["outputs"][name])]
    assert not differ, f"{len(differ)} of {len(widest)} cases differ, first: {differ[:3]}"


def test_reference_suites_pass_with_the_baseline_loops():
    suites = [os.path.join(HERE, name) for name in REFERENCE_SUITES]
    run = child(["-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", TESTS, *suites],
                "baseline")
    summary = run.stdout.strip().splitlines()[-1:] or [run.stderr[-2000:]]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in summary[0] and "failed" not in summary[0], summary


def test_an_unknown_setting_is_refused_before_anything_is_written():
    script = (
        "import torch, obsaug\n"
        "try:\n"
        "    obsaug._C.cpu_loops()\n"
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
    run = child(["-c", script], "AVX2")
    assert run.returncode == 0, run.stderr[-4000:]
    lines = run.stdout.splitlines()
    want = ("the environment variable OBSAUG_CPU_LOOPS is 'AVX2'; set it to baseline, avx2 or "
            "avx512 (the widest loops the CPU ops may use, where the CPU has them) or leave it "
            "unset (the widest the CPU has)")
    assert [line.split(":")[0] for line in lines] == [
        "loops", "shift out=", "gather", "out untouched", "cuda ops unaffected"], lines
    assert all(want in line for line in lines[:3]), lines
    assert lines[3:] == ["out untouched: True", "cuda ops unaffected: True"], lines


@pytest.mark.parametrize("setting", ["", *SETS])
def test_the_known_settings(setting):
    # a cap the CPU cannot reach runs the widest set it has
    want = WIDEST if setting == "" else min(setting, WIDEST, key=SETS.index)
    run = child(["-c", "import obsaug; print(obsaug._C.cpu_loops())"], setting)
    assert run.returncode == 0, run.stderr[-4000:]
    assert run.stdout.strip() == want
