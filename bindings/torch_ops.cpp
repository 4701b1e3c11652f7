// The obsaug op schemas (torch.ops.obsaug.*), each with its Autograd kernel
// (bindings/grad_refusal.h). Backends register their kernels in
// register_cpu.cpp and register_cuda.cpp; the fake kernels that let
// torch.compile trace the ops live in python/obsaug/ops.py.
#include "bindings/torch_ops.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "bindings/grad_refusal.h"
#include "kernels/augment.h"
#include "kernels/name_table.h"
#include "kernels/tensor_text.h"

namespace obsaug::bindings {

at::Tensor augment(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                   const std::string& pipeline, int64_t seed, int64_t step,
                   std::optional<at::ScalarType> out_dtype, double scale, double bias,
                   int64_t frame_channels) {
  return ops::augment(obs, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
                      static_cast<uint64_t>(step), ops::OutputOptions{out_dtype, scale, bias},
                      frame_channels);
}

void augment_(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
              const std::string& pipeline, int64_t seed, int64_t step, int64_t frame_channels) {
  ops::augment_(obs, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
                static_cast<uint64_t>(step), frame_channels);
}

at::Tensor gather_augment(const at::Tensor& storage, const at::Tensor& indices,
                          const std::optional<at::Tensor>& pool, const std::string& pipeline,
                          int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                          double scale, double bias, const std::optional<at::Tensor>& sample_ids) {
  return ops::gather_augment(storage, indices, pool, parse_pipeline(pipeline),
                             static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
                             ops::OutputOptions{out_dtype, scale, bias}, /*check_indices=*/true,
                             sample_ids);
}

void augment_out(const at::Tensor& obs, const std::optional<at::Tensor>& pool,
                 const std::string& pipeline, int64_t seed, int64_t step,
                 std::optional<at::ScalarType> out_dtype, double scale, double bias,
                 int64_t frame_channels, const at::Tensor& out) {
  ops::augment(obs, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
               static_cast<uint64_t>(step), ops::OutputOptions{out_dtype, scale, bias, out},
               frame_channels);
}

void gather_augment_out(const at::Tensor& storage, const at::Tensor& indices,
                        const std::optional<at::Tensor>& pool, const std::string& pipeline,
                        int64_t seed, int64_t step, std::optional<at::ScalarType> out_dtype,
                        double scale, double bias, const std::optional<at::Tensor>& sample_ids,
                        const at::Tensor& out) {
  ops::gather_augment(storage, indices, pool, parse_pipeline(pipeline), static_cast<uint64_t>(seed),
                      static_cast<uint64_t>(step), ops::OutputOptions{out_dtype, scale, bias, out},
                      /*check_indices=*/true, sample_ids);
}

at::Tensor shift(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
                 const std::string& padding, int64_t op_index) {
  return ops::shift(obs, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), pad, padding,
                    op_index);
}

void shift_out(const at::Tensor& obs, int64_t seed, int64_t step, int64_t pad,
               const std::string& padding, int64_t op_index, const at::Tensor& out) {
  ops::shift(obs, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), pad, padding, op_index,
             out);
}

at::Tensor counted_shift(const at::Tensor& obs, const at::Tensor& step, int64_t seed, int64_t pad) {
  TORCH_CHECK_VALUE(step.defined() && step.device().is_cpu() && step.scalar_type() == at::kLong &&
                        step.dim() == 0,
                    "counted_shift: step must be the CPU int64 scalar tensor that counts the "
                    "calls, got ",
                    step.defined() ? describe(step) : std::string("an undefined tensor"));
  int64_t* counter = step.data_ptr<int64_t>();
  // The count is taken atomically (calls from several threads each get their
  // own step) and only once the call's checks pass: a rejected input leaves it.
  const ops::Step next = ops::Step::taken_by([counter] {
    return static_cast<uint64_t>(__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED));
  });
  return ops::augment(obs, std::nullopt, {OpSpec::shift(pad, "replicate")},
                      static_cast<uint64_t>(seed), next);
}

namespace {

at::Tensor checked_crop(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size,
                        bool center, int64_t op_index, const at::Tensor& out) {
  TORCH_CHECK_VALUE(size.size() == 1 || size.size() == 2, "crop: size must be N or (H, W), got ",
                    size);
  return ops::crop(obs, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), size.front(),
                   size.back(), center, op_index, out);
}

}  // namespace

at::Tensor crop(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size,
                bool center, int64_t op_index) {
  return checked_crop(obs, seed, step, size, center, op_index, {});
}

void crop_out(const at::Tensor& obs, int64_t seed, int64_t step, at::IntArrayRef size, bool center,
              int64_t op_index, const at::Tensor& out) {
  checked_crop(obs, seed, step, size, center, op_index, out);
}

at::Tensor overlay(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                   double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
                   bool distinct) {
  return ops::overlay(obs, pool, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), alpha,
                      alpha_max, per_frame, op_index, {}, distinct);
}

void overlay_out(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
                 double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
                 bool distinct, const at::Tensor& out) {
  ops::overlay(obs, pool, static_cast<uint64_t>(seed), static_cast<uint64_t>(step), alpha,
               alpha_max, per_frame, op_index, out, distinct);
}

void overlay_(const at::Tensor& obs, const at::Tensor& pool, int64_t seed, int64_t step,
              double alpha, std::optional<double> alpha_max, bool per_frame, int64_t op_index,
              bool distinct) {
  ops::augment_(obs, pool,
                {OpSpec::overlay(alpha, alpha_max, per_frame, distinct).at_index(op_index)},
                static_cast<uint64_t>(seed), static_cast<uint64_t>(step));
}

bool declared_from_schema(const OpSchema& op) { return in_second_family(op.kind); }

namespace {

// A default as the torch.library schema language writes it.
std::string schema_default(const KeySpec& key) {
  if (const auto* i = std::get_if<int64_t>(&key.default_value)) return std::to_string(*i);
  if (const auto* f = std::get_if<double>(&key.default_value)) {
    const std::string text = format_number(*f);
    return text.find_first_of(".e") == std::string::npos ? text + ".0" : text;
  }
  if (const auto* b = std::get_if<bool>(&key.default_value)) return *b ? "True" : "False";
  if (const auto* s = std::get_if<std::string>(&key.default_value)) return "\"" + *s + "\"";
  return "";
}

constexpr NamedValue<KeyType> kSchemaTypes[] = {{KeyType::kInt, "int"},
                                                {KeyType::kFloat, "float"},
                                                {KeyType::kBool, "bool"},
                                                {KeyType::kEnum, "str"},
                                                {KeyType::kSize, "int[]"}};

// An argument of the boxed call as the value of `key`.
KeyValue key_value(const KeySpec& key, const c10::IValue& value, const std::string& op) {
  if (key.type == KeyType::kInt) return value.toInt();
  if (key.type == KeyType::kFloat) return value.toDouble();
  if (key.type == KeyType::kBool) return value.toBool();
  if (key.type == KeyType::kEnum) return value.toStringRef();
  const std::vector<int64_t> size = value.toIntVector();
  TORCH_CHECK_VALUE(size.size() == 1 || size.size() == 2, op, ": ", key.name,
                    " must be N or (H, W), got ", size.size(), " values");
  return FrameSize{size.front(), size.back()};
}

// The op's keys other than `index` (which the schema calls op_index).
std::vector<const KeySpec*> own_keys(const OpSchema& op) {
  std::vector<const KeySpec*> keys;
  for (const KeySpec& key : op.keys)
    if (key.name != "index") keys.push_back(&key);
  return keys;
}

}  // namespace

std::string single_op_declaration(const OpSchema& op, bool out_form) {
  std::string out = op.name + (out_form ? "_out" : "") + "(Tensor obs, SymInt seed, SymInt step";
  for (const KeySpec* key : own_keys(op)) {
    out += std::string(", ") + name_of(kSchemaTypes, key->type, "?") + " " + key->name;
    if (!key->required) out += "=" + schema_default(*key);
  }
  return out + ", int op_index=0, int frame_channels=0" +
         (out_form ? ", *, Tensor(a!) out) -> ()" : ") -> Tensor");
}

void run_single_op(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const std::string& full_name = handle.schema().name();
  std::string name = full_name.substr(full_name.find("::") + 2);
  const OpSchema* schema = find_op_schema(name);
  const bool out_form = schema == nullptr && name.size() > 4 &&
                        name.compare(name.size() - 4, 4, "_out") == 0 &&
                        (schema = find_op_schema(name.substr(0, name.size() - 4))) != nullptr;
  TORCH_CHECK(schema != nullptr, "no obsaug op schema for ", full_name);
  const std::vector<const KeySpec*> keys = own_keys(*schema);
  // obs, seed, step, the keys, op_index, frame_channels[, out]
  const size_t n_args = 3 + keys.size() + 2 + (out_form ? 1 : 0);
  auto args = torch::jit::last(*stack, n_args);
  OpSpec spec(schema->kind);
  for (size_t i = 0; i < keys.size(); ++i)
    spec.set(keys[i]->name, key_value(*keys[i], args[3 + i], schema->name));
  spec.at_index(args[3 + keys.size()].toInt());
  const at::Tensor obs = args[0].toTensor();
  const uint64_t seed = static_cast<uint64_t>(args[1].toInt());
  const uint64_t step = static_cast<uint64_t>(args[2].toInt());
  ops::OutputOptions output;
  if (out_form) output.out = args[n_args - 1].toTensor();
  const int64_t frame_channels = args[3 + keys.size() + 1].toInt();
  const at::Tensor result =
      ops::augment(obs, std::nullopt, {spec}, seed, step, output, frame_channels);
  torch::jit::drop(*stack, n_args);
  if (!out_form) torch::jit::push(*stack, result);
}

}  // namespace obsaug::bindings

namespace {

// Declares the op and registers its Autograd kernel, which refuses inputs
// that require grad, and for an op that writes an argument (Tensor(a!)) its
// ADInplaceOrView kernel, which bumps that argument's version
// (bindings/grad_refusal.h).
void define(torch::Library& m, const std::string& schema) {
  m.def(schema.c_str());
  const std::string name = schema.substr(0, schema.find('('));
  m.impl(
      name.c_str(),
      torch::dispatch(
          c10::DispatchKey::Autograd,
          torch::CppFunction::makeFromBoxedFunction<&obsaug::bindings::refuse_grad_then_call>()));
  if (schema.find("(a!)") != std::string::npos) {
    m.impl(
        name.c_str(),
        torch::dispatch(
            c10::DispatchKey::ADInplaceOrView,
            torch::CppFunction::makeFromBoxedFunction<&obsaug::bindings::call_then_note_writes>()));
  }
}

}  // namespace

TORCH_LIBRARY(obsaug, m) {
  // The second family's single ops, declared from the op schema table.
  for (const obsaug::OpSchema& op : obsaug::op_schemas()) {
    if (!obsaug::bindings::declared_from_schema(op)) continue;
    define(m, obsaug::bindings::single_op_declaration(op, /*out_form=*/false));
    define(m, obsaug::bindings::single_op_declaration(op, /*out_form=*/true));
  }
  define(m,
         "augment(Tensor obs, Tensor? pool, str pipeline, SymInt seed, SymInt step, "
         "ScalarType? out_dtype=None, float scale=1.0, float bias=0.0, int frame_channels=0) "
         "-> Tensor");
  define(m,
         "gather_augment(Tensor storage, Tensor indices, Tensor? pool, str pipeline, SymInt seed, "
         "SymInt step, ScalarType? out_dtype=None, float scale=1.0, float bias=0.0, "
         "Tensor? sample_ids=None) -> Tensor");
  define(m,
         "augment_(Tensor(a!) obs, Tensor? pool, str pipeline, SymInt seed, SymInt step, "
         "int frame_channels=0) -> ()");
  // The out= forms: the functional form's arguments, then the caller's tensor.
  define(m,
         "augment_out(Tensor obs, Tensor? pool, str pipeline, SymInt seed, SymInt step, "
         "ScalarType? out_dtype=None, float scale=1.0, float bias=0.0, int frame_channels=0, *, "
         "Tensor(a!) out) -> ()");
  define(
      m,
      "gather_augment_out(Tensor storage, Tensor indices, Tensor? pool, str pipeline, SymInt seed, "
      "SymInt step, ScalarType? out_dtype=None, float scale=1.0, float bias=0.0, "
      "Tensor? sample_ids=None, *, Tensor(a!) out) -> ()");
  define(m,
         "shift_out(Tensor obs, SymInt seed, SymInt step, int pad=4, str padding=\"replicate\", "
         "int op_index=0, *, Tensor(a!) out) -> ()");
  define(m,
         "crop_out(Tensor obs, SymInt seed, SymInt step, int[] size, bool center=False, int "
         "op_index=0, "
         "*, Tensor(a!) out) -> ()");
  define(m,
         "overlay_out(Tensor obs, Tensor pool, SymInt seed, SymInt step, float alpha=0.5, "
         "float? alpha_max=None, bool per_frame=False, int op_index=0, bool distinct=False, *, "
         "Tensor(a!) out) -> ()");
  define(m,
         "shift(Tensor obs, SymInt seed, SymInt step, int pad=4, str padding=\"replicate\", "
         "int op_index=0) -> Tensor");
  // obsaug.nn.RandomShift: shift at the step the CPU int64 scalar `step`
  // holds, then advances it (a tensor, so torch.compile neither specialises
  // nor recompiles on it).
  define(m, "counted_shift(Tensor obs, Tensor(a!) step, int seed, int pad=4) -> Tensor");
  define(
      m,
      "crop(Tensor obs, SymInt seed, SymInt step, int[] size, bool center=False, int op_index=0) "
      "-> Tensor");
  define(m,
         "overlay(Tensor obs, Tensor pool, SymInt seed, SymInt step, float alpha=0.5, "
         "float? alpha_max=None, bool per_frame=False, int op_index=0, bool distinct=False) -> "
         "Tensor");
  define(m,
         "overlay_(Tensor(a!) obs, Tensor pool, SymInt seed, SymInt step, float alpha=0.5, "
         "float? alpha_max=None, bool per_frame=False, int op_index=0, bool distinct=False) -> "
         "()");
}
