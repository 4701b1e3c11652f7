// Tensors, shapes and dtypes as error messages print them, the way Python
// users write them: describe(t) -> "uint8 [2, 9, 84] on cpu",
// shape_text({3, 84, 84}) -> "[3, 84, 84]", dtype_name(at::kLong) -> "int64".
// Header-only; every C++ error message that names a tensor uses these.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/StringUtil.h>

#include <cstdint>
#include <string>

#include "kernels/name_table.h"

namespace obsaug {

// torch's Python name of a dtype (torch.uint8 -> "uint8"); c10's own name
// for the rare ones Python spells the same way c10 does not list here.
inline std::string dtype_name(at::ScalarType t) {
  static constexpr NamedValue<at::ScalarType> kNames[] = {{at::kByte, "uint8"},
                                                          {at::kChar, "int8"},
                                                          {at::kShort, "int16"},
                                                          {at::kInt, "int32"},
                                                          {at::kLong, "int64"},
                                                          {at::kHalf, "float16"},
                                                          {at::kBFloat16, "bfloat16"},
                                                          {at::kFloat, "float32"},
                                                          {at::kDouble, "float64"},
                                                          {at::kBool, "bool"},
                                                          {at::kComplexFloat, "complex64"},
                                                          {at::kComplexDouble, "complex128"}};
  const char* name = name_of(kNames, t);
  return name != nullptr ? name : c10::toString(t);
}

// "[2, 9, 84]"; "[]" for a scalar.
inline std::string shape_text(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// "uint8 [2, 9, 84] on cpu"; "None" for an undefined tensor. A symbolic
// side (a FakeTensor under torch.compile with dynamic shapes) prints as its symbol.
inline std::string describe(const at::Tensor& t) {
  if (!t.defined()) return "None";
  std::string shape = "[";
  const c10::SymIntArrayRef sizes = t.sym_sizes();
  for (size_t i = 0; i < sizes.size(); ++i) shape += (i ? ", " : "") + c10::str(sizes[i]);
  return dtype_name(t.scalar_type()) + " " + shape + "] on " + t.device().str();
}

}  // namespace obsaug
