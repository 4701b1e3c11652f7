"""Hostile inputs to the Python API (issue 7 item 4): each call is a clear error
(the exception type obsaug raises, with a message naming the problem) or a
correct result (equal to the same call on ``.contiguous()`` or to
``reference.py``), never a crash, an out-of-bounds access or garbage.

test_errors.py covers the plain argument errors; this file covers NaN/inf,
sizes near the 32-bit limits (zero-stride views, never real allocations over
~1 MB in this process; the over-large ones run in a child with an address
space limit), empty tensors, strided layouts, devices, pools, gather indices
and ReplayBuffer arguments.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import obsaug
import reference
from conftest import random_obs, random_pool

ops = obsaug.ops
S = dict(seed=3, step=5)
ERRORS = (ValueError, TypeError, IndexError, RuntimeError)
NAN, INF = float("nan"), float("inf")
PHOTOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "data",
                      "photos")


def raises(exc, call, *words):
    """call() raises exc with every word (case-insensitive) in its message."""
    with pytest.raises(exc) as info:
        call()
    message = str(info.value).lower()
    for word in words:
        assert word.lower() in message, f"{word!r} not in {str(info.value)!r}"
    return info.value


def obs(b=2, sc=6, h=12, w=10, dtype=torch.uint8, seed=0):
    return random_obs((b, sc, h, w), dtype=dtype, seed=seed)


def pool(p=3, c=3, h=12, w=10, seed=1):
    return random_pool(p, c, h, w, seed=seed)


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
    raises((ValueError, TypeError), call, "alpha")


def test_alpha_boundaries_are_exact():
    o, p = obs(), pool()
    assert torch.equal(ops.overlay(o, p, alpha=-0.0, **S), o)
    assert torch.equal(ops.overlay(o, p, alpha=0.0, alpha_max=0.0, **S), o)
    for a, hi in [(1.0, None), (0.0, 1.0), (1e-300, None)]:
        want = reference.overlay(o, p, alpha=a, alpha_max=hi, **S)
        assert torch.equal(ops.overlay(o, p, alpha=a, alpha_max=hi, **S), want)


@pytest.mark.skipif(not hasattr(obsaug, "Engine") or not os.path.isdir(PHOTOS),
                    reason="no Engine or no data/photos")
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
    raises((ValueError, TypeError), lambda: ops.shift(obs(), **kw, **S), next(iter(kw)))


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
        cases["replay capacity 1e9"] = lambda: obsaug.ReplayBuffer(
            capacity=10**9, frame_shape=(1, 1, 1), frame_stack=1)
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


@pytest.mark.skipif(not hasattr(obsaug, "ReplayBuffer"), reason="no ReplayBuffer")
def test_replay_capacity_too_large_for_memory(huge_results):
    kind, message = huge_results["replay capacity 1e9"]
    assert kind in ("ValueError", "MemoryError") and "capacity" in message, (kind, message)


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
    raises((ValueError, RuntimeError), MIXED[name], "device")


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
    raises(TypeError, lambda: ops.crop(torch.zeros(shape, dtype=torch.uint8), size=2, **S), "4 dims")
    raises(TypeError, lambda: ops.overlay(obs(), torch.zeros(shape, dtype=torch.uint8), **S),
           "[P, C, H, W]")
    raises(TypeError, lambda: ops.gather_augment(torch.zeros(shape, dtype=torch.uint8),
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


@pytest.mark.parametrize("idx", [
    torch.zeros(2, 2, dtype=torch.int32), torch.zeros(2, 2), torch.zeros(2, 2, dtype=torch.bool),
    torch.zeros(4, dtype=torch.long), torch.zeros(1, 2, 2, dtype=torch.long),
    torch.tensor(0),
], ids=["int32", "float", "bool", "1-D", "3-D", "0-D"])
def test_gather_indices_of_the_wrong_dtype_or_rank(idx):
    raises(TypeError, lambda: ops.gather_augment(random_obs((5, 3, 12, 10)), idx, ops=[], **S),
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


# ------------------------------------------------------------------ ReplayBuffer

needs_replay = pytest.mark.skipif(not hasattr(obsaug, "ReplayBuffer"), reason="no ReplayBuffer")
RB_ARGS = dict(capacity=16, frame_shape=(3, 8, 8), frame_stack=3, action_shape=(2,))


def rb(**over):
    return obsaug.ReplayBuffer(**{**RB_ARGS, **over})


@needs_replay
@pytest.mark.parametrize("over,exc,words", [
    ({"capacity": 0}, ValueError, ["capacity", ">= 1"]),
    ({"capacity": -1}, ValueError, ["capacity"]),
    ({"capacity": 2**62}, ValueError, ["capacity", "too large"]),
    ({"capacity": 2**64}, TypeError, []),
    ({"frame_shape": (0, 8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, -8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (1, 3, 8, 8)}, ValueError, ["frame_shape"]),
    ({"frame_shape": (3, 2**20, 2**20)}, ValueError, ["too large"]),
    ({"frame_stack": 0}, ValueError, ["frame_stack"]),
    ({"frame_stack": -1}, ValueError, ["frame_stack"]),
    ({"n_step": 0}, ValueError, ["n_step"]),
    ({"n_step": -1}, ValueError, ["n_step"]),
    ({"gamma": NAN}, ValueError, ["gamma"]),
    ({"gamma": INF}, ValueError, ["gamma"]),
    ({"gamma": -0.1}, ValueError, ["gamma"]),
    ({"prioritized": True, "alpha": NAN}, ValueError, ["alpha"]),
    ({"prioritized": True, "beta": NAN}, ValueError, ["beta"]),
    ({"prioritized": True, "alpha": -1.0}, ValueError, ["alpha"]),
    ({"prioritized": True, "beta": INF}, ValueError, ["beta"]),
    ({"action_shape": (-1,)}, ValueError, ["action_shape"]),
    ({"device": "meta"}, ValueError, ["device", "meta"]),
], ids=repr)
def test_replay_constructor_arguments(over, exc, words):
    raises(exc, lambda: rb(**over), *words)


@needs_replay
def test_replay_capacity_1e15_is_a_clear_error():
    raises((ValueError, MemoryError), lambda: rb(capacity=10**15), "capacity")


def _filled(prioritized=True, n=6):
    buf = rb(prioritized=prioritized)
    frame = torch.zeros(3, 8, 8, dtype=torch.uint8)
    buf.add_first(frame)
    for i in range(n):
        buf.add(torch.zeros(2), 1.0, frame + i)
    return buf


@needs_replay
def test_replay_add_with_wrong_frames_changes_nothing():
    buf = _filled()
    before = (len(buf), buf.num_valid, buf.total_frames, buf.storage.clone())
    f = torch.zeros(3, 8, 8, dtype=torch.uint8)
    bad = {
        "float": (ValueError, f.float(), ["frame", "uint8"]),
        "int16": (ValueError, f.short(), ["frame", "uint8"]),
        "bool": (ValueError, f.bool(), ["frame", "uint8"]),
        "shape": (ValueError, f[:, :, :7], ["frame", "[3, 8, 8]"]),
        "2-D": (ValueError, f[0], ["frame"]),
        "5-D": (ValueError, f[None, None], ["frame"]),
    }
    for name, (exc, frame, words) in bad.items():
        raises(exc, lambda: buf.add(torch.zeros(2), 1.0, frame), *words)
        raises(exc, lambda: buf.add_first(frame), *words)
    raises(ValueError, lambda: buf.add(torch.zeros(3), 1.0, f), "action")
    raises((ValueError, NotImplementedError), lambda: buf.add(torch.zeros(2, device="meta"), 1.0, f),
           "meta")
    raises(ValueError, lambda: buf.add(torch.zeros(2), NAN, f), "reward")
    raises(ValueError, lambda: buf.add_first(torch.zeros(0, 3, 8, 8, dtype=torch.uint8)), "N = 0")
    assert (len(buf), buf.num_valid, buf.total_frames) == before[:3]
    assert torch.equal(buf.storage, before[3])
    # a strided frame is stored as its values
    buf.add(torch.zeros(2), 1.0, torch.arange(3 * 8 * 16, dtype=torch.int64).remainder(256)
            .to(torch.uint8).view(3, 8, 16)[..., ::2])
    assert len(buf) == before[0] + 1


@needs_replay
def test_replay_sample_sizes():
    buf = _filled()
    raises(ValueError, lambda: buf.sample(0), "batch size", ">= 1")
    raises(ValueError, lambda: buf.sample(-1), "batch size")
    raises(ValueError, lambda: buf.sample(10**12), "1000000000000", "4294967296")
    assert buf.sample(buf.num_valid + 5)["obs"].shape == (buf.num_valid + 5, 9, 8, 8)
    raises(TypeError, lambda: buf.sample(2**63))
    raises(TypeError, lambda: buf.sample(2.0), "batch_size")
    raises(ValueError, lambda: buf.sample(2, beta=NAN), "beta")
    raises(ValueError, lambda: rb().sample(1), "valid")
    assert buf.sample(buf.num_valid)["obs"].shape == (buf.num_valid, 9, 8, 8)


@needs_replay
def test_replay_update_priorities_bad_arguments_change_nothing():
    buf = _filled()
    idx = buf.sample(3)["indices"]
    calls = buf.sample_calls
    raises(ValueError, lambda: buf.update_priorities(idx, torch.ones(2)), "priorities", "K = 3")
    raises(ValueError, lambda: buf.update_priorities(idx[:1], torch.ones(3)), "priorities", "K = 1")
    raises(ValueError, lambda: buf.update_priorities(idx, torch.full((3,), NAN)), "finite")
    raises(ValueError, lambda: buf.update_priorities(idx, torch.full((3,), INF)), "finite")
    raises(ValueError, lambda: buf.update_priorities(idx, -torch.ones(3)), ">= 0")
    raises(IndexError, lambda: buf.update_priorities(torch.tensor([-1]), torch.ones(1)), "-1")
    raises(IndexError, lambda: buf.update_priorities(torch.tensor([16]), torch.ones(1)), "16")
    raises(ValueError, lambda: buf.update_priorities(torch.tensor([1.0]), torch.ones(1)), "indices")
    raises(ValueError, lambda: buf.update_priorities(idx[None], torch.ones(1, 3)), "indices")
    buf.update_priorities(torch.zeros(0, dtype=torch.long), torch.zeros(0))  # empty: a no-op
    # the rejected calls changed nothing: the same call counter gives the same sample
    again = _filled()
    again.sample(3)
    assert buf.sample_calls == calls == again.sample_calls
    assert torch.equal(buf.sample(4)["indices"], again.sample(4)["indices"])


@needs_replay
def test_replay_all_zero_priorities():
    buf = _filled()
    valid = buf.sample(buf.num_valid)["indices"].unique()
    buf.update_priorities(torch.arange(len(buf)), torch.zeros(len(buf)))
    try:
        batch = buf.sample(3)
    except ValueError as e:
        assert "priorit" in str(e).lower()
        return
    assert torch.isfinite(batch["weights"]).all()
    assert set(batch["indices"].tolist()) <= set(valid.tolist())


@needs_replay
@pytest.mark.parametrize("method", ["add", "add_first"])
def test_replay_meta_frame_is_rejected_before_anything_is_written(method):
    buf = _filled()
    before = (len(buf), buf.num_valid, buf.total_frames)
    frame = torch.empty(3, 8, 8, dtype=torch.uint8, device="meta")
    call = ((lambda: buf.add(torch.zeros(2), 1.0, frame)) if method == "add"
            else (lambda: buf.add_first(frame)))
    raises((ValueError, NotImplementedError), call, "meta")
    assert (len(buf), buf.num_valid, buf.total_frames) == before
