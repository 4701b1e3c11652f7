"""obsaug.distributed.ShardedReplayBuffer under torchrun (gloo, CPU) with 2 and
3 ranks, on both transports (shared memory and all_to_all): sharded_worker.py
runs the checks on every rank and prints ``CHECK <name> OK`` for each one that
passed; each test below asserts one of them (one torchrun launch per world
size and transport, shared by its tests). The fault tests launch 2 ranks with
a 3-second group timeout: rank 1 exits, or stops calling, and rank 0's
sample() must raise within the timeout (plus start-up slack); no file is left
in /dev/shm. faults_worker.py checks, with 2 ranks, how wrong arguments and
broken checkpoints are refused on every rank, engines on per-rank devices, a
closed buffer's references, PID namespaces, an owner failing while it writes
rows, and a failed growth of the shared
regions (one launch per mode; its group timeout only bounds a hang)."""
import glob
import os
import re
import socket
import subprocess
import sys
import tempfile

import pytest

import obsaug

from conftest import ROOT

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sharded_worker.py")
FAULTS_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "faults_worker.py")
CHECKS = ["uniform_union", "update_priorities_routing", "prioritized_global", "oracle_uniform",
          "oracle_prioritized", "empty_shard_and_large_batch", "disagreeing_ranks_raise",
          "checkpoint", "transport_and_bytes", "held_batches"]
TRANSPORTS = ["shared_memory", "all_to_all"]
GROUP_TIMEOUT = 3.0

pytestmark = pytest.mark.skipif(not hasattr(obsaug._C, "shard_draws"),
                                reason="obsaug was built without the replay buffer")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, *args, timeout=100, worker=WORKER, extra_env=None):
    env = dict(os.environ, **(extra_env or {}))
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(obsaug.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    env["OMP_NUM_THREADS"] = "1"
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
           f"--master_port={free_port()}", worker, *map(str, args)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr


def shm_files():
    return set(glob.glob("/dev/shm/obsaug-*"))


@pytest.fixture(scope="module", params=[(n, t) for n in (2, 3) for t in TRANSPORTS],
                ids=[f"{n}ranks-{t}" for n in (2, 3) for t in TRANSPORTS])
def checks_run(request):
    nproc, transport = request.param
    return torchrun(nproc, "checks", transport)


@pytest.mark.parametrize("check", CHECKS)
def test_sharded_check(checks_run, check):
    rc, out = checks_run
    assert f"CHECK {check} OK" in out, out[-6000:]


def test_every_check_ran_and_the_ranks_exited_cleanly(checks_run):
    rc, out = checks_run
    assert rc == 0, out[-6000:]
    assert out.count("CHECK ") == len(CHECKS), out[-6000:]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", ["exits", "stalls"])
def test_a_lost_rank_makes_the_others_raise_within_the_timeout(kind, transport):
    before = shm_files()
    rc, out = torchrun(2, kind, transport, GROUP_TIMEOUT, timeout=60)
    m = re.search(r"FAULT raised (\w+) \(RuntimeError: (\w+)\) after ([\d.]+) s", out)
    assert m, out[-4000:]
    assert m.group(2) == "True", out[-4000:]
    assert float(m.group(3)) < GROUP_TIMEOUT + 5.0, out[-4000:]
    assert shm_files() - before == set(), "a process that died left files in /dev/shm"


def test_ranks_on_different_hosts_refuse_shared_memory_and_auto_picks_all_to_all():
    rc, out = torchrun(2, "hosts", "auto")
    assert rc == 0 and "HOSTS OK" in out, out[-4000:]


FAULTS = {"priorities": ["owner_refuses_a_slot", "owner_refuses_a_priority",
                         "unconvertible_priorities", "indices_torch_cannot_read"],
          "load": ["load_without_a_shard", "load_a_corrupt_shard", "load_onto_an_unusable_device"],
          "engine": ["engines_on_per_rank_devices", "close_keeps_no_engine_shared_memory",
                     "close_keeps_no_engine_all_to_all", "another_pid_namespace",
                     "an_owner_that_fails_is_named"],
          "grow": ["failed_growth_keeps_the_regions"]}


@pytest.fixture(scope="module")
def faults_runs():
    """mode -> (return code, output) of its launch, launched when first asked for."""
    runs = {}

    def run(mode):
        if mode not in runs:
            with tempfile.TemporaryDirectory() as tmp:
                runs[mode] = torchrun(2, mode, 20, timeout=120, worker=FAULTS_WORKER,
                                      extra_env={"FAULTS_TMP": tmp})
        return runs[mode]
    return run


@pytest.mark.parametrize("mode,check", [(m, c) for m, checks in FAULTS.items() for c in checks])
def test_fault_check(faults_runs, mode, check):
    rc, out = faults_runs(mode)
    assert f"CHECK {check} OK" in out, out[-6000:]


@pytest.mark.parametrize("mode", list(FAULTS))
def test_every_fault_check_ran_and_the_ranks_exited_cleanly(faults_runs, mode):
    rc, out = faults_runs(mode)
    assert rc == 0 and out.count("CHECK ") == len(FAULTS[mode]), out[-6000:]
