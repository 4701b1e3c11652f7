#include "bindings/output_bindings.h"

#include <torch/csrc/utils/pybind.h>  // at::Tensor, ScalarType, Device <-> torch

#include <cstdint>
#include <vector>

#include "kernels/output_tensor.h"

namespace py = pybind11;

namespace obsaug::python {

void bind_output_recycler(py::module& m) {
  py::class_<ops::OutputRecycler>(m, "OutputRecycler",
                                  "Hands out output tensors again once their users released them.")
      .def(py::init<size_t>(), py::arg("capacity") = 4)
      .def(
          "take",
          [](ops::OutputRecycler& r, const std::vector<int64_t>& shape, at::ScalarType dtype,
             at::Device device) {
            return r.take(shape, at::TensorOptions().dtype(dtype).device(device));
          },
          py::arg("shape"), py::arg("dtype"), py::arg("device"));
}

}  // namespace obsaug::python
