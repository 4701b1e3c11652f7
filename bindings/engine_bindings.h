// obsaug::Engine's Python binding (bindings/engine_bindings.cpp), compiled
// into obsaug._C where the Engine is built (OBSAUG_WITH_ENGINE).
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.Engine (wrapped by python/obsaug/engine.py).
void bind_engine(pybind11::module& m);

}  // namespace obsaug::python
