// obsaug._C.op_schema / obsaug._C.frame_sizes: the op schema
// (kernels/op_schema.h) as plain Python data, for python/obsaug/ops.py's
// checks, key lists and fake kernels; and op_dict, an OpSpec as the dict a
// user writes ({"op": "shift", "pad": 4, ...}); check_augment_inputs /
// check_gather_inputs, the eager ops' input checks for the fake kernels.
#pragma once

#include <pybind11/pybind11.h>

#include "kernels/pipeline_spec.h"

namespace obsaug::python {

void bind_schema(pybind11::module& m);

// {"op": name, key: value, ...}: every key that is set, in schema order;
// sizes as [height, width].
pybind11::dict op_dict(const OpSpec& op);

}  // namespace obsaug::python
