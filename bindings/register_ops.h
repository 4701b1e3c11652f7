// Registers the adapters of torch_ops.h for one dispatch key; used by
// register_cpu.cpp and register_cuda.cpp (the kernels pick the backend from
// the tensors' device, so both keys share the adapters).
#pragma once

#include <torch/library.h>

#include "bindings/torch_ops.h"

namespace obsaug::bindings {

inline void register_backend(torch::Library& m) {
  m.impl("augment", &augment);
  m.impl("augment_", &augment_);
  m.impl("gather_augment", &gather_augment);
  m.impl("shift", &shift);
  m.impl("counted_shift", &counted_shift);
  m.impl("crop", &crop);
  m.impl("overlay", &overlay);
  m.impl("overlay_", &overlay_);
  m.impl("augment_out", &augment_out);
  m.impl("gather_augment_out", &gather_augment_out);
  m.impl("shift_out", &shift_out);
  m.impl("crop_out", &crop_out);
  m.impl("overlay_out", &overlay_out);
  for (const OpSchema& op : op_schemas()) {
    if (!declared_from_schema(op)) continue;
    m.impl(op.name.c_str(), torch::CppFunction::makeFromBoxedFunction<&run_single_op>());
    m.impl((op.name + "_out").c_str(), torch::CppFunction::makeFromBoxedFunction<&run_single_op>());
  }
}

}  // namespace obsaug::bindings
