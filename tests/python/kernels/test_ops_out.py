"""out= on every obsaug.ops function: the result lands in the caller's tensor
(equal to the fresh result), the out= torch ops pass opcheck and compile, and
an out that does not fit is refused with one exception type per fault, before
anything is written."""
import pytest
import torch

import obsaug
from conftest import random_obs, random_pool

ops = obsaug.ops
O = torch.ops.obsaug
SEED, STEP = 7, 11
PIPE = [{"op": "shift", "pad": 2}, {"op": "overlay", "alpha": 0.5}, {"op": "crop", "size": (6, 7)}]

# Each case: (name, call(obs, pool, **kw) -> result); kw carries out= or nothing.
SINGLE_OPS = {
    "shift": lambda x, p, **kw: ops.shift(x, seed=SEED, step=STEP, pad=3, padding="zeros", **kw),
    "crop": lambda x, p, **kw: ops.crop(x, seed=SEED, step=STEP, size=(5, 7), **kw),
    "overlay": lambda x, p, **kw: ops.overlay(x, p, seed=SEED, step=STEP, alpha=0.3,
                                              alpha_max=0.9, per_frame=True, **kw),
    "augment": lambda x, p, **kw: ops.augment(x, p, ops=PIPE, seed=SEED, step=STEP, **kw),
    "augment-f32-out": lambda x, p, **kw: ops.augment(x, p, ops=PIPE, seed=SEED, step=STEP,
                                                      out_dtype=torch.float32, scale=1 / 255,
                                                      bias=-0.5, **kw),
    "flip": lambda x, p, **kw: ops.flip(x, seed=SEED, step=STEP, p=0.7, **kw),
    "translate": lambda x, p, **kw: ops.translate(x, seed=SEED, step=STEP, size=(10, 12), **kw),
    "cutout": lambda x, p, **kw: ops.cutout(x, seed=SEED, step=STEP, min=2, max=5, fill="color",
                                            **kw),
    "grayscale": lambda x, p, **kw: ops.grayscale(x, seed=SEED, step=STEP, p=0.6, **kw),
    "color_jitter": lambda x, p, **kw: ops.color_jitter(x, seed=SEED, step=STEP, **kw),
    "random_conv": lambda x, p, **kw: ops.random_conv(x, seed=SEED, step=STEP, **kw),
}


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32], ids=["u8", "f32"])
@pytest.mark.parametrize("name", list(SINGLE_OPS))
def test_out_equals_the_fresh_result_and_is_returned(name, dtype):
    call = SINGLE_OPS[name]
    x = random_obs((3, 6, 8, 9), dtype, seed=1)
    p = random_pool(4, 3, 8, 9, seed=2)
    want = call(x, p)
    out = torch.full_like(want, 3)
    got = call(x, p, out=out)
    assert got is out
    assert torch.equal(out, want)


def test_gather_augment_out():
    storage = random_obs((7, 3, 8, 9), torch.uint8, seed=3)
    p = random_pool(4, 3, 8, 9, seed=4)
    idx = torch.tensor([[0, 6], [2, 2], [5, 1]])
    want = ops.gather_augment(storage, idx, p, ops=PIPE, seed=SEED, step=STEP,
                              out_dtype=torch.float32, scale=2.0, bias=1.0)
    out = torch.empty_like(want)
    got = ops.gather_augment(storage, idx, p, ops=PIPE, seed=SEED, step=STEP,
                             out_dtype=torch.float32, scale=2.0, bias=1.0, out=out)
    assert got is out and torch.equal(out, want)


def test_out_reuses_the_callers_storage_across_calls():
    x = random_obs((4, 9, 12, 12), torch.uint8, seed=5)
    out = torch.empty_like(x)
    ptr = out.data_ptr()
    for step in range(3):
        ops.shift(x, seed=1, step=step, out=out)
        assert out.data_ptr() == ptr
        assert torch.equal(out, ops.shift(x, seed=1, step=step))


# ------------------------------------------------------------------ errors

def _augment_into(out, x=None):
    x = random_obs((2, 6, 8, 9), torch.uint8, seed=6) if x is None else x
    return ops.augment(x, random_pool(3, 3, 8, 9), ops=PIPE, seed=1, step=2, out=out)


def test_wrong_dtype_is_a_type_error_and_writes_nothing():
    out = torch.full((2, 6, 6, 7), 5.0)
    with pytest.raises(TypeError, match=r"out must be uint8 \[2, 6, 6, 7\] on cpu \(the result's "
                                        r"dtype\), got float32"):
        _augment_into(out)
    assert torch.equal(out, torch.full((2, 6, 6, 7), 5.0))


def test_float_output_needs_a_float_out():
    x = random_obs((2, 6, 8, 9), torch.uint8, seed=6)
    with pytest.raises(TypeError, match=r"out must be float32 .* got uint8"):
        ops.augment(x, None, ops=[{"op": "shift"}], seed=1, step=2, out_dtype=torch.float32,
                    out=torch.empty(2, 6, 8, 9, dtype=torch.uint8))


def test_wrong_shape_is_a_value_error():
    with pytest.raises(ValueError, match=r"out must be uint8 \[2, 6, 6, 7\] .*the result's shape"
                                         r"\), got uint8 \[2, 6, 8, 9\]"):
        _augment_into(torch.empty(2, 6, 8, 9, dtype=torch.uint8))


def test_wrong_device_is_a_value_error():
    with pytest.raises(ValueError, match=r"out must be on the same device as the observations "
                                         r"\(cpu\), got meta"):
        _augment_into(torch.empty(2, 6, 6, 7, dtype=torch.uint8, device="meta"))


def test_non_contiguous_is_a_value_error():
    out = torch.empty(2, 6, 6, 14, dtype=torch.uint8)[..., ::2]
    with pytest.raises(ValueError, match=r"out must be contiguous uint8 \[2, 6, 6, 7\].*strides"):
        _augment_into(out)


def test_out_aliasing_the_input_is_a_value_error():
    x = random_obs((2, 6, 8, 9), torch.uint8, seed=7)
    with pytest.raises(ValueError, match=r"out shares memory with obs .*in-place form "
                                         r"\(inplace=True"):
        ops.shift(x, seed=1, step=2, out=x)
    storage = random_obs((4, 3, 8, 9), torch.uint8, seed=8)
    with pytest.raises(ValueError, match=r"out shares memory with storage"):
        ops.gather_augment(storage, torch.zeros(2, 2, dtype=torch.int64), ops=[], seed=1, step=2,
                           out=storage.view(2, 6, 8, 9))


def test_out_must_be_a_tensor_and_excludes_inplace():
    x = random_obs((2, 6, 8, 9), torch.uint8, seed=9)
    with pytest.raises(TypeError, match=r"out must be a torch.Tensor .*got ndarray"):
        ops.flip(x, seed=1, step=2, out=x.numpy())
    with pytest.raises(ValueError, match=r"either inplace=True .* or out="):
        ops.augment(x, None, ops=[{"op": "shift"}], seed=1, step=2, inplace=True,
                    out=torch.empty_like(x))


# ------------------------------------------------------- opcheck and compile

def _small(dtype):
    return random_obs((3, 6, 8, 9), dtype, seed=4)


def opcheck_out_cases():
    pipe = "op=shift,pad=2|op=overlay,alpha=0.25,alpha_max=0.75,per_frame=true|op=crop,size=6x7"
    for dtype in (torch.uint8, torch.float32):
        tag = "u8" if dtype == torch.uint8 else "f32"
        yield f"shift_out-{tag}", O.shift_out.default, \
            lambda d=dtype: ((_small(d), SEED, STEP, 2, "zeros", 1),
                             {"out": torch.empty(3, 6, 8, 9, dtype=d)})
        yield f"crop_out-{tag}", O.crop_out.default, \
            lambda d=dtype: ((_small(d), SEED, STEP, [5, 7], False, 0),
                             {"out": torch.empty(3, 6, 5, 7, dtype=d)})
        yield f"overlay_out-{tag}", O.overlay_out.default, \
            lambda d=dtype: ((_small(d), random_pool(4, 3, 8, 9), SEED, STEP, 0.3, 0.9, True, 2),
                             {"out": torch.empty(3, 6, 8, 9, dtype=d)})
        yield f"augment_out-{tag}", O.augment_out.default, \
            lambda d=dtype: ((_small(d), random_pool(4, 3, 8, 9), pipe, SEED, STEP, torch.float32,
                              1 / 255, -0.5), {"out": torch.empty(3, 6, 6, 7)})
        yield f"gather_augment_out-{tag}", O.gather_augment_out.default, \
            lambda d=dtype: ((random_obs((5, 3, 8, 9), d, seed=2), torch.tensor([[0, 4], [3, 3]]),
                              random_pool(4, 3, 8, 9), pipe, SEED, STEP, None, 1.0, 0.0),
                             {"out": torch.empty(2, 6, 6, 7, dtype=d)})
        yield f"cutout_out-{tag}", O.cutout_out.default, \
            lambda d=dtype: ((_small(d), SEED, STEP, 2, 5, "color", 0.9, 1),
                             {"out": torch.empty(3, 6, 8, 9, dtype=d)})
        yield f"translate_out-{tag}", O.translate_out.default, \
            lambda d=dtype: ((_small(d), SEED, STEP, [10, 12], 0),
                             {"out": torch.empty(3, 6, 10, 12, dtype=d)})


OUT_CASES = list(opcheck_out_cases())


@pytest.mark.parametrize("name,op,make_args", OUT_CASES, ids=[c[0] for c in OUT_CASES])
def test_opcheck_out_forms(name, op, make_args):
    args, kwargs = make_args()
    torch.library.opcheck(op, args, kwargs)


def test_compile_fullgraph_with_out():
    torch._dynamo.reset()

    def f(obs, pool, out):
        ops.augment(obs, pool, ops=PIPE, seed=3, step=4, out_dtype=torch.float32, scale=1 / 255,
                    bias=-0.5, out=out)
        return ops.flip(out, seed=3, step=5, out=torch.empty_like(out))

    x = random_obs((4, 6, 8, 9), torch.uint8, seed=10)
    p = random_pool(3, 3, 8, 9, seed=11)
    want_out = torch.empty(4, 6, 6, 7)
    want = f(x, p, want_out)
    got_out = torch.empty(4, 6, 6, 7)
    got = torch.compile(f, fullgraph=True, backend="inductor")(x, p, got_out)
    assert torch.equal(got_out, want_out) and torch.equal(got, want)
