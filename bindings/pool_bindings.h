// The distractor pool's Python binding (bindings/pool_bindings.cpp), compiled
// into obsaug._C where the pool is built (OBSAUG_WITH_POOL).
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "engine/source/image_source.h"

namespace obsaug::python {

// Adds obsaug._C.DistractorPool.
void bind_pool(pybind11::module& m);

// Skipped inputs as the stats dicts hold them: [{"path": ..., "message": ...}].
pybind11::list failures_list(const std::vector<SourceFailure>& failures);

}  // namespace obsaug::python
