"""obsaug.DistractorPool, the Python class (python/obsaug/pool.py) over the
native pool: what it is, its documentation, the context manager and close(),
and state_dict / load_state_dict (DistractorPool::restore), exact in sync
mode and all or nothing on failure."""
import os
import shutil

import pytest
import torch

import obsaug
from conftest import PHOTOS, needs_pool

pytestmark = needs_pool


def make_pool(sources=PHOTOS, **kwargs):
    args = dict(size=12, image_size=(28, 32), channels=3, threads=2, mode="sync", per_call=5,
                seed=9, progress=False)
    args.update(kwargs)
    return obsaug.DistractorPool(sources, **args)


def test_the_class_is_the_python_wrapper_with_documented_methods():
    from obsaug.pool import DistractorPool

    assert obsaug.DistractorPool is DistractorPool
    assert DistractorPool.__module__ == "obsaug"
    assert "DistractorPool" in obsaug.__all__
    for name in ("__init__", "refresh", "stats", "state_dict", "load_state_dict", "close",
                 "slot_serials", "images", "cursor", "num_files"):
        assert getattr(DistractorPool, name).__doc__, name
    with make_pool(device=torch.device("cpu")) as pool:
        assert isinstance(pool, DistractorPool)
        assert repr(pool).startswith("obsaug.DistractorPool(size=12, image_size=(28, 32)")
        assert pool.images.shape == (12, 3, 28, 32)


def test_context_manager_and_close_stop_the_pool():
    with make_pool(mode="async") as pool:
        assert not pool.closed
        pool.refresh()
    assert pool.closed
    pool.close()  # idempotent
    with pytest.raises(RuntimeError, match="after close"):
        pool.refresh()
    with pytest.raises(RuntimeError, match="after close"):
        pool.load_state_dict(make_pool(size=12).state_dict())


def test_state_dict_round_trip_continues_bit_exactly():
    a = make_pool()
    b = make_pool()
    try:
        for _ in range(3):  # 15 uploads over 12 slots
            a.refresh()
        state = a.state_dict()
        assert set(state) == {"next_serial", "next_stamp", "calls", "slot_serials",
                              "slot_checksums", "num_files", "listing_fingerprint"}
        assert state["slot_serials"] == a.slot_serials() and len(state["slot_serials"]) == 12
        assert len(state["slot_checksums"]) == 12 and state["num_files"] == a.num_files
        assert state["calls"] == 3 and state["next_stamp"] == 12 + 15
        saved = a.images.clone()
        assert not torch.equal(b.images, saved)

        b.load_state_dict(state)
        assert torch.equal(b.images, saved)
        assert b.state_dict() == state
        for _ in range(4):
            a.refresh()
            b.refresh()
            assert torch.equal(a.images, b.images)
    finally:
        a.close()
        b.close()


def test_cursor_setter_moves_only_the_cursor():
    with make_pool() as a, make_pool() as b:
        a.refresh()
        before = b.images.clone()
        b.cursor = a.cursor
        assert b.cursor == a.cursor
        assert torch.equal(b.images, before)


def test_load_state_dict_rejects_bad_states_and_keeps_the_pool(tmp_path):
    names = sorted(n for n in os.listdir(PHOTOS) if n.lower().endswith((".jpg", ".jpeg")))[:6]
    for name in names:
        shutil.copy(os.path.join(PHOTOS, name), tmp_path / name)
    with make_pool(str(tmp_path), size=6) as a, make_pool(str(tmp_path), size=6) as b:
        a.refresh()
        state = a.state_dict()
        before, serials = b.images.clone(), b.slot_serials()

        with pytest.raises(TypeError, match="state must be a mapping"):
            b.load_state_dict([1, 2, 3])
        with pytest.raises(ValueError, match=r"state is missing \['slot_serials'\]"):
            b.load_state_dict({k: v for k, v in state.items() if k != "slot_serials"})
        with pytest.raises(ValueError, match=r"one entry per slot \(6\), got 5 and 6"):
            b.load_state_dict(dict(state, slot_serials=state["slot_serials"][:-1]))
        for name in names:  # every file gone: no slot can be restored
            (tmp_path / name).unlink()
        with pytest.raises(RuntimeError, match="no longer decodes"):
            b.load_state_dict(state)
        assert torch.equal(b.images, before)
        assert b.slot_serials() == serials


def test_load_state_dict_refuses_sources_that_list_other_files(tmp_path):
    # A serial names a file through the number of files: with one file added,
    # every serial would name another image, so the state is refused.
    names = sorted(n for n in os.listdir(PHOTOS) if n.lower().endswith((".jpg", ".jpeg")))[:6]
    for name in names[:5]:
        shutil.copy(os.path.join(PHOTOS, name), tmp_path / name)
    with make_pool(str(tmp_path), size=6) as a:
        a.refresh()
        state = a.state_dict()
    shutil.copy(os.path.join(PHOTOS, names[5]), tmp_path / names[5])
    with make_pool(str(tmp_path), size=6) as b:
        before = b.images.clone()
        with pytest.raises(RuntimeError, match="the sources now list 6 files, 5 when the state "
                                               r"was taken \(files added or deleted since\)"):
            b.load_state_dict(state)
        assert torch.equal(b.images, before)
        with pytest.raises(ValueError, match=r"state is missing \['listing_fingerprint'\].*"
                                             "take a new one"):
            b.load_state_dict({k: v for k, v in state.items() if k != "listing_fingerprint"})


def test_relative_sources_are_made_absolute_at_construction(tmp_path, monkeypatch):
    names = sorted(n for n in os.listdir(PHOTOS) if n.lower().endswith((".jpg", ".jpeg")))[:3]
    (tmp_path / "photos").mkdir()
    for name in names:
        shutil.copy(os.path.join(PHOTOS, name), tmp_path / "photos" / name)
    monkeypatch.chdir(tmp_path)
    with make_pool("photos", size=4, per_call=2) as pool:
        monkeypatch.chdir("/")
        before = pool.images.clone()
        for _ in range(3):
            pool.refresh()
        stats = pool.stats()
        assert stats["failed"] == 0 and stats["uploaded"] == 6
        assert not torch.equal(pool.images, before)


def test_a_source_without_usable_image_beside_a_good_one_is_an_error(tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "empty.jpg").write_bytes(b"")
    (bad / "text.png").write_bytes(b"hello")
    for size in (1, 12):  # size 1: the fill need not draw from the bad source at all
        with pytest.raises(RuntimeError, match=f"image source {bad} holds no usable image: all 2 "
                                               "of its listed files failed to read or decode"):
            make_pool([PHOTOS, str(bad)], size=size, per_call=min(5, size))


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(image_size=16.0), TypeError,
     r"^image_size must be an int or \(height, width\) of ints, got float$"),
    (dict(image_size=(16, 16.5)), TypeError,
     r"^image_size must be an int or \(height, width\) of ints, got \(int, float\)$"),
    (dict(image_size=(16, 16, 3)), ValueError,
     r"^image_size must be an int or \(height, width\), got 3 values$"),
    (dict(image_size=2**40), ValueError,
     r"^image_size must be in 1\.\.2147483647 per side, got 1099511627776x1099511627776$"),
    (dict(size=True), TypeError, r"^size must be an int, got bool$"),
    (dict(size=4.0), TypeError, r"^size must be an int, got float$"),
    (dict(size=2**31), ValueError, r"^size must be in 1\.\.2147483647, got 2147483648$"),
    (dict(seed=-1), ValueError, r"^seed must be in \[0, 2\*\*64\), got -1$"),
    (dict(seed=2**64), ValueError, r"^seed must be in \[0, 2\*\*64\), got 18446744073709551616$"),
    (dict(seed=1.0), TypeError, r"^seed must be an int in \[0, 2\*\*64\), got float$"),
    (dict(channels=True), TypeError, r"^channels must be an int, got bool$"),
    (dict(threads="2"), TypeError, r"^threads must be an int, got str$"),
    (dict(threads=2**40), ValueError, r"^threads must be in 0\.\.2147483647, got 1099511627776$"),
    (dict(per_call=None), TypeError, r"^per_call must be an int, got NoneType$"),
    (dict(worker_nice=2.5), TypeError, r"^worker_nice must be an int, got float$"),
    (dict(max_per_second="fast"), TypeError, r"^max_per_second must be a number, got str 'fast'$"),
    (dict(mode=1), TypeError, r"^mode must be a str \(\"async\" or \"sync\"\), got int$"),
    (dict(device=0), TypeError, r"^device must be a str or torch.device, got int$"),
    (dict(rank=True), TypeError, r"^rank must be an int, got bool$"),
    (dict(world_size=2.0), TypeError, r"^world_size must be an int, got float$"),
    (dict(progress="no"), TypeError, r"^progress must be True or False, got str 'no'$"),
    (dict(progress=None), TypeError, r"^progress must be True or False, got NoneType None$"),
    (dict(rank=2, world_size=2), ValueError,
     r"^rank must be in \[0, world_size\) = \[0, 2\), got 2$"),
    (dict(rank=-1, world_size=2), ValueError,
     r"^rank must be in \[0, world_size\) = \[0, 2\), got -1$"),
    (dict(world_size=0), ValueError, r"^world_size must be >= 1, got 0$"),
    # the config loader's rule for pool.refresh.per_call, in the same words
    (dict(mode="sync", per_call=13, size=12), ValueError,
     r"per_call must be at most size \(12\) in sync mode, got 13$"),
])
def test_bad_arguments_name_the_argument(kwargs, exc, message):
    """Each argument is checked before the sources are listed: the message names it,
    what it got and what it needs (a TypeError for a wrong type, README "Errors")."""
    with pytest.raises(exc, match=message):
        make_pool(**kwargs)


def test_sync_per_call_may_equal_size_and_async_ignores_it():
    with make_pool(size=4, per_call=4, threads=0) as pool:
        pool.refresh()
    with make_pool(size=4, per_call=9, mode="async", threads=0) as pool:
        pool.refresh()
