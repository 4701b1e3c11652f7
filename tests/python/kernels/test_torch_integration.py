"""torch.library.opcheck of every obsaug op, and torch.compile(fullgraph=True) on CPU."""
import pytest
import torch
from torch._dynamo.utils import counters
from torch._subclasses.fake_tensor import FakeTensorMode

import obsaug
from conftest import random_obs, random_pool

ops = obsaug.ops
O = torch.ops.obsaug
SEED, STEP = 3, -(2**62)   # the schema carries uint64 as int64: exercise a negative one
PIPE = "op=shift,pad=2|op=overlay,alpha=0.25,alpha_max=0.75,per_frame=true|op=crop,size=6x7"


def small(dtype, channels_last=False):
    x = random_obs((3, 6, 8, 9), dtype, seed=4)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def pool(h=8, w=9):
    return random_pool(4, 3, h, w, seed=5)


# Non-default values of every key of the second family (the obs is 8x9, RGB).
SECOND_FAMILY_ARGS = {
    "flip": (0.7, "vertical"),
    "rotate": None,  # needs a square frame: below
    "translate": ([10, 12],),
    "cutout": (2, 5, "color", 0.9),
    "grayscale": (0.6,),
    "color_jitter": (0.3, 0.2, 0.5, 0.1, 0.8),
    "random_conv": ("xavier", "zeros", "none"),
}
del SECOND_FAMILY_ARGS["rotate"]
SECOND_PIPE = ("op=crop,size=8|op=rotate,p=0.9|op=color_jitter|op=random_conv|op=cutout,fill=color"
               "|op=overlay,alpha=0.5")


def opcheck_cases():
    for dtype in (torch.uint8, torch.float32):
        for cl in (False, True):
            tag = f"{'u8' if dtype == torch.uint8 else 'f32'}{'-cl' if cl else ''}"
            yield f"shift-{tag}", O.shift.default, lambda d=dtype, c=cl: (small(d, c), SEED, STEP, 2, "zeros", 1)
            yield f"crop-{tag}", O.crop.default, lambda d=dtype, c=cl: (small(d, c), SEED, STEP, [5, 7], False, 0)
            yield f"overlay-{tag}", O.overlay.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(), SEED, STEP, 0.3, 0.9, True, 2)
            yield f"overlay_-{tag}", O.overlay_.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(), SEED, STEP, 0.5, None, False, 0)
            yield f"augment-{tag}", O.augment.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(), PIPE, SEED, STEP, None, 1.0, 0.0)
            yield f"augment-float-out-{tag}", O.augment.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(), PIPE, SEED, STEP, torch.float32, 1 / 255, -0.5)
            yield f"augment-nopool-{tag}", O.augment.default, \
                lambda d=dtype, c=cl: (small(d, c), None, "op=shift,pad=3|op=crop,size=5", SEED, STEP,
                                       None, 1.0, 0.0)
            yield f"augment_-{tag}", O.augment_.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(), "op=overlay,alpha=0.5|op=shift,pad=1", SEED, STEP)
            # The second family: every key passed positionally, as the schema orders them.
            for name, values in SECOND_FAMILY_ARGS.items():
                yield f"{name}-{tag}", getattr(O, name).default, \
                    lambda d=dtype, c=cl, v=values: (small(d, c), SEED, STEP, *v, 1)
            yield f"augment-second-family-{tag}", O.augment.default, \
                lambda d=dtype, c=cl: (small(d, c), pool(8, 8), SECOND_PIPE, SEED, STEP, None, 1.0, 0.0)
            # frame_channels: the 6 channels as 3 stacked 2-channel frames
            yield f"augment-frame-channels-{tag}", O.augment.default, \
                lambda d=dtype, c=cl: (small(d, c), None, "op=flip|op=cutout,fill=color", SEED, STEP,
                                       None, 1.0, 0.0, 2)
            yield f"augment_-frame-channels-{tag}", O.augment_.default, \
                lambda d=dtype, c=cl: (small(d, c), None, "op=shift,pad=1|op=cutout,fill=color", SEED,
                                       STEP, 2)
            yield f"cutout-frame-channels-{tag}", O.cutout.default, \
                lambda d=dtype, c=cl: (small(d, c), SEED, STEP, 2, 5, "color", 0.9, 1, 6)


CASES = list(opcheck_cases())


@pytest.mark.parametrize("name,op,make_args", CASES, ids=[c[0] for c in CASES])
def test_opcheck(name, op, make_args):
    torch.library.opcheck(op, make_args())


def test_opcheck_rotate_on_square_frames():
    for dtype in (torch.uint8, torch.float32):
        x = random_obs((3, 6, 9, 9), dtype, seed=4)
        torch.library.opcheck(O.rotate.default, (x, SEED, STEP, 0.8, 2))


def test_opcheck_empty_batch():
    x = torch.zeros(0, 6, 8, 9, dtype=torch.uint8)
    torch.library.opcheck(O.augment.default, (x, pool(), PIPE, SEED, STEP, None, 1.0, 0.0))


# ------------------------------------------------------------- torch.compile

BACKEND = "inductor"


def fused(obs, pool):
    return ops.augment(obs, pool, ops=[{"op": "shift", "pad": 4}, {"op": "overlay", "alpha": 0.5},
                                       {"op": "crop", "size": 12}],
                       seed=11, step=2**63 + 7, out_dtype=torch.float32, scale=1 / 255, bias=-0.5)


def chained(obs, pool):
    x = ops.shift(obs, seed=11, step=12, pad=4, padding="zeros")
    return ops.overlay(x, pool, seed=11, step=12, alpha=0.2, alpha_max=0.8, per_frame=True, op_index=1)


def second_family(obs, pool):
    x = ops.augment(obs, pool, ops=[{"op": "flip", "p": 0.5}, {"op": "rotate"},
                                    {"op": "color_jitter"}, {"op": "overlay", "alpha": 0.3},
                                    {"op": "random_conv"}, {"op": "translate", "size": 16}],
                    seed=5, step=9)
    return ops.cutout(ops.grayscale(x, seed=5, step=10, p=0.5), seed=5, step=10, fill="color",
                      op_index=1)


@pytest.mark.parametrize("fn", [fused, chained, second_family],
                         ids=["augment", "shift_then_overlay", "second_family"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_compile_fullgraph_matches_eager(fn, dtype):
    torch._dynamo.reset()
    x = random_obs((8, 9, 14, 14), dtype, seed=6)
    p = random_pool(5, 3, 14, 14, seed=7)
    compiled = torch.compile(fn, fullgraph=True, backend=BACKEND)
    want = fn(x, p)
    got = compiled(x, p)
    assert got.shape == want.shape and got.dtype == want.dtype
    torch.testing.assert_close(got, want, atol=0.0, rtol=0)
    # a second call with new data reuses the graph
    x2 = random_obs((8, 9, 14, 14), dtype, seed=8)
    torch.testing.assert_close(compiled(x2, p), fn(x2, p), atol=0.0, rtol=0)


def test_compile_inplace_fullgraph():
    torch._dynamo.reset()

    def f(obs, pool):
        ops.overlay(obs, pool, seed=1, step=2, alpha=0.5, inplace=True)
        return obs

    x = random_obs((4, 6, 10, 10), torch.uint8, seed=9)
    p = random_pool(3, 3, 10, 10, seed=10)
    want = ops.overlay(x, p, seed=1, step=2, alpha=0.5)
    y = x.clone()
    out = torch.compile(f, fullgraph=True, backend=BACKEND)(y, p)
    assert torch.equal(y, want) and torch.equal(out, want)


def test_compile_dynamic_batch_and_size():
    torch._dynamo.reset()
    compiled = torch.compile(fused, fullgraph=True, backend=BACKEND, dynamic=True)
    for b, hw in ((4, 14), (7, 14), (3, 16)):
        x = random_obs((b, 9, hw, hw), torch.uint8, seed=b)
        p = random_pool(5, 3, hw, hw, seed=hw)
        assert torch.equal(compiled(x, p), fused(x, p))


FRAME_CHANNEL_CALLS = {
    "augment": lambda x: ops.augment(x, ops=[{"op": "cutout", "fill": "color"}], seed=1, step=2,
                                     frame_channels=4),
    "augment_": lambda x: ops.augment(x.clone(), ops=[{"op": "flip"}, {"op": "cutout"}], seed=1,
                                      step=2, frame_channels=4, inplace=True),
    "cutout": lambda x: ops.cutout(x, seed=1, step=2, fill="color", frame_channels=4),
    "translate": lambda x: ops.translate(x, seed=1, step=2, size=x.shape[-1] + 2,
                                         frame_channels=4),
}


@pytest.mark.parametrize("name", list(FRAME_CHANNEL_CALLS))
def test_compile_dynamic_with_frame_channels(name):
    """frame_channels under dynamic=True: the result of the eager call, and an explicit C
    an op cannot take (grayscale of C = 4) refused at trace time, as with static sizes."""
    torch._dynamo.reset()
    call = FRAME_CHANNEL_CALLS[name]
    compiled = torch.compile(call, fullgraph=True, backend=BACKEND, dynamic=True)
    for b, hw in ((3, 12), (5, 16)):
        x = random_obs((b, 12, hw, hw), torch.uint8, seed=b)
        assert torch.equal(compiled(x), call(x))
    gray = torch.compile(lambda x: ops.augment(x, ops=[{"op": "shift"}, {"op": "grayscale"}],
                                               seed=1, step=2, frame_channels=4),
                         fullgraph=True, backend="eager", dynamic=True)
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError) as info:
        gray(random_obs((3, 12, 12, 12), torch.uint8))
    assert "op 1 (grayscale): needs RGB frames" in str(info.value)
    assert "got C = 4 (frame_channels)" in str(info.value)


def test_compile_dynamic_with_default_and_changing_floats():
    """Under dynamic=True (and for a float that changes between calls) torch.compile
    hands the wrappers symbolic floats: defaults and arguments alike reach the op."""
    torch._dynamo.reset()
    x, p = random_obs((2, 9, 16, 16), torch.uint8, seed=1), random_pool(3, 3, 16, 16, seed=2)
    shift_only = [{"op": "shift"}]
    for call in (lambda x, p: ops.augment(x, ops=shift_only, seed=1, step=2),
                 lambda x, p: ops.overlay(x, p, seed=1, step=2),
                 lambda x, p: ops.flip(x, seed=1, step=2),
                 lambda x, p: ops.cutout(x, seed=1, step=2)):
        compiled = torch.compile(call, fullgraph=True, backend=BACKEND, dynamic=True)
        assert torch.equal(compiled(x, p), call(x, p))
    changing = [
        lambda x, p, v: ops.overlay(x, p, seed=1, step=2, alpha=v),
        lambda x, p, v: ops.flip(x, seed=1, step=2, p=v),
        lambda x, p, v: ops.augment(x, ops=shift_only, seed=1, step=2, out_dtype=torch.float32,
                                    scale=v),
    ]
    for call in changing:
        compiled = torch.compile(call, fullgraph=True, backend=BACKEND)
        for v in (0.3, 0.45, 0.6):
            assert torch.equal(compiled(x, p, v), call(x, p, v))


PIPELINE_VALUES = {  # a pipeline dict's value that torch.compile makes symbolic
    "float": (lambda x, v: ops.augment(x, ops=[{"op": "flip", "p": v}], seed=1, step=2),
              (0.1, 0.9, 0.5, 0.1)),
    "int": (lambda x, v: ops.augment(x, ops=[{"op": "shift", "pad": v}], seed=1, step=2),
            (1, 3, 2)),
    "size": (lambda x, v: ops.augment(x, ops=[{"op": "crop", "size": v}], seed=1, step=2),
             (10, 12, (9, 13))),
}


@pytest.mark.parametrize("kind", list(PIPELINE_VALUES))
def test_compile_dynamic_with_a_changing_value_in_a_pipeline_dict(kind):
    """The pipeline is a string in the graph, so a symbolic number in its dict is
    specialized (a guard per value): each value gets its own result, as in eager."""
    torch._dynamo.reset()
    call, values = PIPELINE_VALUES[kind]
    x = random_obs((3, 9, 16, 16), torch.uint8, seed=5)
    compiled = torch.compile(call, fullgraph=True, backend=BACKEND, dynamic=True)
    results = [compiled(x, v) for v in values]
    for v, got in zip(values, results):
        assert torch.equal(got, call(x, v)), v
    assert not torch.equal(results[0], results[1])


STEPS = [*range(12), 2**63 - 1]  # a dynamic step is checked to lie in [0, 2**63)


def changing_step(obs, pool, step):
    x = ops.augment(obs, pool, ops=[{"op": "shift", "pad": 2}, {"op": "overlay"}], seed=3,
                    step=step)
    return ops.flip(ops.crop(x, seed=step, step=step, size=10), seed=2**64 - 1, step=step)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_compile_with_a_changing_step_compiles_at_most_twice(backend):
    # The first call compiles with the step as a constant; the second makes it
    # dynamic (a SymInt in the schemas), and that graph serves every later step.
    torch._dynamo.reset()
    counters.clear()
    x = random_obs((3, 6, 14, 14), torch.uint8, seed=12)
    p = random_pool(4, 3, 14, 14, seed=13)
    compiled = torch.compile(changing_step, fullgraph=True, backend=backend)
    for step in STEPS:
        assert torch.equal(compiled(x, p, step), changing_step(x, p, step)), step
    assert counters["stats"]["unique_graphs"] <= 2
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError,
                       match=r"a changing seed or step under torch\.compile must be an int in "
                             r"\[0, 2\*\*63\)"):
        compiled(x, p, 2**63 + 5)  # eager takes it (as its int64 two's complement)
    assert changing_step(x, p, 2**63 + 5).shape == (3, 6, 10, 10)


# The fakes run the eager op's own checks of dtypes, ranks and output options,
# so a trace fails with the eager message.
def u8(*shape):
    return torch.zeros(shape, dtype=torch.uint8)


REJECTED = {
    "shift float16": (TypeError, lambda: ops.shift(u8(2, 6, 8, 8).half(), seed=0, step=0)),
    "flip bfloat16": (TypeError, lambda: ops.flip(u8(2, 6, 8, 8).bfloat16(), seed=0, step=0)),
    "crop float64": (TypeError, lambda: ops.crop(u8(2, 6, 8, 8).double(), seed=0, step=0, size=4)),
    "augment int32": (TypeError, lambda: ops.augment(u8(2, 6, 8, 8).int(), ops=[{"op": "flip"}],
                                                     seed=0, step=0)),
    "shift bool": (TypeError, lambda: ops.shift(u8(2, 6, 8, 8).bool(), seed=0, step=0)),
    "shift 3-D": (ValueError, lambda: ops.shift(u8(6, 8, 8), seed=0, step=0)),
    "augment 5-D": (ValueError, lambda: ops.augment(u8(2, 2, 3, 8, 8), ops=[{"op": "shift"}],
                                                    seed=0, step=0)),
    "augment_ 3-D": (ValueError, lambda: ops.augment(u8(6, 8, 8), ops=[{"op": "shift"}], seed=0,
                                                     step=0, inplace=True)),
    "augment out_dtype uint8 of float": (
        TypeError, lambda: ops.augment(u8(2, 6, 8, 8).float(), ops=[{"op": "shift"}], seed=0,
                                       step=0, out_dtype=torch.uint8)),
    "augment out_dtype float16": (
        TypeError, lambda: ops.augment(u8(2, 6, 8, 8), ops=[{"op": "shift"}], seed=0, step=0,
                                       out_dtype=torch.float16)),
    "overlay float pool": (TypeError, lambda: ops.overlay(u8(2, 6, 8, 8), u8(3, 3, 8, 8).float(),
                                                          seed=0, step=0)),
    "gather float64 storage": (
        TypeError, lambda: ops.gather_augment(u8(5, 3, 8, 8).double(),
                                              torch.zeros(2, 2, dtype=torch.long),
                                              ops=[{"op": "shift"}], seed=0, step=0)),
    # what the kernel checks against the frames, the pool and out= (sizes, not data)
    "overlay obs channels not a multiple of the pool's": (
        ValueError, lambda: ops.overlay(u8(2, 8, 8, 8), u8(3, 3, 8, 8), seed=0, step=0)),
    "grayscale of C = 1 frames": (ValueError, lambda: ops.grayscale(u8(2, 8, 8, 8), seed=0,
                                                                     step=0)),
    "color_jitter of C = 1 frames": (ValueError, lambda: ops.color_jitter(u8(2, 4, 8, 8), seed=0,
                                                                           step=0)),
    "random_conv of C = 1 frames": (ValueError, lambda: ops.random_conv(u8(2, 4, 8, 8), seed=0,
                                                                         step=0)),
    "grayscale of frame_channels 1": (ValueError, lambda: ops.grayscale(
        u8(2, 6, 8, 8), seed=0, step=0, frame_channels=1)),
    "augment frame_channels not dividing S*C": (ValueError, lambda: ops.augment(
        u8(2, 6, 8, 8), ops=[{"op": "flip"}], seed=0, step=0, frame_channels=4)),
    "augment_ frame_channels unlike the pool's": (ValueError, lambda: ops.augment(
        u8(2, 6, 8, 8), u8(3, 3, 8, 8), ops=[{"op": "overlay"}], seed=0, step=0, inplace=True,
        frame_channels=1)),
    "cutout out= with frame_channels not dividing S*C": (ValueError, lambda: ops.cutout(
        u8(2, 6, 8, 8), seed=0, step=0, frame_channels=5, out=u8(2, 6, 8, 8))),
    "shift of 0-row frames": (ValueError, lambda: ops.shift(u8(2, 6, 0, 8), seed=0, step=0)),
    "shift out=obs": (ValueError, lambda: (lambda x: ops.shift(x, seed=0, step=0, out=x))(
        u8(2, 6, 8, 8))),
    "shift out of the wrong shape": (ValueError, lambda: ops.shift(u8(2, 6, 8, 8), seed=0, step=0,
                                                                   out=u8(2, 6, 8, 7))),
    "crop out of the wrong dtype": (TypeError, lambda: ops.crop(
        u8(2, 6, 8, 8), seed=0, step=0, size=4, out=torch.zeros(2, 6, 4, 4))),
    "flip out not contiguous": (ValueError, lambda: ops.flip(u8(2, 6, 8, 8), seed=0, step=0,
                                                             out=u8(2, 6, 8, 16)[..., ::2])),
    "augment out of the wrong shape": (ValueError, lambda: ops.augment(
        u8(2, 6, 8, 8), ops=[{"op": "crop", "size": 4}], seed=0, step=0, out=u8(2, 6, 8, 8))),
    "augment_ of an expanded obs": (ValueError, lambda: ops.augment(
        u8(1, 6, 8, 8).expand(2, 6, 8, 8), ops=[{"op": "flip"}], seed=0, step=0, inplace=True)),
    "augment_ with a crop": (ValueError, lambda: ops.augment(
        u8(2, 6, 8, 8), ops=[{"op": "crop", "size": 4}], seed=0, step=0, inplace=True)),
    "gather with pool channels unlike the storage's": (
        ValueError, lambda: ops.gather_augment(u8(5, 1, 8, 8), torch.zeros(2, 3, dtype=torch.long),
                                               u8(3, 3, 8, 8), ops=[{"op": "overlay"}], seed=0,
                                               step=0)),
    "gather int32 indices": (
        TypeError, lambda: ops.gather_augment(u8(5, 3, 8, 8), torch.zeros(2, 2, dtype=torch.int32),
                                              ops=[{"op": "flip"}], seed=0, step=0)),
    "gather sample_ids of the wrong length": (
        ValueError, lambda: ops.gather_augment(u8(5, 3, 8, 8), torch.zeros(2, 2, dtype=torch.long),
                                               ops=[{"op": "flip"}], seed=0, step=0,
                                               sample_ids=torch.zeros(3, dtype=torch.long))),
    "gather out of the wrong shape": (
        ValueError, lambda: ops.gather_augment(u8(5, 3, 8, 8), torch.zeros(2, 2, dtype=torch.long),
                                               ops=[{"op": "flip"}], seed=0, step=0,
                                               out=u8(2, 3, 8, 8))),
}


def eager_error(name):
    exc, call = REJECTED[name]
    with pytest.raises(exc) as info:
        call()
    return exc, str(info.value)


@pytest.mark.parametrize("name", list(REJECTED))
def test_fake_kernels_reject_what_the_eager_op_rejects(name):
    exc, message = eager_error(name)
    with FakeTensorMode(), pytest.raises(exc) as info:
        REJECTED[name][1]()
    assert str(info.value) == message


@pytest.mark.parametrize("name", ["shift 3-D", "augment out_dtype uint8 of float",
                                  "grayscale of C = 1 frames", "augment_ with a crop",
                                  "grayscale of frame_channels 1",
                                  "augment frame_channels not dividing S*C"])
def test_compile_fails_at_trace_time_with_the_eager_message(name):
    torch._dynamo.reset()
    exc, message = eager_error(name)
    compiled = torch.compile(REJECTED[name][1], fullgraph=True, backend="eager")
    with pytest.raises(torch._dynamo.exc.TorchRuntimeError) as info:
        compiled()
    assert f"{exc.__name__}({message!r})" in str(info.value)
