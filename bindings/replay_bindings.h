// obsaug::ReplayBuffer's Python binding (bindings/replay_bindings.cpp),
// compiled into obsaug._C where the replay library is built.
#pragma once

#include <pybind11/pybind11.h>

namespace obsaug::python {

// Adds obsaug._C.ReplayBuffer (wrapped by python/obsaug/replay.py).
void bind_replay(pybind11::module& m);

}  // namespace obsaug::python
