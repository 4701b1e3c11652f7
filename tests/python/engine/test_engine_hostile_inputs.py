"""Hostile inputs to obsaug.Engine as a hostile user would write them: a config
path that is a FIFO or a link to /dev/zero, a pool source list or shard that is
one, a dict config that is a billion-laughs bomb (PyYAML's shared references)
or refers to itself, and engine states out of their ranges. Each is refused at
once with the documented type (README, "Errors": ValueError for a bad config or
state, RuntimeError for sources without a usable image) and words that name
what is wrong; none blocks or grows without bound.

The calls that blocked or grew without bound before run in a child process
with a timeout, so that a regression fails the test instead of hanging the
suite.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import yaml

import obsaug

from conftest import PHOTOS, PYDIR, needs_engine

pytestmark = needs_engine

_CHILD = textwrap.dedent("""
    import json, sys, time
    import yaml
    sys.path.insert(0, sys.argv[1])
    import obsaug
    config = eval(sys.argv[2])  # the config, or the expression that builds it
    start = time.monotonic()
    try:
        obsaug.Engine(config)
        out = ["ok", ""]
    except BaseException as e:
        out = [type(e).__name__, str(e)]
    print(json.dumps(out + [time.monotonic() - start]))
""")


def engine_error_in_child(config, timeout=60):
    """(exception type name, message, seconds) of Engine(config) in a child;
    `config` as Python source (a repr, or an expression that builds it)."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, PYDIR,
                           config if isinstance(config, str) and "(" in config else repr(config)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind, message, seconds = json.loads(proc.stdout.strip().splitlines()[-1])
    return kind, message, seconds


def overlay_config(source):
    return {"pipeline": [{"op": "overlay"}], "pool": {"size": 4, "sources": [str(source)]}}


# --- paths that are not regular files ---------------------------------------------


def refused_at_once(config, exception, words):
    """Engine(config), in a child, raises `exception` (a type name) with `words` in
    its message within 5 s."""
    kind, message, seconds = engine_error_in_child(config)
    assert kind == exception, message
    assert words in message, message
    assert seconds < 5, seconds


# A FIFO blocked the read before; a link to /dev/zero read 2 GiB.
NOT_REGULAR = [(os.mkfifo, "is a FIFO, not a regular file"),
               (lambda p: os.symlink("/dev/zero", p), "is a character device, not a regular file")]


@pytest.mark.parametrize("make, kind", NOT_REGULAR, ids=["fifo", "dev zero"])
def test_a_config_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, make, kind):
    path = tmp_path / "config.yaml"
    make(path)
    refused_at_once(str(path), "ValueError", f"{path}: {kind}")


def test_a_config_file_over_the_size_limit_is_refused(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"#" * (16 * 2**20 + 1) + b"\n")
    with pytest.raises(ValueError) as info:
        obsaug.Engine(big)
    assert "the config file of 16777218 bytes, more than the limit of 16777216" in str(info.value)


@pytest.mark.parametrize("name", ["list.txt", "shard.tar"])
@pytest.mark.parametrize("make, kind", NOT_REGULAR, ids=["fifo", "dev zero"])
def test_a_source_list_or_shard_that_is_not_a_regular_file_is_refused_at_once(tmp_path, name,
                                                                              make, kind):
    source = tmp_path / name
    make(source)
    what = "image list" if name.endswith(".txt") else "tar shard"
    refused_at_once(overlay_config(source), "RuntimeError", f"{what} {source}: {kind}")


def test_a_source_list_with_an_endless_line_is_refused_naming_the_line(tmp_path):
    listing = tmp_path / "list.txt"
    listing.write_bytes(b"a.jpg\n" + b"x" * 100000)
    refused_at_once(overlay_config(listing), "RuntimeError",
                    f"image list {listing}: line 2 of the image list is longer than 4096 bytes")


# --- dict configs: shared references, cycles, size ----------------------------------

# 7 levels of 9 references each (a 9^7 = 4.8 M-string expansion) in 417 bytes.
BOMB = "\n".join(["a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"] + [
    f"{chr(97 + k)}: &{chr(97 + k)} [" + ",".join([f"*{chr(96 + k)}"] * 9) + "]"
    for k in range(1, 8)])


def test_a_billion_laughs_dict_is_refused_as_fast_as_the_same_yaml_file(tmp_path):
    bomb = yaml.safe_load(BOMB)
    # under an unknown top-level key: the unknown key, at once
    refused_at_once(f"{{'laughs': yaml.safe_load({BOMB!r})}}", "ValueError",
                    "laughs: unknown key. Known keys at the top level")
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        obsaug.Engine({"laughs": bomb})
    assert "laughs: unknown key" in str(info.value)
    # under a known key: the first wrong value, at once
    with pytest.raises(ValueError) as info:
        obsaug.Engine({"pool": {"sources": bomb["h"]}})
    assert "pool.sources[0]: expected a string, got a list" in str(info.value)
    assert time.monotonic() - start < 5
    # as a YAML file the same: the reference the dict is measured against
    path = tmp_path / "bomb.yaml"
    path.write_text("laughs:\n" + textwrap.indent(BOMB, "  ") + "\n")
    with pytest.raises(ValueError) as info:
        obsaug.Engine(path)
    assert "laughs: unknown key" in str(info.value)


def test_a_dict_config_that_contains_itself_is_refused():
    cyclic = {"frames": {"stack": 3}}
    cyclic["frames"]["again"] = cyclic
    with pytest.raises(ValueError) as info:
        obsaug.Engine(cyclic)
    assert "config frames.again: refers to a mapping or list that contains it" in str(info.value)
    loop = []
    loop.append(loop)
    with pytest.raises(ValueError) as info:
        obsaug.Engine({"pipeline": loop})
    assert "config pipeline[0]: refers to a mapping or list that contains it" in str(info.value)


def test_a_dict_config_with_too_many_values_is_refused_before_it_is_sent():
    # distinct objects (an interpolation-style expansion has no shared ids)
    huge = {"pool": {"sources": [str(k) for k in range(200_001)]}}
    start = time.monotonic()
    with pytest.raises(ValueError) as info:
        obsaug.Engine(huge)
    assert "config holds more than 100000 values" in str(info.value), str(info.value)
    assert time.monotonic() - start < 5


def test_shared_references_that_are_not_a_bomb_load_as_their_values():
    op = {"op": "shift", "pad": 4}
    shared = obsaug.Engine({"pipeline": [op, op]})
    plain = obsaug.Engine({"pipeline": [{"op": "shift", "pad": 4}, {"op": "shift", "pad": 4}]})
    assert shared.config == plain.config
    via_yaml = obsaug.Engine(yaml.safe_load("pipeline: [&s {op: shift, pad: 4}, *s]"))
    assert via_yaml.config == plain.config


# --- engine states out of their ranges --------------------------------------------------

def _sync_engine():
    return obsaug.Engine({"frames": {"stack": 1, "channels": 3, "height": 16, "width": 16},
                          "pipeline": [{"op": "overlay", "alpha": 0.5}],
                          "pool": {"size": 4, "sources": [PHOTOS],
                                   "refresh": {"mode": "sync", "per_call": 1}}})


@pytest.mark.parametrize("edit, words", [
    (lambda s: s.update(pool_stamp=2**62 + 1), ["next_stamp 4611686018427387905 is beyond 2^62"]),
    (lambda s: s.update(pool_serial=2**64 - 1), ["next_serial 18446744073709551615 is beyond 2^62"]),
    (lambda s: s.update(pool_stamp=1), ["next_stamp 1 is below the pool's 4 slots"]),
    (lambda s: s.update(pool_stamp=s["pool_serial"] + 1), ["is beyond next_serial"]),
    (lambda s: s.update(pool_calls=2**61), ["calls 2305843009213693952 times the pool's 4 slots "
                                            "passes 2^62"]),
    (lambda s: s["pool_slots"].__setitem__(2, s["pool_serial"]),
     ["slot 2 holds serial", "not one decoded before the cursor's next_serial"]),
], ids=["stamp", "serial", "stamp below the fill", "stamp past serial", "calls", "slot serial"])
def test_an_engine_state_out_of_its_ranges_is_refused_and_changes_nothing(edit, words):
    engine = _sync_engine()
    engine.augment(torch.zeros(2, 3, 16, 16, dtype=torch.uint8))
    state = engine.state_dict()
    bad = {k: (list(v) if isinstance(v, list) else v) for k, v in state.items()}
    edit(bad)
    with pytest.raises(ValueError) as info:
        engine.load_state_dict(bad)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert engine.state_dict() == state  # left as it was


def test_an_async_engine_refuses_a_cursor_out_of_its_range_too():
    engine = obsaug.Engine({"frames": {"stack": 1, "channels": 3, "height": 16, "width": 16},
                            "pipeline": [{"op": "overlay", "alpha": 0.5}],
                            "pool": {"size": 4, "sources": [PHOTOS],
                                     "refresh": {"mode": "async", "threads": 1}}})
    state = engine.state_dict()
    with pytest.raises(ValueError) as info:
        engine.load_state_dict({**state, "pool_stamp": 0})
    assert "DistractorPool::set_cursor: the cursor is outside its range: next_stamp 0 is below " \
           "the pool's 4 slots" in str(info.value)
    engine.close()
