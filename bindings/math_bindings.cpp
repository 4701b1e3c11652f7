#include "bindings/math_bindings.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <string>

#include "kernels/float_math.h"
#include "kernels/tensor_text.h"

namespace py = pybind11;

namespace obsaug::python {
namespace {

using FloatFunction = float (*)(float);

FloatFunction function_named(const std::string& name) {
  if (name == "exp") return exp_f32;
  if (name == "log") return log_f32;
  if (name == "sin") return sin_f32;
  if (name == "cos") return cos_f32;
  TORCH_CHECK_VALUE(false, "float_math: name must be \"exp\", \"log\", \"sin\" or \"cos\", got \"",
                    name, "\"");
  return nullptr;
}

at::Tensor float_math(const std::string& name, const at::Tensor& x) {
  const FloatFunction f = function_named(name);
  TORCH_CHECK_VALUE(x.defined(), "float_math: x must be a float32 cpu tensor, got None");
  TORCH_CHECK_TYPE(x.scalar_type() == at::kFloat, "float_math: x must be float32, got ",
                   describe(x));
  TORCH_CHECK_VALUE(x.device().is_cpu(), "float_math: x must be on cpu, got ", describe(x));
  const at::Tensor in = x.contiguous();
  at::Tensor out = at::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const int64_t n = in.numel();
  {
    py::gil_scoped_release release;
    for (int64_t i = 0; i < n; ++i) dst[i] = f(src[i]);
  }
  return out;
}

}  // namespace

void bind_float_math(py::module& m) {
  m.def("float_math", &float_math, py::arg("name"), py::arg("x"),
        "kernels/float_math.h's exp_f32/log_f32/sin_f32/cos_f32 elementwise on a float32 cpu "
        "tensor (name \"exp\", \"log\", \"sin\" or \"cos\"): the ops' own bits.");
  m.attr("float_math_max_ulp") = kFloatMathMaxUlp;
}

}  // namespace obsaug::python
