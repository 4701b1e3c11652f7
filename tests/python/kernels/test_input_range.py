"""Float observations in 0..1 (issue 42, items 12 and 16): one mechanism
(obsaug/_input_range.py) for obsaug.ops, the Engine and the drop-ins.

Float means 0..255. The default checks the first float call of each site whose
pipeline depends on the range (a batch whose maximum is at most 1 raises
ValueError naming input_range); later calls are not checked (the default's
cost is a flag test). ``input_range=(0, 1)`` scales to 0..255 and back;
``(0, 255)`` is never checked. Range-independent pipelines run as they are.
"""
import numpy as np
import pytest
import torch

import obsaug
from obsaug import _input_range, ops
from conftest import needs_engine, random_obs

PIPELINE_JITTER = [{"op": "shift", "pad": 2}, {"op": "color_jitter"}]


@pytest.fixture(autouse=True)
def fresh_sites():
    """Each test sees unchecked obsaug.ops sites (their check runs once per process)."""
    ops._RANGE_SITES.clear()
    yield
    ops._RANGE_SITES.clear()


def unit(shape, seed=0):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) * 0.98 + 0.01


def pool(size=4, h=12, w=12):
    return random_obs((size, 3, h, w), seed=5)


def test_overlay_of_0_1_data_is_refused_by_name_then_scaled_on_request():
    x = unit((4, 6, 12, 12))
    with pytest.raises(ValueError, match=r"obsaug\.ops\.overlay: float observations are 0\.\.255"
                                         r".*maximum is 0\.9.*input_range=\(0, 1\)"):
        ops.overlay(x, pool(), seed=1, step=2)
    out = ops.overlay(x, pool(), seed=1, step=2, input_range=(0, 1))
    want = ops.overlay(x * 255, pool(), seed=1, step=2) / 255
    assert torch.equal(out, want) and out.max() <= 1
    into = torch.empty_like(x)
    assert ops.overlay(x, pool(), seed=1, step=2, out=into, input_range=(0, 1)) is into
    assert torch.equal(into, want)
    # (0, 255) says "these are 0..255 values": never checked
    ops.overlay(x, pool(), seed=1, step=2, input_range=(0, 255))


def test_the_default_checks_the_first_passing_call_of_a_site_only():
    """The cheap default: once a float call of a site passed, later calls are not read."""
    ops.overlay(unit((2, 3, 12, 12)) * 255, pool(), seed=0, step=0)
    assert ops._RANGE_SITES["overlay"].checked
    ops.overlay(unit((2, 3, 12, 12)), pool(), seed=0, step=1)  # not checked again
    with pytest.raises(ValueError, match="obsaug.ops.augment"):  # another site: its own check
        ops.augment(unit((2, 3, 12, 12)), pool(), ops=[{"op": "overlay"}], seed=0, step=0)


@pytest.mark.parametrize("pipeline", [
    [{"op": "shift", "pad": 2}], [{"op": "crop", "size": 8}], [{"op": "flip", "p": 1.0}],
    [{"op": "grayscale"}], [{"op": "cutout", "fill": "zeros"}],
    [{"op": "random_conv", "activation": "none"}]])
def test_pipelines_that_do_not_depend_on_the_range_run_on_0_1_data(pipeline):
    x = unit((3, 6, 12, 12))
    out = ops.augment(x, ops=pipeline, seed=3, step=4)
    assert torch.equal(out, ops.augment(x, ops=pipeline, seed=3, step=4, input_range=(0, 1)))


@pytest.mark.parametrize("name, keys", [("color_jitter", {}), ("cutout", {"fill": "color"}),
                                        ("random_conv", {})])
def test_second_family_ops_that_depend_on_the_range(name, keys):
    x = unit((3, 6, 12, 12))
    op = getattr(ops, name)
    with pytest.raises(ValueError, match=f"obsaug.ops.{name}: float observations are 0..255"):
        op(x, seed=1, step=1, **keys)
    got = op(x, seed=1, step=1, input_range=(0, 1), **keys)
    assert torch.allclose(got, op(x * 255, seed=1, step=1, **keys) / 255, atol=1e-6, rtol=0)


def test_an_output_scale_depends_on_the_range_and_is_kept():
    """DrQ-v2's encoder input (scale 1/255, bias -0.5) assumes 0..255: 0..1 data is
    refused; with input_range=(0, 1) the scale applies to the 0..255 values."""
    x = unit((2, 9, 12, 12))
    kw = dict(ops=[{"op": "shift", "pad": 1}], seed=0, step=0, out_dtype=torch.float32,
              scale=1 / 255, bias=-0.5)
    with pytest.raises(ValueError, match="input_range"):
        ops.augment(x, **kw)
    assert torch.equal(ops.augment(x, input_range=(0, 1), **kw), ops.augment(x * 255, **kw))


def test_bad_input_ranges_and_where_0_1_cannot_go():
    x = unit((2, 3, 12, 12))
    with pytest.raises(ValueError, match=r"input_range must be None, \(0, 255\) or \(0, 1\)"):
        ops.overlay(x, pool(), seed=0, step=0, input_range=(0, 2))
    with pytest.raises(TypeError, match="input_range must be None"):
        ops.shift(x, seed=0, step=0, input_range="0..1")
    with pytest.raises(ValueError, match="input_range=.0, 1. is for float observations"):
        ops.overlay(random_obs((2, 3, 12, 12)), pool(), seed=0, step=0, input_range=(0, 1))
    with pytest.raises(ValueError, match="works out of place only"):
        ops.augment(x, pool(), ops=[{"op": "overlay"}], seed=0, step=0, inplace=True,
                    input_range=(0, 1))
    uint8 = random_obs((2, 3, 12, 12))  # uint8 is 0..255: never checked
    ops.overlay(uint8, pool(), seed=0, step=0)
    assert not ops._RANGE_SITES["overlay"].checked


def test_depends_on_range_reads_the_pipeline():
    depends = _input_range.depends_on_range
    assert depends([{"op": "overlay"}]) and depends([{"op": "color_jitter"}])
    assert depends([{"op": "random_conv"}]) and not depends([{"op": "random_conv",
                                                              "activation": "none"}])
    assert depends([{"op": "cutout", "fill": "color"}]) and not depends([{"op": "cutout"}])
    assert not depends([{"op": "shift"}, {"op": "crop", "size": 4}])
    assert depends([{"op": "shift"}], scale=1 / 255) and depends([], bias=-0.5)


# --- the Engine -------------------------------------------------------------------

def jitter_engine(**kw):
    return obsaug.Engine({"frames": {"stack": 2, "channels": 3, "height": 12, "width": 12},
                          "pipeline": PIPELINE_JITTER, **kw})


@needs_engine
def test_engine_refuses_0_1_data_once_and_scales_it_on_request():
    with jitter_engine() as engine:
        x = unit((3, 6, 12, 12))
        with pytest.raises(ValueError, match=r"Engine\.augment: float observations are 0\.\.255"):
            engine.augment(x, step=0)
        out = engine.augment(x, step=0, input_range=(0, 1))
        assert torch.equal(out, engine.augment(x * 255, step=0) / 255)
        with pytest.raises(ValueError, match=r"Engine\.augment_: float observations"):
            engine.augment_(x.clone(), step=0)
    with obsaug.Engine({"frames": {"stack": 2, "channels": 3, "height": 12, "width": 12},
                        "pipeline": [{"op": "shift", "pad": 2}]}) as shift_only:
        shift_only.augment(unit((3, 6, 12, 12)))  # a shift does not depend on the range


@needs_engine
def test_engine_names_a_numpy_batch_in_a_short_type_error():
    with jitter_engine() as engine:
        obs = np.zeros((2, 6, 12, 12), np.uint8)
        for call in (engine.augment, engine.augment_):
            with pytest.raises(TypeError, match=r"obs must be a torch.Tensor, got ndarray "
                                                r"\(torch.as_tensor converts") as err:
                call(obs)
            assert len(str(err.value)) < 200


@needs_engine
def test_engine_says_channels_last_and_the_permute():
    with jitter_engine() as engine:
        with pytest.raises(ValueError, match=r"looks channels-last.*obs\.permute\(0, 3, 1, 2\)"):
            engine.augment(torch.zeros(2, 12, 12, 6, dtype=torch.uint8))


@needs_engine
def test_engine_takes_any_stack_depth_its_frames_stack_is_no_check():
    """frames.stack describes the stack (tools, presets); the engine takes any number of
    frames of frames.channels channels (documented in obsaug/engine.py, docs/engine.md)."""
    with jitter_engine() as engine:
        assert engine.config["frames"]["stack"] == 2
        assert engine.augment(random_obs((2, 12, 12, 12))).shape == (2, 12, 12, 12)


# --- the drop-ins (DMControl-GB's float 0..255 convention) ------------------------

@needs_engine
def test_dmcgb_drop_ins_refuse_0_1_data_saying_to_multiply(monkeypatch):
    import obsaug.nn as onn
    monkeypatch.setenv("OBSAUG_POOL_SIZE", "8")
    for name in ("random_overlay", "random_conv"):
        monkeypatch.setattr(onn._range_sites[name], "checked", False)
        with pytest.raises(ValueError, match=f"obsaug.nn.{name}: float observations are "
                                             r"0\.\.255.*multiply 0\.\.1 data by 255"):
            getattr(onn, name)(unit((2, 9, 16, 16)))
        assert getattr(onn, name)(unit((2, 9, 16, 16)) * 255).dtype == torch.float32
