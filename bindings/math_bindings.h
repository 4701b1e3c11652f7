// obsaug._C.float_math: kernels/float_math.h's exp/log/sin/cos on a CPU
// tensor, so Python references compute with the very bits the ops use.
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.float_math(name, x): name "exp", "log", "sin" or "cos"; x a
// float32 CPU tensor of any shape; returns a new float32 tensor of x's shape,
// elementwise. Bad name or a tensor not on the CPU: ValueError; another dtype:
// TypeError. And obsaug._C.float_math_max_ulp, the error bound the header
// states (kFloatMathMaxUlp).
void bind_float_math(pybind11::module& m);

}  // namespace obsaug::python
