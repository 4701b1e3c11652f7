"""Fault injection: the distractor pool's async refresher while
its files are truncated, overwritten with garbage, swapped for other photos,
deleted, or its whole source directory disappears; and replay checkpoints
whose save fails (parent path is a file, disk full via RLIMIT_FSIZE) or whose
process is SIGKILLed in the middle of a large save.

Every augment call made here is checked bit for bit against the stateless op
``obsaug.ops.augment`` applied to the pool as it stands right after the call
(the test thread is the pool's only consumer, so the pool changes only inside
``augment``): a fault may stop the refresh, but the engine must go on serving
exact blends of complete pool images, never raise, and count the failures.

tests/python/replay/test_replay.py already kills a child that saves a small buffer
in a loop; here the kill lands inside one long save (hundreds of MB) at
several delays, and the leftover ``replay.obsaug.tmp`` must not break the
next save.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
import torch

import obsaug

from conftest import PHOTOS, PYDIR, needs_engine, needs_replay


SEED = 5
PIPELINE = [{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5}]
HW = 84


# ------------------------------------------------------------------ helpers (pool)

def photo_names():
    """The embedded JPEGs, smallest first (fast decodes)."""
    names = [n for n in os.listdir(PHOTOS) if n.lower().endswith(".jpg")]
    return sorted(names, key=lambda n: (os.path.getsize(os.path.join(PHOTOS, n)), n))


def copy_photos(dst, n=12):
    """Copies the n smallest embedded photos into dst; returns (copied names, spare names)."""
    names = photo_names()
    if len(names) < n + 2:
        pytest.skip(f"data/photos holds only {len(names)} JPEGs")
    os.makedirs(dst, exist_ok=True)
    for name in names[:n]:
        shutil.copyfile(os.path.join(PHOTOS, name), os.path.join(dst, name))
    return names[:n], names[n:]


def engine_config(src, pool_size=8):
    return {
        "seed": SEED,
        "frames": {"stack": 3, "channels": 3, "height": HW, "width": HW},
        "pipeline": PIPELINE,
        "pool": {"size": pool_size, "sources": [str(src)],
                 "refresh": {"threads": 1, "max_per_second": 0, "mode": "async"}},
    }


class Checked:
    """Calls eng.augment and checks every output against obsaug.ops.augment on the pool
    snapshot taken right after the call (the pool the call read)."""

    def __init__(self, eng):
        self.eng = eng
        g = torch.Generator().manual_seed(11)
        self.obs = torch.randint(0, 256, (2, 9, HW, HW), dtype=torch.uint8, generator=g)
        self.calls = 0
        self.pool = eng.pool_images.clone()

    def step(self):
        step = self.eng.step
        out = self.eng.augment(self.obs)  # must never raise
        self.pool = self.eng.pool_images.clone()
        assert out.shape == self.obs.shape and out.dtype == torch.uint8
        want = obsaug.ops.augment(self.obs, self.pool, ops=PIPELINE, seed=SEED, step=step)
        assert torch.equal(out, want), f"augment call {self.calls} (step {step}) is not a " \
                                       "blend of the pool it left behind"
        self.calls += 1
        time.sleep(0.002)  # the rest of an RL step: lets the (nicer) decoder thread run
        return out

    def until(self, cond, timeout=10.0, min_calls=1):
        """Augments until cond(stats) holds (and at least min_calls calls); True if it did."""
        deadline = time.monotonic() + timeout
        k = 0
        while time.monotonic() < deadline:
            self.step()
            k += 1
            if k >= min_calls and cond(self.eng.stats()):
                return True
        return False


def write_in_place(path, data):
    """Not atomic: truncates, then writes (a reader may see any prefix)."""
    with open(path, "r+b" if os.path.exists(path) else "wb") as f:
        f.truncate(0)
        f.write(data)


def garbage(n, seed):
    return random.Random(seed).randbytes(n)


# ------------------------------------------------------------------ 1. corrupted files

@needs_engine
def test_async_refresh_survives_files_corrupted_deleted_and_swapped(tmp_path):
    src = tmp_path / "photos"
    names, spares = copy_photos(src)
    originals = {n: (src / n).read_bytes() for n in names}
    with open(os.path.join(PHOTOS, spares[0]), "rb") as f:
        other_photo = f.read()
    victims = names[:4]            # truncated, garbage, swapped for another photo, deleted
    with obsaug.Engine(engine_config(src)) as eng:
        c = Checked(eng)
        assert c.until(lambda s: s["pool_uploaded"] >= 3), f"no refresh: {eng.stats()}"
        assert eng.stats()["pool_failed"] == 0

        # Phase 1: a thread rewrites the victims in place, over and over, while the
        # refresher reads them (it sees prefixes, garbage, vanished files, other photos).
        stop = threading.Event()
        errors = []

        def mutate():
            try:
                k = 0
                while not stop.is_set():
                    for i, name in enumerate(victims):
                        p, good = src / name, originals[name]
                        what = (k + i) % 5
                        if what == 0:
                            write_in_place(p, good[:len(good) // 3])
                        elif what == 1:
                            write_in_place(p, garbage(len(good) // 4, k))
                        elif what == 2:
                            write_in_place(p, other_photo)
                        elif what == 3:
                            p.unlink(missing_ok=True)
                        else:
                            write_in_place(p, good)
                    k += 1
                    time.sleep(0.01)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        mutator = threading.Thread(target=mutate, daemon=True)
        mutator.start()
        try:
            f0 = eng.stats()["pool_failed"]
            ok = c.until(lambda s: s["pool_failed"] >= f0 + 3, timeout=8.0, min_calls=40)
        finally:
            stop.set()
            mutator.join(5)
        assert not errors, errors
        assert ok, f"no failures counted while files were being mangled: {eng.stats()}"

        # Phase 2: a settled fault state; the healthy files must keep flowing.
        trunc, junk, swapped, gone = (src / n for n in victims)
        write_in_place(trunc, originals[victims[0]][:len(originals[victims[0]]) // 2])
        write_in_place(junk, garbage(20000, 99))
        tmp = src / "swap.part"
        tmp.write_bytes(other_photo)
        os.replace(tmp, swapped)                      # a different, valid image
        gone.unlink(missing_ok=True)
        s0 = eng.stats()
        pool0 = c.pool.clone()
        # 3 bad files per 12-file epoch: one epoch of attempts fails at least 3 times.
        assert c.until(lambda s: s["pool_failed"] >= s0["pool_failed"] + 3
                       and s["pool_decoded"] >= s0["pool_decoded"] + 6
                       and s["pool_uploaded"] >= s0["pool_uploaded"] + 6, timeout=12.0), \
            f"before {s0}, after {eng.stats()}"
        assert not torch.equal(c.pool, pool0), "the pool stopped refreshing"


@needs_engine
def test_pool_reports_the_first_failing_paths(tmp_path):
    """obsaug.DistractorPool exposes first_failures: the reported paths are exactly
    the broken files, each with a message."""
    src = tmp_path / "photos"
    names, _ = copy_photos(src, n=8)
    bad = {"zero.jpg": b"", "noise.jpg": garbage(5000, 1),
           "half.jpg": (src / names[0]).read_bytes()[:4000]}
    for name, data in bad.items():
        (src / name).write_bytes(data)
    pool = obsaug.DistractorPool(str(src), size=4, image_size=HW, channels=3, threads=1,
                                 mode="async", progress=False, seed=2)
    try:
        (src / names[1]).unlink()                     # deleted after the listing
        broken = set(bad) | {names[1]}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pool.refresh()
            s = pool.stats()
            reported = {os.path.basename(f["path"]) for f in s["first_failures"]}
            if reported >= broken and s["uploaded"] >= 4:
                break
            time.sleep(0.002)
        s = pool.stats()
        reported = {os.path.basename(f["path"]): f["message"] for f in s["first_failures"]}
        assert set(reported) == broken, s
        assert s["failed"] >= 4 and s["uploaded"] >= 4, s
        for name, message in reported.items():
            assert name in message and len(message) > len(name) + 5, (name, message)
        assert "cannot open" in reported[names[1]] or "No such file" in reported[names[1]], \
            reported[names[1]]
    finally:
        pool.close()


@needs_engine
def test_engine_stats_name_the_first_failures(tmp_path):
    """Engine.stats()["pool_first_failures"]: the pool's first skipped inputs with their
    reasons, a .txt entry naming no file (counted at listing) and an undecodable file."""
    src = tmp_path / "photos"
    names, _ = copy_photos(src, n=2)
    (src / "noise.jpg").write_bytes(garbage(3000, 3))
    listing = tmp_path / "list.txt"
    listing.write_text("\ufeff" + "\n".join(
        [str(src / names[0]), str(src / "gone.jpg"), str(src / "noise.jpg"), str(src / names[1])])
        + "\n", encoding="utf-8")                  # a BOM, as Windows editors write it
    cfg = engine_config(listing, pool_size=4)
    cfg["pool"]["refresh"] = {"threads": 1, "mode": "sync", "per_call": 2}
    with obsaug.Engine(cfg) as eng:
        assert len(eng.pool_files()) == 3
        for _ in range(4):
            eng.augment(torch.zeros(2, 9, HW, HW, dtype=torch.uint8))
        s = eng.stats()
    failures = s["pool_first_failures"]
    assert [f["path"] for f in failures[:2]] == [str(src / "gone.jpg"), str(src / "noise.jpg")], s
    assert "list.txt line 2: " in failures[0]["message"], failures[0]
    assert "noise.jpg" in failures[1]["message"], failures[1]
    assert s["pool_failed"] >= 2 and len(failures) <= 10, s  # five listing, five decode


# ------------------------------------------------------------------ 2. source directory gone

@needs_engine
def test_source_directory_renamed_away_and_back(tmp_path):
    # We run as root, so chmod 000 would not stop the decoder's reads: the directory is
    # renamed away instead, which makes every listed path fail to open.
    src = tmp_path / "photos"
    away = tmp_path / "photos_away"
    copy_photos(src)
    with obsaug.Engine(engine_config(src)) as eng:
        c = Checked(eng)
        assert c.until(lambda s: s["pool_uploaded"] >= 2)
        f0 = eng.stats()["pool_failed"]
        os.rename(src, away)
        try:
            assert c.until(lambda s: s["pool_failed"] >= f0 + 3), eng.stats()
            for _ in range(3):                         # uploads what was staged before
                c.step()
            s0, pool0 = eng.stats(), c.pool.clone()
            for _ in range(40):
                c.step()
                assert torch.equal(c.pool, pool0), "pool changed with no readable file"
            s1 = eng.stats()
            assert s1["pool_decoded"] == s0["pool_decoded"], (s0, s1)
            assert s1["pool_uploaded"] == s0["pool_uploaded"], (s0, s1)
            assert s1["pool_failed"] > s0["pool_failed"], (s0, s1)
        finally:
            os.rename(away, src)
        assert c.until(lambda s: s["pool_decoded"] >= s1["pool_decoded"] + 3
                       and s["pool_uploaded"] >= s1["pool_uploaded"] + 3, timeout=12.0), \
            f"decoding did not resume: {s1} -> {eng.stats()}"
        assert not torch.equal(c.pool, pool0)


# ------------------------------------------------------------------ 3. every file bad

@needs_engine
def test_every_file_going_bad_keeps_the_current_pool(tmp_path):
    src = tmp_path / "photos"
    names, _ = copy_photos(src)
    with obsaug.Engine(engine_config(src)) as eng:
        c = Checked(eng)
        assert c.until(lambda s: s["pool_uploaded"] >= 2)
        for i, name in enumerate(names):
            p = src / name
            if i % 3 == 0:
                write_in_place(p, b"")
            elif i % 3 == 1:
                write_in_place(p, garbage(3000, i))
            else:
                write_in_place(p, p.read_bytes()[:2000])
        f0 = eng.stats()["pool_failed"]
        # a whole epoch (12 files) of failed attempts, and no exception from augment
        assert c.until(lambda s: s["pool_failed"] >= f0 + len(names)), eng.stats()
        for _ in range(3):
            c.step()
        s0, pool0 = eng.stats(), c.pool.clone()
        for _ in range(40):
            c.step()
            assert torch.equal(c.pool, pool0)
        s1 = eng.stats()
        assert s1["pool_decoded"] == s0["pool_decoded"] and s1["pool_failed"] > s0["pool_failed"]
        # Bad files are not worker exceptions (those are rethrown by the next call, but
        # Python has no hook to inject one): nothing is raised, and close() does not hang
        # on the worker that keeps failing.
        t = time.monotonic()
        eng.close()
        assert time.monotonic() - t < 2.0
    with pytest.raises(RuntimeError, match="closed"):
        eng.augment(c.obs)
    assert eng.stats()["calls"] == c.calls


FIFO_CHILD = r"""
import os, sys, time
sys.path.insert(0, PYDIR)
import torch, obsaug
src = sys.argv[1]
names = sorted(n for n in os.listdir(src) if n.endswith(".jpg"))
eng = obsaug.Engine({"seed": 5, "frames": {"stack": 3, "channels": 3, "height": 84, "width": 84},
                     "pipeline": [{"op": "overlay", "alpha": 0.5}],
                     "pool": {"size": 8, "sources": [src],
                              "refresh": {"threads": 1, "max_per_second": 0, "mode": "async"}}})
obs = torch.zeros(2, 9, 84, 84, dtype=torch.uint8)
for _ in range(20):
    eng.augment(obs)
victim = os.path.join(src, names[0])
os.unlink(victim)
os.mkfifo(victim)                      # a named pipe where a photo was: open() would block
d0 = eng.stats()["pool_decoded"]
deadline = time.monotonic() + 20       # generous: a loaded 2-core machine; a hang is forever
ok = False
while time.monotonic() < deadline and not ok:
    eng.augment(obs)
    time.sleep(0.003)
    s = eng.stats()
    ok = s["pool_failed"] >= 1 and s["pool_decoded"] >= d0 + 6
print("RESULT", ok, eng.stats(), flush=True)
print("CLOSING", flush=True)
eng.close()
print("CLOSED", flush=True)
"""


@needs_engine
def test_a_file_replaced_by_a_fifo_is_skipped_not_a_hang(tmp_path):
    """The stuck child is killed: the test cannot hang."""
    src = tmp_path / "photos"
    copy_photos(src)
    script = tmp_path / "fifo_child.py"
    script.write_text(f"PYDIR = {PYDIR!r}\n" + FIFO_CHILD)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, str(script), str(src)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 45
        while (not lines or not lines[-1].startswith("CLOSING")) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(x.startswith("CLOSING") for x in lines), "".join(lines) + proc.stderr.read()
        try:
            proc.wait(timeout=20)                       # close() must not hang
        except subprocess.TimeoutExpired:
            pass
        closed = proc.poll() is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(5)
    result = next(x for x in lines if x.startswith("RESULT"))
    assert result.startswith("RESULT True"), f"the refresh stalled: {result}"
    assert closed and proc.returncode == 0 and "CLOSED\n" in lines, \
        f"close() hung with a worker stuck on the FIFO: {lines}"


# ------------------------------------------------------------------ 4. replay checkpoints

# Shared by the tests and their child processes (exec'd in both).
BUILDER = r'''
import torch, obsaug

def build_buffer(frames, capacity=None, shape=(3, 32, 32), envs=1):
    """A deterministic buffer: `frames` frames over `envs` environments (batched adds)."""
    capacity = capacity or frames
    rb = obsaug.ReplayBuffer(capacity, shape, 3, (2,), seed=7)
    g = torch.Generator().manual_seed(frames)
    block = torch.randint(0, 256, (envs,) + tuple(shape), dtype=torch.uint8, generator=g)
    ids = list(range(envs))
    steps = frames // envs
    rb.add_first(block, env=ids)
    for t in range(1, steps):
        block[:, 0, 0, 0] = t % 256
        rb.add(torch.full((envs, 2), float(t)), torch.full((envs,), t / 10.0), block, env=ids)
    return rb
'''
exec(BUILDER)  # noqa: S102 - defines build_buffer here


def fingerprint(rb):
    return (rb.capacity, len(rb), rb.num_valid, rb.total_frames, rb.sample_calls)


def run_child(tmp_path, source, *args, timeout=60):
    script = tmp_path / "child.py"
    script.write_text(f"import sys\nsys.path.insert(0, {PYDIR!r})\n" + BUILDER + source)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, str(script), *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=timeout)


@needs_replay
def test_save_under_a_file_fails_cleanly(tmp_path):
    rb = build_buffer(60)
    before = fingerprint(rb)
    blocker = tmp_path / "not_a_dir"
    blocker.write_bytes(b"precious")
    for target in (blocker / "ckpt", blocker / "a" / "b", blocker):
        with pytest.raises(RuntimeError) as info:  # README "Errors": a file that cannot be written
            rb.save(target)
        message = str(info.value)
        assert "not_a_dir" in message and "not a directory" in message.lower(), message
    assert blocker.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_dir"]   # nothing written
    assert fingerprint(rb) == before
    assert rb.sample(4)["obs"].shape == (4, 9, 32, 32)
    rb.save(tmp_path / "ok")                           # the buffer still saves
    assert fingerprint(obsaug.ReplayBuffer.load(tmp_path / "ok")) == fingerprint(rb)


DISK_FULL_CHILD = r'''
import hashlib, os, resource, signal
ckpt = sys.argv[1]
target = os.path.join(ckpt, "replay.obsaug")
rb = build_buffer(600)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # write() then fails with EFBIG
hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
for limit in map(int, sys.argv[2:]):
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        rb.save(ckpt)
        result = "SAVED"
    except Exception as e:
        result = "ERROR " + type(e).__name__ + ": " + str(e).replace("\n", " ")
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    tmp_left = os.path.exists(target + ".tmp")
    digest = hashlib.sha256(open(target, "rb").read()).hexdigest()
    assert rb.sample(4)["obs"].shape == (4, 9, 32, 32)   # the buffer is still usable
    print(limit, tmp_left, digest, result, flush=True)
print("END", flush=True)
'''


@needs_replay
def test_disk_full_during_save_keeps_the_previous_checkpoint(tmp_path):
    """RLIMIT_FSIZE (SIGXFSZ ignored) makes write() fail with EFBIG at a chosen byte,
    like a full disk: before the first byte, inside the header, mid-frames, inside the
    final checksum. The last limit leaves exactly enough room (control: it saves)."""
    import hashlib
    ckpt = tmp_path / "ckpt"
    old = build_buffer(50)
    old.save(ckpt)
    old_digest = hashlib.sha256((ckpt / "replay.obsaug").read_bytes()).hexdigest()
    failing_count = 6
    twin = build_buffer(600)                        # the child's buffer at its last save
    for _ in range(failing_count):
        twin.sample(4)
    twin.save(tmp_path / "probe")
    size = (tmp_path / "probe" / "replay.obsaug").stat().st_size
    new_digest = hashlib.sha256((tmp_path / "probe" / "replay.obsaug").read_bytes()).hexdigest()
    failing = [0, 100, 70000, size // 2, size - 8, size - 1]
    assert len(failing) == failing_count
    proc = run_child(tmp_path, DISK_FULL_CHILD, ckpt, *failing, size, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[-1] == "END" and len(lines) == len(failing) + 2, proc.stdout
    for line, limit in zip(lines, failing):
        got_limit, tmp_left, digest, result = line.split(" ", 3)
        assert int(got_limit) == limit
        assert result.startswith("ERROR"), f"save under RLIMIT_FSIZE={limit}: {line}"
        assert "too large" in result.lower() or "write" in result.lower(), line
        assert tmp_left == "False", f"temporary left behind at limit {limit}: {line}"
        assert digest == old_digest, f"the previous checkpoint changed at limit {limit}"
    got_limit, tmp_left, digest, result = lines[-2].split(" ", 3)
    assert (int(got_limit), tmp_left, digest, result) == (size, "False", new_digest, "SAVED")
    assert fingerprint(obsaug.ReplayBuffer.load(ckpt)) == fingerprint(twin)
    assert sorted(p.name for p in ckpt.iterdir()) == ["replay.obsaug"]


# One interpreter (importing torch costs seconds here) builds the big buffer; for each
# attempt it adds a batch (so the checkpoint differs) and forks a saver, which the test
# SIGKILLs `delay` seconds after it says it starts writing.
SAVE_SERVER = r'''
import os
ckpt = sys.argv[1]
rb = build_buffer(8000, shape=(3, 84, 84), envs=500)
ids = list(range(500))
block = torch.zeros(500, 3, 84, 84, dtype=torch.uint8)
print("READY", rb.total_frames, rb.num_valid, flush=True)
k = 0
while sys.stdin.readline().strip() == "go":
    block.fill_(k)
    k += 1
    rb.add(torch.zeros(500, 2), torch.zeros(500), block, env=ids)
    pid = os.fork()
    if pid == 0:
        try:
            print("SAVING", os.getpid(), rb.total_frames, rb.num_valid, flush=True)
            rb.save(ckpt)
            print("SAVED", flush=True)
        finally:
            os._exit(0)
    sys.stdin.readline()           # the test has signalled the saver: a zombie until now,
    _, status = os.waitpid(pid, 0)  # so its pid cannot be reused before the kill
    print("REAPED", status, flush=True)
'''


@needs_replay
def test_sigkill_inside_a_long_save_leaves_old_or_new_checkpoint(tmp_path):
    import queue
    ckpt = tmp_path / "ckpt"
    small = build_buffer(40, shape=(3, 84, 84))
    small.save(ckpt)
    current = fingerprint(small)
    script = tmp_path / "server.py"
    script.write_text(f"import sys\nsys.path.insert(0, {PYDIR!r})\n" + BUILDER + SAVE_SERVER)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.Popen([sys.executable, str(script), str(ckpt)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x.split()) for x in proc.stdout],
                     daemon=True).start()

    def next_line(timeout=60):
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("the save server went quiet: " + proc.stderr.read()[-3000:])

    outcomes = []
    try:
        assert next_line()[0] == "READY"
        for delay in (0.05, 0.15, 0.4, 2.0):   # the last one usually lets it finish
            proc.stdin.write("go\n")
            proc.stdin.flush()
            saving = next_line()
            assert saving[0] == "SAVING", saving
            pid, total, num_valid = map(int, saving[1:])
            time.sleep(delay)
            os.kill(pid, signal.SIGKILL)                # not reaped yet: still our saver
            proc.stdin.write("killed\n")
            proc.stdin.flush()
            finished = False
            while (line := next_line())[0] != "REAPED":
                finished |= line[0] == "SAVED"
            loaded = obsaug.ReplayBuffer.load(ckpt)     # never a broken replay.obsaug
            got = fingerprint(loaded)
            del loaded
            if got == current:
                assert not finished, "the save reported success but the old checkpoint is there"
                outcomes.append("old")
            else:
                assert got == (8000, 8000, num_valid, total, 0), (got, current)
                outcomes.append("new")
                current = got
            # and the killed saves' temporaries (a save removes them once a minute old)
            leftovers = sorted(p.name for p in ckpt.iterdir())
            temps = [n for n in leftovers if n.startswith("replay.obsaug.tmp.")]
            assert set(leftovers) - set(temps) <= {"replay.obsaug"}, leftovers
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert "old" in outcomes, f"no kill landed inside a save: {outcomes}"
    # leftover temporaries do not break the next save, which removes them once a minute old
    (ckpt / "replay.obsaug.tmp").write_bytes(b"half a checkpoint")
    minute_ago = time.time() - 90
    for leftover in ckpt.glob("replay.obsaug.tmp*"):
        os.utime(leftover, (minute_ago, minute_ago))
    small.save(ckpt)
    assert sorted(p.name for p in ckpt.iterdir()) == ["replay.obsaug"]
    assert fingerprint(obsaug.ReplayBuffer.load(ckpt)) == fingerprint(small)
