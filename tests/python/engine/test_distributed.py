"""Two ranks under torch.distributed (torchrun, gloo on CPU), one Engine each:
examples/distributed.py --check must report different parameters and
disjoint pool files that together cover data/photos. Also the rank checks of
obsaug.Engine (no process group needed)."""
import os
import socket
import subprocess
import sys

import pytest

import obsaug

from conftest import CONFIGS, ROOT, needs_photos

NO_POOL = os.path.join(CONFIGS, "drq_shift.yaml")  # shift only: no pool to fill


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_photos
def test_two_ranks_draw_different_parameters_from_disjoint_files():
    env = dict(os.environ)
    # The obsaug the test imported (its folder first), for the child processes too.
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(obsaug.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           f"--master_port={free_port()}", os.path.join(ROOT, "examples", "distributed.py"),
           "--check", "--pool-size", "16", "--threads", "1", "--batch", "4"]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "parameters differ across ranks: yes" in out, out
    assert "pool files disjoint: yes" in out, out
    assert "union of pool files is all" in out and "files: yes" in out, out
    assert "VERDICT: OK" in out, out
    assert "rank 0/2: seed 0," in out and "rank 1/2: seed 1," in out, out


@pytest.mark.parametrize("rank, world_size, message", [
    (-1, 2, r"rank must be in \[0, world_size\) = \[0, 2\), got -1"),
    (2, 2, r"rank must be in \[0, world_size\) = \[0, 2\), got 2"),
    (0, 0, r"world_size must be >= 1, got 0"),
])
def test_bad_rank_is_a_value_error(rank, world_size, message):
    with pytest.raises(ValueError, match=message):
        obsaug.Engine(NO_POOL, rank=rank, world_size=world_size)


def test_rank_must_be_an_int():
    with pytest.raises(TypeError, match="rank must be an int"):
        obsaug.Engine(NO_POOL, rank=1.0, world_size=2)
    with pytest.raises(TypeError, match="world_size must be an int"):
        obsaug.Engine(NO_POOL, rank=0, world_size=True)


def test_native_side_validates_too():
    with pytest.raises(ValueError,
                       match=r"rank must be in \[0, world_size\) = \[0, 3\), got rank 5"):
        obsaug._C.Engine.from_file(NO_POOL, 5, 3)


def test_rank_offsets_seed_and_state():
    with obsaug.Engine(NO_POOL, rank=2, world_size=3) as e:
        assert (e.rank, e.world_size) == (2, 3)
        assert e.seed == 2  # drq_shift.yaml has seed 0
        assert e.state_dict()["seed"] == 2
        assert e.pool_files() == []  # no overlay, no pool
        state = e.state_dict()
    with obsaug.Engine(NO_POOL) as e0:
        assert (e0.rank, e0.world_size, e0.seed) == (0, 1, 0)
        with pytest.raises(ValueError, match="rank 0"):
            e0.load_state_dict(state)


def test_from_torch_distributed_without_a_process_group_is_rank_0_of_1():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group is initialised in this process")
    with obsaug.Engine.from_torch_distributed(NO_POOL) as e:
        assert (e.rank, e.world_size, e.seed) == (0, 1, 0)
