"""Bad inputs raise ValueError / TypeError / RuntimeError with a message naming the argument."""
import re

import pytest
import torch

import obsaug

ops = obsaug.ops
ERRORS = (ValueError, TypeError, RuntimeError)
S = dict(seed=0, step=0)


def obs(b=2, sc=9, h=84, w=84, dtype=torch.uint8):
    return torch.zeros(b, sc, h, w, dtype=dtype)


def pool(p=4, c=3, h=84, w=84, dtype=torch.uint8):
    return torch.zeros(p, c, h, w, dtype=dtype)


CASES = [
    # name, call, substrings the message must contain (case-insensitive)
    ("int64 obs", lambda: ops.shift(obs(dtype=torch.int64), **S), ["obs", "uint8", "float32"]),
    ("int64 obs overlay", lambda: ops.overlay(obs(dtype=torch.int64), pool(), **S), ["obs", "uint8"]),
    ("int64 obs augment", lambda: ops.augment(obs(dtype=torch.int64), None, ops=[{"op": "shift"}], **S),
     ["obs", "uint8"]),
    ("float16 obs", lambda: ops.crop(obs(dtype=torch.float16), size=80, **S), ["obs", "float32"]),
    ("rank 3 obs", lambda: ops.shift(obs()[0], **S), ["obs", "4 dims"]),
    ("rank 3 obs augment", lambda: ops.augment(obs()[0], pool(), ops=[{"op": "overlay"}], **S),
     ["obs", "4 dims"]),
    ("channels not multiple of C", lambda: ops.overlay(obs(sc=8), pool(), **S), ["channels", "multiple", "3"]),
    ("channels not multiple of C (augment)",
     lambda: ops.augment(obs(sc=4), pool(), ops=[{"op": "shift"}, {"op": "overlay"}], **S),
     ["channels", "multiple"]),
    ("float pool", lambda: ops.overlay(obs(), pool(dtype=torch.float32), **S), ["pool", "uint8"]),
    ("rank 3 pool", lambda: ops.overlay(obs(), pool()[0], **S), ["pool", "[P, C, H, W]"]),
    ("pool 64x64, frames 84x84", lambda: ops.overlay(obs(), pool(h=64, w=64), **S),
     ["pool", "64x64", "84x84"]),
    ("pool 84x84, frames cropped to 80",
     lambda: ops.augment(obs(), pool(), ops=[{"op": "crop", "size": 80}, {"op": "overlay"}], **S),
     ["pool", "84x84", "80x80"]),
    ("empty pool", lambda: ops.overlay(obs(), pool(p=0), **S), ["pool", "empty"]),
    ("crop larger than input", lambda: ops.crop(obs(), size=85, **S), ["crop", "85x85", "larger"]),
    ("crop larger in one axis", lambda: ops.augment(obs(), None, ops=[{"op": "crop", "size": (90, 10)}], **S),
     ["crop", "90x10", "84x84"]),
    ("crop size 0", lambda: ops.crop(obs(), size=0, **S), ["size"]),
    ("pad < 0", lambda: ops.shift(obs(), pad=-1, **S), ["pad", "-1"]),
    ("pad < 0 (augment)", lambda: ops.augment(obs(), None, ops=[{"op": "shift", "pad": -2}], **S),
     ["pad", "-2"]),
    ("pad too large", lambda: ops.shift(obs(), pad=2**20 + 1, **S), ["pad"]),
    ("op_index 65536", lambda: ops.shift(obs(), op_index=65536, **S), ["index", "65536"]),
    ("op_index negative", lambda: ops.crop(obs(), size=8, op_index=-1, **S), ["index"]),
    ("bad padding", lambda: ops.shift(obs(), padding="reflect", **S), ["padding", "reflect"]),
    ("alpha > 1", lambda: ops.overlay(obs(), pool(), alpha=1.5, **S), ["alpha", "1.5"]),
    ("alpha < 0", lambda: ops.overlay(obs(), pool(), alpha=-0.1, **S), ["alpha", "-0.1"]),
    ("alpha NaN", lambda: ops.overlay(obs(), pool(), alpha=float("nan"), **S), ["alpha", "nan"]),
    ("alpha inf (augment)", lambda: ops.augment(obs(), pool(), ops=[{"op": "overlay", "alpha": float("inf")}], **S),
     ["alpha"]),
    ("alpha_max < alpha", lambda: ops.overlay(obs(), pool(), alpha=0.5, alpha_max=0.4, **S), ["alpha_max", "0.4"]),
    ("alpha_max > 1", lambda: ops.overlay(obs(), pool(), alpha=0.5, alpha_max=1.2, **S), ["alpha_max"]),
    ("alpha_max NaN", lambda: ops.overlay(obs(), pool(), alpha=0.1, alpha_max=float("nan"), **S),
     ["alpha_max", "nan"]),
    ("unknown op name", lambda: ops.augment(obs(), pool(), ops=[{"op": "rotate"}], **S), ["op", "rotate"]),
    ("unknown op name (raw schema)", lambda: torch.ops.obsaug.augment(obs(), pool(), "op=rotate", 0, 0),
     ["op", "rotate"]),
    ("unknown key", lambda: ops.augment(obs(), pool(), ops=[{"op": "shift", "pda": 4}], **S), ["unknown", "pda"]),
    ("unknown key (raw schema)", lambda: torch.ops.obsaug.augment(obs(), pool(), "op=shift,pda=4", 0, 0),
     ["unknown", "pda"]),
    ("key of another op", lambda: ops.augment(obs(), pool(), ops=[{"op": "shift", "alpha": 0.4}], **S),
     ["alpha"]),
    ("op dict without op", lambda: ops.augment(obs(), pool(), ops=[{"pad": 4}], **S), ["op"]),
    ("ops not a list", lambda: ops.augment(obs(), pool(), ops={"op": "shift"}, **S), ["ops"]),
    ("overlay without pool", lambda: ops.augment(obs(), None, ops=[{"op": "shift"}, {"op": "overlay"}], **S),
     ["pool"]),
    ("in place with a shrinking crop",
     lambda: ops.augment(obs(), None, ops=[{"op": "crop", "size": 80}], inplace=True, **S),
     ["in-place", "80x80"]),
    ("in place with float output",
     lambda: ops.augment(obs(), None, ops=[{"op": "shift"}], inplace=True, out_dtype=torch.float32, **S),
     ["inplace", "out_dtype"]),
    ("seed negative", lambda: ops.shift(obs(), seed=-1, step=0), ["seed"]),
    ("seed 2**64", lambda: ops.shift(obs(), seed=2**64, step=0), ["seed", "2**64"]),
    ("step negative", lambda: ops.crop(obs(), seed=0, step=-5, size=8), ["step"]),
    ("step 2**64", lambda: ops.overlay(obs(), pool(), seed=0, step=2**64), ["step"]),
    ("seed not an int", lambda: ops.augment(obs(), None, ops=[], seed=1.5, step=0), ["seed"]),
    ("out_dtype uint8 with float obs",
     lambda: ops.augment(obs(dtype=torch.float32), None, ops=[{"op": "shift"}], out_dtype=torch.uint8, **S),
     ["out_dtype", "uint8"]),
    ("out_dtype int64", lambda: ops.augment(obs(), None, ops=[], out_dtype=torch.int64, **S), ["out_dtype"]),
    ("scale with uint8 output", lambda: ops.augment(obs(), None, ops=[], scale=2.0, **S), ["scale"]),
    ("NaN scale", lambda: ops.augment(obs(), None, ops=[], out_dtype=torch.float32, scale=float("nan"), **S),
     ["scale"]),
    ("crop size with 3 values", lambda: ops.crop(obs(), size=(1, 2, 3), **S), ["size"]),
]


@pytest.mark.parametrize("name,call,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises(name, call, words):
    with pytest.raises(ERRORS) as info:
        call()
    message = str(info.value).lower()
    for word in words:
        assert word.lower() in message, f"{name}: {word!r} not in {str(info.value)!r}"


def test_type_errors_are_typeerrors():
    with pytest.raises(TypeError):
        ops.shift(obs(dtype=torch.int64), **S)
    with pytest.raises(TypeError):
        ops.overlay(obs(), pool(dtype=torch.float32), **S)


def test_value_errors_are_valueerrors():
    with pytest.raises(ValueError, match=re.escape("alpha")):
        ops.overlay(obs(), pool(), alpha=2.0, **S)
    with pytest.raises(ValueError, match="seed"):
        ops.shift(obs(), seed=2**64, step=0)


def test_failed_inplace_call_leaves_obs_untouched():
    x = torch.arange(2 * 9 * 84 * 84, dtype=torch.int64).remainder(256).to(torch.uint8).view(2, 9, 84, 84)
    before = x.clone()
    with pytest.raises(ERRORS):
        ops.augment(x, pool(h=64, w=64), ops=[{"op": "shift"}, {"op": "overlay"}], inplace=True, **S)
    with pytest.raises(ERRORS):
        ops.overlay(x, pool(), alpha=3.0, inplace=True, **S)
    assert torch.equal(x, before)
