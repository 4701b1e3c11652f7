#include "bindings/schema_bindings.h"

#include <c10/util/Exception.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor, at::ScalarType <-> torch

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/augment.h"
#include "kernels/input_checks.h"
#include "kernels/name_table.h"

namespace py = pybind11;

namespace obsaug::python {
namespace {

// The names op_schema() gives key types and frame effects.
constexpr NamedValue<KeyType> kTypeNames[] = {{KeyType::kInt, "int"},
                                              {KeyType::kFloat, "float"},
                                              {KeyType::kBool, "bool"},
                                              {KeyType::kEnum, "enum"},
                                              {KeyType::kSize, "size"}};
constexpr NamedValue<FrameEffect> kEffectNames[] = {{FrameEffect::kKeeps, "keeps"},
                                                    {FrameEffect::kCropsToSize, "crops_to_size"},
                                                    {FrameEffect::kGrowsToSize, "grows_to_size"}};

py::object to_python(const KeyValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return py::int_(*i);
  if (const auto* f = std::get_if<double>(&value)) return py::float_(*f);
  if (const auto* b = std::get_if<bool>(&value)) return py::bool_(*b);
  if (const auto* s = std::get_if<std::string>(&value)) return py::str(*s);
  if (const auto* z = std::get_if<FrameSize>(&value)) {
    py::list hw;
    hw.append(z->height);
    hw.append(z->width);
    return std::move(hw);
  }
  return py::none();
}

py::dict key_dict(const KeySpec& key) {
  py::dict d;
  d["type"] = name_of(kTypeNames, key.type, "?");
  d["default"] = to_python(key.default_value);
  d["optional"] = key.optional;
  d["required"] = key.required;
  d["range"] = key.range_text();
  d["default_text"] = key.default_text();
  switch (key.type) {
    case KeyType::kInt:
    case KeyType::kSize:
      if (key.min_key.empty())
        d["min"] = key.int_min;
      else
        d["min_key"] = key.min_key;
      d["max"] = key.int_max;
      break;
    case KeyType::kFloat:
      if (key.min_key.empty())
        d["min"] = key.float_min;
      else
        d["min_key"] = key.min_key;
      d["max"] = key.float_max;
      break;
    case KeyType::kEnum:
      d["choices"] = key.choices;
      break;
    case KeyType::kBool:
      break;
  }
  d["doc"] = key.doc;
  return d;
}

py::dict schema_dict() {
  py::dict ops;
  for (const OpSchema& op : op_schemas()) {
    py::dict keys;
    for (const KeySpec& key : op.keys) keys[py::str(key.name)] = key_dict(key);
    py::dict d;
    d["doc"] = op.doc;
    d["keys"] = keys;
    d["frame_size"] = name_of(kEffectNames, op.frame_effect, "?");
    d["size_key"] = op.size_key.empty() ? py::object(py::none()) : py::str(op.size_key);
    d["needs_square"] = op.needs_square;
    d["needs_pool"] = op.needs.pool;
    d["mixes_channels"] = op.needs.mixes_channels;
    d["neighbourhood_3x3"] = op.needs.neighbourhood_3x3;
    d["frame_reduction"] = op.needs.frame_reduction;
    ops[py::str(op.name)] = d;
  }
  return ops;
}

using Side = std::optional<int64_t>;

// frame_sizes on the text form; None stands for a side not known (symbolic).
std::vector<std::pair<Side, Side>> frame_sizes_of_text(const std::string& pipeline, Side height,
                                                       Side width) {
  std::vector<FrameSize> sizes;
  try {
    sizes = frame_sizes(parse_pipeline(pipeline), {height.value_or(FrameSize::kUnknownSide),
                                                   width.value_or(FrameSize::kUnknownSide)});
  } catch (const c10::ValueError& e) {
    throw py::value_error(e.what_without_backtrace());
  }
  const auto side = [](int64_t v) { return v == FrameSize::kUnknownSide ? Side() : Side(v); };
  std::vector<std::pair<Side, Side>> out;
  for (const FrameSize& s : sizes) out.emplace_back(side(s.height), side(s.width));
  return out;
}

// The fake kernels' input checks: the eager ops' own (kernels/input_checks.h).
void check_augment_inputs(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                          const std::string& pipeline, std::optional<at::ScalarType> out_dtype,
                          double scale, double bias, int64_t frame_channels) {
  ops::check_augment_inputs(obs, pool, parse_pipeline(pipeline),
                            ops::OutputOptions{out_dtype, scale, bias}, ops::Devices::kOrMeta,
                            frame_channels);
}

void check_gather_inputs(const at::Tensor& storage, const std::optional<at::Tensor>& pool,
                         const std::string& pipeline, std::optional<at::ScalarType> out_dtype,
                         double scale, double bias) {
  ops::check_gather_inputs(storage, pool, parse_pipeline(pipeline),
                           ops::OutputOptions{out_dtype, scale, bias}, ops::Devices::kOrMeta);
}

// The fake kernels' checks on inputs of concrete sizes: every check of the
// eager call before it reads an element (kernels/augment.h); the result's shape.
std::vector<int64_t> check_augment_call(const at::Tensor& obs,
                                        const std::optional<at::Tensor>& pool,
                                        const std::string& pipeline,
                                        std::optional<at::ScalarType> out_dtype, double scale,
                                        double bias, const std::optional<at::Tensor>& out,
                                        int64_t frame_channels) {
  return ops::check_augment_call(
      obs, pool, parse_pipeline(pipeline),
      ops::OutputOptions{out_dtype, scale, bias, out.value_or(at::Tensor())},
      ops::Devices::kOrMeta, frame_channels);
}

void check_augment_inplace_call(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                                const std::string& pipeline, int64_t frame_channels) {
  ops::check_augment_inplace_call(obs, pool, parse_pipeline(pipeline), ops::Devices::kOrMeta,
                                  frame_channels);
}

std::vector<int64_t> check_gather_call(const at::Tensor& storage, const at::Tensor& indices,
                                       const std::optional<at::Tensor>& pool,
                                       const std::string& pipeline,
                                       std::optional<at::ScalarType> out_dtype, double scale,
                                       double bias, const std::optional<at::Tensor>& sample_ids,
                                       const std::optional<at::Tensor>& out) {
  return ops::check_gather_call(
      storage, indices, pool, parse_pipeline(pipeline),
      ops::OutputOptions{out_dtype, scale, bias, out.value_or(at::Tensor())}, sample_ids,
      ops::Devices::kOrMeta);
}

}  // namespace

py::dict op_dict(const OpSpec& op) {
  py::dict d;
  d["op"] = op.schema().name;
  for (size_t i = 0; i < op.values().size(); ++i) {
    if (std::holds_alternative<std::monostate>(op.values()[i])) continue;
    d[py::str(op.schema().keys[i].name)] = to_python(op.values()[i]);
  }
  return d;
}

void bind_schema(py::module& m) {
  m.def("op_schema", &schema_dict,
        "Every op: {name: {doc, keys: {key: {type, default, optional, required, range, "
        "default_text, min/max/min_key/choices, doc}}, frame_size, size_key, needs_pool, "
        "mixes_channels, neighbourhood_3x3, frame_reduction}}");
  m.def("frame_sizes", &frame_sizes_of_text, py::arg("pipeline"), py::arg("height"),
        py::arg("width"),
        "Frame size (height, width) at each op's input and after the last op, for the text "
        "form `pipeline` on height x width frames; None for a side not known. Raises "
        "ValueError when an op's value is out of range or its size does not fit.");
  const char* inputs_doc =
      "The eager op's checks of dtypes, ranks, devices, the pool's presence and the output "
      "options (kernels/input_checks.h), and augment's of an explicit frame_channels, for the "
      "fake kernels: TypeError or ValueError with the eager op's message.";
  m.def("check_augment_inputs", &check_augment_inputs, py::arg("input"), py::arg("pool"),
        py::arg("pipeline"), py::arg("out_dtype"), py::arg("scale"), py::arg("bias"),
        py::arg("frame_channels"), inputs_doc);
  m.def("check_gather_inputs", &check_gather_inputs, py::arg("input"), py::arg("pool"),
        py::arg("pipeline"), py::arg("out_dtype"), py::arg("scale"), py::arg("bias"),
        inputs_doc);
  const char* call_doc =
      "Every check the eager call makes before it reads an element (kernels/augment.h), for "
      "the fake kernels on inputs of concrete sizes: TypeError or ValueError with the eager "
      "op's message. Returns the result's shape (the in-place form: None).";
  m.def("check_augment_call", &check_augment_call, py::arg("obs"), py::arg("pool"),
        py::arg("pipeline"), py::arg("out_dtype"), py::arg("scale"), py::arg("bias"),
        py::arg("out"), py::arg("frame_channels"), call_doc);
  m.def("check_augment_inplace_call", &check_augment_inplace_call, py::arg("obs"), py::arg("pool"),
        py::arg("pipeline"), py::arg("frame_channels"), call_doc);
  m.def("check_gather_call", &check_gather_call, py::arg("storage"), py::arg("indices"),
        py::arg("pool"), py::arg("pipeline"), py::arg("out_dtype"), py::arg("scale"),
        py::arg("bias"), py::arg("sample_ids"), py::arg("out"), call_doc);
}

}  // namespace obsaug::python
