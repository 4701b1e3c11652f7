"""obsaug.DistractorPool from Python: the embedded photographs (data/photos,
from scripts/fetch_photos.sh), tensor layout, stats, async refresh, sync
determinism, and use with the overlay op. Skips where the native module was
built without the engine or the photographs are absent."""
import time

import pytest
import torch

import obsaug
from conftest import PHOTOS, needs_cuda, needs_pool
from reference import overlay as reference_overlay


pytestmark = needs_pool

STATS_KEYS = {"decoded", "failed", "uploaded", "decode_rate", "mean_age_calls", "queue_depth",
              "calls", "first_failures", "distinct_crops", "new_crops_per_call"}


def make_pool(**kwargs):
    args = dict(sources=[PHOTOS], size=24, image_size=(36, 40), channels=3, threads=2,
                progress=False)
    args.update(kwargs)
    return obsaug.DistractorPool(**args)


def test_images_shape_dtype_and_stats():
    with make_pool() as pool:
        images = pool.images
        assert images.shape == (24, 3, 36, 40)
        assert images.dtype == torch.uint8 and images.device.type == "cpu"
        # every slot holds a photograph, not zeros or one flat colour
        per_slot_std = images.float().flatten(1).std(dim=1)
        assert bool((per_slot_std > 1.0).all())
        stats = pool.stats()
        assert set(stats) == STATS_KEYS
        assert stats["decoded"] >= 24 and stats["failed"] == 0
        assert stats["first_failures"] == []
        assert pool.num_files >= 24
    assert pool.closed
    with pytest.raises(RuntimeError, match="after close"):
        pool.refresh()


def test_stats_report_the_distinct_crops_and_their_rate():
    """Each decode is a new random-resized crop: the pool has held size + uploaded of
    them, uploaded / calls new ones per call (what an overlay's calls can see)."""
    with make_pool(mode="sync", per_call=2, threads=1) as pool:
        assert pool.stats()["distinct_crops"] == 24 and pool.stats()["new_crops_per_call"] == 0
        for _ in range(3):
            pool.refresh()
        stats = pool.stats()
        assert (stats["uploaded"], stats["calls"]) == (6, 3)
        assert stats["distinct_crops"] == 30 and stats["new_crops_per_call"] == 2.0


def test_a_fill_that_takes_a_while_says_so_off_a_terminal(capfd):
    """Off a terminal (a log, a notebook) a fill longer than a second prints one line as
    it starts and one as it ends; a quick fill prints nothing."""
    with make_pool(size=4, progress=True, threads=1):
        pass
    assert "obsaug:" not in capfd.readouterr().err
    with make_pool(size=96, image_size=(84, 84), progress=True, threads=1) as pool:
        took = pool.stats()["decoded"] / pool.stats()["decode_rate"]
    err = capfd.readouterr().err
    if took > 1.5:  # (a machine that decodes 96 photos within a second prints nothing)
        assert "obsaug: decoding 96 photos into the distractor pool" in err, err
        assert "obsaug: filled the distractor pool: 96 / 96 images in" in err, err
    with make_pool(size=96, image_size=(84, 84), progress=False, threads=1):
        pass
    assert "obsaug:" not in capfd.readouterr().err


def test_grayscale_and_square_size():
    with make_pool(channels=1, image_size=32, size=4, mode="sync", per_call=4) as pool:
        assert pool.images.shape == (4, 1, 32, 32)


def test_async_refresh_changes_images_over_time():
    with make_pool(threads=2) as pool:
        before = pool.images.clone()
        deadline = time.monotonic() + 30
        while pool.stats()["uploaded"] < 24 and time.monotonic() < deadline:
            time.sleep(0.01)
            pool.refresh()
        stats = pool.stats()
        assert stats["uploaded"] >= 24, stats
        changed = (pool.images != before).flatten(1).any(dim=1)
        assert int(changed.sum()) >= 20  # every slot rewritten (a few may repeat a crop)
        assert stats["calls"] > 0 and stats["mean_age_calls"] >= 0


def test_sync_mode_is_deterministic():
    a = make_pool(mode="sync", per_call=5, seed=3, threads=2)
    b = make_pool(mode="sync", per_call=5, seed=3, threads=1)
    c = make_pool(mode="sync", per_call=5, seed=4)
    try:
        assert torch.equal(a.images, b.images)
        for _ in range(6):
            a.refresh()
            b.refresh()
            assert torch.equal(a.images, b.images)
        assert a.stats()["uploaded"] == 30
        assert a.cursor == b.cursor
        assert not torch.equal(a.images, c.images)
    finally:
        for pool in (a, b, c):
            pool.close()


def test_pool_feeds_the_overlay_op():
    with make_pool(mode="sync", per_call=4) as pool:
        obs = torch.randint(0, 256, (5, 9, 36, 40), dtype=torch.uint8,
                            generator=torch.Generator().manual_seed(0))
        for step in range(3):
            pool.refresh()
            out = obsaug.ops.overlay(obs, pool.images, seed=1, step=step, alpha=0.5)
            want = reference_overlay(obs, pool.images, seed=1, step=step, alpha=0.5)
            assert out.shape == obs.shape
            assert torch.equal(out, want)
            assert not torch.equal(out, obs)


def test_errors_name_the_problem(tmp_path):
    with pytest.raises(RuntimeError, match=str(tmp_path)):
        obsaug.DistractorPool(sources=[str(tmp_path)], size=4, progress=False)
    (tmp_path / "bad.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(RuntimeError, match="no usable image"):
        obsaug.DistractorPool(sources=str(tmp_path), size=4, progress=False)
    with pytest.raises(ValueError, match="mode"):
        make_pool(mode="eager")
    with pytest.raises(ValueError, match="channels must be 1 or 3, got 2"):
        make_pool(channels=2)
    # Refused by its size before anything is listed, decoded or allocated.
    with pytest.raises(ValueError, match=r"size 2147483647 x 3x84x84 images needs \d+ MiB of host "
                                         r"memory, more than this machine's \d+ MiB"):
        obsaug.DistractorPool(sources=[str(tmp_path)], size=2**31 - 1, image_size=(84, 84))


@needs_cuda
def test_cuda_pool_matches_cpu_and_feeds_overlay():
    kwargs = dict(mode="sync", per_call=4, seed=5, size=8)
    with make_pool(**kwargs) as cpu, make_pool(device="cuda", **kwargs) as cuda:
        assert cuda.images.is_cuda
        obs = torch.randint(0, 256, (4, 6, 36, 40), dtype=torch.uint8,
                            generator=torch.Generator().manual_seed(2))
        for step in range(3):
            cpu.refresh()
            cuda.refresh()
            assert torch.equal(cpu.images, cuda.images.cpu())
            out = obsaug.ops.overlay(obs.cuda(), cuda.images, seed=1, step=step)
            assert torch.equal(out.cpu(), obsaug.ops.overlay(obs, cpu.images, seed=1, step=step))
    with make_pool(device="cuda", size=8) as pool:  # async: uploads on the current stream
        before = pool.images.clone()
        deadline = time.monotonic() + 30
        while pool.stats()["uploaded"] < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
            pool.refresh()
        torch.cuda.synchronize()
        assert not torch.equal(before, pool.images)
