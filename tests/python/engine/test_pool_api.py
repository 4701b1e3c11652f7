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
        assert set(state) == {"next_serial", "next_stamp", "calls", "slot_serials"}
        assert state["slot_serials"] == a.slot_serials() and len(state["slot_serials"]) == 12
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
        with pytest.raises(ValueError, match="one serial per slot"):
            b.load_state_dict(dict(state, slot_serials=state["slot_serials"][:-1]))
        for name in names:  # every file gone: no slot can be restored
            (tmp_path / name).unlink()
        with pytest.raises(RuntimeError, match="no longer decodes"):
            b.load_state_dict(state)
        assert torch.equal(b.images, before)
        assert b.slot_serials() == serials
