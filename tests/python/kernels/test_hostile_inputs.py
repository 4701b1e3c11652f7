"""Hostile inputs to the ops (obsaug.ops, torch.ops.obsaug): each call is a
clear error or a correct result (equal to the same call on ``.contiguous()``
or to ``reference.py``), never a crash, an out-of-bounds access or garbage.

An error is the one documented type for its kind of bad input (README,
"Errors"): TypeError for a wrong dtype or type, ValueError for a wrong value
or shape, IndexError for an index out of range; its message names the
argument, what is wrong and what would be right.

Covered: the plain argument errors of every op (the CASES table), NaN/inf,
sizes near the 32-bit limits (zero-stride views, never real allocations over
~1 MB in this process; the over-large ones run in a child with an address
space limit), empty tensors, strided layouts, devices, pools and gather
indices. The ReplayBuffer's hostile inputs are in
replay/test_replay_hostile_inputs.py.
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import obsaug
import reference
from conftest import PHOTOS, needs_engine, needs_replay, raises, random_obs, random_pool

ops = obsaug.ops
S = dict(seed=3, step=5)
NAN, INF = float("nan"), float("inf")




def obs(b=2, sc=6, h=12, w=10, dtype=torch.uint8, seed=0):
    return random_obs((b, sc, h, w), dtype=dtype, seed=seed)


def pool(p=3, c=3, h=12, w=10, seed=1):
    return random_pool(p, c, h, w, seed=seed)


# ------------------------------------------------------------------ plain argument errors

def zeros_obs(b=2, sc=9, h=84, w=84, dtype=torch.uint8):
    return torch.zeros(b, sc, h, w, dtype=dtype)


def zeros_pool(p=4, c=3, h=84, w=84, dtype=torch.uint8):
    return torch.zeros(p, c, h, w, dtype=dtype)


Z = dict(seed=0, step=0)
CASES = [
    # name, exception type, call, substrings the message must contain (case-insensitive)
    ("int64 obs", TypeError, lambda: ops.shift(zeros_obs(dtype=torch.int64), **Z),
     ["obs", "uint8", "float32", "int64"]),
    ("int64 obs overlay", TypeError, lambda: ops.overlay(zeros_obs(dtype=torch.int64), zeros_pool(), **Z),
     ["obs", "uint8"]),
    ("int64 obs augment", TypeError,
     lambda: ops.augment(zeros_obs(dtype=torch.int64), None, ops=[{"op": "shift"}], **Z), ["obs", "uint8"]),
    ("float16 obs", TypeError, lambda: ops.crop(zeros_obs(dtype=torch.float16), size=80, **Z),
     ["obs", "float32", "float16"]),
    ("rank 3 obs", ValueError, lambda: ops.shift(zeros_obs()[0], **Z), ["obs", "4 dims", "[9, 84, 84]"]),
    ("rank 3 obs augment", ValueError,
     lambda: ops.augment(zeros_obs()[0], zeros_pool(), ops=[{"op": "overlay"}], **Z), ["obs", "4 dims"]),
    ("channels not multiple of C", ValueError, lambda: ops.overlay(zeros_obs(sc=8), zeros_pool(), **Z),
     ["channels", "multiple", "3"]),
    ("channels not multiple of C (augment)", ValueError,
     lambda: ops.augment(zeros_obs(sc=4), zeros_pool(), ops=[{"op": "shift"}, {"op": "overlay"}], **Z),
     ["channels", "multiple"]),
    ("float pool", TypeError, lambda: ops.overlay(zeros_obs(), zeros_pool(dtype=torch.float32), **Z),
     ["pool", "uint8"]),
    ("rank 3 pool", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool()[0], **Z),
     ["pool", "[P, C, H, W]"]),
    ("pool 64x64, frames 84x84", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(h=64, w=64), **Z),
     ["pool", "64x64", "84x84"]),
    ("pool 84x84, frames cropped to 80", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"op": "crop", "size": 80}, {"op": "overlay"}],
                         **Z),
     ["pool", "84x84", "80x80"]),
    ("empty pool", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(p=0), **Z), ["pool", "empty"]),
    ("crop larger than input", ValueError, lambda: ops.crop(zeros_obs(), size=85, **Z),
     ["crop", "85x85", "larger"]),
    ("crop larger in one axis", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[{"op": "crop", "size": (90, 10)}], **Z),
     ["crop", "90x10", "84x84"]),
    ("crop size 0", ValueError, lambda: ops.crop(zeros_obs(), size=0, **Z), ["size"]),
    ("pad < 0", ValueError, lambda: ops.shift(zeros_obs(), pad=-1, **Z), ["pad", "-1"]),
    ("pad < 0 (augment)", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[{"op": "shift", "pad": -2}], **Z), ["pad", "-2"]),
    ("pad too large", ValueError, lambda: ops.shift(zeros_obs(), pad=2**20 + 1, **Z), ["pad"]),
    ("op_index 32768", ValueError, lambda: ops.shift(zeros_obs(), op_index=32768, **Z), ["index", "32768"]),
    ("op_index negative", ValueError, lambda: ops.crop(zeros_obs(), size=8, op_index=-1, **Z), ["index"]),
    ("bad padding", ValueError, lambda: ops.shift(zeros_obs(), padding="reflect", **Z),
     ["padding", "reflect"]),
    ("alpha > 1", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=1.5, **Z),
     ["alpha", "1.5"]),
    ("alpha < 0", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=-0.1, **Z),
     ["alpha", "-0.1"]),
    ("alpha NaN", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=float("nan"), **Z),
     ["alpha", "nan"]),
    ("alpha inf (augment)", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"op": "overlay", "alpha": float("inf")}], **Z),
     ["alpha"]),
    ("alpha_max < alpha", ValueError,
     lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=0.5, alpha_max=0.4, **Z), ["alpha_max", "0.4"]),
    ("alpha_max > 1", ValueError,
     lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=0.5, alpha_max=1.2, **Z), ["alpha_max"]),
    ("alpha_max NaN", ValueError,
     lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=0.1, alpha_max=float("nan"), **Z),
     ["alpha_max", "nan"]),
    ("unknown op name", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"op": "rotate90"}], **Z), ["op", "rotate90"]),
    ("unknown op name (raw schema)", ValueError,
     lambda: torch.ops.obsaug.augment(zeros_obs(), zeros_pool(), "op=rotate90", 0, 0), ["op", "rotate90"]),
    ("unknown key", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"op": "shift", "pda": 4}], **Z),
     ["unknown", "pda"]),
    ("unknown key (raw schema)", ValueError,
     lambda: torch.ops.obsaug.augment(zeros_obs(), zeros_pool(), "op=shift,pda=4", 0, 0),
     ["unknown", "pda"]),
    ("key of another op", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"op": "shift", "alpha": 0.4}], **Z), ["alpha"]),
    ("op dict without op", ValueError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops=[{"pad": 4}], **Z), ["op"]),
    ("ops not a list", TypeError,
     lambda: ops.augment(zeros_obs(), zeros_pool(), ops={"op": "shift"}, **Z), ["ops", "list"]),
    ("overlay without pool", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[{"op": "shift"}, {"op": "overlay"}], **Z), ["pool"]),
    ("in place with a shrinking crop", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[{"op": "crop", "size": 80}], inplace=True, **Z),
     ["in-place", "80x80"]),
    ("in place with float output", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[{"op": "shift"}], inplace=True, out_dtype=torch.float32,
                         **Z),
     ["inplace", "out_dtype"]),
    ("seed negative", ValueError, lambda: ops.shift(zeros_obs(), seed=-1, step=0), ["seed"]),
    ("seed 2**64", ValueError, lambda: ops.shift(zeros_obs(), seed=2**64, step=0), ["seed", "2**64"]),
    ("step negative", ValueError, lambda: ops.crop(zeros_obs(), seed=0, step=-5, size=8), ["step"]),
    ("step 2**64", ValueError, lambda: ops.overlay(zeros_obs(), zeros_pool(), seed=0, step=2**64), ["step"]),
    ("seed not an int", TypeError, lambda: ops.augment(zeros_obs(), None, ops=[], seed=1.5, step=0),
     ["seed", "float"]),
    ("out_dtype uint8 with float obs", TypeError,
     lambda: ops.augment(zeros_obs(dtype=torch.float32), None, ops=[{"op": "shift"}], out_dtype=torch.uint8,
                         **Z),
     ["out_dtype", "uint8"]),
    ("out_dtype int64", TypeError, lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.int64, **Z),
     ["out_dtype"]),
    ("scale with uint8 output", ValueError, lambda: ops.augment(zeros_obs(), None, ops=[], scale=2.0, **Z),
     ["scale"]),
    ("NaN scale", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.float32, scale=float("nan"), **Z),
     ["scale"]),
    ("crop size with 3 values", ValueError, lambda: ops.crop(zeros_obs(), size=(1, 2, 3), **Z), ["size"]),
    # float32 must hold scale, bias and every v * scale + bias (the config checks the same)
    ("scale beyond float32", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.float32, scale=1e308, **Z),
     ["scale", "beyond float32"]),
    ("scale rounding to 0", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.float32, scale=1e-50, **Z),
     ["scale", "rounds to 0 in float32"]),
    ("255 * scale + bias overflowing", ValueError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.float32, scale=1e36,
                         bias=3.3e38, **Z),
     ["overflow float32"]),
    ("gather_augment scale beyond float32", ValueError,
     lambda: ops.gather_augment(torch.zeros(4, 3, 8, 8, dtype=torch.uint8),
                                torch.zeros(2, 3, dtype=torch.int64), ops=[],
                                out_dtype=torch.float32, scale=1e39, **Z),
     ["beyond float32"]),
    # numbers and flags are typed as in a pipeline dict: no strings, no bools for numbers
    ("alpha a string", TypeError, lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha="0.5", **Z),
     ["alpha must be a number", "str"]),
    ("alpha a bool", TypeError, lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha=True, **Z),
     ["alpha must be a number", "bool"]),
    ("alpha_max a string", TypeError,
     lambda: ops.overlay(zeros_obs(), zeros_pool(), alpha_max="0.9", **Z), ["alpha_max"]),
    ("per_frame a string", TypeError,
     lambda: ops.overlay(zeros_obs(), zeros_pool(), per_frame="yes", **Z), ["per_frame"]),
    ("scale a string", TypeError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype=torch.float32, scale="0.5", **Z),
     ["scale must be a number"]),
    # tensors are tensors: an array, a list or None says how to make one
    ("obs a numpy array", TypeError,
     lambda: ops.shift(zeros_obs().numpy(), **Z), ["obs must be a torch.Tensor", "ndarray"]),
    ("obs None for a single op", TypeError, lambda: ops.flip(None, **Z),
     ["obs must be a torch.Tensor", "NoneType"]),
    ("pool an int", TypeError, lambda: ops.augment(zeros_obs(), 3, ops=[], **Z),
     ["pool must be a torch.Tensor or None"]),
    ("gather indices a list", TypeError,
     lambda: ops.gather_augment(torch.zeros(4, 3, 8, 8, dtype=torch.uint8), [[0, 1, 2]], ops=[],
                                **Z), ["indices must be a torch.Tensor", "list"]),
    ("out_dtype a string", TypeError,
     lambda: ops.augment(zeros_obs(), None, ops=[], out_dtype="float32", **Z),
     ["out_dtype must be a torch.dtype"]),
    ("shift padding not a string", TypeError,
     lambda: ops.shift(zeros_obs(), padding=5, **Z), ["padding must be 'replicate' or 'zeros'"]),
    ("crop center a string", TypeError,
     lambda: ops.crop(zeros_obs(), size=8, center="yes", **Z), ["center must be True or False"]),
    ("bias a string", TypeError,
     lambda: ops.gather_augment(torch.zeros(4, 3, 8, 8, dtype=torch.uint8),
                                torch.zeros(2, 3, dtype=torch.int64), ops=[],
                                out_dtype=torch.float32, bias="1", **Z),
     ["bias must be a number"]),
]


@pytest.mark.parametrize("name,exc,call,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises(name, exc, call, words):
    raises(exc, call, *words)


def test_numbers_and_flags_may_be_numpy_scalars_or_0dim_tensors():
    import numpy as np
    o, p = torch.randint(0, 256, (2, 9, 8, 8), dtype=torch.uint8), torch.randint(
        0, 256, (3, 3, 8, 8), dtype=torch.uint8)
    want = ops.overlay(o, p, alpha=0.25, alpha_max=0.75, per_frame=True, **Z)
    for alpha, alpha_max, per_frame in ((np.float32(0.25), np.float64(0.75), np.True_),
                                        (torch.tensor(0.25), torch.tensor(0.75),
                                         torch.tensor(True))):
        got = ops.overlay(o, p, alpha=alpha, alpha_max=alpha_max, per_frame=per_frame, **Z)
        assert torch.equal(got, want)
    want = ops.augment(o, None, ops=[], out_dtype=torch.float32, scale=0.5, bias=-1.0, **Z)
    got = ops.augment(o, None, ops=[], out_dtype=torch.float32, scale=torch.tensor(0.5),
                      bias=np.int64(-1), **Z)
    assert torch.equal(got, want)


def test_type_errors_are_typeerrors():
    with pytest.raises(TypeError):
        ops.shift(zeros_obs(dtype=torch.int64), **Z)
    with pytest.raises(TypeError):
        ops.overlay(zeros_obs(), zeros_pool(dtype=torch.float32), **Z)


def test_value_errors_are_valueerrors():
    with pytest.raises(ValueError, match=re.escape("alpha")):
        ops.overlay(zeros_obs(), zeros_pool(), alpha=2.0, **Z)
    with pytest.raises(ValueError, match="seed"):
        ops.shift(zeros_obs(), seed=2**64, step=0)


def test_failed_inplace_call_leaves_obs_untouched():
    x = torch.arange(2 * 9 * 84 * 84, dtype=torch.int64).remainder(256).to(torch.uint8).view(2, 9, 84, 84)
    before = x.clone()
    raises(ValueError, lambda: ops.augment(x, zeros_pool(h=64, w=64), ops=[{"op": "shift"}, {"op": "overlay"}],
                                           inplace=True, **Z), "64x64", "84x84")
    raises(ValueError, lambda: ops.overlay(x, zeros_pool(), alpha=3.0, inplace=True, **Z), "alpha", "3")
    assert torch.equal(x, before)


# ------------------------------------------------------------------ alpha

BAD_ALPHA = [NAN, INF, -INF, -0.25, 1.5, -1e-300]


@pytest.mark.parametrize("alpha", BAD_ALPHA, ids=repr)
def test_bad_alpha_every_entry(alpha):
    o, p = obs(), pool()
    raises(ValueError, lambda: ops.overlay(o, p, alpha=alpha, **S), "alpha")
    raises(ValueError, lambda: ops.overlay(o, p, alpha=alpha, inplace=True, **S), "alpha")
    raises(ValueError, lambda: ops.augment(o, p, ops=[{"op": "shift"}, {"op": "overlay", "alpha": alpha}],
                                           **S), "op 1 (overlay)", "alpha")
    raises(ValueError, lambda: ops.augment(o, p, ops=[{"op": "overlay", "alpha": alpha}], inplace=True,
                                           **S), "alpha")
    raises(ValueError, lambda: torch.ops.obsaug.overlay(o, p, 0, 0, alpha), "alpha")
    assert torch.equal(o, obs()), "a rejected call wrote obs"


@pytest.mark.parametrize("alpha_max", [NAN, INF, -INF, -0.5, 0.1, 1.0000001], ids=repr)
def test_bad_alpha_max_every_entry(alpha_max):
    o, p = obs(), pool()
    raises(ValueError, lambda: ops.overlay(o, p, alpha=0.2, alpha_max=alpha_max, **S), "alpha_max")
    raises(ValueError, lambda: ops.augment(o, p, ops=[{"op": "overlay", "alpha": 0.2,
                                                       "alpha_max": alpha_max}], **S), "alpha_max")


@pytest.mark.parametrize("value", [
    "nan", None, True, [0.5],
    "0.5",
], ids=repr)
def test_alpha_of_the_wrong_type_in_op_dicts(value):
    # Strings, None, bools and lists are not numbers: an error.
    call = lambda: ops.augment(obs(), pool(), ops=[{"op": "overlay", "alpha": value}], **S)  # noqa: E731
    raises(TypeError, call, "alpha must be a number")


def test_alpha_boundaries_are_exact():
    o, p = obs(), pool()
    assert torch.equal(ops.overlay(o, p, alpha=-0.0, **S), o)
    assert torch.equal(ops.overlay(o, p, alpha=0.0, alpha_max=0.0, **S), o)
    for a, hi in [(1.0, None), (0.0, 1.0), (1e-300, None)]:
        want = reference.overlay(o, p, alpha=a, alpha_max=hi, **S)
        assert torch.equal(ops.overlay(o, p, alpha=a, alpha_max=hi, **S), want)


@needs_engine
@pytest.mark.parametrize("overlay", [
    {"alpha": NAN}, {"alpha": INF}, {"alpha": -0.5}, {"alpha": 1.5},
    {"alpha": 0.2, "alpha_max": NAN}, {"alpha": 0.2, "alpha_max": INF},
    {"alpha": 0.2, "alpha_max": 0.1}, {"alpha": 0.2, "alpha_max": 2.0},
], ids=repr)
def test_bad_alpha_in_an_engine_dict(overlay):
    config = {"seed": 0, "frames": {"stack": 2, "channels": 3, "height": 12, "width": 10},
              "pipeline": [{"op": "shift", "pad": 2}, {"op": "overlay", **overlay}],
              "pool": {"size": 2, "sources": [PHOTOS], "refresh": {"threads": 0}}}
    raises(ValueError, lambda: obsaug.Engine(config), "pipeline[1].alpha")


# ------------------------------------------------------------------ sizes near the limits

def test_frames_beyond_2_30_are_refused_before_any_copy():
    one = torch.zeros(1, 1, 1, 1, dtype=torch.uint8)
    raises(ValueError, lambda: ops.shift(one.expand(1, 1, 1, 2**30 + 1), **S), "1x1073741825")
    raises(ValueError, lambda: ops.crop(one.expand(4, 3, 2**31, 1), size=1, **S), "2147483648x1")
    raises(ValueError, lambda: ops.augment(one.expand(1, 1, 2**40, 2**20), None, ops=[], **S),
           "obs frames")
    raises(ValueError, lambda: ops.gather_augment(one.expand(1, 1, 2**31, 1),
                                                  torch.zeros(2, 3, dtype=torch.long), ops=[], **S),
           "2147483648x1")


@pytest.mark.parametrize("size", [0, -1, (0, 4), (4, -4), 13, (12, 11), 2**31, 2**32 + 4, (2**63 - 1, 1)],
                         ids=repr)
def test_crop_sizes_outside_the_frame(size):
    raises(ValueError, lambda: ops.crop(obs(), size=size, **S), "size")
    raises(ValueError, lambda: ops.augment(obs(), None, ops=[{"op": "crop", "size": size}], **S),
           "size")


@pytest.mark.parametrize("pad", [-1, 2**20 + 1, 2**31, 2**63 - 1])
def test_pad_out_of_range(pad):
    raises(ValueError, lambda: ops.shift(obs(), pad=pad, **S), "pad", str(pad))
    raises(ValueError, lambda: ops.augment(obs(), None, ops=[{"op": "shift", "pad": pad}], **S), "pad")


@pytest.mark.parametrize("kw", [{"pad": 2**64}, {"op_index": 2**63}], ids=repr)
def test_int_arguments_beyond_int64(kw):
    raises(ValueError, lambda: ops.shift(obs(), **kw, **S), next(iter(kw)), "must fit in int64")


@pytest.mark.parametrize("h,w", [(1, 1), (1, 9), (9, 1), (2, 33), (3, 7)])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_tiny_frames_and_pads_larger_than_the_frame(h, w, dtype):
    o = obs(3, 2, h, w, dtype=dtype, seed=h * 100 + w)
    for pad, padding in [(1, "replicate"), (40, "zeros"), (2**20, "replicate"), (2**20, "zeros")]:
        pipe = [{"op": "shift", "pad": pad, "padding": padding}, {"op": "crop", "size": (h, 1)},
                {"op": "shift", "pad": 3, "padding": padding}]
        assert torch.equal(ops.augment(o, None, ops=pipe, **S),
                           reference.augment(o, None, ops=pipe, **S)), (pad, padding)
        x = o.clone()
        keep = [{"op": "shift", "pad": pad, "padding": padding}]
        ops.augment(x, None, ops=keep, inplace=True, **S)
        assert torch.equal(x, reference.augment(o, None, ops=keep, **S)), ("in place", pad, padding)


_CHILD = textwrap.dedent("""
    import json, resource, sys, torch
    sys.path.insert(0, sys.argv[1])
    import obsaug
    ops = obsaug.ops
    def vm_bytes():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    limit = vm_bytes() + (1536 << 20)          # what is mapped now + 1.5 GB
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    one = torch.zeros(1, 1, 1, 1, dtype=torch.uint8)
    cases = {
        # 4 GiB and 6.4 GB zero-stride views: a copy cannot fit under the limit
        "crop": lambda: ops.crop(one.expand(1, 1, 65536, 65536), size=8, seed=0, step=0),
        "augment float": lambda: ops.augment(one.expand(1, 3, 46341, 46341), None,
                                             ops=[{"op": "crop", "size": 4}], seed=0, step=0,
                                             out_dtype=torch.float32),
        "inplace": lambda: ops.augment(one.expand(1, 3, 46341, 46341), None, ops=[{"op": "shift"}],
                                       inplace=True, seed=0, step=0),
    }
    if hasattr(obsaug, "ReplayBuffer"):
        # 4 PiB of frames: more than any machine, refused before allocating
        cases["replay capacity 2^32 of 1 MiB frames"] = lambda: obsaug.ReplayBuffer(
            capacity=2**32, frame_shape=(1, 1024, 1024), frame_stack=1)
    out = {}
    for name, call in cases.items():
        try:
            r = call()
            out[name] = ["ok", list(r.shape) if isinstance(r, torch.Tensor) else None]
        except BaseException as e:
            out[name] = [type(e).__name__, str(e).splitlines()[0][:300]]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def huge_results():
    """Over-large calls, run in a child whose address space is capped at 1.5 GB over
    what it has mapped: an attempt to materialise them fails there instead of
    exhausting the machine."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(obsaug.__file__)))
    proc = subprocess.run([sys.executable, "-c", _CHILD, package], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_huge_zero_stride_views_fail_cleanly(huge_results):
    # Out of place, obsaug copies a non-contiguous obs (DESIGN.md section 2):
    # for a view of > 4 GiB that copy is refused by the allocator with a
    # RuntimeError that names the size, and nothing crashes.
    for name in ("crop", "augment float"):
        kind, message = huge_results[name]
        assert kind == "RuntimeError" and "allocate" in message, (name, kind, message)


def test_in_place_on_an_expanded_view_is_refused_before_copying(huge_results):
    kind, message = huge_results["inplace"]
    assert kind == "ValueError" and "share memory" in message, (kind, message)


@needs_replay
def test_replay_capacity_too_large_for_memory(huge_results):
    kind, message = huge_results["replay capacity 2^32 of 1 MiB frames"]
    assert kind == "ValueError" and "capacity 4294967296 needs" in message, (kind, message)
    assert "more than this machine" in message, message


# ------------------------------------------------------------------ empty tensors

@pytest.mark.parametrize("shape", [(0, 6, 12, 10), (2, 0, 12, 10), (0, 0, 12, 10)], ids=str)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_zero_batch_or_channels_give_empty_results(shape, dtype):
    o, p = torch.zeros(shape, dtype=dtype), pool()
    b, c = shape[:2]
    assert ops.shift(o, **S).shape == shape
    assert ops.crop(o, size=(3, 4), **S).shape == (b, c, 3, 4)
    assert ops.overlay(o, p, **S).shape == shape
    assert ops.overlay(o, p, inplace=True, **S) is o
    out = ops.augment(o, p, ops=[{"op": "shift"}, {"op": "overlay"}, {"op": "crop", "size": 5}],
                      out_dtype=torch.float32, scale=0.5, bias=1.0, **S)
    assert out.shape == (b, c, 5, 5) and out.dtype == torch.float32
    # argument errors are still reported on empty input
    raises(ValueError, lambda: ops.crop(o, size=13, **S), "13x13")
    raises(ValueError, lambda: ops.overlay(o, p[:0], **S), "P = 0")
    raises(ValueError, lambda: ops.overlay(o, p, alpha=NAN, **S), "alpha")


@pytest.mark.parametrize("shape", [(2, 3, 0, 10), (2, 3, 10, 0), (0, 3, 0, 0)], ids=str)
def test_zero_height_or_width_is_a_clear_error(shape):
    o = torch.zeros(shape, dtype=torch.uint8)
    for call in [lambda: ops.shift(o, **S), lambda: ops.crop(o, size=1, **S),
                 lambda: ops.overlay(o, torch.zeros(2, 3, *shape[2:], dtype=torch.uint8), **S),
                 lambda: ops.augment(o, None, ops=[], inplace=True, **S),
                 lambda: ops.gather_augment(torch.zeros(4, 3, *shape[2:], dtype=torch.uint8),
                                            torch.zeros(shape[0], 2, dtype=torch.long), ops=[], **S)]:
        raises(ValueError, call, "obs frames must be between 1x1")


def test_gather_with_no_samples_or_no_frames():
    storage, p = random_obs((5, 3, 12, 10)), pool()
    pipe = [{"op": "shift"}, {"op": "overlay"}]
    for s in (0, 1, 3):
        assert ops.gather_augment(storage, torch.zeros(0, s, dtype=torch.long), p, ops=pipe,
                                  **S).shape == (0, 3 * s, 12, 10)
    assert ops.gather_augment(storage[:0], torch.zeros(0, 2, dtype=torch.long), p, ops=pipe,
                              **S).shape == (0, 6, 12, 10)
    raises(IndexError, lambda: ops.gather_augment(storage[:0], torch.zeros(2, 2, dtype=torch.long),
                                                  p, ops=pipe, **S), "[0, 0)")
    raises(ValueError, lambda: ops.gather_augment(storage, torch.zeros(2, 0, dtype=torch.long), p,
                                                  ops=pipe, **S), "S >= 1")
    raises(ValueError, lambda: ops.gather_augment(storage[:, :0], torch.zeros(2, 2, dtype=torch.long),
                                                  ops=[], **S), "channel")


# ------------------------------------------------------------------ layouts

def _views(dtype):
    big = obs(4, 12, 24, 20, dtype=dtype, seed=11)
    hw = obs(2, 6, 10, 12, dtype=dtype, seed=12)
    small = obs(1, 6, 12, 10, dtype=dtype, seed=13)
    return {
        "stepped": big[::2, ::2, 1::2, ::2],
        "narrowed": big[1:3, 3:9, 5:17, 2:12],
        "transposed": hw.transpose(2, 3),
        "channels_last": small.expand(2, 6, 12, 10).contiguous(memory_format=torch.channels_last),
        "batch expanded": small.expand(2, 6, 12, 10),
        "frame expanded": obs(1, 1, 12, 10, dtype=dtype, seed=14).expand(2, 6, 12, 10),
    }


PIPE = [{"op": "shift", "pad": 3}, {"op": "overlay", "alpha": 0.3, "alpha_max": 0.8, "per_frame": True},
        {"op": "crop", "size": (9, 7)}, {"op": "shift", "pad": 1, "padding": "zeros"}]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
@pytest.mark.parametrize("name", ["stepped", "narrowed", "transposed", "channels_last",
                                  "batch expanded", "frame expanded"])
def test_non_contiguous_obs_equals_contiguous(name, dtype):
    view = _views(dtype)[name]
    dense, p = view.contiguous(), pool()
    p_strided = p.transpose(2, 3).contiguous().transpose(2, 3)
    assert not p_strided.is_contiguous()
    pairs = [
        (lambda x, q: ops.augment(x, q, ops=PIPE, **S)),
        (lambda x, q: ops.augment(x, q, ops=PIPE, out_dtype=torch.float32, scale=1 / 255, bias=-0.5, **S)),
        (lambda x, q: ops.shift(x, **S)),
        (lambda x, q: ops.crop(x, size=5, **S)),
        (lambda x, q: ops.overlay(x, q, alpha=0.6, **S)),
    ]
    for f in pairs:
        want = f(dense, p)
        assert torch.equal(f(view, p), want)
        assert torch.equal(f(view, p_strided), want)
    got, ref = ops.augment(dense, p, ops=PIPE, **S), reference.augment(dense, p, ops=PIPE, **S)
    # uint8 bit for bit; float32 blends within 1e-4 of float64 math (DESIGN.md section 3)
    assert torch.equal(got, ref) if dtype == torch.uint8 else torch.allclose(got, ref, atol=1e-3,
                                                                            rtol=0)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_in_place_on_non_contiguous_updates_the_original(dtype):
    keep = [{"op": "shift", "pad": 3}, {"op": "overlay", "alpha": 0.3, "alpha_max": 0.8},
            {"op": "shift", "pad": 1, "padding": "zeros"}]
    p = pool()
    base = obs(4, 12, 24, 20, dtype=dtype, seed=21)
    expected = base.clone()
    view = base[::2, ::2, 1::2, ::2]
    want = ops.augment(view.contiguous(), p, ops=keep, **S)
    expected[::2, ::2, 1::2, ::2] = want
    assert ops.augment(view, p, ops=keep, inplace=True, **S) is view
    assert torch.equal(view, want) and torch.equal(base, expected)

    hw = obs(2, 6, 10, 12, dtype=dtype, seed=22)
    t = hw.transpose(2, 3)
    want = ops.overlay(t.contiguous(), p, alpha=0.7, **S)
    ops.overlay(t, p, alpha=0.7, inplace=True, **S)
    assert torch.equal(hw.transpose(2, 3), want)

    cl = obs(2, 6, 12, 10, dtype=dtype, seed=23).contiguous(memory_format=torch.channels_last)
    want = ops.augment(cl.contiguous(), p, ops=keep, **S)
    ops.augment(cl, p, ops=keep, inplace=True, **S)
    assert torch.equal(cl, want) and cl.is_contiguous(memory_format=torch.channels_last)


def test_in_place_on_an_expanded_obs_is_refused():
    small = obs(1, 6, 12, 10)
    before = small.clone()
    raises(ValueError, lambda: ops.augment(small.expand(3, 6, 12, 10), None, ops=[{"op": "shift"}],
                                           inplace=True, **S), "share memory", "clone()")
    raises(ValueError, lambda: ops.overlay(small.expand(3, 6, 12, 10), pool(), inplace=True, **S),
           "share memory")
    assert torch.equal(small, before)


def test_pool_aliasing_obs_in_place_equals_out_of_place():
    o = obs(4, 3, 12, 10, seed=41)
    pipe = [{"op": "shift", "pad": 2}, {"op": "overlay", "alpha": 0.4, "alpha_max": 0.9}]
    x = o.clone()
    ops.augment(x, x, ops=pipe, inplace=True, **S)
    assert torch.equal(x, ops.augment(o, o.clone(), ops=pipe, **S))
    y = o.clone()
    ops.overlay(y, y[2:], alpha=1.0, inplace=True, **S)
    assert torch.equal(y, ops.overlay(o, o[2:].clone(), alpha=1.0, **S))


# ------------------------------------------------------------------ devices, dtypes, ranks

def _meta(*shape, dtype=torch.uint8):
    return torch.empty(*shape, dtype=dtype, device="meta")


def test_meta_obs_gives_a_meta_result_of_the_right_shape():
    # The fake kernels serve meta tensors (torch.compile tracing): shape only.
    out = ops.augment(_meta(2, 6, 12, 10), _meta(3, 3, 8, 8), ops=[{"op": "crop", "size": 8},
                                                                  {"op": "overlay"}], **S)
    assert out.device.type == "meta" and out.shape == (2, 6, 8, 8)
    assert ops.shift(_meta(2, 6, 12, 10, dtype=torch.float32), **S).shape == (2, 6, 12, 10)


def test_meta_obs_with_bad_arguments_raises_like_the_real_kernel():
    raises(ValueError, lambda: ops.crop(_meta(2, 6, 12, 10), size=90, **S), "crop")


MIXED = {
    "overlay: cpu obs, meta pool": lambda: ops.overlay(obs(), _meta(3, 3, 12, 10), **S),
    "augment: cpu obs, meta pool": lambda: ops.augment(obs(), _meta(3, 3, 12, 10),
                                                       ops=[{"op": "overlay"}], **S),
    "overlay_: cpu obs, meta pool": lambda: ops.overlay(obs(), _meta(3, 3, 12, 10), inplace=True,
                                                        **S),
    "gather: cpu storage, meta indices": lambda: ops.gather_augment(
        random_obs((5, 3, 12, 10)), _meta(2, 2, dtype=torch.long), ops=[], **S),
}


@pytest.mark.parametrize("name", list(MIXED))
def test_meta_tensor_among_cpu_arguments_is_an_error(name):
    raises(ValueError, MIXED[name], "same device", "got meta")


@pytest.mark.parametrize("dtype", [torch.int16, torch.float64, torch.bool, torch.float16, torch.int8])
def test_wrong_dtypes(dtype):
    o, p = obs(), pool()
    raises(TypeError, lambda: ops.shift(o.to(dtype), **S), "obs", "uint8")
    raises(TypeError, lambda: ops.augment(o.to(dtype), p, ops=[{"op": "overlay"}], inplace=True, **S),
           "obs")
    raises(TypeError, lambda: ops.overlay(o, p.to(dtype), **S), "pool", "uint8")
    raises(TypeError, lambda: ops.gather_augment(random_obs((5, 3, 12, 10)).to(dtype),
                                                 torch.zeros(2, 2, dtype=torch.long), ops=[], **S),
           "storage")


@pytest.mark.parametrize("shape", [(6, 12, 10), (1, 2, 6, 12, 10), (12,)], ids=str)
def test_wrong_ranks(shape):
    raises(ValueError, lambda: ops.crop(torch.zeros(shape, dtype=torch.uint8), size=2, **S), "4 dims")
    raises(ValueError, lambda: ops.overlay(obs(), torch.zeros(shape, dtype=torch.uint8), **S),
           "[P, C, H, W]")
    raises(ValueError, lambda: ops.gather_augment(torch.zeros(shape, dtype=torch.uint8),
                                                 torch.zeros(2, 2, dtype=torch.long), ops=[], **S),
           "storage")


# ------------------------------------------------------------------ pools

def test_pools_of_the_wrong_size():
    o = obs()  # [2, 6, 12, 10]
    raises(ValueError, lambda: ops.overlay(o, pool(p=0), **S), "P = 0")
    raises(ValueError, lambda: ops.overlay(o, pool(c=4), **S), "multiple", "C = 4")
    raises(ValueError, lambda: ops.overlay(o, pool(c=0), **S), "C = 0")
    raises(ValueError, lambda: ops.overlay(o, pool(h=12, w=11), **S), "12x11", "12x10")
    raises(ValueError, lambda: ops.overlay(o, pool(h=0, w=0), **S), "0x0")
    raises(ValueError, lambda: ops.augment(o, pool(), ops=[{"op": "crop", "size": 8}, {"op": "overlay"}],
                                           **S), "op 1 (overlay)", "8x8")
    raises(TypeError, lambda: ops.overlay(o, pool().float(), **S), "pool", "uint8")
    # correct results for the legal odd ones: a grayscale pool on RGB stacks, P = 1
    for q, kw in [(pool(c=1), dict(per_frame=True)), (pool(p=1), dict(alpha_max=1.0))]:
        assert torch.equal(ops.overlay(o, q, alpha=0.5, **kw, **S),
                           reference.overlay(o, q, alpha=0.5, **kw, **S))


# ------------------------------------------------------------------ gather indices

@pytest.mark.parametrize("bad", [-1, 5, -2**63, 2**63 - 1])
def test_gather_indices_outside_the_storage(bad):
    storage = random_obs((5, 3, 12, 10))
    idx = torch.zeros(3, 2, dtype=torch.long)
    idx[1, 1] = bad
    raises(IndexError, lambda: ops.gather_augment(storage, idx, ops=[{"op": "shift"}], **S),
           "[0, 5)", str(bad))


@pytest.mark.parametrize("idx,exc", [
    (torch.zeros(2, 2, dtype=torch.int32), TypeError), (torch.zeros(2, 2), TypeError),
    (torch.zeros(2, 2, dtype=torch.bool), TypeError),
    (torch.zeros(4, dtype=torch.long), ValueError), (torch.zeros(1, 2, 2, dtype=torch.long), ValueError),
    (torch.tensor(0), ValueError),
], ids=["int32", "float", "bool", "1-D", "3-D", "0-D"])
def test_gather_indices_of_the_wrong_dtype_or_rank(idx, exc):
    raises(exc, lambda: ops.gather_augment(random_obs((5, 3, 12, 10)), idx, ops=[], **S),
           "indices", "int64 [B, S]")


def test_gather_strided_indices_and_storage_equal_contiguous():
    p = pool()
    pipe = [{"op": "shift", "pad": 2}, {"op": "overlay", "alpha": 0.25, "alpha_max": 0.75,
                                        "per_frame": True}]
    storage = random_obs((10, 6, 24, 10))[::2, 1::2, ::2]
    assert not storage.is_contiguous()
    idx = torch.tensor([[0, 4, 1, 3], [2, 2, 4, 0]]).t()
    assert not idx.is_contiguous()
    want = ops.gather_augment(storage.contiguous(), idx.contiguous(), p, ops=pipe, **S)
    assert torch.equal(ops.gather_augment(storage, idx, p, ops=pipe, **S), want)
    gathered = storage[idx.reshape(-1)].reshape(4, 6, 12, 10)
    assert torch.equal(want, ops.augment(gathered, p, ops=pipe, **S))
    assert torch.equal(want, reference.augment(gathered, p, ops=pipe, **S))
    idx_e = torch.tensor([[3, 1]]).expand(5, 2)
    cl = storage.contiguous(memory_format=torch.channels_last)
    assert torch.equal(ops.gather_augment(cl, idx_e, p, ops=pipe, **S),
                       ops.gather_augment(storage.contiguous(), idx_e.contiguous(), p, ops=pipe, **S))


def test_gather_pool_mismatches():
    storage, idx = random_obs((5, 3, 12, 10)), torch.zeros(2, 2, dtype=torch.long)
    ov = [{"op": "overlay"}]
    raises(ValueError, lambda: ops.gather_augment(storage, idx, pool(c=1), ops=ov, **S), "channels")
    raises(ValueError, lambda: ops.gather_augment(storage, idx, pool(h=13), ops=ov, **S), "13x10")
    raises(ValueError, lambda: ops.gather_augment(storage, idx, pool(p=0), ops=ov, **S), "P = 0")
    raises(ValueError, lambda: ops.gather_augment(storage, idx, None, ops=ov, **S), "pool")
