// obsaug._C.OutputRecycler: kernels/output_tensor.h's OutputRecycler, for
// obsaug.nn modules that return a new tensor per call.
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.OutputRecycler(capacity=4) with take(shape, dtype, device) ->
// a contiguous tensor that nothing else refers to (a released one kept from an
// earlier take, or a new one).
void bind_output_recycler(pybind11::module& m);

}  // namespace obsaug::python
