"""obsaug._C.float_math: kernels/float_math.h's exp/log/sin/cos on CPU tensors,
for Python references. Agrees with numpy's float64 functions within the bound
the header states (float_math_max_ulp) on samples of the ops' inputs, returns
the known answers of tests/kernels/float_math_known_answers.inc bit for bit,
and rejects bad input with the documented types."""
import pathlib
import re

import numpy as np
import torch

from obsaug import _C
from conftest import raises

KNOWN_ANSWERS = (pathlib.Path(__file__).resolve().parents[2] / "kernels"
                 / "float_math_known_answers.inc")
TWO_PI_F = np.float32(2 * np.pi)
NUMPY = {"exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos}


def ordinal(x):
    """float32 array -> int64 positions on the float line (+0 and -0 the same)."""
    u = x.view(np.uint32).astype(np.int64)
    return np.where(u & 0x80000000, -(u & 0x7FFFFFFF), u)


def max_ulp(name, x):
    x = np.asarray(x, dtype=np.float32)
    got = _C.float_math(name, torch.from_numpy(x)).numpy()
    with np.errstate(over="ignore"):  # exp beyond float32: inf, as wanted
        want = NUMPY[name](x.astype(np.float64)).astype(np.float32)
    return int(np.abs(ordinal(got) - ordinal(want)).max())


def test_bound_is_within_the_design_target():
    assert _C.float_math_max_ulp in (1, 2)  # DESIGN.md: at most 1-2 ulp


def test_log_of_box_muller_u1_within_bound():
    rng = np.random.default_rng(1)
    k = np.concatenate([np.arange(1, 4097), rng.integers(1, 2**24 + 1, 200_000),
                        np.arange(2**24 - 4096, 2**24 + 1)])
    u1 = (k.astype(np.float32) * np.float32(2.0**-24)).astype(np.float32)
    assert max_ulp("log", u1) <= _C.float_math_max_ulp


def test_sin_cos_of_box_muller_angles_within_bound():
    rng = np.random.default_rng(2)
    j = np.concatenate([np.arange(0, 4096), rng.integers(0, 2**24, 200_000),
                        np.arange(2**24 - 4096, 2**24)])
    th = TWO_PI_F * (j.astype(np.float32) * np.float32(2.0**-24))
    assert th.dtype == np.float32
    assert max_ulp("sin", th) <= _C.float_math_max_ulp
    assert max_ulp("cos", th) <= _C.float_math_max_ulp


def test_exp_of_sigmoid_arguments_within_bound():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-104, 89, 200_000), rng.uniform(-1, 1, 50_000),
                        np.linspace(-300, 300, 10_001)]).astype(np.float32)
    assert max_ulp("exp", x) <= _C.float_math_max_ulp


def test_known_answers_bit_for_bit():
    rows = re.findall(r'\{"(\w+)", (0x[0-9a-f]{8})u, (0x[0-9a-f]{8})u\}',
                      KNOWN_ANSWERS.read_text())
    assert len(rows) >= 40
    for name, x_bits, want_bits in rows:
        x = torch.from_numpy(np.array([int(x_bits, 16)], dtype=np.uint32).view(np.float32))
        got = _C.float_math(name, x).numpy().view(np.uint32)[0]
        assert got == int(want_bits, 16), f"{name}({x_bits}) = {got:#010x}, want {want_bits}"


def test_shape_kept_and_any_layout():
    x = torch.linspace(0.01, 3.0, 24, dtype=torch.float32).reshape(2, 3, 4)
    flat = _C.float_math("log", x.reshape(-1))
    out = _C.float_math("log", x)
    assert out.shape == (2, 3, 4) and out.dtype == torch.float32
    assert torch.equal(out.reshape(-1), flat)
    t = x.transpose(0, 2)  # not contiguous
    assert torch.equal(_C.float_math("log", t), out.transpose(0, 2))
    assert _C.float_math("sin", torch.empty(0, 5)).shape == (0, 5)
    assert _C.float_math("exp", torch.tensor(0.0)).item() == 1.0


def test_special_values():
    inf, nan = float("inf"), float("nan")
    e = _C.float_math("exp", torch.tensor([-inf, inf, nan, 0.0, 89.0, -104.0]))
    assert e.tolist()[:2] == [0.0, inf] and e[2].isnan() and e.tolist()[3:] == [1.0, inf, 0.0]
    lg = _C.float_math("log", torch.tensor([0.0, -0.0, -1.0, inf, nan, 1.0]))
    assert lg.tolist()[:2] == [-inf, -inf] and lg[2].isnan() and lg[3].item() == inf
    assert lg[4].isnan() and lg[5].item() == 0.0
    for name in ("sin", "cos"):
        assert _C.float_math(name, torch.tensor([nan, inf, -inf, 201.0])).isnan().all()


def test_bad_name_is_value_error_listing_the_four():
    raises(ValueError, lambda: _C.float_math("tan", torch.zeros(3)),
           '"exp"', '"log"', '"sin"', '"cos"', 'got "tan"')


def test_wrong_dtype_is_type_error_naming_float32():
    raises(TypeError, lambda: _C.float_math("exp", torch.zeros(3, dtype=torch.float64)),
           "float32", "got float64")
    raises(TypeError, lambda: _C.float_math("exp", torch.zeros(3, dtype=torch.uint8)),
           "float32", "got uint8")


def test_not_on_cpu_is_value_error():
    raises(ValueError, lambda: _C.float_math("sin", torch.zeros(3, device="meta")),
           "must be on cpu", "on meta")
