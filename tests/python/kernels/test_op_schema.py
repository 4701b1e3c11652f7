"""The op schema as Python sees it (obsaug.ops.schema(), from kernels/op_schema.cpp):
its content, the README's op table, the defaults of the Python and torch.library
signatures, the type checks and fake-kernel shapes derived from it, and the same
range text for a bad value whether it comes from YAML or from a Python call."""
import inspect
import pathlib

import pytest
import torch

import obsaug
from conftest import require_component

ops = obsaug.ops
S = dict(seed=0, step=0)
README = pathlib.Path(__file__).resolve().parents[3] / "README.md"


def test_schema_lists_every_op_with_typed_keys():
    schema = ops.schema()
    assert list(schema) == ["shift", "crop", "overlay", "flip", "rotate", "translate", "cutout",
                            "grayscale", "color_jitter", "random_conv"]
    assert list(schema["shift"]["keys"]) == ["pad", "padding", "index"]
    assert list(schema["crop"]["keys"]) == ["size", "center", "index"]
    assert list(schema["overlay"]["keys"]) == ["alpha", "alpha_max", "per_frame", "distinct",
                                               "index"]
    pad = schema["shift"]["keys"]["pad"]
    assert (pad["type"], pad["default"], pad["min"], pad["max"], pad["range"]) == \
        ("int", 4, 0, 2**20, "0..1048576")
    padding = schema["shift"]["keys"]["padding"]
    assert (padding["type"], padding["default"], padding["choices"]) == \
        ("enum", "replicate", ["replicate", "zeros"])
    size = schema["crop"]["keys"]["size"]
    assert (size["type"], size["required"], size["default"], size["range"]) == \
        ("size", True, None, "1..1073741824 per side")
    alpha_max = schema["overlay"]["keys"]["alpha_max"]
    assert (alpha_max["type"], alpha_max["optional"], alpha_max["min_key"], alpha_max["max"]) == \
        ("float", True, "alpha", 1.0)
    assert list(schema["cutout"]["keys"]) == ["min", "max", "fill", "p", "index"]
    cut_max = schema["cutout"]["keys"]["max"]
    assert (cut_max["type"], cut_max["min_key"], cut_max["range"]) == \
        ("int", "min", "min..1073741824")
    assert list(schema["color_jitter"]["keys"]) == ["brightness", "contrast", "saturation", "hue",
                                                    "p", "index"]
    assert list(schema["random_conv"]["keys"]) == ["init", "padding", "activation", "index"]
    assert [schema[op]["frame_size"] for op in schema] == \
        ["keeps", "crops_to_size", "keeps", "keeps", "keeps", "grows_to_size", "keeps", "keeps",
         "keeps", "keeps"]
    assert [op for op in schema if schema[op]["needs_square"]] == ["rotate"]
    assert [op for op in schema if schema[op]["mixes_channels"]] == \
        ["grayscale", "color_jitter", "random_conv"]
    assert schema["crop"]["size_key"] == "size" and schema["shift"]["size_key"] is None
    assert [op for op in schema if schema[op]["needs_pool"]] == ["overlay"]
    assert [op for op in schema if schema[op]["neighbourhood_3x3"]] == ["random_conv"]
    assert [op for op in schema if schema[op]["frame_reduction"]] == ["color_jitter"]
    for op in schema.values():
        assert op["keys"]["index"] == {**op["keys"]["index"], "type": "int", "optional": True,
                                       "default": None, "range": "0..32767"}


def test_schema_returns_a_copy():
    schema = ops.schema()
    schema["shift"]["keys"]["pad"]["default"] = 99
    del schema["crop"]
    assert ops.schema()["shift"]["keys"]["pad"]["default"] == 4 and "crop" in ops.schema()


# --------------------------------------------------------------- README

FRAME_SIZE_TEXT = {"keeps": "keeps", "crops_to_size": "crops to `{}`",
                   "grows_to_size": "grows to `{}`"}
NEEDS_TEXT = {"needs_square": "needs a square frame",
              "needs_pool": "reads the pool", "mixes_channels": "mixes channels",
              "neighbourhood_3x3": "reads a 3x3 neighbourhood",
              "frame_reduction": "needs a whole-frame reduction"}


def readme_op_rows(text):
    lines = text.splitlines()
    start = lines.index("| op | keys (default; range) | frame size |")
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        name, keys, frame = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name] = (keys, frame)
    return rows


def schema_rows():
    """The README's rows as the schema says they must read."""
    rows = {}
    for name, op in ops.schema().items():
        keys = "<br>".join(f"`{key}` ({spec['default_text']}; {spec['range']})"
                           for key, spec in op["keys"].items())
        frame = FRAME_SIZE_TEXT[op["frame_size"]].format(op["size_key"])
        frame = "; ".join([frame] + [text for flag, text in NEEDS_TEXT.items() if op[flag]])
        rows[name] = (keys, frame)
    return rows


def test_readme_op_table_matches_the_schema():
    rows, want = readme_op_rows(README.read_text()), schema_rows()
    assert list(rows) == list(want)
    for name in want:
        assert rows[name] == want[name], name


def test_readme_comparison_sees_a_changed_default():
    text = README.read_text().replace("`pad` (4; 0..1048576)", "`pad` (5; 0..1048576)")
    assert readme_op_rows(text)["shift"] != schema_rows()["shift"]


# --------------------------------------------------------------- signatures

@pytest.mark.parametrize("name", ["shift", "crop", "overlay"])
def test_python_and_torch_signatures_default_to_the_schema(name):
    keys = ops.schema()[name]["keys"]
    python = inspect.signature(getattr(ops, name)).parameters
    torch_args = {a.name: a for a in getattr(torch.ops.obsaug, name).default._schema.arguments}
    for key, spec in keys.items():
        if key == "index" or spec["required"]:
            continue
        assert python[key].default == spec["default"], key
        assert torch_args[key].default_value == spec["default"], key


# --------------------------------------------------------------- type checks

WRONG_TYPE = {"int": [1.5, "4", True, None], "float": ["0.5", True, None, [0.5]],
              "bool": [1, "true", None], "enum": [1, None], "size": []}


def test_every_key_of_the_wrong_type_is_a_typeerror():
    checked = 0
    for name, op in ops.schema().items():
        for key, spec in op["keys"].items():
            for value in WRONG_TYPE[spec["type"]]:
                if value is None and spec["optional"]:
                    continue
                with pytest.raises(TypeError, match=rf"ops\[0\] \({name}\): {key} must be"):
                    ops.pipeline_text([{"op": name, key: value}])
                checked += 1
    assert checked > 20


def test_unknown_keys_list_the_ops_keys_from_the_schema():
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['pda'\]; shift takes op, pad, "
                                         r"padding, index"):
        ops.pipeline_text([{"op": "shift", "pda": 4}])
    with pytest.raises(ValueError, match="op must be one of shift, crop, overlay, flip, rotate, translate, cutout, grayscale, color_jitter, random_conv; got 'rotate90'"):
        ops.pipeline_text([{"op": "rotate90"}])


# --------------------------------------------------------------- frame sizes

def test_frame_sizes_walks_the_pipeline():
    pipe = [{"op": "shift"}, {"op": "crop", "size": (90, 80)}, {"op": "overlay"},
            {"op": "crop", "size": 60, "center": True}]
    assert ops.frame_sizes(pipe, 100, 96) == [(100, 96), (100, 96), (90, 80), (90, 80), (60, 60)]
    assert ops.frame_sizes([], 5, 7) == [(5, 7)]
    with pytest.raises(ValueError, match=r"op 1 \(crop\): crop 64x32 is larger than its input "
                                         r"60x60 \(the frame size at this stage\); size must "
                                         r"be at most 60x60"):
        ops.frame_sizes([{"op": "crop", "size": 60}, {"op": "crop", "size": (64, 32)}], 84, 84)


def test_fake_kernels_take_their_shapes_from_the_walk():
    meta = torch.empty(2, 6, 12, 10, dtype=torch.uint8, device="meta")
    out = ops.augment(meta, None, ops=[{"op": "crop", "size": (8, 6)}, {"op": "shift"}], **S)
    assert out.shape == (2, 6, 8, 6)
    assert ops.crop(meta, size=(5, 4), **S).shape == (2, 6, 5, 4)
    # The fake single ops check values as the real kernels do.
    with pytest.raises(ValueError, match=r"op 0 \(shift\): pad must be in 0..1048576, got -1"):
        ops.shift(meta, pad=-1, **S)


# --------------------------------------------------------------- one range text

def _obs():
    return torch.zeros(2, 6, 12, 10, dtype=torch.uint8)


def _pool():
    return torch.zeros(3, 3, 12, 10, dtype=torch.uint8)


# (op dict, the same op as a Python call, the message both must contain)
SAME_TEXT = [
    ({"op": "shift", "pad": -1}, lambda: ops.shift(_obs(), pad=-1, **S),
     "pad must be in 0..1048576, got -1"),
    ({"op": "shift", "pad": 2**20 + 1}, lambda: ops.shift(_obs(), pad=2**20 + 1, **S),
     "pad must be in 0..1048576, got 1048577"),
    ({"op": "shift", "padding": "reflect"}, lambda: ops.shift(_obs(), padding="reflect", **S),
     "padding must be one of replicate, zeros; got 'reflect'"),
    ({"op": "shift", "index": 70000}, lambda: ops.shift(_obs(), op_index=70000, **S),
     "index must be in 0..32767, got 70000"),
    ({"op": "crop", "size": 0}, lambda: ops.crop(_obs(), size=0, **S),
     "size must be in 1..1073741824 per side, got 0x0"),
    ({"op": "overlay", "alpha": 1.5}, lambda: ops.overlay(_obs(), _pool(), alpha=1.5, **S),
     "alpha must be in [0, 1], got 1.5"),
    ({"op": "overlay", "alpha": 0.5, "alpha_max": 0.4},
     lambda: ops.overlay(_obs(), _pool(), alpha=0.5, alpha_max=0.4, **S),
     "alpha_max must be in [alpha, 1] = [0.5, 1], got 0.4"),
]


@require_component("Engine")
@pytest.mark.parametrize("op,call,text", SAME_TEXT, ids=[t for _, _, t in SAME_TEXT])
def test_yaml_and_python_fail_with_the_same_range_text(op, call, text):
    key, rest = text.split(" ", 1)
    # Python: the op call and the op dict, both through the native parser.
    with pytest.raises(ValueError) as from_call:
        call()
    assert text in str(from_call.value)
    with pytest.raises(ValueError) as from_dict:
        ops.augment(_obs(), _pool(), ops=[op], **S)
    assert text in str(from_dict.value)
    # YAML: the key's path, then the same words.
    config = {"frames": {"stack": 2, "channels": 3, "height": 12, "width": 10}, "pipeline": [op]}
    with pytest.raises(ValueError) as from_yaml:
        obsaug.Engine(config)
    assert f"pipeline[0].{key}: {rest}" in str(from_yaml.value)
    # The range in the message is the schema's.
    spec = ops.schema()[op["op"]]["keys"][key]
    assert spec["range"] in rest
