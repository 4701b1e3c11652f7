// The distractor pool's Python binding (bindings/pool_bindings.cpp), compiled
// into obsaug._C when the engine is built (OBSAUG_WITH_ENGINE).
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.DistractorPool.
void bind_pool(pybind11::module& m);

}  // namespace obsaug::python
